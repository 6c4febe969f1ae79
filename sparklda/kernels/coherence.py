"""Topic coherence: co-occurrence counts of the topics' top terms, and the u_mass and
NPMI scores (gensim's definitions; see docs/architecture.md, "Topic coherence").

Counting runs once per partition on the executors over documents whose tokens
were mapped to *local* ids (the position of the term in the small sorted set
of needed terms, or -1 for any other term). A virtual document is either a
whole document (``window <= 0``) or a boolean sliding window of ``window``
tokens moving one token per step; a document shorter than the window is one
window, and so is an empty document. A term occurs in a virtual document when
it is present at least once. The counts are integers, so partials add up
exactly in any order. Reference: ``tests/reference.py``.
"""

from __future__ import annotations

import numba
import numpy as np
from numpy.typing import NDArray

from .config import JIT_OPTIONS

#: gensim's ε (``gensim.topic_coherence.direct_confirmation_measure.EPSILON``).
EPSILON = 1e-12


@numba.njit(**JIT_OPTIONS)
def _count(
    indptr: NDArray[np.int64],
    tokens: NDArray[np.int32],
    window: int,
    occ: NDArray[np.int64],
    co: NDArray[np.int64],
    seen: NDArray[np.int64],
    buf: NDArray[np.int32],
) -> int:
    n_docs = indptr.shape[0] - 1
    n_windows = 0
    stamp = seen.max()
    for d in range(n_docs):
        lo = indptr[d]
        hi = indptr[d + 1]
        length = hi - lo
        if window <= 0 or length <= window:
            n_starts = 1
            width = length
        else:
            n_starts = length - window + 1
            width = window
        for s in range(n_starts):
            stamp += 1
            m = 0
            for pos in range(lo + s, lo + s + width):
                t = tokens[pos]
                if t >= 0 and seen[t] != stamp:
                    seen[t] = stamp
                    buf[m] = t
                    m += 1
            for a in range(m):
                ta = buf[a]
                occ[ta] += 1
                for b in range(a + 1, m):
                    tb = buf[b]
                    co[ta, tb] += 1
                    co[tb, ta] += 1
            n_windows += 1
    return n_windows


def cooccurrence_counts(
    indptr: NDArray[np.int64],
    tokens: NDArray[np.int32],
    n_terms: int,
    window: int = 0,
) -> tuple[NDArray[np.int64], NDArray[np.int64], int]:
    """(occurrences (n,), co-occurrences (n, n), virtual documents) of documents
    ``tokens[indptr[d]:indptr[d+1]]`` of local ids in ``[0, n_terms)`` (or -1: another
    term, which still takes a place in a window).

    ``window <= 0``: each document is one virtual document. Otherwise each window of
    ``window`` consecutive tokens is (documents no longer than that: the whole document).
    ``co`` is symmetric, with a zero diagonal.
    """
    occ = np.zeros(n_terms, np.int64)
    co = np.zeros((n_terms, n_terms), np.int64)
    seen = np.zeros(n_terms, np.int64)
    buf = np.zeros(n_terms, np.int32)
    n = _count(
        np.asarray(indptr, np.int64),
        np.asarray(tokens, np.int32),
        int(window),
        occ,
        co,
        seen,
        buf,
    )
    return occ, co, int(n)


def umass_scores(
    top: NDArray[np.int64], occ: NDArray[np.int64], co: NDArray[np.int64], n_docs: int
) -> NDArray[np.float64]:
    """u_mass of each topic (rows of ``top``: local ids of its top terms, best first).

    gensim's ``u_mass``: segmentation ``s_one_pre`` (the pairs (w_i, w_j), j < i, with
    w_i the later term), ``log((D(w_i, w_j)/D + ε) / (D(w_j)/D))`` per pair (0 when
    D(w_j) = 0), the arithmetic mean over the pairs.
    """
    n = float(n_docs)
    out = np.zeros(top.shape[0], np.float64)
    for k in range(top.shape[0]):
        sims = []
        for i in range(1, top.shape[1]):
            for j in range(i):
                wp, ws = top[k, i], top[k, j]
                if occ[ws] == 0:
                    sims.append(0.0)
                else:
                    sims.append(float(np.log((co[wp, ws] / n + EPSILON) / (occ[ws] / n))))
        out[k] = np.mean(np.asarray(sims)) if sims else 0.0
    return out


def npmi_scores(
    top: NDArray[np.int64], occ: NDArray[np.int64], co: NDArray[np.int64], n_windows: int
) -> NDArray[np.float64]:
    """c_npmi of each topic: gensim's ``s_one_one`` segmentation (every ordered pair of
    distinct top terms), NPMI ``log((P(w', w*) + ε) / (P(w') P(w*))) / -log(P(w', w*) + ε)``
    with probabilities over the virtual documents, the arithmetic mean over the pairs.
    A pair with a term that never occurs scores 0 (gensim gives inf there)."""
    n = float(n_windows)
    out = np.zeros(top.shape[0], np.float64)
    for k in range(top.shape[0]):
        sims = []
        for i in range(top.shape[1]):
            for j in range(top.shape[1]):
                if i == j:
                    continue
                wp, ws = top[k, i], top[k, j]
                if occ[wp] == 0 or occ[ws] == 0:
                    sims.append(0.0)
                    continue
                p12 = co[wp, ws] / n
                pmi = np.log((p12 + EPSILON) / ((occ[wp] / n) * (occ[ws] / n)))
                sims.append(float(pmi / -np.log(p12 + EPSILON)))
        out[k] = np.mean(np.asarray(sims)) if sims else 0.0
    return out
