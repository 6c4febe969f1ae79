"""Collapsed Gibbs sampling over a block of clumped documents (lecture notes 003,
section 3.2, Eq. 52), with SparseLDA's sampler (Yao, Mimno & McCallum 2009).

A block's state is one topic per token occurrence: a pair (document, term) with
count c carries c consecutive entries of ``z`` (in pair order), stored as uint16
when K ≤ 65535 (:func:`assignment_dtype`). Each token's topic is drawn from

    p(z = k | rest) ∝ (N^Θ_dk + α_k) (N^Φ_wk + η) / (N^Z_k + Wη)       (Eq. 52)

with the token's own assignment removed from the counts (the "−i"). SparseLDA
splits that weight in three buckets:

    s_k = α_k η / (N^Z_k + Wη)                     (every topic; rarely visited)
    r_k = N^Θ_dk η / (N^Z_k + Wη)                  (the document's topics)
    q_k = (α_k + N^Θ_dk) N^Φ_wk / (N^Z_k + Wη)      (the word's topics)

whose totals s, r are kept up to date as counts change and q is summed over the
word's topics only, so a token costs about the number of topics its document and
its word use, not K. Each bucket is walked in increasing topic order (the lists of
the document's and of each word's topics are kept sorted), so the topic a draw
picks is a function of the counts and the draw only: ``tests/reference_modes.py::
gibbs_block``, a dense sampler written from Eq. 52 that walks the same three
buckets, picks the same topics from the same draws.

The draws. Token j (from 0) of a document with key ``key_d`` (one per document,
:func:`sparklda.kernels.random.doc_keys` of the run's seed, a stream and the
round) takes the uniform ``(splitmix64(key_d + (j+1)·G) >> 11 + 0.5) / 2^53``,
G the golden-ratio constant: :func:`sparklda.kernels.random.uniform_matrix`'s
row of that document. So a block's draws depend on the seed, the round and its
documents only, never on which task (or retry) runs it; callers may inject the
draws instead (``draws``, one per token in block order) for tests.

Pure functions over numpy arrays; no Spark, no I/O.
"""

from __future__ import annotations

from typing import Any

import numba
import numpy as np
from numpy.typing import NDArray

from .config import FASTMATH, JIT_OPTIONS
from .priors import alpha_vector
from .random import draw_uniform


def assignment_dtype(k: int) -> np.dtype[Any]:
    """The dtype of the topic assignments for ``k`` topics: uint16 up to 65535, else int32."""
    return np.dtype(np.uint16) if k <= 65535 else np.dtype(np.int32)


@numba.njit(**JIT_OPTIONS)
def _uniform(key: Any, j: Any) -> float:
    """The uniform of counter j (from 0) under ``key``: uniform_matrix's column j."""
    return draw_uniform(key, np.uint64(j + 1))


@numba.njit(**JIT_OPTIONS)
def _insert_sorted(lst: NDArray[np.int32], n: Any, k: Any) -> Any:
    """Insert ``k`` into the sorted ``lst[:n]``; the new length."""
    i = n
    while i > 0 and lst[i - 1] > k:
        lst[i] = lst[i - 1]
        i -= 1
    lst[i] = k
    return n + 1


@numba.njit(**JIT_OPTIONS)
def _remove_sorted(lst: NDArray[np.int32], n: Any, k: Any) -> Any:
    """Remove ``k`` from ``lst[:n]`` (keeping the order); the new length."""
    i = 0
    while i < n and lst[i] != k:
        i += 1
    if i == n:
        return n
    for m in range(i, n - 1):
        lst[m] = lst[m + 1]
    return n - 1


