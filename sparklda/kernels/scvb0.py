"""SCVB0 per-document token passes (Foulds et al. 2013, Algorithm 2).

Pure functions over numpy arrays; no Spark, no I/O. The reference written
plainly from the paper's equations is ``tests/reference.py::scvb0_block``.
"""

from __future__ import annotations

import numba
import numpy as np

from .config import FASTMATH, JIT_OPTIONS


@numba.njit(fastmath=FASTMATH, **JIT_OPTIONS)
def _scvb0_block(indptr, local, counts, phi_norm, theta_init, alpha, burnin,
                 s_theta, tau_theta, kappa_theta, nhat):
    n_docs = indptr.shape[0] - 1
    n_topics = phi_norm.shape[1]
    zero = alpha - alpha
    one = zero + 1
    ntheta = np.empty(n_topics, dtype=phi_norm.dtype)
    gamma = np.empty(n_topics, dtype=phi_norm.dtype)
    for j in range(n_docs):
        start = indptr[j]
        end = indptr[j + 1]
        if start == end:
            continue
        c_j = zero
        for p in range(start, end):
            c_j += counts[p]
        for k in range(n_topics):
            ntheta[k] = theta_init[j, k]
        t = zero
        for sweep in range(burnin + 1):
            last = sweep == burnin
            for p in range(start, end):
                u = local[p]
                m = counts[p]
                norm = zero
                for k in range(n_topics):
                    g = phi_norm[u, k] * (ntheta[k] + alpha)
                    gamma[k] = g
                    norm += g
                inv = one / norm
                rho = s_theta / (tau_theta + t) ** kappa_theta
                decay = (one - rho) ** m
                a = c_j * (one - decay) * inv
                for k in range(n_topics):
                    ntheta[k] = decay * ntheta[k] + a * gamma[k]
                if last:
                    b = m * inv
                    for k in range(n_topics):
                        nhat[u, k] += b * gamma[k]
                t += m
    return nhat


def scvb0_block(indptr, local, counts, phi_norm, theta_init, alpha, burnin=1,
                s_theta=1.0, tau_theta=10.0, kappa_theta=0.9):
    """Run SCVB0's burn-in and accumulating passes over a block of documents.

    For each document j (tokens clumped as distinct terms u with counts m),
    ``burnin`` passes update N^Θ_j only, then a last pass updates N^Θ_j and
    accumulates m·γ into the block's N̂^Φ rows:

    * γ_jk ∝ φ_norm[u, k] · (N^Θ_jk + α)                 (Eq. 5, normalised)
    * N^Θ_j ← (1−ρ)^m N^Θ_j + C_j γ (1 − (1−ρ)^m)          (Eq. 6 with Eq. 9)
    * ρ = s_θ / (τ_θ + t)^κ_θ, t the tokens of document j seen so far
      (counted across passes, advanced by m after each clump)
    * N̂^Φ[u] += m · γ (last pass only)

    Parameters
    ----------
    indptr : int64 array (D+1,)
        CSR row pointers of the block's documents.
    local : int32 array (nnz,)
        Row of ``phi_norm`` for each (document, distinct term) pair.
    counts : float array (nnz,)
        Count m of each pair (same dtype as ``phi_norm``).
    phi_norm : float array (U, K)
        (N^Φ_wk + η) / (N^Z_k + Wη) for the block's U distinct terms: what
        is constant within a round, computed once per round.
    theta_init : float array (D, K)
        Initial N^Θ_j of each document (the "randomly initialize N^Θ").
    alpha : float
        α, the document-topic prior.
    burnin : int
        Burn-in passes before the accumulating pass.
    s_theta, tau_theta, kappa_theta : float
        ρ^Θ schedule s/(τ+t)^κ (paper: 1, 10, 0.9).

    Returns
    -------
    nhat : float array (U, K)
        Σ over the block's last-pass clumps of m·γ, by term row. The caller
        scales it by C/|M| (Eq. 7-8) and sums rows over partitions;
        ``nhat.sum(0)`` is the block's share of N̂^Z.

    Equivalent to ``tests/reference.py::scvb0_block`` (plain Python loops).
    """
    dtype = phi_norm.dtype
    cast = dtype.type
    nhat = np.zeros(phi_norm.shape, dtype=dtype)
    return _scvb0_block(
        np.ascontiguousarray(indptr, dtype=np.int64),
        np.ascontiguousarray(local, dtype=np.int32),
        np.ascontiguousarray(counts, dtype=dtype),
        np.ascontiguousarray(phi_norm),
        np.ascontiguousarray(theta_init, dtype=dtype),
        cast(alpha), int(burnin), cast(s_theta), cast(tau_theta), cast(kappa_theta),
        nhat,
    )


def init_doc_stats(uniforms: np.ndarray, doc_lengths: np.ndarray) -> np.ndarray:
    """Random N^Θ initialisation: row j is ``uniforms[j]`` rescaled to sum to C_j.

    Equivalent to ``uniforms / uniforms.sum(1, keepdims=True) * doc_lengths[:, None]``.
    """
    u = np.asarray(uniforms)
    return u / u.sum(axis=1, keepdims=True) * np.asarray(doc_lengths, dtype=u.dtype)[:, None]
