"""Slow, plainly written references for the kernels, straight from the papers.

Nothing here is clever or vectorised on purpose: each function follows the
equations token by token so the compiled kernels can be checked against it.
"""

from __future__ import annotations

import math

import numpy as np


def scvb0_block(indptr, local, counts, phi_norm, theta_init, alpha, burnin=1,
                s_theta=1.0, tau_theta=10.0, kappa_theta=0.9):
    """Algorithm 2 of Foulds et al. (2013) for a block of documents, clumped.

    Eq. 5: γ_k = φ_norm[w, k] (N^Θ_jk + α), normalised.
    Eq. 9: N^Θ_j = (1 − ρ)^m N^Θ_j + C_j γ (1 − (1 − ρ)^m), ρ = s/(τ + t)^κ.
    Last pass: N̂^Φ_w += m γ.
    """
    n_docs = len(indptr) - 1
    n_topics = phi_norm.shape[1]
    nhat = np.zeros((phi_norm.shape[0], n_topics), dtype=np.float64)
    for j in range(n_docs):
        pairs = range(indptr[j], indptr[j + 1])
        if len(pairs) == 0:
            continue
        c_j = float(sum(counts[p] for p in pairs))
        ntheta = [float(x) for x in theta_init[j]]
        t = 0.0
        for sweep in range(burnin + 1):
            for p in pairs:
                w, m = local[p], float(counts[p])
                gamma = [float(phi_norm[w, k]) * (ntheta[k] + alpha) for k in range(n_topics)]
                z = sum(gamma)
                gamma = [g / z for g in gamma]
                rho = s_theta / (tau_theta + t) ** kappa_theta
                decay = (1.0 - rho) ** m
                ntheta = [decay * ntheta[k] + c_j * gamma[k] * (1.0 - decay) for k in range(n_topics)]
                if sweep == burnin:
                    for k in range(n_topics):
                        nhat[w, k] += m * gamma[k]
                t += m
    return nhat


def scvb0_unclumped_doc(terms, phi_norm, theta_init, alpha, burnin=1, s_theta=1.0,
                        tau_theta=10.0, kappa_theta=0.9):
    """Algorithm 2 for one document given as a token list, one token at a time.

    Eq. 5 and Eq. 6 per token, with no clumping, except that within a run of
    equal tokens γ and ρ are held at the run's first value: the assumptions
    under which Eq. 9 is exact. Returns (N̂^Φ rows accumulated in the last
    pass, final N^Θ_j).
    """
    n_topics = phi_norm.shape[1]
    c_j = float(len(terms))
    ntheta = [float(x) for x in theta_init]
    nhat = np.zeros((phi_norm.shape[0], n_topics))
    t = 0.0
    for sweep in range(burnin + 1):
        i = 0
        while i < len(terms):
            w = terms[i]
            run = 1
            while i + run < len(terms) and terms[i + run] == w:
                run += 1
            gamma = [float(phi_norm[w, k]) * (ntheta[k] + alpha) for k in range(n_topics)]
            z = sum(gamma)
            gamma = [g / z for g in gamma]
            rho = s_theta / (tau_theta + t) ** kappa_theta
            for _ in range(run):
                ntheta = [(1 - rho) * ntheta[k] + rho * c_j * gamma[k] for k in range(n_topics)]
                if sweep == burnin:
                    for k in range(n_topics):
                        nhat[w, k] += gamma[k]
            t += run
            i += run
    return nhat, np.array(ntheta)


def foldin_block(indptr, local, counts, phi, alpha, max_iter=100, tol=1e-4):
    """EM fixed point for θ_j with φ̂ fixed; θ = (N^Θ + α)/(C_j + Kα)."""
    n_docs = len(indptr) - 1
    n_topics = phi.shape[1]
    theta = np.zeros((n_docs, n_topics))
    for j in range(n_docs):
        pairs = list(range(indptr[j], indptr[j + 1]))
        c_j = float(sum(counts[p] for p in pairs))
        ntheta = [c_j / n_topics] * n_topics
        if pairs:
            for _ in range(max_iter):
                new = [0.0] * n_topics
                for p in pairs:
                    r = [float(phi[local[p], k]) * (ntheta[k] + alpha) for k in range(n_topics)]
                    z = sum(r)
                    for k in range(n_topics):
                        new[k] += float(counts[p]) * r[k] / z
                change = sum(abs(a - b) for a, b in zip(new, ntheta))
                ntheta = new
                if change <= tol * c_j:
                    break
        theta[j] = [(x + alpha) / (c_j + n_topics * alpha) for x in ntheta]
    return theta


def loglik_block(indptr, local, counts, phi, theta):
    total, tokens = 0.0, 0.0
    for j in range(len(indptr) - 1):
        for p in range(indptr[j], indptr[j + 1]):
            s = sum(float(theta[j, k]) * float(phi[local[p], k]) for k in range(phi.shape[1]))
            total += float(counts[p]) * math.log(s)
            tokens += float(counts[p])
    return total, tokens