@numba.njit(fastmath=FASTMATH, **JIT_OPTIONS)
def _gibbs_sweep(
    indptr: NDArray[np.int64],
    local: NDArray[np.int32],
    counts: NDArray[np.int64],
    z: NDArray[Any],
    nphi: NDArray[Any],
    nz: NDArray[np.float64],
    alpha: NDArray[np.float64],
    eta: float,
    w_eta: float,
    keys: NDArray[np.uint64],
    draws: NDArray[np.float64],
    wtop: NDArray[Any],
) -> int:
    n_docs = indptr.shape[0] - 1
    n_terms, n_topics = nphi.shape
    injected = draws.shape[0] > 0
    # each term's topics with N^Φ_wk > 0, sorted (SparseLDA's word lists, in ``wtop``: a
    # (U, K) workspace of the assignments' dtype, uint16 up to 65535 topics; with the
    # counts as int32 when they are whole numbers, the two tables a token's word reads
    # take a third of the bytes of int32 lists and float64 counts: the sweep waits on
    # memory more than it computes)
    wlen = np.zeros(n_terms, dtype=np.int64)
    for u in range(n_terms):
        m = 0
        for k in range(n_topics):
            if nphi[u, k] > 0:
                wtop[u, m] = k
                m += 1
        wlen[u] = m
    ndk = np.zeros(n_topics, dtype=np.float64)
    dtop = np.empty(n_topics, dtype=np.int32)
    coef = np.empty(n_topics, dtype=np.float64)
    qw = np.empty(n_topics, dtype=np.float64)
    moved = 0
    t = 0  # the token's position in z
    for j in range(n_docs):
        start = indptr[j]
        end = indptr[j + 1]
        if start == end:
            continue
        # N^Θ_j from the document's assignments, and its sorted topic list
        t0 = t
        for p in range(start, end):
            for _ in range(counts[p]):
                ndk[z[t]] += 1.0
                t += 1
        dlen = 0
        s = 0.0
        r = 0.0
        for k in range(n_topics):
            den = nz[k] + w_eta
            s += alpha[k] * eta / den
            coef[k] = (alpha[k] + ndk[k]) / den
            if ndk[k] > 0:
                dtop[dlen] = k
                dlen += 1
                r += ndk[k] * eta / den
        key = keys[j]
        t = t0
        for p in range(start, end):
            u = local[p]
            for _ in range(counts[p]):
                old = np.int64(z[t])
                # remove the token (the "−i" of Eq. 52)
                den = nz[old] + w_eta
                s -= alpha[old] * eta / den
                r -= ndk[old] * eta / den
                ndk[old] -= 1.0
                nphi[u, old] -= 1
                nz[old] -= 1.0
                den = nz[old] + w_eta
                s += alpha[old] * eta / den
                r += ndk[old] * eta / den
                coef[old] = (alpha[old] + ndk[old]) / den
                if ndk[old] <= 0:
                    dlen = _remove_sorted(dtop, dlen, old)
                if nphi[u, old] <= 0:
                    wlen[u] = _remove_sorted(wtop[u], wlen[u], old)
                # the word bucket over the word's topics
                q = 0.0
                nw = wlen[u]
                for i in range(nw):
                    k = wtop[u, i]
                    x = coef[k] * nphi[u, k]
                    qw[i] = x
                    q += x
                if injected:
                    uni = draws[t]
                else:
                    uni = _uniform(key, t - t0)
                x = uni * (s + r + q)
                new = -1
                if x < q:
                    for i in range(nw):
                        new = wtop[u, i]
                        x -= qw[i]
                        if x < 0:
                            break
                else:
                    x -= q
                    if x < r:
                        for i in range(dlen):
                            k = dtop[i]
                            new = k
                            x -= ndk[k] * eta / (nz[k] + w_eta)
                            if x < 0:
                                break
                    else:
                        x -= r
                        for k in range(n_topics):
                            new = k
                            x -= alpha[k] * eta / (nz[k] + w_eta)
                            if x < 0:
                                break
                if new < 0:  # an empty bucket reached by rounding: the smoothing one
                    new = n_topics - 1
                # add it back with its new topic
                den = nz[new] + w_eta
                s -= alpha[new] * eta / den
                r -= ndk[new] * eta / den
                if ndk[new] <= 0:
                    dlen = _insert_sorted(dtop, dlen, new)
                if nphi[u, new] <= 0:
                    wlen[u] = _insert_sorted(wtop[u], wlen[u], new)
                ndk[new] += 1.0
                nphi[u, new] += 1
                nz[new] += 1.0
                den = nz[new] + w_eta
                s += alpha[new] * eta / den
                r += ndk[new] * eta / den
                coef[new] = (alpha[new] + ndk[new]) / den
                if new != old:
                    moved += 1
                z[t] = new
                t += 1
        for i in range(dlen):
            ndk[dtop[i]] = 0.0
    return moved


def token_count(counts: NDArray[Any]) -> int:
    """The number of token occurrences of a block's pair counts."""
    return int(np.asarray(counts, dtype=np.float64).sum())


def int_counts(counts: NDArray[Any]) -> NDArray[np.int64]:
    """The pair counts as int64; ValueError when one is not a non-negative integer."""
    c = np.asarray(counts)
    out: NDArray[np.int64] = np.rint(c).astype(np.int64)
    if len(c) and (np.any(out != c) or out.min() < 0):
        raise ValueError("Gibbs sampling needs whole non-negative token counts per pair.")
    return out


