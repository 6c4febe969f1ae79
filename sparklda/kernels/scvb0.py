"""SCVB0 per-document token passes (Foulds et al. 2013, Algorithm 2).

Pure functions over numpy arrays; no Spark, no I/O. The reference written
plainly from the paper's equations is ``tests/reference.py::scvb0_block``.
"""

from __future__ import annotations

from typing import Any

import numba
import numpy as np
from numpy.typing import NDArray

from .config import FASTMATH, JIT_OPTIONS
from .lanes import lane_gamma, prefetch_row
from .priors import alpha_vector

#: How many (document, term) pairs ahead the kernel asks for a term's rows
#: (:func:`sparklda.kernels.lanes.prefetch_row`). One pair's sweep over K=100
#: topics takes about 50 ns, a row from memory longer. On a block of 3,500
#: documents over an 82,000-term Zipfian vocabulary, K=100, the hint takes the
#: kernel from 0.12-0.15 s to 0.07-0.09 s; 2 to 4 pairs ahead were the best
#: (``benchmarks/scale/prefetch.py``; docs/architecture.md, "Kernels and memory").
PREFETCH_PAIRS = 4


@numba.njit(fastmath=FASTMATH, **JIT_OPTIONS)
def _scvb0_block(
    indptr: NDArray[np.int64],
    local: NDArray[np.int32],
    counts: NDArray[np.floating[Any]],
    phi_norm: NDArray[np.floating[Any]],
    theta_init: NDArray[np.floating[Any]],
    alpha: NDArray[np.floating[Any]],
    burnin: int,
    s_theta: np.floating[Any],
    tau_theta: np.floating[Any],
    kappa_theta: np.floating[Any],
    rho_tab: NDArray[np.floating[Any]],
    log1m_tab: NDArray[np.floating[Any]],
    nhat: NDArray[np.floating[Any]],
    theta_out: NDArray[np.floating[Any]],
    logp0_out: NDArray[np.floating[Any]],
    exclude: bool,
) -> NDArray[np.floating[Any]]:
    """The compiled body of :func:`scvb0_block`.

    ``alpha`` is the K-vector of the prior (equal values for a symmetric one:
    the same bits as a scalar). When ``theta_out`` has rows, each document's
    final N^Θ_j is stored in its row, and ``logp0_out[j, k]`` is
    Σ m · log(1 − γ_k) over the last pass's clumps of document j (the log of
    the probability that none of its tokens is in topic k).

    ``rho_tab[t]`` and ``log1m_tab[t]`` = log(1 − rho_tab[t]) are the step
    sizes at integer token positions t (built by :func:`_step_tables`); an
    empty table means "counts are not all integers": then ρ and (1−ρ)^m are
    computed with pow per pair. Every scalar is of the statistics' dtype, so
    nothing in the loops over topics is promoted to float64 and each of them
    vectorises (two passes over K per pair: γ and its sum, then the N^Θ and
    N̂^Φ updates with the normalisation folded into their scalars).

    Bit-deterministic: compiled without fast-math, so the element-wise N^Θ and
    N̂^Φ updates round the same whichever code path LLVM's run-time alias checks
    pick, and Σ γ is summed by :func:`sparklda.kernels.lanes.lane_gamma` in an
    order fixed by the code (see :mod:`sparklda.kernels.lanes`).
    """
    n_docs = indptr.shape[0] - 1
    n_topics = phi_norm.shape[1]
    last_pair = local.shape[0] - 1
    zero = s_theta - s_theta
    one = zero + np.float32(1)  # of the dtype (a bare 1 would promote float32 to float64)
    keep_theta = theta_out.shape[0] > 0
    gmax = one - (zero + np.float32(1e-6))  # γ capped below 1: log(1 − γ) stays finite
    use_tab = rho_tab.shape[0] > 0
    ntheta = np.empty(n_topics, dtype=phi_norm.dtype)
    gamma = np.empty(n_topics, dtype=phi_norm.dtype)
    # exclusion: each clump's γ of the previous sweep, and N^Θ_j without it
    widest = 0
    if exclude:
        for j in range(n_docs):
            widest = max(widest, indptr[j + 1] - indptr[j])
    gprev = np.empty((widest, n_topics), dtype=phi_norm.dtype)
    nex = np.empty(n_topics if exclude else 0, dtype=phi_norm.dtype)
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
        ti = np.int64(0)
        for sweep in range(burnin + 1):
            last = sweep == burnin
            for p in range(start, end):
                u = local[p]
                m = counts[p]
                # the rows PREFETCH_PAIRS pairs ahead (in the next document near the end
                # of a sweep): a rare term's rows come from memory meanwhile
                ahead = local[min(p + PREFETCH_PAIRS, last_pair)]
                prefetch_row(phi_norm, ahead)
                if last:
                    prefetch_row(nhat, ahead)
                # γ = φ_norm[u] ⊙ (N^Θ_j + α) and Σ γ in one vectorised pass, summed
                # in lanes.py's fixed order
                if exclude and sweep > 0:
                    # N^Θ_j without this clump's token (CVB0's ¬ij count), floored at 0
                    gp = gprev[p - start]
                    for k in range(n_topics):
                        nex[k] = max(ntheta[k] - gp[k], zero)
                    norm = lane_gamma(gamma, phi_norm[u], nex, alpha, n_topics)
                else:
                    norm = lane_gamma(gamma, phi_norm[u], ntheta, alpha, n_topics)
                inv = one / norm
                if exclude and not last:  # this clump's γ' for the next sweep
                    gp = gprev[p - start]
                    for k in range(n_topics):
                        gp[k] = gamma[k] * inv
                if use_tab:
                    rho = rho_tab[ti]
                    if m == one:
                        decay = one - rho
                    else:
                        decay = np.exp(m * log1m_tab[ti])
                    ti += np.int64(m)
                else:
                    rho = s_theta / (tau_theta + t) ** kappa_theta
                    decay = (one - rho) ** m
                    t += m
                a = c_j * (one - decay) * inv
                if last:
                    b = m * inv
                    out = nhat[u]
                    if keep_theta:
                        for k in range(n_topics):
                            logp0_out[j, k] += m * np.log1p(-min(gamma[k] * inv, gmax))
                    for k in range(n_topics):
                        gk = gamma[k]
                        ntheta[k] = decay * ntheta[k] + a * gk
                        out[k] += b * gk
                else:
                    for k in range(n_topics):
                        ntheta[k] = decay * ntheta[k] + a * gamma[k]
        if keep_theta:
            for k in range(n_topics):
                theta_out[j, k] = ntheta[k]
    return nhat


