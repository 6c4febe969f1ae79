"""The DataFrame backend: rounds without RDDs, broadcasts or a JVM gateway.

Spark Connect (Databricks serverless and standard access mode) has no
``SparkContext``. :class:`DataFrameExecutor` runs the same rounds as
:class:`~sparklda.execution.classic.ClassicExecutor` on a corpus laid out by
:class:`~sparklda.corpus.FrameLayout` (cached DataFrames of serialized blocks), with
``mapInArrow`` over the round's blocks. The per-block work is the per-partition
functions of :mod:`sparklda.execution.tasks`; the partials come back as Arrow rows and
become the same :class:`~sparklda.stats.TopicStats`, in partition order, so the
skeleton's merge and update are shared.

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
from typing import Any

import numpy as np

from ..block import DocBlock, HeldoutBlock, block_digest, block_from_bytes, split_halves
from ..corpus import FrameLayout, exact_partition_column, vector_size
from ..errors import CorpusError, executor_errors
from ..stats import TopicStats
from ..storage import checkpoint_frame, release_frame
from ..vectors import arrow_vectors, with_row_positions
from .base import Backend, Executor, RoundOutput, value_nbytes
from .frame_tasks import (
    CHUNK_BYTES,
    CLOSURE_LIMIT,
    STATES_SCHEMA,
    STATS_SCHEMA,
    Held,
    advance_round,
    collect_rows,
    init_round,
    no_statistics,
    restore_round,
    round_output,
    score_round,
    stateless_round,
    stats_from_row,
    struct_type,
)
from .scoring import HeldoutScore, LeftToRight, alpha_arg, check_phi, score_blocks

__all__ = ["DataFrameExecutor", "FrameBackend", "vectors_score"]

log = logging.getLogger("sparklda.execution")


class ValueRoute:
    """How a value reaches the tasks: in the closure up to ``closure_limit`` bytes
    (:func:`value_nbytes`), else pickled into a DataFrame of chunks broadcast-joined to
    the frame the tasks run on; ``routes`` counts each route taken."""

    def __init__(self, spark, closure_limit: int):
        self.spark = spark
        self.closure_limit = closure_limit
        self.routes: dict[str, int] = {"closure": 0, "join": 0}

    def __call__(self, frame, value):
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
            raise ValueError(
                "DataFrameExecutor needs a corpus laid out by FrameLayout (a 'dataframe' corpus)"
            )
        self.corpus = corpus
        self.spark = corpus.train.sparkSession
        self.checkpoint_interval = int(checkpoint_interval)
        self.closure_limit = CLOSURE_LIMIT if closure_limit is None else int(closure_limit)
        self.states = None  # stateful modes: DataFrame of STATES_SCHEMA
        self.route = ValueRoute(self.spark, self.closure_limit)
        self.routes = self.route.routes
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
        return self.route(frame, value)

    def _parts(self, rows) -> list[TopicStats]:
        return [stats_from_row(r) for r in sorted(rows, key=lambda r: r["part"])]

    # -- rounds -----------------------------------------------------------------
    def init_states(self, mode) -> RoundOutput:
        t0 = time.perf_counter()
        value = mode.init_value()
        frame, held = self._with_value(self._one_block_per_task(self.corpus.train), value)
        t1 = time.perf_counter()
        states = frame.mapInArrow(
            init_round(held, mode.init_state(), mode.statistics(), mode.kept_state()),
            struct_type(STATES_SCHEMA),
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
        return round_output(self._parts(rows), value, t0, t1, t2)

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
                    advance_round(held, mode.kernel(t), mode.statistics(), mode.kept_state()),
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
        return round_output(self._parts(rows), value, t0, t1, t2)

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
        states = joined.mapInArrow(
            # the restore's statistics are dropped; a kept state may hold none
            restore_round(
                mode.statistics() if mode.kept_state() is None else no_statistics,
                mode.state_rows(),
            ),
            struct_type(STATES_SCHEMA),
        )
        self._advance(states, None, time.perf_counter(), time.perf_counter())

    # -- evaluation -------------------------------------------------------------------
    def score(self, phi, alpha, max_iter, ltr: LeftToRight | None = None, tol: float = 1e-4):
        if self.corpus.heldout is None:
            return None
        return heldout_score(self._with_value, self.corpus.heldout, phi, alpha, max_iter, tol, ltr)

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


def heldout_score(
    with_value, heldout, phi, alpha, max_iter: int, tol: float, ltr: LeftToRight | None = None
) -> HeldoutScore:
    """Document completion (or, with ``ltr``, the left-to-right estimate) of a DataFrame
    of held-out blocks
    (:data:`~sparklda.corpus.HELDOUT_SCHEMA`), φ̂ routed to the tasks by ``with_value``
    (``(frame, value) -> (frame, Held or None)``: :meth:`DataFrameExecutor._with_value`)."""
    from pyspark.sql import functions as F

    phi = check_phi(phi)
    heldout = heldout.select(F.monotonically_increasing_id().alias("part"), "observed", "target")
    frame, held = with_value(heldout, np.ascontiguousarray(phi))
    rows = frame.mapInArrow(
        score_round(held, alpha_arg(alpha), max_iter, tol, ltr),
        struct_type("total double, tokens double, docs long"),
    ).collect()
    return HeldoutScore.from_parts(rows)


def vectors_score(
    df,
    features_col: str,
    phi: np.ndarray,
    alpha,
    seed: int,
    max_iter: int = 100,
    tol: float = 1e-4,
    what: str | None = None,
    ltr: LeftToRight | None = None,
) -> HeldoutScore:
    """Document completion of the documents of a DataFrame column of ML vectors (term
    counts), with DataFrame operations only, so it runs under Spark Connect.

    Documents are numbered by their position in ``df`` (partition by partition, as
    :func:`sparklda.corpus.from_vectors` numbers them with ``zipWithIndex``), so the
    halves, and the score, are those of the classic backend. Empty documents and zero
    counts are dropped; a bad vector raises on the executors (run it inside
    :func:`sparklda.errors.executor_errors`). φ̂ travels in the task closure.
    """
    from pyspark.sql import functions as F

    phi = np.ascontiguousarray(phi, dtype=np.float64)
    check_phi(phi)
    v = phi.shape[0]
    what = what or f"column {features_col!r}"
    alpha = alpha_arg(alpha)
    numbered = with_row_positions(df.select(F.col(features_col).alias("_vec")), "_doc")

    def score(batches):
        import pyarrow as pa

        obs, tgt = [], []
        for batch in batches:
            if batch.num_rows == 0:
                continue
            ids = batch.column("_doc").to_numpy(zero_copy_only=False)
            vecs = arrow_vectors(batch.column("_vec"), v, what, first_doc=int(ids[0]))
            for doc_id, (idx, val) in zip(ids.tolist(), vecs, strict=True):
                keep = val > 0
                if not keep.any():
                    continue
                (ta, ca), (tb, cb) = split_halves(doc_id, idx[keep], val[keep], seed)
                obs.append((doc_id, ta, ca))
                tgt.append((doc_id, tb, cb))
        block = HeldoutBlock(
            DocBlock.from_docs(obs, dtype=np.float64), DocBlock.from_docs(tgt, dtype=np.float64)
        )
        total, tokens, docs = score_blocks(phi, [block], alpha, max_iter, tol, ltr)
        yield pa.RecordBatch.from_pydict(
            {"total": [float(total)], "tokens": [float(tokens)], "docs": [int(docs)]}
        )

    parts = numbered.mapInArrow(score, "total double, tokens double, docs long").collect()
    return HeldoutScore.from_parts(parts)


class FrameBackend(Backend):
    """DataFrames only (Spark Connect, or a classic session asked for
    ``execution = "dataframe"``): ``mapInArrow``, values in task closures."""

    name = "dataframe"

    def __init__(self, spark=None, closure_limit: int | None = None, parallelism=None):
        self.spark = spark
        self.closure_limit = closure_limit
        #: ``parallelism(spark)``: the session's default parallelism (None: the
        #: layout's estimate, :func:`sparklda.corpus.default_parallelism`)
        self.parallelism = parallelism

    def corpus_layout(self) -> FrameLayout:
        return FrameLayout(self.parallelism)

    def executor(self, corpus, checkpoint_interval: int = 0, combine: str = "auto"):
        return DataFrameExecutor(corpus, checkpoint_interval, self.closure_limit)

    def score_heldout(self, heldout, phi, alpha, max_iter=100, tol=1e-4, ltr=None) -> HeldoutScore:
        limit = CLOSURE_LIMIT if self.closure_limit is None else int(self.closure_limit)
        route = ValueRoute(heldout.sparkSession, limit)
        return heldout_score(route, heldout, phi, alpha, max_iter, tol, ltr)

    def score_vectors(self, df, features_col, phi, alpha, seed, max_iter, ltr=None) -> HeldoutScore:
        size = vector_size(df, features_col)
        if size is not None and size != phi.shape[0]:
            raise CorpusError(
                f"Vectors in column {features_col!r} have size {size} but the model's "
                f"vocabulary has {phi.shape[0]} terms."
            )
        with executor_errors(f"column {features_col!r}"):
            return vectors_score(df, features_col, phi, alpha, seed, max_iter, ltr=ltr)

    def block_digests(self, blocks, heldout: bool) -> list[str]:
        columns = ("observed", "target") if heldout else ("block",)
        rows = blocks.select(*columns).mapInArrow(_digests, "digest string").collect()
        return [r["digest"] for r in rows]

    def share(self, spark, value):
        return (lambda: value), (lambda: None)


def _digests(batches):
    """Each row's blocks' :func:`~sparklda.block.block_digest` joined (a mapInArrow
    function over block columns)."""
    import pyarrow as pa

    for batch in batches:
        cols = [batch.column(i).to_pylist() for i in range(batch.num_columns)]
        out = [
            "".join(block_digest(block_from_bytes(x)) for x in row)
            for row in zip(*cols, strict=True)
        ]
        yield pa.RecordBatch.from_pydict({"digest": pa.array(out, pa.string())})
