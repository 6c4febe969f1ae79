"""The execution seam: how a round's work reaches the executors and comes back.

The round skeleton (:mod:`sparklda.training`) talks to an :class:`Executor`
only; the executor owns the per-partition functions (they call the mode's
kernel on each block, time it, count its tokens and documents) and hands back
the round's *unmerged* partial statistics, one :class:`TopicStats` per
non-empty block, in partition order. :class:`ClassicExecutor` is the
implementation for a session with a ``SparkContext`` (RDDs, ``runJob`` on the
round's partitions, broadcast variables); a DataFrame-only implementation
plugs in here for Spark Connect. See docs/architecture.md, "The round".

Stateful modes (CVB0, CVB) keep a state per block between rounds; the
executor keeps it beside the cached block in a persisted RDD and cuts its
lineage with a :class:`PeriodicCheckpointer`.
"""

from __future__ import annotations

import io
import logging
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from pyspark.sql import SparkSession

from . import SESSION_PROPERTIES
from .corpus import pruned
from .evaluation import HeldoutScore, completion_loglik
from .kernels.warm import settle_heap, warm
from .stats import TopicStats, concat_shards, merge_shard, shard_bounds, split_shards

log = logging.getLogger("sparklda.execution")


def warm_worker(names: tuple[str, ...], dtype: str) -> float:
    """In a Python worker (a task of the corpus-building job): this module and the
    modes imported, and the kernel groups ``names`` loaded for ``dtype``
    (:func:`sparklda.kernels.warm.warm`), so the first round's tasks find them ready;
    the seconds it took."""
    import sparklda.modes  # noqa: F401  (what the rounds' pickled kernels refer to)

    seconds = warm(names, dtype)
    settle_heap()
    return seconds


@dataclass
class RoundOutput:
    """What one round's distributed work returns to the driver."""

    #: unmerged partial statistics, one per non-empty block, in partition order (empty
    #: when the executors combined them: see ``merged``)
    parts: list
    #: seconds: ``ship_s`` (round value to the tasks), ``job_s`` (the Spark job(s)),
    #: ``release_s`` (freeing the round value)
    timings: dict = field(default_factory=dict)
    #: bytes of the round value shipped to the tasks
    shipped_bytes: int = 0
    #: bytes of partial statistics that reached the driver
    driver_bytes: int = 0
    #: the round's statistics already merged on the executors, as merged term shards in
    #: shard order (None: merge ``parts``); stacking them is the driver's merge
    shards: list | None = None
    #: the number of non-empty blocks (tasks' partials) the statistics come from
    tasks: int = 0
    #: where the partials were merged: "executors" or "driver"
    combine: str = "driver"

    def merged_stats(self, k: int) -> TopicStats:
        """The round's merged statistics (empty with ``k`` columns when no block had any)."""
        if self.shards:
            return concat_shards(self.shards)
        if self.parts:
            return TopicStats.merge_all(self.parts)
        return TopicStats(np.zeros(0, np.int32), np.zeros((0, k)))


def value_nbytes(value: Any) -> int:
    """Bytes of the arrays in a round value (a tuple of arrays and numbers, or one array)."""
    if isinstance(value, np.ndarray):
        return int(value.nbytes)
    if isinstance(value, (tuple, list)):
        return sum(value_nbytes(v) for v in value)
    return 0


def _block_stats(block, rows, kernel_s: float, **timings) -> TopicStats:
    return TopicStats(
        block.terms,
        rows,
        extra={"tokens": block.n_tokens, "docs": block.n_docs, "pairs": block.nnz},
        timings={"kernel": kernel_s, **timings},
    )


# --------------------------------------------------------------------------
# Per-partition functions (the skeleton's own; built from plain values)


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


def advance_partition(source: Any, kernel: Callable) -> Callable[[Iterable], Iterator]:
    """(block, new state, seconds) for each (block, state, _), ``kernel(value, block, state)``."""

    def run(items):
        settle_heap()
        value = source.value
        for block, state, _ in items:
            t0 = time.perf_counter()
            new_state = kernel(value, block, state)
            yield block, new_state, time.perf_counter() - t0

    return run


def statistics_partition(statistics: Callable) -> Callable[[Iterable], Iterator]:
    """The partial statistics of each non-empty (block, state, kernel seconds)."""

    def run(items):
        settle_heap()
        for block, state, kernel_s in items:
            if block.n_docs == 0:
                continue
            t0 = time.perf_counter()
            rows = statistics(block, state)
            yield _block_stats(block, rows, kernel_s, stats=time.perf_counter() - t0)

    return run


