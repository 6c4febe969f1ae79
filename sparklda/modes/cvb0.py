"""Batch CVB0 and CVB on Spark (docs/architecture.md).

CVB0: Asuncion, Welling, Smyth & Teh (2009), Eq. 3 of Foulds et al. (2013).
CVB: Teh, Newman & Welling (2007), Eq. 16-18, the same sweep with the
Gaussian second-order correction and the variance statistics kept beside the
means.

State. γ is kept per (document, distinct term) pair beside each cached
partition block ((nnz, K) in the run's dtype; the mode contract's block
state, :mod:`sparklda.modes.base`); the driver keeps N^Φ (V×K, float64) and
N^Z, plus Var N^Φ and Var N^Z for CVB. With ``model_placement="executors"`` N^Φ
(and Var N^Φ beside it) lives in term shards on the executors and the driver keeps
N^Z and Var N^Z (:mod:`sparklda.modes.sharded_rows`).

A round is one iteration over every partition (``rounds_per_pass`` = 1, so
``passes`` counts iterations):

1. the driver ships N^Φ and N^Z (and the variances) as they stood at the
   start of the iteration (the round value);
2. each block's γ is copied and its documents swept with
   :func:`sparklda.kernels.cvb0_block`: each pair's own contribution is
   removed (the "−ij"), γ recomputed and added back, against the round's
   statistics plus the partition's own changes (the approximate distributed
   scheme of Newman et al. 2009);
3. the statistics of each block are its full Σ m·γ rows (not deltas: the
   totals are recomputed from the blocks every iteration in float64, so no
   rounding drift accumulates over iterations), handed back unmerged like
   every other mode's;
4. the skeleton merges them and :meth:`CVB0.update` takes them as the new
   N^Φ; N^Z = Σ_w N^Φ_w.

The executor keeps the γ states with the cached blocks and cuts their
lineage every ``checkpoint_interval`` iterations with its periodic
checkpointer (:class:`sparklda.execution.PeriodicCheckpointer`).

Initialisation (:func:`initial_gamma`): random topics keyed by (seed, term),
each document's θ folded in against them, γ_p ∝ topic row · θ (a function of
the seed and the data only); a warm start sets γ_p ∝ the initial model's φ̂
row of the pair's term.

Defaults: ``passes`` (iterations) = 20 and α, η as shared by every mode;
``checkpoint_interval`` = 10 (Spark's ``checkpointInterval`` default). The
partitions are the corpus's slices × ``parts_per_slice``; the approximate
distributed scheme needs more iterations the more partitions there are.

CVB and small η: the second-order expansion of E[log(η + n)] (Eq. 17) is
poor when E[n] is comparable to η, as it is for most (word, topic) cells at
η = 0.01, K = 50; there the correction over-penalises (for n ~ Bernoulli(0.05)
and η = 0.01 its −Var/(2(η + E n)²) is −6.6, where the exact
E[log(η + n)] − log(η + E n) is −1.6) and CVB settles at
a worse held-out likelihood than CVB0 (KOS, K = 50: −7.53 against −7.34 after
60 iterations; with η = 0.1 the gap after 20 iterations is 0.06). On data
with large counts per cell (the planted tests) the two agree closely.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import numpy as np
import scipy.sparse

from ..block import DocBlock
from ..execution.topics import ShardedTopics
from ..kernels import cvb0_block, cvb0_init_gamma, foldin_block, uniform_matrix
from ..kernels.priors import doc_prior_stats
from ..kernels.random import Stream
from ..params import DEFAULT_ALPHA
from .base import StatefulMode
from .priors import split_extras, with_extras
from .sharded_rows import ShardedRows, replace_rows, served_rows, shard_summary, topic_rows

log = logging.getLogger("sparklda.modes.cvb0")


# --------------------------------------------------------------------------
# Per-block functions (built from plain values, never from the mode)


#: EM iterations of the fold-in that gives each document its start (initial_gamma).
INIT_FOLDIN_ITER = 20
#: CVB's start: this share of each pair's γ is a random row, the rest the fold-in start
#: (docs/architecture.md, "CVB0 and CVB: the start")
CVB_RANDOM_SHARE = 0.5


def pair_ids(block: DocBlock, vocab_size: int) -> np.ndarray:
    """A distinct id per (document, term) pair: doc_id · V + term (int64)."""
    docs = np.repeat(block.doc_ids, np.diff(block.indptr))
    return docs * np.int64(vocab_size) + block.global_pairs().astype(np.int64)


def initial_gamma(
    block: DocBlock,
    seed: int,
    vocab_size: int,
    k: int,
    dtype,
    phi=None,
    alpha=None,
    foldin: bool = True,
    random_share: float = 0.0,
) -> np.ndarray:
    """γ of every pair of ``block`` at the start of training, (nnz, K).

    Random (docs/architecture.md, "CVB0 and CVB: the start"): random topics u,
    a row of :func:`sparklda.kernels.uniform_matrix` per term keyed by (seed,
    term), so every block draws the same row for a term; each document's θ is
    folded in against them (:func:`sparklda.kernels.foldin_block`,
    ``INIT_FOLDIN_ITER`` EM iterations, prior ``alpha``), and
    γ_p ∝ u_{term(p)} · θ_{doc(p)}: the responsibilities a first SCVB0-like
    pass would give. γ is a function of the seed and the data only. Warm
    start: γ_p ∝ φ̂ row of the pair's term, with ``phi`` the (V, K) topics of
    the initial model. Without ``foldin``, a normalised random row per pair; with
    ``random_share`` s > 0, (1 − s) · the fold-in γ + s · that random row (CVB).
    """
    if phi is not None:
        return cvb0_init_gamma(np.asarray(phi[block.global_pairs()], dtype=dtype))
    if not foldin or random_share > 0.0:  # a normalised random row per (document, term) pair
        rand = cvb0_init_gamma(
            uniform_matrix(seed, Stream.GAMMA_INIT, pair_ids(block, vocab_size), k, dtype)
        )
        if not foldin:
            return rand
    u = uniform_matrix(seed, Stream.INIT_TERM_TOPICS, block.terms, k, dtype)
    a = DEFAULT_ALPHA if alpha is None else alpha
    theta = foldin_block(
        block.indptr,
        block.local,
        block.counts.astype(dtype, copy=False),
        u,
        a,
        INIT_FOLDIN_ITER,
    )
    docs = np.repeat(np.arange(block.n_docs), np.diff(block.indptr))
    gamma = cvb0_init_gamma(u[block.local] * theta[docs])
    if random_share > 0.0:
        share = np.dtype(dtype).type(random_share)
        gamma *= 1 - share
        gamma += share * rand
    return gamma


def init_state_fn(seed, vocab_size, k, dtype, alpha=None, foldin=True, random_share=0.0):
    def run(phi, block):
        return initial_gamma(block, seed, vocab_size, k, dtype, phi, alpha, foldin, random_share)

    return run


def _sweep(block, gamma, rows, nz, var_rows, var_z, alpha, eta, w_eta, second_order):
    """γ of ``block`` after one sweep against its terms' ``rows`` of N^Φ (and, for CVB,
    ``var_rows`` of Var N^Φ), updated on a copy (the cached state is never modified)."""
    gamma = np.array(gamma, order="C", copy=True)
    if block.nnz:
        cvb0_block(
            block.indptr,
            block.local,
            block.counts.astype(gamma.dtype, copy=False),
            gamma,
            rows,
            nz,
            alpha,
            eta,
            w_eta,
            second_order,
            var_rows,
            var_z if second_order else None,
        )
    return gamma


def sweep_kernel(alpha, eta, w_eta, second_order):
    """One CVB0/CVB iteration over a block: γ updated on a copy (the cached state of
    the previous iteration is never modified)."""

    def run(value, block, gamma):
        nphi, nz, var_phi, var_z = value
        rows = nphi[block.terms] if block.nnz else None
        var_rows = var_phi[block.terms] if second_order and block.nnz else None
        return _sweep(block, gamma, rows, nz, var_rows, var_z, alpha, eta, w_eta, second_order)

    return run


def served_sweep_kernel(alpha, eta, w_eta, second_order, k):
    """:func:`sweep_kernel` with the model on the executors: the round value is
    ``(terms, rows, N^Z, Var N^Z)``, ``rows`` the block's terms' rows as its shards
    served them (:func:`served_rows`: N^Φ, and Var N^Φ beside it for CVB)."""

    def run(value, block, gamma):
        _, rows, nz, var_z = value
        nphi_rows = np.ascontiguousarray(rows[:, :k])
        var_rows = np.ascontiguousarray(rows[:, k:]) if second_order else None
        return _sweep(block, gamma, nphi_rows, nz, var_rows, var_z, alpha, eta, w_eta, second_order)

    return run


def pair_sums(block: DocBlock, values: np.ndarray) -> np.ndarray:
    """Σ_p m_p · values_p by the block's term rows, float64 (U, width)."""
    nnz = block.nnz
    m = scipy.sparse.csr_matrix(
        (block.counts.astype(np.float64), (block.local, np.arange(nnz))),
        shape=(len(block.terms), nnz),
    )
    return np.asarray(m @ np.asarray(values, dtype=np.float64))


