"""The classic backend: a session with a ``SparkContext``. Rounds run as ``runJob`` on
the round's partitions of the cached training blocks (RDDs), the round value in a
broadcast variable; a stateful mode keeps its blocks' states in a persisted RDD of
their own (a round reads them zipped with the cached blocks and writes only new states)
whose lineage a :class:`~sparklda.execution.checkpointer.PeriodicCheckpointer` cuts. See
docs/architecture.md, "The round"."""

from __future__ import annotations

import functools
import io
import logging
import time
from collections.abc import Callable, Iterable, Iterator

import numpy as np
from pyspark.sql import SparkSession

from .. import SESSION_PROPERTIES
from ..block import block_digest
from ..corpus import RddLayout, from_vectors, heldout_blocks, pruned, split_documents, validate
from ..errors import CorpusError, executor_errors
from ..stats import merge_shard, shard_bounds, split_shards
from .base import Backend, Executor, RoundOutput, value_nbytes
from .checkpointer import PeriodicCheckpointer
from .scoring import HeldoutScore, LeftToRight, alpha_arg, check_phi, score_partition
from .tasks import (
    ByPartition,
    advance_partition,
    check_restored_state,
    init_partition,
    sent_statistics,
    stateless_partition,
    statistics_partition,
    with_blocks,
    without_blocks,
)

__all__ = [
    "COMBINE_AUTO_TASKS",
    "ClassicBackend",
    "ClassicExecutor",
    "combine_on_executors",
    "direct_result_hint",
    "merge_pieces",
    "shard_pieces",
    "size_bytes",
]

log = logging.getLogger("sparklda.execution")


#: ``combine = "auto"`` merges on the executors when a round has more tasks than this.
COMBINE_AUTO_TASKS = 8


def combine_on_executors(combine: str, n_tasks: int) -> bool:
    """Whether a round of ``n_tasks`` tasks merges on the executors under ``combine``
    ("executors", "driver" or "auto": executors above :data:`COMBINE_AUTO_TASKS`)."""
    if combine == "auto":
        return n_tasks > COMBINE_AUTO_TASKS
    return combine == "executors"


def shard_pieces(bounds: np.ndarray) -> Callable[[int, Iterable], Iterator]:
    """Map side: each partial of partition ``index`` cut by term shard, keyed
    ``(shard, (index, j, piece))`` (``j``: the partial's place in its partition)."""

    def run(index, parts):
        for j, part in enumerate(parts):
            for s, piece in split_shards(part, bounds):
                yield s, (index, j, piece)

    return run


def merge_pieces(items: Iterable) -> Iterator:
    """Reduce side: the pieces of each shard summed in (partition, place) order, so the
    result does not depend on the order the shuffle delivered them in."""
    by_shard: dict[int, list] = {}
    for s, (index, j, piece) in items:
        by_shard.setdefault(s, []).append(((index, j), piece))
    for s in sorted(by_shard):
        ordered = sorted(by_shard[s], key=lambda item: item[0])
        yield s, merge_shard([piece for _, piece in ordered])


def _shard_partition(s: int) -> int:
    return s


#: Task results above ``spark.task.maxDirectResultSize`` reach the driver through the
#: block manager (a fetch after the task; the first one of a process opens a connection),
#: which at Spark's default of 1 MiB is every round's (docs/architecture.md, "Startup").
DIRECT_RESULT_HINT = 8 << 20


def size_bytes(text: str) -> int:
    """Bytes of a Spark size property (``"64m"``, ``"1g"``, ``"1048576"``; unit-less is
    bytes, as Spark reads ``spark.task.maxDirectResultSize``)."""
    units = {"": 0, "b": 0, "k": 10, "m": 20, "g": 30, "t": 40, "p": 50}
    units.update({f"{u}b": shift for u, shift in units.items() if u not in ("", "b")})
    s = text.strip().lower()
    digits = s.rstrip("kmgtpb")
    unit = s[len(digits) :]
    if not digits.isdigit() or unit not in units:
        raise ValueError(f"not a Spark size: {text!r}")
    return int(digits) << units[unit]


def direct_result_hint(value: str | None) -> str | None:
    """The advice to log when a session's ``spark.task.maxDirectResultSize`` (None:
    unset, Spark's 1m) makes round results take the block manager; None when it does not
    (or when it is no size this function reads: Spark checks the property itself)."""
    try:
        if size_bytes(value or "1m") >= DIRECT_RESULT_HINT:
            return None
    except ValueError:
        return None
    return (
        f"spark.task.maxDirectResultSize is {value or '1m (the default)'}: round results "
        "of more than that go through the block manager, which costs each round a fetch "
        "and the first round of a process a connection; build the session with "
        f"sparklda.SESSION_PROPERTIES ({SESSION_PROPERTIES['spark.task.maxDirectResultSize']})"
    )


