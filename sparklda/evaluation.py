"""Held-out quality, shared by every mode and peer: two evaluators.

**Document completion** (``evaluator="completion"``, the default; section 6 of
Foulds et al. 2013): each held-out document's tokens are split in half at random
(seeded, :func:`sparklda.block.split_halves`); θ is inferred on the first half with
the topics fixed (:func:`sparklda.kernels.foldin_block`); the score is the mean
per-token log Σ_k θ_k φ̂_kw over the second half. It measures how well the model
predicts the rest of a document given its start.

**Left-to-right** (``evaluator="left_to_right"``; Wallach, Murray, Salakhutdinov &
Mimno 2009, Algorithm 3, as the sequential Monte Carlo of the lecture notes
``003_...``, section 5): an estimate of log p(w_d | Φ̂, α) of each *whole* held-out
document, with θ integrated out under its Dirichlet prior, by ``particles`` particles
(:mod:`sparklda.kernels.left_to_right`); the score is its sum over the documents per
token. It measures how probable the model finds unseen documents. Its random choices
are keyed by a seed and each document's id, so the score does not depend on the
partitioning or on task retries.

Higher is better for both; perplexity is exp(−score). The two are not comparable to
each other (different tokens, different question). The topics enter only as φ̂, so a
model from any mode, or from Spark MLlib, is scored by the same code on the same
documents. The per-block arithmetic is :mod:`sparklda.execution.scoring`; the backend
of the input runs it on the executors.
"""

from __future__ import annotations

import numpy as np

from .execution import EVALUATORS, HeldoutScore, backend_of, evaluator_spec
from .stats import normalize_topics

__all__ = [
    "EVALUATORS",
    "HeldoutScore",
    "completion_loglik",
    "heldout_loglik",
    "left_to_right_loglik",
    "normalize_topics",
]


def completion_loglik(
    heldout, phi: np.ndarray, alpha: float, max_iter: int = 100, tol: float = 1e-4
) -> HeldoutScore:
    """Held-out per-token log-likelihood by document completion, on Spark.

    Parameters
    ----------
    heldout : the held-out blocks: an RDD of :class:`sparklda.block.HeldoutBlock`
        (:func:`sparklda.corpus.heldout_blocks`, a classic corpus's ``heldout``) or a
        DataFrame of :data:`sparklda.corpus.HELDOUT_SCHEMA` (a DataFrame-layout
        corpus's ``heldout``).
    phi : array (V, K)
        φ̂ with columns summing to one (column k is topic k's distribution
        over the vocabulary); float32 or float64.
    alpha : float or float array (K,)
        The document-topic prior α used for fold-in (a K-vector when learned).
    """
    return backend_of(heldout).score_heldout(heldout, phi, alpha, max_iter, tol)


def left_to_right_loglik(
    heldout, phi: np.ndarray, alpha: float, particles: int = 10, seed: int = 0
) -> HeldoutScore:
    """Held-out per-token log-likelihood of the whole documents by the left-to-right
    particle estimate, on Spark: Σ_d log p̂(w_d | Φ̂, α) over their tokens.

    ``heldout``, ``phi`` and ``alpha`` as for :func:`completion_loglik` (the two halves
    of each held-out document are scored together); ``particles``: R, the particles per
    document (more: less variance, cost proportional); ``seed``: with each document's
    id, the key of its random stream (token order, particles).
    """
    ltr = evaluator_spec("left_to_right", particles, seed, "left_to_right_loglik")
    return backend_of(heldout).score_heldout(heldout, phi, alpha, ltr=ltr)


def heldout_loglik(
    heldout,
    phi: np.ndarray,
    alpha: float,
    evaluator: str = "completion",
    particles: int = 10,
    seed: int = 0,
    max_iter: int = 100,
    tol: float = 1e-4,
) -> HeldoutScore:
    """The held-out score of ``evaluator`` (one of :data:`EVALUATORS`):
    :func:`completion_loglik` (``max_iter``, ``tol``) or :func:`left_to_right_loglik`
    (``particles``, ``seed``)."""
    ltr = evaluator_spec(evaluator, particles, seed, "heldout_loglik")
    return backend_of(heldout).score_heldout(heldout, phi, alpha, max_iter, tol, ltr)
