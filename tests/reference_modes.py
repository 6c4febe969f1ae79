"""Slow, plainly written references for the batch CVB0 / CVB and online VB kernels.

Nothing here is clever, incremental or vectorised on purpose: every "−ij"
statistic is recomputed from scratch from its definition, and every sum is a
Python loop over tokens (clumps) and topics, so the compiled kernels in
``sparklda.kernels.cvb0`` and ``sparklda.kernels.svb`` can be checked
against them. All arithmetic is float64 whatever the inputs.
"""

from __future__ import annotations

import math

import numpy as np
from scipy.special import digamma, polygamma

from .reference import alpha_list


def _pairs(indptr, j):
    return list(range(int(indptr[j]), int(indptr[j + 1])))


def cvb0_init_gamma(uniforms):
    """Initial γ of each pair: its row of positive draws divided by the row's sum (float64)."""
    gamma = np.zeros((len(uniforms), len(uniforms[0])))
    for p, row in enumerate(uniforms):
        total = sum(float(x) for x in row)
        for k, x in enumerate(row):
            gamma[p, k] = float(x) / total
    return gamma


def dirichlet_expectation(row):
    """E[log θ_k] = ψ(a_k) − ψ(Σ_i a_i) under Dirichlet(a) for one row a (Eq. 6 of Hoffman
    et al. 2010), with scipy's ψ."""
    psi_total = float(digamma(sum(float(x) for x in row)))
    return [float(digamma(float(x))) - psi_total for x in row]


def _cvb_sweep(
    indptr,
    local,
    counts,
    gamma,
    nphi,
    nz,
    alpha,
    eta,
    w_eta,
    second_order,
    var_phi=None,
    var_z=None,
):
    """One sweep of Eq. 3 (CVB0) or Eq. 18 (CVB), clumped, γ updated pair by pair.

    The statistics a pair p = (j, u) sees are, by definition of the
    approximate distributed scheme, the broadcast values minus this block's
    contributions at the start of the sweep plus its current contributions,
    minus the pair's own current contribution m·γ_p (the clumped "−ij"):

        N^Φ_uk(−p) = nphi[u,k] − Σ_{q: u_q=u} m_q γ⁰_qk + Σ_{q≠p: u_q=u} m_q γ_qk
        N^Z_k(−p)  = nz[k]     − Σ_q m_q γ⁰_qk        + Σ_{q≠p} m_q γ_qk
        N^Θ_jk(−p) = Σ_{q≠p in doc j} m_q γ_qk

    and likewise for the variances with m γ (1 − γ) in place of m γ (Eq. 16).
    Each value is floored at 0 (a guard against rounding, inactive in exact
    arithmetic when the broadcast includes the block's own contributions).
    """
    n_pairs, n_topics = gamma.shape
    alphas = alpha_list(alpha, n_topics)
    g0 = [[float(gamma[p, k]) for k in range(n_topics)] for p in range(n_pairs)]
    g = [row[:] for row in g0]
    m = [float(c) for c in counts]

    def mean(q, k, gg):
        return m[q] * gg[q][k]

    def others(q, p):  # the pairs whose share counts: all but p's own
        return q != p

    def var(q, k, gg):
        return m[q] * gg[q][k] * (1.0 - gg[q][k])

    for j in range(len(indptr) - 1):
        doc = _pairs(indptr, j)
        for p in doc:
            u = int(local[p])
            same_term = [q for q in range(n_pairs) if int(local[q]) == u]
            weights = []
            for k in range(n_topics):
                n_theta = sum(mean(q, k, g) for q in doc if others(q, p))
                n_phi = (
                    float(nphi[u, k])
                    - sum(mean(q, k, g0) for q in same_term)
                    + sum(mean(q, k, g) for q in same_term if others(q, p))
                )
                n_z = (
                    float(nz[k])
                    - sum(mean(q, k, g0) for q in range(n_pairs))
                    + sum(mean(q, k, g) for q in range(n_pairs) if others(q, p))
                )
                n_theta, n_phi, n_z = max(n_theta, 0.0), max(n_phi, 0.0), max(n_z, 0.0)
                # Eq. 3 / first line of Eq. 18
                w = (n_phi + eta) / (n_z + w_eta) * (n_theta + alphas[k])
                if second_order:
                    v_theta = sum(var(q, k, g) for q in doc if q != p)
                    v_phi = (
                        float(var_phi[u, k])
                        - sum(var(q, k, g0) for q in same_term)
                        + sum(var(q, k, g) for q in same_term if q != p)
                    )
                    v_z = (
                        float(var_z[k])
                        - sum(var(q, k, g0) for q in range(n_pairs))
                        + sum(var(q, k, g) for q in range(n_pairs) if q != p)
                    )
                    v_theta, v_phi, v_z = max(v_theta, 0.0), max(v_phi, 0.0), max(v_z, 0.0)
                    # second line of Eq. 18 (from Eq. 17 applied to each log term of Eq. 15)
                    w *= math.exp(
                        -v_theta / (2.0 * (n_theta + alphas[k]) ** 2)
                        - v_phi / (2.0 * (n_phi + eta) ** 2)
                        + v_z / (2.0 * (n_z + w_eta) ** 2)
                    )
                weights.append(w)
            total = sum(weights)
            g[p] = [w / total for w in weights]

    n_rows = nphi.shape[0]
    new_gamma = np.array(g, dtype=np.float64).reshape(n_pairs, n_topics)
    d_nphi = np.zeros((n_rows, n_topics))
    d_nz = np.zeros(n_topics)
    d_var_phi = np.zeros((n_rows, n_topics))
    d_var_z = np.zeros(n_topics)
    for q in range(n_pairs):
        u = int(local[q])
        for k in range(n_topics):
            d = mean(q, k, g) - mean(q, k, g0)
            dv = var(q, k, g) - var(q, k, g0)
            d_nphi[u, k] += d
            d_nz[k] += d
            d_var_phi[u, k] += dv
            d_var_z[k] += dv
    return new_gamma, d_nphi, d_nz, d_var_phi, d_var_z


