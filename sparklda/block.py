"""Compact per-partition document blocks (numpy only, no Spark).

A :class:`DocBlock` holds a partition's documents as clumped CSR: for each
document the distinct terms it contains and their counts. Terms are stored as
indices into the block's own sorted list of distinct global term ids, so a
kernel gathers the U rows of the topic statistics it needs once per round and
the cached corpus costs 8 bytes per (document, term) pair plus 16 per document.
"""

from __future__ import annotations

import hashlib
import io
from dataclasses import dataclass, field

import numpy as np

from .kernels.random import Stream, doc_keys


def unique_inverse(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``np.unique(values, return_inverse=True)`` of non-negative integers: by a table
    over ``[0, max]`` (linear time) when that range is not much larger than ``values``,
    by sorting otherwise; the same result either way."""
    top = int(values.max()) if len(values) else -1
    if top < 0 or top > 4 * len(values) + (1 << 20) or values.min() < 0:
        uniq, inverse = np.unique(values, return_inverse=True)
        return uniq, inverse.ravel()
    present = np.zeros(top + 1, dtype=bool)
    present[values] = True
    uniq = np.flatnonzero(present).astype(values.dtype)
    rank = np.cumsum(present, dtype=np.int64) - 1
    return uniq, rank[values]


@dataclass
class DocBlock:
    """Documents of one partition in clumped CSR form.

    Attributes
    ----------
    doc_ids : int64 (D,)
    indptr : int64 (D+1,)
    terms : int32 (U,), sorted distinct global term ids of the block
    local : int32 (nnz,), index into ``terms`` of each pair
    counts : float32 (nnz,), count of each pair
    state : dict of per-pair arrays a mode keeps with the documents (CVB0's γ)
    """

    doc_ids: np.ndarray
    indptr: np.ndarray
    terms: np.ndarray
    local: np.ndarray
    counts: np.ndarray
    state: dict = field(default_factory=dict)

    @property
    def n_docs(self) -> int:
        return len(self.doc_ids)

    @property
    def nnz(self) -> int:
        return len(self.local)

    @property
    def n_tokens(self) -> float:
        return float(self.counts.sum(dtype=np.float64))

    def doc_lengths(self) -> np.ndarray:
        """Tokens per document, float64 (D,)."""
        csum = np.concatenate([[0.0], np.cumsum(self.counts, dtype=np.float64)])
        return np.diff(csum[self.indptr])

    def nbytes(self) -> int:
        """Bytes held by the block's arrays (the cached-corpus footprint)."""
        n = sum(a.nbytes for a in (self.doc_ids, self.indptr, self.terms, self.local, self.counts))
        return n + sum(a.nbytes for a in self.state.values())

    def global_pairs(self) -> np.ndarray:
        """Global term id of each pair (int32, nnz)."""
        return self.terms[self.local]

    @staticmethod
    def from_docs(docs, dtype=np.float32) -> DocBlock:
        """Build from an iterable of (doc_id, term_ids, counts), any order.

        Documents are sorted by id so that a block's content does not depend
        on the order in which a shuffle delivered its records. Within a
        document terms are sorted and duplicate term ids summed.
        """
        docs = sorted(docs, key=lambda d: d[0])
        ids = np.fromiter((d[0] for d in docs), dtype=np.int64, count=len(docs))
        lengths = []
        term_parts, count_parts = [], []
        for _, t, c in docs:
            t = np.asarray(t, dtype=np.int64)
            c = np.asarray(c, dtype=np.float64)
            if len(t) and (np.any(np.diff(t) <= 0)):
                t, inv = np.unique(t, return_inverse=True)
                c = np.bincount(inv, weights=c, minlength=len(t))
            term_parts.append(t)
            count_parts.append(c)
            lengths.append(len(t))
        indptr = np.zeros(len(docs) + 1, dtype=np.int64)
        np.cumsum(lengths, out=indptr[1:])
        all_terms = np.concatenate(term_parts) if term_parts else np.zeros(0, np.int64)
        all_counts = np.concatenate(count_parts) if count_parts else np.zeros(0)
        terms, local = np.unique(all_terms, return_inverse=True)
        return DocBlock(
            ids,
            indptr,
            terms.astype(np.int32),
            local.astype(np.int32).ravel(),
            all_counts.astype(dtype),
        )

    @staticmethod
    def from_packed(packs, dtype=np.float32) -> DocBlock:
        """:meth:`from_docs` of the documents of several packs (:mod:`sparklda.packs`),
        without a Python step per document when every document's terms are sorted and
        distinct (then the result is :meth:`from_docs`'s; otherwise it falls back to it)."""
        packs = list(packs)
        if not packs:
            return DocBlock.from_docs([], dtype=dtype)
        ids = np.concatenate([q[0] for q in packs])
        lengths = np.concatenate([q[1] for q in packs]).astype(np.int64)
        terms = np.concatenate([q[2] for q in packs])
        counts = np.concatenate([q[3] for q in packs])
        starts = np.cumsum(lengths) - lengths
        # the pairs of one document are increasing: a decrease or repeat inside a document
        # (not at a document's first pair) needs from_docs's per-document repair
        first = np.zeros(len(terms), dtype=bool)
        first[starts[lengths > 0]] = True
        if len(terms) > 1 and np.any((np.diff(terms) <= 0) & ~first[1:]):
            docs = [
                (int(i), terms[a : a + n], counts[a : a + n])
                for i, a, n in zip(ids, starts, lengths, strict=True)
            ]
            return DocBlock.from_docs(docs, dtype=dtype)
        order = np.argsort(ids, kind="stable")
        ids, seg_starts, seg_lens = ids[order], starts[order], lengths[order]
        indptr = np.zeros(len(ids) + 1, dtype=np.int64)
        np.cumsum(seg_lens, out=indptr[1:])
        gather = np.repeat(seg_starts - indptr[:-1], seg_lens) + np.arange(indptr[-1])
        all_terms, all_counts = terms[gather], counts[gather]
        uniq, local = unique_inverse(all_terms)
        return DocBlock(
            ids.astype(np.int64),
            indptr,
            uniq.astype(np.int32),
            local.astype(np.int32).ravel(),
            all_counts.astype(dtype),
        )

    def iter_docs(self):
        """Yield (doc_id, global term ids, counts) per document."""
        g = self.global_pairs()
        for j in range(self.n_docs):
            a, b = self.indptr[j], self.indptr[j + 1]
            yield int(self.doc_ids[j]), g[a:b], self.counts[a:b]


@dataclass
class HeldoutBlock:
    """Held-out documents split for document completion: θ is inferred on
    ``observed`` and the log-likelihood is measured on ``target``; both halves
    share document order."""

    observed: DocBlock
    target: DocBlock

    @property
    def n_docs(self) -> int:
        return self.observed.n_docs

    def whole(self) -> DocBlock:
        """The whole documents, both halves joined: each document's distinct terms
        (sorted) with the counts of the two halves added, in the halves' document order
        (what left-to-right evaluation scores)."""
        obs, tgt = self.observed, self.target
        if not np.array_equal(obs.doc_ids, tgt.doc_ids):
            raise ValueError("the observed and target halves hold different documents")
        n = obs.n_docs
        doc = np.concatenate(
            [np.repeat(np.arange(n), np.diff(b.indptr)) for b in (obs, tgt)]
        ).astype(np.int64)
        term = np.concatenate([b.terms[b.local] for b in (obs, tgt)]).astype(np.int64)
        count = np.concatenate([obs.counts, tgt.counts])
        order = np.lexsort((term, doc))
        doc, term, count = doc[order], term[order], count[order]
        first = np.ones(len(doc), dtype=bool)
        first[1:] = (doc[1:] != doc[:-1]) | (term[1:] != term[:-1])
        starts = np.flatnonzero(first)
        count = np.add.reduceat(count, starts) if len(starts) else count[:0]
        doc, term = doc[starts], term[starts]
        indptr = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(np.bincount(doc, minlength=n), out=indptr[1:])
        terms, local = unique_inverse(term)
        return DocBlock(
            obs.doc_ids.astype(np.int64),
            indptr,
            terms.astype(np.int32),
            local.astype(np.int32),
            count.astype(obs.counts.dtype),
        )


def split_halves(
    doc_id: int, terms: np.ndarray, counts: np.ndarray, seed: int, key: int | None = None
):
    """Split a document's tokens in half at random (seeded by seed and doc id).

    ``floor(C/2)`` tokens, drawn without replacement, form the observed half;
    the rest the target half. Returns ((terms_a, counts_a), (terms_b, counts_b))
    with zero-count terms dropped. ``key``: the document's ``doc_keys(seed,
    Stream.SPLIT_HALVES, [doc_id])`` when the caller computed it (for many documents
    at once); the same split.
    """
    c = np.asarray(counts, dtype=np.int64)
    if key is None:
        key = int(doc_keys(seed, Stream.SPLIT_HALVES, np.array([doc_id]))[0])
    rng = np.random.default_rng(int(key))
    a = rng.multivariate_hypergeometric(c, int(c.sum()) // 2)
    b = c - a
    return (terms[a > 0], a[a > 0]), (terms[b > 0], b[b > 0])


# --------------------------------------------------------------------------
# Bytes (the DataFrame-only path keeps blocks in binary columns)

_BLOCK_FIELDS = ("doc_ids", "indptr", "terms", "local", "counts")


def arrays_to_bytes(arrays) -> bytes:
    """Arrays as one byte string: each in ``.npy`` format, one after the other (no pickle)."""
    buf = io.BytesIO()
    for a in arrays:
        np.save(buf, np.ascontiguousarray(a), allow_pickle=False)
    return buf.getvalue()


def arrays_from_bytes(data: bytes, n: int) -> list[np.ndarray]:
    """The ``n`` arrays :func:`arrays_to_bytes` wrote."""
    buf = io.BytesIO(data)
    return [np.load(buf, allow_pickle=False) for _ in range(n)]


def block_to_bytes(block: DocBlock) -> bytes:
    """A :class:`DocBlock`'s arrays as bytes (:func:`block_from_bytes` reads them back)."""
    return arrays_to_bytes(getattr(block, name) for name in _BLOCK_FIELDS)


def block_from_bytes(data: bytes) -> DocBlock:
    return DocBlock(*arrays_from_bytes(data, len(_BLOCK_FIELDS)))


# --------------------------------------------------------------------------
# The distinct terms of a block, as corpus building reports them to the driver


def terms_digest(terms: np.ndarray, vocab_size: int) -> bytes:
    """The sorted distinct ``terms`` of a block in the smaller of two forms: the int32
    ids (``b"T"`` + ids) or a bitmap of the vocabulary (``b"B"`` + packed bits)."""
    terms = np.asarray(terms)
    n_bitmap = (int(vocab_size) + 7) // 8
    if terms.size * 4 <= n_bitmap:
        return b"T" + terms.astype("<i4").tobytes()
    bits = np.zeros(int(vocab_size), dtype=bool)
    bits[terms] = True
    return b"B" + np.packbits(bits).tobytes()


def union_bitmap(digests, vocab_size: int) -> np.ndarray:
    """The packed bitmap (uint8, ceil(V/8) bytes) of the union of ``digests``
    (:func:`terms_digest`; None entries are skipped)."""
    n = (int(vocab_size) + 7) // 8
    out = np.zeros(n, dtype=np.uint8)
    ids = []
    for d in digests:
        if d is None:
            continue
        if d[:1] == b"B":
            out |= np.frombuffer(d, dtype=np.uint8, offset=1, count=n)
        elif d[:1] == b"T":
            ids.append(np.frombuffer(d, dtype="<i4", offset=1))
        else:
            raise ValueError("not a terms digest")
    if ids:
        bits = np.zeros(int(vocab_size), dtype=bool)
        bits[np.concatenate(ids)] = True
        out |= np.packbits(bits)
    return out


def bitmap_terms(bitmap: np.ndarray, vocab_size: int) -> np.ndarray:
    """The sorted int32 term ids set in a packed ``bitmap`` (:func:`union_bitmap`)."""
    bits = np.unpackbits(bitmap, count=int(vocab_size))
    return np.flatnonzero(bits).astype(np.int32)


def block_digest(block) -> str:
    """SHA-256 (hex) of a :class:`~sparklda.block.DocBlock`'s documents: their ids, each
    document's global term ids and counts, in canonical dtypes (so the classic and the
    DataFrame path, whatever the block's count dtype, give the same digest)."""
    h = hashlib.sha256()
    for a, dtype in (
        (block.doc_ids, "<i8"),
        (block.indptr, "<i8"),
        (np.asarray(block.terms)[np.asarray(block.local)], "<i8"),
        (block.counts, "<f8"),
    ):
        h.update(np.ascontiguousarray(a, dtype=dtype).tobytes())
    return h.hexdigest()
