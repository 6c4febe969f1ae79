"""The built corpus (:class:`Corpus`): training blocks laid out by minibatch slice,
held-out blocks, and the arithmetic of slices and blocks both layouts share."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..block import HeldoutBlock, bitmap_terms, terms_digest, union_bitmap
from ..kernels.random import Stream, uniform_per_doc

__all__ = ["Corpus", "block_measures", "block_partitions", "slice_bitmaps"]


@dataclass
class Corpus:
    """Training blocks laid out by minibatch slice, plus held-out blocks.

    ``train`` has ``n_slices * parts_per_slice`` partitions, one
    :class:`DocBlock` each; partition ``s * parts_per_slice + i`` belongs to
    slice ``s``. ``heldout`` holds :class:`HeldoutBlock` s (or is None).
    """

    train: object
    heldout: object | None
    vocab_size: int
    vocab: list | None
    n_slices: int
    parts_per_slice: int
    slice_docs: np.ndarray
    slice_tokens: np.ndarray
    n_train_docs: int
    n_train_tokens: float
    n_train_pairs: int
    n_heldout_docs: int
    n_empty_docs: int
    train_bytes: int
    seed: int
    report: dict = field(default_factory=dict)
    #: "rdd": ``train``/``heldout`` are RDDs of blocks; "dataframe": cached DataFrames of
    #: :data:`BLOCKS_SCHEMA` / :data:`HELDOUT_SCHEMA` (the DataFrame-only path)
    kind: str = "rdd"
    #: (n_slices, ceil(V/8)) packed bitmaps of each slice's distinct terms (from corpus
    #: building), or None when unknown: see :meth:`slice_terms`
    slice_bitmaps: np.ndarray | None = None
    #: Frees what ``train`` or ``heldout`` cached (its layout's
    #: :meth:`~sparklda.corpus.strategy.CorpusLayout.release`); None: ``unpersist()``.
    release: Callable[[Any], None] | None = None

    @property
    def spark(self):
        """The session of a corpus of DataFrames (None for one of RDDs: the active one)."""
        return getattr(self.train, "sparkSession", None)

    def slice_terms(self, s: int) -> np.ndarray | None:
        """The sorted distinct term ids (int32) of slice ``s``'s documents, or None when
        the corpus does not know them. A round ships the state's rows of these terms
        only (docs/architecture.md, "The round")."""
        if self.slice_bitmaps is None:
            return None
        return bitmap_terms(self.slice_bitmaps[s], self.vocab_size)

    def slice_partitions(self, s: int) -> list[int]:
        p = self.parts_per_slice
        return list(range(s * p, (s + 1) * p))

    def unpersist(self):
        """Free the cached training and held-out blocks."""
        for blocks in (self.train, self.heldout):
            if blocks is not None:
                if self.release is not None:
                    self.release(blocks)
                else:
                    blocks.unpersist()


def block_partitions(ids: np.ndarray, seed: int, n_slices: int, p: int) -> np.ndarray:
    """Each training document's partition ``slice * p + i`` (seeded by its id only)."""
    ids = np.asarray(ids, dtype=np.int64)
    s = np.minimum(
        (uniform_per_doc(seed, Stream.SLICE, ids) * n_slices).astype(np.int64), n_slices - 1
    )
    i = np.minimum((uniform_per_doc(seed, Stream.PART, ids) * p).astype(np.int64), p - 1)
    return s * p + i


def block_measures(b, vocab_size: int) -> tuple:
    """What corpus building reports of a block: ``(docs,)`` of a held-out block; of a
    training block ``(docs, tokens, pairs, bytes, terms digest)``."""
    if isinstance(b, HeldoutBlock):
        return (b.n_docs,)
    return b.n_docs, b.n_tokens, b.nnz, b.nbytes(), terms_digest(b.terms, vocab_size)


def slice_bitmaps(digests: list, n_slices: int, p: int, vocab_size: int) -> np.ndarray:
    """(n_slices, ceil(V/8)) bitmaps: the union of the terms digests of each slice's
    ``p`` blocks (``digests`` in partition order, None for a missing block)."""
    return np.stack(
        [union_bitmap(digests[s * p : (s + 1) * p], vocab_size) for s in range(n_slices)]
    )
