"""The partial statistics a task sends back: lean, sparse, mergeable.

Only the rows of terms that occurred in the task's documents travel; the
driver merges the partials of a round (:meth:`TopicStats.merge_all`) before
applying the mode's update.
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
        terms = kept[0].terms
        for p in kept[1:]:
            terms = np.union1d(terms, p.terms)
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
