"""The held-out evaluators' arithmetic over held-out blocks (pure numpy over
:class:`~sparklda.block.HeldoutBlock` s), which every backend runs in its tasks, and
the score it adds up to (:class:`HeldoutScore`): document completion, or the
left-to-right estimate of the whole documents (:class:`LeftToRight`). See
:mod:`sparklda.evaluation`."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..kernels import foldin_block, loglik_block
from ..kernels.left_to_right import left_to_right_block
from ..kernels.warm import settle_heap
from ..params import BY_NAME, EVALUATORS, check_param

__all__ = [
    "EVALUATORS",
    "HeldoutScore",
    "LeftToRight",
    "alpha_arg",
    "check_phi",
    "evaluator_spec",
    "score_blocks",
    "score_partition",
]


@dataclass(frozen=True)
class LeftToRight:
    """Score the held-out documents whole by the left-to-right estimate of
    log p(w_d | Φ̂, α) (:mod:`sparklda.kernels.left_to_right`) with ``particles``
    particles, each document's random stream keyed by ``seed`` and its id."""

    particles: int = 10
    seed: int = 0


def evaluator_spec(
    evaluator: str, particles: int = 10, seed: int = 0, owner: str = "LDA"
) -> LeftToRight | None:
    """What the scoring functions take for ``evaluator`` (one of
    :data:`~sparklda.params.EVALUATORS`): None for document completion, a
    :class:`LeftToRight` for the left-to-right estimate. Both values are checked against
    the parameter table (:class:`~sparklda.errors.ParamError` naming them and ``owner``)."""
    check_param(BY_NAME["evaluator"], evaluator, owner)
    if evaluator == "completion":
        return None
    check_param(BY_NAME["particles"], particles, owner)
    return LeftToRight(int(particles), int(seed))


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


def score_partition(phi_holder, alpha, max_iter, tol, ltr: LeftToRight | None = None):
    """Per-partition function: :func:`score_blocks` of a partition's held-out blocks with
    ``phi_holder.value`` (a broadcast variable, or any holder of ``.value``)."""

    def score(it):
        settle_heap()
        yield score_blocks(phi_holder.value, it, alpha, max_iter, tol, ltr)

    return score


def score_blocks(phi_all, blocks, alpha, max_iter, tol, ltr: LeftToRight | None = None):
    """(log-likelihood of the target halves, their tokens, documents) of
    :class:`HeldoutBlock` s; with ``ltr``, of the whole documents by the left-to-right
    estimate (``max_iter`` and ``tol`` unused)."""
    if ltr is not None:
        return _score_whole(phi_all, blocks, alpha, ltr)
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


def _score_whole(phi_all, blocks, alpha, ltr: LeftToRight):
    """(log-likelihood, tokens, documents) of the whole documents of
    :class:`HeldoutBlock` s by the left-to-right estimate."""
    total = tokens = 0.0
    docs = 0
    for hb in blocks:
        if hb.n_docs == 0:
            continue
        whole = hb.whole()
        per_doc = left_to_right_block(
            whole.doc_ids,
            whole.indptr,
            whole.local,
            whole.counts,
            phi_all[whole.terms],
            alpha,
            ltr.particles,
            ltr.seed,
        )
        total += float(per_doc.sum())
        tokens += float(whole.counts.astype(np.float64).sum())
        docs += hb.n_docs
    return total, tokens, docs


def alpha_arg(alpha):
    """α as the fold-in kernel takes it: a float, or a float64 K-vector."""
    a = np.asarray(alpha, dtype=np.float64)
    return float(a) if a.ndim == 0 else a
