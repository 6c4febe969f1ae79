"""Online variational Bayes E-step (Hoffman, Blei & Bach 2010) over a clumped block.

Pure function over numpy arrays; no Spark, no I/O. The reference written
plainly from the paper is ``tests/reference_modes.py::svb_estep_block``.
"""

from __future__ import annotations

import math
from typing import Any

import numba
import numpy as np
from numpy.typing import NDArray

from .config import FASTMATH, JIT_OPTIONS
from .lanes import lane_dot
from .priors import alpha_vector
from .special import digamma


@numba.njit(fastmath=FASTMATH, **JIT_OPTIONS)
def _exp_dirichlet_expectation(
    gamma: NDArray[np.floating[Any]], j: int, out: NDArray[np.floating[Any]]
) -> None:
    # out = exp(ψ(γ_j) − ψ(Σ γ_j)), digamma in float64, stored in out's dtype.
    # Both loops run in index order: the sum has no fast-math to reorder it,
    # and ψ's data-dependent loops keep LLVM from vectorising the second one.
    n_topics = gamma.shape[1]
    total = 0.0
    for k in range(n_topics):
        total += np.float64(gamma[j, k])
    psi_total = digamma(total)
    for k in range(n_topics):
        out[k] = math.exp(digamma(np.float64(gamma[j, k])) - psi_total)


@numba.njit(fastmath=FASTMATH, **JIT_OPTIONS)
def _svb_estep_block(
    indptr: NDArray[np.int64],
    local: NDArray[np.int32],
    counts: NDArray[np.floating[Any]],
    expelogbeta: NDArray[np.floating[Any]],
    alpha: NDArray[np.floating[Any]],
    gamma: NDArray[np.floating[Any]],
    max_iter: int,
    tol: np.floating[Any],
    tiny: np.floating[Any],
    sstats: NDArray[np.floating[Any]],
) -> tuple[NDArray[np.floating[Any]], NDArray[np.floating[Any]]]:
    # gamma arrives holding gamma_init and is overwritten row by row.
    # Bit-deterministic (docs/architecture.md): no fast-math, so the loops over
    # topics round the same on LLVM's vectorised and scalar paths, and the
    # normalisers φnorm are dot products summed by lanes.lane_dot in a fixed
    # order; the other sums over topics run in index order.
    n_docs = indptr.shape[0] - 1
    n_topics = expelogbeta.shape[1]
    zero = tol - tol
    etheta = np.empty(n_topics, dtype=expelogbeta.dtype)
    acc = np.empty(n_topics, dtype=expelogbeta.dtype)
    for j in range(n_docs):
        start = indptr[j]
        end = indptr[j + 1]
        if start == end:
            for k in range(n_topics):
                gamma[j, k] = alpha[k]
            continue
        _exp_dirichlet_expectation(gamma, j, etheta)
        for _ in range(max_iter):
            for k in range(n_topics):
                acc[k] = zero
            for p in range(start, end):
                u = local[p]
                phinorm = lane_dot(etheta, expelogbeta[u], n_topics)
                w = counts[p] / (phinorm + tiny)
                for k in range(n_topics):
                    acc[k] += w * expelogbeta[u, k]
            change = zero
            for k in range(n_topics):
                g = alpha[k] + etheta[k] * acc[k]
                change += abs(g - gamma[j, k])
                gamma[j, k] = g
            _exp_dirichlet_expectation(gamma, j, etheta)
            if change / n_topics < tol:
                break
        for p in range(start, end):
            u = local[p]
            phinorm = lane_dot(etheta, expelogbeta[u], n_topics)
            w = counts[p] / (phinorm + tiny)
            for k in range(n_topics):
                sstats[u, k] += w * etheta[k] * expelogbeta[u, k]
    return gamma, sstats


