"""The round skeleton every mode shares, and the training entry point.

A round: the executor ships the mode's round value to the round's
partitions, runs the mode's kernel over each block there and returns the
unmerged partial statistics (:mod:`sparklda.execution`); the skeleton
merges them (:meth:`TopicStats.merge_all`, the same for every mode), applies
the mode's update (:mod:`sparklda.modes`), records the round and, every
``eval_every`` rounds, scores the held-out documents. A mode is its round
state, kernel and update rule (:class:`sparklda.modes.Mode`), never a copy of
this loop. :class:`Training` is that round's sequence in steps (start or restore,
round, record, evaluate, checkpoint, finish); :func:`train` builds the mode and the
executor (:func:`make_executor`) and runs it. See docs/architecture.md, "The round".
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from .checkpoint import TrainingCheckpoints
from .corpus import Corpus
from .errors import ParamError
from .execution import (
    Executor,
    RoundOutput,
    ShardedExecutor,
    ShardedTopics,
    StatefulShardedExecutor,
    backend_of,
    driver_limits,
    evaluator_spec,
)
from .limits import check_model_memory, driver_need, format_bytes, placement_for
from .model import TopicModel
from .modes import MODES, Mode
from .params import SHARDED_ALGORITHMS, TrainParams
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
    executor : how rounds run (default: :func:`make_executor`: the executor of the
        corpus's backend, :func:`sparklda.execution.backend_of`).
    resume : continue from the newest checkpoint in ``params.checkpoint_dir`` (a
        fresh start when there is none; a checkpoint of another run is refused).
    """
    params.validate()
    if initial_topic_word is not None and initial_topic_word.shape != (corpus.vocab_size, params.k):
        raise ValueError(
            f"The initial model has shape {initial_topic_word.shape}; this corpus "
            f"needs ({corpus.vocab_size}, {params.k}) (vocabulary size, k)."
        )
    placement = resolve_placement(corpus, params)
    if placement != params.model_placement:
        params = replace(params, model_placement=placement)
    if isinstance(initial_topic_word, ShardedTopics) and (
        placement != "executors" or MODES[params.algorithm].stateful
    ):  # a stateful mode's warm start still reaches its initial states as a broadcast
        initial_topic_word = initial_topic_word.collect(what="The initial model (warm start)")
    check_model_memory(corpus.vocab_size, params.k, params.dtype, placement=placement)
    start = clock_start if clock_start is not None else time.perf_counter()
    mode = MODES[params.algorithm](corpus, params, initial_topic_word)
    if executor is None:
        executor = make_executor(corpus, params, mode)
    return Training(corpus, params, mode, executor, callbacks, start).run(resume)


def make_executor(corpus: Corpus, params: TrainParams, mode: Mode) -> Executor:
    """How ``mode``'s rounds run on ``corpus``: the executor of the corpus's backend
    (RDDs, or DataFrames for a corpus built on the DataFrame path), a stateful mode's
    states checkpointed every ``checkpoint_interval``."""
    if params.model_placement == "executors":
        if mode.stateful:
            return StatefulShardedExecutor(corpus, params.checkpoint_interval)
        return ShardedExecutor(corpus, params.checkpoint_interval)
    interval = params.checkpoint_interval if mode.stateful else 0
    return backend_of(corpus).executor(corpus, interval, params.combine)


def _round_rows(corpus: Corpus, params: TrainParams) -> int:
    """The most distinct terms a round ships under the driver placement: SCVB0's largest
    slice vocabulary when the corpus knows it (else a slice's first round ships every
    row), every term for the other modes."""
    if params.algorithm != "scvb0" or getattr(corpus, "slice_bitmaps", None) is None:
        return int(corpus.vocab_size)
    return max(len(corpus.slice_terms(s)) for s in range(int(corpus.n_slices)))


