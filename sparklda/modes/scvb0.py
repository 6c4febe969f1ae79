"""SCVB0 on Spark (Foulds et al. 2013, Algorithm 2; docs/architecture.md).

Executors run the burn-in and accumulating passes of their share of the
round's minibatch against the broadcast (N^Φ_w + η)/(N^Z + Wη); the driver
merges the sparse N̂^Φ rows and applies Eq. 7-8.

Step size. The paper's ρ^Φ_t = s/(τ+t)^κ counts minibatches of 100
documents. We use the equivalent per-document schedule
ρ_d = s·M0^(κ−1) / (τ·M0 + d)^κ (d = documents seen; M0 from
``schedule_minibatch``, by default min(100, D/200) for D training documents:
docs/architecture.md, "Step schedules") and give a round of M documents
the step ρ = 1 − Π_d (1 − ρ_d): the weight those M documents would have
had, one small step each. Quality per pass then does not depend on the
minibatch size or the number of executors.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ..execution.topics import ShardedTopics
from ..kernels import init_doc_stats, scvb0_block, uniform_matrix
from ..kernels.priors import doc_prior_stats, keep_total, minka_alpha_step
from ..kernels.random import Stream
from ..kernels.scvb0 import add_scaled_rows
from ..params import schedule_minibatch_docs
from .base import Mode
from .priors import split_extras, with_extras
from .seeds import add_seed_rows
from .sharded_rows import held_rows

#: Total mass of the random initial N^Φ as a fraction of the training tokens C.
#: Algorithm 2 says "randomly initialize" and leaves the scale open. The online
#: average (Eq. 7-8) gives the first minibatches only ρ ≈ 0.02 per 100 documents at
#: the paper's schedule, so an initial N^Φ as heavy as the whole corpus (C) outweighs
#: the data for several passes of a small corpus. A tenth of C still breaks the
#: symmetry between topics and lets the first rounds' statistics dominate (the
#: measurements behind the choice: docs/benchmarks.md, "Step size and SCVB0's start").
INIT_MASS = 0.1


def round_step(
    docs_seen: int, m_docs: int, s: float, tau: float, kappa: float, ref_minibatch: float
) -> float:
    """ρ for a round of ``m_docs`` documents after ``docs_seen`` documents.

    ρ = 1 − Π_{d=docs_seen}^{docs_seen+m_docs−1} (1 − ρ_d),
    ρ_d = s·M0^(κ−1) / (τ·M0 + d)^κ.
    """
    if m_docs <= 0:
        return 0.0
    m0 = float(ref_minibatch)
    d = docs_seen + np.arange(m_docs, dtype=np.float64)
    rho_d = s * m0 ** (kappa - 1.0) / (tau * m0 + d) ** kappa
    if rho_d[0] >= 1.0:  # ρ_d falls with d: one whole step replaces the estimate
        return 1.0
    return float(-np.expm1(np.log1p(-rho_d).sum()))


@dataclass(frozen=True)
class RowStep:
    """Round t's update of N^Φ's rows (Eq. 7-8 with the lazy (1−ρ) decay in ``scale``),
    the same for every row, so that each term shard can apply it to its own rows
    (:func:`apply_row_step`): ``reset`` zeroes every row first (ρ rounded to 1), the
    round's merged rows are added times ``add`` (ρ·C/|M| over the new scale), then
    every row is multiplied by ``rescale`` when the scale is folded back in (None: not
    this round). ``factor`` (ρ·C/|M|) weighs the rows' column sums in N^Z."""

    reset: bool
    add: float
    rescale: float | None
    factor: float


def apply_row_step(base, mirror, terms, rows, step: RowStep) -> np.ndarray:
    """``step`` applied to ``base`` (float64 rows of N^Φ/scale) and ``mirror`` (the same
    rows in the kernels' dtype): ``terms`` index the rows of ``base`` that get ``rows``
    (the round's merged statistics). Returns the column sums of ``rows``. On the whole
    of N^Φ this is the driver's update; on one term shard's rows it is that shard's."""
    if step.reset:
        base[:] = 0.0
        mirror[:] = 0.0
    totals = add_scaled_rows(base, mirror, terms, rows, step.add)
    if step.rescale is not None:
        base *= step.rescale
        mirror[:] = base
    return totals


