"""The execution seam's interfaces: a :class:`Backend` (how a session runs sparklda:
classic, with RDDs and broadcasts, or DataFrame-only, Spark Connect) and the
:class:`Executor` it gives the round skeleton (:mod:`sparklda.training`), which hands
back each round's :class:`RoundOutput`. See docs/architecture.md, "The round"."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..corpus import Corpus, CorpusLayout, DocSource, build_corpus
from ..stats import TopicStats, concat_shards
from .scoring import HeldoutScore, LeftToRight

__all__ = ["Backend", "Executor", "RoundOutput", "value_nbytes"]


@dataclass
class RoundOutput:
    """What one round's distributed work returns to the driver."""

    #: unmerged partial statistics, one per non-empty block, in partition order (empty
    #: when the executors combined them: see ``merged``)
    parts: list
    #: seconds: ``ship_s`` (round value to the tasks), ``job_s`` (the Spark job(s)),
    #: ``release_s`` (freeing the round value)
    timings: dict = field(default_factory=dict)
    #: bytes of the round value shipped to the tasks
    shipped_bytes: int = 0
    #: bytes of partial statistics that reached the driver
    driver_bytes: int = 0
    #: the round's statistics already merged on the executors, as merged term shards in
    #: shard order (None: merge ``parts``); stacking them is the driver's merge
    shards: list | None = None
    #: the number of non-empty blocks (tasks' partials) the statistics come from
    tasks: int = 0
    #: where the partials were merged: "executors" or "driver"
    combine: str = "driver"

    def merged_stats(self, k: int) -> TopicStats:
        """The round's merged statistics (empty with ``k`` columns when no block had any)."""
        if self.shards:
            return concat_shards(self.shards)
        if self.parts:
            return TopicStats.merge_all(self.parts)
        return TopicStats(np.zeros(0, np.int32), np.zeros((0, k)))


def value_nbytes(value: Any) -> int:
    """Bytes of the arrays in a round value (a tuple of arrays and numbers, or one array)."""
    if isinstance(value, np.ndarray):
        return int(value.nbytes)
    if isinstance(value, (tuple, list)):
        return sum(value_nbytes(v) for v in value)
    return 0


class Executor:
    """The interface the round skeleton runs rounds through.

    The executor owns the per-partition functions (they call the mode's kernel on each
    block, time it, count its tokens and documents) and hands back the round's
    *unmerged* partial statistics, one :class:`~sparklda.stats.TopicStats` per
    non-empty block, in partition order."""

    def init_states(self, mode) -> RoundOutput:
        """Stateful modes: build every block's initial state; return its statistics."""
        raise NotImplementedError

    def run_round(self, mode, t: int) -> RoundOutput:
        """Run round ``t`` of ``mode`` on the round's partitions."""
        raise NotImplementedError

    def score(
        self, phi: np.ndarray, alpha: float, max_iter: int, ltr: LeftToRight | None = None
    ) -> HeldoutScore | None:
        """Held-out score of topics ``phi`` (None without held-out documents): document
        completion, or with ``ltr`` the left-to-right estimate of the whole documents."""
        raise NotImplementedError

    def round_info(self) -> dict:
        """Executor facts for the latest round's record (for example checkpoints)."""
        return {}

    def save_states(self, path: str) -> None:
        """Stateful modes: write every block's state to ``path`` (any Spark file system)."""
        raise NotImplementedError

    def load_states(self, mode, path: str) -> None:
        """Stateful modes: take the block states written by :meth:`save_states` (instead
        of :meth:`init_states`)."""
        raise NotImplementedError

    def report(self) -> dict:
        return {}

    def close(self) -> None:
        """Release cached state (called once training ends, also after a failure)."""


class Backend(ABC):
    """How sparklda runs on a session: it builds the corpus (choosing its layout), runs
    rounds (:meth:`executor`), scores held-out documents, folds in documents (the
    topics :meth:`share` d with the tasks) and releases what it cached. Chosen once
    per entry point by :func:`sparklda.execution.select.backend_for`."""

    #: "classic" (a session with a SparkContext) or "dataframe" (DataFrames only).
    name: str = ""

    @property
    def has_rdds(self) -> bool:
        """Whether the backend reads and writes through RDDs (a classic session)."""
        return self.name == "classic"

    @abstractmethod
    def corpus_layout(self) -> CorpusLayout:
        """A new layout for :func:`~sparklda.corpus.build_corpus`."""

    def build_corpus(self, source: DocSource, **kwargs) -> Corpus:
        """:func:`~sparklda.corpus.build_corpus` with this backend's layout."""
        return build_corpus(source, layout=self.corpus_layout(), **kwargs)

    @abstractmethod
    def executor(self, corpus: Corpus, checkpoint_interval: int = 0, combine: str = "auto"):
        """The :class:`Executor` that runs rounds on ``corpus``."""

    @abstractmethod
    def score_heldout(
        self,
        heldout,
        phi: np.ndarray,
        alpha,
        max_iter: int = 100,
        tol: float = 1e-4,
        ltr: LeftToRight | None = None,
    ) -> HeldoutScore:
        """Document completion of held-out blocks (the backend's form of them); with
        ``ltr``, the left-to-right estimate of the whole documents."""

    @abstractmethod
    def score_vectors(
        self,
        df,
        features_col: str,
        phi: np.ndarray,
        alpha,
        seed: int,
        max_iter: int,
        ltr: LeftToRight | None = None,
    ) -> HeldoutScore:
        """Document completion of the documents of a DataFrame column of ML vectors of
        term counts (each document split in half, seeded by ``seed`` and its position);
        the vectors' size must be the vocabulary's (``phi.shape[0]``). With ``ltr``, the
        left-to-right estimate of the whole documents (numbered by position)."""

    @abstractmethod
    def share(self, spark, value: np.ndarray) -> tuple[Callable[[], Any], Callable[[], Any]]:
        """``(get, release)``: ``get()`` gives ``value`` in a task; ``release()`` frees it."""

    @abstractmethod
    def block_digests(self, blocks, heldout: bool) -> list[str]:
        """:func:`~sparklda.block.block_digest` of each of the corpus's training
        (``heldout`` false) or held-out blocks (the observed and target halves' digests
        joined), in any order: one small job over the cached blocks."""

    def release(self, corpus: Corpus) -> None:
        """Release the blocks the corpus cached."""
        corpus.unpersist()