def cvb0_block(indptr, local, counts, gamma, nphi, nz, alpha, eta, w_eta):
    """CVB0 sweep (Eq. 3 of Foulds et al. 2013), clumped "−ij" removing m·γ.

    γ_pk ∝ (N^Φ_uk(−p) + η) / (N^Z_k(−p) + Wη) · (N^Θ_jk(−p) + α), pairs in
    storage order. Does not modify ``gamma``; returns
    ``(new_gamma, delta_nphi, delta_nz)``.
    """
    new_gamma, d_nphi, d_nz, _, _ = _cvb_sweep(
        indptr, local, counts, gamma, nphi, nz, alpha, eta, w_eta, False
    )
    return new_gamma, d_nphi, d_nz


def map_block(indptr, local, counts, nphi, nz, ntheta, alpha, eta, vocab_size):
    """MAP-EM iteration (Asuncion et al. 2009, MAP row of Table 1; lecture notes 003,
    section 4), Jacobi as MLlib's EM: every pair p = (j, u) of the block against the
    previous iteration's counts,

        γ_pk = (N^Φ_uk + η − 1) / (N^Z_k + W(η − 1)) · (N^Θ_jk + α − 1), normalised,

    then N^Θ_jk = Σ_{p in j} m_p γ_pk and the block's N^Φ_uk = Σ_{p of u} m_p γ_pk.
    ``alpha`` and ``eta`` are the priors as given (> 1), W = ``vocab_size``; ``ntheta``
    (D, K) is the block's N^Θ of the previous iteration. Returns
    ``(new_ntheta (D, K), nphi_rows (U, K))``, float64.
    """
    n_docs = len(indptr) - 1
    n_rows, n_topics = nphi.shape
    alphas = alpha_list(alpha, n_topics)
    new_theta = np.zeros((n_docs, n_topics))
    rows = np.zeros((n_rows, n_topics))
    for j in range(n_docs):
        for p in _pairs(indptr, j):
            u = int(local[p])
            m = float(counts[p])
            weights = [
                (max(float(nphi[u, k]), 0.0) + eta - 1.0)
                / (max(float(nz[k]), 0.0) + vocab_size * (eta - 1.0))
                * (max(float(ntheta[j, k]), 0.0) + alphas[k] - 1.0)
                for k in range(n_topics)
            ]
            total = sum(weights)
            for k in range(n_topics):
                new_theta[j, k] += m * weights[k] / total
                rows[u, k] += m * weights[k] / total
    return new_theta, rows


def cvb_block(indptr, local, counts, gamma, nphi, nz, var_phi, var_z, alpha, eta, w_eta):
    """CVB sweep with the Gaussian correction (Teh, Newman & Welling 2007, Eq. 16-18).

    The CVB0 term times exp(−V^Θ/(2(N^Θ+α)²) − V^Φ/(2(N^Φ+η)²) + V^Z/(2(N^Z+Wη)²)),
    all statistics "−p". Does not modify ``gamma``; returns
    ``(new_gamma, delta_nphi, delta_nz, delta_var_phi, delta_var_z)``.
    """
    return _cvb_sweep(
        indptr, local, counts, gamma, nphi, nz, alpha, eta, w_eta, True, var_phi, var_z
    )


