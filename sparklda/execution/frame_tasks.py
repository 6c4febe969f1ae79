"""The DataFrame backend's ``mapInArrow`` functions (built from plain values; the
per-block work is :mod:`sparklda.execution.tasks`'), the Arrow rows they exchange
with the driver and the holder of a round value in their closure."""

from __future__ import annotations

import pickle
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import numpy as np

from ..block import HeldoutBlock, arrays_from_bytes, arrays_to_bytes, block_from_bytes
from ..kernels.warm import settle_heap
from ..stats import TopicStats
from .base import RoundOutput, value_nbytes
from .scoring import score_partition
from .tasks import (
    advance_partition,
    check_restored_state,
    init_partition,
    stateless_partition,
    statistics_partition,
)

__all__ = [
    "CHUNK_BYTES",
    "CLOSURE_LIMIT",
    "STATES_SCHEMA",
    "STATS_COLUMNS",
    "STATS_SCHEMA",
    "Held",
    "advance_round",
    "collect_rows",
    "init_round",
    "no_statistics",
    "restore_round",
    "round_output",
    "score_round",
    "stateless_round",
    "stats_from_row",
    "struct_type",
]


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


def read_rows(batches: Iterable, held: Held | None) -> tuple[list[dict], Held]:
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


def stats_row(part: int, stats: TopicStats) -> dict:
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


def arrow_batch(rows: list[dict], schema: str):
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


def stateless_round(held: Held | None, kernel: Callable) -> Callable[[Iterable], Iterator]:
    def run(batches):
        rows, source = read_rows(batches, held)
        out = []
        for r in rows:
            block = block_from_bytes(r["block"])
            out.extend(
                stats_row(r["part"], st) for st in stateless_partition(source, kernel)([block])
            )
        if out:
            yield arrow_batch(out, STATS_SCHEMA)

    return run


def states_batch(
    rows: list[dict], items: Iterable, statistics: Callable, keep: Callable | None = None
):
    """Arrow rows of :data:`STATES_SCHEMA`: each ``(block, state, seconds)`` of ``items``
    (one per row of ``rows``, whose ``part`` and block bytes it keeps) with the
    statistics of its state, and ``keep(block, state)`` of the state (the mode's
    :meth:`~sparklda.modes.StatefulMode.kept_state`; all of it without ``keep``)."""
    out = []
    for r, (block, state, seconds) in zip(rows, items, strict=True):
        (stats,) = statistics_partition(statistics)([(block, state, seconds)])
        row = stats_row(r["part"], stats)
        row["block"] = r["block"]
        kept = keep(block, state) if keep is not None else state
        row["state"] = arrays_to_bytes([np.ascontiguousarray(kept)])
        out.append(row)
    return arrow_batch(out, STATES_SCHEMA) if out else None


def _state_round(
    held: Held | None, items: Callable, statistics: Callable, keep: Callable | None = None
):
    """mapInArrow over block rows: ``items(rows, source)`` gives each row's
    ``(block, state, seconds)``; the result is :data:`STATES_SCHEMA` rows."""

    def run(batches):
        rows, source = read_rows(batches, held)
        batch = states_batch(rows, items(rows, source), statistics, keep)
        if batch is not None:
            yield batch

    return run


def init_round(
    held: Held | None, init_state: Callable, statistics: Callable, keep: Callable | None = None
):
    def items(rows, source):
        blocks = [block_from_bytes(r["block"]) for r in rows]
        return init_partition(source, init_state)(blocks)

    return _state_round(held, items, statistics, keep)


def advance_round(
    held: Held | None, kernel: Callable, statistics: Callable, keep: Callable | None = None
):
    def items(rows, source):
        given = (
            (block_from_bytes(r["block"]), arrays_from_bytes(r["state"], 1)[0], r["kernel_s"])
            for r in rows
        )
        return advance_partition(source, kernel)(given)

    return _state_round(held, items, statistics, keep)


def no_statistics(block, state) -> np.ndarray:
    """Zero rows for a block's terms: the statistics of a restored state that holds
    none (a kept state, :meth:`~sparklda.modes.StatefulMode.kept_state`), which the
    restore's job computes and drops."""
    return np.zeros((len(block.terms), state.shape[1]), dtype=state.dtype)


def restore_round(statistics: Callable, state_rows: Callable | None = None):
    """Blocks left-joined with saved states: each state checked against its block
    (:func:`~sparklda.execution.check_restored_state`, ``state_rows`` the mode's rows
    per block)."""

    def items(rows, _):
        for r in rows:
            block = block_from_bytes(r["block"])
            if r["state"] is None:
                raise ValueError(f"the checkpoint has no block state for partition {r['part']}")
            yield check_restored_state(block, arrays_from_bytes(r["state"], 1)[0], state_rows)

    return _state_round(Held(None), items, statistics)


def score_round(held: Held | None, alpha, max_iter: int, tol: float, ltr=None):
    import pyarrow as pa

    def run(batches):
        rows, source = read_rows(batches, held)
        blocks = [
            HeldoutBlock(block_from_bytes(r["observed"]), block_from_bytes(r["target"]))
            for r in rows
        ]
        for total, tokens, docs in score_partition(source, alpha, max_iter, tol, ltr)(blocks):
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


def round_output(parts: list, value, t0: float, t1: float, t2: float) -> RoundOutput:
    """A round's output: value built and routed in [t0, t1], the job in [t1, t2] (the
    value needs no release: a closure or a joined DataFrame is dropped with the plan)."""
    return RoundOutput(
        parts,
        {"ship_s": t1 - t0, "job_s": t2 - t1, "release_s": 0.0},
        shipped_bytes=value_nbytes(value),
        driver_bytes=sum(p.nbytes for p in parts),
    )
