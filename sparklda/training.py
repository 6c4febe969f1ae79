"""The round skeleton every mode shares, and the training entry point.

A round: the driver broadcasts the mode's state for the round; tasks run the
mode's kernel over the round's partitions (only those: the corpus is laid out
by minibatch slice, see :mod:`sparklda.corpus`) and return sparse
:class:`~sparklda.stats.TopicStats`; the driver merges them, applies the
mode's update, destroys the broadcast, logs progress and, every
``eval_every`` rounds, scores the held-out documents. A mode is its kernel
plus its update rule (:class:`Mode`), never a copy of this loop.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field

import numpy as np

from .corpus import Corpus
from .evaluation import completion_loglik
from .params import TrainParams
from .stats import TopicStats

log = logging.getLogger("sparklda.training")


class Mode:
    """One inference algorithm: its state, kernel task and driver update.

    Subclasses set ``name`` and implement :meth:`broadcast_value`,
    :meth:`make_task`, :meth:`update` and :meth:`topic_word`. The task
    returned by :meth:`make_task` must be built from plain values (arrays,
    numbers, the broadcast), never ``self``, so closures stay small.
    """

    name = "base"

    def __init__(self, corpus: Corpus, params: TrainParams, initial_topic_word=None):
        self.corpus = corpus
        self.params = params
        self.dtype = np.dtype(params.dtype)
        self.tokens_seen = 0.0
        self.docs_seen = 0

    # -- the round plan -------------------------------------------------
    @property
    def rounds_per_pass(self) -> int:
        return self.corpus.n_slices

    def slice_of_round(self, t: int) -> int:
        """Slices are visited in a seeded random order, new each pass."""
        s = self.corpus.n_slices
        order = np.random.default_rng([self.params.seed, 17, t // s]).permutation(s)
        return int(order[t % s])

    def round_partitions(self, t: int) -> list[int]:
        return self.corpus.slice_partitions(self.slice_of_round(t))

    # -- per mode -------------------------------------------------------
    def broadcast_value(self, t: int):
        raise NotImplementedError

    def make_task(self, bc, t: int):
        raise NotImplementedError

    def execute(self, sc, bc, t: int) -> list:
        """Run the round's tasks on the round's partitions only."""
        return sc.runJob(self.corpus.train, self.make_task(bc, t), self.round_partitions(t))

    def update(self, stats: TopicStats, t: int) -> dict:
        raise NotImplementedError

    def topic_word(self) -> np.ndarray:
        """(V, K) topic-word statistics N^Φ such that φ̂ ∝ N^Φ + η per topic."""
        raise NotImplementedError

    def release(self, bc, t: int):
        """Free round ``t``'s broadcast once the round is done (default: destroy it).

        A mode whose cached state still depends on the broadcast through RDD
        lineage (CVB0's γ blocks until their next checkpoint) may instead
        unpersist it now and destroy it once that lineage is cut, so a lost
        partition can still be recomputed.
        """
        bc.destroy()

    def report(self) -> dict:
        return {}

    def finish(self):
        """Release cached state of the mode (called once training ends)."""


MODES: dict[str, type] = {}


def register(cls):
    MODES[cls.name] = cls
    return cls


@dataclass
class TrainResult:
    model: object
    rounds: list = field(default_factory=list)
    evaluations: list = field(default_factory=list)
    report: dict = field(default_factory=dict)


def _timing_summary(stats: TopicStats) -> dict:
    out = {}
    for name, values in stats.timings.items():
        out[f"task_{name}_max_s"] = float(np.max(values))
        out[f"task_{name}_sum_s"] = float(np.sum(values))
    return out


def train(corpus: Corpus, params: TrainParams, initial_topic_word=None, on_round=None,
          clock_start: float | None = None, model_metadata: dict | None = None) -> TrainResult:
    """Train a model on ``corpus`` with ``params.algorithm``.

    Parameters
    ----------
    initial_topic_word : optional (V, K) statistics to start from (warm start).
    on_round : optional callable receiving each round's record (a dict).
    clock_start : ``time.perf_counter()`` value the elapsed times are measured
        from (default: now); pass the start of corpus building to include it.
    """
    from . import modes  # noqa: F401  (registers the modes)
    from .model import TopicModel

    params.validate()
    if params.k > 0 and initial_topic_word is not None:
        if initial_topic_word.shape != (corpus.vocab_size, params.k):
            raise ValueError(f"The initial model has shape {initial_topic_word.shape}; this corpus "
                             f"needs ({corpus.vocab_size}, {params.k}) (vocabulary size, k).")
    sc = corpus.train.context
    start = clock_start if clock_start is not None else time.perf_counter()
    mode = MODES[params.algorithm](corpus, params, initial_topic_word)
    total_rounds = params.passes * mode.rounds_per_pass
    result = TrainResult(model=None)
    log.info("training %s: K=%d, %d rounds (%d per pass), %d training documents, %d tokens",
             params.algorithm, params.k, total_rounds, mode.rounds_per_pass,
             corpus.n_train_docs, corpus.n_train_tokens)

    def evaluate(t, elapsed):
        if corpus.heldout is None:
            return None
        t_eval = time.perf_counter()
        phi = TopicModel.topics_from_stats(mode.topic_word(), params.eta)
        score = completion_loglik(corpus.heldout, phi, params.alpha, params.foldin_max_iter)
        row = {"round": t + 1, "passes": (t + 1) / mode.rounds_per_pass, "elapsed_s": elapsed,
               "eval_s": time.perf_counter() - t_eval, **score.as_dict()}
        result.evaluations.append(row)
        log.info("round %d (%.2f passes): held-out log-likelihood %.4f per token, perplexity "
                 "%.1f", t + 1, row["passes"], score.loglik_per_token, score.perplexity)
        return row

    eval_time = 0.0  # evaluation is excluded from the training clock
    t = -1
    try:
        for t in range(total_rounds):
            if (params.time_budget and t > 0
                    and time.perf_counter() - start - eval_time >= params.time_budget):
                log.info("time budget of %.1f s reached after %d rounds", params.time_budget, t)
                t -= 1
                break
            r0 = time.perf_counter()
            bc = sc.broadcast(mode.broadcast_value(t))
            r1 = time.perf_counter()
            parts = mode.execute(sc, bc, t)
            r2 = time.perf_counter()
            stats = (TopicStats.merge_all(parts) if parts else
                     TopicStats(np.zeros(0, np.int32), np.zeros((0, params.k))))
            r3 = time.perf_counter()
            info = mode.update(stats, t)
            r4 = time.perf_counter()
            mode.release(bc, t)
            r5 = time.perf_counter()
            tokens = float(stats.extra.get("tokens", 0.0))
            row = {"round": t + 1, "passes": (t + 1) / mode.rounds_per_pass,
                   "elapsed_s": r5 - start - eval_time, "round_s": r5 - r0,
                   "broadcast_s": r1 - r0, "job_s": r2 - r1, "merge_s": r3 - r2,
                   "update_s": r4 - r3, "destroy_s": r5 - r4, "tokens": tokens,
                   "tokens_per_s": tokens / max(r5 - r0, 1e-9), "tasks": len(parts),
                   **_timing_summary(stats), **info}
            if params.eval_every and (t + 1) % params.eval_every == 0 and t + 1 < total_rounds:
                ev = evaluate(t, row["elapsed_s"])
                if ev is not None:
                    eval_time += ev["eval_s"]
                    row.update({k: ev[k] for k in ("heldout_loglik", "perplexity")})
            result.rounds.append(row)
            log.info("round %d/%d, %.2f passes, %.0f tokens/s, step %.4g, %.3f s",
                     t + 1, total_rounds, row["passes"], row["tokens_per_s"],
                     info.get("rho", float("nan")), row["round_s"])
            if on_round is not None:
                on_round(row)
        rounds_done = t + 1
        train_seconds = time.perf_counter() - start - eval_time
        meta = {
            "mode": params.algorithm, "rounds": rounds_done,
            "passes": rounds_done / mode.rounds_per_pass, "tokens_seen": mode.tokens_seen,
            "documents_seen": mode.docs_seen, "train_seconds": train_seconds,
            "params": params.to_dict(), "corpus": corpus.report, **(model_metadata or {}),
        }
        model = TopicModel(mode.topic_word(), params.alpha, params.eta, corpus.vocab, meta)
        result.model = model
        if corpus.heldout is not None and rounds_done > 0:
            evaluate(rounds_done - 1, train_seconds)
        result.report = {"train_seconds": train_seconds, "rounds": rounds_done,
                         "corpus": corpus.report, "mode": mode.report()}
    finally:
        mode.finish()
    return result
