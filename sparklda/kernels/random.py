"""Counter-based random numbers: a pure function of (seed, stream, doc id).

Every random draw the algorithms make is a hash of the run's seed, a stream
number (for example the pass over the corpus) and the document id, so the
result never depends on which executor, partition or task attempt ran it.
"""

from __future__ import annotations

from enum import IntEnum, unique
from typing import Any

import numba
import numpy as np
from numpy.typing import ArrayLike, DTypeLike, NDArray

from .config import JIT_OPTIONS


@unique
class Stream(IntEnum):
    """Every random stream of the library, in one place (values fixed: changing one
    changes every seeded result). Streams marked "+ pass" are offset by the pass number."""

    HELDOUT = 1  # which documents are held out
    SLICE = 2  # a document's minibatch slice
    PART = 3  # a document's partition within its slice
    SPLIT_HALVES = 7  # the document-completion split of a held-out document
    INIT_PHI = 11  # SCVB0's random initial N^Phi
    SLICE_ORDER = 17  # the order of the slices in each pass
    GAMMA_INIT = 21  # CVB's per-pair random start (CVB0 starts from INIT_TERM_TOPICS)
    INIT_TERM_TOPICS = 22  # CVB0/CVB's random initial topics, a row per term
    INIT_LAMBDA = 31  # SVB's random initial lambda
    LEFT_TO_RIGHT = 43  # a held-out document's left-to-right estimate (token order, particles)
    DOC_INIT = 1000  # + pass: SCVB0's initial N^Theta of each document
    DOC_GAMMA = 3000  # + pass: SVB's initial gamma of each document
    GIBBS_INIT = 41  # Gibbs's initial topic of each token, keyed by document
    GIBBS_SWEEP = 1 << 24  # + round: Gibbs's draws of each document in a sweep


_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)


def splitmix64(x: ArrayLike) -> NDArray[np.uint64]:
    """The splitmix64 finaliser, elementwise over a uint64 array (wrapping)."""
    x = np.asarray(x, dtype=np.uint64)
    with np.errstate(over="ignore"):
        z = x + _GOLDEN
        z = (z ^ (z >> np.uint64(30))) * _M1
        z = (z ^ (z >> np.uint64(27))) * _M2
        return z ^ (z >> np.uint64(31))


def doc_keys(seed: int, stream: int, doc_ids: ArrayLike) -> NDArray[np.uint64]:
    """One 64-bit key per document for (seed, stream); uint64 array."""
    with np.errstate(over="ignore"):
        base = splitmix64(
            np.uint64(seed & 0xFFFFFFFFFFFFFFFF) * _M1 + np.uint64(stream & 0xFFFFFFFF)
        )
        return splitmix64(np.asarray(doc_ids, dtype=np.int64).astype(np.uint64) ^ base)


def uniform_matrix(
    seed: int, stream: int, doc_ids: ArrayLike, k: int, dtype: DTypeLike = np.float64
) -> NDArray[np.floating[Any]]:
    """A (len(doc_ids), k) matrix of uniforms in (0, 1), row j a function of
    (seed, stream, doc_ids[j]) only."""
    keys = doc_keys(seed, stream, doc_ids)
    with np.errstate(over="ignore"):
        counters = keys[:, None] + np.arange(1, k + 1, dtype=np.uint64)[None, :] * _GOLDEN
    bits = splitmix64(counters) >> np.uint64(11)  # 53 random bits
    return ((bits.astype(np.float64) + 0.5) / float(1 << 53)).astype(dtype, copy=False)


def uniform_per_doc(seed: int, stream: int, doc_ids: ArrayLike) -> NDArray[np.floating[Any]]:
    """One uniform in (0, 1) per document (used for seeded splits)."""
    return uniform_matrix(seed, stream, doc_ids, 1)[:, 0]


_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)
_S30 = np.uint64(30)
_S27 = np.uint64(27)
_S31 = np.uint64(31)
_S11 = np.uint64(11)
_TWO53 = float(1 << 53)


@numba.njit(**JIT_OPTIONS)
def draw_uniform(key: Any, c: Any) -> float:
    """Draw ``c`` (from 1) of the document keyed ``key`` inside a kernel:
    splitmix64(key + c·golden), :func:`uniform_matrix`'s column c − 1."""
    z = key + np.uint64(c) * _GOLDEN + _GOLDEN
    z = (z ^ (z >> _S30)) * _M1
    z = (z ^ (z >> _S27)) * _M2
    z = z ^ (z >> _S31)
    return (float(z >> _S11) + 0.5) / _TWO53
