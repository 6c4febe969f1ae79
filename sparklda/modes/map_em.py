"""Batch MAP estimation by EM (Asuncion, Welling, Smyth & Teh 2009, the MAP row of
their Table 1; lecture notes 003, section 4; Foulds et al. 2013, section 4 and
Appendix A, of which SCVB0 is the online version), with Jacobi updates as Spark
MLlib's ``optimizer="em"``: every responsibility of an iteration is computed from the
previous iteration's counts,

    γ_pk ∝ (N^Φ_uk + η − 1) / (N^Z_k + W(η − 1)) · (N^Θ_jk + α − 1),

and the M-step's counts are N^Θ_j = Σ_{p in j} m_p γ_p per document and
N^Φ_u = Σ_{p of u} m_p γ_p per term (:func:`sparklda.kernels.map_block`). Not CVB0's
in-document sequential update (a pair's new γ seen by the next pairs of its document):
an iteration here is MLlib's iteration.

State. γ is never kept: the E-step and the sums are one pass over a block's pairs, so
what a block carries from one iteration to the next is its documents' N^Θ, K numbers per
document (the mode contract's block state, :mod:`sparklda.modes.base`). The kernel's
(and the start's) state array of a block is its N^Θ (D rows) over its share of the new
N^Φ (its U terms' rows, which are the block's statistics), summed in float64 and kept in
the run's dtype (float32 by default, as the N^Φ every round ships); once the statistics
are counted the executor keeps the N^Θ rows only (:meth:`MAP.kept_state`: a round reads
and writes D rows a block, not D + U), so :meth:`MAP.state_rows` is D, and checkpoints
them with the blocks like CVB0's γ. Since no block reads another's
changes, the model does not depend on the partitioning (up to the order of the sums),
and the corpus is laid out as one slice when ``minibatch_size`` is unset
(:attr:`~sparklda.modes.base.Mode.batch_layout`): one task per core, the fewest rows of
statistics. The driver keeps N^Φ (V×K, float64) and
N^Z (with ``model_placement="executors"``, N^Z only: N^Φ lives in term shards,
:mod:`sparklda.modes.sharded_rows`). A round is one iteration over every partition
(``rounds_per_pass`` = 1).

Start: CVB0's (:func:`sparklda.modes.cvb0.initial_gamma`): random topics keyed by
(seed, term), each document's θ folded in against them, γ_p ∝ topic row · θ; the
block's initial N^Θ and N^Φ are the sums of that γ, which is then dropped. A function
of the seed and the data only; a warm start takes γ_p ∝ the initial model's φ̂ row.

The priors must exceed 1 (the parameter validator refuses α ≤ 1 or η ≤ 1 for 'map'
and learned priors); left unset they are MLlib's EM defaults, α = 50/k + 1 and
η = 1.1 (:func:`sparklda.params.default_alpha`). The counts are floored at 0 in the
kernel, so no factor is negative.

The estimates. ``mode.alpha`` and ``mode.eta`` are the pseudo-counts the estimates
use, α − 1 and η − 1; the model is saved with them, so the one formula of
:class:`sparklda.model.TopicModel` gives MAP's topics
φ̂_kw = (N^Φ_wk + η − 1) / (N^Z_k + W(η − 1)), and its fold-in (held-out scoring,
``transform``) MAP's θ̂_jk ∝ N^Θ_jk + α − 1. The priors as given stay in the
parameters (the model's ``metadata["params"]``) and the checkpoints.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import numpy as np

from ..block import DocBlock
from ..execution.topics import ShardedTopics
from ..kernels import map_block
from .base import StatefulMode
from .cvb0 import doc_sums, initial_gamma, pair_sums
from .sharded_rows import ShardedRows, replace_rows, served_rows, shard_summary, topic_rows

log = logging.getLogger("sparklda.modes.map_em")

#: A block's state: its documents' N^Θ (D, K) over its terms' N^Φ rows (U, K), in the
#: run's dtype (summed in float64).
DocTopics = np.ndarray


# --------------------------------------------------------------------------
# Per-block functions (built from plain values, never from the mode)


def init_state_fn(seed, vocab_size, k, dtype, alpha):
    """``init(phi, block) -> state``: the sums of CVB0's initial γ (or a warm start's)."""

    def run(phi, block: DocBlock):
        gamma = initial_gamma(block, seed, vocab_size, k, dtype, phi, alpha)
        return np.vstack([doc_sums(block, gamma), pair_sums(block, gamma)]).astype(dtype)

    return run


def _em(block: DocBlock, state, rows, nz, alpha, eta, w_eta):
    """A block's new state from its terms' ``rows`` of N^Φ, N^Z and its N^Θ."""
    out = np.zeros((block.n_docs + len(block.terms), nz.shape[0]))
    if block.nnz:
        map_block(
            block.indptr,
            block.local,
            block.counts,
            rows,
            nz,
            state[: block.n_docs],
            alpha,
            eta,
            w_eta,
            out=out,
        )
    return out.astype(nz.dtype, copy=False)


def em_kernel(alpha, eta, w_eta):
    """One iteration over a block: the new state from the round's N^Φ, N^Z and the
    block's N^Θ (the cached state is never modified), summed in float64 and kept in the
    round value's dtype (the run's)."""

    def run(value, block: DocBlock, state):
        nphi, nz = value
        rows = nphi[block.terms] if block.nnz else None
        return _em(block, state, rows, nz, alpha, eta, w_eta)

    return run


def served_em_kernel(alpha, eta, w_eta):
    """:func:`em_kernel` with the model on the executors: the round value is ``(terms,
    rows, N^Z)``, ``rows`` the block's terms' rows of N^Φ as its shards served them."""

    def run(value, block: DocBlock, state):
        _, rows, nz = value
        return _em(block, state, rows, nz, alpha, eta, w_eta)

    return run


def _statistics(block: DocBlock, state) -> np.ndarray:
    """A block's N^Φ rows: the state below its documents' N^Θ (a kernel's or the
    start's, not a kept one)."""
    if state.shape[0] != block.n_docs + len(block.terms):
        raise ValueError(
            f"a MAP block state of {state.shape[0]} rows has no N^Φ rows for its "
            f"{len(block.terms)} terms (a kept state holds N^Θ only)"
        )
    return state[block.n_docs :]


def _doc_topics(block: DocBlock, state) -> np.ndarray:
    """What a block keeps between iterations: its documents' N^Θ (a view)."""
    return state[: block.n_docs]


def _state_rows(block: DocBlock) -> int:
    """The rows of a kept state: one per document."""
    return int(block.n_docs)


# --------------------------------------------------------------------------
# The mode


class MAP(ShardedRows, StatefulMode[DocTopics]):
    """Batch MAP-EM (Asuncion et al. 2009) with Jacobi updates, as MLlib's EM."""

    name = "map"
    title = "batch MAP estimation by EM, Asuncion et al. 2009 (MLlib's optimizer='em')"
    task_kernels = ("map", "cvb", "inference", "merge")
    takes_seed_topics = False
    batch_layout = True

    def __init__(self, corpus, params, initial_topic_word=None):
        super().__init__(corpus, params, initial_topic_word)
        #: the model on the executors: N^Φ in term shards (:mod:`.sharded_rows`)
        self._init_sharded(params)
        self.state_bytes = int(corpus.n_train_docs) * self.k * self.dtype.itemsize
        log.info(
            "MAP keeps N^Θ for %d documents × %d topics in %s: %.1f MB of block states "
            "(the N^Φ rows go with each round's statistics)",
            corpus.n_train_docs,
            self.k,
            self.dtype.name,
            self.state_bytes / 1e6,
        )

    @property  # type: ignore[override]
    def alpha(self) -> np.ndarray:
        """α − 1, the document-topic pseudo-counts of the MAP estimates (K-vector)."""
        return self.priors.alpha - 1.0

    @alpha.setter
    def alpha(self, value: np.ndarray) -> None:
        self.priors.alpha = np.asarray(value, dtype=np.float64) + 1.0

    @property  # type: ignore[override]
    def eta(self) -> float:
        """η − 1, the topic-word pseudo-count of the MAP estimates."""
        return self.priors.eta - 1.0

    @eta.setter
    def eta(self, value: float) -> None:
        self.priors.eta = float(value) + 1.0

    @property
    def w_eta(self) -> float:
        return self.v * self.eta

    # -- initial state ----------------------------------------------------
    def init_state(self):
        return init_state_fn(self.params.seed, self.v, self.k, self.dtype, self.alpha.copy())

    def state_rows(self):
        return _state_rows

    def statistics(self):
        return _statistics

    def kept_state(self):
        return _doc_topics

    def set_initial(self, stats):
        if self.sharded:  # the shards hold N^Φ; their column sums came back
            self.nz = np.array(stats.extra["row_totals"], dtype=np.float64)
        else:
            self._set_stats(stats)
        self.initial_topic_word = None

    # -- per round -------------------------------------------------------
    def _set_stats(self, stats):
        self.nphi = np.ascontiguousarray(stats.to_dense(self.v).rows, dtype=np.float64)
        self.nz = self.nphi.sum(axis=0)

    def round_value(self, t):
        if self.sharded:  # the O(K) part: the shards serve each block its rows
            return (self.nz.astype(self.dtype),)
        return self.nphi.astype(self.dtype), self.nz.astype(self.dtype)

    def kernel(self, t):
        if self.sharded:
            return served_em_kernel(self.alpha.copy(), self.eta, self.w_eta)
        return em_kernel(self.alpha.copy(), self.eta, self.w_eta)

    def update(self, stats, t):
        if self.sharded:  # the shards' rows are the M-step's N^Φ; their sums came back
            self.nz = np.array(stats.extra["row_totals"], dtype=np.float64)
            tokens = self.count_seen(stats)
            change = float(stats.extra.get("nphi_change", 0.0))
            return {
                "nphi_change": change / (2 * max(tokens, 1.0)),
                "partitions": self.n_partitions,
            }
        old = self.nphi
        self._set_stats(stats)
        tokens = self.count_seen(stats)
        # the fraction of the tokens' expected topic assignments that moved
        return {
            "nphi_change": float(np.abs(self.nphi - old).sum() / (2 * max(tokens, 1.0))),
            "partitions": self.n_partitions,
        }

    def topic_word(self):
        if self.sharded:
            return np.array(self._sharded_rows(), dtype=np.float64)
        return self.nphi.copy()

    # -- checkpoints -------------------------------------------------------
    def state(self):
        if self.sharded and self.state_on_executors():  # the checkpoint writes the shards
            return super().state()
        nphi = self._sharded_rows() if self.sharded else self.nphi
        return {**super().state(), "nphi": nphi}

    def restore(self, state):
        super().restore(state)
        held = state.get(self.sharded_key)
        if isinstance(held, ShardedTopics):  # the executors' rows: N^Z from their sums
            self.nz = shard_summary(held, self.k)[1]
            self.start_base, self.nphi = held, None
            self.initial_topic_word = None
            return
        self.nphi = np.array(state["nphi"] if held is None else held, dtype=np.float64)
        self.nz = self.nphi.sum(axis=0)
        if self.sharded:  # the executor shards N^Φ before the next round
            self.start_base, self.nphi = self.nphi, None
        self.initial_topic_word = None

    def shard_topic_word(self) -> Callable[[int, np.ndarray], np.ndarray]:
        """A shard's rows of :meth:`topic_word`: its N^Φ."""
        return topic_rows(0, self.k)

    # -- the model on the executors (model_placement "executors") -----------
    def fetch_rows(self, t: int) -> Callable:
        """A shard's round value of its rows: N^Φ in the run's dtype (:func:`served_rows`)."""
        return served_rows(self.dtype)

    def row_step(self, t: int) -> Callable:
        """Each shard's rows replaced by the round's M-step rows, the merged statistics
        (:func:`replace_rows`; ``t`` = −1: the initial states')."""
        return replace_rows(self.k, self.k, False)

    def report(self):
        return {
            "doc_topic_bytes": self.state_bytes,
            "documents": int(self.corpus.n_train_docs),
            "checkpoint_interval": self.params.checkpoint_interval,
            # the pseudo-counts of the estimates (the model's α and η)
            "map_alpha_minus_one": float(self.alpha.mean()),
            "map_eta_minus_one": self.eta,
        }
