"""Batch MAP-EM's iteration over a block of clumped documents: Jacobi updates, as
Spark MLlib's EM optimizer (Asuncion, Welling, Smyth & Teh 2009, the MAP row of their
Table 1; lecture notes 003, section 4; Foulds et al. 2013, Appendix A).

Every pair's responsibilities are computed from the previous iteration's counts (the
round's N^Φ, N^Z and the block's own N^Θ of the previous iteration), never from counts
updated during the sweep, so γ need not be kept: the E-step and the M-step's sums are
one pass, and what a block carries from one iteration to the next is N^Θ, K numbers per
document. Pure functions over numpy arrays; no Spark, no I/O. The reference written
plainly from the equations is ``tests/reference_modes.py::map_block``.
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
def _map_block(
    indptr: NDArray[np.int64],
    local: NDArray[np.int32],
    counts: NDArray[np.float64],
    nphi: NDArray[np.floating[Any]],
    nz: NDArray[np.floating[Any]],
    theta_old: NDArray[np.float64],
    alpha: NDArray[np.floating[Any]],
    eta: np.floating[Any],
    w_eta: np.floating[Any],
    ntheta: NDArray[np.float64],
    nphi_out: NDArray[np.float64],
) -> None:
    n_docs = indptr.shape[0] - 1
    n_terms = nphi.shape[0]
    n_topics = nphi.shape[1]
    zero = eta - eta
    # φ̂ rows of the block's terms, (N^Φ_uk + η − 1) / (N^Z_k + W(η − 1)): once per block
    # (counts floored at 0, against rounding); θ of one document in a row of its own
    # workspace, at a fixed distance (docs/architecture.md, "Determinism")
    phi = np.empty((n_terms, n_topics), dtype=nphi.dtype)
    for u in range(n_terms):
        for k in range(n_topics):
            phi[u, k] = (max(nphi[u, k], zero) + eta) / (max(nz[k], zero) + w_eta)
    work = np.empty(n_topics + 64, dtype=nphi.dtype)
    theta = work[0:n_topics]
    for j in range(n_docs):
        start = indptr[j]
        end = indptr[j + 1]
        if start == end:
            continue
        for k in range(n_topics):
            theta[k] = max(theta_old[j, k], zero) + alpha[k]
        for p in range(start, end):
            u = local[p]
            # γ_pk = φ̂_uk θ_jk / Σ_k φ̂_uk θ_jk, and the clump's m·γ_p to both sums
            scale = counts[p] / lane_dot(phi[u], theta, n_topics)
            for k in range(n_topics):
                g = scale * (phi[u, k] * theta[k])
                ntheta[j, k] += g
                nphi_out[u, k] += g


def map_block(
    indptr: NDArray[np.integer[Any]],
    local: NDArray[np.integer[Any]],
    counts: NDArray[np.number[Any]],
    nphi: NDArray[np.floating[Any]],
    nz: NDArray[np.floating[Any]],
    ntheta: NDArray[np.floating[Any]],
    alpha: float | NDArray[np.floating[Any]],
    eta: float,
    w_eta: float,
    out: NDArray[np.float64] | None = None,
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """One MAP-EM iteration over a block of documents: the new N^Θ of its documents and
    its share of the new N^Φ.

    For each document j and each of its pairs p = (j, u) with count m (Jacobi: every
    count is the previous iteration's, as in MLlib's EM):

        γ_pk ∝ (N^Φ_uk + η − 1) / (N^Z_k + W(η − 1)) · (N^Θ_jk + α − 1),

    and the M-step's sums N^Θ_jk = Σ_{p in j} m_p γ_pk and N^Φ_uk = Σ_{p of u} m_p γ_pk
    (this block's share; the driver adds up the blocks'). The caller passes the MAP
    pseudo-counts α − 1, η − 1 and W(η − 1) as ``alpha``, ``eta`` and ``w_eta``; the
    counts are floored at 0, so with α, η > 1 no factor is negative.

    Parameters
    ----------
    indptr : int64 array (D+1,)
        CSR row pointers of the block's documents (empty documents allowed).
    local : int32 array (nnz,)
        Row of ``nphi`` (the block's U distinct terms) of each pair.
    counts : array (nnz,)
        Count m of each (document, term) pair.
    nphi : float32 or float64 array (U, K)
        N^Φ rows of the block's terms as they stood after the previous iteration. Its
        dtype is the dtype of the responsibilities' computation; the sums are float64.
    nz : float array (K,)
        N^Z after the previous iteration.
    ntheta : float array (D, K)
        The block's N^Θ after the previous iteration (not modified).
    alpha : float or float array (K,)
        α − 1 (a number or a K-vector).
    eta : float
        η − 1.
    w_eta : float
        W(η − 1), with W the full vocabulary size (not U).
    out : float64 array (D + U, K), optional
        Where to write the result (zeroed first): N^Θ in its first D rows, N^Φ below.

    Returns
    -------
    tuple
        ``(ntheta, nphi)``: the new N^Θ (D, K) and this block's N^Φ rows (U, K), float64
        (views of one (D + U, K) array, ``out`` if given). Σ ntheta = Σ nphi = Σ m.

    Raises
    ------
    ValueError
        If the shapes disagree or ``nphi`` is not float32/float64.

    Equivalent to ``tests/reference_modes.py::map_block``.

    Examples
    --------
    One document with two terms (3 and 1 tokens), one empty document, K = 2, W = 2:

    >>> import numpy as np
    >>> indptr, local = np.array([0, 2, 2]), np.array([0, 1], dtype=np.int32)
    >>> nphi = np.array([[2.0, 1.0], [0.5, 0.5]])
    >>> ntheta, rows = map_block(indptr, local, np.array([3.0, 1.0]), nphi, nphi.sum(0),
    ...                          np.array([[2.5, 1.5], [0.0, 0.0]]), 0.5, 0.1, 0.2)
    >>> float(ntheta.sum()), float(rows.sum()), ntheta[1].tolist()
    (4.0, 4.0, [0.0, 0.0])
    """
    nphi = np.asarray(nphi)
    if nphi.dtype not in (np.float32, np.float64) or nphi.ndim != 2:
        raise ValueError(
            "map_block: 'nphi' must be a (U, K) float32 or float64 array, "
            f"got shape {nphi.shape} of dtype {nphi.dtype}."
        )
    dtype = nphi.dtype
    n_terms, n_topics = nphi.shape
    n_docs = len(indptr) - 1
    nz = np.ascontiguousarray(nz, dtype=dtype)
    theta_old = np.ascontiguousarray(ntheta, dtype=np.float64)
    if nz.shape != (n_topics,) or theta_old.shape != (n_docs, n_topics):
        raise ValueError(
            f"map_block: 'nz' must be ({n_topics},) and 'ntheta' ({n_docs}, {n_topics}), "
            f"got {nz.shape} and {theta_old.shape}."
        )
    if len(counts) != len(local) or len(local) != (indptr[-1] if n_docs else 0):
        raise ValueError(
            f"map_block: 'local' and 'counts' must have the block's {int(indptr[-1])} pairs, "
            f"got {len(local)} and {len(counts)}."
        )
    shape = (n_docs + n_terms, n_topics)
    if out is None:
        out = np.zeros(shape, dtype=np.float64)
    elif out.shape != shape or out.dtype != np.float64 or not out.flags.c_contiguous:
        raise ValueError(f"map_block: 'out' must be a C-contiguous float64 array {shape}.")
    else:
        out[:] = 0.0
    cast = dtype.type
    _map_block(
        np.ascontiguousarray(indptr, dtype=np.int64),
        np.ascontiguousarray(local, dtype=np.int32),
        np.ascontiguousarray(counts, dtype=np.float64),
        np.ascontiguousarray(nphi),
        nz,
        theta_old,
        alpha_vector(alpha, n_topics, dtype),
        cast(eta),
        cast(w_eta),
        out[:n_docs],
        out[n_docs:],
    )
    return out[:n_docs], out[n_docs:]
