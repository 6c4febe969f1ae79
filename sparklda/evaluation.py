"""Held-out quality by document completion, shared by every mode and peer.

Section 6 of Foulds et al. (2013): each held-out document's tokens are split
in half at random (seeded, :func:`sparklda.block.split_halves`); θ is
inferred on the first half with the topics fixed
(:func:`sparklda.kernels.foldin_block`); the score is the mean per-token
log Σ_k θ_k φ̂_kw over the second half. Higher is better; perplexity is
exp(−score). The topics enter only as φ̂, so a model from any mode, or from
Spark MLlib, is scored by the same code on the same documents. The per-block
arithmetic is :mod:`sparklda.execution.scoring`; the backend of the input runs it.
"""

from __future__ import annotations

import numpy as np

from .execution import HeldoutScore, backend_of
from .stats import normalize_topics

__all__ = ["HeldoutScore", "completion_loglik", "normalize_topics"]


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