def svb_estep_block(indptr, local, counts, exp_elogbeta, alpha, gamma_init, max_iter=100, tol=1e-3):
    """E-step of Algorithm 2 of Hoffman et al. (2010), as ``onlineldavb.py`` ``do_e_step``.

    Per document: E[log θ_k] = ψ(γ_k) − ψ(Σγ); φ_pk ∝ exp(E[log θ_k]) expElogβ[u_p, k];
    γ_k = α + Σ_p m_p φ_pk, until mean_k |Δγ_k| < tol (at most ``max_iter``
    updates); sstats[u_p, k] += m_p φ_pk with the final γ. Empty documents:
    γ = α. Returns ``(gamma (D, K), sstats (U, K))``.
    """
    n_docs = len(indptr) - 1
    n_topics = exp_elogbeta.shape[1]
    alphas = alpha_list(alpha, n_topics)
    gamma = np.zeros((n_docs, n_topics))
    sstats = np.zeros((exp_elogbeta.shape[0], n_topics))

    def exp_elogtheta(g):
        psi_total = float(digamma(sum(g)))
        return [math.exp(float(digamma(x)) - psi_total) for x in g]

    def phi(p, et):
        u = int(local[p])
        r = [et[k] * float(exp_elogbeta[u, k]) for k in range(n_topics)]
        norm = sum(r) + 1e-100
        return [x / norm for x in r]

    for d in range(n_docs):
        doc = _pairs(indptr, d)
        if not doc:
            gamma[d] = alphas
            continue
        g = [float(x) for x in gamma_init[d]]
        et = exp_elogtheta(g)
        for _ in range(max_iter):
            new = list(alphas)
            for p in doc:
                r = phi(p, et)
                for k in range(n_topics):
                    new[k] += float(counts[p]) * r[k]
            change = sum(abs(a - b) for a, b in zip(new, g, strict=True)) / n_topics
            g = new
            et = exp_elogtheta(g)
            if change < tol:
                break
        gamma[d] = g
        for p in doc:
            r = phi(p, et)
            for k in range(n_topics):
                sstats[int(local[p]), k] += float(counts[p]) * r[k]
    return gamma, sstats


def _expected_log(prior, probs):
    """E[log(prior + n)] for n a sum of independent Bernoulli(probs): the exact
    distribution of n by convolution (appendix of Teh, Newman & Welling 2007)."""
    pmf = [1.0]
    for q in probs:
        nxt = [0.0] * (len(pmf) + 1)
        for n, pr in enumerate(pmf):
            nxt[n] += pr * (1.0 - q)
            nxt[n + 1] += pr * q
        pmf = nxt
    return sum(pr * math.log(prior + n) for n, pr in enumerate(pmf))


def cvb_exact_pair_gamma(indptr, local, counts, gamma, p, alpha, eta, w_eta):
    """Eq. 15 of Teh et al. (2007) for one token p, expectations computed exactly.

    The block is taken to be the whole corpus; every pair q stands for
    ``counts[q]`` tokens that each carry the Bernoulli(γ_qk) indicator, and
    pair p must be a single token (count 1), so removing it is the exact
    token-level "−ij". Returns γ_p (K,).
    """
    assert counts[p] == 1
    n_pairs, n_topics = gamma.shape
    doc = next(j for j in range(len(indptr) - 1) if indptr[j] <= p < indptr[j + 1])
    u = int(local[p])
    logits = []
    for k in range(n_topics):

        def tokens(qs, k=k):
            return [float(gamma[q, k]) for q in qs if q != p for _ in range(int(counts[q]))]

        in_doc = tokens(_pairs(indptr, doc))
        same_term = tokens([q for q in range(n_pairs) if int(local[q]) == u])
        everywhere = tokens(range(n_pairs))
        logits.append(
            _expected_log(alpha, in_doc)
            + _expected_log(eta, same_term)
            - _expected_log(w_eta, everywhere)
        )
    top = max(logits)
    w = [math.exp(x - top) for x in logits]
    return np.array([x / sum(w) for x in w])


# --------------------------------------------------------------------------
# Learned priors (sparklda.kernels.priors)


