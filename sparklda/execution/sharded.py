"""The model on the executors (``model_placement="executors"``, classic sessions).

The topic-word statistics live in a persisted RDD with one partition per term shard
(the combine's :func:`~sparklda.stats.shard_bounds`), each holding ``(shard, first
term, rows of N^Φ/scale in float64, the same rows in the kernels' dtype, the shard's
summary of the last round[, a learned η's pass sums])`` (the last:
:mod:`sparklda.execution.learned_eta`). A round:

1. serves each task the rows of its block's terms: the block's term list, cut by
   shard, is a request built once and cached (an RDD partitioned by shard); each shard
   answers the requests of the round's partitions from its rows, and a shuffle brings
   each task its rows (no V-sized broadcast: the broadcast part of the round value is
   O(K));
2. runs the mode's kernel on each block against its rows (the same values the driver
   placement's broadcast would give it: the same bits);
3. combines the partials by shard as the executors' combine does
   (:func:`~sparklda.execution.classic.shard_pieces`,
   :func:`~sparklda.execution.classic.merge_pieces`);
4. applies the mode's row update inside each shard (:meth:`row_step`, e.g. SCVB0's
   Eq. 7-8 with its lazy decay), producing the next generation of the shard RDD,
   persisted, its lineage cut every few rounds by a
   :class:`~sparklda.execution.checkpointer.PeriodicCheckpointer`.

Only O(K) per shard reaches the driver (the rows' column sums, a learned prior's
statistics, the counts and timings). Evaluation, checkpoints and the trained model read
the shards where they live (:meth:`ShardedExecutor.topics`, a
:class:`~sparklda.execution.topics.ShardedTopics`; :meth:`save_shards`,
:meth:`load_shards`); :meth:`ShardedExecutor.collect_base` collects them only when a
caller asks for the V×K array. See docs/architecture.md, "Memory model".
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Iterator

import numpy as np

from ..corpus import pruned
from ..kernels.warm import settle_heap
from ..limits import PYTHON_MEMORY_CONF, available_memory
from ..stats import TopicStats, concat_shards, shard_bounds, split_shards
from .base import RoundOutput
from .checkpointer import PeriodicCheckpointer
from .classic import ClassicExecutor, merge_pieces, shard_pieces, size_bytes
from .learned_eta import pass_sums_of, with_pass_sums
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
        s, lo, base, mirror = shards[0][:4]
        for _, (p, terms) in requests:
            i = positions.get(p)
            if i is not None:
                yield i, (s, terms, fetch(base, mirror, np.asarray(terms, dtype=np.int64) - lo))

    return run


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
        s, lo, base, mirror, _, *kept = shards[0]
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
        model = model.setName(f"sparklda {mode.name} model shards (initial)")
        self.checkpointer.update(model)
        sums = model.map(lambda e: e[2].sum(axis=0)).collect()
        self.checkpointer.materialized()
        for held in (array, pass_sums):
            if isinstance(held, ShardedTopics):
                held.unpersist()  # the first generation is computed and persisted
        self.model = model
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

    # -- the model after (and between) the rounds: docs/architecture.md ---------
    def topics(self, rows: Callable | None = None) -> ShardedTopics:
        """The shards' statistics as :class:`ShardedTopics` (lazy), each shard's rows
        ``rows(first term, rows)`` when given (e.g. the mode's N^Φ of its base)."""
        assert self.model is not None
        base = ShardedTopics(
            self.model.map(lambda e: (e[0], e[1], e[2]), preservesPartitioning=True),
            int(self.bounds[-1]),
            self.k,
            self.bounds,
        )
        return base if rows is None else base.map_rows(rows)

    def pass_sums(self) -> ShardedTopics:
        """A learned η's pass sums held beside the rows (lazy)."""
        assert self.model is not None
        return pass_sums_of(self.model, self.bounds, self.k)

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
        pieces = sorted(self.model.map(lambda e: (e[0], e[2])).collect(), key=lambda e: e[0])
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
        positions = {p: i for i, p in enumerate(parts)}
        n, k, bounds = self.n_shards, self.k, self.bounds
        served = (
            self.requests.glom()
            .zip(self.model.glom())
            .flatMap(serve_rows(positions, mode.fetch_rows(t)))
            .partitionBy(len(parts), _identity)
        )
        blocks = pruned(self.corpus.train, parts)
        merged = (
            blocks.glom()
            .zip(served.glom())
            .mapPartitions(task_partition(kernel, small))
            .mapPartitionsWithIndex(shard_pieces(bounds))
            .partitionBy(n, _shard_partition)
            .mapPartitions(merge_pieces)
        )
        new = (
            self.model.glom()
            .zip(merged.glom())
            .map(update_shard(update, k, mode.pass_sums_step(t)))
            .setName(f"sparklda {mode.name} model shards (round {t + 1})")
        )
        t1 = time.perf_counter()
        marked = self.checkpointer.update(new)
        summaries = new.map(lambda e: (e[0], e[4])).collect()
        self.checkpointer.materialized()
        self.model = new
        t2 = time.perf_counter()
        shards = [st for _, st in sorted(summaries, key=lambda e: e[0])]
        stats = concat_shards(shards)
        cut = bool(marked and self.checkpointer.last_cut)
        self.since_cut = 0 if cut else self.since_cut + 1
        # generations since the last checkpoint (toDebugString's tree of a generation
        # reading the one before twice doubles with each round)
        self._info = {"checkpointed": cut, "lineage_rounds": self.since_cut}
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
        if self.requests is not None:
            self.requests.unpersist()
            self.requests = None
        super().close()
        self.model = None


def _summary_bytes(st: TopicStats) -> int:
    return sum(int(v.nbytes) for v in st.extra.values() if isinstance(v, np.ndarray))
