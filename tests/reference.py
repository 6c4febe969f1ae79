"""Slow, plainly written references for the kernels, straight from the papers.

Nothing here is clever or vectorised on purpose: each function follows the
equations token by token so the compiled kernels can be checked against it.
"""

from __future__ import annotations

import math

import numpy as np


def alpha_list(alpha, n_topics):
    """α as K floats: a number repeated, or a K-vector's elements."""
    a = np.asarray(alpha, dtype=np.float64)
    return [float(a)] * n_topics if a.ndim == 0 else [float(x) for x in a]


def scvb0_block(
    indptr,
    local,
    counts,
    phi_norm,
    theta_init,
    alpha,
    burnin=1,
    s_theta=1.0,
    tau_theta=10.0,
    kappa_theta=0.9,
    return_theta=False,
    exclude=False,
):
    """Algorithm 2 of Foulds et al. (2013) for a block of documents, clumped.

    Eq. 5: γ_k = φ_norm[w, k] (N^Θ_jk + α_k), normalised (α a number or a K-vector).
    Eq. 9: N^Θ_j = (1 − ρ)^m N^Θ_j + C_j γ (1 − (1 − ρ)^m), ρ = s/(τ + t)^κ.
    Last pass: N̂^Φ_w += m γ. With ``return_theta``: (N̂^Φ, each document's final N^Θ_j,
    Σ m·log(1 − γ_k) over each document's last-pass clumps). With ``exclude``, sweeps
    after the first use max(N^Θ_jk − γ'_k, 0) in Eq. 5, γ' the clump's γ of the
    previous sweep.
    """
    n_docs = len(indptr) - 1
    n_topics = phi_norm.shape[1]
    alpha = alpha_list(alpha, n_topics)
    nhat = np.zeros((phi_norm.shape[0], n_topics), dtype=np.float64)
    theta_out = np.zeros((n_docs, n_topics))
    logp0 = np.zeros((n_docs, n_topics))
    for j in range(n_docs):
        pairs = range(indptr[j], indptr[j + 1])
        if len(pairs) == 0:
            continue
        c_j = float(sum(counts[p] for p in pairs))
        ntheta = [float(x) for x in theta_init[j]]
        t = 0.0
        previous = {}
        for sweep in range(burnin + 1):
            for p in pairs:
                w, m = local[p], float(counts[p])
                own = previous.get(p) if exclude else None
                count = (
                    ntheta
                    if own is None
                    else [max(a - b, 0.0) for a, b in zip(ntheta, own, strict=True)]
                )
                gamma = [float(phi_norm[w, k]) * (count[k] + alpha[k]) for k in range(n_topics)]
                z = sum(gamma)
                gamma = [g / z for g in gamma]
                previous[p] = gamma
                rho = s_theta / (tau_theta + t) ** kappa_theta
                decay = (1.0 - rho) ** m
                ntheta = [
                    decay * ntheta[k] + c_j * gamma[k] * (1.0 - decay) for k in range(n_topics)
                ]
                if sweep == burnin:
                    for k in range(n_topics):
                        nhat[w, k] += m * gamma[k]
                        logp0[j, k] += m * math.log(1.0 - min(gamma[k], 1.0 - 1e-6))
                t += m
        theta_out[j] = ntheta
    return (nhat, theta_out, logp0) if return_theta else nhat


def scvb0_unclumped_doc(
    terms, phi_norm, theta_init, alpha, burnin=1, s_theta=1.0, tau_theta=10.0, kappa_theta=0.9
):
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
    """EM fixed point for θ_j with φ̂ fixed; θ = (N^Θ + α)/(C_j + α0), α0 = Σ_k α_k."""
    n_docs = len(indptr) - 1
    n_topics = phi.shape[1]
    alpha = alpha_list(alpha, n_topics)
    alpha0 = sum(alpha)
    theta = np.zeros((n_docs, n_topics))
    for j in range(n_docs):
        pairs = list(range(indptr[j], indptr[j + 1]))
        c_j = float(sum(counts[p] for p in pairs))
        ntheta = [c_j / n_topics] * n_topics
        if pairs:
            for _ in range(max_iter):
                new = [0.0] * n_topics
                for p in pairs:
                    r = [float(phi[local[p], k]) * (ntheta[k] + alpha[k]) for k in range(n_topics)]
                    z = sum(r)
                    for k in range(n_topics):
                        new[k] += float(counts[p]) * r[k] / z
                change = sum(abs(a - b) for a, b in zip(new, ntheta, strict=True))
                ntheta = new
                if change <= tol * c_j:
                    break
        theta[j] = [(x + a) / (c_j + alpha0) for x, a in zip(ntheta, alpha, strict=True)]
    return theta


