"""The tasks of the model on the executors (:mod:`sparklda.execution.sharded`): serving
a round's rows from the term shards, the kernel against them, and each shard's update
(which, for a mode that serves ahead, also serves the next round's rows). Shard entries
are ``(shard, lo, base, mirror, summary[, a learned η's pass sums])``
(:mod:`sparklda.execution.learned_eta`), read through :func:`_entry` / :func:`_record`.
See docs/architecture.md, "Memory model".
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator

import numpy as np
from pyspark.serializers import BatchedSerializer, CPickleSerializer

from ..corpus import pruned
from ..kernels.warm import settle_heap
from ..stats import TopicStats, split_shards
from .classic import merge_pieces

__all__ = [
    "gathered",
    "keyed_part",
    "merge_requests",
    "one_per_batch",
    "request_pieces",
    "serve_rows",
    "shifted",
    "task_partition",
    "update_partition",
    "update_serve",
    "update_shard",
]


def one_per_batch(rdd):
    """``rdd`` written one element per pickled batch (a pipelined identity map where its
    serializer differs; PySpark's own ``_reserialize``). Two RDDs written so zip without
    a Python pass that reads and writes each of them again (``RDD.zip`` re-batches
    both sides of auto-batched RDDs), which for the block states would copy every γ and
    for the shards every row. The states, the shards and the requests grouped by shard
    hold one element a partition."""
    return rdd._reserialize(BatchedSerializer(CPickleSerializer(), 1))


def gathered(items: Iterable) -> Iterator[list]:
    """A partition as one list (``RDD.glom``), in a worker whose heap is settled first
    (:func:`~sparklda.kernels.warm.settle_heap`: the daemon's collection after each task
    of a reused worker then skips the modules' objects)."""
    settle_heap()
    yield list(items)


def request_pieces(bounds: np.ndarray) -> Callable[[int, Iterable], Iterator]:
    """Each non-empty block's terms of partition ``index`` cut by term shard:
    ``(shard, (index, terms))``: the rows the block's task asks of each shard."""

    def run(index, blocks):
        for block in blocks:
            if block.n_docs == 0:
                continue
            part = TopicStats(np.asarray(block.terms), np.zeros((len(block.terms), 0)))
            for s, piece in split_shards(part, bounds):
                if len(piece.terms):
                    yield s, (index, piece.terms)

    return run


def serve_rows(positions: dict[int, int], fetch: Callable) -> Callable[[tuple], Iterator]:
    """One shard's answer to the requests of a round's partitions (``positions``:
    partition -> its place in the round): ``(place, (shard, terms, rows))`` for each,
    ``rows = fetch(base, mirror, local rows)`` (the mode's round value of those terms)."""

    def run(pair):
        requests, shards = pair
        s, lo, base, mirror, _ = _record(shards[0])
        for _, (p, terms) in requests:
            i = positions.get(p)
            if i is not None:
                yield i, (s, terms, fetch(base, mirror, np.asarray(terms, dtype=np.int64) - lo))

    return run


def _entry(e: tuple) -> tuple:
    """A shard's whole entry ``(shard, lo, base, mirror, summary[, pass sums])``, also
    when it is keyed as a round that served ahead writes it (``(key, entry)``:
    :func:`update_serve`)."""
    return e[1] if len(e) == 2 else e


def _record(e: tuple) -> tuple:
    """A shard's ``(shard, lo, base, mirror, summary)``, without a learned η's pass sums
    (:func:`_entry`)."""
    return _entry(e)[:5]


def merge_requests(positions: dict[int, int]) -> Callable[[Iterable], Iterator]:
    """Reduce side of a round that serves ahead: a shard's partition of the round's
    pieces and of the cached requests (one partitioner-aware union) as one element
    ``(merged statistics or None, [(place, terms)])``, the requests those of the next
    round's partitions (``positions``: partition -> its place in that round)."""

    def run(items: Iterable) -> Iterator:
        settle_heap()
        pieces, asks = [], []
        for s, item in items:
            if len(item) == 2:  # a block's request: (partition, terms)
                i = positions.get(item[0])
                if i is not None:
                    asks.append((i, item[1]))
            else:
                pieces.append((s, item))
        merged = [st for _, st in merge_pieces(pieces)]
        yield (merged[0] if merged else None), asks

    return run


def update_serve(
    update: Callable | None,
    fetch: Callable | None,
    k: int,
    n_next: int,
    n: int,
    keep: Callable | None = None,
) -> Callable[[tuple], Iterator]:
    """Map side of a round that serves ahead: a shard's next generation (the update of
    :func:`update_shard`) and, from the rows it now has, the next round's ``n_next``
    partitions their rows, all keyed for one shuffle of ``n_next + n + 1`` partitions:
    ``(place, (shard, terms, rows))`` for the next round's partitions (``fetch(base,
    mirror, local rows)``, as :func:`serve_rows`), ``(n_next + shard, entry)`` the new
    generation, ``(n_next + n, (shard, summary))`` the summary for the driver. A learned
    η's pass sums stay in the entry (``keep``: :func:`update_shard`)."""
    step = update_shard(update, k, keep)

    def run(pair):
        e, (merged, asks) = pair
        s, lo, base, mirror, summary, *kept = step(([e], [] if merged is None else [(0, merged)]))
        yield n_next + n, (s, summary)
        if fetch is not None:
            for i, terms in asks:
                rows = fetch(base, mirror, np.asarray(terms, dtype=np.int64) - lo)
                yield i, (s, terms, rows)
        yield n_next + s, (s, lo, base, mirror, None, *kept)

    return run


def update_partition(
    positions: dict[int, int],
    update: Callable | None,
    fetch: Callable | None,
    k: int,
    n_next: int,
    n: int,
    keep: Callable | None = None,
) -> Callable[[Iterable], Iterator]:
    """:func:`merge_requests` and :func:`update_serve` in one pass over a shard's
    partition of the union of the last round's output (its entry), the cached requests
    and the round's pieces (each keyed by the same partition)."""
    gather = merge_requests(positions)
    serve = update_serve(update, fetch, k, n_next, n, keep)

    def run(items: Iterable) -> Iterator:
        settle_heap()
        entry, rest = None, []
        for key, value in items:
            if len(value) >= 5:  # the shard's entry (pieces: 3 items, requests: 2)
                entry = value
            else:
                rest.append((key, value))
        if entry is not None:
            for side in gather(rest):
                yield from serve((entry, side))

    return run


def shifted(offset: int) -> Callable[[tuple], tuple]:
    """``(key + offset, value)``: a shard's pieces and requests keyed by the partition its
    entry has in the last round's output."""

    def run(kv: tuple) -> tuple:
        return kv[0] + offset, kv[1]

    return run


def _rows_of(e: tuple) -> tuple:
    s, _, base, _, _ = _record(e)
    return s, base


def keyed_part(rdd, partitions: Iterable[int]):
    """``rdd``'s ``partitions`` (a shuffle's output, each written by one map task as one
    pickled batch), declared one element a batch so that it zips without a Python pass."""
    from pyspark.rdd import RDD

    part = pruned(rdd, list(partitions))
    return RDD(part._jrdd, part.context, BatchedSerializer(CPickleSerializer(), 1))


def task_partition(kernel: Callable, small: tuple) -> Callable[[Iterable], Iterator]:
    """The kernel on each block of a round's partition against the rows its shards sent:
    the round value ``(terms, rows, *small)`` of the block's own terms."""

    def run(pairs):
        settle_heap()
        for blocks, served in pairs:
            pieces = sorted((piece for _, piece in served), key=lambda piece: piece[0])
            for block in blocks:
                if block.n_docs == 0:
                    continue
                terms = np.concatenate([np.asarray(pc[1]) for pc in pieces])
                rows = np.concatenate([pc[2] for pc in pieces])
                t0 = time.perf_counter()
                out = kernel((terms, rows, *small), block)
                kernel_s = time.perf_counter() - t0
                yield TopicStats(
                    block.terms,
                    out,
                    extra={
                        "tokens": block.n_tokens,
                        "docs": block.n_docs,
                        "pairs": block.nnz,
                        "served_bytes": float(rows.nbytes + terms.nbytes),
                    },
                    timings={"kernel": kernel_s},
                )

    return run


def update_shard(
    update: Callable | None, k: int, keep: Callable | None = None
) -> Callable[[tuple], tuple]:
    """A shard's next generation: ``update(base, mirror, local terms, rows) -> (totals,
    extras)`` applied with the round's merged rows of the shard; the summary (no rows,
    ``extra`` with the rows' column sums ``row_totals`` and the learned prior's
    ``prior_extras``) travels with it to the driver. A shard entry with pass sums (a
    learned η's, :func:`~sparklda.execution.learned_eta.with_pass_sums`) carries them
    on, ``keep(sums, local terms, rows)`` when given."""

    def run(pair):
        shards, merged = pair
        s, lo, base, mirror, _, *kept = _entry(shards[0])
        st = merged[0][1] if merged else None
        extra = dict(st.extra) if st is not None else {}
        timings = dict(st.timings) if st is not None else {}
        terms = None if st is None else np.asarray(st.terms, dtype=np.int64) - lo
        rows = None if st is None else st.rows
        if update is not None:
            totals, extras = update(base, mirror, terms, rows)
            extra["row_totals"] = totals
            if extras is not None:
                extra["prior_extras"] = extras
        if keep is not None and kept:
            kept = [keep(kept[0], terms, rows)]
        summary = TopicStats(np.zeros(0, np.int32), np.zeros((0, k)), extra, timings)
        return (s, lo, base, mirror, summary, *kept)

    return run
