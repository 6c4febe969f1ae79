"""The model on the executors for the stateful modes (CVB0, CVB, MAP, Gibbs), whose
merged statistics *replace* N^Φ each round (``model_placement="executors"``;
:mod:`sparklda.execution.sharded_stateful` runs the rounds).

The rows live in term shards, float64 (``width`` columns: N^Φ, and CVB's Var N^Φ or
Gibbs's sum of the averaged sweeps beside it). A shard serves each block its terms'
rows as the driver placement's round value has them (:func:`served_rows`), and applies
the round's update to its rows (:func:`replace_rows`: the merged statistics become its
rows); only O(K) per shard reaches the driver (the column sums, a learned α's
statistics, the change). See docs/architecture.md, "The model on the executors".
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

import numpy as np

from ..execution.topics import ShardedTopics
from .priors import split_extras
from .seeds import add_seed_rows

__all__ = ["ShardedRows", "replace_rows", "served_rows", "topic_rows"]


def served_rows(dtype, seed_terms=None, seed_rows=None, width=None) -> Callable:
    """``fetch(base, idx, terms)``: a shard's round value of its rows ``idx`` (global ids
    ``terms``): the first ``width`` columns (None: all) in the kernels' ``dtype``, the
    seeded topics' pseudo-counts added in that dtype, as the driver placement's round
    value has them."""
    dtype = np.dtype(dtype)

    def run(base, idx, terms):
        rows = (base[idx] if width is None else base[idx, :width]).astype(dtype)
        if seed_terms is not None:
            add_seed_rows(rows, terms, seed_terms, seed_rows)
        return rows

    return run


def replace_rows(k: int, width: int, with_extras: bool) -> Callable:
    """``update(old, terms, rows) -> (new rows, extras)`` of one term shard of a mode whose
    merged statistics replace N^Φ (CVB0, CVB, MAP): its new rows are the merged ``rows``
    at its local ``terms`` (the first ``width`` columns; zero elsewhere; ``terms`` None
    when no block has a term of the shard), as the driver placement's dense statistics
    have them; the extras are their column sums ``row_totals``, a learned α's statistics
    ``prior_extras`` (the columns past ``width``) and ``nphi_change``, Σ|ΔN^Φ| over the
    shard (when ``old`` has rows of the same width)."""

    def run(old, terms, rows):
        new = np.zeros((old.shape[0], width))
        out: dict = {}
        if rows is not None:
            if with_extras:
                rows, out["prior_extras"] = split_extras(rows, width)
            new[terms] = rows[:, :width]
        out["row_totals"] = new.sum(axis=0)
        if old.shape[1] == width:
            out["nphi_change"] = float(np.abs(new[:, :k] - old[:, :k]).sum())
        return new, out

    return run


def topic_rows(start: int, k: int, divisor=None, seed_terms=None, seed_rows=None) -> Callable:
    """``rows(first term, shard rows) -> its rows of topic_word``: the ``k`` columns from
    ``start`` (divided by ``divisor`` when given: Gibbs's average), plus the seeded
    topics' pseudo-counts of the shard's terms, the driver's ``topic_word`` row by row."""
    terms = None if seed_terms is None else np.asarray(seed_terms, dtype=np.int64)

    def run(lo: int, base: np.ndarray) -> np.ndarray:
        cols = base[:, start : start + k]
        out = cols / divisor if divisor else np.array(cols, dtype=np.float64)
        if terms is not None:
            mine = (terms >= lo) & (terms < lo + len(base))
            out[terms[mine] - lo] += seed_rows[mine]
        return out

    return run


def shard_summary(rows, k: int) -> tuple[int, np.ndarray, float]:
    """Restored sharded rows' (width, column sums summed shard by shard in shard order,
    largest of the first ``k`` columns), one job."""
    got = rows._per_shard(lambda lo, b: (b.shape[1], b.sum(axis=0), float(b[:, :k].max(initial=0))))
    width = max((w for w, _, _ in got), default=k)
    total = np.zeros(width)
    for _, col, _ in got:
        total = total + col
    return width, total, max((m for _, _, m in got), default=0.0)


def held_rows(
    start: np.ndarray | ShardedTopics | None, collect: Callable[[], np.ndarray] | None
) -> np.ndarray:
    """A sharded run's topic-word rows on the driver (V × width, float64): the restored
    or warm-start rows ``start`` (collected when they are sharded), else the executors'
    (``collect``, which the executor sets once it holds them)."""
    if isinstance(start, ShardedTopics):
        return start.collect()
    if start is not None:
        return start
    if collect is None:
        raise RuntimeError("the model is on the executors and no executor holds it")
    return collect()


class ShardedRows:
    """What a stateful mode adds to keep its rows on the executors: ``sharded`` (the
    placement), ``collect_base`` (set by the executor holding the rows: V × width
    collected), ``start_base`` (restored rows the executor shards before the next
    round), and the executor's hooks :meth:`initial_rows` and :meth:`start_sharded`."""

    #: the shards keep their rows in float64 only and cast the rows they serve
    sharded_mirror: ClassVar[bool] = False
    #: the V × width rows held by the executors: :meth:`state` leaves them out then and
    #: a checkpoint writes the shards (docs/architecture.md, "After the rounds")
    sharded_key: ClassVar[str | None] = "rows"
    sharded: bool
    collect_base: Callable[[], np.ndarray] | None
    start_base: np.ndarray | ShardedTopics | None

    def _init_sharded(self, params: Any) -> None:
        self.sharded = params.model_placement == "executors"
        self.collect_base = None
        self.start_base = None

    def _sharded_rows(self) -> np.ndarray:
        """The rows (V × width, float64): restored, or collected from the executors."""
        return held_rows(self.start_base, self.collect_base)

    def initial_rows(self) -> tuple[np.ndarray | None, Callable | None, float | None]:
        """The restored rows the executor shards after a resume (a fresh run's shards
        are the merged statistics of the initial block states)."""
        return self.start_base, None, None

    def start_sharded(self, totals: np.ndarray) -> None:
        """The executors hold the restored rows now (their column sums are known)."""
        self.start_base = None