def loglik_block(indptr, local, counts, phi, theta):
    total, tokens = 0.0, 0.0
    for j in range(len(indptr) - 1):
        for p in range(indptr[j], indptr[j + 1]):
            s = sum(float(theta[j, k]) * float(phi[local[p], k]) for k in range(phi.shape[1]))
            total += float(counts[p]) * math.log(s)
            tokens += float(counts[p])
    return total, tokens


# --------------------------------------------------------------------------- driver side


def init_doc_stats(uniforms, doc_lengths):
    """Random N^Θ start: row j is ``uniforms[j]`` scaled to sum to C_j (float64)."""
    theta = np.zeros((len(uniforms), len(uniforms[0])))
    for j, row in enumerate(uniforms):
        total = sum(float(x) for x in row)
        for k, x in enumerate(row):
            theta[j, k] = float(x) / total * float(doc_lengths[j])
    return theta


def scatter_add_rows(acc, idx, rows):
    """A new ``acc`` with ``rows[i]`` added to row ``idx[i]``, for i in order (repeats add up)."""
    out = np.array(acc, copy=True)
    for i in range(len(idx)):
        for k in range(out.shape[1]):
            out[int(idx[i]), k] += float(rows[i, k])
    return out


def add_scaled_rows(base, mirror, terms, rows, factor):
    """SCVB0's driver update of touched rows, on copies:
    base[t] += factor · rows[i] and mirror[t] = base[t] for t = terms[i];
    returns (new base, new mirror, column sums of rows in float64)."""
    base, mirror = np.array(base, copy=True), np.array(mirror, copy=True)
    totals = np.zeros(rows.shape[1])
    for i, t in enumerate(terms):
        for k in range(rows.shape[1]):
            base[int(t), k] = base[int(t), k] + factor * float(rows[i, k])
            mirror[int(t), k] = base[int(t), k]
            totals[k] += float(rows[i, k])
    return base, mirror, totals


def normalize_topics(topic_word, eta=0.0, topic_axis=1):
    """φ̂[w, k] = (N^Φ_wk + η) / Σ_w' (N^Φ_w'k + η), returned as (V, K)."""
    m = np.array(topic_word, dtype=np.float64)
    if topic_axis == 0:
        m = m.T
    n_words, n_topics = m.shape
    phi = np.zeros((n_words, n_topics))
    for k in range(n_topics):
        total = sum(float(m[w, k]) + eta for w in range(n_words))
        for w in range(n_words):
            phi[w, k] = (float(m[w, k]) + eta) / total
    return phi


# --------------------------------------------------------------------------- random streams

_MASK64 = (1 << 64) - 1


def splitmix64(x):
    """Steele, Lea & Flood's SplitMix64 output function (Vigna's ``splitmix64.c``)
    for one state x, in Python integers mod 2^64."""
    z = (x + 0x9E3779B97F4A7C15) & _MASK64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK64
    return z ^ (z >> 31)


def doc_key(seed, stream, doc_id):
    """The 64-bit key of a document: splitmix64(doc_id ^ splitmix64(seed·M1 + stream)),
    doc_id taken as a 64-bit two's-complement integer, seed mod 2^64, stream mod 2^32."""
    base = splitmix64(((seed & _MASK64) * 0xBF58476D1CE4E5B9 + (stream & 0xFFFFFFFF)) & _MASK64)
    return splitmix64((doc_id & _MASK64) ^ base)


def uniform_matrix(seed, stream, doc_ids, k):
    """Row j, column i: the top 53 bits of splitmix64(key_j + (i+1)·golden), plus ½,
    over 2^53 (a float64 strictly inside (0, 1))."""
    out = np.zeros((len(doc_ids), k))
    for j, doc_id in enumerate(doc_ids):
        key = doc_key(seed, stream, int(doc_id))
        for i in range(k):
            bits = splitmix64((key + (i + 1) * 0x9E3779B97F4A7C15) & _MASK64) >> 11
            out[j, i] = (float(bits) + 0.5) / float(1 << 53)
    return out