def check_restored_state(block, state) -> tuple:
    """``(block, state, 0.0)`` for a block state read from a checkpoint, which must have
    a row per (document, term) pair of its block."""
    if state.shape[0] != block.nnz:
        raise ValueError(
            f"a checkpointed block state has {state.shape[0]} rows; its "
            f"block has {block.nnz} (document, term) pairs"
        )
    return block, state, 0.0


# --------------------------------------------------------------------------
# Combining on the executors (docs/architecture.md, "Combining a round's statistics")

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


# --------------------------------------------------------------------------
# Lineage


class PeriodicCheckpointer:
    """Persist each new generation of a stateful RDD and checkpoint every
    ``interval``-th one, in the manner of MLlib's ``PeriodicRDDCheckpointer``.

    Once a checkpoint has cut the lineage, the previous checkpoint's files are
    deleted and the broadcast variables the older generations referred to
    (:meth:`hold`) are destroyed; until then they are only unpersisted, so a
    lost partition can still be recomputed. Where checkpoints go: the
    context's checkpoint directory; in local mode without one, a temporary
    directory (removed by :meth:`close`); on a cluster without one,
    ``localCheckpoint()`` with a warning (executor storage only).
    """

    def __init__(self, sc, interval: int, name: str = "state"):
        self.sc = sc
        self.interval = int(interval)
        self.name = name
        self.generation = -1  # the initial states are generation 0, round t's are t + 1
        self.checkpoints = 0
        self.current = None  # the newest persisted generation
        self.checkpointed = None  # the newest checkpointed generation (files to delete later)
        self.held: list = []  # broadcasts the uncut lineage still refers to
        self.created_root: str | None = None
        self.kind, self.directory = self._policy()
        self.last_cut = False
        self.previous = None

    def _policy(self) -> tuple[str, str | None]:
        if not self.interval:
            return "none", None
        directory = self.sc.getCheckpointDir()
        if directory:
            return "reliable", directory
        if self.sc.master.startswith("local"):
            self.created_root = tempfile.mkdtemp(prefix="sparklda-checkpoints-")
            self.sc.setCheckpointDir(self.created_root)
            directory = self.sc.getCheckpointDir()
            log.info(
                "no Spark checkpoint directory was set: %s is checkpointed every %d rounds "
                "to %s (set one with spark.sparkContext.setCheckpointDir)",
                self.name,
                self.interval,
                directory,
            )
            return "reliable", directory
        log.warning(
            "no Spark checkpoint directory is set on this cluster: the lineage of %s is "
            "cut with localCheckpoint() (kept on the executors only, lost with them); "
            "set a reliable one with spark.sparkContext.setCheckpointDir('hdfs://...')",
            self.name,
        )
        return "local", None

    def update(self, rdd) -> bool:
        """Persist the new generation ``rdd`` and mark it for checkpointing when its
        turn has come (before any job computes it). Returns whether it was marked."""
        from pyspark import StorageLevel

        rdd.persist(StorageLevel.MEMORY_AND_DISK)
        self.generation += 1
        mark = bool(self.interval) and self.generation > 0 and self.generation % self.interval == 0
        if mark:
            if self.kind == "reliable":
                rdd.checkpoint()
            else:
                rdd.localCheckpoint()
        self.previous, self.current = self.current, rdd
        return mark

    def hold(self, broadcast) -> None:
        """A broadcast the current generation's lineage refers to."""
        broadcast.unpersist()
        self.held.append(broadcast)

    def materialized(self) -> None:
        """Call once the current generation has been computed: unpersist the
        previous one and, if a checkpoint now cuts the lineage, free what only
        the old lineage needed."""
        if self.previous is not None:
            self.previous.unpersist()
            self.previous = None
        rdd = self.current
        self.last_cut = bool(rdd is not None and rdd.isCheckpointed())
        if self.last_cut and rdd is not self.checkpointed:
            self.checkpoints += 1
            self._delete_files(self.checkpointed)
            self.checkpointed = rdd
            # every broadcast held so far belongs to the cut lineage (the one of the round
            # that produced this generation is held after this call)
            for bc in self.held:
                bc.destroy()
            self.held = []

    def lineage_depth(self) -> int:
        debug = self.current.toDebugString() if self.current is not None else b""
        return len((debug or b"").decode("utf-8", "replace").splitlines())

    def _delete_files(self, rdd) -> None:
        path = rdd.getCheckpointFile() if rdd is not None else None
        if not path:
            return
        try:
            jvm_path = self.sc._jvm.org.apache.hadoop.fs.Path(path)
            jvm_path.getFileSystem(self.sc._jsc.hadoopConfiguration()).delete(jvm_path, True)
        except Exception as e:  # pragma: no cover - best effort clean-up
            log.warning("could not delete checkpoint files %s: %s", path, e)

    def close(self) -> None:
        """Unpersist everything, destroy held broadcasts, delete checkpoint files."""
        for bc in self.held:
            bc.destroy()
        self.held = []
        for rdd in (self.previous, self.current):
            if rdd is not None:
                rdd.unpersist()
        self.current = self.previous = None
        self._delete_files(self.checkpointed)
        self.checkpointed = None
        root = self.created_root
        if root and not any(files for _, _, files in os.walk(root)):
            # nothing left in the temporary directory: remove it (the context keeps it as its
            # checkpoint directory; Spark recreates the folders if it writes there again)
            shutil.rmtree(root, ignore_errors=True)

    def report(self) -> dict:
        return {
            "checkpoints": self.checkpoints,
            "checkpoint_kind": self.kind,
            "checkpoint_dir": self.directory,
            "checkpoint_interval": self.interval,
        }