def doc_prior_stats(ntheta, alpha, logp0=None):
    """Minka's statistics: num_k = Σ_d ψ(N_dk + α_k) − ψ(α_k), den = Σ_d ψ(N_d + α0) − ψ(α0).

    With ``logp0`` (log P(N_dk = 0)) the numerator is the expected-count one:
    p1 · [ψ(max(N_dk/p1, 1) + α_k) − ψ(α_k)], p1 = 1 − exp(logp0), 0 when p1 or N_dk is 0."""
    n_topics = len(ntheta[0])
    a = alpha_list(alpha, n_topics)
    a0 = sum(a)
    num = [0.0] * n_topics
    den = 0.0
    for j, row in enumerate(ntheta):
        n_d = sum(float(x) for x in row)
        if n_d <= 0:
            continue
        for k in range(n_topics):
            if logp0 is None:
                num[k] += float(digamma(float(row[k]) + a[k])) - float(digamma(a[k]))
                continue
            p1 = 1.0 - math.exp(float(logp0[j][k]))
            if float(row[k]) <= 0 or p1 <= 0:
                continue
            cond = max(float(row[k]) / p1, 1.0)
            num[k] += p1 * (float(digamma(cond + a[k])) - float(digamma(a[k])))
        den += float(digamma(n_d + a0)) - float(digamma(a0))
    return np.array(num), den


def elog_theta_offsets(gamma, alpha):
    """Σ_d [ψ(γ_dk) − ψ(Σγ_d)] − [ψ(α_k) − ψ(α0)]."""
    n_topics = len(gamma[0])
    a = alpha_list(alpha, n_topics)
    prior = dirichlet_expectation(a)
    out = [0.0] * n_topics
    for row in gamma:
        e = dirichlet_expectation(row)
        for k in range(n_topics):
            out[k] += e[k] - prior[k]
    return np.array(out)


def trigamma(x):
    return float(polygamma(1, x))


def minka_alpha_step(alpha, num, den):
    """α_k · num_k / den (Minka 2000, Eq. 55), clipped to [1e-6, 1e4]."""
    return np.array([min(max(a * n / den, 1e-6), 1e4) for a, n in zip(alpha, num, strict=True)])


def hoffman_alpha_step(alpha, g, rho):
    """Newton step of gensim's ``update_dir_prior`` (N = 1): α + ρ · (−(g − b)/q)."""
    q = [-trigamma(a) for a in alpha]
    c = trigamma(sum(alpha))
    b = sum(gk / qk for gk, qk in zip(g, q, strict=True)) / (1.0 / c + sum(1.0 / qk for qk in q))
    new = [a - rho * (gk - b) / qk for a, gk, qk in zip(alpha, g, q, strict=True)]
    if min(new) <= 0:
        return np.array(alpha, dtype=float)
    return np.array([min(max(x, 1e-6), 1e4) for x in new])


def _eta_term(n, eta, expected):
    """ψ(n + η) − ψ(η), or its expectation over N ~ Poisson(n) as
    P(N ≥ 1) · [ψ(max(n / P(N ≥ 1), 1) + η) − ψ(η)]."""
    if not expected:
        return float(digamma(n + eta)) - float(digamma(eta))
    if n <= 0.0:
        return 0.0
    p1 = 1.0 - math.exp(-n)
    return p1 * (float(digamma(max(n / p1, 1.0) + eta)) - float(digamma(eta)))


def minka_eta(topic_word, eta, max_iter=100, tol=1e-6, expected=True):
    """Symmetric η by Minka's fixed point on (V, K) topic-word statistics."""
    v, k = topic_word.shape
    for _ in range(max_iter):
        num = sum(
            _eta_term(max(float(topic_word[w, j]), 0.0), eta, expected)
            for w in range(v)
            for j in range(k)
        )
        den = sum(
            float(digamma(sum(max(float(topic_word[w, j]), 0.0) for w in range(v)) + v * eta))
            - float(digamma(v * eta))
            for j in range(k)
        )
        new = min(max(eta * num / (v * den), 1e-6), 1e4)
        done = abs(new - eta) <= tol * eta
        eta = new
        if done:
            break
    return eta


# --------------------------------------------------------------------------
# Collapsed Gibbs sampling (lecture notes 003, section 3.2, Eq. 52)


def gibbs_conditional(ndk, nwk, nk, alpha, eta, w_eta):
    """The unnormalised conditional of one token's topic (Eq. 52), its own assignment
    already removed from the counts: (N^Θ_dk + α_k)(N^Φ_wk + η)/(N^Z_k + Wη), a list."""
    return [
        (float(ndk[k]) + float(alpha[k])) * (float(nwk[k]) + eta) / (float(nk[k]) + w_eta)
        for k in range(len(nk))
    ]


