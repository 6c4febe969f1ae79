"""The partial statistics a task sends back: lean, sparse, mergeable.

Only the rows of terms that occurred in the task's documents travel; the
driver merges the partials of a round (:meth:`TopicStats.merge_all`) before
applying the mode's update.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


@dataclass
class TopicStats:
    """Sparse topic-word statistics of a task: ``rows[i]`` belongs to term
    ``terms[i]`` (sorted, distinct). ``extra`` holds mode-specific additive
    statistics (arrays or floats, summed on merge); ``timings`` per-task
    seconds (kept as lists on merge, for the round report)."""

    terms: np.ndarray
    rows: np.ndarray
    extra: dict = field(default_factory=dict)
    timings: dict = field(default_factory=dict)

    @property
    def totals(self) -> np.ndarray:
        """Column sums of the rows (N̂^Z from N̂^Φ)."""
        return self.rows.sum(axis=0, dtype=np.float64)

    def merge(self, other: "TopicStats") -> "TopicStats":
        return TopicStats.merge_all([self, other])

    @staticmethod
    def merge_all(parts: list) -> "TopicStats":
        """Sum rows by term over all parts (sort-based, O(n log n))."""
        parts = [p for p in parts if p is not None]
        if not parts:
            raise ValueError("nothing to merge")
        if len(parts) == 1:
            p = parts[0]
            return TopicStats(p.terms, p.rows, dict(p.extra),
                              {k: list(v) if isinstance(v, list) else [v] for k, v in p.timings.items()})
        k = parts[0].rows.shape[1]
        all_terms = np.concatenate([p.terms for p in parts])
        dtype = np.result_type(*[p.rows.dtype for p in parts])
        all_rows = np.concatenate([p.rows.astype(dtype, copy=False).reshape(-1, k) for p in parts])
        order = np.argsort(all_terms, kind="stable")
        sorted_terms = all_terms[order]
        starts = np.flatnonzero(np.r_[True, sorted_terms[1:] != sorted_terms[:-1]])
        if len(sorted_terms):
            rows = np.add.reduceat(all_rows[order], starts, axis=0)
        else:
            rows = np.zeros((0, k), dtype=dtype)
        extra = {}
        for p in parts:
            for name, v in p.extra.items():
                extra[name] = extra[name] + v if name in extra else v
        timings = {}
        for p in parts:
            for name, v in p.timings.items():
                timings.setdefault(name, []).extend(v if isinstance(v, list) else [v])
        return TopicStats(sorted_terms[starts].astype(np.int32), rows, extra, timings)
