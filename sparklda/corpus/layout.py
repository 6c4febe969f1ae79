"""The RDD layouts of :func:`~sparklda.corpus.build.build_corpus` (classic sessions):
the training blocks built on the executors after one shuffle or, for a small corpus,
on the driver; the same blocks either way."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
from pyspark import StorageLevel

from ..block import DocBlock
from ..kernels.warm import settle_heap
from ..packs import compact_pack, concat_packs, docs_of_pack, group_by, n_docs
from .corpus import block_measures, block_partitions
from .holdout import Holdout, heldout_block, known_heldout_docs, tag_packs, tag_packs_locally
from .source import DocSource, source_packs
from .strategy import CorpusLayout, Laid, Plan
from .validate import validate_and_keep

__all__ = [
    "LOCAL_LAYOUT_MAX_PAIRS",
    "SERVED_BLOCK_BYTES",
    "Layout",
    "RddLayout",
    "blocks_rdd",
    "pruned",
    "served_blocks",
]


def pruned(rdd, partitions: list[int] | None):
    """``rdd`` restricted to ``partitions`` (in their order), without running a task on
    the others: Spark's ``PartitionPruningRDD`` (classic sessions only). PySpark has
    no partition-pruning RDD of its own (docs/architecture.md, "Corpus layout")."""
    if partitions is None or list(partitions) == list(range(rdd.getNumPartitions())):
        return rdd
    from pyspark.rdd import RDD

    sc = rdd.context
    jvm = sc._jvm
    keep = jvm.java.util.HashSet()
    for p in partitions:
        keep.add(int(p))
    keep_set = jvm.scala.jdk.javaapi.CollectionConverters.asScala(keep).toSet()
    jrdd = jvm.org.apache.spark.rdd.PartitionPruningRDD.create(rdd._jrdd.rdd(), keep_set)
    return RDD(jrdd.toJavaRDD(), sc, rdd._jrdd_deserializer)


#: Corpora with at most this many (document, term) pairs are laid out on the driver by
#: default (:class:`RddLayout`'s ``local_layout``): at most about 32 MB of packs
#: there, and as much again of blocks. The Spark job and shuffle of the executors'
#: layout cost more than that below it (docs/architecture.md, "Corpus layout").
LOCAL_LAYOUT_MAX_PAIRS = 4_000_000


@dataclass(frozen=True)
class Layout:
    """Where :class:`RddLayout` puts each document: a training document in block
    partition ``slice * p + i`` (:func:`block_partitions`), a held-out one in
    ``n_parts + hash(id) % n_held_parts`` (``hash`` of an int is Python's own,
    PySpark's ``portable_hash`` without its check of ``PYTHONHASHSEED``); on the
    executors (one shuffle) or, for a small corpus, on the driver, with the same
    blocks."""

    seed: int
    n_slices: int
    p: int
    n_held_parts: int
    dtype: Any

    @property
    def n_parts(self) -> int:
        return self.n_slices * self.p

    def records(self, tagged) -> Iterator[tuple[int, Any]]:
        """``(partition, record)`` of ``(held, pack)`` items: one packed record per
        (input partition, block), not one per document (the shuffle's cost per record
        dominated corpus building), in the blocks' dtypes (int32 terms, counts in
        ``dtype``: half the bytes of float64 packs, and the same block); each held-out
        document a record of its own."""
        n_parts, n_held = self.n_parts, self.n_held_parts
        groups: dict[int, list] = {}
        held: list = []
        for is_held, pack in tagged:
            if is_held:
                held.extend((n_parts + hash(int(d[0])) % n_held, d) for d in docs_of_pack(pack))
                continue
            parts = block_partitions(pack[0], self.seed, self.n_slices, self.p)
            for part, sub in group_by(pack, parts):
                groups.setdefault(part, []).append(sub)
        yield from (
            (part, compact_pack(concat_packs(groups[part]), self.dtype)) for part in sorted(groups)
        )
        yield from held

    def on_executors(self, tagged, vocab_size: int, warm=None):
        """``(train, heldout, measured)``: the blocks of an RDD of ``(held, pack)``,
        cached by one job after one shuffle, and each block's :func:`block_measures`."""
        n_parts, n_held_parts, seed, dtype = self.n_parts, self.n_held_parts, self.seed, self.dtype

        def assign(it):
            settle_heap()
            yield from self.records(it)

        def make_block(it):
            settle_heap()
            yield DocBlock.from_packed((q for _, q in it), dtype=dtype)

        def make_heldout(it):
            settle_heap()
            yield heldout_block((d for _, d in it), seed, dtype)

        shuffled = tagged.mapPartitions(assign).partitionBy(n_parts + n_held_parts, lambda x: x)
        train = (
            pruned(shuffled, list(range(n_parts)))
            .mapPartitions(make_block, preservesPartitioning=True)
            .setName("sparklda training blocks")
            .persist(StorageLevel.MEMORY_ONLY)
        )
        heldout = (
            pruned(shuffled, list(range(n_parts, n_parts + n_held_parts)))
            .mapPartitions(make_heldout)
            .setName("sparklda held-out blocks")
            .persist(StorageLevel.MEMORY_ONLY)
            if n_held_parts
            else None
        )

        def measure(blocks):
            if warm is not None:
                warm()
            for b in blocks:
                yield block_measures(b, vocab_size)

        # one job caches the training blocks and the held-out ones
        both = train if heldout is None else train.union(heldout)
        return train, heldout, both.mapPartitions(measure).collect()

    def on_driver(self, sc, tagged: list, vocab_size: int):
        """:meth:`on_executors` of a list of ``(held, pack)`` on the driver: the blocks
        are built here and become RDDs of one block per partition, cached as the
        first round reads them."""
        n_parts = self.n_parts
        records: dict[int, list] = {}
        for part, record in self.records(tagged):
            records.setdefault(part, []).append(record)
        train_blocks = [
            DocBlock.from_packed(records.get(i, []), dtype=self.dtype) for i in range(n_parts)
        ]
        held_blocks = [
            heldout_block(records.get(n_parts + i, []), self.seed, self.dtype)
            for i in range(self.n_held_parts)
        ]
        measured = [block_measures(b, vocab_size) for b in train_blocks + held_blocks]
        train = blocks_rdd(sc, train_blocks, "sparklda training blocks")
        heldout = blocks_rdd(sc, held_blocks, "sparklda held-out blocks") if held_blocks else None
        return train, heldout, measured


