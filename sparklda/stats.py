"""The partial statistics a task sends back: lean, sparse, mergeable.

Only the rows of terms that occurred in the task's documents travel. The
partials of a round are merged either on the driver
(:meth:`TopicStats.merge_all`) or first on the executors, by term shard
(:func:`split_shards`, :func:`merge_shard`, :func:`concat_shards`; see
docs/architecture.md, "Combining a round's statistics"), before the mode's
update. Both give the same bits.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, TypeAlias

import numpy as np
from numpy.typing import ArrayLike, NDArray

from .kernels.scvb0 import scatter_add_rows

#: A mode-specific additive statistic: a count or an array, summed on merge.
Extra: TypeAlias = float | NDArray[Any]
#: Seconds of one task, or the list of every task's seconds after a merge.
Timing: TypeAlias = float | list[float]


def union_of_terms(term_lists: Sequence[NDArray[np.integer[Any]]]) -> NDArray[np.int64]:
    """The sorted distinct terms of all ``term_lists`` (each of distinct non-negative
    term ids), as ``np.union1d`` over them gives, through a bitmap over the
    largest id: linear in the ids, where the pairwise sorts of ``union1d`` cost a
    large-vocabulary round's driver tens of ms."""
    nonempty = [np.asarray(t) for t in term_lists if len(t)]
    if not nonempty:
        return np.zeros(0, dtype=np.int64)
    if len(nonempty) == 1:
        return nonempty[0].astype(np.int64)
    seen = np.zeros(max(int(t.max()) for t in nonempty) + 1, dtype=bool)
    for t in nonempty:
        if t.min() < 0:
            raise ValueError(f"term ids must be non-negative, got {int(t.min())}")
        seen[t] = True
    return np.flatnonzero(seen)


@dataclass
class TopicStats:
    """Sparse topic-word statistics of a task: ``rows[i]`` belongs to term
    ``terms[i]`` (sorted, distinct). ``extra`` holds mode-specific additive
    statistics (arrays or floats, summed on merge); ``timings`` per-task
    seconds (kept as lists on merge, for the round report)."""

    terms: NDArray[np.integer[Any]]
    rows: NDArray[np.floating[Any]]
    extra: dict[str, Extra] = field(default_factory=dict)
    timings: dict[str, Timing] = field(default_factory=dict)

    @property
    def nbytes(self) -> int:
        """Bytes of the arrays that travel (terms and rows)."""
        return int(self.terms.nbytes + self.rows.nbytes)

    @staticmethod
    def merge_all(parts: Sequence[TopicStats | None]) -> TopicStats:
        """Sum rows by term over all parts: a float64 scatter-add into the union of
        their (sorted, distinct) terms, in the order of ``parts`` (so the sums do
        not depend on which task finished first). ``extra`` is summed,
        ``timings`` are kept as lists."""
        kept = [p for p in parts if p is not None]
        if not kept:
            raise ValueError("nothing to merge")
        k = kept[0].rows.shape[1]
        terms = union_of_terms([p.terms for p in kept])
        rows = np.zeros((len(terms), k), dtype=np.float64)
        extra: dict[str, Extra] = {}
        timings: dict[str, list[float]] = {}
        for p in kept:
            if len(p.terms):
                scatter_add_rows(rows, np.searchsorted(terms, p.terms), p.rows.reshape(-1, k))
            for name, v in p.extra.items():
                extra[name] = extra[name] + v if name in extra else v
            for name, t in p.timings.items():
                timings.setdefault(name, []).extend(t if isinstance(t, list) else [t])
        merged_timings: dict[str, Timing] = dict(timings)
        return TopicStats(np.asarray(terms, dtype=np.int32), rows, extra, merged_timings)

    def to_dense(self, n_rows: int) -> TopicStats:
        """The same statistics with a row for every term id ``0 … n_rows−1``."""
        rows = np.zeros((n_rows, self.rows.shape[1]), dtype=self.rows.dtype)
        rows[self.terms] = self.rows
        return TopicStats(np.arange(n_rows, dtype=np.int32), rows, self.extra, self.timings)


# --------------------------------------------------------------------------
# Combining by term shard (the executors' side of a round's merge)


def shard_bounds(vocab_size: int, n_shards: int) -> NDArray[np.int64]:
    """Boundaries of ``n_shards`` contiguous term ranges covering ``0 … vocab_size−1``:
    shard ``s`` holds the terms ``bounds[s] <= w < bounds[s + 1]``. The number of
    shards is capped at ``vocab_size`` (every shard non-empty) and is at least 1."""
    if vocab_size < 1:
        raise ValueError(f"vocab_size must be positive, got {vocab_size}")
    n = max(1, min(int(n_shards), int(vocab_size)))
    return (np.arange(n + 1, dtype=np.int64) * int(vocab_size)) // n


