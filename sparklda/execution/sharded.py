"""The model on the executors (``model_placement="executors"``, classic sessions).

The topic-word statistics live in an RDD with one partition per term shard (the
combine's :func:`~sparklda.stats.shard_bounds`), each holding ``(shard, first term,
rows of N^Φ/scale in float64, their mirror in the kernels' dtype or None, None)``.
A round:

1. serves each task the rows of its block's terms: the block's term list, cut by
   shard, is a request built once and cached (an RDD partitioned by shard); each shard
   answers the requests of the round's partitions from its rows, and a shuffle brings
   each task its rows (no V-sized broadcast: the broadcast part of the round value is
   O(K)). A mode whose rows do not wait for the driver's update of the round before
   (``fetch_ahead``: SCVB0) has them served by that round's update stage (step 4), so
   this is a stage only in a run's first round (and SVB's);
2. runs the mode's kernel on each block against its rows (the same values the driver
   placement's broadcast would give it: the same bits);
3. combines the partials by shard as the executors' combine does
   (:func:`~sparklda.execution.classic.shard_pieces`,
   :func:`~sparklda.execution.classic.merge_pieces`), the pieces read with the shard's
   entry in the last round's output and the cached requests as one partitioner-aware
   union, all keyed by the shard's partition there (:func:`update_partition`: one
   Python pass; a run's first round zips its first generation with them);
4. applies the mode's row update inside each shard (:meth:`row_step`, e.g. SCVB0's
   Eq. 7-8 with its lazy decay) and writes, as one shuffle (:func:`update_serve`), the
   shard's next generation, the next round's rows of each task, and the shard's O(K)
   summary; the driver reads the summaries' partition without a Python task, the next
   generation is the shuffle's shard partitions (:func:`keyed_part`), and the lineage
   is cut every few rounds by a
   :class:`~sparklda.execution.checkpointer.PeriodicCheckpointer`.

The shards are read once and written once a round, and the RDDs a round zips are
written one element a pickled batch (:func:`one_per_batch`), so no Python pass reads
and writes them again. Only O(K) per shard reaches the driver (the rows' column sums,
a learned prior's statistics, the counts and timings). Evaluation, checkpoints and the
trained model read the shards where they live (:meth:`ShardedExecutor.topics`, a
:class:`~sparklda.execution.topics.ShardedTopics`; :meth:`save_shards`,
:meth:`load_shards`); :meth:`ShardedExecutor.collect_base` collects them only when a
caller asks for the V×K array. See docs/architecture.md, "Memory model".
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Iterator

import numpy as np
from pyspark.serializers import BatchedSerializer, CPickleSerializer

from ..corpus import pruned
from ..kernels.warm import settle_heap
from ..limits import PYTHON_MEMORY_CONF, available_memory
from ..stats import TopicStats, concat_shards, shard_bounds, split_shards
from .base import RoundOutput
from .checkpointer import PeriodicCheckpointer
from .classic import ClassicExecutor, merge_pieces, shard_pieces, size_bytes
from .topics import ShardedTopics, read_chunks

__all__ = [
    "LINEAGE_INTERVAL",
    "ShardedExecutor",
    "driver_limits",
    "request_pieces",
    "serve_rows",
]

log = logging.getLogger("sparklda.execution")

#: Rounds between checkpoints of the shard RDD's lineage when ``checkpoint_interval`` is 0.
LINEAGE_INTERVAL = 10


def driver_limits(corpus) -> tuple[int | None, int | None]:
    """``(python memory, JVM heap)`` of the driver training ``corpus``, in bytes (None:
    unknown): the :data:`~sparklda.limits.PYTHON_MEMORY_CONF` property when the session
    sets it, else the memory available on the driver machine; the JVM's maximum heap
    (classic sessions only)."""
    from pyspark import RDD
    from pyspark.sql import SparkSession

    spark = corpus.spark or SparkSession.getActiveSession()
    conf = None
    if spark is not None:
        try:
            conf = spark.conf.get(PYTHON_MEMORY_CONF, None)
        except Exception:  # a session that cannot say
            conf = None
    python = size_bytes(conf) if conf else available_memory()
    jvm = None
    if isinstance(corpus.train, RDD):
        sc = corpus.train.context
        try:
            jvm = int(sc._jvm.java.lang.Runtime.getRuntime().maxMemory())
        except Exception:  # pragma: no cover - no JVM access
            jvm = None
    return python, jvm


def _shard_partition(s: int) -> int:
    return s


def _identity(i: int) -> int:
    return i


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


def _record(e: tuple) -> tuple:
    """A shard's ``(shard, lo, base, mirror, summary)``, also when it is keyed as a round
    that served ahead writes it (``(key, entry)``: :func:`update_serve`)."""
    return e[1] if len(e) == 2 else e


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
    update: Callable | None, fetch: Callable | None, k: int, n_next: int, n: int
) -> Callable[[tuple], Iterator]:
    """Map side of a round that serves ahead: a shard's next generation (the update of
    :func:`update_shard`) and, from the rows it now has, the next round's ``n_next``
    partitions their rows, all keyed for one shuffle of ``n_next + n + 1`` partitions:
    ``(place, (shard, terms, rows))`` for the next round's partitions (``fetch(base,
    mirror, local rows)``, as :func:`serve_rows`), ``(n_next + shard, entry)`` the new
    generation, ``(n_next + n, (shard, summary))`` the summary for the driver."""
    step = update_shard(update, k)

    def run(pair):
        e, (merged, asks) = pair
        s, lo, base, mirror, summary = step(([e], [] if merged is None else [(0, merged)]))
        yield n_next + n, (s, summary)
        if fetch is not None:
            for i, terms in asks:
                rows = fetch(base, mirror, np.asarray(terms, dtype=np.int64) - lo)
                yield i, (s, terms, rows)
        yield n_next + s, (s, lo, base, mirror, None)

    return run


def update_partition(
    positions: dict[int, int],
    update: Callable | None,
    fetch: Callable | None,
    k: int,
    n_next: int,
    n: int,
) -> Callable[[Iterable], Iterator]:
    """:func:`merge_requests` and :func:`update_serve` in one pass over a shard's
    partition of the union of the last round's output (its entry), the cached requests
    and the round's pieces (each keyed by the same partition)."""
    gather = merge_requests(positions)
    serve = update_serve(update, fetch, k, n_next, n)

    def run(items: Iterable) -> Iterator:
        settle_heap()
        entry, rest = None, []
        for key, value in items:
            if len(value) == 5:  # the shard's entry
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


