"""Collapsed Gibbs sampling on Spark, distributed as AD-LDA (Newman, Asuncion, Smyth &
Welling 2009; lecture notes 003, section 3.2, Eq. 52), with SparseLDA's sampler
(Yao, Mimno & McCallum 2009; :mod:`sparklda.kernels.gibbs`).

State. Each cached block keeps one topic per token occurrence (a pair with count c
carries c of them, in pair order), uint16 when K ≤ 65535, else int32: the mode
contract's block state (:mod:`sparklda.modes.base`), checkpointed with the blocks by
the executor like CVB0's γ. The driver keeps the exact counts N^Φ (V×K) and N^Z (with
``model_placement="executors"``, N^Z only: the counts, and their sum over the averaged
sweeps, live in term shards, :mod:`sparklda.modes.sharded_rows`).

A round is one sweep over every partition (``rounds_per_pass`` = 1, so ``passes``
counts sweeps):

1. the driver ships N^Φ (uint16 or int32 while the counts fit, else float64) and N^Z as they
   stood after the previous sweep (and the seeded topics' pseudo-counts);
2. each block copies its assignments and sweeps every token against those counts plus
   its own changes (AD-LDA): its rows of N^Φ start at the round's values, which
   already count the block's own tokens, so removing a token never goes below 0;
3. the statistics of a block are its word-topic counts (its terms' rows, exact, from
   the new assignments), and the merge of every block's rows is the new global N^Φ:
   no deltas, no drift.

The draws of a sweep are keyed by (seed, round, document) (:class:`Stream`
``GIBBS_SWEEP`` + round), so the same seed gives the same model whatever task or
retry runs a block.

Start: a uniformly random topic per token, keyed by (seed, document); a warm start
draws each token from the initial model's φ̂ row times its document's topics so far
(:func:`sparklda.kernels.gibbs.gibbs_init`). Seeded topics add their pseudo-counts to
the N^Φ rows and N^Z the kernel reads, as in CVB0.

Estimates. ``topic_word()`` is N^Φ averaged over the last ``gibbs_average`` sweeps of
the run (from round ``passes − gibbs_average``; before that, and in the evaluations
before it, the current counts), so φ̂ = (N̄^Φ + η) / (N̄^Z + Wη). A learned α is
Minka's fixed point on the sampled document-topic counts N^Θ after the burn-in (the
counts are whole numbers here, so the fixed point applies as derived), one step every
:data:`ALPHA_INTERVAL` sweeps on the statistics of those sweeps summed, α held between
steps (as Mallet's optimisation interval): one sweep's sample is a noisy reading, and a
step per sweep let the sampler chase it (docs/benchmarks/findings.md, "Learned priors on
four corpora"); a learned η is Minka's fixed point on N^Φ read as whole counts
(``expected=False``: the collapsed variational modes' expected-count reading would weigh
each count-1 cell by P(N ≥ 1) = 0.63 and learn too small an η).
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import numpy as np

from ..block import DocBlock
from ..execution.topics import ShardedTopics
from ..kernels.gibbs import (
    assignment_dtype,
    count_refresh,
    gibbs_init,
    gibbs_sweep,
    shipped_counts,
    topic_counts,
)
from ..kernels.priors import doc_prior_stats
from ..kernels.random import Stream, doc_keys
from ..stats import normalize_topics
from .base import StatefulMode
from .priors import split_extras, with_extras
from .seeds import add_seed_rows
from .sharded_rows import ShardedRows, shard_summary, topic_rows

log = logging.getLogger("sparklda.modes.gibbs")

#: The block state: one topic per token occurrence (uint16 or int32).
Assignments = np.ndarray
#: A block of fewer tokens sends its counts as float32 (every count below 2^24: exact).
EXACT_FLOAT32 = 2**24
#: A learned α takes one Minka step every this many sweeps after the burn-in, on their
#: pooled statistics (all read at the same α).
ALPHA_INTERVAL = 5


# --------------------------------------------------------------------------
# Per-block functions (built from plain values, never from the mode)


def init_state_fn(seed, k, alpha):
    """``init(phi, block) -> z``: random topics, or drawn from a warm start's φ̂."""

    def run(phi, block: DocBlock):
        keys = doc_keys(seed, Stream.GIBBS_INIT, block.doc_ids)
        rows = None if phi is None else phi[block.terms]
        return gibbs_init(block.indptr, block.local, block.counts, k, keys, rows, alpha)

    return run


