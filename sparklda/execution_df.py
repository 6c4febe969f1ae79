"""The DataFrame-only executor: rounds without RDDs, broadcasts or a JVM gateway.

Spark Connect (Databricks serverless and standard access mode) has no
``SparkContext``. :class:`DataFrameExecutor` runs the same rounds as
:class:`~sparklda.execution.ClassicExecutor` on a corpus built by
:func:`sparklda.corpus.build_corpus_frame` (cached DataFrames of serialized
blocks), with ``mapInArrow`` over the round's blocks. The per-block work is
the per-partition functions of :mod:`sparklda.execution`; the partials come
back as Arrow rows and become the same :class:`~sparklda.stats.TopicStats`,
in partition order, so the skeleton's merge and update are shared.

The round value travels in the ``mapInArrow`` function's closure (inside the
plan sent to the server) while it is at most :attr:`DataFrameExecutor.closure_limit`
bytes; a larger one is pickled into a small DataFrame of chunks that is
broadcast-joined to the round's blocks. See docs/architecture.md, "Spark
Connect path".
"""

from __future__ import annotations

import logging
import pickle
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import numpy as np

from .block import HeldoutBlock, arrays_from_bytes, arrays_to_bytes, block_from_bytes
from .corpus import exact_partition_column
from .evaluation import HeldoutScore, _alpha_arg, _score_partition
from .execution import (
    Executor,
    RoundOutput,
    advance_partition,
    check_restored_state,
    init_partition,
    stateless_partition,
    statistics_partition,
    value_nbytes,
)
from .kernels.warm import settle_heap
from .stats import TopicStats
from .storage import checkpoint_frame, release_frame

log = logging.getLogger("sparklda.execution_df")

#: Rows of a round's partial statistics (one per non-empty block).
STATS_COLUMNS = "part int, terms binary, rows binary, tokens double, docs long, pairs long"
STATS_SCHEMA = STATS_COLUMNS + ", kernel_s double, stats_s double"
#: Rows of the block states of a stateful mode (with the statistics of the state).
STATES_SCHEMA = "block binary, state binary, " + STATS_SCHEMA
#: Bytes of one row of a round value sent by the broadcast-join route.
CHUNK_BYTES = 32 << 20
#: Round values up to this many bytes travel in the closure (docs/architecture.md,
#: "Spark Connect path": the plan holding the closure must stay below Spark Connect's
#: gRPC message limit, 128 MiB by default).
CLOSURE_LIMIT = 32 << 20


class Held:
    """A round value in the task's closure (what a broadcast variable is to the classic
    executor: any holder of ``.value``)."""

    def __init__(self, value: Any):
        self.value = value


def struct_type(schema: str):
    """The ``StructType`` of a DDL string of ``name type`` pairs (int, long, double,
    binary). ``mapInArrow`` given a string asks the server to parse it: one more round
    trip a round under Spark Connect."""
    from pyspark.sql import types as T

    kinds = {
        "int": T.IntegerType(),
        "long": T.LongType(),
        "double": T.DoubleType(),
        "binary": T.BinaryType(),
    }
    fields = [c.strip().split(" ") for c in schema.split(",")]
    return T.StructType([T.StructField(name, kinds[kind], True) for name, kind in fields])


def _read_rows(batches: Iterable, held: Held | None) -> tuple[list[dict], Held]:
    """The distinct rows (by their ``part`` column) of a partition, and the round value:
    ``held``, or the chunks of the broadcast-joined value columns (``_chunk``, ``_data``;
    every row of the partition carries one chunk, the same ones for every block)."""
    settle_heap()
    rows: list[dict] = []
    seen: set[int] = set()
    chunks: dict[int, bytes] = {}
    for batch in batches:
        if not batch.num_rows:
            continue
        cols = batch.to_pydict()
        n = batch.num_rows
        for j in range(n):
            if held is None:
                chunks.setdefault(cols["_chunk"][j], cols["_data"][j])
            part = cols["part"][j]
            if part in seen:
                continue
            seen.add(part)
            rows.append({k: v[j] for k, v in cols.items() if k not in ("_chunk", "_data")})
    if held is None:
        data = b"".join(chunks[i] for i in sorted(chunks)) if chunks else None
        held = Held(pickle.loads(data) if data is not None else None)
    return rows, held


