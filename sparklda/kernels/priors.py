"""Learned Dirichlet priors: the statistics and the steps (docs/architecture.md, "Learned priors").

Pure functions over numpy arrays; no Spark, no I/O. The references written
plainly from the formulas (with ``scipy.special``) are in
``tests/reference_modes.py`` (``doc_prior_stats``, ``elog_theta_offsets``,
``minka_alpha_step``, ``hoffman_alpha_step``, ``minka_eta``, ``trigamma``).

Asymmetric α (a K-vector) by Minka's fixed point (Minka 2000, "Estimating a
Dirichlet distribution", Eq. 55; Wallach 2008), on the documents' topic counts
N_dk (N_d = Σ_k N_dk, α0 = Σ_k α_k):

    α_k ← α_k · Σ_d [ψ(N_dk + α_k) − ψ(α_k)] / Σ_d [ψ(N_d + α0) − ψ(α0)]

The two sums are the sufficient statistics (:func:`doc_prior_stats`), small
and additive over documents, so they are computed per block on the executors
and summed like the topic-word statistics. The ratio does not depend on how
many documents were summed, so a minibatch's statistics give a step towards
the same fixed point (SCVB0 takes it as an online step).

Online VB (Hoffman, Blei & Bach 2010) learns α by a Newton step on the
minibatch's E_q[log θ] (:func:`hoffman_alpha_step`, as gensim's
``update_dir_prior``), whose statistics are Σ_d E_q[log θ_dk] minus the
prior's E[log θ_k] (:func:`elog_theta_offsets`: documents with no tokens keep
γ = α and add nothing).

A symmetric η by the same fixed point on the topic-word statistics, with the
V·K cells sharing one value (:func:`minka_eta`); its parts (:func:`eta_cells`,
:func:`eta_numerator`, :func:`eta_count_numerator`, :func:`eta_fixed_point`) give the
same η from statistics held in term shards.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numba
import numpy as np
from numpy.typing import NDArray

from .config import JIT_OPTIONS
from .special import digamma

#: A learned prior stays in [MIN_PRIOR, MAX_PRIOR] (the range TrainParams accepts for α and η
#: is (0, 1e4]; Minka's fixed point drives the α of an unused topic towards 0).
MIN_PRIOR = 1e-6
MAX_PRIOR = 1e4


def alpha_vector(alpha: Any, k: int, dtype: Any) -> NDArray[np.floating[Any]]:
    """α as a C-contiguous K-vector of ``dtype``: a number is repeated K times (the
    bits of the number in every element), a vector must have K elements."""
    a = np.asarray(alpha, dtype=np.float64)
    if a.ndim == 0:
        return np.full(k, a, dtype=dtype)
    if a.shape != (k,):
        raise ValueError(f"alpha must be a number or a vector of K={k} values, got {a.shape}.")
    return np.ascontiguousarray(a.astype(dtype))


@numba.njit(**JIT_OPTIONS)
def _doc_prior_stats(
    ntheta: NDArray[np.floating[Any]],
    logp0: NDArray[np.floating[Any]],
    alpha: NDArray[np.float64],
    num: NDArray[np.float64],
) -> float:
    n_docs, n_topics = ntheta.shape
    expected = logp0.shape[0] > 0
    alpha0 = 0.0
    for k in range(n_topics):
        alpha0 += alpha[k]
    psi_a0 = digamma(alpha0)
    den = 0.0
    for j in range(n_docs):
        n_j = 0.0
        for k in range(n_topics):
            n_j += np.float64(ntheta[j, k])
        if n_j <= 0.0:
            continue  # an empty document adds ψ(α) − ψ(α) = 0
        for k in range(n_topics):
            mu = np.float64(ntheta[j, k])
            if not expected:
                num[k] += digamma(mu + alpha[k]) - digamma(alpha[k])
                continue
            # P(N ≥ 1) · [ψ(E[N | N ≥ 1] + α) − ψ(α)]: exact when every γ is 0 or 1
            p1 = -np.expm1(np.float64(logp0[j, k]))
            if mu <= 0.0 or p1 <= 0.0:
                continue
            cond = max(mu / p1, 1.0)
            num[k] += p1 * (digamma(cond + alpha[k]) - digamma(alpha[k]))
        den += digamma(n_j + alpha0) - psi_a0
    return den


def doc_prior_stats(
    ntheta: NDArray[np.floating[Any]], alpha: Any, logp0: NDArray[np.floating[Any]] | None = None
) -> tuple[NDArray[np.float64], float]:
    """Minka's sufficient statistics of α from documents' topic counts.

    Returns ``(num, den)``: num_k = Σ_d ψ(N_dk + α_k) − ψ(α_k) (float64, K)
    and den = Σ_d ψ(N_d + α0) − ψ(α0), N_d = Σ_k N_dk, summed in float64 in
    document order. ``ntheta`` is (D, K); ``alpha`` a number or a K-vector.

    Expected counts (``logp0`` given, (D, K): log P(N_dk = 0), Σ over the
    document's tokens of log(1 − γ_k)). The N_dk of the collapsed modes are
    expected counts: sums of the tokens' assignment probabilities γ. The fixed
    point was derived for integer counts, and ψ(n + α) − ψ(α) at a small
    fractional n is close to its value at one whole token (at α = 0.1,
    n = 0.05 gives 3.4 where one token gives 10), so topics spread thinly over
    a document look used and α comes out too large. With ``logp0`` the
    numerator is instead the expectation of ψ(N_dk + α_k) − ψ(α_k) over the
    count N_dk the γ describe, approximated as P(N ≥ 1) · [ψ(E[N | N ≥ 1] +
    α_k) − ψ(α_k)] with P(N ≥ 1) = 1 − exp(logp0) and E[N | N ≥ 1] =
    max(N_dk / P(N ≥ 1), 1); that is exact when every γ is 0 or 1, and a thin
    spread n over many tokens counts about n/α instead of ψ(n + α) − ψ(α).
    Equivalent to ``tests/reference_modes.py::doc_prior_stats``.
    """
    ntheta = np.ascontiguousarray(ntheta)
    k = ntheta.shape[1]
    a = np.asarray(alpha_vector(alpha, k, np.dtype(np.float64)), dtype=np.float64)
    num = np.zeros(k, dtype=np.float64)
    if logp0 is None:
        lp = np.zeros((0, k), dtype=np.float64)
    else:
        lp = np.ascontiguousarray(logp0, dtype=np.float64)
        if lp.shape != ntheta.shape:
            raise ValueError(f"logp0 must be shaped like ntheta {ntheta.shape}, got {lp.shape}.")
    den = _doc_prior_stats(ntheta, lp, a, num)
    return num, float(den)


@numba.njit(**JIT_OPTIONS)
def _elog_theta_offsets(
    gamma: NDArray[np.floating[Any]], alpha: NDArray[np.float64], out: NDArray[np.float64]
) -> None:
    n_docs, n_topics = gamma.shape
    alpha0 = 0.0
    for k in range(n_topics):
        alpha0 += alpha[k]
    psi_a0 = digamma(alpha0)
    for j in range(n_docs):
        total = 0.0
        for k in range(n_topics):
            total += np.float64(gamma[j, k])
        psi_total = digamma(total)
        for k in range(n_topics):
            out[k] += (digamma(np.float64(gamma[j, k])) - psi_total) - (digamma(alpha[k]) - psi_a0)


def elog_theta_offsets(gamma: NDArray[np.floating[Any]], alpha: Any) -> NDArray[np.float64]:
    """Σ_d (E_q[log θ_dk] − E_prior[log θ_k]) over the rows γ_d of ``gamma`` (D, K):
    Σ_d [ψ(γ_dk) − ψ(Σγ_d)] − [ψ(α_k) − ψ(α0)], float64 (K,), in document order.

    Divided by the number of documents it is the gradient of the minibatch's
    ELBO in α per document (Hoffman et al. 2010; gensim's ``update_dir_prior``).
    Equivalent to ``tests/reference_modes.py::elog_theta_offsets``.
    """
    gamma = np.ascontiguousarray(gamma)
    k = gamma.shape[1]
    out = np.zeros(k, dtype=np.float64)
    a = np.asarray(alpha_vector(alpha, k, np.dtype(np.float64)), dtype=np.float64)
    _elog_theta_offsets(gamma, a, out)
    return out


@numba.njit(**JIT_OPTIONS)
def trigamma(x: float) -> float:
    """ψ'(x) for x > 0, in float64: the recurrence ψ'(x) = ψ'(x + 1) + 1/x² until
    x ≥ 6, then the asymptotic series 1/x + 1/(2x²) + Σ B_2n / x^(2n+1)
    (Bernoulli numbers up to B_12). Equivalent to ``scipy.special.polygamma(1, x)``."""
    x = np.float64(x)
    if not x > 0.0:
        return np.nan
    result = 0.0
    while x < 6.0:
        result += 1.0 / (x * x)
        x += 1.0
    inv = 1.0 / x
    inv2 = inv * inv
    # 1/x + 1/(2x²) + 1/(6x³) − 1/(30x⁵) + 1/(42x⁷) − 1/(30x⁹) + 5/(66x¹¹) − 691/(2730x¹³)
    tail = 5.0 / 66 - inv2 * (691.0 / 2730)
    tail = 1.0 / 42 - inv2 * (1.0 / 30 - inv2 * tail)
    tail = 1.0 / 6 - inv2 * (1.0 / 30 - inv2 * tail)
    series = (1.0 + inv * (0.5 + inv * tail)) * inv
    return result + series


def _clip(alpha: NDArray[np.float64]) -> NDArray[np.float64]:
    out: NDArray[np.float64] = np.clip(alpha, MIN_PRIOR, MAX_PRIOR)
    return out


def minka_alpha_step(alpha: Any, num: Any, den: float) -> NDArray[np.float64]:
    """One step of Minka's fixed point: α_k · num_k / den (clipped to
    [MIN_PRIOR, MAX_PRIOR]); α unchanged when ``den`` is not positive (no tokens)."""
    a = np.asarray(alpha, dtype=np.float64)
    if not den > 0.0:
        return a.copy()
    return _clip(a * np.asarray(num, dtype=np.float64) / den)


def keep_total(alpha: Any, total: float) -> NDArray[np.float64]:
    """``alpha`` rescaled to sum to ``total`` (Minka's fixed point for the base measure
    m = α/α0 at a fixed α0: the step's α, its total set back to α0), clipped to
    [MIN_PRIOR, MAX_PRIOR]."""
    a = np.asarray(alpha, dtype=np.float64)
    s = float(a.sum())
    if not s > 0.0:
        return a.copy()
    return _clip(a * (float(total) / s))


def hoffman_alpha_step(alpha: Any, offsets_mean: Any, rho: float) -> NDArray[np.float64]:
    """Online VB's α step (Hoffman et al. 2010; gensim's ``update_dir_prior``):
    a Newton step on the minibatch's ELBO in α, scaled by ρ.

    g = ``offsets_mean`` (the mean over the minibatch's documents of
    E_q[log θ_d] − E_prior[log θ], :func:`elog_theta_offsets` / |S|); the
    Hessian is diag(q) + c with q_k = −ψ'(α_k), c = ψ'(α0); then
    b = Σ_k (g_k/q_k) / (1/c + Σ_k 1/q_k), Δ_k = −(g_k − b)/q_k and
    α ← α + ρΔ when every element stays positive (α unchanged otherwise, as
    gensim does), clipped to [MIN_PRIOR, MAX_PRIOR].
    """
    a = np.asarray(alpha, dtype=np.float64)
    g = np.asarray(offsets_mean, dtype=np.float64)
    q = -np.array([trigamma(float(x)) for x in a])
    c = trigamma(float(a.sum()))
    b = (g / q).sum() / (1.0 / c + (1.0 / q).sum())
    new = a + rho * (-(g - b) / q)
    if not np.all(new > 0.0) or not np.all(np.isfinite(new)):
        return a.copy()
    return _clip(new)


@numba.njit(**JIT_OPTIONS)
def _eta_num(topic_word: NDArray[np.float64], eta: float, expected: bool) -> float:
    v, k = topic_word.shape
    psi_eta = digamma(eta)
    num = 0.0
    for w in range(v):
        for j in range(k):
            mu = topic_word[w, j]
            if not expected:
                num += digamma(mu + eta) - psi_eta
            elif mu > 0.0:
                # P(N ≥ 1) · [ψ(E[N | N ≥ 1] + η) − ψ(η)] with N ~ Poisson(mu)
                p1 = -np.expm1(-mu)
                num += p1 * (digamma(max(mu / p1, 1.0) + eta) - psi_eta)
    return num


@numba.njit(**JIT_OPTIONS)
def _column_totals(topic_word: NDArray[np.float64]) -> NDArray[np.float64]:
    v, k = topic_word.shape
    out = np.zeros(k)
    for j in range(k):
        total = 0.0
        for w in range(v):
            total += topic_word[w, j]
        out[j] = total
    return out


@numba.njit(**JIT_OPTIONS)
def _eta_den(totals: NDArray[np.float64], v: int, eta: float) -> float:
    den = 0.0
    psi_w = digamma(v * eta)
    for j in range(len(totals)):
        den += digamma(totals[j] + v * eta) - psi_w
    return den


def eta_cells(topic_word: Any) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """(the K column sums, the positive cells in row order) of statistics ``topic_word``
    (any of the V rows), negative values counted as 0: what :func:`minka_eta` reads of
    them (a zero cell adds exactly 0 to its numerator, whole or expected counts)."""
    tw = np.ascontiguousarray(np.maximum(np.asarray(topic_word, dtype=np.float64), 0.0))
    flat = tw.reshape(-1)
    return _column_totals(tw), flat[flat > 0.0]


def eta_numerator(cells: Any, eta: float, expected: bool = True) -> float:
    """Σ [ψ(N + η) − ψ(η)] over the cells ``cells`` (any shape, any of the V·K cells:
    the sum is additive over them), the numerator of :func:`minka_eta` (with
    ``expected``, its Poisson reading of expected counts). Negative cells count as 0."""
    flat = np.maximum(np.asarray(cells, dtype=np.float64), 0.0).reshape(-1, 1)
    return float(_eta_num(np.ascontiguousarray(flat), float(eta), bool(expected)))


@numba.njit(**JIT_OPTIONS)
def _eta_count_num(values: NDArray[np.float64], counts: NDArray[np.int64], eta: float) -> float:
    psi_eta = digamma(eta)
    num = 0.0
    for i in range(len(values)):
        num += counts[i] * (digamma(values[i] + eta) - psi_eta)
    return num


def eta_count_numerator(values: Any, counts: Any, eta: float) -> float:
    """:func:`minka_eta`'s numerator of whole counts (``expected=False``) from their
    histogram: ``counts[i]`` cells hold ``values[i]`` (zero cells add nothing)."""
    vals = np.ascontiguousarray(np.asarray(values, dtype=np.float64))
    cnt = np.ascontiguousarray(np.asarray(counts, dtype=np.int64))
    return float(_eta_count_num(vals, cnt, float(eta)))


def merge_histograms(parts: list[tuple[Any, Any]]) -> tuple[NDArray[np.float64], NDArray[np.int64]]:
    """The histogram ``(distinct values, their counts)`` of the histograms ``parts``."""
    if not parts:
        return np.zeros(0), np.zeros(0, np.int64)
    values = np.concatenate([np.asarray(v, dtype=np.float64) for v, _ in parts])
    counts = np.concatenate([np.asarray(c, dtype=np.int64) for _, c in parts])
    distinct, where = np.unique(values, return_inverse=True)
    summed = np.zeros(len(distinct), np.int64)
    np.add.at(summed, where, counts)
    return distinct, summed


#: Chebyshev nodes of :func:`eta_node_sums` (in log η, over a factor 8 either way).
ETA_NODES = 24
#: The factor either way of η an interpolant of :func:`eta_node_sums` covers.
ETA_SPAN = 8.0


@numba.njit(**JIT_OPTIONS)
def _eta_node_sums(cells: NDArray[np.float64], nodes: NDArray[np.float64]) -> NDArray[np.float64]:
    n = len(nodes)
    psi = np.empty(n)
    for i in range(n):
        psi[i] = digamma(nodes[i])
    out = np.zeros(n)
    for mu in cells:
        if mu > 0.0:
            p1 = -np.expm1(-mu)
            m = max(mu / p1, 1.0)
            for i in range(n):
                out[i] += p1 * (digamma(m + nodes[i]) - psi[i])
    return out


def eta_nodes(center: float, n: int = ETA_NODES, span: float = ETA_SPAN) -> NDArray[np.float64]:
    """The η values at which :func:`eta_node_sums` reads the cells: ``n`` Chebyshev
    points (first kind) in log η over [center/span, center·span]."""
    h = np.log(float(span))
    x = np.log(float(center)) + h * np.cos(np.pi * (np.arange(n) + 0.5) / n)
    out: NDArray[np.float64] = np.exp(x)
    return out


def eta_node_sums(cells: Any, nodes: Any) -> NDArray[np.float64]:
    """:func:`minka_eta`'s numerator of expected counts ``cells`` (any of the V·K cells:
    additive over them) at each η of ``nodes``, for :func:`eta_interpolant`."""
    flat = np.ascontiguousarray(np.maximum(np.asarray(cells, dtype=np.float64), 0.0).reshape(-1))
    return np.asarray(_eta_node_sums(flat, np.asarray(nodes, dtype=np.float64)))


def eta_interpolant(
    center: float, sums: Any, span: float = ETA_SPAN
) -> Callable[[float], float | None]:
    """:func:`minka_eta`'s numerator (expected counts) at η in [center/span,
    center·span] (None outside) from ``sums``, its values at :func:`eta_nodes` (center)
    (:func:`eta_node_sums` of every cell): η times it interpolated in log η. Each cell's
    term P·[ψ(E + η) − ψ(η)] is analytic in x = log η within |Im x| < π (its poles are
    at η = 0, −1, …), and η times it stays within a bounded factor over the span (about
    P·E/η for a large η, P/η for a small one), so 24 nodes over a factor 8 either way
    give it to near the rounding of the sums (tests/test_priors.py)."""
    nodes = eta_nodes(center, len(sums), span)
    values = np.asarray(sums, dtype=np.float64) * nodes
    n = len(values)
    k = np.arange(n)[:, None]
    coef = (2.0 / n) * (np.cos(np.pi * k * (np.arange(n)[None, :] + 0.5) / n) @ values)
    coef[0] /= 2.0
    c, h = np.log(float(center)), np.log(float(span))

    def numerator(eta: float) -> float | None:
        t = (np.log(float(eta)) - c) / h
        if not abs(t) <= 1.0 + 1e-9:
            return None
        return float(np.polynomial.chebyshev.chebval(t, coef)) / float(eta)

    return numerator


def eta_fixed_point(
    numerator: Callable[[float], float],
    totals: Any,
    vocab_size: int,
    eta: float,
    max_iter: int = 100,
    tol: float = 1e-6,
) -> float:
    """Minka's fixed point for a symmetric η (:func:`minka_eta`) from its parts:
    ``numerator(η)`` (:func:`eta_numerator` summed over all V rows, however they are
    held) and ``totals``, the K column sums N_k of the (non-negative) statistics."""
    totals = np.ascontiguousarray(np.asarray(totals, dtype=np.float64))
    v = int(vocab_size)
    eta = float(eta)
    for _ in range(int(max_iter)):
        den = float(_eta_den(totals, v, eta))
        if not den > 0.0:
            break
        num = float(numerator(eta))
        new = min(max(eta * num / (v * den), MIN_PRIOR), MAX_PRIOR)
        done = abs(new - eta) <= tol * eta
        eta = new
        if done:
            break
    return eta


def minka_eta(
    topic_word: Any, eta: float, max_iter: int = 100, tol: float = 1e-6, expected: bool = True
) -> float:
    """A symmetric η fitted to topic-word statistics (V, K) by Minka's fixed point:

        η ← η · Σ_k Σ_w [ψ(N_wk + η) − ψ(η)] / (V · Σ_k [ψ(N_k + Vη) − ψ(Vη)])

    iterated from ``eta`` until the relative change is below ``tol`` or
    ``max_iter`` steps, clipped to [MIN_PRIOR, MAX_PRIOR]. Negative statistics
    (rounding) count as 0.

    ``expected`` (the default): the N_wk of every mode are expected counts, sums of
    many tokens' small assignment probabilities, and ψ(n + η) − ψ(η) at a small
    fractional n is close to its value at a whole token (at η = 0.01, n = 0.05
    gives 83 where one token gives 100), so a word spread thinly over the topics
    looks used by all of them and η comes out far too large. The numerator then
    takes the expectation over the count N_wk as a Poisson variable of mean
    N_wk (a sum of many rare Bernoulli draws), approximated as
    P(N ≥ 1) · [ψ(E[N | N ≥ 1] + η) − ψ(η)], P(N ≥ 1) = 1 − exp(−N_wk),
    E[N | N ≥ 1] = max(N_wk / P(N ≥ 1), 1): a thin spread n counts about n/η.
    The same approximation as :func:`doc_prior_stats`' for α, with the Poisson
    P(N = 0) in place of the documents' Σ log(1 − γ) (docs/architecture.md,
    "Learned priors"). ``expected=False`` reads the statistics as integer counts.
    Equivalent to ``tests/reference_modes.py::minka_eta``. The numerator is additive
    over the rows and the denominator needs only the column sums, so statistics held
    in term shards give the same η (:func:`eta_fixed_point`, :func:`eta_numerator`).
    """
    tw = np.ascontiguousarray(np.maximum(np.asarray(topic_word, dtype=np.float64), 0.0))
    flag = bool(expected)

    def numerator(e: float) -> float:
        return float(_eta_num(tw, e, flag))

    return eta_fixed_point(numerator, _column_totals(tw), tw.shape[0], eta, max_iter, tol)
