"""The validation pass: one scan of the documents that raises :class:`CorpusError` on
bad input and counts what it read (an RDD of packs or a documents DataFrame)."""

from __future__ import annotations

from collections.abc import Callable

from ..errors import CorpusError, executor_errors
from ..kernels.warm import settle_heap
from ..packs import check_pack, check_packs, empty_summary, merge_checks
from .arrow import pack_from_batch
from .holdout import Holdout, holdout_keys_summary, merge_holdout_keys
from .source import DocSource, source_packs

__all__ = ["check_counts", "validate", "validate_and_keep", "validate_frame", "validate_packs"]


def validate_packs(packs, source: DocSource, holdout: Holdout | None = None) -> dict:
    """:func:`validate` of an RDD of the source's documents in packs. With ``holdout``
    the same pass also gathers what choosing the held-out documents needs
    (:func:`holdout_keys_summary`), in ``stats["holdout"]``: no job of its own."""
    return validate_and_keep(packs, source, holdout)[0]


def validate_and_keep(
    packs,
    source: DocSource,
    holdout: Holdout | None = None,
    keep_pairs: int = 0,
    warm: Callable[[], object] | None = None,
) -> tuple[dict, list | None]:
    """``(stats, kept)``: :func:`validate_packs`, and, when the documents have at most
    ``keep_pairs`` (document, term) pairs, their packs as the validation pass read them
    (``kept``, brought to the driver by the same job; None otherwise). Each partition
    keeps its packs while they hold at most ``keep_pairs`` / the number of partitions
    pairs, so the driver never receives more than ``keep_pairs``. ``warm`` is called
    once in every task (the kernels loaded in the workers, as the caching job does)."""
    vocab_size = source.vocab_size
    cap = int(keep_pairs) // max(1, packs.getNumPartitions()) if keep_pairs > 0 else -1

    def check(it):
        if warm is not None:  # first: the heap is frozen once the kernels are loaded
            warm()
        settle_heap()
        summary, keys, pairs = empty_summary(), None, 0
        kept: list | None = [] if cap >= 0 else None
        for pack in it:
            summary = merge_checks(summary, check_pack(pack, vocab_size))
            if holdout is not None:
                keys = merge_holdout_keys(keys, holdout_keys_summary(pack, holdout), holdout)
            if kept is not None:
                pairs += len(pack[2])
                if pairs <= cap:
                    kept.append(pack)
                else:
                    kept = None
        yield summary, keys, kept

    def merge(a, b):
        both = None if a[2] is None or b[2] is None else a[2] + b[2]
        return merge_checks(a[0], b[0]), merge_holdout_keys(a[1], b[1], holdout), both

    with executor_errors(source.what):
        stats, keys, kept = packs.mapPartitions(check).reduce(merge)
    stats = check_counts(source, stats)
    if holdout is not None:
        stats["holdout"] = (holdout, keys)
    return stats, kept


def validate(source: DocSource) -> dict:
    """Scan the documents once and raise :class:`CorpusError` on bad input.

    Checks: counts finite, non-negative and integral; term ids inside the
    vocabulary; at least one non-empty document. Returns the counts
    (documents, empty documents, pairs, tokens).
    """
    return validate_packs(source_packs(source), source)


def check_counts(source: DocSource, stats: dict) -> dict:
    """Raise :class:`CorpusError` for the first kind of problem the validation pass found
    (``stats``, :func:`_check_partition` summaries merged); the counts otherwise."""
    what = source.what
    p = stats["problems"]
    for kind in ("non-finite", "negative", "non-integer"):
        if kind in p:
            d, v = p[kind]
            raise CorpusError(
                f"{what} has a {kind} term count ({v}) in document {d}; counts must be "
                f"finite non-negative integers."
            )
    if "term" in p:
        d, v = p["term"]
        shown = v + 1 if "UCI" in what else v
        raise CorpusError(
            f"{what} has term id {shown} in document {d}, outside the vocabulary "
            f"of {source.vocab_size} terms."
        )
    if source.declared_docs is not None:
        stats["empty"] += max(0, source.declared_docs - stats["docs"])
        stats["docs"] = max(stats["docs"], source.declared_docs)
    if stats["tokens"] <= 0:
        raise CorpusError(
            f"The corpus is empty: {what} has no document with a positive count "
            f"({stats['docs']} documents read)."
        )
    return stats


def _check_frame_partition(what: str, vocab_size: int):
    import json

    import pyarrow as pa

    def run(batches):
        settle_heap()
        summary = check_packs((pack_from_batch(b) for b in batches), vocab_size)
        text = json.dumps(summary, default=lambda o: o.item())
        yield pa.RecordBatch.from_pydict({"summary": [text]})

    return run


def validate_frame(source: DocSource, docs) -> dict:
    """:func:`validate` on a documents DataFrame: the same checks, counts and errors."""
    import functools
    import json

    with executor_errors(source.what):
        rows = docs.mapInArrow(
            _check_frame_partition(source.what, source.vocab_size), "summary string"
        ).collect()
    summaries = [json.loads(r[0]) for r in rows]
    for s in summaries:
        s["problems"] = {k: tuple(v) for k, v in s["problems"].items()}
    return check_counts(source, functools.reduce(merge_checks, summaries, empty_summary()))