def check_placement(backend: str, params: TrainParams) -> str:
    """Why the executors cannot hold the model of a run on ``backend`` ("classic" or
    "dataframe") with ``params`` ("" when they can); a :class:`ParamError` when
    ``model_placement`` asks for them anyway (before the corpus is built)."""
    why_not = ""
    if backend != "classic":
        why_not = "the DataFrame backend (Spark Connect) keeps the model on the driver so far"
    elif params.algorithm not in SHARDED_ALGORITHMS:
        why_not = f"the {params.algorithm!r} algorithm keeps it on the driver so far"
    if params.model_placement == "executors" and why_not:
        raise ParamError(
            f"The 'model_placement' parameter is 'executors', but {why_not}; set it to "
            f"'driver' or 'auto'."
        )
    return why_not


def resolve_placement(corpus: Corpus, params: TrainParams) -> str:
    """Where the model lives: ``params.model_placement``, "auto" decided from the memory
    model (:func:`sparklda.limits.driver_need` against the driver's Python memory and
    JVM heap, logged with the figures); the driver placement that cannot fit, and
    "executors" where the executors cannot hold the model (the DataFrame backend, an
    algorithm without a sharded update), are refused (:class:`ParamError`)."""
    requested = params.model_placement
    why_not = check_placement(backend_of(corpus).name, params)
    need = driver_need(
        corpus.vocab_size, params.k, params.dtype, params.algorithm, _round_rows(corpus, params)
    )
    python, jvm = driver_limits(corpus)
    placement = placement_for(requested, need, python, jvm, not why_not, why_not)
    log.info(
        "model placement %s (asked: %s): the driver placement needs at least %s; the "
        "driver has %s of Python memory and a JVM heap of %s",
        placement,
        requested,
        need.describe(),
        "?" if python is None else format_bytes(python),
        "?" if jvm is None else format_bytes(jvm),
    )
    return placement


def open_checkpoints(
    params: TrainParams, corpus: Corpus, resume: bool
) -> TrainingCheckpoints | None:
    """The run's checkpoints in ``params.checkpoint_dir`` (None when it is not set; then
    ``resume`` is an error)."""
    if params.checkpoint_dir:
        checkpoints = TrainingCheckpoints(params, corpus, corpus.spark)
        checkpoints.check_target()
        return checkpoints
    if resume:
        raise ParamError(
            "Resuming needs the 'checkpoint_dir' parameter (the directory the "
            "interrupted run wrote its checkpoints to)."
        )
    return None