def doc_sums(block: DocBlock, values: np.ndarray) -> np.ndarray:
    """Σ_p m_p · values_p by the block's documents, float64 (D, width): N^Θ from γ."""
    nnz = block.nnz
    docs = np.repeat(np.arange(block.n_docs), np.diff(block.indptr))
    m = scipy.sparse.csr_matrix(
        (block.counts.astype(np.float64), (docs, np.arange(nnz))), shape=(block.n_docs, nnz)
    )
    return np.asarray(m @ np.asarray(values, dtype=np.float64))


def statistics_fn(second_order, alpha=None):
    """Full Σ m·γ (and Σ m·γ(1−γ) for CVB, as extra columns) by term, per block; with
    ``alpha`` (the K-vector α, when it is learned) also Minka's statistics of the block's
    documents (:func:`sparklda.kernels.priors.doc_prior_stats` on N^Θ = Σ m·γ per
    document, as expected counts with log P(N_dk = 0) = Σ m·log(1 − γ)) as K + 1 more
    columns (:func:`sparklda.modes.priors.with_extras`)."""

    def run(block, gamma):
        vals = np.hstack([gamma, gamma * (1 - gamma)]) if second_order else gamma
        rows = pair_sums(block, vals)
        if alpha is None:
            return rows
        # expected counts: log P(N_dk = 0) = Σ m log(1 − γ) over the document's pairs
        logp0 = doc_sums(block, np.log1p(-np.minimum(np.asarray(gamma, np.float64), 1 - 1e-6)))
        num, den = doc_prior_stats(doc_sums(block, gamma), alpha, logp0)
        return with_extras(rows, np.append(num, den))

    return run