def gibbs_sweep(
    indptr: NDArray[np.integer[Any]],
    local: NDArray[np.integer[Any]],
    counts: NDArray[Any],
    z: NDArray[Any],
    nphi: NDArray[Any],
    nz: NDArray[np.float64],
    alpha: float | NDArray[np.floating[Any]],
    eta: float,
    w_eta: float,
    keys: NDArray[np.uint64] | None = None,
    draws: NDArray[np.float64] | None = None,
) -> int:
    """One collapsed Gibbs sweep over a block (SparseLDA's sampler), in place.

    For each document j (in order), N^Θ_j is counted from its tokens' topics ``z``;
    then each token (pairs in order, a pair's c tokens one after the other) is
    removed from N^Θ_j, ``nphi`` and ``nz``, its topic drawn from Eq. 52 by the
    three buckets of the module docstring, and added back with it.

    Parameters
    ----------
    indptr, local, counts
        The block's CSR documents (:class:`sparklda.block.DocBlock`); ``counts`` whole
        numbers (any numeric dtype).
    z : uint16 or int32 array (tokens,), writable
        Each token's topic, pairs in order. **Updated in place.**
    nphi : float64 or int32 array (U, K), C-contiguous, writable
        N^Φ rows of the block's terms: the round's counts (which include this block's
        own assignments) plus, for seeded topics, their pseudo-counts. **Updated in
        place** with the block's own changes (AD-LDA, Newman et al. 2009). Whole counts
        may come as int32 (the same draws pick the same topics: an int32 count is
        exact in float64), which the sweep reads faster.
    nz : float64 array (K,), writable
        N^Z, likewise (every term's counts, not only the block's). **Updated in place.**
    alpha : float or float array (K,)
        α (a number or a learned asymmetric K-vector).
    eta, w_eta : float
        η and W·η (W the full vocabulary).
    keys : uint64 array (D,)
        Each document's draw key (module docstring); not needed with ``draws``.
    draws : float64 array (tokens,), optional
        Uniforms in [0, 1) to use instead of the keyed ones, one per token in z's order.

    Returns
    -------
    int
        The number of tokens whose topic changed.

    Equivalent to ``tests/reference_modes.py::gibbs_block``.
    """
    n_topics = nphi.shape[1]
    cnt = int_counts(counts)
    if z.shape[0] != int(cnt.sum()):
        raise ValueError(f"z has {z.shape[0]} entries for {int(cnt.sum())} tokens.")
    if (
        nphi.dtype not in (np.float64, np.int32)
        or nz.dtype != np.float64
        or not nphi.flags.c_contiguous
    ):
        raise ValueError("nphi must be float64 or int32 (C-contiguous) and nz float64.")
    if nphi.dtype == np.int32 and nphi.size and int(nphi.max()) >= 2**31 - 1 - z.shape[0]:
        raise ValueError("int32 nphi too close to 2^31 for this block's tokens: pass float64.")
    if draws is None:
        draws = np.zeros(0, dtype=np.float64)
        if keys is None or len(keys) != len(indptr) - 1:
            raise ValueError("gibbs_sweep needs one key per document (or the draws).")
    elif len(draws) != z.shape[0]:
        raise ValueError(f"draws has {len(draws)} entries for {z.shape[0]} tokens.")
    if keys is None:
        keys = np.zeros(len(indptr) - 1, dtype=np.uint64)
    a = np.asarray(alpha_vector(alpha, n_topics, np.dtype(np.float64)), dtype=np.float64)
    return int(
        _gibbs_sweep(
            np.asarray(indptr, dtype=np.int64),
            np.asarray(local, dtype=np.int32),
            cnt,
            z,
            nphi,
            nz,
            a,
            float(eta),
            float(w_eta),
            np.asarray(keys, dtype=np.uint64),
            np.ascontiguousarray(draws, dtype=np.float64),
            np.empty(nphi.shape, dtype=assignment_dtype(n_topics)),
        )
    )


@numba.njit(fastmath=FASTMATH, **JIT_OPTIONS)
def _gibbs_init(
    indptr: NDArray[np.int64],
    local: NDArray[np.int32],
    counts: NDArray[np.int64],
    phi: NDArray[np.float64],
    alpha: NDArray[np.float64],
    keys: NDArray[np.uint64],
    z: NDArray[Any],
) -> None:
    n_docs = indptr.shape[0] - 1
    n_topics = alpha.shape[0]
    ndk = np.zeros(n_topics, dtype=np.float64)
    w = np.empty(n_topics, dtype=np.float64)
    use_phi = phi.shape[0] > 0
    t = 0
    for j in range(n_docs):
        t0 = t
        for p in range(indptr[j], indptr[j + 1]):
            u = local[p]
            for _ in range(counts[p]):
                uni = _uniform(keys[j], t - t0)
                if not use_phi:
                    pick = np.int64(uni * n_topics)
                    z[t] = min(pick, n_topics - 1)
                    t += 1
                    continue
                total = 0.0
                for k in range(n_topics):
                    w[k] = phi[u, k] * (ndk[k] + alpha[k])
                    total += w[k]
                x = uni * total
                new = n_topics - 1
                for k in range(n_topics):
                    if w[k] > 0:
                        new = k
                        x -= w[k]
                        if x < 0:
                            break
                ndk[new] += 1.0
                z[t] = new
                t += 1
        for k in range(n_topics):
            ndk[k] = 0.0


