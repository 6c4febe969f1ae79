"""Online variational Bayes on Spark (Hoffman, Blei & Bach 2010; docs/architecture.md).

State: λ (V×K, float64) on the driver, the Dirichlet parameters of q(β).
A round is one minibatch slice of the corpus, as in SCVB0
(``rounds_per_pass`` = number of slices; slices visited in a seeded order):

1. the driver broadcasts exp(E_q[log β]) = exp(ψ(λ) − ψ(Σ_w λ_w)) (Eq. 6)
   for the whole vocabulary, in the run's dtype;
2. each task runs the E-step of Algorithm 2 over its block
   (:func:`sparklda.kernels.svb_estep_block`): per document γ starts from a
   seeded Gamma(100, 1/100) draw (Hoffman's initialisation, a function of
   (seed, pass, document id) only) and is iterated until the mean change of
   γ falls below ``estep_tol``, at most ``estep_max_iter`` times; the task
   returns the sufficient statistics Σ_d n_dw φ_dwk of the rows its documents
   touch;
3. the driver applies λ ← (1 − ρ) λ + ρ (η + D/|S| · sstats), D the
   training documents and |S| the documents of the round. Rows no document
   of the round touched get (1 − ρ) λ + ρ η. ρ follows ρ_t = (τ0 + t)^−κ
   (``learning_offset`` τ0, ``learning_decay`` κ) with t counting minibatches
   of ``learning_minibatch`` documents: a round takes the weight of the
   M/``learning_minibatch`` updates its documents make up
   (:func:`svb_round_step`); with ``learning_minibatch`` = 0, t counts rounds
   (Algorithm 2 as written).

``batch=True`` is batch VB (Algorithm 1 of the same paper, the variational
EM of Blei, Ng & Jordan 2003): one round per pass over every partition, with
|S| = D and ρ = 1, so λ = η + sstats of the whole corpus.

The model stores λ − η as its topic-word statistics, so the model's
φ̂ = (N^Φ + η)/Σ(N^Φ + η) is λ/Σ_w λ_w, the mean of q(β).

Defaults: τ0 = 10, κ = 0.7 and t counting minibatches of 128 documents
(scikit-learn's ``LatentDirichletAllocation``; docs/architecture.md, "Step
schedules"), whatever the round size: Hoffman's τ0 = 1024 with one step per
round of thousands of documents leaves a corpus of a few thousand documents
near its random start. E-step tolerance 1e-3 on the mean change of γ and at
most 100 iterations (``onlineldavb.py``'s ``meanchangethresh`` and cap;
Algorithm 2 writes 1e-5), λ and γ initialised from Gamma(100, 1/100)
(``onlineldavb.py``); minibatch size, α, η and passes are shared with the
other modes.

Note on t: Algorithm 2 counts from t = 0 (and so does Hoffman's
``onlineldavb.py``); scikit-learn's ``LatentDirichletAllocation`` counts
its minibatch updates from 1, i.e. it uses ρ = (τ0 + t + 1)^−κ.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

import numpy as np

from ..execution.topics import ShardedTopics
from ..kernels import (
    digamma,
    dirichlet_expectation_2d,
    dirichlet_expectation_given,
    svb_estep_block,
    uniform_matrix,
)
from ..kernels.priors import elog_theta_offsets, hoffman_alpha_step, keep_total
from ..kernels.random import Stream
from .base import Mode
from .priors import split_extras, with_extras
from .sharded_rows import held_rows

#: Hoffman's initialisation of λ and of each document's γ: Gamma(shape, 1/shape).
GAMMA_SHAPE = 100.0


def gamma_draws(
    seed: int,
    stream: int,
    doc_ids: np.ndarray,
    k: int,
    dtype=np.float64,
    shape: float = GAMMA_SHAPE,
) -> np.ndarray:
    """(len(doc_ids), k) draws of Gamma(shape, scale=1/shape), row j a function
    of (seed, stream, doc_ids[j]) only.

    Wilson & Hilferty's cube-of-a-normal approximation
    X = (1 − 1/(9a) + z/(3√a))³ with z standard normal (Box-Muller from the
    counter-based uniforms of :func:`sparklda.kernels.uniform_matrix`); for
    a = 100 its quantiles are within 1e-4 of the exact Gamma's, and it is
    vectorised over a whole block, where a seeded generator per document
    would cost as much as the document's E-step.
    """
    u = uniform_matrix(seed, stream, doc_ids, 2 * k, np.float64)
    z = np.sqrt(-2.0 * np.log(u[:, :k])) * np.cos(2.0 * np.pi * u[:, k:])
    x = (1.0 - 1.0 / (9.0 * shape) + z / (3.0 * np.sqrt(shape))) ** 3
    return x.astype(dtype, copy=False)


def initial_lambda(seed: int, vocab_size: int, k: int) -> np.ndarray:
    """Hoffman's random λ: Gamma(100, 1/100) entries, (V, K) float64, from
    numpy's generator seeded by (seed, stream)."""
    rng = np.random.default_rng([seed, Stream.INIT_LAMBDA])
    return rng.gamma(GAMMA_SHAPE, 1.0 / GAMMA_SHAPE, size=(vocab_size, k))