def _stats_row(part: int, stats: TopicStats) -> dict:
    return {
        "part": part,
        "terms": arrays_to_bytes([stats.terms]),
        "rows": arrays_to_bytes([stats.rows]),
        "tokens": float(stats.extra["tokens"]),
        "docs": int(stats.extra["docs"]),
        "pairs": int(stats.extra["pairs"]),
        "kernel_s": float(stats.timings["kernel"]),
        "stats_s": float(stats.timings["stats"]) if "stats" in stats.timings else None,
    }


def _batch(rows: list[dict], schema: str):
    import pyarrow as pa

    names = [c.strip().split(" ")[0] for c in schema.split(",")]
    types = {"int": pa.int32(), "long": pa.int64(), "double": pa.float64(), "binary": pa.binary()}
    kinds = [c.strip().split(" ")[1] for c in schema.split(",")]
    return pa.RecordBatch.from_arrays(
        [pa.array([r.get(n) for r in rows], types[k]) for n, k in zip(names, kinds, strict=True)],
        names=names,
    )


def stats_from_row(row) -> TopicStats:
    """The :class:`TopicStats` of one row of :data:`STATS_SCHEMA` (as the classic
    executor's per-partition function builds it)."""
    (terms,) = arrays_from_bytes(row["terms"], 1)
    (rows,) = arrays_from_bytes(row["rows"], 1)
    timings = {"kernel": float(row["kernel_s"])}
    if row["stats_s"] is not None:
        timings["stats"] = float(row["stats_s"])
    extra = {"tokens": float(row["tokens"]), "docs": int(row["docs"]), "pairs": int(row["pairs"])}
    return TopicStats(terms, rows, extra=extra, timings=timings)


# --------------------------------------------------------------------------
# mapInArrow functions (built from plain values; the per-block work is execution's)


def stateless_round(held: Held | None, kernel: Callable) -> Callable[[Iterable], Iterator]:
    def run(batches):
        rows, source = _read_rows(batches, held)
        out = []
        for r in rows:
            block = block_from_bytes(r["block"])
            out.extend(
                _stats_row(r["part"], st) for st in stateless_partition(source, kernel)([block])
            )
        if out:
            yield _batch(out, STATS_SCHEMA)

    return run


def _states_batch(rows: list[dict], items: Iterable, statistics: Callable):
    """Arrow rows of :data:`STATES_SCHEMA`: each ``(block, state, seconds)`` of ``items``
    (one per row of ``rows``, whose ``part`` and block bytes it keeps) with the
    statistics of its state."""
    out = []
    for r, (block, state, seconds) in zip(rows, items, strict=True):
        (stats,) = statistics_partition(statistics)([(block, state, seconds)])
        row = _stats_row(r["part"], stats)
        row["block"] = r["block"]
        row["state"] = arrays_to_bytes([np.ascontiguousarray(state)])
        out.append(row)
    return _batch(out, STATES_SCHEMA) if out else None


def _state_round(held: Held | None, items: Callable, statistics: Callable):
    """mapInArrow over block rows: ``items(rows, source)`` gives each row's
    ``(block, state, seconds)``; the result is :data:`STATES_SCHEMA` rows."""

    def run(batches):
        rows, source = _read_rows(batches, held)
        batch = _states_batch(rows, items(rows, source), statistics)
        if batch is not None:
            yield batch

    return run


def init_round(held: Held | None, init_state: Callable, statistics: Callable):
    def items(rows, source):
        blocks = [block_from_bytes(r["block"]) for r in rows]
        return init_partition(source, init_state)(blocks)

    return _state_round(held, items, statistics)


def advance_round(held: Held | None, kernel: Callable, statistics: Callable):
    def items(rows, source):
        given = (
            (block_from_bytes(r["block"]), arrays_from_bytes(r["state"], 1)[0], r["kernel_s"])
            for r in rows
        )
        return advance_partition(source, kernel)(given)

    return _state_round(held, items, statistics)


def restore_round(statistics: Callable):
    """Blocks left-joined with saved states: each state checked against its block
    (:func:`~sparklda.execution.check_restored_state`)."""

    def items(rows, _):
        for r in rows:
            block = block_from_bytes(r["block"])
            if r["state"] is None:
                raise ValueError(f"the checkpoint has no block state for partition {r['part']}")
            yield check_restored_state(block, arrays_from_bytes(r["state"], 1)[0])

    return _state_round(Held(None), items, statistics)