def _step_tables(
    indptr: NDArray[np.int64],
    counts: NDArray[np.floating[Any]],
    burnin: int,
    s_theta: float,
    tau_theta: float,
    kappa_theta: float,
    dtype: np.dtype[np.floating[Any]],
) -> tuple[NDArray[np.floating[Any]], NDArray[np.floating[Any]]]:
    """ρ_t = s/(τ+t)^κ and log(1−ρ_t) for t = 0 … (burnin+1)·max C_j, computed in
    float64 and cast to ``dtype``; empty tables when a count is not an integer
    (the kernel then evaluates the powers per pair)."""
    if counts.size == 0 or not np.all(counts == np.floor(counts)):
        empty = np.zeros(0, dtype=dtype)
        return empty, empty
    csum = np.concatenate([[0.0], np.cumsum(counts, dtype=np.float64)])
    longest = float(np.max(csum[indptr[1:]] - csum[indptr[:-1]]))
    t = np.arange(int(longest) * (burnin + 1) + 1, dtype=np.float64)
    rho = s_theta / (tau_theta + t) ** kappa_theta
    with np.errstate(divide="ignore"):
        log1m = np.log1p(-np.minimum(rho, 1.0))
    return rho.astype(dtype), log1m.astype(dtype)


def scvb0_block(
    indptr: NDArray[np.integer[Any]],
    local: NDArray[np.integer[Any]],
    counts: NDArray[np.floating[Any]],
    phi_norm: NDArray[np.floating[Any]],
    theta_init: NDArray[np.floating[Any]],
    alpha: float | NDArray[np.floating[Any]],
    burnin: int = 1,
    s_theta: float = 1.0,
    tau_theta: float = 10.0,
    kappa_theta: float = 0.9,
    theta_out: NDArray[np.floating[Any]] | None = None,
    logp0_out: NDArray[np.floating[Any]] | None = None,
    exclude: bool = False,
) -> NDArray[np.floating[Any]]:
    """Run SCVB0's burn-in and accumulating passes over a block of documents.

    For each document j (tokens clumped as distinct terms u with counts m),
    ``burnin`` passes update N^Θ_j only, then a last pass updates N^Θ_j and
    accumulates m·γ into the block's N̂^Φ rows:

    * γ_jk ∝ φ_norm[u, k] · (N^Θ_jk + α_k)               (Eq. 5, normalised)
    * N^Θ_j ← (1−ρ)^m N^Θ_j + C_j γ (1 − (1−ρ)^m)          (Eq. 6 with Eq. 9)
    * ρ = s_θ / (τ_θ + t)^κ_θ, t the tokens of document j seen so far
      (counted across passes, advanced by m after each clump)
    * N̂^Φ[u] += m · γ (last pass only)

    With ``exclude``, every sweep after the first computes a clump's γ from
    max(N^Θ_j − γ', 0), γ' the clump's γ of the previous sweep: the count without
    the token's own share, as CVB0's N^¬ij (docs/architecture.md, "SCVB0: the
    token's own share"). Eq. 5 as printed keeps it, which on short documents makes
    each token reinforce its own topic.

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
    alpha : float or float array (K,)
        α, the document-topic prior: a number (symmetric) or a K-vector
        (asymmetric, a learned α); a vector of equal values gives the same
        bits as the number.
    burnin : int
        Burn-in passes before the accumulating pass.
    s_theta, tau_theta, kappa_theta : float
        ρ^Θ schedule s/(τ+t)^κ (paper: 1, 10, 0.9).
    theta_out : float array (D, K), optional
        Filled with each document's final N^Θ_j (the statistics a learned α
        needs, :mod:`sparklda.kernels.priors`); its dtype must be ``phi_norm``'s.
    logp0_out : float array (D, K), optional, given with ``theta_out``
        Filled with Σ m · log(1 − γ_k) over each document's last-pass clumps:
        log P(no token of the document in topic k) when
        each token's topic is drawn from its γ (capped at 1 − 1e-6), which
        :func:`sparklda.kernels.priors.doc_prior_stats` uses for the expected
        counts. Zeroed here; same dtype and shape as ``theta_out``.
    exclude : bool
        Take each clump's previous γ out of N^Θ_j before computing its γ (above).

    Returns
    -------
    nhat : float array (U, K)
        Σ over the block's last-pass clumps of m·γ, by term row. The caller
        scales it by C/|M| (Eq. 7-8) and sums rows over partitions;
        ``nhat.sum(0)`` is the block's share of N̂^Z.

    Equivalent to ``tests/reference.py::scvb0_block`` (plain Python loops).
    """
    phi_norm = np.ascontiguousarray(phi_norm)
    dtype = phi_norm.dtype
    cast = dtype.type
    indptr64 = np.ascontiguousarray(indptr, dtype=np.int64)
    counts = np.ascontiguousarray(counts, dtype=dtype)
    rho_tab, log1m_tab = _step_tables(
        indptr64, counts, int(burnin), float(s_theta), float(tau_theta), float(kappa_theta), dtype
    )
    nhat = np.zeros(phi_norm.shape, dtype=dtype)
    n_topics = phi_norm.shape[1]
    if theta_out is None:
        theta_out = np.zeros((0, n_topics), dtype=dtype)
    elif theta_out.shape != (len(indptr64) - 1, n_topics) or theta_out.dtype != dtype:
        raise ValueError(
            f"scvb0_block: 'theta_out' must be a {dtype} array of shape "
            f"({len(indptr64) - 1}, {n_topics}), got {theta_out.dtype} {theta_out.shape}."
        )
    if logp0_out is None:
        logp0_out = np.zeros(theta_out.shape, dtype=dtype)
    elif logp0_out.shape != theta_out.shape or logp0_out.dtype != dtype:
        raise ValueError(
            f"scvb0_block: 'logp0_out' must be a {dtype} array shaped like 'theta_out' "
            f"{theta_out.shape}, got {logp0_out.dtype} {logp0_out.shape}."
        )
    else:
        logp0_out[:] = 0
    return _scvb0_block(
        indptr64,
        np.ascontiguousarray(local, dtype=np.int32),
        counts,
        phi_norm,
        np.ascontiguousarray(theta_init, dtype=dtype),
        alpha_vector(alpha, n_topics, dtype),
        int(burnin),
        cast(s_theta),
        cast(tau_theta),
        cast(kappa_theta),
        rho_tab,
        log1m_tab,
        nhat,
        theta_out,
        logp0_out,
        bool(exclude),
    )


