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

import numpy as np

from ..kernels import init_doc_stats, scvb0_block, uniform_matrix
from ..kernels.priors import doc_prior_stats, keep_total, minka_alpha_step
from ..kernels.random import Stream
from ..kernels.scvb0 import add_scaled_rows
from ..params import schedule_minibatch_docs
from .base import Mode
from .priors import split_extras, with_extras
from .seeds import add_seed_rows

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
    task_kernels = ("scvb0", "merge")
    driver_kernels = ("merge", "scvb0_update")

    def __init__(self, corpus, params, initial_topic_word=None):
        super().__init__(corpus, params, initial_topic_word)
        v, k = corpus.vocab_size, params.k
        c = corpus.n_train_tokens
        if initial_topic_word is not None:
            base = np.array(initial_topic_word, dtype=np.float64)
        else:
            rng = np.random.default_rng([params.seed, Stream.INIT_PHI])
            base = rng.random((v, k))
            base *= INIT_MASS * c / base.sum()
        self.base = base  # N^Φ = scale · base (lazy (1−ρ) decay)
        #: M0 of the ρ^Φ schedule (documents per step t)
        self.ref_minibatch = schedule_minibatch_docs(params.schedule_minibatch, corpus.n_train_docs)
        self.base_cast = base.astype(self.dtype)  # what is broadcast, kept in step with base
        self.scale = 1.0
        self.nz = base.sum(axis=0)
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

    def update(self, stats, t):
        p = self.params
        s = self.slice_of_round(t)
        m_docs = int(self.corpus.slice_docs[s])
        m_tokens = float(self.corpus.slice_tokens[s])
        rho = round_step(
            self.docs_seen, m_docs, p.s_phi, p.tau_phi, p.kappa_phi, self.ref_minibatch
        )
        rows = stats.rows
        if p.optimize_alpha:
            rows, extras = split_extras(rows, p.k)
            if self.priors.learns(self.pass_of(t)):
                # Minka's fixed point on the round's documents, taken as an online step
                target = minka_alpha_step(self.alpha, extras[: p.k], float(extras[p.k]))
                if not p.optimize_alpha_sum:
                    target = keep_total(target, p.k * p.alpha)
                self.alpha = (1.0 - rho) * self.alpha + rho * target
        if m_tokens > 0 and len(stats.terms):
            if not self.corpus_terms:
                self.slice_terms.setdefault(s, stats.terms)
            factor = rho * self.corpus.n_train_tokens / m_tokens  # ρ · C/|M|  (Eq. 7-8)
            keep = 1.0 - rho
            if keep * self.scale < 1e-300:
                # ρ rounds to 1 (a round of many steps early in a small corpus's compressed
                # schedule, docs/architecture.md "Step schedules"): the round replaces N^Φ
                self.base[:] = 0.0
                self.base_cast[:] = 0.0
                self.scale = 1.0
            else:
                self.scale *= keep
            totals = add_scaled_rows(
                self.base, self.base_cast, stats.terms, rows, factor / self.scale
            )
            self.nz = (1.0 - rho) * self.nz + factor * totals
            if self.scale < 1e-6:
                self.base *= self.scale
                self.base_cast[:] = self.base
                self.scale = 1.0
        self.docs_seen += m_docs
        self.tokens_seen += m_tokens
        if p.optimize_eta:  # from the pass's own counts, at its end (V·K digammas)
            end = (t + 1) % self.rounds_per_pass == 0
            self.priors.learn_eta_pass(
                self.corpus.vocab_size, stats.terms, rows, self.pass_of(t), end
            )
        return {"rho": rho, "slice": s, "docs": m_docs, **self.priors.report()}

    def topic_word(self):
        return self.seeds.added_to(self.base * self.scale)

    def report(self):
        return {"schedule_minibatch": self.ref_minibatch}

    def state(self):
        return {
            **super().state(),
            "base": self.base,
            "nz": self.nz,
            "scale": self.scale,
            "slice_terms": {str(s): t for s, t in self.slice_terms.items()},
        }

    def restore(self, state):
        super().restore(state)
        self.base = np.array(state["base"], dtype=np.float64)
        self.base_cast = self.base.astype(self.dtype)
        self.nz = np.array(state["nz"], dtype=np.float64)
        self.scale = float(state["scale"])
        self.slice_terms = {
            int(s): np.asarray(t, dtype=np.int32) for s, t in state["slice_terms"].items()
        }