class ClassicExecutor(Executor):
    """Rounds as ``SparkContext.runJob`` on the round's partitions of the cached
    training blocks, with the round value in a broadcast variable."""

    def __init__(self, corpus, checkpoint_interval: int = 0, combine: str = "auto"):
        self.corpus = corpus
        self.sc = corpus.train.context
        # the context's own conf: one call to the JVM (getConf() copies every property
        # through py4j, about 50 ms)
        hint = direct_result_hint(self.sc._conf.get("spark.task.maxDirectResultSize"))
        if hint:
            log.info(hint)
        self.checkpoint_interval = int(checkpoint_interval)
        self.combine = combine
        self._n_parts: int | None = None
        self.checkpointer: PeriodicCheckpointer | None = None
        # stateful modes: RDD of (state, kernel seconds[, statistics]), one item a
        # partition, beside the cached blocks (:meth:`_paired`)
        self.states = None
        self._info: dict = {}

    @property
    def n_parts(self) -> int:
        """The training blocks' partitions, which every generation of states has (asked
        of the JVM once)."""
        if self._n_parts is None:
            self._n_parts = int(self.corpus.train.getNumPartitions())
        return self._n_parts

    def _paired(self, states):
        """``(block, (state, …))`` pairs: the cached training blocks zipped in the JVM
        with a generation of ``states`` (one item a partition on both sides), read by one
        Python pass. A round writes back only the new states, never the blocks
        (docs/architecture.md, "The round"). PySpark's own ``RDD.zip`` would first
        re-batch each side in a Python pass of its own."""
        from pyspark.rdd import RDD
        from pyspark.serializers import PairDeserializer

        train = self.corpus.train
        return RDD(
            train._jrdd.zip(states._jrdd),
            self.sc,
            PairDeserializer(train._jrdd_deserializer, states._jrdd_deserializer),
        )

    def _collect(self, rdd, fn, partitions=None) -> list:
        parts = self.sc.runJob(rdd, fn, partitions)
        return [p for p in parts if p is not None]

    def _gather(self, rdd, fn, partitions: list[int] | None = None) -> RoundOutput:
        """Run ``fn`` (a per-partition function yielding partial statistics) on
        ``partitions`` of ``rdd`` (None: all) and bring the statistics back: the
        partials themselves (merged on the driver), or merged on the executors by
        term shard, one shuffle, the driver receiving one copy of the merged rows."""
        n_tasks = rdd.getNumPartitions() if partitions is None else len(partitions)
        if not combine_on_executors(self.combine, n_tasks):
            parts = self._collect(rdd, fn, partitions)
            return RoundOutput(parts, driver_bytes=sum(p.nbytes for p in parts), tasks=len(parts))
        n_shards = max(1, min(n_tasks, self.sc.defaultParallelism))
        bounds = shard_bounds(self.corpus.vocab_size, n_shards)
        n_shards = len(bounds) - 1
        merged_shards = (
            pruned(rdd, partitions)
            .mapPartitions(fn)
            .mapPartitionsWithIndex(shard_pieces(bounds))
            .partitionBy(n_shards, _shard_partition)
            .mapPartitions(merge_pieces)
            .collect()
        )
        shards = [st for _, st in sorted(merged_shards, key=lambda item: item[0])]
        # the per-task timings travel on shard 0's piece of each partial
        tasks = len(shards[0].timings.get("kernel", [])) if shards else 0
        return RoundOutput(
            [],
            driver_bytes=sum(st.nbytes for st in shards),
            shards=shards,
            tasks=tasks,
            combine="executors",
        )

    def _sink(self):
        """An accumulator for the statistics of a new generation of states when the
        driver merges them (:func:`sent_statistics`), else None."""
        if combine_on_executors(self.combine, self.n_parts):
            return None
        return self.sc.accumulator({}, ByPartition())

    def _compute_states(self, states, statistics: Callable, sink, again: Callable) -> RoundOutput:
        """Compute the new (persisted) generation ``states`` and bring its statistics
        back. With a ``sink``, one job and one Python pass a task: a count of the JVM's
        partitions, whose Python tasks send their statistics through the sink. Without
        one, the states carry them (:func:`advance_partition`) and a job of
        :func:`statistics_partition` on the states, a second Python pass a task, brings
        them. As a safeguard, if some partition's did not arrive through the sink, they
        are counted again by a job on ``again()``: the generation computed anew, not
        persisted, its items carrying their statistics (the kept states need not hold
        them: MAP keeps N^Θ only)."""
        if sink is not None:
            states._jrdd.count()
            parts = sent_statistics(sink.value, self.n_parts)
            sink.value = {}  # a later copy of this generation computed again adds to it
            if parts is not None:
                nbytes = sum(p.nbytes for p in parts)
                return RoundOutput(parts, driver_bytes=nbytes, tasks=len(parts))
            log.warning("some partitions sent no statistics: computing the block states again")
            return self._gather(again(), statistics_partition(statistics))
        return self._gather(self._paired(states), with_blocks(statistics_partition(statistics)))

    def init_states(self, mode) -> RoundOutput:
        self.checkpointer = PeriodicCheckpointer(
            self.sc, self.checkpoint_interval, f"the {mode.name} block states"
        )
        t0 = time.perf_counter()
        value = mode.init_value()
        bc = self.sc.broadcast(value) if value is not None else None
        t1 = time.perf_counter()
        init, statistics, keep = mode.init_state(), mode.statistics(), mode.kept_state()
        sink = self._sink()
        states = self.corpus.train.mapPartitions(
            without_blocks(init_partition(bc, init, statistics, sink, keep)),
            preservesPartitioning=True,
        ).setName(f"sparklda {mode.name} block states (initial)")
        self.checkpointer.update(states)
        self.states = states

        def again():
            return self.corpus.train.mapPartitions(init_partition(bc, init, statistics))

        out = self._compute_states(states, statistics, sink, again)
        self.checkpointer.materialized()
        t2 = time.perf_counter()
        if bc is not None:
            self.checkpointer.hold(bc)
        out.timings = {"ship_s": t1 - t0, "job_s": t2 - t1, "release_s": 0.0}
        out.shipped_bytes = value_nbytes(value)
        return out

    def run_round(self, mode, t: int) -> RoundOutput:
        t0 = time.perf_counter()
        value = mode.round_value(t)
        bc = self.sc.broadcast(value)
        t1 = time.perf_counter()
        if mode.stateful:
            kernel, statistics, keep = mode.kernel(t), mode.statistics(), mode.kept_state()
            sink = self._sink()
            prev = self._paired(self.states)
            new = prev.mapPartitions(
                # the statistics of the new states, counted in the sweep's own pass
                without_blocks(with_blocks(advance_partition(bc, kernel, statistics, sink, keep))),
                preservesPartitioning=True,
            ).setName(f"sparklda {mode.name} block states (round {t + 1})")

            def again():
                return prev.mapPartitions(with_blocks(advance_partition(bc, kernel, statistics)))

            assert self.checkpointer is not None
            marked = self.checkpointer.update(new)
            self.states = new
            out = self._compute_states(new, statistics, sink, again)
            self.checkpointer.materialized()
            t2 = time.perf_counter()
            self.checkpointer.hold(bc)  # its lineage refers to bc until a checkpoint cuts it
            self._info = {
                "checkpointed": bool(marked and self.checkpointer.last_cut),
                "lineage_depth": self.checkpointer.lineage_depth(),
            }
        else:
            out = self._gather(
                self.corpus.train, stateless_partition(bc, mode.kernel(t)), mode.round_partitions(t)
            )
            t2 = time.perf_counter()
            bc.destroy()
            self._info = {}
        t3 = time.perf_counter()
        out.timings = {"ship_s": t1 - t0, "job_s": t2 - t1, "release_s": t3 - t2}
        out.shipped_bytes = value_nbytes(value)
        return out

    #: A generation of block states holds ``(state, …)`` items that rounds zip with the
    #: cached blocks (:meth:`_paired`); True: ``(block, state, …)`` items (the stateful
    #: rounds with the model on the executors).
    states_hold_blocks = False

    def _saved_states(self):
        """The current generation as ``(block, state)`` pairs, what a checkpoint saves."""
        return self._paired(self.states).map(lambda pair: (pair[0], pair[1][0]))

    def save_states(self, path: str) -> None:
        def encode(index, pairs):
            for block, state in pairs:
                buf = io.BytesIO()
                np.save(buf, np.ascontiguousarray(state), allow_pickle=False)
                yield index, int(block.n_docs), bytearray(buf.getvalue())

        spark = SparkSession.builder.getOrCreate()
        rows = self._saved_states().mapPartitionsWithIndex(encode)
        (
            spark.createDataFrame(rows, "part int, docs int, state binary")
            .write.mode("errorifexists")
            .parquet(path)
        )

    def load_states(self, mode, path: str) -> None:
        self.checkpointer = PeriodicCheckpointer(
            self.sc, self.checkpoint_interval, f"the {mode.name} block states"
        )
        spark = SparkSession.builder.getOrCreate()
        n = self.corpus.train.getNumPartitions()

        def decode(row):
            return np.load(io.BytesIO(bytes(row[1])), allow_pickle=False)

        saved = (
            spark.read.parquet(path)
            .select("part", "state")
            .rdd.map(lambda r: (int(r[0]), r))
            .partitionBy(n, lambda part: part)
            .values()
            .map(decode)
        )

        rows = mode.state_rows()
        drop = 0 if self.states_hold_blocks else 1  # (state, 0.0): the blocks stay apart
        states = (
            self.corpus.train.zip(saved)
            .map(lambda pair: check_restored_state(*pair, rows)[drop:], preservesPartitioning=True)
            .setName(f"sparklda {mode.name} block states (restored)")
        )
        self.checkpointer.update(states)
        self.states = states
        self._collect(states, lambda it: [sum(1 for _ in it)])  # materialise it once
        self.checkpointer.materialized()

    def score(self, phi, alpha, max_iter, ltr: LeftToRight | None = None):
        if self.corpus.heldout is None:
            return None
        return heldout_score(self.corpus.heldout, phi, alpha, max_iter, ltr=ltr)

    def round_info(self) -> dict:
        return dict(self._info)

    def report(self) -> dict:
        return self.checkpointer.report() if self.checkpointer is not None else {}

    def close(self) -> None:
        if self.checkpointer is not None:
            self.checkpointer.close()
        self.states = None