def init_doc_stats(
    uniforms: NDArray[np.floating[Any]], doc_lengths: NDArray[np.number[Any]]
) -> NDArray[np.floating[Any]]:
    """Random N^Θ initialisation: row j is ``uniforms[j]`` rescaled to sum to C_j.

    Equivalent to ``uniforms / uniforms.sum(1, keepdims=True) * doc_lengths[:, None]``.
    """
    u = np.asarray(uniforms)
    row_sums: NDArray[np.floating[Any]] = u.sum(axis=1, keepdims=True)
    theta: NDArray[np.floating[Any]] = (
        u / row_sums * np.asarray(doc_lengths, dtype=u.dtype)[:, None]
    )
    return theta


@numba.njit(**JIT_OPTIONS)
def _scatter_add_rows(
    acc: NDArray[np.floating[Any]], idx: NDArray[np.int64], rows: NDArray[np.floating[Any]]
) -> NDArray[np.floating[Any]]:
    k = rows.shape[1]
    for i in range(rows.shape[0]):
        out = acc[idx[i]]
        row = rows[i]
        for j in range(k):
            out[j] += row[j]
    return acc


def scatter_add_rows(
    acc: NDArray[np.floating[Any]], idx: NDArray[np.integer[Any]], rows: NDArray[np.floating[Any]]
) -> NDArray[np.floating[Any]]:
    """Add ``rows[i]`` to ``acc[idx[i]]`` in place (the driver's merge of the
    tasks' sparse N̂^Φ rows); ``idx`` may repeat. Returns ``acc``.

    Equivalent to ``np.add.at(acc, idx, rows)``.
    """
    return _scatter_add_rows(
        acc, np.ascontiguousarray(idx, dtype=np.int64), np.ascontiguousarray(rows)
    )


