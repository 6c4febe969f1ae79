"""Held-out log-likelihood of whole documents by the left-to-right particle estimate.

Wallach, Murray, Salakhutdinov & Mimno (2009), "Evaluation Methods for Topic Models",
Algorithm 3, as sequential Monte Carlo (lecture notes ``003_...``, section 5, Eq. 98-104):
the tokens w_1 … w_N of a document (its bag of words expanded to tokens, in a seeded
random order) are taken one at a time, and R particles each carry topic assignments
z_<n of the tokens before n. At position n (counting from 1), each particle

1. resamples z_n' for every n' < n, one collapsed Gibbs step each (the algorithm's
   inner loop): P(z_n' = k | …) ∝ φ_k(w_n') (α_k + N_k^{<n, ¬n'});
2. gives p_n = Σ_k φ_k(w_n) (α_k + N_k^{<n}) / (Σα + n − 1), the probability of w_n
   given the particle's z_<n;

then the particles are resampled in proportion to their p_n (systematic resampling)
and each samples z_n ∝ φ_k(w_n) (α_k + N_k^{<n}). The estimate is
log p(w | Φ, α) ≈ Σ_n log (1/R Σ_r p_n^r).

The resampling step is the "ancestor" step of the notes' SMC (Eq. 100, a^s_{n−1}).
Algorithm 3 as printed omits it, and then the estimate is biased even with infinitely
many particles (one Gibbs sweep does not bring z_<n to its posterior given w_<n); with
it, the product of the means is an unbiased estimate of p(w | Φ, α), whatever R.

Random numbers: one counter-based stream per document, keyed by (seed,
:data:`~sparklda.kernels.random.Stream.LEFT_TO_RIGHT`, document id), so a document's
estimate depends on nothing else (not on its block, partition or task attempt). Draw c
(c = 1, 2, …) is :func:`~sparklda.kernels.random.uniform_matrix`'s column c − 1 for
the document, taken in this order: the Fisher-Yates shuffle of the tokens (positions
N−1 down to 1), then per position n: the inner loop's draws (particle by particle,
n' ascending), one draw for the systematic resampling (n > 1 and R > 1 only), one draw
per particle for z_n. Plain reference: ``tests/reference_ltr.py``.

The cost of a document of N tokens is about R·K·N²/2 operations (the inner loop).
"""

from __future__ import annotations

from typing import Any

import numba
import numpy as np
from numpy.typing import NDArray

from .config import JIT_OPTIONS
from .priors import alpha_vector
from .random import Stream, doc_keys, draw_uniform

__all__ = ["left_to_right_block", "whole_counts"]


@numba.njit(**JIT_OPTIONS)
def _draw(
    row: NDArray[np.float64],
    nk: NDArray[np.float64],
    alpha: NDArray[np.float64],
    weights: NDArray[np.float64],
    u: float,
) -> int:
    """A topic k drawn with probability ∝ row[k] (nk[k] + α_k): the first k whose running
    sum exceeds u times the total (a uniform topic if every weight is 0)."""
    n_topics: int = row.shape[0]
    total = 0.0
    for k in range(n_topics):
        total += row[k] * (nk[k] + alpha[k])
        weights[k] = total
    if not total > 0.0:
        return min(int(u * n_topics), n_topics - 1)
    target = u * total
    for k in range(n_topics):
        if weights[k] > target:
            return k
    k = n_topics - 1
    while k > 0 and row[k] * (nk[k] + alpha[k]) <= 0.0:
        k -= 1
    return k


