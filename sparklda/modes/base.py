"""The mode contract: what an inference algorithm supplies to the round skeleton.

A mode is its round state, its per-block kernel call and its update rule
(docs/architecture.md, "The mode contract"). It never touches Spark: the
execution layer (:mod:`sparklda.execution`) ships the round state to the
tasks, runs the per-partition function (which it owns, with the timings and
token counts), returns the unmerged partial statistics, and the skeleton
(:mod:`sparklda.training`) merges them and calls :meth:`Mode.update`.

Two kinds of mode:

* **stateless** (SCVB0, SVB): a round's tasks call
  ``kernel(value, block) -> rows``, the (U, width) statistics of the block's
  U distinct terms, against the round value ``value``;
* **stateful** (CVB0, CVB, ``stateful = True``): each block carries a state
  between rounds (γ). ``init_state(value, block) -> state`` builds it once,
  ``kernel(value, block, state) -> new state`` advances it one round, and
  ``statistics(block, state) -> rows`` gives the block's statistics from a
  state. The executor keeps the states with the cached blocks and cuts their
  lineage with a periodic checkpointer.

Every function a mode hands out is built from plain values (arrays,
numbers), never from ``self``, so what is shipped to the tasks stays small.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

import numpy as np

from ..kernels.random import Stream
from ..params import TrainParams
from ..stats import TopicStats

#: ``kernel(value, block) -> rows`` of a stateless mode.
StatelessKernel = Callable[[Any, Any], np.ndarray]
#: ``kernel(value, block, state) -> state`` of a stateful mode.
StatefulKernel = Callable[[Any, Any, Any], Any]


class Mode:
    """One inference algorithm on the shared round skeleton.

    Subclasses set ``name`` and implement :meth:`round_value`,
    :meth:`kernel`, :meth:`update` and :meth:`topic_word`; stateful ones
    also :meth:`init_value`, :meth:`init_state`, :meth:`statistics` and
    :meth:`set_initial`.

    ``corpus`` is used for its layout and counts only (``n_slices``,
    ``parts_per_slice``, ``slice_docs``, ``slice_tokens``, ``n_train_docs``,
    ``n_train_tokens``, ``n_train_pairs``, ``vocab_size``), never for its
    distributed data.
    """

    name: ClassVar[str] = "base"
    stateful: ClassVar[bool] = False

    def __init__(self, corpus, params: TrainParams, initial_topic_word=None):
        self.corpus = corpus
        self.params = params
        self.dtype = np.dtype(params.dtype)
        self.tokens_seen = 0.0
        self.docs_seen = 0

    # -- the round plan -------------------------------------------------
    @property
    def n_partitions(self) -> int:
        return int(self.corpus.n_slices * self.corpus.parts_per_slice)

    @property
    def rounds_per_pass(self) -> int:
        return int(self.corpus.n_slices)

    def slice_of_round(self, t: int) -> int:
        """Slices are visited in a seeded random order, new each pass."""
        s = self.corpus.n_slices
        order = np.random.default_rng([self.params.seed, Stream.SLICE_ORDER, t // s]).permutation(s)
        return int(order[t % s])

    def round_partitions(self, t: int) -> list[int]:
        """The partitions round ``t`` runs on (a stateful mode runs on all)."""
        if self.stateful:
            return list(range(self.n_partitions))
        s = self.slice_of_round(t)
        p = self.corpus.parts_per_slice
        return list(range(s * p, (s + 1) * p))

    # -- per round -------------------------------------------------------
    def round_value(self, t: int) -> Any:
        """The state round ``t``'s tasks read (the executor ships it to them)."""
        raise NotImplementedError

    def kernel(self, t: int) -> Callable:
        """Round ``t``'s per-block kernel call (see the module docstring)."""
        raise NotImplementedError

    def update(self, stats: TopicStats, t: int) -> dict:
        """Apply round ``t``'s merged statistics; return what the round record shows."""
        raise NotImplementedError

    def topic_word(self) -> np.ndarray:
        """(V, K) topic-word statistics N^Φ such that φ̂ ∝ N^Φ + η per topic."""
        raise NotImplementedError

    # -- stateful modes ----------------------------------------------------
    def init_value(self) -> Any:
        """The value :meth:`init_state` reads (for example a warm start's φ̂)."""
        return None

    def init_state(self) -> Callable:
        """``init_state(value, block) -> state``: a block's state before round 0."""
        raise NotImplementedError

    def statistics(self) -> Callable:
        """``statistics(block, state) -> rows``: the block's statistics from its state."""
        raise NotImplementedError

    def set_initial(self, stats: TopicStats) -> None:
        """Take the merged statistics of the initial states."""
        raise NotImplementedError

    # -- checkpoints -------------------------------------------------------
    def state(self) -> dict[str, Any]:
        """The driver state the next round depends on: numpy arrays and JSON scalars
        (nested dicts of them allowed). :meth:`restore` of it continues bit for bit."""
        return {"tokens_seen": self.tokens_seen, "docs_seen": self.docs_seen}

    def restore(self, state: dict[str, Any]) -> None:
        self.tokens_seen = float(state["tokens_seen"])
        self.docs_seen = int(state["docs_seen"])

    def report(self) -> dict:
        return {}