def _sweep(block: DocBlock, z, rows, nz, seed_terms, seed_rows, seed, t, alpha, eta, w_eta):
    """A block's new assignments after round ``t``'s sweep against its terms' ``rows`` of
    N^Φ as shipped (uint16, int32 or float64)."""
    z = np.array(z, copy=True)
    if block.nnz:
        # the round's whole counts as int32 (the sweep waits on memory: the fewer
        # bytes the better), float64 with pseudo-counts or counts near int32's end
        if rows.dtype == np.uint16:  # shipped small: widened for the block's changes
            rows = rows.astype(np.int32)
        if len(seed_terms) or rows.dtype != np.int32 or rows.max() >= 2**31 - 1 - len(z):
            rows = np.ascontiguousarray(rows, dtype=np.float64)
            add_seed_rows(rows, block.terms, seed_terms, seed_rows)
        keys = doc_keys(seed, Stream.GIBBS_SWEEP + t, block.doc_ids)
        gibbs_sweep(
            block.indptr,
            block.local,
            block.counts,
            z,
            rows,
            np.array(nz, dtype=np.float64),
            alpha,
            eta,
            w_eta,
            keys,
        )
    return z


def sweep_fn(seed, t, alpha, eta, w_eta):
    """Round ``t``'s sweep of a block: a new assignment array (the cached one is kept)."""

    def run(value, block: DocBlock, z):
        nphi, nz, seed_terms, seed_rows = value
        rows = nphi[block.terms] if block.nnz else None
        return _sweep(block, z, rows, nz, seed_terms, seed_rows, seed, t, alpha, eta, w_eta)

    return run


def served_sweep_fn(seed, t, alpha, eta, w_eta):
    """:func:`sweep_fn` with the model on the executors: the round value is ``(terms,
    rows, N^Z, seed terms, seed rows)``, ``rows`` the block's terms' counts as its shards
    served them (:func:`served_counts`)."""

    def run(value, block: DocBlock, z):
        _, rows, nz, seed_terms, seed_rows = value
        return _sweep(block, z, rows, nz, seed_terms, seed_rows, seed, t, alpha, eta, w_eta)

    return run


def served_counts(k: int, top: float) -> Callable:
    """``fetch(base, idx, terms)``: a shard's counts of its rows ``idx`` shipped as the
    driver placement ships the whole N^Φ (:func:`~sparklda.kernels.gibbs.shipped_counts`
    given the largest count ``top``, or a count in its dtype's range)."""

    def run(base, idx, terms):
        return shipped_counts(base[idx, :k], top)

    return run


def count_shard(k: int, with_extras: bool, average: bool) -> Callable:
    """``update(old, terms, rows) -> (new rows, extras)`` of one term shard: its counts
    become the round's merged counts (zero where no block has the term), and with
    ``average`` their sum over the averaged sweeps, K more columns, adds them (from zero
    when ``old`` has none). The extras: the counts' column sums ``row_totals``, a learned
    α's statistics ``prior_extras``, Σ|ΔN^Φ| ``nphi_change`` (when ``old`` has counts),
    and whether the shard's largest count leaves uint16 (``above_uint16``) or int32
    (``above_int32``), which decide the next round's shipped dtype. Every sum is of
    whole numbers: exact, the driver placement's figures."""

    def run(old, terms, rows):
        n = old.shape[0]
        counts = np.zeros((n, k))
        out: dict = {}
        if rows is not None:
            if with_extras:
                rows, out["prior_extras"] = split_extras(rows, k)
            counts[terms] = rows[:, :k]
        if old.shape[1] >= k:
            nz, change, top = count_refresh(counts, np.ascontiguousarray(old[:, :k]))
            out["nphi_change"] = change
        else:
            nz, top = counts.sum(axis=0), float(counts.max(initial=0))
        out["row_totals"] = nz
        out["above_uint16"] = float(top > np.iinfo(np.uint16).max)
        out["above_int32"] = float(top >= 2**31 - 1)
        if not average:
            return counts, out
        summed = old[:, k:] + counts if old.shape[1] == 2 * k else counts.copy()
        return np.hstack([counts, summed]), out

    return run


def statistics_fn(k, alpha=None):
    """A block's word-topic counts by term (U, K); with ``alpha`` (a learned α) also
    Minka's statistics of its documents' sampled topic counts as K + 1 more columns."""

    def run(block: DocBlock, z):
        if alpha is None:
            # whole counts below 2^24 are exact in float32: half the bytes to merge
            exact = block.n_tokens < EXACT_FLOAT32
            dtype = np.float32 if exact else np.float64
            return topic_counts(block.local, len(block.terms), block.counts, z, k, dtype)
        rows = topic_counts(block.local, len(block.terms), block.counts, z, k)
        docs = np.repeat(np.arange(block.n_docs), np.diff(block.indptr))
        ntheta = topic_counts(docs, block.n_docs, block.counts, z, k)
        num, den = doc_prior_stats(ntheta, alpha)
        return with_extras(rows, np.append(num, den))

    return run


