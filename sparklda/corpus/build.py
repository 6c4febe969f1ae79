"""Corpus building (:func:`build_corpus`): validate the documents, hold out whole
documents and cache the training blocks laid out by minibatch slice, the same steps
whatever the layout (:class:`~sparklda.corpus.strategy.CorpusLayout`) that reads,
splits and places them.

The corpus is cut into ``n_slices`` minibatch slices of ``parts_per_slice``
partitions each, and round ``t`` runs tasks on one slice's partitions only.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable

import numpy as np

from ..errors import CorpusError, executor_errors
from ..params import default_batch_minibatch_size, default_minibatch_size
from .corpus import Corpus, slice_bitmaps
from .holdout import Holdout
from .layout import RddLayout
from .source import DocSource, check_params
from .strategy import CorpusLayout, Plan

__all__ = ["BUILD_PHASES", "PhaseHook", "build_corpus"]

log = logging.getLogger("sparklda.corpus")


#: ``on_phase(phase, counts)`` of :func:`build_corpus`.
PhaseHook = Callable[[str, dict], None]

#: The phases of corpus building, in order, as told to ``on_phase``: "reading" (the
#: documents are read and validated in one pass), "validated" (counts: documents,
#: empty_documents, tokens), "splitting" (the held-out documents are chosen), "caching"
#: (counts: training_documents; the training blocks are built and cached), "cached"
#: (counts: training_documents, heldout_documents, training_tokens, cached_bytes).
BUILD_PHASES = ("reading", "validated", "splitting", "caching", "cached")


def _no_phase(phase: str, counts: dict) -> None:
    return None


def _read_counts(stats: dict) -> dict:
    return {
        "documents": int(stats["docs"]),
        "empty_documents": int(stats["empty"]),
        "tokens": float(stats["tokens"]),
    }


def _cached_counts(arr: np.ndarray, n_train: int, n_held: int) -> dict:
    return {
        "training_documents": int(n_train),
        "heldout_documents": int(n_held),
        "training_tokens": float(arr[:, 1].sum()),
        "cached_bytes": int(arr[:, 3].sum()),
    }


def build_corpus(
    source: DocSource,
    minibatch_size: int | None = 1000,
    heldout_fraction: float = 0.0,
    heldout_count: int | None = None,
    seed: int = 0,
    parts_per_slice: int | None = None,
    dtype=np.float32,
    on_phase: PhaseHook | None = None,
    warm: Callable[[], object] | None = None,
    local_layout: int | None = None,
    layout: CorpusLayout | None = None,
    batch_layout: bool = False,
) -> Corpus:
    """Validate, hold out whole documents and cache the training blocks.

    Parameters
    ----------
    minibatch_size : documents per round (SCVB0's |M| in documents); the
        corpus is cut into ceil(D_train / minibatch_size) slices. 0 or None:
        :func:`sparklda.params.default_minibatch_size` of ``parts_per_slice``
        and the number of training documents.
    heldout_fraction, heldout_count : whole documents kept out of training
        for evaluation, chosen by a seeded hash of the document id (a count
        takes precedence over a fraction).
    parts_per_slice : partitions (tasks) per round; default the cluster's
        default parallelism.
    on_phase : called as ``on_phase(phase, counts)`` when a phase of the building
        starts and ends (:data:`BUILD_PHASES`), for live progress.
    warm : called once in every task of the job that caches the blocks, before it
        measures them: the Python workers that run the rounds load the kernels
        there (docs/architecture.md, "Startup: kernels compile once per machine").
    local_layout : the most (document, term) pairs a corpus may have to be laid out
        on the driver by the default layout (:class:`~sparklda.corpus.layout.RddLayout`:
        its packs come back with the validation pass, the blocks are built there and
        sent to the executors: one Spark job fewer, and no shuffle); default
        :data:`~sparklda.corpus.layout.LOCAL_LAYOUT_MAX_PAIRS`, 0 never. The blocks are
        the same either way (docs/architecture.md, "Corpus layout").
    layout : how the documents are read, split and laid out (a new
        :class:`~sparklda.corpus.strategy.CorpusLayout` per call); default
        ``RddLayout(local_layout)``, the layout of a classic session. With
        :class:`~sparklda.corpus.frame.FrameLayout` (no RDDs: Spark Connect) ``train``
        and ``heldout`` are DataFrames of blocks; the blocks and the held-out documents
        are the same for the same input and seed.
    batch_layout : the default ``minibatch_size`` for a mode whose every round sweeps
        every block (:attr:`sparklda.modes.Mode.batch_layout`):
        :func:`sparklda.params.default_batch_minibatch_size` (one slice, tasks per round
        blocks), not :func:`~sparklda.params.default_minibatch_size`.
    """
    check_params(
        "build_corpus",
        minibatch_size=minibatch_size,
        heldout_fraction=heldout_fraction,
        heldout_count=heldout_count,
        seed=seed,
        parts_per_slice=parts_per_slice,
    )
    layout = layout if layout is not None else RddLayout(local_layout)
    phase = on_phase or _no_phase
    p = layout.open(source, parts_per_slice)
    try:
        with executor_errors(source.what):  # errors of the checks run on executors
            phase("reading", {})
            holdout = Holdout.of(heldout_fraction, heldout_count, seed)
            stats = layout.validate(source, holdout, warm)
            phase("validated", _read_counts(stats))
            phase("splitting", {})
            n_train = layout.split(source, stats, heldout_fraction, heldout_count, seed)
            phase("caching", {"training_documents": int(n_train)})
            if n_train == 0:
                raise CorpusError(
                    "No training documents are left after holding out documents; "
                    "lower 'heldout_fraction' or 'heldout_count'."
                )
            default = default_batch_minibatch_size if batch_layout else default_minibatch_size
            minibatch_size = minibatch_size or default(p, n_train)
            n_slices = max(1, math.ceil(n_train / minibatch_size))
            laid = layout.lay_out(source, Plan(seed, n_slices, p, np.dtype(dtype)), warm)
            phase("cached", _cached_counts(laid.measures, n_train, laid.n_held))
    except BaseException:
        layout.discard()
        raise
    finally:
        layout.close()
        source.release_frame()
    arr = laid.measures
    slice_docs = arr[:, 0].reshape(n_slices, p).sum(1).astype(np.int64)
    slice_tokens = arr[:, 1].reshape(n_slices, p).sum(1)
    corpus = Corpus(
        train=laid.train,
        heldout=laid.heldout,
        vocab_size=source.vocab_size,
        vocab=source.vocab,
        n_slices=n_slices,
        parts_per_slice=p,
        slice_docs=slice_docs,
        slice_tokens=slice_tokens,
        n_train_docs=int(slice_docs.sum()),
        n_train_tokens=float(slice_tokens.sum()),
        n_train_pairs=int(arr[:, 2].sum()),
        n_heldout_docs=int(laid.n_held),
        n_empty_docs=int(stats["empty"]),
        train_bytes=int(arr[:, 3].sum()),
        seed=seed,
        kind=layout.kind,
        slice_bitmaps=slice_bitmaps(laid.digests, n_slices, p, source.vocab_size),
        release=layout.release,
    )
    corpus.report = {
        "documents_read": int(stats["docs"]),
        "empty_documents_skipped": corpus.n_empty_docs,
        "training_documents": corpus.n_train_docs,
        "training_tokens": corpus.n_train_tokens,
        "training_pairs": corpus.n_train_pairs,
        "heldout_documents": corpus.n_heldout_docs,
        "vocab_size": corpus.vocab_size,
        "slices": n_slices,
        "parts_per_slice": p,
        "minibatch_size": minibatch_size,
        "cached_bytes": corpus.train_bytes,
        "cached_bytes_per_pair": corpus.train_bytes / max(1, corpus.n_train_pairs),
        "laid_out_on": layout.laid_out_on,
    }
    log.info("corpus: %s", corpus.report)
    if corpus.n_empty_docs:
        log.info("skipped %d empty documents", corpus.n_empty_docs)
    return corpus
