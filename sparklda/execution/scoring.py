"""Document completion's arithmetic over held-out blocks (pure numpy over
:class:`~sparklda.block.HeldoutBlock` s), which every backend runs in its tasks, and
the score it adds up to (:class:`HeldoutScore`). See :mod:`sparklda.evaluation`."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..kernels import foldin_block, loglik_block
from ..kernels.warm import settle_heap

__all__ = ["HeldoutScore", "alpha_arg", "check_phi", "score_blocks", "score_partition"]


@dataclass
class HeldoutScore:
    loglik_per_token: float
    tokens: float
    documents: int

    @property
    def perplexity(self) -> float:
        return float(np.exp(-self.loglik_per_token))

    @classmethod
    def from_parts(cls, parts) -> HeldoutScore:
        """The score of the (log-likelihood, tokens, documents) of each part."""
        total = sum(p[0] for p in parts)
        tokens = sum(p[1] for p in parts)
        docs = sum(p[2] for p in parts)
        if tokens == 0:
            raise ValueError("the held-out set has no target tokens to score")
        return cls(total / tokens, tokens, docs)

    def as_dict(self) -> dict:
        return {
            "heldout_loglik": self.loglik_per_token,
            "perplexity": self.perplexity,
            "heldout_tokens": self.tokens,
            "heldout_documents": self.documents,
        }


def check_phi(phi) -> np.ndarray:
    """``phi`` as an array, which must be a finite non-negative (V, K) matrix."""
    phi = np.asarray(phi)
    if phi.ndim != 2 or not np.all(np.isfinite(phi)) or (phi < 0).any():
        raise ValueError("phi must be a finite non-negative (V, K) matrix")
    return phi


def score_partition(phi_holder, alpha, max_iter, tol):
    """Per-partition function: :func:`score_blocks` of a partition's held-out blocks with
    ``phi_holder.value`` (a broadcast variable, or any holder of ``.value``)."""

    def score(it):
        settle_heap()
        yield score_blocks(phi_holder.value, it, alpha, max_iter, tol)

    return score


def score_blocks(phi_all, blocks, alpha, max_iter, tol):
    """(log-likelihood of the target halves, their tokens, documents) of
    :class:`HeldoutBlock` s."""
    total = tokens = 0.0
    docs = 0
    for hb in blocks:
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
    return total, tokens, docs


def alpha_arg(alpha):
    """α as the fold-in kernel takes it: a float, or a float64 K-vector."""
    a = np.asarray(alpha, dtype=np.float64)
    return float(a) if a.ndim == 0 else a
