"""The model on the executors (``model_placement="executors"``, classic sessions).

The topic-word statistics live in an RDD with one partition per term shard (the
combine's :func:`~sparklda.stats.shard_bounds`), each holding ``(shard, first term,
rows of N^Φ/scale in float64, their mirror in the kernels' dtype or None, None[, a
learned η's pass sums])`` (the last: :mod:`sparklda.execution.learned_eta`). A round:

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
from collections.abc import Callable

import numpy as np

from ..corpus import pruned
from ..limits import PYTHON_MEMORY_CONF, available_memory
from ..stats import TopicStats, concat_shards, shard_bounds
from .base import RoundOutput
from .checkpointer import PeriodicCheckpointer
from .classic import ClassicExecutor, shard_pieces, size_bytes
from .learned_eta import pass_sums_of, with_pass_sums
from .shard_tasks import (
    _entry,
    _record,
    _rows_of,
    gathered,
    keyed_part,
    merge_requests,
    one_per_batch,
    request_pieces,
    serve_rows,
    shifted,
    task_partition,
    update_partition,
    update_serve,
)
from .topics import ShardedTopics, read_chunks

__all__ = [
    "LINEAGE_INTERVAL",
    "ShardedExecutor",
    "driver_limits",
    "one_per_batch",
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

        model = raw.map(first)
        keeps = mode.keeps_pass_sums()  # a learned η's pass sums beside the rows
        pass_sums = mode.pass_sums_start() if keeps else None
        if keeps:
            model = with_pass_sums(model, pass_sums, bounds, self.k)
        model = one_per_batch(model).setName(f"sparklda {mode.name} model shards (initial)")
        self.checkpointer.update(model)
        sums = model.map(lambda e: e[2].sum(axis=0)).collect()
        self.checkpointer.materialized()
        for held in (array, pass_sums):
            if isinstance(held, ShardedTopics):
                held.unpersist()  # the first generation is computed and persisted
        self.model = model
        self.out, self.out_served = None, 0
        nz = np.zeros(sums[0].shape if sums else self.k)  # CVB: N^Z and Var N^Z
        for col in sums:
            nz = nz + col
        mode.start_sharded(nz)
        mode.collect_base = self.collect_base
        mode.held_topics = self.topics
        mode.held_pass_sums = self.pass_sums if keeps else None
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

    def pass_sums(self) -> ShardedTopics:
        """A learned η's pass sums held beside the rows (lazy)."""
        assert self.model is not None
        return pass_sums_of(self.model.map(_entry, preservesPartitioning=True), self.bounds, self.k)

    def save_pass_sums(self, path: str) -> None:
        """Write the pass sums (checkpoints: :meth:`ShardedTopics.write_chunks`)."""
        from pyspark.sql import SparkSession

        self.pass_sums().write_chunks(SparkSession.builder.getOrCreate(), path)

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
        keep = mode.pass_sums_step(t)  # a learned η's pass sums (None: none kept)
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
                update_partition(_places(nxt), update, fetch, k, m, n, keep)
            )
        else:  # the first generation (persisted): zipped with the merged pieces
            side = self.sc.union([self.requests, pieces.partitionBy(n, _shard_partition)])
            if side.getNumPartitions() != n:  # pragma: no cover - Spark's union
                raise RuntimeError("the requests and the round's pieces did not co-partition")
            updated = self.model.zip(
                one_per_batch(side.mapPartitions(merge_requests(_places(nxt))))
            ).flatMap(update_serve(update, fetch, k, m, n, keep))
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
