"""The held-out split: whole documents chosen by a seeded key of their id (a count
takes the smallest keys, a fraction those below it), and the document-completion
blocks of the held-out documents."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from pyspark import StorageLevel

from ..block import DocBlock, HeldoutBlock, split_halves
from ..errors import CorpusError, executor_errors
from ..kernels.random import Stream, doc_keys, uniform_per_doc
from ..packs import Pack, clean_pack, docs_of_pack, make_pack, n_docs, take_docs
from .source import DocSource, check_params, source_packs

__all__ = [
    "Holdout",
    "heldout_block",
    "heldout_blocks",
    "heldout_keys",
    "heldout_mask",
    "holdout_keys_summary",
    "holdout_summary",
    "holdout_threshold",
    "known_heldout_docs",
    "merge_holdout_keys",
    "split_documents",
    "tag_pack",
    "tag_packs",
    "tag_packs_locally",
]


@dataclass(frozen=True)
class Holdout:
    """How held-out documents are chosen: the ``count`` with the smallest seeded keys,
    or (count 0) those whose key is below ``fraction``."""

    fraction: float
    count: int
    seed: int

    @staticmethod
    def of(heldout_fraction: float, heldout_count: int | None, seed: int) -> Holdout | None:
        if heldout_count:
            return Holdout(0.0, int(heldout_count), int(seed))
        if heldout_fraction > 0:
            return Holdout(float(heldout_fraction), 0, int(seed))
        return None


def holdout_keys_summary(pack, holdout: Holdout):
    """Of the pack's documents with a positive count: the ``count + 1`` smallest
    held-out keys, sorted (a count), or how many keys are below the fraction."""
    ids = clean_pack(pack)[0]
    keys = heldout_keys(ids, holdout.seed)
    if holdout.count:
        n = holdout.count + 1
        return np.sort(keys)[:n] if len(keys) <= n else np.sort(np.partition(keys, n - 1)[:n])
    return int(np.count_nonzero(keys < holdout.fraction))


def merge_holdout_keys(a, b, holdout: Holdout | None):
    """Two :func:`holdout_keys_summary` results merged (None: nothing yet)."""
    if a is None:
        return b
    if b is None:
        return a
    if holdout is not None and holdout.count:
        return np.sort(np.concatenate([a, b]))[: holdout.count + 1]
    return a + b


def holdout_summary(stats: dict, holdout: Holdout | None):
    """The validation pass's :func:`holdout_keys_summary` if it was gathered for
    ``holdout``; None otherwise."""
    spec, keys = stats.get("holdout", (None, None))
    return keys if holdout is not None and spec == holdout else None


def known_heldout_docs(stats: dict, holdout: Holdout | None) -> int | None:
    """How many documents the split holds out, known from the validation pass's
    ``stats["holdout"]`` without counting them: every document below the fraction,
    or exactly ``count`` when no other key ties with the count-th smallest.
    None: not known (a tie; or no summary)."""
    if holdout is None:
        return 0
    keys = holdout_summary(stats, holdout)
    if keys is None:
        return None
    if not holdout.count:
        return int(keys)
    n = holdout.count
    if len(keys) < n or (len(keys) > n and keys[n] == keys[n - 1]):
        return None
    return n


def heldout_keys(ids: np.ndarray, seed: int) -> np.ndarray:
    """Each document's seeded held-out key in [0, 1): a count holds out the smallest."""
    return uniform_per_doc(seed, Stream.HELDOUT, np.asarray(ids, dtype=np.int64))


def heldout_mask(ids: np.ndarray, seed: int, threshold: float, by_count: bool) -> np.ndarray:
    """Which documents are held out: key ≤ threshold (a count's largest kept key) or
    key < threshold (a fraction)."""
    u = heldout_keys(ids, seed)
    return u <= threshold if by_count else u < threshold


def heldout_block(docs, seed: int, dtype=np.float32) -> HeldoutBlock:
    """A :class:`HeldoutBlock` of (doc_id, terms, counts): each document's tokens split
    in half, seeded by (seed, doc id) (:func:`sparklda.block.split_halves`). The
    documents' keys are drawn at once and each half becomes a block through
    :meth:`DocBlock.from_packed`: the blocks of :meth:`DocBlock.from_docs` of the
    halves (tests/reference.py, ``heldout_block``), without its Python steps."""
    docs = list(docs)
    if not docs:
        return HeldoutBlock(
            DocBlock.from_docs([], dtype=dtype), DocBlock.from_docs([], dtype=dtype)
        )
    ids = np.fromiter((int(d[0]) for d in docs), dtype=np.int64, count=len(docs))
    keys = doc_keys(seed, Stream.SPLIT_HALVES, ids)
    halves: tuple[list, list] = ([], [])
    for d, key in zip(docs, keys.tolist(), strict=True):
        for out, half in zip(halves, split_halves(d[0], d[1], d[2], seed, key), strict=True):
            out.append(half)
    obs, tgt = (
        DocBlock.from_packed(
            [
                (
                    ids,
                    np.array([len(t) for t, _ in half], dtype=np.int64),
                    np.concatenate([t for t, _ in half]),
                    np.concatenate([c for _, c in half]),
                )
            ],
            dtype=dtype,
        )
        for half in halves
    )
    return HeldoutBlock(obs, tgt)