def score_round(held: Held | None, alpha, max_iter: int, tol: float):
    import pyarrow as pa

    def run(batches):
        rows, source = _read_rows(batches, held)
        blocks = [
            HeldoutBlock(block_from_bytes(r["observed"]), block_from_bytes(r["target"]))
            for r in rows
        ]
        for total, tokens, docs in _score_partition(source, alpha, max_iter, tol)(blocks):
            yield pa.RecordBatch.from_pydict(
                {"total": [float(total)], "tokens": [float(tokens)], "docs": [int(docs)]}
            )

    return run


def collect_rows(frame) -> list[dict]:
    """The rows of ``frame`` as dicts, collected as Arrow (``toArrow``): a classic
    session's ``collect()`` pickles every row on the JVM, which costs more than the
    round's kernels when the rows carry megabytes of statistics (docs/architecture.md,
    "Spark Connect path")."""
    return frame.toArrow().to_pylist()


def _output(parts: list, value, t0: float, t1: float, t2: float) -> RoundOutput:
    """A round's output: value built and routed in [t0, t1], the job in [t1, t2] (the
    value needs no release: a closure or a joined DataFrame is dropped with the plan)."""
    return RoundOutput(
        parts,
        {"ship_s": t1 - t0, "job_s": t2 - t1, "release_s": 0.0},
        shipped_bytes=value_nbytes(value),
        driver_bytes=sum(p.nbytes for p in parts),
    )


# --------------------------------------------------------------------------