def update_shard(update: Callable | None, k: int) -> Callable[[tuple], tuple]:
    """A shard's next generation: ``update(base, mirror, local terms, rows) -> (totals,
    extras)`` applied with the round's merged rows of the shard; the summary (no rows,
    ``extra`` with the rows' column sums ``row_totals`` and the learned prior's
    ``prior_extras``) travels with it to the driver."""

    def run(pair):
        shards, merged = pair
        s, lo, base, mirror, _ = _record(shards[0])
        st = merged[0][1] if merged else None
        extra = dict(st.extra) if st is not None else {}
        timings = dict(st.timings) if st is not None else {}
        if update is not None:
            terms = None if st is None else np.asarray(st.terms, dtype=np.int64) - lo
            rows = None if st is None else st.rows
            totals, extras = update(base, mirror, terms, rows)
            extra["row_totals"] = totals
            if extras is not None:
                extra["prior_extras"] = extras
        summary = TopicStats(np.zeros(0, np.int32), np.zeros((0, k)), extra, timings)
        return s, lo, base, mirror, summary

    return run


class ShardedExecutor(ClassicExecutor):
    """Rounds of a mode whose topic-word statistics live on the executors, sharded by
    term (module docstring). The mode supplies ``initial_rows()``, ``start_sharded(nz)``,
    ``row_step(t)`` and reads the collected model through ``collect_base``."""

    def __init__(self, corpus, checkpoint_interval: int = 0, n_shards: int | None = None):
        super().__init__(corpus, 0, "executors")
        n = n_shards or self.sc.defaultParallelism
        self.bounds = shard_bounds(corpus.vocab_size, max(1, int(n)))
        self.n_shards = len(self.bounds) - 1
        self.lineage_interval = int(checkpoint_interval) or LINEAGE_INTERVAL
        self.model = None  # RDD: one (shard, lo, base, mirror, summary) per partition
        self.requests = None  # RDD: (shard, (partition, terms)), partitioned by shard
        self.ahead = None  # (round, its partitions, RDD of its rows) served by the last round
        self.out = None  # the last round's output (rows served ahead, shards, summaries)
        self.out_served = 0  # its partitions of rows served ahead (the shards' come next)
        self.keyed: dict = {}  # the requests keyed as the shards are in an output
        self.k = 0
        self.since_cut = 0

    # -- the shards ------------------------------------------------------------
    def _start(self, mode) -> None:
        """The first generation of the shard RDD, from the mode's initial rows."""
        self.k = int(mode.params.k)
        dtype = mode.dtype
        bounds = self.bounds
        n = self.n_shards
        self.checkpointer = PeriodicCheckpointer(
            self.sc, self.lineage_interval, f"the {mode.name} model's shards"
        )
        array, rows_fn, mass = mode.initial_rows()
        mirror = mode.sharded_mirror
        if isinstance(array, ShardedTopics):  # a checkpoint's or a sharded model's rows
            raw = array.recut(n).rdd
        elif array is not None:
            data = [(s, int(bounds[s]), array[bounds[s] : bounds[s + 1]]) for s in range(n)]
            raw = self.sc.parallelize(data, n)
        else:
            assert rows_fn is not None

            def draw(s):
                lo, hi = int(bounds[s]), int(bounds[s + 1])
                return s, lo, rows_fn(lo, hi)

            raw = self.sc.parallelize(range(n), n).map(draw)
        factor = None
        if mass is not None:  # the random start scaled to its total mass, as on the driver
            total = sum(raw.map(lambda e: float(e[2].sum())).collect())
            factor = mass / total

        def first(e):
            s, lo, base = e
            base = np.array(base, dtype=np.float64)
            if factor is not None:
                base *= factor
            return s, lo, base, base.astype(dtype) if mirror else None, None

        model = one_per_batch(raw.map(first)).setName(
            f"sparklda {mode.name} model shards (initial)"
        )
        self.checkpointer.update(model)
        sums = model.map(lambda e: e[2].sum(axis=0)).collect()
        self.checkpointer.materialized()
        if isinstance(array, ShardedTopics):
            array.unpersist()  # the first generation is computed and persisted
        self.model = model
        self.out, self.out_served = None, 0
        nz = np.zeros(sums[0].shape if sums else self.k)  # CVB: N^Z and Var N^Z
        for col in sums:
            nz = nz + col
        mode.start_sharded(nz)
        mode.collect_base = self.collect_base
        mode.held_topics = self.topics
        self.requests = (
            self.corpus.train.mapPartitionsWithIndex(request_pieces(bounds))
            .partitionBy(n, _shard_partition)
            .setName("sparklda model requests (block terms by shard)")
            .cache()
        )

    def _keyed_requests(self, offset: int, width: int):
        """The requests keyed ``offset + shard`` over ``width`` partitions (cached), to
        union with an output whose shards start at ``offset``."""
        if offset not in self.keyed:
            self.keyed[offset] = (
                self.corpus.train.mapPartitionsWithIndex(request_pieces(self.bounds))
                .map(shifted(offset))
                .partitionBy(width, _identity)
                .setName("sparklda model requests (block terms by shard)")
                .cache()
            )
        return self.keyed[offset]

    # -- the model after (and between) the rounds: docs/architecture.md ---------
    def topics(self, rows: Callable | None = None) -> ShardedTopics:
        """The shards' statistics as :class:`ShardedTopics` (lazy), each shard's rows
        ``rows(first term, rows)`` when given (e.g. the mode's N^Φ of its base)."""
        assert self.model is not None
        base = ShardedTopics(
            self.model.map(lambda e: _record(e)[:3], preservesPartitioning=True),
            int(self.bounds[-1]),
            self.k,
            self.bounds,
        )
        return base if rows is None else base.map_rows(rows)

    def save_shards(self, path: str) -> None:
        """Write the shards' rows (checkpoints: :meth:`ShardedTopics.write_chunks`)."""
        from pyspark.sql import SparkSession

        self.topics().write_chunks(SparkSession.builder.getOrCreate(), path)

    def load_shards(self, path: str, k: int) -> ShardedTopics:
        """The rows :meth:`save_shards` wrote, cut into this executor's shards."""
        from pyspark.sql import SparkSession

        spark = SparkSession.builder.getOrCreate()
        return read_chunks(spark, path, int(self.bounds[-1]), k, self.n_shards)

    def collect_base(self) -> np.ndarray:
        """The sharded statistics on the driver, V×K (a mode's ``topic_word`` when asked
        for the array)."""
        assert self.model is not None
        entries = self.model.map(_rows_of).collect()
        pieces = sorted(entries, key=lambda e: e[0])
        return np.concatenate([rows for _, rows in pieces])

    # -- a round ----------------------------------------------------------------
    def run_round(self, mode, t: int) -> RoundOutput:
        if self.model is None:
            self._start(mode)
        assert self.checkpointer is not None and self.requests is not None
        t0 = time.perf_counter()
        value = mode.round_value(t)
        small = tuple(value[2:])
        update = mode.row_step(t)
        kernel = mode.kernel(t)
        parts = mode.round_partitions(t)
        n, k, bounds = self.n_shards, self.k, self.bounds
        ahead, self.ahead = self.ahead, None
        served_ahead = ahead is not None and ahead[0] == t and ahead[1] == parts
        if ahead is not None and served_ahead:
            served = ahead[2]  # the last round's update stage served them
        else:
            positions = {p: i for i, p in enumerate(parts)}
            served = (
                one_per_batch(self.requests.glom())
                .zip(one_per_batch(self.model.glom()))
                .flatMap(serve_rows(positions, mode.fetch_rows(t)))
                .partitionBy(len(parts), _identity)
            )
        blocks = pruned(self.corpus.train, parts)
        pieces = (
            one_per_batch(blocks.mapPartitions(gathered))
            .zip(one_per_batch(served.mapPartitions(gathered)))
            .mapPartitions(task_partition(kernel, small))
            .mapPartitionsWithIndex(shard_pieces(bounds))
        )
        # the next round's rows are served by this round's update stage (two stages a
        # round) when the mode's rows do not wait for the driver's update (SCVB0's do not)
        total = int(mode.params.passes) * int(mode.rounds_per_pass)
        nxt = mode.round_partitions(t + 1) if t + 1 < total else []
        fetch = mode.fetch_rows(t + 1) if nxt and getattr(mode, "fetch_ahead", False) else None
        if fetch is None:
            nxt = []
        m = len(nxt)
        if self.out is not None:  # the shards are the last round's output: one pass
            off, width = self.out_served, self.out_served + n + 1
            both = self.sc.union(
                [
                    self.out,
                    self._keyed_requests(off, width),
                    pieces.map(shifted(off)).partitionBy(width, _identity),
                ]
            )
            if both.getNumPartitions() != width:  # pragma: no cover - Spark's union
                raise RuntimeError("the shards, requests and pieces did not co-partition")
            updated = pruned(both, list(range(off, off + n))).mapPartitions(
                update_partition(_places(nxt), update, fetch, k, m, n)
            )
        else:  # the first generation (persisted): zipped with the merged pieces
            side = self.sc.union([self.requests, pieces.partitionBy(n, _shard_partition)])
            if side.getNumPartitions() != n:  # pragma: no cover - Spark's union
                raise RuntimeError("the requests and the round's pieces did not co-partition")
            updated = self.model.zip(
                one_per_batch(side.mapPartitions(merge_requests(_places(nxt))))
            ).flatMap(update_serve(update, fetch, k, m, n))
        out = updated.partitionBy(m + n + 1, _identity).setName(
            f"sparklda {mode.name} model shards and served rows (round {t + 1})"
        )
        t1 = time.perf_counter()
        marked = self.checkpointer.update(out, persist=False)
        summaries = [e for _, e in pruned(out, [m + n]).collect()]
        self.checkpointer.materialized()
        self.model = keyed_part(out, range(m, m + n))
        self.out, self.out_served = out, m
        if fetch is not None:
            self.ahead = (t + 1, nxt, pruned(out, list(range(m))))
        t2 = time.perf_counter()
        shards = [st for _, st in sorted(summaries, key=lambda e: e[0])]
        stats = concat_shards(shards)
        cut = bool(marked and self.checkpointer.last_cut)
        self.since_cut = 0 if cut else self.since_cut + 1
        if cut:  # the generations before are unreachable now: Spark's cleaner removes
            # their shuffle files once the driver's JVM collects them (as its periodic GC)
            self.sc._jvm.System.gc()
        # generations since the last checkpoint (toDebugString's tree of a generation
        # reading the one before twice doubles with each round)
        self._info = {
            "checkpointed": cut,
            "lineage_rounds": self.since_cut,
            "served_ahead": served_ahead,  # this round's rows came from the last update stage
        }
        return RoundOutput(
            [],
            timings={"ship_s": t1 - t0, "job_s": t2 - t1, "release_s": 0.0},
            shipped_bytes=int(stats.extra.get("served_bytes", 0.0)),
            driver_bytes=sum(_summary_bytes(st) for st in shards),
            shards=shards,
            tasks=len(stats.timings.get("kernel", [])),
            combine="executors",
        )

    def report(self) -> dict:
        out = super().report()
        out.update({"model_placement": "executors", "model_shards": self.n_shards})
        return out

    def close(self) -> None:
        self.ahead = self.out = None
        for rdd in self.keyed.values():
            rdd.unpersist()
        self.keyed = {}
        if self.requests is not None:
            self.requests.unpersist()
            self.requests = None
        super().close()
        self.model = None


def _places(parts: list[int]) -> dict[int, int]:
    return {p: i for i, p in enumerate(parts)}


def _summary_bytes(st: TopicStats) -> int:
    return sum(int(v.nbytes) for v in st.extra.values() if isinstance(v, np.ndarray))