def split_documents(
    source: DocSource,
    stats: dict,
    heldout_fraction: float = 0.0,
    heldout_count: int | None = None,
    seed: int = 0,
):
    """Drop empty documents and split the rest into (training RDD, held-out RDD) of
    documents ``(doc_id, terms, counts)``.

    Held-out documents are chosen by a seeded hash of the document id: a
    ``heldout_count`` takes the documents with the smallest hashes, a
    ``heldout_fraction`` those whose hash falls below it. The held-out RDD is
    None when nothing is held out.
    """
    tagged, holding = tag_packs(
        source_packs(source), source, stats, heldout_fraction, heldout_count, seed
    )
    return (
        tagged.filter(lambda x: not x[0]).flatMap(lambda x: docs_of_pack(make_pack(*x[1]))),
        (
            tagged.filter(lambda x: x[0]).flatMap(lambda x: docs_of_pack(make_pack(*x[1])))
            if holding
            else None
        ),
    )


def tag_packs(
    packs,
    source: DocSource,
    stats: dict,
    heldout_fraction: float = 0.0,
    heldout_count: int | None = None,
    seed: int = 0,
):
    """``(tagged, holding)``: the cleaned packs of an RDD of packs as ``(held, pack)``,
    each pack cut into its training documents (``held`` False) and its held-out ones
    (True), empty packs dropped; ``holding`` False when no document is held out (then
    every ``held`` is False)."""
    clean = packs.map(clean_pack)

    def smallest(n: int) -> float:
        def part(it):
            keys = [heldout_keys(q[0], seed) for q in it]
            return iter(np.sort(np.concatenate(keys))[:n].tolist() if keys else ())

        with executor_errors(source.what):
            return clean.mapPartitions(part).takeOrdered(n)[-1]

    threshold = holdout_threshold(source, stats, heldout_fraction, heldout_count, seed, smallest)
    by_count = bool(heldout_count)
    return clean.flatMap(lambda q: tag_pack(q, seed, threshold, by_count)), threshold >= 0


def tag_packs_locally(
    packs: list,
    source: DocSource,
    stats: dict,
    heldout_fraction: float = 0.0,
    heldout_count: int | None = None,
    seed: int = 0,
) -> tuple[list, bool]:
    """:func:`tag_packs` of packs on the driver (a list; the result a list too)."""
    clean = [clean_pack(q) for q in packs]

    def smallest(n: int) -> float:
        return float(np.sort(np.concatenate([heldout_keys(q[0], seed) for q in clean]))[n - 1])

    threshold = holdout_threshold(source, stats, heldout_fraction, heldout_count, seed, smallest)
    by_count = bool(heldout_count)
    return [x for q in clean for x in tag_pack(q, seed, threshold, by_count)], threshold >= 0


def holdout_threshold(
    source: DocSource,
    stats: dict,
    heldout_fraction: float,
    heldout_count: int | None,
    seed: int,
    smallest: Callable[[int], float],
) -> float:
    """The held-out key threshold of :func:`heldout_mask` (-1: no document is held out):
    the ``heldout_count``-th smallest key (from the validation pass's summary, else
    ``smallest(n)``), or ``heldout_fraction``."""
    check_params(
        "split_documents", heldout_fraction=heldout_fraction, heldout_count=heldout_count, seed=seed
    )
    n_nonempty = stats["docs"] - stats["empty"]
    if heldout_count:
        if heldout_count >= n_nonempty:
            raise CorpusError(
                f"The 'heldout_count' parameter ({heldout_count}) must be smaller "
                f"than the number of non-empty documents ({n_nonempty} of the "
                f"{stats['docs']} documents of {source.what}) to leave documents to train on."
            )
        n = heldout_count
        known = holdout_summary(stats, Holdout.of(heldout_fraction, heldout_count, seed))
        if known is not None:  # gathered by the validation pass (n < the documents)
            return float(known[n - 1])
        return float(smallest(n))
    if heldout_fraction > 0:
        return float(heldout_fraction)
    return -1.0


def tag_pack(q: Pack, seed: int, threshold: float, by_count: bool) -> list:
    """A cleaned pack as ``[(held, pack)]``: its training documents (``held`` False) and
    its held-out ones (True) under ``threshold`` (:func:`holdout_threshold`; below 0
    none are held out), without empty packs."""
    if threshold >= 0:
        held = heldout_mask(q[0], seed, threshold, by_count)
        if held.any():
            cut = [(h, take_docs(q, np.flatnonzero(held == h))) for h in (False, True)]
            return [x for x in cut if n_docs(x[1]) > 0]
    return [(False, q)] if n_docs(q) > 0 else []  # most packs: no copy


def heldout_blocks(docs_rdd, seed: int = 0, dtype=np.float32, n_parts: int | None = None):
    """Document-completion blocks from an RDD of (doc_id, terms, counts).

    Each document's tokens are split in half at random, seeded by (seed,
    doc id) (:func:`sparklda.block.split_halves`). Cached; one
    :class:`HeldoutBlock` per partition.
    """
    n_parts = n_parts or docs_rdd.context.defaultParallelism

    def make_heldout(it):
        yield heldout_block(it, seed, dtype)

    return (
        docs_rdd.map(lambda d: (d[0], d))
        .partitionBy(n_parts)
        .values()
        .mapPartitions(make_heldout)
        .setName("sparklda held-out blocks")
        .persist(StorageLevel.MEMORY_ONLY)
    )