def shard_of(terms: ArrayLike, bounds: NDArray[np.int64]) -> NDArray[np.int64]:
    """The shard of each term id under ``bounds`` (:func:`shard_bounds`)."""
    t = np.asarray(terms, dtype=np.int64)
    if len(t) and (t.min() < bounds[0] or t.max() >= bounds[-1]):
        raise ValueError(f"term ids must lie in [{bounds[0]}, {bounds[-1]})")
    out: NDArray[np.int64] = np.searchsorted(bounds, t, side="right").astype(np.int64) - 1
    return out


def split_shards(part: TopicStats, bounds: NDArray[np.int64]) -> list[tuple[int, TopicStats]]:
    """``part`` cut into its pieces per shard, ``(shard, piece)`` in shard order.

    Only shards holding some of the part's terms get a piece, except shard 0,
    which always gets one: it carries the part's ``extra`` and ``timings``
    (the other pieces carry none), so the shard-0 merge sums them in part order
    exactly as :meth:`TopicStats.merge_all` would."""
    terms = np.asarray(part.terms)
    rows = part.rows if part.rows.ndim == 2 else part.rows.reshape(len(terms), -1)
    cuts = np.searchsorted(terms, bounds[1:-1], side="left")
    ends = [*(int(c) for c in cuts), len(terms)]
    pieces: list[tuple[int, TopicStats]] = []
    start = 0
    for s, end in enumerate(ends):
        if end > start or s == 0:
            meta = s == 0
            pieces.append(
                (
                    s,
                    TopicStats(
                        np.ascontiguousarray(terms[start:end]),
                        np.ascontiguousarray(rows[start:end]),
                        dict(part.extra) if meta else {},
                        dict(part.timings) if meta else {},
                    ),
                )
            )
        start = end
    return pieces


def merge_shard(pieces: Sequence[TopicStats]) -> TopicStats:
    """One shard's pieces summed, in the order given (the order of the parts they
    came from): :meth:`TopicStats.merge_all`, a float64 scatter-add."""
    return TopicStats.merge_all(pieces)


def concat_shards(shards: Sequence[TopicStats]) -> TopicStats:
    """The merged statistics of a round from its merged shards, given in shard order
    (their terms are disjoint and ascending from one shard to the next): rows
    stacked, ``extra`` summed and ``timings`` concatenated in shard order."""
    if not shards:
        raise ValueError("nothing to concatenate")
    k = shards[0].rows.shape[1]
    terms = np.concatenate([np.asarray(s.terms, dtype=np.int32) for s in shards])
    if len(terms) > 1 and not bool(np.all(np.diff(terms) > 0)):
        raise ValueError("shards must be given in shard order with disjoint terms")
    rows = np.concatenate([s.rows.reshape(-1, k).astype(np.float64, copy=False) for s in shards])
    extra: dict[str, Extra] = {}
    timings: dict[str, list[float]] = {}
    for s in shards:
        for name, v in s.extra.items():
            extra[name] = extra[name] + v if name in extra else v
        for name, t in s.timings.items():
            timings.setdefault(name, []).extend(t if isinstance(t, list) else [t])
    merged_timings: dict[str, Timing] = dict(timings)
    return TopicStats(terms, rows, extra, merged_timings)


def combine_by_shard(
    parts: Sequence[TopicStats | None], bounds: NDArray[np.int64]
) -> list[TopicStats]:
    """The executors' combine in one process: every part split by shard
    (:func:`split_shards`), each shard's pieces merged in part order
    (:func:`merge_shard`). Returns the merged shards in shard order (shards no
    part touches are left out); :func:`concat_shards` of them equals
    :meth:`TopicStats.merge_all` of ``parts`` bit for bit."""
    by_shard: dict[int, list[TopicStats]] = {}
    for part in parts:
        if part is None:
            continue
        for s, piece in split_shards(part, bounds):
            by_shard.setdefault(s, []).append(piece)
    return [merge_shard(by_shard[s]) for s in sorted(by_shard)]


def normalize_topics(
    topic_word: ArrayLike, eta: float = 0.0, topic_axis: int = 1
) -> NDArray[np.float64]:
    """φ̂ (V, K) from topic-word statistics: (N^Φ + η) normalised per topic.

    ``topic_axis=0`` accepts a (K, V) matrix (scikit-learn's ``components_``,
    MLlib's topics as rows).
    """
    m = np.asarray(topic_word, dtype=np.float64)
    if topic_axis == 0:
        m = m.T
    m = m + eta
    totals: NDArray[np.float64] = m.sum(axis=0, keepdims=True)
    return m / totals