def svb_round_step(
    docs_seen: int, m_docs: int, tau0: float, kappa: float, ref_minibatch: float
) -> float:
    """ρ of a round of ``m_docs`` documents after ``docs_seen``, the schedule counting
    minibatches of ``ref_minibatch`` documents.

    Document j (0-based over the run) belongs to step t_j = ⌊j / M0⌋ and carries
    1/M0 of it: ρ = 1 − Π_j (1 − (τ0 + t_j)^−κ)^(1/M0), the weight the round's
    statistics would have after M/M0 steps of Hoffman's update with the same
    statistics. A round of exactly M0 documents aligned with the steps takes
    exactly ρ_t."""
    if m_docs <= 0:
        return 0.0
    m0 = float(ref_minibatch)
    t = np.floor((docs_seen + np.arange(m_docs, dtype=np.float64)) / m0)
    rho_t = np.minimum((tau0 + t) ** -kappa, 1.0)
    if np.any(rho_t >= 1.0):
        return 1.0
    return float(-np.expm1(np.log1p(-rho_t).sum() / m0))


def exp_dirichlet_expectation(lam: np.ndarray, dtype) -> np.ndarray:
    """exp(E_q[log β]) as (V, K): column k is exp(ψ(λ_·k) − ψ(Σ_w λ_wk))."""
    elog = dirichlet_expectation_2d(np.ascontiguousarray(lam.T))
    return np.ascontiguousarray(np.exp(elog).T, dtype=dtype)


def exp_elog_rows(psi_totals: np.ndarray, dtype) -> Callable:
    """A shard's round value of its rows ``idx`` of λ (the model on the executors):
    exp(E_q[log β]) at those terms, given ψ(Σ_w λ_wk) (the values
    :func:`exp_dirichlet_expectation` gives there)."""

    def run(base, mirror, idx):
        elog = dirichlet_expectation_given(np.ascontiguousarray(base[idx]), psi_totals)
        return np.exp(elog).astype(dtype)

    return run


def svb_shard_update(rho: float, eta: float, scale: float, k: int, with_extras: bool):
    """``update(lam, None, terms, rows) -> (column sums, extras)`` of one term shard of
    λ: λ ← (1 − ρ) λ + ρ (η + D/|S| · sstats) on its rows (every row decays; ``terms``
    index the ones with statistics, ``rows`` None when the round touched none of them),
    the learned prior's K extra columns split off first."""

    def run(lam, mirror, terms, rows):
        extras = None
        if rows is None:
            terms = np.zeros(0, dtype=np.int64)
            rows = np.zeros((0, 2 * k if with_extras else k), dtype=np.float64)
        if with_extras:
            rows, extras = split_extras(rows, k)
        lam *= 1.0 - rho
        lam += rho * eta
        lam[terms] += (rho * scale) * rows
        return lam.sum(axis=0), extras

    return run


def svb_kernel(seed, pass_no, alpha, max_iter, tol, learn_alpha=False, served=False):
    """The per-block E-step of a round (built from plain values); the round
    value is exp(E_q[log β]) (V, K) in the run's dtype. ``alpha`` is the K-vector
    α; with ``learn_alpha`` the rows carry Σ_d E_q[log θ_d] − E_prior[log θ] of the
    block's documents (:func:`sparklda.kernels.priors.elog_theta_offsets`) as K extra
    columns (:func:`sparklda.modes.priors.with_extras`). ``served``: the round value is
    ``(terms, rows)``, the rows of the block's terms (the model on the executors)."""

    def run(value, block):
        # served: (terms, rows) of the block's own terms, from the model's shards
        rows = value[1] if served else value[block.terms]
        dtype = rows.dtype
        k = rows.shape[1]
        gamma0 = gamma_draws(seed, Stream.DOC_GAMMA + pass_no, block.doc_ids, k, dtype)
        gamma, sstats = svb_estep_block(
            block.indptr,
            block.local,
            block.counts.astype(dtype, copy=False),
            rows,
            alpha,
            gamma0,
            max_iter,
            tol,
        )
        if not learn_alpha:
            return sstats
        return with_extras(sstats, elog_theta_offsets(gamma, alpha))

    return run


