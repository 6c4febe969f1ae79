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
    "advance_partition",
    "check_restored_state",
    "init_partition",
    "stateless_partition",
    "statistics_partition",
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


def init_partition(source: Any, init_state: Callable) -> Callable[[Iterable], Iterator]:
    """(block, state, seconds) for each block, ``state = init_state(value, block)``."""

    def run(blocks):
        settle_heap()
        value = source.value if source is not None else None
        for block in blocks:
            t0 = time.perf_counter()
            state = init_state(value, block)
            yield block, state, time.perf_counter() - t0

    return run


def advance_partition(
    source: Any, kernel: Callable, statistics: Callable | None = None
) -> Callable[[Iterable], Iterator]:
    """(block, new state, seconds) for each (block, state, …), ``kernel(value, block,
    state)``. With ``statistics``, each item also carries the partial statistics of its
    new state (None for an empty block), counted in the same pass while the block and its
    state are at hand: :func:`statistics_partition` then passes them on instead of reading
    the state again. They are a function of the block and its new state, so a partition
    computed again (a retry, a lost cached copy) carries the same ones."""

    def run(items):
        settle_heap()
        value = source.value
        for block, state, *_ in items:
            t0 = time.perf_counter()
            new_state = kernel(value, block, state)
            kernel_s = time.perf_counter() - t0
            if statistics is None:
                yield block, new_state, kernel_s
                continue
            packed = None
            if block.n_docs:
                t1 = time.perf_counter()
                packed = _pack(statistics(block, new_state)), time.perf_counter() - t1
            yield block, new_state, kernel_s, packed

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