class Training:
    """One training run, step by step: :meth:`start` (fresh or from a checkpoint), then
    per round :meth:`round` (run, merge, update, record), :meth:`evaluate` every
    ``eval_every`` rounds, the callbacks, :meth:`checkpoint`; then :meth:`finish` (the
    model, its final evaluation and the report). :meth:`run` is that sequence."""

    def __init__(
        self,
        corpus: Corpus,
        params: TrainParams,
        mode: Mode,
        executor: Executor,
        callbacks: Sequence[Callback],
        start: float,
    ):
        self.corpus = corpus
        self.params = params
        self.mode = mode
        self.executor = executor
        self.callbacks = list(callbacks)
        self.start_time = start
        self.total_rounds = params.passes * mode.rounds_per_pass
        self.result = TrainResult(model=None)
        self.checkpoints: TrainingCheckpoints | None = None
        self.stopping: MinGainStopping | None = None
        self.eval_time = 0.0  # evaluation is excluded from the training clock
        self.first_round = 0
        self.rounds_done = 0
        self.stopped_by: str | None = None

    def run(self, resume: bool = False) -> TrainResult:
        """Train: start, the rounds until the last, a stop or the time budget, finish.
        Once started, the executor is closed however training ends; after an error the
        callbacks' ``on_train_end`` gets None and training's error is raised."""
        self.checkpoints = open_checkpoints(self.params, self.corpus, resume)
        self.log_plan()
        ended = False
        try:
            self.start(resume)
            for t in range(self.first_round, self.total_rounds):
                if self.out_of_time(t):
                    break
                row = self.round(t)
                self.record(t, row)
                if self.stopped_by is not None:
                    log.info("training stopped after round %d by %s", t + 1, self.stopped_by)
                    break
            self.finish()
            ended = True
        finally:
            if not ended:
                try:  # training failed: tell the callbacks, but raise training's error
                    _notify(self.callbacks, "on_train_end", None)
                except Exception:
                    log.exception("a callback's on_train_end failed after a training error")
            self.executor.close()
        return self.result

    def log_plan(self) -> None:
        log.info(
            "training %s: K=%d, %d rounds (%d per pass), %d training documents, %d tokens",
            self.params.algorithm,
            self.params.k,
            self.total_rounds,
            self.mode.rounds_per_pass,
            self.corpus.n_train_docs,
            self.corpus.n_train_tokens,
        )

    # -- start --------------------------------------------------------------
    def start(self, resume: bool) -> None:
        """Restore the newest checkpoint (with ``resume``), or start a stateful mode's
        block states; add early stopping; tell the callbacks the plan."""
        params, mode = self.params, self.mode
        restored = None
        if resume and self.checkpoints is not None:
            restored = self.checkpoints.restore(mode, self.executor)
        if restored is not None:
            self.first_round, history = restored
            self.result.rounds.extend(history.get("rounds", []))
            self.result.evaluations.extend(history.get("evaluations", []))
            self.rounds_done = self.first_round
        elif mode.stateful:
            out = self.executor.init_states(mode)
            mode.set_initial(_merge(out, params.k))
        if params.min_gain > 0:
            self.stopping = MinGainStopping(
                params.min_gain, params.patience, self.result.evaluations
            )
            self.callbacks.append(self.stopping)
        _notify(
            self.callbacks,
            "on_train_start",
            {
                "algorithm": params.algorithm,
                "k": params.k,
                "total_rounds": self.total_rounds,
                "rounds_per_pass": mode.rounds_per_pass,
                "first_round": self.first_round,
                "time_budget": params.time_budget,
                "training_documents": self.corpus.n_train_docs,
                "training_tokens": self.corpus.n_train_tokens,
            },
        )

    def training_seconds(self) -> float:
        """Seconds on the training clock (evaluations excluded)."""
        return time.perf_counter() - self.start_time - self.eval_time

    def out_of_time(self, t: int) -> bool:
        """Whether the time budget is spent before round ``t`` (the first always runs)."""
        budget = self.params.time_budget
        if not budget or t <= self.first_round or self.training_seconds() < budget:
            return False
        log.info("time budget of %.1f s reached after %d rounds", budget, t)
        self.stopped_by = "time_budget"
        return True

    # -- a round ------------------------------------------------------------
    def round(self, t: int) -> dict:
        """Round ``t``: the executor runs the mode's kernel on the round's blocks, the
        partial statistics are merged, the mode updates; returns the round's record."""
        mode = self.mode
        r0 = time.perf_counter()
        out = self.executor.run_round(mode, t)
        r1 = time.perf_counter()
        stats = _merge(out, self.params.k)
        r2 = time.perf_counter()
        info = mode.update(stats, t)
        r3 = time.perf_counter()
        tokens = float(stats.extra.get("tokens", 0.0))
        return {
            "round": t + 1,
            "passes": (t + 1) / mode.rounds_per_pass,
            "elapsed_s": r3 - self.start_time - self.eval_time,
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
            **self.executor.round_info(),
            **info,
        }

    def record(self, t: int, row: dict) -> None:
        """After round ``t``: evaluate when due (not after the last round: :meth:`finish`
        does), keep the record, tell the callbacks, checkpoint when due or stopping."""
        every = self.params.eval_every
        if every and (t + 1) % every == 0 and t + 1 < self.total_rounds:
            ev = self.evaluate(t, row["elapsed_s"])
            if ev is not None:
                self.eval_time += ev["eval_s"]
                row.update({k: ev[k] for k in ("heldout_loglik", "perplexity")})
                self.stopped_by = _notify(self.callbacks, "on_evaluation", ev) or self.stopped_by
        self.result.rounds.append(row)
        self.rounds_done = t + 1
        log.debug(  # sparklda.progress.Progress shows rounds to users
            "round %d/%d, %.2f passes, %.0f tokens/s, step %.4g, %.3f s",
            t + 1,
            self.total_rounds,
            row["passes"],
            row["tokens_per_s"],
            row.get("rho", float("nan")),
            row["round_s"],
        )
        self.stopped_by = _notify(self.callbacks, "on_round", row) or self.stopped_by
        self.checkpoint(t + 1)

    def checkpoint(self, rounds_done: int) -> None:
        """Save the driver state after ``rounds_done`` rounds when a checkpoint is due or
        training stops."""
        cp = self.checkpoints
        if cp is None or not (
            self.stopped_by is not None or cp.due(rounds_done, self.total_rounds)
        ):
            return
        history = {"rounds": self.result.rounds, "evaluations": self.result.evaluations}
        cp.save(rounds_done, self.mode, self.executor, history)

    # -- evaluation and the end -----------------------------------------------
    def evaluate(self, t: int, elapsed: float) -> dict | None:
        """Score the held-out documents against the model after round ``t`` (None when
        nothing is held out); the record joins the result's evaluations."""
        mode = self.mode
        t_eval = time.perf_counter()
        shards = mode.topic_word_shards()  # the model on the executors: scored there
        phi: np.ndarray | ShardedTopics = (
            shards.phi(mode.eta)
            if shards is not None
            else normalize_topics(mode.topic_word(), mode.eta)
        )
        params = self.params
        ltr = evaluator_spec(params.evaluator, params.particles, params.seed)
        score = self.executor.score(phi, mode.alpha, params.foldin_max_iter, ltr=ltr)
        if score is None:
            return None
        row = {
            "round": t + 1,
            "passes": (t + 1) / mode.rounds_per_pass,
            "elapsed_s": elapsed,
            "eval_s": time.perf_counter() - t_eval,
            **score.as_dict(),
            "evaluator": params.evaluator,
        }
        self.result.evaluations.append(row)
        log.info(
            "round %d (%.2f passes): held-out log-likelihood %.4f per token, perplexity %.1f",
            t + 1,
            row["passes"],
            score.loglik_per_token,
            score.perplexity,
        )
        return row

    def finish(self) -> None:
        """The model and its final evaluation, the report; remove the checkpoints unless
        kept; tell the callbacks."""
        params, mode, corpus = self.params, self.mode, self.corpus
        rounds_done = self.rounds_done
        train_seconds = self.training_seconds()
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
        result = self.result
        shards = mode.topic_word_shards()  # the model on the executors stays there
        tw: np.ndarray | ShardedTopics = (
            shards.persist(f"sparklda {mode.name} model")
            if shards is not None
            else mode.topic_word()
        )
        result.model = TopicModel(tw, mode.alpha, mode.eta, corpus.vocab, meta)
        if rounds_done > 0:
            ev = self.evaluate(rounds_done - 1, train_seconds)
            if ev is not None:
                _notify(self.callbacks, "on_evaluation", ev)
        cp = self.checkpoints
        result.report = {
            "train_seconds": train_seconds,
            "rounds": rounds_done,
            "stopped_by": self.stopped_by,
            "resumed_after_round": self.first_round or None,
            "corpus": corpus.report,
            "mode": {**mode.report(), **self.executor.report()},
            "priors": mode.priors.summary(),
            "checkpoints": cp.report() if cp else None,
            "early_stopping": self.stopping.report() if self.stopping else None,
        }
        if cp is not None and not params.keep_checkpoint:
            cp.remove()
        _notify(self.callbacks, "on_train_end", result)