class SVB(Mode):
    """Online VB (Hoffman et al. 2010, Algorithm 2); batch VB with ``batch``."""

    name = "svb"
    title = "online variational Bayes, Hoffman et al. 2010; batch VB with 'batch'"
    variants: ClassVar[dict[str, dict[str, Any]]] = {"svb-batch": {"batch": True}}
    task_kernels = ("svb", "merge")
    eta_from_pass_sums = True
    #: Hoffman's α step is scaled by the round's ρ_t from the first round on.
    prior_waits = False

    def __init__(self, corpus, params, initial_topic_word=None):
        super().__init__(corpus, params, initial_topic_word)
        v, k = corpus.vocab_size, params.k
        eta = float(params.eta)
        lam: np.ndarray | ShardedTopics
        if isinstance(initial_topic_word, ShardedTopics):  # a sharded model's rows
            lam = initial_topic_word.map_rows(lambda lo, rows: rows + eta)
        elif initial_topic_word is not None:
            lam = np.array(initial_topic_word, dtype=np.float64) + params.eta
        else:
            lam = initial_lambda(params.seed, v, k)
        self.batch = bool(params.batch)
        self.last_rho = None
        #: the model on the executors (``model_placement="executors"``): λ lives there,
        #: sharded by term (:mod:`sparklda.execution.sharded`); the driver keeps Σ_w λ_w
        self.sharded = params.model_placement == "executors"
        self.collect_base: Callable[[], np.ndarray] | None = None
        self.start_base: np.ndarray | ShardedTopics | None = None
        self._steps: dict[int, float] = {}
        self.colsum: np.ndarray | None = None
        if self.sharded:
            # Gamma draws take a varying count of uniforms each, so a shard cannot skip to
            # its rows: λ's random start is drawn here and then cut into shards
            self.lam = None
            self.start_base = lam
            self.colsum = lam.column_sums() if isinstance(lam, ShardedTopics) else lam.sum(axis=0)
        else:
            assert isinstance(lam, np.ndarray)
            self.lam = lam

    # -- the round plan --------------------------------------------------
    @property
    def rounds_per_pass(self) -> int:
        return 1 if self.batch else self.corpus.n_slices

    def round_partitions(self, t):
        if self.batch:
            return list(range(self.n_partitions))
        return super().round_partitions(t)

    def round_docs(self, t) -> int:
        if self.batch:
            return int(self.corpus.n_train_docs)
        return int(self.corpus.slice_docs[self.slice_of_round(t)])

    def step(self, t) -> float:
        """ρ_t = (τ0 + t)^−κ (1 in batch mode); with ``learning_minibatch`` the round's
        steps by :func:`svb_round_step`."""
        if self.batch:
            return 1.0
        p = self.params
        if p.learning_minibatch > 0:
            return svb_round_step(
                self.docs_seen,
                self.round_docs(t),
                p.learning_offset,
                p.learning_decay,
                p.learning_minibatch,
            )
        return float((p.learning_offset + t) ** -p.learning_decay)

    # -- per round -------------------------------------------------------
    def round_value(self, t):
        if self.sharded:  # the shards serve each task its rows (fetch_rows)
            return (None, None)
        return exp_dirichlet_expectation(self.lam, self.dtype)

    def kernel(self, t):
        p = self.params
        return svb_kernel(
            p.seed,
            t // self.rounds_per_pass,
            self.alpha.copy(),
            p.estep_max_iter,
            p.estep_tol,
            bool(p.optimize_alpha),
            self.sharded,
        )

    def update(self, stats, t):
        p = self.params
        s_docs = self.round_docs(t)
        rho = self._steps.pop(t) if self.sharded else self.step(t)
        rows = stats.rows
        if p.optimize_alpha:
            if self.sharded:
                offsets = stats.extra.get("prior_extras", np.zeros(p.k))
            else:
                rows, offsets = split_extras(rows, p.k)
            if s_docs > 0:  # Hoffman's Newton step on the minibatch's E[log θ], scaled by ρ
                self.alpha = hoffman_alpha_step(self.alpha, offsets / s_docs, rho)
                if not p.optimize_alpha_sum:
                    self.alpha = keep_total(self.alpha, p.k * p.alpha)
        if self.sharded:  # the shards updated λ; their column sums came back
            if "row_totals" in stats.extra:
                self.colsum = np.asarray(stats.extra["row_totals"], dtype=np.float64)
        elif s_docs > 0:
            scale = self.corpus.n_train_docs / s_docs  # D/|S|
            lam = self.lam
            lam *= 1.0 - rho
            lam += rho * self.eta
            lam[stats.terms] += (rho * scale) * rows
        self.last_rho = rho
        self.docs_seen += s_docs
        self.tokens_seen += float(stats.extra.get("tokens", 0.0))
        if p.optimize_eta:  # from the pass's own expected counts, at its end
            end = (t + 1) % self.rounds_per_pass == 0
            if self.sharded:  # the shards added the round's rows to the pass's sums
                self.priors.learn_eta_pass_shards(self.held_pass_sums, self.pass_of(t), end)
            else:
                self.priors.learn_eta_pass(
                    self.corpus.vocab_size, stats.terms, rows, self.pass_of(t), end
                )
        info = {"rho": rho, "docs": s_docs, **self.priors.report()}
        if not self.batch:
            info["slice"] = self.slice_of_round(t)
        return info

    # -- the model on the executors (model_placement "executors") -----------
    #: the shards keep λ only (they serve exp E[log β] computed from it)
    sharded_mirror = False

    def initial_rows(self) -> tuple[np.ndarray | None, Callable | None, float | None]:
        """The executor's start: λ drawn on the driver (or restored, or a warm start's)."""
        return self.start_base, None, None

    def start_sharded(self, colsum: np.ndarray) -> None:
        """The executors hold λ now; Σ_w λ_w is already known."""
        self.start_base = None

    def fetch_rows(self, t: int) -> Callable:
        """A shard's round value of its rows: exp(E_q[log β]) there (:func:`exp_elog_rows`)."""
        assert self.colsum is not None
        psi = np.array([digamma(float(c)) for c in self.colsum])
        return exp_elog_rows(psi, self.dtype)

    def row_step(self, t: int) -> Callable | None:
        """Round ``t``'s update of each shard of λ (:func:`svb_shard_update`; None for a
        round without documents), decided before the round runs."""
        rho = self.step(t)
        self._steps[t] = rho
        s_docs = self.round_docs(t)
        if s_docs <= 0:
            return None
        scale = self.corpus.n_train_docs / s_docs  # D/|S|
        p = self.params
        return svb_shard_update(rho, self.eta, scale, p.k, bool(p.optimize_alpha))

    def _lam(self) -> np.ndarray:
        if self.lam is not None:
            return self.lam
        return held_rows(self.start_base, self.collect_base)

    sharded_key = "lam"

    def state(self):
        on_executors = self.state_on_executors()  # then the checkpoint writes the shards
        lam = {} if on_executors else {"lam": self._lam()}
        return {**super().state(), **lam, "last_rho": self.last_rho}

    def restore(self, state):
        super().restore(state)
        self.last_rho = state["last_rho"]
        lam = state["lam"]
        if isinstance(lam, ShardedTopics):  # a checkpoint's shards, for the executors
            self.start_base, self.colsum = lam, lam.column_sums()
            return
        lam = np.array(lam, dtype=np.float64)
        if self.sharded:  # the executor shards it before the next round
            self.start_base = lam
            self.colsum = lam.sum(axis=0)
        else:
            self.lam = lam

    def topic_word(self):
        # λ − η, so that the model's (N^Φ + η)/Σ(N^Φ + η) is λ/Σλ
        return np.maximum(self._lam() - self.eta, 0.0)

    def shard_topic_word(self) -> Callable[[int, np.ndarray], np.ndarray]:
        """A shard's rows of :meth:`topic_word`: max(λ − η, 0) of its rows."""
        eta = self.eta

        def rows(lo: int, lam: np.ndarray) -> np.ndarray:
            return np.maximum(lam - eta, 0.0)

        return rows

    def report(self):
        p = self.params
        return {
            "batch": self.batch,
            "learning_offset": p.learning_offset,
            "learning_decay": p.learning_decay,
            "estep_tol": p.estep_tol,
            "estep_max_iter": p.estep_max_iter,
            "last_rho": self.last_rho,
        }
