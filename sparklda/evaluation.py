"""Held-out quality by document completion, shared by every mode and peer.

Section 6 of Foulds et al. (2013): each held-out document's tokens are split
in half at random (seeded, :func:`sparklda.block.split_halves`); θ is
inferred on the first half with the topics fixed
(:func:`sparklda.kernels.foldin_block`); the score is the mean per-token
log Σ_k θ_k φ̂_kw over the second half. Higher is better; perplexity is
exp(−score). The topics enter only as φ̂, so a model from any mode, or from
Spark MLlib, is scored by the same code on the same documents.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .kernels import foldin_block, loglik_block
from .stats import normalize_topics

__all__ = ["HeldoutScore", "completion_loglik", "normalize_topics"]


@dataclass
class HeldoutScore:
    loglik_per_token: float
    tokens: float
    documents: int

    @property
    def perplexity(self) -> float:
        return float(np.exp(-self.loglik_per_token))

    def as_dict(self) -> dict:
        return {
            "heldout_loglik": self.loglik_per_token,
            "perplexity": self.perplexity,
            "heldout_tokens": self.tokens,
            "heldout_documents": self.documents,
        }


def _score_partition(phi_bc, alpha, max_iter, tol):
    def score(it):
        phi_all = phi_bc.value
        total = tokens = 0.0
        docs = 0
        for hb in it:
            obs, tgt = hb.observed, hb.target
            if hb.n_docs == 0:
                continue
            # both halves against the union of their terms, rows gathered once
            terms = np.union1d(obs.terms, tgt.terms)
            phi = phi_all[terms]
            loc_obs = np.searchsorted(terms, obs.terms)[obs.local]
            loc_tgt = np.searchsorted(terms, tgt.terms)[tgt.local]
            theta = foldin_block(
                obs.indptr, loc_obs, obs.counts.astype(phi.dtype), phi, alpha, max_iter, tol
            )
            # target rows follow the observed document order (same ids, same sort)
            t, n = loglik_block(tgt.indptr, loc_tgt, tgt.counts, phi, theta)
            total += t
            tokens += n
            docs += hb.n_docs
        yield total, tokens, docs

    return score


def _alpha_arg(alpha):
    """α as the fold-in kernel takes it: a float, or a float64 K-vector."""
    a = np.asarray(alpha, dtype=np.float64)
    return float(a) if a.ndim == 0 else a


def completion_loglik(
    heldout_rdd, phi: np.ndarray, alpha: float, max_iter: int = 100, tol: float = 1e-4
) -> HeldoutScore:
    """Held-out per-token log-likelihood by document completion, on Spark.

    Parameters
    ----------
    heldout_rdd : RDD of :class:`sparklda.block.HeldoutBlock`
    phi : array (V, K)
        φ̂ with columns summing to one (column k is topic k's distribution
        over the vocabulary); float32 or float64.
    alpha : float or float array (K,)
        The document-topic prior α used for fold-in (a K-vector when learned).
    """
    phi = np.asarray(phi)
    if phi.ndim != 2 or not np.all(np.isfinite(phi)) or (phi < 0).any():
        raise ValueError("phi must be a finite non-negative (V, K) matrix")
    sc = heldout_rdd.context
    bc = sc.broadcast(np.ascontiguousarray(phi))
    try:
        parts = heldout_rdd.mapPartitions(
            _score_partition(bc, _alpha_arg(alpha), max_iter, tol)
        ).collect()
    finally:
        bc.destroy()
    total = sum(p[0] for p in parts)
    tokens = sum(p[1] for p in parts)
    docs = sum(p[2] for p in parts)
    if tokens == 0:
        raise ValueError("the held-out set has no target tokens to score")
    return HeldoutScore(total / tokens, tokens, docs)