def coherence_counts(docs, n_terms, window=0):
    """Occurrences, co-occurrences and virtual documents of ``docs`` (lists of local ids,
    -1 for other terms) with Python sets: each whole document (``window <= 0``) or each
    window of ``window`` consecutive tokens (a shorter document is one window)."""
    occ = np.zeros(n_terms, np.int64)
    co = np.zeros((n_terms, n_terms), np.int64)
    n = 0
    for doc in docs:
        doc = list(doc)
        if window <= 0 or len(doc) <= window:
            windows = [doc]
        else:
            windows = [doc[s : s + window] for s in range(len(doc) - window + 1)]
        for w in windows:
            present = {t for t in w if t >= 0}
            for a in present:
                occ[a] += 1
                for b in present:
                    if a != b:
                        co[a, b] += 1
            n += 1
    return occ, co, n


def umass(top_words, occ, co, n_docs, eps=1e-12):
    """u_mass as Mimno et al. (2011) with gensim's ε and normalisation: the mean over
    j < i of log((D(w_i, w_j)/D + ε) / (D(w_j)/D))."""
    out = []
    for words in top_words:
        vals = []
        for i in range(1, len(words)):
            for j in range(i):
                a, b = words[i], words[j]
                vals.append(math.log((co[a, b] / n_docs + eps) / (occ[b] / n_docs)))
        out.append(sum(vals) / len(vals))
    return out


def npmi(top_words, occ, co, n, eps=1e-12):
    """Mean NPMI over every ordered pair of distinct top words (Bouma 2009, gensim's ε)."""
    out = []
    for words in top_words:
        vals = []
        for i, a in enumerate(words):
            for j, b in enumerate(words):
                if i != j:
                    p12 = co[a, b] / n
                    pmi = math.log((p12 + eps) / ((occ[a] / n) * (occ[b] / n)))
                    vals.append(pmi / -math.log(p12 + eps))
        out.append(sum(vals) / len(vals))
    return out


def check_documents(docs, vocab_size):
    """Corpus validation, one document at a time: counts of documents, empty documents
    (no positive count), positive pairs and their tokens, the largest id, and the first
    document with each kind of problem. A document's count checks stop at its first
    kind: non-finite, then negative, then non-integer; the term range is always checked."""
    n_docs = n_empty = nnz = 0
    tokens = 0.0
    problems = {}
    max_id = -1
    for doc_id, terms, counts in docs:
        n_docs += 1
        max_id = max(max_id, doc_id)
        if len(terms) == 0:
            n_empty += 1
            continue
        finite = [math.isfinite(c) for c in counts]
        if not all(finite):
            problems.setdefault("non-finite", (doc_id, counts[finite.index(False)]))
        elif any(c < 0 for c in counts):
            problems.setdefault("negative", (doc_id, next(c for c in counts if c < 0)))
        elif any(c != round(c) for c in counts):
            problems.setdefault("non-integer", (doc_id, next(c for c in counts if c != round(c))))
        bad = [t for t in terms if t < 0 or t >= vocab_size]
        if bad:
            problems.setdefault("term", (doc_id, bad[0]))
        positive = [c for c in counts if c > 0]
        if not positive:
            n_empty += 1
            continue
        nnz += len(positive)
        tokens += sum(positive)
    return {
        "docs": n_docs,
        "empty": n_empty,
        "nnz": nnz,
        "tokens": tokens,
        "problems": problems,
        "max_id": max_id,
    }


def clean_documents(docs):
    """The documents with a positive count, without their other pairs."""
    out = []
    for doc_id, terms, counts in docs:
        kept = [(t, c) for t, c in zip(terms, counts, strict=True) if c > 0]
        if kept:
            out.append((doc_id, [t for t, _ in kept], [c for _, c in kept]))
    return out


def vector_pairs(vector):
    """(term ids, counts) of a Spark ML vector given as (type, size, indices, values):
    a sparse vector's stored entries, a dense vector's non-zero entries."""
    kind, _, indices, values = vector
    if kind == 0:
        return list(indices), list(values)
    return [i for i, v in enumerate(values) if v != 0], [v for v in values if v != 0]


def heldout_block(docs, seed, dtype=np.float32):
    """A held-out block as (observed, target) DocBlocks, one document at a time: each
    document split by ``split_halves`` and each half's documents given to
    ``DocBlock.from_docs`` (what ``sparklda.corpus.heldout_block`` builds in packs)."""
    from sparklda.block import DocBlock, split_halves

    items = [(d[0], *split_halves(d[0], d[1], d[2], seed)) for d in docs]
    obs = DocBlock.from_docs(((i, a[0], a[1]) for i, a, _ in items), dtype=dtype)
    tgt = DocBlock.from_docs(((i, b[0], b[1]) for i, _, b in items), dtype=dtype)
    return obs, tgt
