"""The per-partition functions of a round (built from plain values): they call the
mode's kernel on each block, time it and count its tokens and documents. Both
backends run them, on RDD partitions or on the blocks of an Arrow batch."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import numpy as np

from ..kernels.warm import settle_heap
from ..stats import TopicStats

__all__ = [
    "ByPartition",
    "advance_partition",
    "check_restored_state",
    "init_partition",
    "sent_statistics",
    "stateless_partition",
    "statistics_partition",
    "with_blocks",
    "without_blocks",
]


def _block_stats(block, rows, kernel_s: float, **timings) -> TopicStats:
    return TopicStats(
        block.terms,
        rows,
        extra={"tokens": block.n_tokens, "docs": block.n_docs, "pairs": block.nnz},
        timings={"kernel": kernel_s, **timings},
    )


def _pack(rows):
    """Rows as (flat indices of the nonzero entries, their values, shape) when at most a
    quarter of them are nonzero (a block's word-topic counts), else as they are."""
    flat = rows.reshape(-1)
    nz = np.flatnonzero(flat)
    if 4 * len(nz) > len(flat):
        return rows
    return nz.astype(np.int32 if len(flat) < 2**31 else np.int64), flat[nz], rows.shape


def _unpack(packed):
    if not isinstance(packed, tuple):
        return packed
    idx, values, shape = packed
    rows = np.zeros(int(np.prod(shape)), dtype=values.dtype)
    rows[idx] = values
    return rows.reshape(shape)


def stateless_partition(source: Any, kernel: Callable) -> Callable[[Iterable], Iterator]:
    """``kernel(value, block) -> rows`` over a partition's blocks; ``source.value``
    is the round value (a broadcast variable or any holder of ``.value``)."""

    def run(blocks):
        settle_heap()
        value = source.value
        for block in blocks:
            if block.n_docs == 0:
                continue
            t0 = time.perf_counter()
            rows = kernel(value, block)
            yield _block_stats(block, rows, time.perf_counter() - t0)

    return run


def init_partition(
    source: Any,
    init_state: Callable,
    statistics: Callable | None = None,
    sink: Any = None,
    keep: Callable | None = None,
) -> Callable[[Iterable], Iterator]:
    """(block, state, seconds) for each block, ``state = init_state(value, block)``;
    with ``statistics``, the partial statistics of the states are counted as in
    :func:`advance_partition` (sent through ``sink``, or carried by each item), and
    ``keep(block, state)`` (the mode's :meth:`~sparklda.modes.StatefulMode.kept_state`)
    is what each item keeps of its state."""

    def run(blocks):
        settle_heap()
        value = source.value if source is not None else None
        partials: list = []
        for block in blocks:
            t0 = time.perf_counter()
            state = init_state(value, block)
            seconds = time.perf_counter() - t0
            yield _with_statistics(block, state, seconds, statistics, sink, partials, keep)
        if sink is not None:
            _send(sink, partials)

    return run


def _with_statistics(block, state, kernel_s, statistics, sink, partials, keep) -> tuple:
    """The item of a block's new ``state``: ``(block, kept state, kernel seconds)``, its
    statistics counted while the full state is at hand and added to ``partials`` (with a
    ``sink``) or carried as the item's fourth entry (without one; None for an empty
    block)."""
    kept = keep(block, state) if keep is not None else state
    if statistics is None:
        return block, kept, kernel_s
    if sink is not None:
        if block.n_docs:
            partials.append(_partial(block, statistics, state, kernel_s))
        return block, kept, kernel_s
    packed = None
    if block.n_docs:
        t1 = time.perf_counter()
        packed = _pack(statistics(block, state)), time.perf_counter() - t1
    return block, kept, kernel_s, packed


class ByPartition:
    """The accumulator parameter of a round's statistics sink: a dict from a partition's
    index to the list of its blocks' partials (:func:`advance_partition`). Adding
    replaces a partition's entry, never sums it: a partition computed twice (a retry,
    a speculative copy, a lost cached copy computed again) sends the same partials."""

    def zero(self, value):
        return {}

    def addInPlace(self, value1, value2):  # PySpark's AccumulatorParam method name
        value1.update(value2)
        return value1


def _partial(block, statistics: Callable, state, kernel_s: float) -> tuple:
    """What a sink carries of one block: its terms, its statistics (packed), its
    counts and timings."""
    t0 = time.perf_counter()
    packed = _pack(statistics(block, state))
    extra = {"tokens": block.n_tokens, "docs": block.n_docs, "pairs": block.nnz}
    return block.terms, packed, extra, kernel_s, time.perf_counter() - t0


def _send(sink, partials: list) -> None:
    from pyspark import TaskContext

    context = TaskContext.get()
    sink.add({context.partitionId() if context is not None else 0: partials})


def sent_statistics(received: dict, n_partitions: int) -> list[TopicStats] | None:
    """The partial statistics a sink received (:class:`ByPartition`), in partition
    order as :func:`statistics_partition` yields them; None unless every one of the
    ``n_partitions`` partitions sent its own."""
    if any(i not in received for i in range(n_partitions)):
        return None
    return [
        TopicStats(terms, _unpack(packed), extra, timings={"kernel": kernel_s, "stats": stats_s})
        for i in range(n_partitions)
        for terms, packed, extra, kernel_s, stats_s in received[i]
    ]


def advance_partition(
    source: Any,
    kernel: Callable,
    statistics: Callable | None = None,
    sink: Any = None,
    keep: Callable | None = None,
) -> Callable[[Iterable], Iterator]:
    """(block, new state, seconds) for each (block, state, …), ``kernel(value, block,
    state)``. With ``statistics``, the partial statistics of each new state are counted
    in the same pass while the block and its state are at hand, and either sent through
    ``sink`` (an accumulator of :class:`ByPartition`: the partition's list once its last
    block is done; the job that computes the states then needs no second Python pass,
    :func:`sent_statistics`) or, without a sink, carried by each item (None for an empty
    block), which :func:`statistics_partition` then passes on instead of reading the
    state again. They are a function of the block and its new state, so a partition
    computed again (a retry, a lost cached copy) sends or carries the same ones. Each
    item keeps ``keep(block, new state)`` (all of it without ``keep``)."""

    def run(items):
        settle_heap()
        value = source.value
        partials: list = []
        for block, state, *_ in items:
            t0 = time.perf_counter()
            new_state = kernel(value, block, state)
            kernel_s = time.perf_counter() - t0
            yield _with_statistics(block, new_state, kernel_s, statistics, sink, partials, keep)
        if sink is not None:
            _send(sink, partials)

    return run


def statistics_partition(statistics: Callable) -> Callable[[Iterable], Iterator]:
    """The partial statistics of each non-empty (block, state, kernel seconds): the ones
    an item carries (:func:`advance_partition` with statistics), else counted here."""

    def run(items):
        settle_heap()
        for block, state, kernel_s, *carried in items:
            if block.n_docs == 0:
                continue
            if carried and carried[0] is not None:
                packed, stats_s = carried[0]
                yield _block_stats(block, _unpack(packed), kernel_s, stats=stats_s)
                continue
            t0 = time.perf_counter()
            rows = statistics(block, state)
            yield _block_stats(block, rows, kernel_s, stats=time.perf_counter() - t0)

    return run


def with_blocks(fn: Callable[[Iterable], Iterator]) -> Callable[[Iterable], Iterator]:
    """``fn``, a function of ``(block, state, …)`` items, over the pairs ``(block,
    (state, …))`` of the cached blocks zipped with their states (the classic executor
    keeps a stateful mode's states apart from the blocks, so a round rewrites only the
    states)."""

    def run(pairs):
        return fn((block, *item) for block, item in pairs)

    return run


def without_blocks(fn: Callable[[Iterable], Iterator]) -> Callable[[Iterable], Iterator]:
    """``fn``'s ``(block, state, …)`` items without their block: what the classic
    executor persists of a generation of states (the blocks stay cached once)."""

    def run(items):
        for _, *rest in fn(items):
            yield tuple(rest)

    return run


def check_restored_state(block, state, rows: Callable | None = None) -> tuple:
    """``(block, state, 0.0)`` for a block state read from a checkpoint, which must have
    ``rows(block)`` rows (the mode's :meth:`~sparklda.modes.StatefulMode.state_rows`;
    None: a row per (document, term) pair of its block)."""
    want = block.nnz if rows is None else rows(block)
    if state.shape[0] != want:
        unit = "(document, term) pairs" if rows is None else "rows of state"
        raise ValueError(
            f"a checkpointed block state has {state.shape[0]} rows; its block has {want} {unit}"
        )
    return block, state, 0.0