@numba.njit(**JIT_OPTIONS)
def _add_scaled_rows(
    base: NDArray[np.floating[Any]],
    mirror: NDArray[np.floating[Any]],
    terms: NDArray[np.int64],
    rows: NDArray[np.floating[Any]],
    factor: float,
    totals: NDArray[np.float64],
) -> NDArray[np.float64]:
    k = rows.shape[1]
    for i in range(rows.shape[0]):
        b = base[terms[i]]
        m = mirror[terms[i]]
        row = rows[i]
        for j in range(k):
            v = b[j] + factor * row[j]
            b[j] = v
            m[j] = v
            totals[j] += row[j]
    return totals


def add_scaled_rows(
    base: NDArray[np.floating[Any]],
    mirror: NDArray[np.floating[Any]],
    terms: NDArray[np.integer[Any]],
    rows: NDArray[np.floating[Any]],
    factor: float,
) -> NDArray[np.float64]:
    """The driver's SCVB0 update of touched rows, in one pass over them:
    ``base[terms] += factor · rows`` and ``mirror[terms] = base[terms]`` (the
    broadcast copy in the kernels' dtype). ``terms`` are distinct. Returns the
    column sums of ``rows`` (float64, the N̂^Z of the update).

    Equivalent to ``base[terms] += factor * rows; mirror[terms] = base[terms];
    rows.sum(0)``.
    """
    totals = np.zeros(rows.shape[1], dtype=np.float64)
    return _add_scaled_rows(
        base,
        mirror,
        np.ascontiguousarray(terms, dtype=np.int64),
        np.ascontiguousarray(rows),
        float(factor),
        totals,
    )
