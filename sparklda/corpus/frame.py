"""The DataFrame layout of :func:`~sparklda.corpus.build.build_corpus` (the
DataFrame-only path, Spark Connect): the same documents, checks, split and blocks as
the RDD layouts, with DataFrames and ``mapInArrow`` instead of RDDs
(docs/architecture.md, "Spark Connect path"), and the exact hash partitioning (a
port of Spark's Murmur3) that puts each block in its own partition."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..block import DocBlock
from ..kernels.warm import settle_heap
from ..packs import clean_pack, n_docs, slice_docs
from ..storage import checkpoint_frame, is_connect, persist_frame, release_frame
from .arrow import DOCS_SCHEMA, frame_docs, pack_from_batch, pack_to_batch
from .corpus import block_measures, block_partitions
from .holdout import heldout_block, heldout_keys, heldout_mask, holdout_threshold
from .source import DocSource
from .strategy import CorpusLayout, Laid, Plan
from .validate import validate_frame

__all__ = [
    "BLOCKS_SCHEMA",
    "HELDOUT_SCHEMA",
    "FrameLayout",
    "default_parallelism",
    "exact_partition_column",
    "murmur3_int",
    "partition_keys",
]


#: Columns of the cached training blocks of the DataFrame path (one row per block).
BLOCKS_SCHEMA = (
    "part int, docs long, tokens double, pairs long, nbytes long, terms binary, block binary"
)
#: Columns of the cached held-out blocks of the DataFrame path.
HELDOUT_SCHEMA = "docs long, observed binary, target binary"


def default_parallelism(spark) -> int:
    """The session's default parallelism, also without a SparkContext (Spark Connect:
    the partitions of a ``range`` without a partition count, which Spark sets to it)."""
    if not is_connect(spark):
        return int(spark.sparkContext.defaultParallelism)
    from pyspark.sql import functions as F

    ids = spark.range(0, 1 << 16).select(F.spark_partition_id().alias("p"))
    return len(ids.groupBy("p").count().collect())


def _tag_documents(seed: int, threshold: float, by_count: bool):
    """mapInArrow: the non-empty documents without zero counts, with ``held``."""

    def run(batches):
        for batch in batches:
            pack = clean_pack(pack_from_batch(batch))
            held = (
                heldout_mask(pack[0], seed, threshold, by_count)
                if threshold >= 0
                else np.zeros(n_docs(pack), bool)
            )
            yield pack_to_batch(pack, {"held": held})

    return run


def _smallest_keys(seed: int, n: int):
    import pyarrow as pa

    def run(batches):
        keys = [heldout_keys(clean_pack(pack_from_batch(b))[0], seed) for b in batches]
        allk = np.sort(np.concatenate(keys)) if keys else np.zeros(0)
        yield pa.RecordBatch.from_pydict({"key": pa.array(allk[:n], pa.float64())})

    return run


def _assign_parts(seed: int, n_slices: int, p: int):
    import pyarrow as pa

    def run(batches):
        for batch in batches:
            ids = batch.column("doc_id").to_numpy(zero_copy_only=False)
            parts = block_partitions(ids, seed, n_slices, p).astype(np.int32)
            yield batch.append_column("part", pa.array(parts))

    return run


def _make_blocks(dtype, vocab_size: int):
    """mapInArrow over documents with ``part``, sorted by part within the partition: one
    :class:`DocBlock` per part (:data:`BLOCKS_SCHEMA`), as the RDD path builds it. A
    partition holds several parts (one per slice); each block is yielded once its
    documents have all arrived, so a task holds one block's documents at a time."""
    import pyarrow as pa

    from ..block import block_to_bytes

    def emit(part: int, packs: list):
        block = DocBlock.from_packed(packs, dtype=dtype)
        docs, tokens, pairs, nbytes, digest = block_measures(block, vocab_size)
        return pa.RecordBatch.from_pydict(
            {
                "part": pa.array([part], pa.int32()),
                "docs": pa.array([docs], pa.int64()),
                "tokens": pa.array([tokens], pa.float64()),
                "pairs": pa.array([pairs], pa.int64()),
                "nbytes": pa.array([nbytes], pa.int64()),
                "terms": pa.array([digest], pa.binary()),
                "block": pa.array([block_to_bytes(block)], pa.binary()),
            }
        )

    def run(batches):
        settle_heap()
        current: int | None = None
        pending: list = []
        for batch in batches:
            if not batch.num_rows:
                continue
            parts = batch.column("part").to_numpy()
            pack = pack_from_batch(batch)
            starts = np.flatnonzero(np.concatenate([[True], parts[1:] != parts[:-1]]))
            ends = np.append(starts[1:], len(parts))
            for a, b in zip(starts, ends, strict=True):
                part = int(parts[a])
                if part != current:
                    if current is not None:
                        yield emit(current, pending)
                    current, pending = part, []
                pending.append(slice_docs(pack, int(a), int(b)))
        if current is not None:
            yield emit(current, pending)

    return run


# --------------------------------------------------------------------------
# Exact hash partitioning (the DataFrame path's block layout)


def murmur3_int(value: int, seed: int = 42) -> int:
    """Spark's ``Murmur3_x86_32.hashInt`` (what ``F.hash`` and ``repartition(n, col)``
    compute for an int column, seed 42), as a signed 32-bit int."""
    mask = 0xFFFFFFFF

    def rotl(x: int, r: int) -> int:
        return ((x << r) | (x >> (32 - r))) & mask

    k1 = (value & mask) * 0xCC9E2D51 & mask
    k1 = rotl(k1, 15) * 0x1B873593 & mask
    h1 = rotl((seed & mask) ^ k1, 13)
    h1 = (h1 * 5 + 0xE6546B64) & mask
    h1 ^= 4
    h1 ^= h1 >> 16
    h1 = h1 * 0x85EBCA6B & mask
    h1 ^= h1 >> 13
    h1 = h1 * 0xC2B2AE35 & mask
    h1 ^= h1 >> 16
    return h1 - (1 << 32) if h1 & 0x80000000 else h1