# --------------------------------------------------------------------------
# Executors


class Executor:
    """The interface the round skeleton runs rounds through."""

    def init_states(self, mode) -> RoundOutput:
        """Stateful modes: build every block's initial state; return its statistics."""
        raise NotImplementedError

    def run_round(self, mode, t: int) -> RoundOutput:
        """Run round ``t`` of ``mode`` on the round's partitions."""
        raise NotImplementedError

    def score(self, phi: np.ndarray, alpha: float, max_iter: int) -> HeldoutScore | None:
        """Held-out completion score of topics ``phi`` (None without held-out documents)."""
        raise NotImplementedError

    def round_info(self) -> dict:
        """Executor facts for the latest round's record (for example checkpoints)."""
        return {}

    def save_states(self, path: str) -> None:
        """Stateful modes: write every block's state to ``path`` (any Spark file system)."""
        raise NotImplementedError

    def load_states(self, mode, path: str) -> None:
        """Stateful modes: take the block states written by :meth:`save_states` (instead
        of :meth:`init_states`)."""
        raise NotImplementedError

    def report(self) -> dict:
        return {}

    def close(self) -> None:
        """Release cached state (called once training ends, also after a failure)."""


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
        self.checkpointer: PeriodicCheckpointer | None = None
        self.states = None  # stateful modes: RDD of (block, state, kernel seconds)
        self._info: dict = {}

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

    def init_states(self, mode) -> RoundOutput:
        self.checkpointer = PeriodicCheckpointer(
            self.sc, self.checkpoint_interval, f"the {mode.name} block states"
        )
        t0 = time.perf_counter()
        value = mode.init_value()
        bc = self.sc.broadcast(value) if value is not None else None
        t1 = time.perf_counter()
        states = self.corpus.train.mapPartitions(
            init_partition(bc, mode.init_state()), preservesPartitioning=True
        ).setName(f"sparklda {mode.name} block states (initial)")
        self.checkpointer.update(states)
        self.states = states
        out = self._gather(states, statistics_partition(mode.statistics()))
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
            new = self.states.mapPartitions(
                advance_partition(bc, mode.kernel(t)), preservesPartitioning=True
            ).setName(f"sparklda {mode.name} block states (round {t + 1})")
            assert self.checkpointer is not None
            marked = self.checkpointer.update(new)
            self.states = new
            out = self._gather(new, statistics_partition(mode.statistics()))
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

    def save_states(self, path: str) -> None:
        def encode(index, items):
            for block, state, _ in items:
                buf = io.BytesIO()
                np.save(buf, np.ascontiguousarray(state), allow_pickle=False)
                yield index, int(block.n_docs), bytearray(buf.getvalue())

        spark = SparkSession.builder.getOrCreate()
        rows = self.states.mapPartitionsWithIndex(encode)
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

        states = (
            self.corpus.train.zip(saved)
            .map(lambda pair: check_restored_state(*pair), preservesPartitioning=True)
            .setName(f"sparklda {mode.name} block states (restored)")
        )
        self.checkpointer.update(states)
        self.states = states
        self._collect(states, lambda it: [sum(1 for _ in it)])  # materialise it once
        self.checkpointer.materialized()

    def score(self, phi, alpha, max_iter):
        if self.corpus.heldout is None:
            return None
        return completion_loglik(self.corpus.heldout, phi, alpha, max_iter)

    def round_info(self) -> dict:
        return dict(self._info)

    def report(self) -> dict:
        return self.checkpointer.report() if self.checkpointer is not None else {}

    def close(self) -> None:
        if self.checkpointer is not None:
            self.checkpointer.close()
        self.states = None
