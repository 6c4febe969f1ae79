"""Plain references for held-out evaluation of whole documents: the left-to-right
particle estimate (Wallach et al. 2009, Algorithm 3, with the resampling step of
sequential Monte Carlo) written loop by loop, and the exact log p(w | Φ, α) by summing
over every topic assignment. See :mod:`sparklda.kernels.left_to_right`."""

from __future__ import annotations

import itertools
import math

from .reference import alpha_list, doc_key, splitmix64

_GOLDEN = 0x9E3779B97F4A7C15
_MASK64 = (1 << 64) - 1
LEFT_TO_RIGHT_STREAM = 43


class DocStream:
    """A document's uniforms: draw c (c = 1, 2, …) is splitmix64(key + c·golden)'s top
    53 bits, plus ½, over 2^53 (``tests/reference.py``'s ``uniform_matrix`` column c−1)."""

    def __init__(self, seed, doc_id, stream=LEFT_TO_RIGHT_STREAM):
        self.key = doc_key(seed, stream, int(doc_id))
        self.c = 0

    def next(self):
        self.c += 1
        bits = splitmix64((self.key + self.c * _GOLDEN) & _MASK64) >> 11
        return (float(bits) + 0.5) / float(1 << 53)


def doc_tokens(terms, counts, rng: DocStream):
    """Each term repeated by its count (terms in the given order), then shuffled by
    Fisher-Yates from the last position down."""
    tokens = [int(t) for t, c in zip(terms, counts, strict=True) for _ in range(int(c))]
    for i in range(len(tokens) - 1, 0, -1):
        s = min(int(rng.next() * (i + 1)), i)
        tokens[i], tokens[s] = tokens[s], tokens[i]
    return tokens


def draw_topic(row, nk, alpha, u):
    """k with probability ∝ row[k]·(nk[k] + α_k): the first running sum above u·total."""
    k_topics = len(row)
    running = []
    total = 0.0
    for k in range(k_topics):
        total += float(row[k]) * (nk[k] + alpha[k])
        running.append(total)
    if not total > 0.0:
        return min(int(u * k_topics), k_topics - 1)
    for k in range(k_topics):
        if running[k] > u * total:
            return k
    return max(k for k in range(k_topics) if float(row[k]) * (nk[k] + alpha[k]) > 0.0)


def left_to_right_doc(terms, counts, phi, alpha, particles, seed, doc_id, resample=True):
    """log p(w | Φ, α) of one document (global ``terms`` and their ``counts``; ``phi``
    (V, K) rows by term) by the left-to-right estimate with ``particles`` particles.
    ``resample=False``: Algorithm 3 as Wallach et al. print it (no resampling step)."""
    k_topics = phi.shape[1]
    alpha = alpha_list(alpha, k_topics)
    alpha_sum = 0.0
    for a in alpha:
        alpha_sum += a
    rng = DocStream(seed, doc_id)
    w = doc_tokens(terms, counts, rng)
    z = [[0] * len(w) for _ in range(particles)]
    nk = [[0.0] * k_topics for _ in range(particles)]
    loglik = 0.0
    for n in range(len(w)):
        p = []
        for r in range(particles):
            for m in range(n):  # resample every earlier assignment, in order
                nk[r][z[r][m]] -= 1.0
                z[r][m] = draw_topic(phi[w[m]], nk[r], alpha, rng.next())
                nk[r][z[r][m]] += 1.0
            s = 0.0
            for k in range(k_topics):
                s += float(phi[w[n], k]) * (nk[r][k] + alpha[k])
            p.append(s / (alpha_sum + n))
        sum_p = 0.0
        for x in p:
            sum_p += x
        loglik += math.log(sum_p / particles) if sum_p > 0 else -math.inf
        if resample and n > 0 and particles > 1:  # systematic resampling
            u0 = rng.next()
            if sum_p > 0.0:
                cum = list(itertools.accumulate(p))
                anc = []
                for r in range(particles):
                    target = (u0 + r) / particles * sum_p
                    i = 0
                    while cum[i] <= target and i < particles - 1:
                        i += 1
                    anc.append(i)
                z = [list(z[a]) for a in anc]
                nk = [list(nk[a]) for a in anc]
        for r in range(particles):
            z[r][n] = draw_topic(phi[w[n]], nk[r], alpha, rng.next())
            nk[r][z[r][n]] += 1.0
    return loglik


def exact_loglik(tokens, phi, alpha):
    """log p(w | Φ, α) = log Σ_z p(z | α) Π_n φ_{z_n}(w_n), summing over all K^N topic
    assignments z of the tokens, p(z | α) the Dirichlet-multinomial
    Γ(α0)/Γ(α0 + N) Π_k Γ(α_k + N_k)/Γ(α_k)."""
    k_topics = phi.shape[1]
    alpha = alpha_list(alpha, k_topics)
    a0 = sum(alpha)
    total = 0.0
    for z in itertools.product(range(k_topics), repeat=len(tokens)):
        n_k = [z.count(k) for k in range(k_topics)]
        log_prior = math.lgamma(a0) - math.lgamma(a0 + len(tokens))
        for k in range(k_topics):
            log_prior += math.lgamma(alpha[k] + n_k[k]) - math.lgamma(alpha[k])
        like = 1.0
        for t, k in zip(tokens, z, strict=True):
            like *= float(phi[t, k])
        total += math.exp(log_prior) * like
    return math.log(total)