# --------------------------------------------------------------------------
# The modes

#: CVB0's block state: γ of the block's (document, term) pairs, (nnz, K) in the run's dtype.
Gamma = np.ndarray


class CVB0(ShardedRows, StatefulMode[Gamma]):
    """Batch CVB0 (Asuncion et al. 2009; Eq. 3 of Foulds et al. 2013)."""

    name = "cvb0"
    title = "batch collapsed variational Bayes, zero order, Asuncion et al. 2009"
    task_kernels = ("cvb", "inference", "merge")
    takes_seed_topics = True
    second_order = False

    def __init__(self, corpus, params, initial_topic_word=None):
        super().__init__(corpus, params, initial_topic_word)
        #: the model on the executors (``model_placement="executors"``): N^Φ (and CVB's
        #: Var N^Φ beside it) lives there, sharded by term
        #: (:mod:`sparklda.execution.sharded_stateful`); the driver keeps N^Z (Var N^Z)
        self._init_sharded(params)
        self.gamma_bytes = int(corpus.n_train_pairs) * self.k * self.dtype.itemsize
        log.info(
            "%s keeps γ for %d (document, term) pairs × %d topics in %s: %.1f MB "
            "(%d bytes) in the cached blocks",
            self.name.upper(),
            corpus.n_train_pairs,
            self.k,
            self.dtype.name,
            self.gamma_bytes / 1e6,
            self.gamma_bytes,
        )

    # -- initial state ----------------------------------------------------
    def init_state(self):
        # CVB: half of each pair's γ random: from the fold-in start alone its second-order
        # updates fell into a local mode on planted data (tests/test_modes.py)
        return init_state_fn(
            self.params.seed,
            self.v,
            self.k,
            self.dtype,
            self.alpha.copy(),
            random_share=CVB_RANDOM_SHARE if self.second_order else 0.0,
        )

    def statistics(self):
        return statistics_fn(
            self.second_order, self.alpha.copy() if self.params.optimize_alpha else None
        )

    def set_initial(self, stats):
        if self.sharded:  # the shards hold the rows; their column sums came back
            self._set_totals(stats.extra["row_totals"])
        else:
            self._set_stats(self._stat_rows(stats)[0])
        self.initial_topic_word = None

    @property
    def w_eta(self) -> float:
        return self.v * self.eta

    @property
    def width(self) -> int:
        """Columns of the statistics rows: N^Φ, and Var N^Φ beside it for CVB."""
        return self.k * (2 if self.second_order else 1)

    # -- per round -------------------------------------------------------
    def _stat_rows(self, stats):
        """(dense statistics rows, the extra columns' totals or None)."""
        rows = stats.to_dense(self.v).rows
        if not self.params.optimize_alpha:
            return rows, None
        return split_extras(rows, self.width)

    def _set_stats(self, rows):
        k = self.k
        self.nphi = np.ascontiguousarray(rows[:, :k])
        self.nz = self.nphi.sum(axis=0)
        if self.second_order:
            self.var_phi = np.ascontiguousarray(rows[:, k:])
            self.var_z = self.var_phi.sum(axis=0)

    def _set_totals(self, totals):
        """N^Z (and Var N^Z) from the column sums of the sharded rows."""
        totals = np.asarray(totals, dtype=np.float64)
        self.nz = totals[: self.k].copy()
        if self.second_order:
            self.var_z = totals[self.k : 2 * self.k].copy()

    def round_value(self, t):
        d = self.dtype
        if self.sharded:  # the O(K) part: the shards serve each block its rows (fetch_rows)
            nz = self.nz + self.seeds.totals() if self.seeds.active else self.nz
            return nz.astype(d), self.var_z.astype(d) if self.second_order else None
        if self.seeds.active:
            # the seeds' pseudo-counts join N^Φ where the kernel reads it (N^Φ + η), and
            # their totals join N^Z (the kernel's N^Z + Wη)
            nphi = self.nphi.astype(d)
            nphi[self.seeds.terms] += self.seeds.rows.astype(d)
            return nphi, (self.nz + self.seeds.totals()).astype(d), None, None
        if self.second_order:
            return (
                self.nphi.astype(d),
                self.nz.astype(d),
                self.var_phi.astype(d),
                self.var_z.astype(d),
            )
        return self.nphi.astype(d), self.nz.astype(d), None, None

    def kernel(self, t):
        if self.sharded:
            return served_sweep_kernel(
                self.alpha.copy(), self.eta, self.w_eta, self.second_order, self.k
            )
        return sweep_kernel(self.alpha.copy(), self.eta, self.w_eta, self.second_order)

    def update(self, stats, t):
        if self.sharded:
            return self._update_sharded(stats, t)
        old = self.nphi
        rows, extras = self._stat_rows(stats)
        self._set_stats(rows)
        # one fixed-point step an iteration
        self.priors.minka_step(extras, self.pass_of(t))
        self.priors.learn_eta(self.nphi, self.pass_of(t))
        tokens = self.count_seen(stats)
        # the fraction of the tokens' expected topic assignments that moved
        return {
            "nphi_change": float(np.abs(self.nphi - old).sum() / (2 * max(tokens, 1.0))),
            "partitions": self.n_partitions,
            **self.priors.report(),
        }

    def _update_sharded(self, stats, t):
        """The shards replaced their rows by the merged statistics (:func:`replace_rows`);
        their column sums, a learned α's statistics and the change came back."""
        self._set_totals(stats.extra["row_totals"])
        extras = stats.extra.get("prior_extras")
        if self.params.optimize_alpha and extras is None:
            extras = np.zeros(self.k + 1)
        self.priors.minka_step(extras, self.pass_of(t))
        if self.params.optimize_eta:  # η from N^Φ where it lives
            assert self.held_topics is not None
            k = self.k
            self.priors.learn_eta(self.held_topics(lambda lo, b: b[:, :k]), self.pass_of(t))
        tokens = self.count_seen(stats)
        change = float(stats.extra.get("nphi_change", 0.0))
        return {
            "nphi_change": change / (2 * max(tokens, 1.0)),
            "partitions": self.n_partitions,
            **self.priors.report(),
        }

    def _rows(self) -> np.ndarray:
        """N^Φ (and Var N^Φ beside it for CVB), V × width, float64."""
        if not self.sharded:
            if self.second_order:
                return np.hstack([self.nphi, self.var_phi])
            return self.nphi
        return self._sharded_rows()

    def topic_word(self):
        if not self.sharded:
            return self.seeds.added_to(self.nphi.copy())
        return self.seeds.added_to(np.ascontiguousarray(self._rows()[:, : self.k]))

    def state(self):
        if not self.sharded:
            out = {**super().state(), "nphi": self.nphi}
            if self.second_order:
                out["var_phi"] = self.var_phi
            return out
        if self.state_on_executors():  # the checkpoint writes the shards (sharded_key)
            return super().state()
        rows = self._rows()
        out = {**super().state(), "nphi": np.ascontiguousarray(rows[:, : self.k])}
        if self.second_order:
            out["var_phi"] = np.ascontiguousarray(rows[:, self.k :])
        return out

    def restore(self, state):
        super().restore(state)
        held = state.get(self.sharded_key)
        if isinstance(held, ShardedTopics):  # the executors' rows: N^Z from their sums
            self._set_totals(shard_summary(held, self.k)[1])
            self.start_base, self.nphi, self.var_phi = held, None, None
            self.initial_topic_word = None
            return
        if held is not None:  # a sharded checkpoint collected for the driver placement
            rows = np.array(held, dtype=np.float64)
        else:
            rows = np.array(state["nphi"], dtype=np.float64)
            if self.second_order:
                rows = np.hstack([rows, np.array(state["var_phi"], dtype=np.float64)])
        self._set_stats(rows)  # N^Z (Var N^Z) as the driver placement restores them
        if self.sharded:  # the executor shards the rows before the next round
            self.start_base = rows
            self.nphi = self.var_phi = None
        self.initial_topic_word = None

    def shard_topic_word(self) -> Callable[[int, np.ndarray], np.ndarray]:
        """A shard's rows of :meth:`topic_word`: its N^Φ plus the seeds' pseudo-counts."""
        if self.seeds.active:
            return topic_rows(0, self.k, None, self.seeds.terms, self.seeds.rows)
        return topic_rows(0, self.k)

    # -- the model on the executors (model_placement "executors") -----------
    def fetch_rows(self, t: int) -> Callable:
        """A shard's round value of its rows (:func:`served_rows`)."""
        if self.seeds.active:
            return served_rows(self.dtype, self.seeds.terms, self.seeds.rows)
        return served_rows(self.dtype)

    def row_step(self, t: int) -> Callable:
        """Each shard's rows replaced by the round's merged statistics (:func:`replace_rows`;
        ``t`` = −1: the initial states')."""
        return replace_rows(self.k, self.width, bool(self.params.optimize_alpha))

    def report(self):
        return {
            "gamma_bytes": self.gamma_bytes,
            "gamma_dtype": self.dtype.name,
            "pairs": int(self.corpus.n_train_pairs),
            "checkpoint_interval": self.params.checkpoint_interval,
        }


class CVB(CVB0):
    """CVB with the Gaussian second-order correction (Teh, Newman & Welling
    2007, Eq. 16-18): CVB0 plus the variances Σ m γ(1 − γ) of N^Θ, N^Φ, N^Z."""

    name = "cvb"
    title = "batch collapsed variational Bayes, second order, Teh et al. 2007"
    takes_seed_topics = False
    second_order = True