def shard_update(step: RowStep, k: int, with_extras: bool, dtype) -> Callable:
    """``update(base, mirror, terms, rows) -> (totals, extras)`` of one term shard (its
    local row indices ``terms``; ``rows`` None when the round touched none of its terms;
    ``mirror`` None when the shard keeps no copy in the kernels' ``dtype``), built from
    plain values: the learned prior's extra columns split off (their column sums, None
    without them), then :func:`apply_row_step`."""

    def run(base, mirror, terms, rows):
        extras = None
        if mirror is None:  # a shard keeps base only: its mirror is base cast, a scratch here
            mirror = np.empty(base.shape, dtype=dtype)
        if rows is None:
            terms = np.zeros(0, dtype=np.int64)
            rows = np.zeros((0, k + (k + 1 if with_extras else 0)), dtype=np.float64)
        if with_extras:
            rows, extras = split_extras(rows, k)
        return apply_row_step(base, mirror, terms, rows, step), extras

    return run


def cast_rows(dtype) -> Callable:
    """A shard's round value of its rows ``idx``: its rows of ``base`` in the kernels'
    ``dtype``, the values the driver's mirror has there (the mirror is always ``base``
    cast: :func:`apply_row_step` keeps it so)."""
    dtype = np.dtype(dtype)

    def run(base, mirror, idx):
        return base[idx].astype(dtype)

    return run


def initial_rows(seed: int, k: int, lo: int, hi: int) -> np.ndarray:
    """Rows ``lo … hi−1`` of the random initial N^Φ before its scaling: the rows
    ``np.random.default_rng([seed, Stream.INIT_PHI]).random((V, K))`` has there, drawn
    without the rows before them (PCG64 advanced past their ``lo·k`` values)."""
    bits = np.random.PCG64(np.random.SeedSequence([seed, Stream.INIT_PHI]))
    bits.advance(int(lo) * int(k))
    return np.random.Generator(bits).random((int(hi) - int(lo), int(k)))


def scvb0_kernel(
    seed,
    pass_no,
    alpha,
    eta,
    burnin,
    s_theta,
    tau_theta,
    kappa_theta,
    seeds=None,
    learn_alpha=False,
    exclude_token=False,
):
    """The per-block kernel call of a round (built from plain values).

    The round value is ``(terms, rows, scale, inv_nz)``: N^Φ/scale for the
    rows ``terms`` (sorted; None = every term, rows indexed by term id) in
    the kernels' dtype, and 1/(N^Z + Wη + B) (B: the seeds' pseudo-counts per
    topic). Each task forms its block's (N^Φ_w + η + b_w)/(N^Z + Wη + B)
    rows itself (b_w: the seeds' pseudo-counts of a seeded term, ``seeds`` =
    (sorted terms, rows)), so the driver's work per round is proportional to
    the rows the round touches, not to V·K. ``alpha`` is the K-vector α
    (float64). With ``learn_alpha`` the rows carry Minka's statistics of the
    block's documents (:func:`sparklda.kernels.priors.doc_prior_stats` on
    their final N^Θ, as expected counts with the last pass's log P(N_dk = 0))
    as K + 1 extra columns (:func:`sparklda.modes.priors.with_extras`).
    """

    def run(value, block):
        terms, rows_all, scale, inv_nz = value
        dtype = rows_all.dtype
        idx = block.terms if terms is None else np.searchsorted(terms, block.terms)
        rows = rows_all[idx]
        rows *= dtype.type(scale)
        rows += dtype.type(eta)
        if seeds is not None:
            add_seed_rows(rows, block.terms, seeds[0], seeds[1])
        rows *= inv_nz
        k = rows.shape[1]
        theta0 = init_doc_stats(
            uniform_matrix(seed, Stream.DOC_INIT + pass_no, block.doc_ids, k, dtype),
            block.doc_lengths(),
        )
        theta_out = np.zeros((block.n_docs, k), dtype=dtype) if learn_alpha else None
        logp0 = np.zeros((block.n_docs, k), dtype=dtype) if learn_alpha else None
        nhat = scvb0_block(
            block.indptr,
            block.local,
            block.counts.astype(dtype, copy=False),
            rows,
            theta0,
            alpha,
            burnin,
            s_theta,
            tau_theta,
            kappa_theta,
            theta_out,
            logp0,
            exclude_token,
        )
        if theta_out is None:
            return nhat
        num, den = doc_prior_stats(theta_out, alpha, logp0)
        return with_extras(nhat, np.append(num, den))

    return run