#: The driver's layout serves its blocks from broadcast variables (:func:`served_blocks`)
#: when they hold at least this many bytes on average, else ``sc.parallelize`` s them: a
#: block carried in every task of a job costs the JVM about 4 CPU-ms a MB each time, a
#: served block its broadcast and RDD once, 10-40 ms when corpus building runs
#: (docs/architecture.md, "Corpus layout").
SERVED_BLOCK_BYTES = 1 << 20


def _block_bytes(block) -> int:
    if isinstance(block, DocBlock):
        return block.nbytes()
    return block.observed.nbytes() + block.target.nbytes()  # a HeldoutBlock


def blocks_rdd(sc, blocks: list, name: str):
    """An RDD of ``blocks`` laid out on the driver, one a partition, cached
    (``MEMORY_ONLY``) as the first job reads them: :func:`served_blocks` when they
    average at least :data:`SERVED_BLOCK_BYTES`, else ``sc.parallelize(blocks)``."""
    if sum(_block_bytes(b) for b in blocks) >= SERVED_BLOCK_BYTES * len(blocks):
        return served_blocks(sc, blocks, name)
    return sc.parallelize(blocks, len(blocks)).setName(name).persist(StorageLevel.MEMORY_ONLY)


def served_blocks(sc, blocks: list, name: str):
    """An RDD of ``blocks``, one a partition, cached (``MEMORY_ONLY``) as the first job
    reads them: the union of one single-partition RDD per block, each computed from a
    broadcast variable of its own block (kept on the RDD as ``served_by``;
    :meth:`RddLayout.release` destroys them), so an executor that computes a partition
    fetches that block only. Not ``sc.parallelize(blocks)``: its partitions hold the
    data, and every task of every later job on the blocks (each round's) would carry
    its block, serialized on the driver and read again in the executor
    (docs/architecture.md, "Corpus layout")."""
    shares = [sc.broadcast(b) for b in blocks]
    parts = [sc.parallelize([0], 1).map(_served(share)) for share in shares]
    rdd = sc.union(parts).setName(name).persist(StorageLevel.MEMORY_ONLY)
    rdd.served_by = shares
    return rdd