@numba.njit(**JIT_OPTIONS)
def _left_to_right_block(
    indptr: NDArray[np.int64],
    local: NDArray[np.int32],
    counts: NDArray[np.int64],
    phi: NDArray[np.float64],
    alpha: NDArray[np.float64],
    particles: int,
    keys: NDArray[np.uint64],
    out: NDArray[np.float64],
) -> NDArray[np.float64]:
    n_docs = indptr.shape[0] - 1
    n_topics = phi.shape[1]
    n_part = particles
    alpha_sum = 0.0
    for k in range(n_topics):
        alpha_sum += alpha[k]
    max_len = 0
    for j in range(n_docs):
        length = 0
        for p in range(indptr[j], indptr[j + 1]):
            length += counts[p]
        max_len = max(max_len, length)
    tokens = np.empty(max_len, dtype=np.int32)
    z = np.zeros((n_part, max_len), dtype=np.int32)
    z_next = np.zeros((n_part, max_len), dtype=np.int32)
    nk = np.zeros((n_part, n_topics), dtype=np.float64)
    nk_next = np.zeros((n_part, n_topics), dtype=np.float64)
    p_n = np.empty(n_part, dtype=np.float64)
    ancestor = np.empty(n_part, dtype=np.int64)
    weights = np.empty(n_topics, dtype=np.float64)
    one = np.uint64(1)
    for j in range(n_docs):
        key = keys[j]
        c = np.uint64(0)
        length = 0
        for p in range(indptr[j], indptr[j + 1]):
            for _ in range(counts[p]):
                tokens[length] = local[p]
                length += 1
        for i in range(length - 1, 0, -1):  # Fisher-Yates
            c += one
            s = min(int(draw_uniform(key, c) * (i + 1)), i)
            t = tokens[i]
            tokens[i] = tokens[s]
            tokens[s] = t
        for r in range(n_part):
            for k in range(n_topics):
                nk[r, k] = 0.0
        total = 0.0
        for n in range(length):
            row = phi[tokens[n]]
            for r in range(n_part):
                nk_r = nk[r]
                for m in range(n):  # the inner loop: resample z_m given the rest of z_<n
                    nk_r[z[r, m]] -= 1.0
                    c += one
                    t = _draw(phi[tokens[m]], nk_r, alpha, weights, draw_uniform(key, c))
                    z[r, m] = t
                    nk_r[t] += 1.0
                s_r = 0.0
                for k in range(n_topics):
                    s_r += row[k] * (nk_r[k] + alpha[k])
                p_n[r] = s_r / (alpha_sum + n)
            sum_p = 0.0
            for r in range(n_part):
                sum_p += p_n[r]
            total += np.log(sum_p / n_part)
            if n > 0 and n_part > 1:  # systematic resampling in proportion to p_n
                c += one
                u0 = draw_uniform(key, c)
                if sum_p > 0.0:
                    i = 0
                    cum = p_n[0]
                    for r in range(n_part):
                        target = (u0 + r) / n_part * sum_p
                        while cum <= target and i < n_part - 1:
                            i += 1
                            cum += p_n[i]
                        ancestor[r] = i
                    for r in range(n_part):
                        a = ancestor[r]
                        for m in range(n):
                            z_next[r, m] = z[a, m]
                        for k in range(n_topics):
                            nk_next[r, k] = nk[a, k]
                    z, z_next = z_next, z
                    nk, nk_next = nk_next, nk
            for r in range(n_part):
                c += one
                t = _draw(row, nk[r], alpha, weights, draw_uniform(key, c))
                z[r, n] = t
                nk[r, t] += 1.0
        out[j] = total
    return out


def whole_counts(counts: NDArray[Any]) -> NDArray[np.int64]:
    """``counts`` as int64 token counts; ValueError unless every count is a whole number
    (left-to-right evaluation takes a document's tokens one at a time)."""
    c = np.asarray(counts)
    whole: NDArray[np.int64] = np.rint(c).astype(np.int64)
    if c.size and not np.array_equal(whole, c):
        raise ValueError(
            "left-to-right evaluation needs whole token counts; the held-out documents "
            "have fractional counts (use evaluator='completion')"
        )
    return whole


def left_to_right_block(
    doc_ids: NDArray[np.integer[Any]],
    indptr: NDArray[np.integer[Any]],
    local: NDArray[np.integer[Any]],
    counts: NDArray[Any],
    phi: NDArray[np.floating[Any]],
    alpha: float | NDArray[np.floating[Any]],
    particles: int,
    seed: int,
) -> NDArray[np.float64]:
    """log p(w_d | Φ, α) of each document of a CSR block, by the left-to-right estimate.

    Parameters
    ----------
    doc_ids : int array (D,)
        The documents' ids: with ``seed`` they key each document's random stream.
    indptr, local, counts : CSR block (see :func:`sparklda.kernels.scvb0_block`); counts
        must be whole numbers (a document's tokens are its terms, each repeated).
    phi : float array (U, K)
        φ̂_kw for the block's distinct terms (rows are terms, columns sum to one over
        the vocabulary); computed in float64.
    alpha : float or float array (K,)
        α: a number (symmetric) or a K-vector.
    particles : int
        R, the number of particles (at least 1).

    Returns
    -------
    float64 array (D,): each document's estimated log-likelihood (0 for no tokens).
    """
    if particles < 1:
        raise ValueError(f"particles must be at least 1, got {particles}")
    phi64 = np.ascontiguousarray(phi, dtype=np.float64)
    n_topics = phi64.shape[1]
    alphas = alpha_vector(alpha, n_topics, np.float64)
    ids = np.asarray(doc_ids, dtype=np.int64)
    out = np.zeros(len(ids), dtype=np.float64)
    return _left_to_right_block(
        np.ascontiguousarray(indptr, dtype=np.int64),
        np.ascontiguousarray(local, dtype=np.int32),
        whole_counts(counts),
        phi64,
        np.ascontiguousarray(alphas, dtype=np.float64),
        int(particles),
        doc_keys(seed, Stream.LEFT_TO_RIGHT, ids),
        out,
    )