class SCVB0(Mode):
    """SCVB0 (Foulds et al. 2013, Algorithm 2) on minibatch slices."""

    name = "scvb0"
    title = "stochastic collapsed variational Bayes, Foulds et al. 2013"
    takes_seed_topics = True
    eta_from_pass_sums = True
    task_kernels = ("scvb0", "merge")
    driver_kernels = ("merge", "scvb0_update")

    def __init__(self, corpus, params, initial_topic_word=None):
        super().__init__(corpus, params, initial_topic_word)
        v, k = corpus.vocab_size, params.k
        c = corpus.n_train_tokens
        #: the model on the executors (``model_placement="executors"``): ``base`` lives
        #: there, sharded by term (:mod:`sparklda.execution.sharded`)
        self.sharded = params.model_placement == "executors"
        #: the sharded model collected (V×K), set by the executor that holds it
        self.collect_base: Callable[[], np.ndarray] | None = None
        #: sharded: a warm start's or restored N^Φ (an array, or rows on the executors)
        self.start_base: np.ndarray | ShardedTopics | None = None
        self._steps: dict[int, tuple[float, RowStep | None]] = {}
        self.init_mass = INIT_MASS * c
        if self.sharded:
            self.base = self.base_cast = None
            if isinstance(initial_topic_word, ShardedTopics):  # a sharded model's rows
                self.start_base = initial_topic_word
                self.nz = initial_topic_word.column_sums()
            elif initial_topic_word is not None:
                self.start_base = np.array(initial_topic_word, dtype=np.float64)
                self.nz = self.start_base.sum(axis=0)
            else:
                self.nz = None
        else:
            if initial_topic_word is not None:
                base = np.array(initial_topic_word, dtype=np.float64)
            else:
                rng = np.random.default_rng([params.seed, Stream.INIT_PHI])
                base = rng.random((v, k))
                base *= self.init_mass / base.sum()
            self.base = base  # N^Φ = scale · base (lazy (1−ρ) decay)
            self.base_cast = base.astype(self.dtype)  # what is broadcast, kept in step with base
            self.nz = base.sum(axis=0)
        #: M0 of the ρ^Φ schedule (documents per step t)
        self.ref_minibatch = schedule_minibatch_docs(params.schedule_minibatch, corpus.n_train_docs)
        self.scale = 1.0
        # distinct terms of each minibatch slice, learned from its first round's statistics
        # when the corpus does not know them (Corpus.slice_terms)
        self.slice_terms: dict[int, np.ndarray] = {}
        self.corpus_terms = getattr(corpus, "slice_bitmaps", None) is not None

    @property
    def w_eta(self) -> float:
        return self.corpus.vocab_size * self.eta

    def round_value(self, t):
        denom = self.nz + self.w_eta
        if self.seeds.active:
            denom = denom + self.seeds.totals()
        inv_nz = (1.0 / denom).astype(self.dtype)
        if self.sharded:  # the executor sends each task its block's rows
            return None, None, self.scale, inv_nz
        s = self.slice_of_round(t)
        terms = self.corpus.slice_terms(s) if self.corpus_terms else self.slice_terms.get(s)
        rows = self.base_cast if terms is None else self.base_cast[terms]
        return terms, rows, self.scale, inv_nz

    def kernel(self, t):
        p = self.params
        return scvb0_kernel(
            p.seed,
            t // self.rounds_per_pass,
            self.alpha.copy(),
            self.eta,
            p.burnin,
            p.s_theta,
            p.tau_theta,
            p.kappa_theta,
            (self.seeds.terms, self.seeds.rows.astype(self.dtype)) if self.seeds.active else None,
            bool(p.optimize_alpha),
            bool(p.exclude_token),
        )

    def _rho(self, t: int) -> float:
        p = self.params
        m_docs = int(self.corpus.slice_docs[self.slice_of_round(t)])
        return round_step(
            self.docs_seen, m_docs, p.s_phi, p.tau_phi, p.kappa_phi, self.ref_minibatch
        )

    def _row_step(self, rho: float, m_tokens: float) -> RowStep:
        """Round's :class:`RowStep`; moves ``scale`` to its value after the round."""
        factor = rho * self.corpus.n_train_tokens / m_tokens  # ρ · C/|M|  (Eq. 7-8)
        keep = 1.0 - rho
        # ρ rounding to 1 (a round of many steps early in a small corpus's compressed
        # schedule, docs/architecture.md "Step schedules"): the round replaces N^Φ
        reset = keep * self.scale < 1e-300
        self.scale = 1.0 if reset else self.scale * keep
        add = factor / self.scale
        rescale = None
        if self.scale < 1e-6:  # fold the scale back into the rows
            rescale, self.scale = self.scale, 1.0
        return RowStep(reset, add, rescale, factor)

    def row_step(self, t: int) -> Callable | None:
        """The model on the executors: round ``t``'s update of each term shard's rows
        (:func:`shard_update`; None when the round has no tokens), decided before the
        round runs (after :meth:`round_value`); :meth:`update` then takes the round's
        summed column totals."""
        m_tokens = float(self.corpus.slice_tokens[self.slice_of_round(t)])
        rho = self._rho(t)
        step = self._row_step(rho, m_tokens) if m_tokens > 0 else None
        self._steps[t] = (rho, step)
        if step is None:
            return None
        return shard_update(step, self.params.k, bool(self.params.optimize_alpha), self.dtype)

    def update(self, stats, t):
        p = self.params
        s = self.slice_of_round(t)
        m_docs = int(self.corpus.slice_docs[s])
        m_tokens = float(self.corpus.slice_tokens[s])
        extras = None
        if self.sharded:  # the shards applied the rows; their column sums came back
            rho, step = self._steps.pop(t)
            totals = stats.extra.get("row_totals")
            extras = stats.extra.get("prior_extras")
            if p.optimize_alpha and extras is None:
                extras = np.zeros(p.k + 1)
        else:
            rho = self._rho(t)
            rows = stats.rows
            if p.optimize_alpha:
                rows, extras = split_extras(rows, p.k)
            step = None
            if m_tokens > 0 and len(stats.terms):
                if not self.corpus_terms:
                    self.slice_terms.setdefault(s, stats.terms)
                step = self._row_step(rho, m_tokens)
                totals = apply_row_step(self.base, self.base_cast, stats.terms, rows, step)
        if extras is not None and self.priors.learns(self.pass_of(t)):
            # Minka's fixed point on the round's documents, taken as an online step
            target = minka_alpha_step(self.alpha, extras[: p.k], float(extras[p.k]))
            if not p.optimize_alpha_sum:
                target = keep_total(target, p.k * p.alpha)
            self.alpha = (1.0 - rho) * self.alpha + rho * target
        if step is not None:
            if totals is None:
                totals = np.zeros(p.k)
            self.nz = (1.0 - rho) * self.nz + step.factor * totals
        self.docs_seen += m_docs
        self.tokens_seen += m_tokens
        if p.optimize_eta:  # from the pass's own counts, at its end (V·K digammas)
            end = (t + 1) % self.rounds_per_pass == 0
            if self.sharded:  # the shards added the round's rows to the pass's sums
                self.priors.learn_eta_pass_shards(self.held_pass_sums, self.pass_of(t), end)
            else:
                self.priors.learn_eta_pass(
                    self.corpus.vocab_size, stats.terms, rows, self.pass_of(t), end
                )
        return {"rho": rho, "slice": s, "docs": m_docs, **self.priors.report()}

    # -- the model on the executors (model_placement "executors") -----------
    def initial_rows(self) -> tuple[np.ndarray | None, Callable | None, float | None]:
        """How the executor starts the sharded N^Φ: ``(array, None, None)`` (a warm
        start's or a checkpoint's N^Φ/scale, cut into shards) or ``(None, rows, mass)``:
        ``rows(lo, hi)`` draws the random rows of a shard (:func:`initial_rows`), all of
        them then scaled to a total of ``mass``. The executor hands the column sums of
        the result to :meth:`start_sharded`."""
        if self.start_base is not None:
            return self.start_base, None, None
        seed, k = int(self.params.seed), int(self.params.k)

        def rows(lo: int, hi: int) -> np.ndarray:
            return initial_rows(seed, k, lo, hi)

        return None, rows, self.init_mass

    #: the shards keep base only (8 bytes a value) and cast the rows they serve
    sharded_mirror = False

    #: the rows a shard serves do not wait for the driver's update of the round before
    #: (the scale and N^Z travel in the round value): the shards' update stage serves the
    #: next round's rows (docs/architecture.md, "The model on the executors")
    fetch_ahead = True

    def fetch_rows(self, t: int) -> Callable:
        """A shard's round value of its rows ``idx``: :func:`cast_rows`."""
        return cast_rows(self.dtype)

    def start_sharded(self, nz: np.ndarray) -> None:
        """The column sums of the sharded initial N^Φ (N^Z), unless already known."""
        self.start_base = None  # the executors hold it now
        if self.nz is None:
            self.nz = np.asarray(nz, dtype=np.float64)

    def _base(self) -> np.ndarray:
        if self.base is not None:
            return self.base
        return held_rows(self.start_base, self.collect_base)

    def topic_word(self):
        return self.seeds.added_to(self._base() * self.scale)

    sharded_key = "base"

    def shard_topic_word(self) -> Callable[[int, np.ndarray], np.ndarray]:
        """A shard's rows of :meth:`topic_word`: its base times the scale, plus the seeds'
        pseudo-counts of its terms (the driver's arithmetic, row by row)."""
        scale = self.scale
        seeds = self.seeds
        terms = np.asarray(seeds.terms, dtype=np.int64) if seeds.active else None
        seed_rows = seeds.rows if seeds.active else None

        def rows(lo: int, base: np.ndarray) -> np.ndarray:
            out = base * scale
            if terms is not None:
                mine = (terms >= lo) & (terms < lo + len(base))
                out[terms[mine] - lo] += seed_rows[mine]
            return out

        return rows

    def report(self):
        return {"schedule_minibatch": self.ref_minibatch}

    def state(self):
        on_executors = self.state_on_executors()  # then the checkpoint writes the shards
        return {
            **super().state(),
            **({} if on_executors else {"base": self._base()}),
            "nz": self.nz,
            "scale": self.scale,
            "slice_terms": {str(s): t for s, t in self.slice_terms.items()},
        }

    def restore(self, state):
        super().restore(state)
        if self.sharded:  # the executor shards it before the next round
            base = state["base"]
            self.start_base = (
                base if isinstance(base, ShardedTopics) else np.array(base, np.float64)
            )
        else:
            self.base = np.array(state["base"], dtype=np.float64)
            self.base_cast = self.base.astype(self.dtype)
        self.nz = np.array(state["nz"], dtype=np.float64)
        self.scale = float(state["scale"])
        self.slice_terms = {
            int(s): np.asarray(t, dtype=np.int32) for s, t in state["slice_terms"].items()
        }
