"""The round skeleton every mode shares, and the training entry point.

A round: the executor ships the mode's round value to the round's
partitions, runs the mode's kernel over each block there and returns the
unmerged partial statistics (:mod:`sparklda.execution`); the skeleton
merges them (:meth:`TopicStats.merge_all`, the same for every mode), applies
the mode's update (:mod:`sparklda.modes`), records the round and, every
``eval_every`` rounds, scores the held-out documents. A mode is its round
state, kernel and update rule (:class:`sparklda.modes.Mode`), never a copy of
this loop. See docs/architecture.md, "The round".
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from .checkpoint import TrainingCheckpoints
from .corpus import Corpus
from .errors import ParamError
from .execution import ClassicExecutor, Executor, RoundOutput
from .execution_df import DataFrameExecutor
from .limits import check_model_memory
from .model import TopicModel
from .modes import MODES
from .params import TrainParams
from .stats import TopicStats, normalize_topics

log = logging.getLogger("sparklda.training")


class Callback:
    """Hooks into training; subclass and override what you need.

    Each hook may return True to stop training after the current round (the
    model is still built and scored; the report's ``stopped_by`` names the
    callback: its ``stop_reason`` attribute when it has one, else its class name).
    """

    #: What ``TrainResult.report["stopped_by"]`` says when this callback stops training.
    stop_reason: str | None = None

    def on_build_start(self, what: str) -> None:
        """Before the corpus is built from the source described by ``what``."""
        return None

    def on_build_phase(self, phase: str, counts: dict) -> None:
        """While the corpus is built: a phase starts or ends
        (:data:`sparklda.corpus.BUILD_PHASES`, with the counts known at that point)."""
        return None

    def on_train_start(self, plan: dict) -> None:
        """Before the first round: ``plan`` has ``algorithm``, ``k``, ``total_rounds``,
        ``rounds_per_pass``, ``first_round`` (after a resume), ``time_budget``,
        ``training_documents`` and ``training_tokens``."""
        return None

    def on_train_end(self, result: TrainResult | None) -> None:
        """After training, with the result (its model, history and report), while the
        corpus is still cached; also after an error, with None."""
        return None

    def on_corpus(self, corpus: Corpus) -> bool | None:
        """After the corpus is built and cached (``corpus.report`` has its counts)."""
        return None

    def on_round(self, record: dict) -> bool | None:
        """After each round, with the round's record (see docs/architecture.md)."""
        return None

    def on_evaluation(self, record: dict) -> bool | None:
        """After each held-out evaluation, with its record."""
        return None


@dataclass
class TrainResult:
    model: TopicModel | None
    rounds: list = field(default_factory=list)
    evaluations: list = field(default_factory=list)
    report: dict = field(default_factory=dict)


def _timing_summary(stats: TopicStats) -> dict:
    out = {}
    for name, values in stats.timings.items():
        out[f"task_{name}_max_s"] = float(np.max(values))
        out[f"task_{name}_sum_s"] = float(np.sum(values))
    return out


def _merge(out: RoundOutput, k: int) -> TopicStats:
    return out.merged_stats(k)


class MinGainStopping(Callback):
    """Early stopping on the held-out score (``min_gain``, ``patience``).

    After each evaluation during training, the gain is the change of the
    held-out per-token log-likelihood since the previous evaluation divided
    by the passes between them (nats per token per pass). Training stops when
    ``patience`` consecutive gains are below ``min_gain``. ``gains`` keeps
    every gain seen, with its round.
    """

    stop_reason = "min_gain"

    def __init__(self, min_gain: float, patience: int = 1, history: Sequence[dict] = ()):
        self.min_gain = float(min_gain)
        self.patience = int(patience)
        self.gains: list[dict] = []
        self.below = 0
        self._last: dict | None = None
        for row in history:  # a resumed run continues from the evaluations it restored
            self.on_evaluation(row)

    def on_evaluation(self, record: dict) -> bool:
        last, self._last = self._last, record
        if last is None or record["passes"] <= last["passes"]:
            return False
        gain = (record["heldout_loglik"] - last["heldout_loglik"]) / (
            record["passes"] - last["passes"]
        )
        self.below = self.below + 1 if gain < self.min_gain else 0
        self.gains.append({"round": record["round"], "gain_per_pass": gain})
        return self.below >= self.patience

    def report(self) -> dict:
        return {"min_gain": self.min_gain, "patience": self.patience, "gains": self.gains}


