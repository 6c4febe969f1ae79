"""Packed documents: many documents as four flat arrays (numpy only, no Spark).

A *pack* is ``(ids int64 (n,), lengths int64 (n,), terms int64 (nnz,), counts
float64 (nnz,))``: document ``j`` owns the ``lengths[j]`` pairs that follow those
of documents ``0..j-1``. A narrowed pack (:func:`narrow_pack`, and every pack read
back by :func:`pack_from_bytes`) holds int32 lengths and terms and float32 counts
instead, where those are exact; every function here takes either. It is the form
:meth:`sparklda.block.DocBlock.from_packed` reads, and the form corpus building
works on: reading, validating, cleaning, holding out and assigning documents to
blocks are each a few array operations per pack instead of Python steps per
document (docs/architecture.md, "Corpus layout"). Every function here gives
what its per-document counterpart in :mod:`sparklda.corpus` gives on the
documents of the pack, in the same order.
"""

from __future__ import annotations

import itertools
import struct
from collections.abc import Iterable, Iterator

import numpy as np

Pack = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]

#: documents per pack when per-document input is packed (:func:`packs_of_docs`)
DOCS_PER_PACK = 8192


def empty_pack() -> Pack:
    return (np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0))


def make_pack(ids, lengths, terms, counts) -> Pack:
    """A pack with the canonical dtypes (copies only what needs converting)."""
    return (
        np.asarray(ids, dtype=np.int64),
        np.asarray(lengths, dtype=np.int64),
        np.asarray(terms, dtype=np.int64),
        np.asarray(counts, dtype=np.float64),
    )


def n_docs(pack: Pack) -> int:
    return len(pack[0])


def doc_of_pair(lengths: np.ndarray) -> np.ndarray:
    """The document (position in the pack) of each pair."""
    return np.repeat(np.arange(len(lengths), dtype=np.int64), lengths)


def pack_starts(lengths: np.ndarray) -> np.ndarray:
    """Each document's first pair."""
    starts = np.zeros(len(lengths), dtype=np.int64)
    if len(lengths) > 1:
        np.cumsum(lengths[:-1], out=starts[1:])
    return starts


