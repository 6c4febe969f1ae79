"""SCVB0 on Spark (Foulds et al. 2013, Algorithm 2; DESIGN.md §3).

Executors run the burn-in and accumulating passes of their share of the
round's minibatch against the broadcast (N^Φ_w + η)/(N^Z + Wη); the driver
merges the sparse N̂^Φ rows and applies Eq. 7-8.

Step size. The paper's ρ^Φ_t = s/(τ+t)^κ counts minibatches of 100
documents. We use the equivalent per-document schedule
ρ_d = s·M0^(κ−1) / (τ·M0 + d)^κ (M0 = ``schedule_minibatch``, d = documents
seen) and give a round of M documents the step ρ = 1 − Π_d (1 − ρ_d): the
weight those M documents would have had, one small step each. Quality per
pass then does not depend on the minibatch size or the number of executors.
"""

from __future__ import annotations

import time

import numpy as np

from ..kernels import init_doc_stats, scvb0_block, uniform_matrix
from ..stats import TopicStats
from ..training import Mode, register

STREAM_INIT_PHI = 11
STREAM_DOC_INIT = 1000  # + pass number


def round_step(docs_seen: int, m_docs: int, s: float, tau: float, kappa: float,
               ref_minibatch: int) -> float:
    """ρ for a round of ``m_docs`` documents after ``docs_seen`` documents.

    ρ = 1 − Π_{d=docs_seen}^{docs_seen+m_docs−1} (1 − ρ_d),
    ρ_d = s·M0^(κ−1) / (τ·M0 + d)^κ.
    """
    if m_docs <= 0:
        return 0.0
    m0 = float(ref_minibatch)
    d = docs_seen + np.arange(m_docs, dtype=np.float64)
    rho_d = s * m0 ** (kappa - 1.0) / (tau * m0 + d) ** kappa
    return float(-np.expm1(np.log1p(-np.minimum(rho_d, 1.0)).sum()))


def scvb0_task(bc, seed, pass_no, alpha, burnin, s_theta, tau_theta, kappa_theta):
    """The per-partition function of a round (built from plain values)."""

    def run(blocks):
        phi_norm = bc.value
        for block in blocks:
            t0 = time.perf_counter()
            if block.n_docs == 0:
                continue
            rows = phi_norm[block.terms]
            k = rows.shape[1]
            theta0 = init_doc_stats(
                uniform_matrix(seed, STREAM_DOC_INIT + pass_no, block.doc_ids, k, rows.dtype),
                block.doc_lengths())
            nhat = scvb0_block(block.indptr, block.local, block.counts.astype(rows.dtype,
                               copy=False), rows, theta0, alpha, burnin, s_theta, tau_theta,
                               kappa_theta)
            yield TopicStats(block.terms, nhat,
                             extra={"tokens": block.n_tokens, "docs": block.n_docs},
                             timings={"kernel": time.perf_counter() - t0})

    return run


@register
class SCVB0(Mode):
    name = "scvb0"

    def __init__(self, corpus, params, initial_topic_word=None):
        super().__init__(corpus, params, initial_topic_word)
        v, k = corpus.vocab_size, params.k
        c = corpus.n_train_tokens
        if initial_topic_word is not None:
            base = np.array(initial_topic_word, dtype=np.float64)
        else:
            rng = np.random.default_rng([params.seed, STREAM_INIT_PHI])
            base = rng.random((v, k))
            base *= c / base.sum()
        self.base = base  # N^Φ = scale · base (lazy (1−ρ) decay)
        self.scale = 1.0
        self.nz = base.sum(axis=0)
        self.w_eta = v * params.eta

    def broadcast_value(self, t):
        phi_norm = (self.base * self.scale + self.params.eta) / (self.nz + self.w_eta)
        return phi_norm.astype(self.dtype)

    def make_task(self, bc, t):
        p = self.params
        return scvb0_task(bc, p.seed, t // self.rounds_per_pass, p.alpha, p.burnin, p.s_theta,
                          p.tau_theta, p.kappa_theta)

    def update(self, stats, t):
        p = self.params
        s = self.slice_of_round(t)
        m_docs = int(self.corpus.slice_docs[s])
        m_tokens = float(self.corpus.slice_tokens[s])
        rho = round_step(self.docs_seen, m_docs, p.s_phi, p.tau_phi, p.kappa_phi,
                         p.schedule_minibatch)
        if m_tokens > 0:
            factor = rho * self.corpus.n_train_tokens / m_tokens  # ρ · C/|M|  (Eq. 7-8)
            self.scale *= 1.0 - rho
            self.base[stats.terms] += (factor / self.scale) * stats.rows
            self.nz = (1.0 - rho) * self.nz + factor * stats.totals
            if self.scale < 1e-6:
                self.base *= self.scale
                self.scale = 1.0
        self.docs_seen += m_docs
        self.tokens_seen += m_tokens
        return {"rho": rho, "slice": s, "docs": m_docs}

    def topic_word(self):
        return self.base * self.scale