def gibbs_init(
    indptr: NDArray[np.integer[Any]],
    local: NDArray[np.integer[Any]],
    counts: NDArray[Any],
    k: int,
    keys: NDArray[np.uint64],
    phi: NDArray[np.floating[Any]] | None = None,
    alpha: float | NDArray[np.floating[Any]] = 0.1,
) -> NDArray[Any]:
    """Initial topic assignments of a block's tokens (:func:`assignment_dtype`).

    Without ``phi``: token j of document d takes topic ⌊u·K⌋, u its keyed uniform
    (``keys``, one per document). With ``phi`` ((U, K), the block's rows of a warm
    start's φ̂), one sequential pass per document: each token drawn with weight
    φ̂_wk · (N^Θ_dk + α_k), N^Θ_d counting the document's tokens drawn so far (the
    first sweep of a sampler whose topics are fixed at φ̂). Equivalent to
    ``tests/reference_modes.py::gibbs_init``.
    """
    cnt = int_counts(counts)
    z = np.empty(int(cnt.sum()), dtype=assignment_dtype(k))
    rows = (
        np.zeros((0, k), dtype=np.float64)
        if phi is None
        else np.ascontiguousarray(phi, dtype=np.float64)
    )
    a = np.asarray(alpha_vector(alpha, k, np.dtype(np.float64)), dtype=np.float64)
    _gibbs_init(
        np.asarray(indptr, dtype=np.int64),
        np.asarray(local, dtype=np.int32),
        cnt,
        rows,
        a,
        np.asarray(keys, dtype=np.uint64),
        z,
    )
    return z


@numba.njit(**JIT_OPTIONS)
def _topic_counts(
    rows_of_pairs: NDArray[np.int64], counts: NDArray[np.int64], z: NDArray[Any], out: NDArray[Any]
) -> None:
    t = 0
    for p in range(counts.shape[0]):
        r = rows_of_pairs[p]
        for _ in range(counts[p]):
            out[r, z[t]] += 1
            t += 1


def topic_counts(
    rows_of_pairs: NDArray[np.integer[Any]],
    n_rows: int,
    counts: NDArray[Any],
    z: NDArray[Any],
    k: int,
    dtype: Any = np.float64,
) -> NDArray[Any]:
    """(n_rows, K) counts of the tokens' topics (float64, or ``dtype``: float32 is exact
    below 2^24 tokens), by the row each pair names: ``block.local`` gives the
    word-topic counts of a block's terms (N^Φ rows), each pair's document number its
    document-topic counts (N^Θ)."""
    out = np.zeros((int(n_rows), int(k)), dtype=dtype)
    _topic_counts(np.asarray(rows_of_pairs, dtype=np.int64), int_counts(counts), z, out)
    return out


@numba.njit(**JIT_OPTIONS)
def _count_refresh(new: NDArray[Any], old: NDArray[Any], nz: NDArray[np.float64]) -> Any:
    change = 0.0
    top = 0.0
    for w in range(new.shape[0]):
        for k in range(new.shape[1]):
            x = new[w, k]
            nz[k] += x
            change += abs(x - old[w, k])
            if x > top:
                top = x
    return change, top


def count_refresh(
    new: NDArray[np.float64], old: NDArray[np.float64]
) -> tuple[NDArray[np.float64], float, float]:
    """One pass over a sweep's new counts N^Φ (V, K) against the previous ones:
    ``(N^Z, Σ|new − old|, max new)``. The counts are whole numbers, so every sum is
    exact in float64 whatever its order: the same figures as ``new.sum(axis=0)``,
    ``np.abs(new − old).sum()`` and ``new.max()``, without their V × K temporaries."""
    if new.shape != old.shape:
        raise ValueError(f"new counts {new.shape} and old counts {old.shape} differ in shape")
    nz = np.zeros(new.shape[1], dtype=np.float64)
    change, top = _count_refresh(new, old, nz)
    return nz, float(change), float(top)


def shipped_counts(nphi: NDArray[np.float64], top: float) -> NDArray[Any]:
    """Whole counts N^Φ in the smallest exact dtype given their maximum ``top``: uint16
    up to 65535, int32 below 2^31 − 1, else float64 as they are (a sweep reads its rows
    of N^Φ from memory: the fewer bytes the better)."""
    if top <= np.iinfo(np.uint16).max:
        return nphi.astype(np.uint16)
    if top < 2**31 - 1:
        return nphi.astype(np.int32)
    return nphi