def _served(share):
    def run(_):
        return share.value

    return run


class RddLayout(CorpusLayout):
    """The layout of a classic session: the documents read once as an RDD of packs
    (:func:`~sparklda.corpus.source.source_packs`), persisted for the validation pass
    and the split; the blocks built by :class:`Layout` on the executors or, when the
    validation pass brought a small corpus's packs to the driver (at most
    ``local_layout`` (document, term) pairs; default :data:`LOCAL_LAYOUT_MAX_PAIRS`, 0
    never), on the driver: one Spark job fewer, and no shuffle. The blocks are the same
    either way (docs/architecture.md, "Corpus layout")."""

    kind = "rdd"

    def __init__(self, local_layout: int | None = None):
        self.local_layout = local_layout
        self.packs: Any = None
        self.kept: list | None = None
        self.tagged: Any = None
        self.n_held_parts = 0

    def open(self, source: DocSource, parts_per_slice: int | None) -> int:
        # the session's context: asking the source's RDD for it would build its documents
        self.sc = source.spark.sparkContext if source.spark is not None else source.rdd.context
        p = parts_per_slice or self.sc.defaultParallelism
        # read once, in packs: every step below is array operations per pack
        # (docs/architecture.md, "Corpus layout")
        self.packs = source_packs(source).persist(StorageLevel.MEMORY_AND_DISK)
        return p

    def validate(self, source, holdout, warm) -> dict:
        keep = LOCAL_LAYOUT_MAX_PAIRS if self.local_layout is None else self.local_layout
        stats, self.kept = validate_and_keep(
            self.packs, source, holdout, keep_pairs=keep, warm=warm
        )
        return stats

    @property
    def on_driver(self) -> bool:
        """Whether the validation pass brought the packs to the driver."""
        return self.kept is not None

    @property
    def laid_out_on(self) -> str:
        return "driver" if self.on_driver else "executors"

    def split(self, source, stats, heldout_fraction, heldout_count, seed) -> int:
        # (held, pack): each pack cut into its training and held-out documents, on
        # the driver when the validation pass brought a small corpus's packs there
        if self.on_driver:
            self.tagged, holding = tag_packs_locally(
                self.kept, source, stats, heldout_fraction, heldout_count, seed
            )
            self.kept = []  # the packs live on in the tagged ones
        else:
            self.tagged, holding = tag_packs(
                self.packs, source, stats, heldout_fraction, heldout_count, seed
            )
        self.n_held_parts = self.sc.defaultParallelism if holding else 0
        # the validation pass told how many documents are held out (a count job only
        # when two held-out keys tie)
        holdout = Holdout.of(heldout_fraction, heldout_count, seed)
        n_held_known = known_heldout_docs(stats, holdout)
        if n_held_known is not None:
            return int(stats["docs"] - stats["empty"] - n_held_known)
        if self.on_driver:
            return sum(n_docs(q) for held, q in self.tagged if not held)
        return int(self.tagged.filter(lambda x: not x[0]).map(lambda x: n_docs(x[1])).sum())

    def lay_out(self, source, plan: Plan, warm) -> Laid:
        layout = Layout(plan.seed, plan.n_slices, plan.p, self.n_held_parts, np.dtype(plan.dtype))
        vocab_size = source.vocab_size
        if self.on_driver:  # a small corpus: the same blocks, built here, no shuffle
            train, heldout, measured = layout.on_driver(self.sc, self.tagged, vocab_size)
        else:
            train, heldout, measured = layout.on_executors(self.tagged, vocab_size, warm)
        self.tagged = None
        per_part = [r for r in measured if len(r) > 1]
        n_held = sum(r[0] for r in measured if len(r) == 1)
        arr = np.array([r[:4] for r in per_part], dtype=np.float64).reshape(plan.n_parts, 4)
        return Laid(train, heldout, arr, [r[4] for r in per_part], n_held)

    def close(self) -> None:
        if self.packs is not None:
            self.packs.unpersist()

    @staticmethod
    def release(blocks) -> None:
        """Unpersist ``blocks`` and destroy the broadcast variables of the driver's layout
        (:func:`served_blocks`)."""
        blocks.unpersist()
        for share in getattr(blocks, "served_by", ()):
            share.destroy()
        blocks.served_by = ()