def segment_gather(starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """Indices of the pairs of segments ``[starts[j], starts[j] + lengths[j])``, in
    segment order."""
    lengths = np.asarray(lengths, dtype=np.int64)
    total = int(lengths.sum())
    if total == 0:
        return np.zeros(0, np.int64)
    out_starts = pack_starts(lengths)
    return np.repeat(np.asarray(starts, np.int64) - out_starts, lengths) + np.arange(
        total, dtype=np.int64
    )


def take_docs(pack: Pack, index: np.ndarray) -> Pack:
    """The documents at positions ``index`` (in that order)."""
    ids, lengths, terms, counts = pack
    index = np.asarray(index, dtype=np.int64)
    sel = lengths[index]
    gather = segment_gather(pack_starts(lengths)[index], sel)
    return ids[index], sel, terms[gather], counts[gather]


def concat_packs(packs: Iterable[Pack]) -> Pack:
    packs = list(packs)
    if not packs:
        return empty_pack()
    if len(packs) == 1:
        return packs[0]
    return tuple(np.concatenate([q[i] for q in packs]) for i in range(4))  # type: ignore[return-value]


def compact_pack(pack: Pack, dtype) -> tuple:
    """The pack in the dtypes a :class:`~sparklda.block.DocBlock` keeps (int32 lengths
    and terms, counts in ``dtype``), to shuffle fewer bytes; ``DocBlock.from_packed``
    builds the same block from it."""
    ids, lengths, terms, counts = pack
    return ids, lengths.astype(np.int32), terms.astype(np.int32), counts.astype(dtype)


def packs_of_docs(docs: Iterable, size: int = DOCS_PER_PACK) -> Iterator[Pack]:
    """Per-document ``(doc_id, terms, counts)`` in packs of up to ``size`` documents."""
    batch: list = []
    for d in docs:
        batch.append(d)
        if len(batch) >= size:
            yield pack_of(batch)
            batch = []
    if batch:
        yield pack_of(batch)


def pack_of(docs: list) -> Pack:
    """One pack of the documents ``(doc_id, terms, counts)``."""
    ids = np.fromiter((d[0] for d in docs), dtype=np.int64, count=len(docs))
    lengths = np.fromiter((len(d[1]) for d in docs), dtype=np.int64, count=len(docs))
    if not docs:
        return empty_pack()
    terms = np.concatenate([np.asarray(d[1], dtype=np.int64) for d in docs])
    counts = np.concatenate([np.asarray(d[2], dtype=np.float64) for d in docs])
    return ids, lengths, terms, counts


def docs_of_pack(pack: Pack) -> Iterator[tuple[int, np.ndarray, np.ndarray]]:
    """The pack's documents as ``(doc_id, terms, counts)``."""
    ids, lengths, terms, counts = pack
    start = 0
    for j in range(len(ids)):
        end = start + int(lengths[j])
        yield int(ids[j]), terms[start:end], counts[start:end]
        start = end


# --------------------------------------------------------------------------
# Validation and cleaning


def check_pack(pack: Pack, vocab_size: int) -> dict:
    """The validation summary of the pack's documents: what
    ``sparklda.corpus._check_partition`` yields for them (counts of documents, empty
    documents, pairs and tokens; the largest id; the first document, in pack order,
    with each kind of problem and its first bad value)."""
    ids, lengths, terms, counts = pack
    n = len(ids)
    doc = doc_of_pair(lengths)

    def docs_with(pair_flag: np.ndarray) -> np.ndarray:
        return np.bincount(doc[pair_flag], minlength=n) > 0

    problems: dict = {}
    nonfinite = ~np.isfinite(counts)
    doc_nonfinite = docs_with(nonfinite)
    negative = counts < 0
    # a document's checks stop at its first kind of problem: non-finite, then negative,
    # then non-integer (the term range is checked for every document)
    doc_negative = docs_with(negative) & ~doc_nonfinite
    with np.errstate(invalid="ignore"):
        nonint = counts != np.round(counts)
    doc_nonint = docs_with(nonint) & ~doc_nonfinite & ~doc_negative
    for name, flag in (
        ("non-finite", nonfinite),
        ("negative", negative & doc_negative[doc]),
        ("non-integer", nonint & doc_nonint[doc]),
    ):
        hit = np.flatnonzero(flag)
        if len(hit):
            problems[name] = (int(ids[doc[hit[0]]]), counts[hit[0]].item())
    bad = np.flatnonzero((terms < 0) | (terms >= vocab_size))
    if len(bad):
        problems["term"] = (int(ids[doc[bad[0]]]), int(terms[bad[0]]))
    positive = counts > 0
    has_positive = docs_with(positive)
    return {
        "docs": n,
        "empty": int(n - has_positive.sum()),
        "nnz": int(positive.sum()),
        "tokens": float(counts[positive].sum(dtype=np.float64)),
        "problems": problems,
        "max_id": int(ids.max()) if n else -1,
    }


def merge_checks(a: dict, b: dict) -> dict:
    """Two summaries merged; ``a`` (the earlier documents) names the problems both have."""
    problems = dict(b["problems"])
    problems.update(a["problems"])
    return {
        "docs": a["docs"] + b["docs"],
        "empty": a["empty"] + b["empty"],
        "nnz": a["nnz"] + b["nnz"],
        "tokens": a["tokens"] + b["tokens"],
        "problems": problems,
        "max_id": max(a["max_id"], b["max_id"]),
    }


def empty_summary() -> dict:
    return {"docs": 0, "empty": 0, "nnz": 0, "tokens": 0.0, "problems": {}, "max_id": -1}


def check_packs(packs: Iterable[Pack], vocab_size: int) -> dict:
    """:func:`check_pack` over packs in order, merged."""
    summary = empty_summary()
    for pack in packs:
        summary = merge_checks(summary, check_pack(pack, vocab_size))
    return summary


def clean_pack(pack: Pack) -> Pack:
    """The documents with a positive count, without their pairs of zero (or negative,
    or NaN) count: ``sparklda.corpus.clean_documents``."""
    ids, lengths, terms, counts = pack
    positive = counts > 0
    if positive.all() and (lengths > 0).all():
        return pack
    kept = np.bincount(doc_of_pair(lengths)[positive], minlength=len(ids))
    keep = kept > 0
    return ids[keep], kept[keep].astype(np.int64), terms[positive], counts[positive]


def group_by(pack: Pack, keys: np.ndarray) -> Iterator[tuple[int, Pack]]:
    """``(key, documents with that key)`` for each distinct key, ascending; documents
    keep their order within a key. One gather for the pack; the groups are views of it."""
    keys = np.asarray(keys)
    if len(keys) == 0:
        return
    order = np.argsort(keys, kind="stable")
    ordered = take_docs(pack, order)
    sorted_keys = keys[order]
    bounds = np.concatenate([[0], np.flatnonzero(np.diff(sorted_keys)) + 1, [len(keys)]])
    ids, lengths, terms, counts = ordered
    pair_at = np.concatenate([[0], np.cumsum(lengths)])
    for a, b in itertools.pairwise(bounds.tolist()):
        pa, pb = int(pair_at[a]), int(pair_at[b])
        yield int(sorted_keys[a]), (ids[a:b], lengths[a:b], terms[pa:pb], counts[pa:pb])


def slice_docs(pack: Pack, a: int, b: int) -> Pack:
    """Documents ``a`` to ``b - 1`` (views of the pack's arrays)."""
    ids, lengths, terms, counts = pack
    start = int(lengths[:a].sum())
    end = start + int(lengths[a:b].sum())
    return ids[a:b], lengths[a:b], terms[start:end], counts[start:end]


# --------------------------------------------------------------------------
# Bytes (one record of a shuffle or of a binary column)

_HEADER = struct.Struct("<qqq")
_I32 = np.iinfo(np.int32)
#: flag bits of a record's header: which arrays travel in 4 bytes instead of 8
_LENGTHS32, _TERMS32, _COUNTS32 = 1, 2, 4


def _fits_int32(a: np.ndarray) -> bool:
    return not len(a) or (int(a.min()) >= _I32.min and int(a.max()) <= _I32.max)


def _exact_float32(a: np.ndarray) -> np.ndarray | None:
    """``a`` as float32 when that loses nothing (NaN kept as NaN), else None."""
    with np.errstate(over="ignore", invalid="ignore"):
        narrow = a.astype(np.float32)
    return narrow if np.array_equal(narrow, a, equal_nan=True) else None


def narrow_pack(pack: Pack) -> Pack:
    """The pack with int32 lengths and terms and float32 counts wherever that is exact
    (term counts are integers far below 2^24), the other arrays as they are: half the
    bytes for every later step to copy, pickle or keep (docs/architecture.md, "Corpus
    layout"). Every function of this module takes such a pack."""
    ids, lengths, terms, counts = (np.asarray(a) for a in pack)
    if lengths.dtype != np.int32 and _fits_int32(lengths):
        lengths = lengths.astype(np.int32)
    if terms.dtype != np.int32 and _fits_int32(terms):
        terms = terms.astype(np.int32)
    if counts.dtype != np.float32:
        narrow = _exact_float32(counts)
        if narrow is not None:
            counts = narrow
    return ids, lengths, terms, counts


def _record_dtypes(flags: int) -> tuple:
    """The dtypes of a record's four arrays under its header's ``flags``."""
    return (
        np.int64,
        np.int32 if flags & _LENGTHS32 else np.int64,
        np.int32 if flags & _TERMS32 else np.int64,
        np.float32 if flags & _COUNTS32 else np.float64,
    )


def pack_to_bytes(pack: Pack) -> bytes:
    """The pack as one record, its arrays narrowed where exact (:func:`narrow_pack`);
    :func:`pack_from_bytes` reads it back in the dtypes it was written in."""
    narrow = narrow_pack(pack)
    flags = (
        (_LENGTHS32 if narrow[1].dtype == np.int32 else 0)
        | (_TERMS32 if narrow[2].dtype == np.int32 else 0)
        | (_COUNTS32 if narrow[3].dtype == np.float32 else 0)
    )
    parts = (np.asarray(a, dtype=d) for a, d in zip(narrow, _record_dtypes(flags), strict=True))
    return b"".join(
        (_HEADER.pack(len(narrow[0]), len(narrow[2]), flags), *(a.tobytes() for a in parts))
    )


def pack_from_bytes(data: bytes) -> Pack:
    """A pack of :func:`pack_to_bytes` (views of ``data``), its arrays in the dtypes they
    travelled in: int32 lengths and terms and float32 counts when they were exact in
    them. Every function of this module takes such a pack; :func:`make_pack` gives the
    canonical dtypes."""
    n, nnz, flags = _HEADER.unpack_from(data, 0)
    at = _HEADER.size
    out = []
    for count, dtype in zip((n, n, nnz, nnz), _record_dtypes(flags), strict=True):
        out.append(np.frombuffer(data, dtype=dtype, count=count, offset=at))
        at += count * np.dtype(dtype).itemsize
    if at != len(data):
        raise ValueError(f"a packed record of {len(data)} bytes holds {at} bytes of documents")
    return tuple(out)  # type: ignore[return-value]