class DataFrameExecutor(Executor):
    """Rounds as ``mapInArrow`` over the round's cached blocks (a corpus of kind
    ``"dataframe"``); works in a classic session and under Spark Connect.

    ``closure_limit``: round values up to this many bytes (:func:`value_nbytes`)
    travel in the closure, larger ones by a broadcast-joined DataFrame.
    Stateful modes keep ``(block, state)`` rows in a DataFrame that every round
    replaces with ``localCheckpoint()`` (an uncut plan would carry every earlier
    round's closure, and so its round value, to the server each round), so the
    lineage is cut every round whatever ``checkpoint_interval`` says; it is kept
    for the interface and the report.
    """

    def __init__(self, corpus, checkpoint_interval: int = 0, closure_limit: int | None = None):
        if getattr(corpus, "kind", "rdd") != "dataframe":
            raise ValueError("DataFrameExecutor needs a corpus built by build_corpus_frame")
        self.corpus = corpus
        self.spark = corpus.train.sparkSession
        self.checkpoint_interval = int(checkpoint_interval)
        self.closure_limit = CLOSURE_LIMIT if closure_limit is None else int(closure_limit)
        self.states = None  # stateful modes: DataFrame of STATES_SCHEMA
        self.routes: dict[str, int] = {"closure": 0, "join": 0}
        self.checkpoints = 0
        self._info: dict = {}
        self._slices: dict[tuple, Any] = {}  # a round's partitions -> its blocks' frame
        self._blocks_frame = None

    def _blocks(self):
        """``part, block`` of the cached corpus, its schema asked for once: under Spark
        Connect every frame without a known schema costs a round trip to the server when
        ``mapInArrow`` reads its columns, and a filter keeps its parent's known schema."""
        if self._blocks_frame is None:
            frame = self.corpus.train.select("part", "block")
            frame.schema  # noqa: B018  (one analysis, kept by the frames filtered from it)
            self._blocks_frame = frame
        return self._blocks_frame

    # -- the round value ------------------------------------------------------
    def _with_value(self, frame, value):
        """(frame to run on, Held or None): the value in the closure, or joined as chunks."""
        if value is None:
            return frame, Held(None)
        if value_nbytes(value) <= self.closure_limit:
            self.routes["closure"] += 1
            return frame, Held(value)
        from pyspark.sql import functions as F

        self.routes["join"] += 1
        data = pickle.dumps(value, protocol=5)
        chunks = [
            (i, data[a : a + CHUNK_BYTES]) for i, a in enumerate(range(0, len(data), CHUNK_BYTES))
        ]
        chunk_frame = self.spark.createDataFrame(chunks, "_chunk int, _data binary")
        return frame.crossJoin(F.broadcast(chunk_frame)), None

    def _parts(self, rows) -> list[TopicStats]:
        return [stats_from_row(r) for r in sorted(rows, key=lambda r: r["part"])]

    # -- rounds -----------------------------------------------------------------
    def init_states(self, mode) -> RoundOutput:
        t0 = time.perf_counter()
        value = mode.init_value()
        frame, held = self._with_value(self._one_block_per_task(self.corpus.train), value)
        t1 = time.perf_counter()
        states = frame.mapInArrow(
            init_round(held, mode.init_state(), mode.statistics()), struct_type(STATES_SCHEMA)
        )
        return self._advance(states, value, t0, t1)

    def _one_block_per_task(self, frame):
        """``part, block`` (and the other columns of ``frame``) with block ``part`` in
        partition ``part``: the cached corpus holds a block of every slice in each of its
        partitions, and a stateful mode's tasks should hold one block's state at a time."""
        from pyspark.sql import functions as F

        n = self.corpus.n_slices * self.corpus.parts_per_slice
        cols = [c for c in frame.columns if c in ("part", "block", "state")]
        if n == self.corpus.parts_per_slice:
            return frame.select(*cols)
        return frame.select(*cols).repartition(n, exact_partition_column(F.col("part"), n))

    def _advance(self, states, value, t0: float, t1: float) -> RoundOutput:
        states = checkpoint_frame(states, "the block states")
        self.checkpoints += 1
        rows = collect_rows(states.select(*[c.split(" ")[0] for c in STATS_SCHEMA.split(", ")]))
        t2 = time.perf_counter()
        old, self.states = self.states, states
        if old is not None:  # the new states are materialized: the old ones can go
            release_frame(old)
        self._info = {"checkpointed": True, "lineage_depth": 1}
        return _output(self._parts(rows), value, t0, t1, t2)

    def run_round(self, mode, t: int) -> RoundOutput:
        from pyspark.sql import functions as F

        t0 = time.perf_counter()
        value = mode.round_value(t)
        if mode.stateful:
            frame, held = self._with_value(
                self.states.select("part", "block", "state", "kernel_s"), value
            )
            t1 = time.perf_counter()
            return self._advance(
                frame.mapInArrow(
                    advance_round(held, mode.kernel(t), mode.statistics()),
                    struct_type(STATES_SCHEMA),
                ),
                value,
                t0,
                t1,
            )
        parts = tuple(mode.round_partitions(t))
        blocks = self._slices.get(parts)
        if blocks is None:
            blocks = self._blocks().filter(F.col("part").isin(list(parts)))
            self._slices[parts] = blocks
        frame, held = self._with_value(blocks, value)
        t1 = time.perf_counter()
        rows = collect_rows(
            frame.mapInArrow(stateless_round(held, mode.kernel(t)), struct_type(STATS_SCHEMA))
        )
        t2 = time.perf_counter()
        self._info = {}
        return _output(self._parts(rows), value, t0, t1, t2)

    # -- checkpoints of the block states ------------------------------------------
    def save_states(self, path: str) -> None:
        from pyspark.sql import functions as F

        (
            self.states.select("part", F.col("docs").cast("int").alias("docs"), "state")
            .write.mode("error")
            .parquet(path)
        )

    def load_states(self, mode, path: str) -> None:
        saved = self.spark.read.parquet(path).select("part", "state")
        joined = self._one_block_per_task(
            self.corpus.train.select("part", "block").join(saved, "part", "left")
        )
        states = joined.mapInArrow(restore_round(mode.statistics()), struct_type(STATES_SCHEMA))
        self._advance(states, None, time.perf_counter(), time.perf_counter())

    # -- evaluation -------------------------------------------------------------------
    def score(self, phi, alpha, max_iter, tol: float = 1e-4):
        if self.corpus.heldout is None:
            return None
        phi = np.asarray(phi)
        if phi.ndim != 2 or not np.all(np.isfinite(phi)) or (phi < 0).any():
            raise ValueError("phi must be a finite non-negative (V, K) matrix")
        from pyspark.sql import functions as F

        heldout = self.corpus.heldout.select(
            F.monotonically_increasing_id().alias("part"), "observed", "target"
        )
        frame, held = self._with_value(heldout, np.ascontiguousarray(phi))
        rows = frame.mapInArrow(
            score_round(held, _alpha_arg(alpha), max_iter, tol),
            struct_type("total double, tokens double, docs long"),
        ).collect()
        return HeldoutScore.from_parts(rows)

    def round_info(self) -> dict:
        return dict(self._info)

    def report(self) -> dict:
        return {
            "execution": "dataframe",
            "checkpoints": self.checkpoints,
            "checkpoint_kind": "local" if self.checkpoints else None,
            "checkpoint_interval": self.checkpoint_interval,
            "value_routes": dict(self.routes),
            "closure_limit": self.closure_limit,
        }

    def close(self) -> None:
        if self.states is not None:
            release_frame(self.states)
        self.states = None
