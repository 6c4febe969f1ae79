"""A learned η with the model on the executors (``optimize_eta`` under
``model_placement="executors"``; docs/architecture.md, "Learned priors").

Minka's fixed point for η (:func:`~sparklda.kernels.priors.minka_eta`) reads every
(term, topic) cell of the statistics at each iteration, but only through two sums: a
numerator additive over the rows, and the K column sums. With the rows in term shards
(:class:`~sparklda.execution.topics.ShardedTopics`) :func:`sharded_minka_eta` runs the
same iterations on the driver from per-shard partial sums, the V×K cells never leaving
the executors:

* whole counts (Gibbs): each shard returns, in one job, its column sums and the
  histogram of its positive counts (a zero count adds exactly 0 to the numerator); the
  iterations then run on the driver from the merged histogram (distinct counts, a few
  thousand at most);
* expected counts (CVB0, CVB, the online modes' pass sums): each shard returns, in one
  job, its column sums and its part of the numerator at 24 values of η around the
  current one (:func:`~sparklda.kernels.priors.eta_node_sums`), from which the driver
  interpolates the numerator (:func:`~sparklda.kernels.priors.eta_interpolant`, to
  rounding) for the iterations; an iterate beyond those values takes one more job
  around it, and one exact sum at the last iterate checks the interpolation (were it
  off by more than :data:`INTERPOLATION_RTOL`, the fixed point would be taken again
  with one job an iteration).

Either gives the driver's η to rounding (the sums are taken in another order).

The online modes (SCVB0, SVB) learn η from a pass's own expected counts
(:meth:`~sparklda.modes.priors.Priors.learn_eta_pass`), a V×K sum that lives in the
term shards beside the model's rows: :func:`with_pass_sums` adds it to each shard's
entry (zeros, or a checkpoint's rows), :func:`pass_sums_step` adds a round's merged
rows to it in the shard's update (zeroing it first at a pass's first round), and
:func:`pass_sums_of` reads it as :class:`ShardedTopics` (the fixed point at a pass's
end, checkpoints).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ..kernels.priors import (
    ETA_NODES,
    eta_cells,
    eta_count_numerator,
    eta_fixed_point,
    eta_interpolant,
    eta_node_sums,
    eta_nodes,
    eta_numerator,
    merge_histograms,
)
from .topics import ShardedTopics

__all__ = ["pass_sums_of", "pass_sums_step", "sharded_minka_eta", "with_pass_sums"]

#: How far the interpolated numerator may be from the exact sum at the last η read
#: before the fixed point is taken again with one job an iteration.
INTERPOLATION_RTOL = 1e-10

#: The index of the pass sums in a shard's entry ``(shard, lo, base, mirror, summary,
#: pass sums)`` (:mod:`sparklda.execution.sharded`).
PASS_SUMS = 5


def sharded_minka_eta(
    rows: ShardedTopics,
    eta: float,
    expected: bool = True,
    max_iter: int = 100,
    tol: float = 1e-6,
) -> float:
    """:func:`~sparklda.kernels.priors.minka_eta` of the sharded (V, K) statistics
    ``rows`` (module docstring), computed where they live."""
    v = rows.vocab_size
    if not expected:  # whole counts: one job, then the iterations on the driver
        got = rows._per_shard(lambda lo, r: _histogram(r))
        totals = _summed([t for t, _, _ in got], rows.k)
        values, counts = merge_histograms([(vals, c) for _, vals, c in got])

        def from_counts(e: float) -> float:
            return eta_count_numerator(values, counts, e)

        return eta_fixed_point(from_counts, totals, v, eta, max_iter, tol)
    first = rows._per_shard(lambda lo, r: (eta_cells(r)[0], eta_node_sums(r, eta_nodes(eta))))
    totals = _summed([t for t, _ in first], rows.k)
    pieces = [eta_interpolant(eta, _summed([s for _, s in first], ETA_NODES))]
    asked: list[float] = []

    def interpolated(e: float) -> float:
        asked.append(e)
        for piece in pieces:
            got = piece(e)
            if got is not None:
                return got
        # an iterate beyond the spans read so far: one more job, around it
        sums = rows._per_shard(lambda lo, r: eta_node_sums(r, eta_nodes(e)))
        pieces.append(eta_interpolant(e, _summed(sums, ETA_NODES)))
        return float(pieces[-1](e))  # type: ignore[arg-type]

    out = eta_fixed_point(interpolated, totals, v, eta, max_iter, tol)
    if not asked:
        return out
    # one exact sum at the last η read: the interpolant holds to rounding (kernels.priors)
    last = asked[-1]
    exact = _exact_numerator(rows, last)
    if abs(interpolated(last) - exact) <= INTERPOLATION_RTOL * abs(exact):
        return out
    return _iterated(rows, totals, eta, max_iter, tol)  # a safety net


def _exact_numerator(rows: ShardedTopics, eta: float) -> float:
    total = 0.0
    for part in rows._per_shard(lambda lo, r: eta_numerator(r, eta)):
        total += part
    return total


def _iterated(rows: ShardedTopics, totals: np.ndarray, eta: float, max_iter: int, tol: float):
    """The fixed point with one job an iteration (each shard's positive cells persisted
    for them), the numerator summed over the shards in shard order."""
    from pyspark import StorageLevel

    cells = rows.rdd.map(lambda e: (e[0], eta_cells(e[2])[1]))
    cells = cells.persist(StorageLevel.MEMORY_AND_DISK)
    try:

        def numerator(e: float) -> float:
            parts = cells.map(lambda c: (c[0], eta_numerator(c[1], e))).collect()
            total = 0.0
            for _, part in sorted(parts, key=lambda p: p[0]):
                total += part
            return total

        return eta_fixed_point(numerator, totals, rows.vocab_size, eta, max_iter, tol)
    finally:
        cells.unpersist()


def _histogram(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    totals, positive = eta_cells(rows)
    values, counts = np.unique(positive, return_counts=True)
    return totals, values, counts.astype(np.int64)


def _summed(parts: list, k: int) -> np.ndarray:
    total = np.zeros(k)
    for part in parts:
        total = total + part
    return total


# -- the online modes' pass sums, beside the rows -----------------------------------


def with_pass_sums(model, start, bounds: np.ndarray, k: int):
    """The shard entries of ``model`` (an RDD, one ``(shard, lo, base, mirror,
    summary)`` a partition) with the pass sums appended: ``start`` cut by shard (a
    checkpoint's, as :class:`ShardedTopics` or an array), or zeros (None)."""
    n = len(bounds) - 1
    sc = model.context
    if isinstance(start, ShardedTopics):
        sums = start.recut(n).rdd.map(lambda e: e[2], preservesPartitioning=True)
    elif start is not None:
        whole = np.asarray(start, dtype=np.float64)
        sums = sc.parallelize([np.array(whole[bounds[s] : bounds[s + 1]]) for s in range(n)], n)
    else:
        sums = sc.parallelize(range(n), n).map(
            lambda s: np.zeros((int(bounds[s + 1]) - int(bounds[s]), k))
        )
    return model.zip(sums).map(lambda p: (*p[0][:PASS_SUMS], p[1]), preservesPartitioning=True)


def pass_sums_step(reset: bool, k: int) -> Callable:
    """``keep(old sums, local terms, merged rows) -> new sums`` of one shard: the round's
    merged rows (their first ``k`` columns; ``terms``/``rows`` None when the round
    touched none of the shard's terms) added to the pass's sums, zeroed first when
    ``reset`` (a pass's first round) — :meth:`Priors.learn_eta_pass`'s sum, row by row."""

    def run(old, terms, rows):
        out = old
        if reset:
            out = np.zeros_like(old)
        if rows is not None and len(terms):
            out[terms] += rows[:, :k]
        return out

    return run


def pass_sums_of(model, bounds: np.ndarray, k: int) -> ShardedTopics:
    """The pass sums of the shard entries ``model`` as :class:`ShardedTopics` (lazy)."""
    rdd = model.map(lambda e: (e[0], e[1], e[PASS_SUMS]), preservesPartitioning=True)
    return ShardedTopics(rdd, int(bounds[-1]), k, bounds)