def svb_estep_block(
    indptr: NDArray[np.integer[Any]],
    local: NDArray[np.integer[Any]],
    counts: NDArray[np.floating[Any]],
    exp_elogbeta: NDArray[np.floating[Any]],
    alpha: float | NDArray[np.floating[Any]],
    gamma_init: NDArray[np.floating[Any]],
    max_iter: int = 100,
    tol: float = 1e-3,
) -> tuple[NDArray[np.floating[Any]], NDArray[np.floating[Any]]]:
    """Online VB E-step for a block of documents (Algorithm 2 of Hoffman et al. 2010).

    Per document d with pairs p = (d, u_p) of count m_p, starting from
    γ_d = ``gamma_init[d]`` (as Hoffman's ``onlineldavb.py`` ``do_e_step``,
    clumped, with φ handled implicitly):

    * expElogθ = exp(ψ(γ_d) − ψ(Σ_k γ_dk))                 (E_q[log θ], Eq. 6)
    * φnorm_p = expElogθ · expElogβ[u_p] + ε               (normaliser of φ_dwk)
    * γ_d ← α + expElogθ ⊙ Σ_p (m_p / φnorm_p) expElogβ[u_p]
      (γ_dk = α + Σ_w n_dw φ_dwk, the E-step of Algorithm 1 and 2)
    * repeat the two lines above (expElogθ recomputed from the new γ_d)
      until mean_k |Δγ_dk| < ``tol`` or ``max_iter`` updates;
    * sstats[u_p] += m_p · expElogθ ⊙ expElogβ[u_p] / φnorm_p, i.e.
      Σ_d n_dw φ_dwk with the final γ_d.

    ε is Hoffman's 1e-100 guard against 0/0 in float64 and 1e-30 in float32
    (where 1e-100 would be 0). Documents with no tokens get γ_d = α (the
    prior, the fixed point of the update) and add nothing to sstats.
    ψ is evaluated in float64 (:func:`sparklda.kernels.special.digamma`);
    everything else runs in ``exp_elogbeta``'s dtype.

    Parameters
    ----------
    indptr : int64 array (D+1,)
        CSR row pointers of the block's documents (empty documents allowed).
    local : int32 array (nnz,)
        Row of ``exp_elogbeta`` (the block's U distinct terms) of each pair.
    counts : float array (nnz,)
        Count m of each (document, term) pair.
    exp_elogbeta : float32 or float64 array (U, K)
        exp(E_q[log β_kw]) = exp(ψ(λ_kw) − ψ(Σ_w' λ_kw')) for the block's
        terms (rows are terms). Its dtype sets the dtype of the computation.
    alpha : float or float array (K,)
        α, the document-topic prior: a number (symmetric) or a K-vector (a
        learned asymmetric α; equal values give the bits of the number).
    gamma_init : float array (D, K)
        Initial γ of each document (Hoffman draws Gamma(100, 1/100)); not
        modified.
    max_iter : int
        Maximum number of γ updates per document (Hoffman: 100).
    tol : float
        Stop when the mean absolute change of γ_d over topics is below this
        (Hoffman's ``meanchangethresh``, 1e-3).

    Returns
    -------
    gamma : float array (D, K)
        Final variational Dirichlet parameters γ_d of each document.
    sstats : float array (U, K)
        Σ_d Σ_p m_p φ_pk by term row, **already multiplied by expElogβ**
        (Hoffman's ``sstats * self._expElogbeta``). Each token's φ sums to
        one, so ``sstats.sum()`` is the block's token count. The driver's
        update is λ ← (1 − ρ_t) λ + ρ_t (η + D/|S| · sstats), summed over
        blocks (Eq. 7-8 / Algorithm 2).

    References
    ----------
    Hoffman, Blei & Bach (2010), Online learning for latent Dirichlet
    allocation, Algorithm 2 (E step) and Eq. 6; ``onlineldavb.py``.

    Equivalent to ``tests/reference_modes.py::svb_estep_block`` (plain
    Python loops with ``scipy.special.digamma``).
    """
    exp_elogbeta = np.ascontiguousarray(exp_elogbeta)
    dtype = exp_elogbeta.dtype
    if dtype not in (np.float32, np.float64):
        exp_elogbeta = exp_elogbeta.astype(np.float64)
        dtype = exp_elogbeta.dtype
    cast = dtype.type
    n_docs = len(indptr) - 1
    gamma = np.array(gamma_init, dtype=dtype, order="C", copy=True)
    if gamma.shape != (n_docs, exp_elogbeta.shape[1]):
        raise ValueError(
            f"svb_estep_block: 'gamma_init' must have shape (D, K) = "
            f"({n_docs}, {exp_elogbeta.shape[1]}), got {gamma.shape}."
        )
    tiny = cast(1e-100) if dtype == np.float64 else cast(1e-30)
    sstats = np.zeros(exp_elogbeta.shape, dtype=dtype)
    return _svb_estep_block(
        np.ascontiguousarray(indptr, dtype=np.int64),
        np.ascontiguousarray(local, dtype=np.int32),
        np.ascontiguousarray(counts, dtype=dtype),
        exp_elogbeta,
        alpha_vector(alpha, exp_elogbeta.shape[1], dtype),
        gamma,
        int(max_iter),
        cast(tol),
        tiny,
        sstats,
    )