# --------------------------------------------------------------------------
# The mode


class Gibbs(ShardedRows, StatefulMode[Assignments]):
    """Collapsed Gibbs sampling, AD-LDA with SparseLDA's sampler."""

    name = "gibbs"
    title = "collapsed Gibbs sampling, AD-LDA (Newman et al. 2009) with SparseLDA's sampler"
    task_kernels = ("gibbs", "merge")
    takes_seed_topics = True
    # AD-LDA: as many blocks as a round has tasks, each swept against the counts of the
    # round before (fewer, larger blocks: fewer tasks, fewer copies of the count rows)
    batch_layout = True

    def __init__(self, corpus, params, initial_topic_word=None):
        super().__init__(corpus, params, initial_topic_word)
        #: the model on the executors: the counts (and their sum over the averaged sweeps
        #: beside them) in term shards (:mod:`.sharded_rows`)
        self._init_sharded(params)
        self.z_dtype = assignment_dtype(self.k)
        self.z_bytes = int(corpus.n_train_tokens) * self.z_dtype.itemsize
        self.avg_sum: np.ndarray | None = None
        self.avg_count = 0
        #: the Minka statistics of the sweeps since α's last step, and how many sweeps
        self.alpha_pool: np.ndarray | None = None
        self.alpha_pooled = 0
        #: the largest count of N^Φ, when known from the last update's pass
        self.nphi_top: float | None = None
        log.info(
            "GIBBS keeps a topic per token for %d tokens in %s: %.1f MB in the cached blocks",
            corpus.n_train_tokens,
            self.z_dtype.name,
            self.z_bytes / 1e6,
        )

    # -- the round plan --------------------------------------------------
    @property
    def average_from(self) -> int:
        """The first round whose counts join the average of ``topic_word``."""
        return max(0, int(self.params.passes) - int(self.params.gibbs_average))

    @property
    def w_eta(self) -> float:
        return self.v * self.eta

    # -- initial state ----------------------------------------------------
    def init_value(self):
        # float64 whatever the dtype: the counts' rows are (StatefulMode's is in the dtype)
        if self.initial_topic_word is None:
            return None
        return normalize_topics(self.initial_topic_word, self.params.eta)

    def init_state(self):
        return init_state_fn(self.params.seed, self.k, self.alpha.copy())

    def state_rows(self):
        return _token_rows

    def statistics(self):
        return statistics_fn(self.k, self.alpha.copy() if self.params.optimize_alpha else None)

    def set_initial(self, stats):
        if self.sharded:  # the shards hold the counts; their column sums came back
            self._set_sharded_totals(stats)
            self.initial_topic_word = None
            return
        self.nphi = self._stat_rows(stats)[0]
        self.nz = self.nphi.sum(axis=0)
        self.nphi_top = None
        self.initial_topic_word = None

    # -- per round -------------------------------------------------------
    def _stat_rows(self, stats):
        if not self.params.optimize_alpha:
            # made dense and float64 in one scatter (the rows come as float32 when exact)
            rows = np.zeros((self.v, stats.rows.shape[1]), dtype=np.float64)
            rows[stats.terms] = stats.rows
            return rows, None
        return split_extras(stats.to_dense(self.v).rows, self.k)

    def _set_sharded_totals(self, stats) -> None:
        """N^Z from the shards' column sums, and a largest count in the shipped dtype's
        range (the same dtype as the driver placement's largest count picks)."""
        self.nz = np.array(stats.extra["row_totals"], dtype=np.float64)
        if stats.extra.get("above_int32", 0.0):
            self.nphi_top = float(2**31)
        elif stats.extra.get("above_uint16", 0.0):
            self.nphi_top = float(np.iinfo(np.uint16).max + 1)
        else:
            self.nphi_top = 0.0

    def round_value(self, t):
        if self.sharded:  # the O(K) part: the shards serve each block its counts
            nz = self.nz.copy()
            if self.seeds.active:
                return nz + self.seeds.totals(), self.seeds.terms, self.seeds.rows
            return nz, np.zeros(0, np.int64), np.zeros((0, self.k))
        nphi = self.nphi
        # the counts are whole numbers: uint16 or int32 ship them exactly in fewer bytes
        top = self.nphi_top if self.nphi_top is not None else float(nphi.max(initial=0))
        shipped = shipped_counts(nphi, top)
        nz = self.nz.copy()
        if self.seeds.active:
            nz += self.seeds.totals()
            return shipped, nz, self.seeds.terms, self.seeds.rows
        return shipped, nz, np.zeros(0, np.int64), np.zeros((0, self.k))

    def kernel(self, t):
        if self.sharded:
            return served_sweep_fn(self.params.seed, t, self.alpha.copy(), self.eta, self.w_eta)
        return sweep_fn(self.params.seed, t, self.alpha.copy(), self.eta, self.w_eta)

    def update(self, stats, t):
        if self.sharded:
            return self._update_sharded(stats, t)
        old = self.nphi
        self.nphi, extras = self._stat_rows(stats)
        # N^Z, the change and the largest count in one pass (no V × K temporaries)
        self.nz, change, self.nphi_top = count_refresh(self.nphi, old)
        if t >= self.average_from:
            if self.avg_sum is None:
                self.avg_sum = np.zeros_like(self.nphi)
            self.avg_sum += self.nphi
            self.avg_count += 1
        self._learn_alpha(extras, self.pass_of(t))
        self.priors.learn_eta(self.nphi, self.pass_of(t), expected=False)  # whole counts
        tokens = self.count_seen(stats)
        return {
            # at least this share of the tokens changed topic (moves within a term cancel)
            "nphi_change": change / (2 * max(tokens, 1.0)),
            "partitions": self.n_partitions,
            "averaged_sweeps": self.avg_count,
            **self.priors.report(),
        }

    def _update_sharded(self, stats, t):
        """The shards replaced their counts (and added them to the average's sum,
        :func:`count_shard`); their column sums, a learned α's statistics, the change
        and the largest count's range came back."""
        self._set_sharded_totals(stats)
        if t >= self.average_from:
            self.avg_count += 1
        extras = stats.extra.get("prior_extras")
        if self.params.optimize_alpha and extras is None:
            extras = np.zeros(self.k + 1)
        self._learn_alpha(extras, self.pass_of(t))
        if self.params.optimize_eta:  # η from the counts where they live (whole counts)
            assert self.held_topics is not None
            k = self.k
            counts = self.held_topics(lambda lo, b: b[:, :k])
            self.priors.learn_eta(counts, self.pass_of(t), expected=False)
        tokens = self.count_seen(stats)
        return {
            "nphi_change": float(stats.extra.get("nphi_change", 0.0)) / (2 * max(tokens, 1.0)),
            "partitions": self.n_partitions,
            "averaged_sweeps": self.avg_count,
            **self.priors.report(),
        }

    def _learn_alpha(self, extras, pass_no: int) -> None:
        """Add a sweep's Minka statistics to the pool (after the burn-in); every
        :data:`ALPHA_INTERVAL` sweeps, one fixed-point step on the pool, emptied."""
        if extras is None or not self.priors.learns(pass_no):
            return
        pool = np.array(extras, dtype=np.float64)
        self.alpha_pool = pool if self.alpha_pool is None else self.alpha_pool + pool
        self.alpha_pooled += 1
        if self.alpha_pooled >= ALPHA_INTERVAL:
            self.priors.minka_step(self.alpha_pool, pass_no)
            self.alpha_pool, self.alpha_pooled = None, 0

    def topic_word(self):
        if self.sharded:
            rows = self._sharded_rows()
            if self.avg_count:
                return self.seeds.added_to(rows[:, self.k :] / self.avg_count)
            return self.seeds.added_to(np.array(rows[:, : self.k]))
        if self.avg_count:
            assert self.avg_sum is not None
            counts = self.avg_sum / self.avg_count
        else:
            counts = self.nphi.copy()
        return self.seeds.added_to(counts)

    # -- checkpoints -------------------------------------------------------
    def state(self):
        if self.sharded and self.state_on_executors():  # the checkpoint writes the shards
            nphi, avg_sum = None, None
        elif self.sharded:
            rows = self._sharded_rows()
            nphi = np.ascontiguousarray(rows[:, : self.k])
            avg_sum = np.ascontiguousarray(rows[:, self.k :]) if rows.shape[1] > self.k else None
        else:
            nphi, avg_sum = self.nphi, self.avg_sum
        out = {
            **super().state(),
            "avg_count": self.avg_count,
            "average_from": self.average_from,
        }
        if nphi is not None:
            out["nphi"] = nphi
        if avg_sum is not None:
            out["avg_sum"] = avg_sum
        if self.alpha_pool is not None:
            out["alpha_pool"] = self.alpha_pool
            out["alpha_pooled"] = self.alpha_pooled
        return out

    def restore(self, state):
        super().restore(state)
        held = state.get(self.sharded_key)
        if isinstance(held, ShardedTopics):
            self._restore_held(state, held)
            return
        if held is not None:  # a sharded checkpoint collected for the driver placement
            rows = np.array(held, dtype=np.float64)
            state = {**state, "nphi": rows[:, : self.k]}
            if rows.shape[1] > self.k:
                state["avg_sum"] = rows[:, self.k :]
        self.nphi = np.array(state["nphi"], dtype=np.float64)
        self.nz = self.nphi.sum(axis=0)
        self.nphi_top = None
        self.avg_count, self.avg_sum = 0, None
        if self._average_kept(state, "avg_sum" in state):
            self.avg_count = int(state["avg_count"])
            self.avg_sum = np.array(state["avg_sum"], dtype=np.float64)
        self._restore_pool(state)
        if self.sharded:  # the executor shards the counts (and the sum) before the next round
            rows = self.nphi if self.avg_sum is None else np.hstack([self.nphi, self.avg_sum])
            self.nphi_top = float(self.nphi.max(initial=0))  # the driver's round_value's
            self.start_base, self.nphi, self.avg_sum = rows, None, None
        self.initial_topic_word = None

    def _restore_held(self, state, held: ShardedTopics) -> None:
        """Restore from the shards a checkpoint's executors wrote: N^Z and the largest
        count from them (one job); the average's sum columns dropped when it restarts."""
        k = self.k
        width, totals, top = shard_summary(held, k)
        self.nz, self.nphi_top = totals[:k].copy(), top
        self.avg_count, self.nphi, self.avg_sum = 0, None, None
        if self._average_kept(state, width > k):
            self.avg_count = int(state["avg_count"])
        elif width > k:
            held = held.map_rows(lambda lo, rows: np.ascontiguousarray(rows[:, :k]))
        self._restore_pool(state)
        self.start_base = held
        self.initial_topic_word = None

    def _average_kept(self, state, has_sum: bool) -> bool:
        if int(state.get("average_from", -1)) == self.average_from and has_sum:
            return True
        if has_sum:  # resumed with other passes or gibbs_average: the average restarts here
            log.info("Gibbs: the average of the last sweeps restarts after the resume")
        return False

    def _restore_pool(self, state) -> None:
        self.alpha_pool, self.alpha_pooled = None, 0
        if state.get("alpha_pool") is not None:  # resumed between two α steps
            self.alpha_pool = np.array(state["alpha_pool"], dtype=np.float64)
            self.alpha_pooled = int(state["alpha_pooled"])

    def shard_topic_word(self) -> Callable[[int, np.ndarray], np.ndarray]:
        """A shard's rows of :meth:`topic_word`: the average of the summed sweeps (its
        columns past K over their count), else its counts; plus the seeds' pseudo-counts."""
        seeds = (self.seeds.terms, self.seeds.rows) if self.seeds.active else (None, None)
        if self.avg_count:
            return topic_rows(self.k, self.k, float(self.avg_count), *seeds)
        return topic_rows(0, self.k, None, *seeds)

    # -- the model on the executors (model_placement "executors") -----------
    def fetch_rows(self, t: int) -> Callable:
        """A shard's counts of its rows, shipped as the driver placement ships N^Φ."""
        assert self.nphi_top is not None  # set by every update and the restore
        return served_counts(self.k, self.nphi_top)

    def row_step(self, t: int) -> Callable:
        """Each shard's counts replaced by the round's merged counts, and summed for the
        average from round ``average_from`` (:func:`count_shard`; ``t`` = −1: the
        initial states')."""
        return count_shard(self.k, bool(self.params.optimize_alpha), t >= self.average_from)

    def report(self):
        return {
            "assignment_bytes": self.z_bytes,
            "assignment_dtype": self.z_dtype.name,
            "tokens": int(self.corpus.n_train_tokens),
            "averaged_sweeps": self.avg_count,
            "gibbs_average": int(self.params.gibbs_average),
            "checkpoint_interval": self.params.checkpoint_interval,
        }


def _token_rows(block) -> int:
    """A Gibbs block state has one entry per token of its block."""
    return round(block.n_tokens)