def gibbs_buckets(ndk, nwk, nk, alpha, eta, w_eta):
    """Eq. 52's weight split in SparseLDA's three buckets (Yao et al. 2009), each a list
    over every topic: q_k = (α_k + N^Θ_dk) N^Φ_wk / (N^Z_k + Wη) (the word's),
    r_k = N^Θ_dk η / (N^Z_k + Wη) (the document's), s_k = α_k η / (N^Z_k + Wη)."""
    q, r, s = [], [], []
    for k in range(len(nk)):
        den = float(nk[k]) + w_eta
        q.append((float(alpha[k]) + float(ndk[k])) * float(nwk[k]) / den)
        r.append(float(ndk[k]) * eta / den)
        s.append(float(alpha[k]) * eta / den)
    return q, r, s


def _walk(weights, x):
    """The first topic (in increasing order, among those of positive weight) at which
    the running sum of ``weights`` exceeds ``x``; the last of them if none does (a
    rounding overshoot); None when no weight is positive."""
    last = None
    for k, w in enumerate(weights):
        if w <= 0:
            continue
        last = k
        x -= w
        if x < 0:
            return k
    return last


def gibbs_pick(ndk, nwk, nk, alpha, eta, w_eta, u):
    """The topic a draw ``u`` in [0, 1) picks from Eq. 52's conditional, walking the
    three buckets of :func:`gibbs_buckets` in the order q, r, s, each in increasing
    topic order (the inverse CDF of the conditional in that order of its cells)."""
    q, r, s = gibbs_buckets(ndk, nwk, nk, alpha, eta, w_eta)
    x = u * (sum(s) + sum(r) + sum(q))
    if x < sum(q):
        return _walk(q, x)
    x -= sum(q)
    if x < sum(r):
        return _walk(r, x)
    x -= sum(r)
    k = _walk(s, x)
    return len(nk) - 1 if k is None else k


def gibbs_block(indptr, local, counts, z, nphi, nz, alpha, eta, w_eta, draws):
    """One collapsed Gibbs sweep, plainly: for each token (documents, their pairs, a
    pair's tokens in order), remove it from N^Θ_d (recounted from ``z`` for every
    token), N^Φ and N^Z, pick its topic with :func:`gibbs_pick` from its draw (``draws``,
    one per token in z's order) and add it back. Returns (z, nphi, nz) as new arrays
    (float64 counts)."""
    z = [int(x) for x in z]
    nphi = np.array(nphi, dtype=np.float64)
    nz = np.array(nz, dtype=np.float64)
    k_topics = nphi.shape[1]
    a = alpha_list(alpha, k_topics)
    starts = []  # the first token of each document
    t = 0
    for j in range(len(indptr) - 1):
        starts.append(t)
        for p in _pairs(indptr, j):
            t += int(counts[p])
    starts.append(t)
    t = 0
    for j in range(len(indptr) - 1):
        for p in _pairs(indptr, j):
            u = int(local[p])
            for _ in range(int(counts[p])):
                old = z[t]
                ndk = [0.0] * k_topics
                for i in range(starts[j], starts[j + 1]):
                    if i != t:
                        ndk[z[i]] += 1.0
                nphi[u, old] -= 1.0
                nz[old] -= 1.0
                new = gibbs_pick(ndk, nphi[u], nz, a, eta, w_eta, float(draws[t]))
                nphi[u, new] += 1.0
                nz[new] += 1.0
                z[t] = new
                t += 1
    return np.array(z), nphi, nz


def gibbs_init(indptr, local, counts, k_topics, draws, phi=None, alpha=0.1):
    """Initial topics: ⌊u·K⌋ per token without ``phi``; with it, each token of a document
    in turn drawn (inverse CDF in topic order) with weight φ_wk (N^Θ_dk + α_k), N^Θ_d
    counting the document's tokens drawn before it."""
    a = alpha_list(alpha, k_topics)
    z = []
    t = 0
    for j in range(len(indptr) - 1):
        ndk = [0.0] * k_topics
        for p in _pairs(indptr, j):
            for _ in range(int(counts[p])):
                u = float(draws[t])
                if phi is None:
                    new = min(int(u * k_topics), k_topics - 1)
                else:
                    w = [float(phi[local[p], k]) * (ndk[k] + a[k]) for k in range(k_topics)]
                    new = _walk(w, u * sum(w))
                    new = k_topics - 1 if new is None else new
                ndk[new] += 1.0
                z.append(new)
                t += 1
    return np.array(z)


def count_refresh(new, old):
    """N^Z, the total change and the largest count of a sweep's new counts, in numpy."""
    new, old = np.asarray(new, dtype=np.float64), np.asarray(old, dtype=np.float64)
    return new.sum(axis=0), float(np.abs(new - old).sum()), float(new.max(initial=0))
