"""What a corpus layout does for :func:`~sparklda.corpus.build.build_corpus`: the
steps whose form depends on where the documents live (an RDD of packs on a classic
session's executors, a small corpus's packs on the driver, a DataFrame under Spark
Connect), behind one interface (:class:`CorpusLayout`)."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from .holdout import Holdout
from .source import DocSource

__all__ = ["CorpusLayout", "Laid", "Plan"]


@dataclass(frozen=True)
class Plan:
    """Where the training documents go: ``n_slices`` minibatch slices of ``p`` blocks
    (block ``s * p + i`` of slice ``s``), each document's block seeded by ``seed``
    and its id; the blocks' counts in ``dtype``."""

    seed: int
    n_slices: int
    p: int
    dtype: Any

    @property
    def n_parts(self) -> int:
        return self.n_slices * self.p


@dataclass
class Laid:
    """What a layout built: the cached ``train`` and ``heldout`` blocks (RDDs or
    DataFrames; ``heldout`` None when nothing is held out), ``measures`` (n_parts, 4):
    each training block's documents, tokens, pairs and bytes, ``digests`` each
    training block's terms digest (None for a missing block), and ``n_held`` the
    held-out documents."""

    train: Any
    heldout: Any
    measures: np.ndarray
    digests: list
    n_held: int


class CorpusLayout(ABC):
    """One corpus building's reading, split and block layout (an object per build: it
    keeps what it read between the steps). :func:`~sparklda.corpus.build.build_corpus`
    calls, in order, :meth:`open`, :meth:`validate`, :meth:`split`, :meth:`lay_out`,
    then :meth:`close` (and :meth:`discard` first when a step failed)."""

    #: The :attr:`~sparklda.corpus.corpus.Corpus.kind` of the corpus it builds.
    kind: str = "rdd"

    @abstractmethod
    def open(self, source: DocSource, parts_per_slice: int | None) -> int:
        """Start reading the documents (read once, kept for the steps below); returns
        the blocks per slice: ``parts_per_slice`` or the session's default."""

    @abstractmethod
    def validate(
        self, source: DocSource, holdout: Holdout | None, warm: Callable[[], object] | None
    ) -> dict:
        """The validation pass's counts (:func:`~sparklda.corpus.validate.check_counts`)."""

    @abstractmethod
    def split(
        self,
        source: DocSource,
        stats: dict,
        heldout_fraction: float,
        heldout_count: int | None,
        seed: int,
    ) -> int:
        """Choose the held-out documents; returns the number of training documents."""

    @abstractmethod
    def lay_out(self, source: DocSource, plan: Plan, warm: Callable[[], object] | None) -> Laid:
        """Build and cache the training and held-out blocks."""

    def discard(self) -> None:
        """Release what :meth:`lay_out` cached (a later step failed)."""
        return None

    @abstractmethod
    def close(self) -> None:
        """Release what :meth:`open` kept (the blocks stay cached)."""

    @property
    def laid_out_on(self) -> str:
        """Where the blocks were built, for the corpus report: "executors" or "driver"."""
        return "executors"