def partition_keys(n: int) -> list[int]:
    """``keys[i]``: the smallest int that ``repartition(n, key)`` sends to partition ``i``
    (Spark's hash partitioning is ``pmod(murmur3(key), n)``). Repartitioning by
    ``keys[x]`` therefore puts every row with ``x = i`` in partition ``i``, which a
    hash of ``x`` itself does not (two values may share a partition)."""
    keys: list[int | None] = [None] * n
    missing, k = n, 0
    while missing:
        i = murmur3_int(k) % n
        if keys[i] is None:
            keys[i] = k
            missing -= 1
        k += 1
    return [int(x) for x in keys if x is not None]


def exact_partition_column(col, n: int):
    """A column that ``repartition(n, ...)`` sends to partition ``col`` (an int column
    with values in ``[0, n)``): see :func:`partition_keys`."""
    from pyspark.sql import functions as F

    keys = F.array(*[F.lit(k) for k in partition_keys(n)])
    return F.element_at(keys, col.cast("int") + 1)


def _make_heldout(seed: int, dtype):
    import pyarrow as pa

    from ..block import block_to_bytes

    def run(batches):
        docs = list(frame_docs(batches))
        if not docs:
            return
        hb = heldout_block(docs, seed, dtype)
        yield pa.RecordBatch.from_pydict(
            {
                "docs": pa.array([hb.n_docs], pa.int64()),
                "observed": pa.array([block_to_bytes(hb.observed)], pa.binary()),
                "target": pa.array([block_to_bytes(hb.target)], pa.binary()),
            }
        )

    return run


class FrameLayout(CorpusLayout):
    """The layout without RDDs (the DataFrame-only path, Spark Connect): the same
    validation and errors, the same held-out documents and the same blocks (partition
    ``s * p + i`` holds the same documents) as :class:`~sparklda.corpus.layout.RddLayout`
    for the same input and seed. ``train`` is a DataFrame of :data:`BLOCKS_SCHEMA`, one
    row per non-empty block, and ``heldout`` one of :data:`HELDOUT_SCHEMA` (or None)."""

    kind = "dataframe"

    def __init__(self) -> None:
        self.docs: Any = None
        self.tagged: Any = None
        self.train: Any = None
        self.heldout: Any = None

    def open(self, source: DocSource, parts_per_slice: int | None) -> int:
        docs = source.documents_frame()
        p = parts_per_slice or default_parallelism(docs.sparkSession)
        self.docs = persist_frame(docs, source.what)
        return p

    def validate(self, source, holdout, warm) -> dict:
        return validate_frame(source, self.docs)

    def split(self, source, stats, heldout_fraction, heldout_count, seed) -> int:
        from pyspark.sql import functions as F

        docs = self.docs
        self.n_nonempty = stats["docs"] - stats["empty"]

        def smallest(n: int) -> float:
            rows = docs.mapInArrow(_smallest_keys(seed, n), "key double").collect()
            return float(sorted(r[0] for r in rows)[n - 1])

        self.threshold = holdout_threshold(
            source, stats, heldout_fraction, heldout_count, seed, smallest
        )
        by_count = bool(heldout_count)
        self.tagged = docs.mapInArrow(
            _tag_documents(seed, self.threshold, by_count), DOCS_SCHEMA + ", held boolean"
        )
        self.train_docs = self.tagged.filter(~F.col("held")).drop("held")
        self.n_train = self.n_nonempty if self.threshold < 0 else self.train_docs.count()
        return int(self.n_train)

    def lay_out(self, source, plan: Plan, warm) -> Laid:
        from pyspark.sql import functions as F

        seed, n_slices, p, dtype = plan.seed, plan.n_slices, plan.p, plan.dtype
        n_parts = plan.n_parts
        # block s * p + i in partition i: a round's filter on its slice keeps p tasks,
        # one block each (docs/architecture.md, "Spark Connect path")
        # checkpointed, not cached: a round's plan is then a scan of the checkpoint,
        # not the whole building pipeline (docs/architecture.md, "Spark Connect path")
        self.train = checkpoint_frame(
            self.train_docs.mapInArrow(_assign_parts(seed, n_slices, p), DOCS_SCHEMA + ", part int")
            .repartition(p, exact_partition_column(F.col("part") % p, p))
            .sortWithinPartitions("part")
            .mapInArrow(_make_blocks(dtype, source.vocab_size), BLOCKS_SCHEMA),
            "the training blocks",
        )
        meta = self.train.select("part", "docs", "tokens", "pairs", "nbytes", "terms").collect()
        arr = np.zeros((n_parts, 4))
        digests: list = [None] * n_parts
        for r in meta:
            arr[int(r[0])] = (r[1], r[2], r[3], r[4])
            digests[int(r[0])] = r[5]
        if self.threshold >= 0:
            # cached when first scored
            self.heldout = persist_frame(
                self.tagged.filter(F.col("held"))
                .drop("held")
                .repartition(p, "doc_id")
                .mapInArrow(_make_heldout(seed, dtype), HELDOUT_SCHEMA),
                "the held-out blocks",
            )
        return Laid(self.train, self.heldout, arr, digests, self.n_nonempty - self.n_train)

    def discard(self) -> None:
        for frame in (self.train, self.heldout):
            if frame is not None:
                release_frame(frame)

    def close(self) -> None:
        if self.docs is not None:
            release_frame(self.docs)