def _notify(callbacks: Sequence[Callback], hook: str, arg) -> str | None:
    """Call ``hook`` on every callback that has it; the stop reason of the first that asked
    to stop (its ``stop_reason``, else its class name)."""
    stop = None
    for cb in callbacks:
        fn = getattr(cb, hook, None)
        if fn is not None and fn(arg) and stop is None:
            stop = getattr(cb, "stop_reason", None) or type(cb).__name__
    return stop


def train(
    corpus: Corpus,
    params: TrainParams,
    initial_topic_word=None,
    callbacks: Sequence[Callback] = (),
    clock_start: float | None = None,
    executor: Executor | None = None,
    resume: bool = False,
) -> TrainResult:
    """Train a model on ``corpus`` with ``params.algorithm``.

    Parameters
    ----------
    initial_topic_word : optional (V, K) statistics to start from (warm start).
    callbacks : :class:`Callback` objects told of each round and evaluation.
    clock_start : ``time.perf_counter()`` value the elapsed times are measured
        from (default: now); pass the start of corpus building to include it.
    executor : how rounds run (default: :class:`ClassicExecutor` on the corpus, or
        :class:`~sparklda.execution_df.DataFrameExecutor` on a DataFrame-path one).
    resume : continue from the newest checkpoint in ``params.checkpoint_dir`` (a
        fresh start when there is none; a checkpoint of another run is refused).
    """
    params.validate()
    if initial_topic_word is not None and initial_topic_word.shape != (corpus.vocab_size, params.k):
        raise ValueError(
            f"The initial model has shape {initial_topic_word.shape}; this corpus "
            f"needs ({corpus.vocab_size}, {params.k}) (vocabulary size, k)."
        )
    check_model_memory(corpus.vocab_size, params.k, params.dtype)
    start = clock_start if clock_start is not None else time.perf_counter()
    mode = MODES[params.algorithm](corpus, params, initial_topic_word)
    if executor is None:
        interval = params.checkpoint_interval if mode.stateful else 0
        if corpus.kind == "dataframe":
            executor = DataFrameExecutor(corpus, interval)
        else:
            executor = ClassicExecutor(corpus, interval, combine=params.combine)
    total_rounds = params.passes * mode.rounds_per_pass
    result = TrainResult(model=None)
    checkpoints = None
    if params.checkpoint_dir:
        checkpoints = TrainingCheckpoints(params, corpus, corpus.spark)
        checkpoints.check_target()
    elif resume:
        raise ParamError(
            "Resuming needs the 'checkpoint_dir' parameter (the directory the "
            "interrupted run wrote its checkpoints to)."
        )
    log.info(
        "training %s: K=%d, %d rounds (%d per pass), %d training documents, %d tokens",
        params.algorithm,
        params.k,
        total_rounds,
        mode.rounds_per_pass,
        corpus.n_train_docs,
        corpus.n_train_tokens,
    )

    def evaluate(t, elapsed):
        t_eval = time.perf_counter()
        phi = normalize_topics(mode.topic_word(), mode.eta)
        score = executor.score(phi, mode.alpha, params.foldin_max_iter)
        if score is None:
            return None
        row = {
            "round": t + 1,
            "passes": (t + 1) / mode.rounds_per_pass,
            "elapsed_s": elapsed,
            "eval_s": time.perf_counter() - t_eval,
            **score.as_dict(),
        }
        result.evaluations.append(row)
        log.info(
            "round %d (%.2f passes): held-out log-likelihood %.4f per token, perplexity %.1f",
            t + 1,
            row["passes"],
            score.loglik_per_token,
            score.perplexity,
        )
        return row

    eval_time = 0.0  # evaluation is excluded from the training clock
    stopped_by = None
    first_round = 0
    t = -1
    stopping = None
    ended = False
    try:
        restored = checkpoints.restore(mode, executor) if resume and checkpoints else None
        if restored is not None:
            first_round, history = restored
            result.rounds.extend(history.get("rounds", []))
            result.evaluations.extend(history.get("evaluations", []))
            t = first_round - 1
        elif mode.stateful:
            out = executor.init_states(mode)
            mode.set_initial(_merge(out, params.k))
        if params.min_gain > 0:
            stopping = MinGainStopping(params.min_gain, params.patience, result.evaluations)
            callbacks = [*callbacks, stopping]
        _notify(
            callbacks,
            "on_train_start",
            {
                "algorithm": params.algorithm,
                "k": params.k,
                "total_rounds": total_rounds,
                "rounds_per_pass": mode.rounds_per_pass,
                "first_round": first_round,
                "time_budget": params.time_budget,
                "training_documents": corpus.n_train_docs,
                "training_tokens": corpus.n_train_tokens,
            },
        )
        for t in range(first_round, total_rounds):
            if (
                params.time_budget
                and t > first_round
                and time.perf_counter() - start - eval_time >= params.time_budget
            ):
                log.info("time budget of %.1f s reached after %d rounds", params.time_budget, t)
                stopped_by = "time_budget"
                t -= 1
                break
            r0 = time.perf_counter()
            out = executor.run_round(mode, t)
            r1 = time.perf_counter()
            stats = _merge(out, params.k)
            r2 = time.perf_counter()
            info = mode.update(stats, t)
            r3 = time.perf_counter()
            tokens = float(stats.extra.get("tokens", 0.0))
            row = {
                "round": t + 1,
                "passes": (t + 1) / mode.rounds_per_pass,
                "elapsed_s": r3 - start - eval_time,
                "round_s": r3 - r0,
                **out.timings,
                "merge_s": r2 - r1,
                "update_s": r3 - r2,
                "tokens": tokens,
                "tokens_per_s": tokens / max(r3 - r0, 1e-9),
                "tasks": out.tasks or len(out.parts),
                "combine": out.combine,
                "shipped_bytes": out.shipped_bytes,
                "driver_bytes": out.driver_bytes,
                "merged_bytes": stats.nbytes,
                **_timing_summary(stats),
                **executor.round_info(),
                **info,
            }
            if params.eval_every and (t + 1) % params.eval_every == 0 and t + 1 < total_rounds:
                ev = evaluate(t, row["elapsed_s"])
                if ev is not None:
                    eval_time += ev["eval_s"]
                    row.update({k: ev[k] for k in ("heldout_loglik", "perplexity")})
                    stopped_by = _notify(callbacks, "on_evaluation", ev) or stopped_by
            result.rounds.append(row)
            log.debug(  # sparklda.progress.Progress shows rounds to users
                "round %d/%d, %.2f passes, %.0f tokens/s, step %.4g, %.3f s",
                t + 1,
                total_rounds,
                row["passes"],
                row["tokens_per_s"],
                info.get("rho", float("nan")),
                row["round_s"],
            )
            stopped_by = _notify(callbacks, "on_round", row) or stopped_by
            if checkpoints is not None and (
                stopped_by is not None or checkpoints.due(t + 1, total_rounds)
            ):
                checkpoints.save(
                    t + 1,
                    mode,
                    executor,
                    {"rounds": result.rounds, "evaluations": result.evaluations},
                )
            if stopped_by is not None:
                log.info("training stopped after round %d by %s", t + 1, stopped_by)
                break
        rounds_done = t + 1
        train_seconds = time.perf_counter() - start - eval_time
        meta = {
            "mode": params.algorithm,
            "rounds": rounds_done,
            "passes": rounds_done / mode.rounds_per_pass,
            "tokens_seen": mode.tokens_seen,
            "documents_seen": mode.docs_seen,
            "train_seconds": train_seconds,
            "params": params.to_dict(),
            "corpus": corpus.report,
        }
        model = TopicModel(mode.topic_word(), mode.alpha, mode.eta, corpus.vocab, meta)
        result.model = model
        if rounds_done > 0:
            ev = evaluate(rounds_done - 1, train_seconds)
            if ev is not None:
                _notify(callbacks, "on_evaluation", ev)
        result.report = {
            "train_seconds": train_seconds,
            "rounds": rounds_done,
            "stopped_by": stopped_by,
            "resumed_after_round": first_round or None,
            "corpus": corpus.report,
            "mode": {**mode.report(), **executor.report()},
            "checkpoints": checkpoints.report() if checkpoints else None,
            "early_stopping": stopping.report() if stopping else None,
        }
        if checkpoints is not None and not params.keep_checkpoint:
            checkpoints.remove()
        _notify(callbacks, "on_train_end", result)
        ended = True
    finally:
        if not ended:
            try:  # training failed: tell the callbacks, but raise training's error
                _notify(callbacks, "on_train_end", None)
            except Exception:
                log.exception("a callback's on_train_end failed after a training error")
        executor.close()
    return result
