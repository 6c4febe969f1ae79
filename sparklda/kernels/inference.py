"""Fold-in of documents against fixed topics, and document-completion scoring.

Shared by every mode's evaluation and by ``transform``: the topics enter only
as φ̂ rows (topic-word probabilities), so models from any mode, or from Spark
MLlib, are scored by the same code. References: ``tests/reference.py``.
"""

from __future__ import annotations

from typing import Any

import numba
import numpy as np
from numpy.typing import NDArray

from .config import FASTMATH, JIT_OPTIONS
from .lanes import lane_dot
from .priors import alpha_vector


@numba.njit(fastmath=FASTMATH, **JIT_OPTIONS)
def _foldin_block(
    indptr: NDArray[np.int64],
    local: NDArray[np.int32],
    counts: NDArray[np.floating[Any]],
    phi: NDArray[np.floating[Any]],
    alpha: NDArray[np.floating[Any]],
    alpha_sum: float,
    max_iter: int,
    tol: np.floating[Any],
    theta: NDArray[np.floating[Any]],
) -> NDArray[np.floating[Any]]:
    n_docs = indptr.shape[0] - 1
    n_topics = phi.shape[1]
    zero = tol - tol
    # Bit-deterministic (docs/architecture.md): no fast-math, so the loops over
    # topics round the same on LLVM's vectorised and scalar paths, and each
    # normaliser is summed by lanes.lane_dot in a fixed order.
    ntheta = np.empty(n_topics, dtype=phi.dtype)
    new = np.empty(n_topics, dtype=phi.dtype)
    shifted = np.empty(n_topics, dtype=phi.dtype)  # N^Θ_j + α
    for j in range(n_docs):
        start = indptr[j]
        end = indptr[j + 1]
        c_j = zero
        for p in range(start, end):
            c_j += counts[p]
        for k in range(n_topics):
            ntheta[k] = c_j / n_topics
        if end > start:
            for _ in range(max_iter):
                for k in range(n_topics):
                    new[k] = zero
                    shifted[k] = ntheta[k] + alpha[k]
                for p in range(start, end):
                    # γ ∝ φ̂[u] ⊙ (N^Θ_j + α); its sum is the normaliser
                    row = phi[local[p]]
                    norm = lane_dot(row, shifted, n_topics)
                    if norm > zero:
                        w = counts[p] / norm
                        for k in range(n_topics):
                            new[k] += w * row[k] * shifted[k]
                change = zero
                for k in range(n_topics):
                    change += abs(new[k] - ntheta[k])
                    ntheta[k] = new[k]
                if change <= tol * c_j:
                    break
        denom = c_j + alpha_sum
        for k in range(n_topics):
            theta[j, k] = (ntheta[k] + alpha[k]) / denom
    return theta


def foldin_block(
    indptr: NDArray[np.integer[Any]],
    local: NDArray[np.integer[Any]],
    counts: NDArray[np.floating[Any]],
    phi: NDArray[np.floating[Any]],
    alpha: float | NDArray[np.floating[Any]],
    max_iter: int = 100,
    tol: float = 1e-4,
) -> NDArray[np.floating[Any]]:
    """Infer each document's topic proportions θ with the topics held fixed.

    Fixed-point (EM) iterations on the document statistics N^Θ_j, the SCVB0
    document update with φ̂ fixed and ρ^Θ = 1:

    * γ_pk ∝ φ̂[u_p, k] · (N^Θ_jk + α_k)
    * N^Θ_j ← Σ_p m_p γ_p, until Σ_k |ΔN^Θ_jk| ≤ tol · C_j or ``max_iter``
    * θ_j = (N^Θ_j + α) / (C_j + α0), α0 = Σ_k α_k (Kα for a symmetric α)

    Documents with no tokens get θ = α/α0 (the prior mean: 1/K for a symmetric α).

    Parameters
    ----------
    indptr, local, counts : CSR block (see :func:`sparklda.kernels.scvb0_block`).
    phi : float array (U, K)
        φ̂_kw for the block's distinct terms (rows are terms).
    alpha : float or float array (K,)
        α: a number (symmetric) or a K-vector (a learned asymmetric α).

    Returns
    -------
    theta : float array (D, K), rows summing to one.
    """
    dtype = phi.dtype
    cast = dtype.type
    n_topics = phi.shape[1]
    theta = np.empty((len(indptr) - 1, n_topics), dtype=dtype)
    alphas = alpha_vector(alpha, n_topics, dtype)
    if n_topics and np.all(alphas == alphas[0]):
        # K·α, as for a symmetric α (a float64 product of the cast α)
        alpha_sum = float(n_topics) * float(alphas[0])
    else:
        alpha_sum = float(alphas.astype(np.float64).sum())
    return _foldin_block(
        np.ascontiguousarray(indptr, dtype=np.int64),
        np.ascontiguousarray(local, dtype=np.int32),
        np.ascontiguousarray(counts, dtype=dtype),
        np.ascontiguousarray(phi),
        alphas,
        alpha_sum,
        int(max_iter),
        cast(tol),
        theta,
    )


@numba.njit(**JIT_OPTIONS)
def _loglik_block(
    indptr: NDArray[np.int64],
    local: NDArray[np.int32],
    counts: NDArray[np.floating[Any]],
    phi: NDArray[np.floating[Any]],
    theta: NDArray[np.floating[Any]],
) -> tuple[float, float]:
    # float64 sums in index order, no fast-math: bit-deterministic
    n_docs = indptr.shape[0] - 1
    n_topics = phi.shape[1]
    total = 0.0
    tokens = 0.0
    for j in range(n_docs):
        for p in range(indptr[j], indptr[j + 1]):
            u = local[p]
            s = 0.0
            for k in range(n_topics):
                s += float(theta[j, k]) * float(phi[u, k])
            total += float(counts[p]) * np.log(s)
            tokens += float(counts[p])
    return total, tokens


def loglik_block(
    indptr: NDArray[np.integer[Any]],
    local: NDArray[np.integer[Any]],
    counts: NDArray[np.floating[Any]],
    phi: NDArray[np.floating[Any]],
    theta: NDArray[np.floating[Any]],
) -> tuple[float, float]:
    """Log-likelihood of a block's tokens under θ and φ̂, in float64.

    Equivalent to ``sum_p counts[p] * log(theta[doc(p)] @ phi[local[p]])``;
    returns ``(total log-likelihood, number of tokens)``.
    """
    return _loglik_block(
        np.ascontiguousarray(indptr, dtype=np.int64),
        np.ascontiguousarray(local, dtype=np.int32),
        np.ascontiguousarray(counts),
        np.ascontiguousarray(phi),
        np.ascontiguousarray(theta),
    )