def heldout_score(
    heldout_rdd,
    phi: np.ndarray,
    alpha,
    max_iter: int = 100,
    tol: float = 1e-4,
    ltr: LeftToRight | None = None,
) -> HeldoutScore:
    """Document completion (or, with ``ltr``, the left-to-right estimate) of an RDD of
    :class:`~sparklda.block.HeldoutBlock` s, φ̂ in a broadcast variable; φ̂ held on the
    executors (a :class:`~sparklda.execution.topics.ShardedTopics`, which has ``score``)
    serves each partition the rows of its terms instead."""
    if not isinstance(phi, np.ndarray) and hasattr(phi, "score"):
        return phi.score(heldout_rdd, alpha, max_iter, tol, ltr)
    phi = check_phi(phi)
    sc = heldout_rdd.context
    bc = sc.broadcast(np.ascontiguousarray(phi))
    try:
        parts = heldout_rdd.mapPartitions(
            score_partition(bc, alpha_arg(alpha), max_iter, tol, ltr)
        ).collect()
    finally:
        bc.destroy()
    return HeldoutScore.from_parts(parts)


class ClassicBackend(Backend):
    """A session with a ``SparkContext``: RDDs, broadcast variables, ``runJob``."""

    name = "classic"

    def __init__(self, local_layout: int | None = None):
        self.local_layout = local_layout

    def corpus_layout(self) -> RddLayout:
        return RddLayout(self.local_layout)

    def executor(self, corpus, checkpoint_interval: int = 0, combine: str = "auto"):
        return ClassicExecutor(corpus, checkpoint_interval, combine=combine)

    def score_heldout(self, heldout, phi, alpha, max_iter=100, tol=1e-4, ltr=None) -> HeldoutScore:
        return heldout_score(heldout, phi, alpha, max_iter, tol, ltr)

    def score_vectors(self, df, features_col, phi, alpha, seed, max_iter, ltr=None) -> HeldoutScore:
        source = from_vectors(df, features_col)
        if source.vocab_size != phi.shape[0]:
            raise CorpusError(
                f"Vectors in column {features_col!r} have size {source.vocab_size} but the "
                f"model's vocabulary has {phi.shape[0]} terms."
            )
        docs, _ = split_documents(source, validate(source))
        blocks = heldout_blocks(docs, seed, np.float64)
        try:
            with executor_errors(source.what):
                return heldout_score(blocks, phi, alpha, max_iter, ltr=ltr)
        finally:
            blocks.unpersist()

    def block_digests(self, blocks, heldout: bool) -> list[str]:
        return blocks.mapPartitions(functools.partial(_digests, heldout=heldout)).collect()

    def share(self, spark, value):
        bc = spark.sparkContext.broadcast(value)
        return (lambda: bc.value), bc.unpersist


def _digests(blocks: Iterable, heldout: bool) -> Iterator[str]:
    for b in blocks:
        yield block_digest(b.observed) + block_digest(b.target) if heldout else block_digest(b)
