"""The mode contract: what an inference algorithm supplies to the round skeleton.

A mode is its round state, its per-block kernel call and its update rule
(docs/architecture.md, "The mode contract"). It never touches Spark: the
execution layer (:mod:`sparklda.execution`) ships the round state to the
tasks, runs the per-partition function (which it owns, with the timings and
token counts), returns the unmerged partial statistics, and the skeleton
(:mod:`sparklda.training`) merges them and calls :meth:`Mode.update`.

Two kinds of mode:

* **stateless** (:class:`Mode`: SCVB0, SVB): a round's tasks call
  ``kernel(value, block) -> rows``, the (U, width) statistics of the block's
  U distinct terms, against the round value ``value``;
* **stateful** (:class:`StatefulMode`: CVB0, CVB): each block carries a state
  of the mode's type ``S`` between rounds (CVB0's γ). ``init_state(value, block)
  -> S`` builds it once, ``kernel(value, block, S) -> S`` advances it one round,
  and ``statistics(block, S) -> rows`` gives the block's statistics from a
  state. The executor keeps the states with the cached blocks and cuts their
  lineage with a periodic checkpointer.

Every function a mode hands out is built from plain values (arrays,
numbers), never from ``self``, so what is shipped to the tasks stays small.

Adding a mode: its ``modes/x.py`` (a subclass of :class:`Mode` or
:class:`StatefulMode`), its kernel in :mod:`sparklda.kernels` (with a warmer in
:data:`sparklda.kernels.warm.WARMERS` named by ``task_kernels``), and its entry in
:data:`sparklda.modes.MODES`. Its name and the parameters only it reads go in the
parameter table (:mod:`sparklda.params`, below this layer); ``tests/test_registry.py``
checks that every table agrees with the registry.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import Any, ClassVar, Generic, TypeVar

import numpy as np

from ..execution.learned_eta import pass_sums_step
from ..execution.topics import ShardedTopics
from ..kernels.random import Stream
from ..params import TrainParams
from ..stats import TopicStats, normalize_topics
from .priors import Priors
from .seeds import Seeds

#: ``kernel(value, block) -> rows`` of a stateless mode.
StatelessKernel = Callable[[Any, Any], np.ndarray]
#: The per-block state of a stateful mode (its type parameter).
S = TypeVar("S")


class Mode(ABC):
    """One inference algorithm on the shared round skeleton (a stateless one: see
    :class:`StatefulMode` for modes that keep per-block state).

    Subclasses set ``name`` and ``title`` and implement :meth:`round_value`,
    :meth:`kernel`, :meth:`update` and :meth:`topic_word`; a mode with driver state
    of its own extends :meth:`state` and :meth:`restore`.

    ``corpus`` is used for its layout and counts only (``n_slices``,
    ``parts_per_slice``, ``slice_docs``, ``slice_tokens``, ``n_train_docs``,
    ``n_train_tokens``, ``n_train_pairs``, ``vocab_size``), never for its
    distributed data.
    """

    #: The algorithm's name: the 'algorithm' parameter's value and the registry key.
    name: ClassVar[str] = "base"
    #: One line on what the algorithm is (the ``pyspark.ml`` Param docs and the CLI show it).
    title: ClassVar[str] = ""
    stateful: ClassVar[bool] = False
    #: Kernel groups (:data:`sparklda.kernels.warm.WARMERS`) a round's tasks and the
    #: driver's update call, loaded ahead of the first round (docs/architecture.md,
    #: "Startup: kernels compile once per machine").
    task_kernels: ClassVar[tuple[str, ...]] = ("merge",)
    driver_kernels: ClassVar[tuple[str, ...]] = ("merge",)
    #: Whether learning a prior waits for the burn-in passes (:meth:`Priors.burnin`).
    prior_waits: ClassVar[bool] = True
    #: Whether the mode takes the 'seed_topics' parameter (:mod:`sparklda.modes.seeds`).
    takes_seed_topics: ClassVar[bool] = False
    #: Whether a fit without ``minibatch_size`` lays the corpus out for a mode whose every
    #: round sweeps every block: one slice, a block per task of the round
    #: (:func:`sparklda.params.default_batch_minibatch_size`).
    batch_layout: ClassVar[bool] = False
    #: Named variants ``python -m sparklda compare`` trains besides the mode itself:
    #: name -> the parameters that make the variant (e.g. SVB's batch VB).
    variants: ClassVar[dict[str, dict[str, Any]]] = {}

    def __init__(self, corpus, params: TrainParams, initial_topic_word=None):
        self.corpus = corpus
        self.params = params
        self.dtype = np.dtype(params.dtype)
        self.tokens_seen = 0.0
        self.docs_seen = 0
        #: α and η as they stand (docs/architecture.md, "Learned priors")
        self.priors = Priors(params, waits=self.prior_waits)
        #: seeded topics' pseudo-counts (empty unless ``seed_topics``)
        self.seeds = Seeds.of(params, corpus)

    @property
    def alpha(self) -> np.ndarray:
        """α as it stands, a K-vector (float64)."""
        return self.priors.alpha

    @alpha.setter
    def alpha(self, value: np.ndarray) -> None:
        self.priors.alpha = value

    @property
    def eta(self) -> float:
        """η as it stands."""
        return self.priors.eta

    @eta.setter
    def eta(self, value: float) -> None:
        self.priors.eta = value

    # -- the round plan -------------------------------------------------
    @property
    def n_partitions(self) -> int:
        return int(self.corpus.n_slices * self.corpus.parts_per_slice)

    @property
    def rounds_per_pass(self) -> int:
        return int(self.corpus.n_slices)

    def pass_of(self, t: int) -> int:
        """The pass (from 0) round ``t`` belongs to."""
        return t // self.rounds_per_pass

    def slice_of_round(self, t: int) -> int:
        """Slices are visited in a seeded random order, new each pass."""
        s = self.corpus.n_slices
        order = np.random.default_rng([self.params.seed, Stream.SLICE_ORDER, t // s]).permutation(s)
        return int(order[t % s])

    def round_partitions(self, t: int) -> list[int]:
        """The partitions round ``t`` runs on: its slice's."""
        s = self.slice_of_round(t)
        p = self.corpus.parts_per_slice
        return list(range(s * p, (s + 1) * p))

    # -- per round -------------------------------------------------------
    @abstractmethod
    def round_value(self, t: int) -> Any:
        """The state round ``t``'s tasks read (the executor ships it to them)."""

    @abstractmethod
    def kernel(self, t: int) -> Callable:
        """Round ``t``'s per-block kernel call: ``kernel(value, block) -> rows``
        (:data:`StatelessKernel`; a stateful mode's takes and returns the state)."""

    @abstractmethod
    def update(self, stats: TopicStats, t: int) -> dict:
        """Apply round ``t``'s merged statistics; return what the round record shows."""

    @abstractmethod
    def topic_word(self) -> np.ndarray:
        """(V, K) topic-word statistics N^Φ such that φ̂ ∝ N^Φ + η per topic."""

    # -- the model on the executors (model_placement "executors") -----------------
    #: The key of :meth:`state` whose V×K array lives on the executors under
    #: ``model_placement="executors"``: :meth:`state` leaves it out while they hold it
    #: and a checkpoint writes their shards instead (docs/architecture.md, "The model on
    #: the executors"); None for a mode whose model always lives on the driver.
    sharded_key: ClassVar[str | None] = None
    #: Set by the executor holding the sharded statistics: a function giving them as
    #: :class:`~sparklda.execution.topics.ShardedTopics` (lazy), mapped by its argument.
    held_topics: Callable[..., ShardedTopics] | None = None

    #: Set by the executor holding a learned η's pass sums beside the rows (the online
    #: modes: :meth:`~sparklda.modes.priors.Priors.learn_eta_pass`), as ShardedTopics.
    held_pass_sums: Callable[[], ShardedTopics] | None = None
    #: Whether ``optimize_eta`` learns η from a pass's own sums (SCVB0, SVB).
    eta_from_pass_sums: ClassVar[bool] = False

    def keeps_pass_sums(self) -> bool:
        """Whether the executors keep a learned η's pass sums beside the rows."""
        sharded = getattr(self, "sharded", False)
        return bool(self.eta_from_pass_sums and self.params.optimize_eta and sharded)

    def pass_sums_start(self) -> np.ndarray | ShardedTopics | None:
        """The pass sums the executor shards (a checkpoint's; None: zeros), handed over."""
        start, self.priors.eta_pass = self.priors.eta_pass, None
        return start

    def pass_sums_step(self, t: int) -> Callable | None:
        """Round ``t``'s update of each shard's pass sums (:func:`pass_sums_step`: zeroed
        at a pass's first round, the round's merged rows added); None without them."""
        if not self.keeps_pass_sums():
            return None
        return pass_sums_step(t % self.rounds_per_pass == 0, int(self.params.k))

    def shard_topic_word(self) -> Callable[[int, np.ndarray], np.ndarray]:
        """``rows(first term, shard's rows of the sharded state) -> its rows of
        :meth:`topic_word``` (only modes with a ``sharded_key``)."""
        raise NotImplementedError(f"{self.name} keeps its model on the driver")

    def topic_word_shards(self) -> ShardedTopics | None:
        """:meth:`topic_word` as :class:`ShardedTopics` when the executors hold the model
        (None when the driver holds it: then :meth:`topic_word` is the array)."""
        start = getattr(self, "start_base", None)
        if self.sharded_key is None or not getattr(self, "sharded", False):
            return None
        if isinstance(start, ShardedTopics):
            return start.map_rows(self.shard_topic_word())
        if start is None and self.held_topics is not None:
            return self.held_topics(self.shard_topic_word())
        return None

    def state_on_executors(self) -> bool:
        """Whether the :data:`sharded_key` state lives on the executors now."""
        return self.topic_word_shards() is not None

    def count_seen(self, stats: TopicStats) -> float:
        """Add a round's training tokens and documents (``stats.extra``) to what the mode
        has seen; return the round's tokens."""
        tokens = float(stats.extra.get("tokens", 0.0))
        self.tokens_seen += tokens
        self.docs_seen += int(stats.extra.get("docs", 0))
        return tokens

    # -- checkpoints -------------------------------------------------------
    def state(self) -> dict[str, Any]:
        """The driver state the next round depends on: numpy arrays and JSON scalars
        (nested dicts of them allowed). :meth:`restore` of it continues bit for bit."""
        return {
            "tokens_seen": self.tokens_seen,
            "docs_seen": self.docs_seen,
            **self.priors.state(),
        }

    def restore(self, state: dict[str, Any]) -> None:
        self.tokens_seen = float(state["tokens_seen"])
        self.docs_seen = int(state["docs_seen"])
        self.priors.restore(state)

    def report(self) -> dict:
        """What the training report shows of the mode."""
        return {}


class StatefulMode(Mode, Generic[S]):
    """A mode whose blocks keep a state of type ``S`` between rounds (CVB0's γ).

    Every round runs on every partition. Before round 0 the executor builds each
    block's state with :meth:`init_state` (reading :meth:`init_value`) and hands the
    merged :meth:`statistics` of those states to :meth:`set_initial`; each round's
    :meth:`kernel` is ``kernel(value, block, state) -> state`` and the round's
    statistics are :meth:`statistics` of the new states.
    """

    stateful: ClassVar[bool] = True

    def __init__(self, corpus, params: TrainParams, initial_topic_word=None):
        super().__init__(corpus, params, initial_topic_word)
        self.k = params.k
        self.v = corpus.vocab_size
        #: a warm start's topic-word matrix, which :meth:`init_state` starts the blocks from
        self.initial_topic_word = initial_topic_word

    def round_partitions(self, t: int) -> list[int]:
        """Every partition."""
        return list(range(self.n_partitions))

    @property
    def rounds_per_pass(self) -> int:
        """One: every round sweeps every block."""
        return 1

    def init_value(self) -> Any:
        """The value :meth:`init_state` reads: a warm start's φ̂ in the mode's dtype, or
        None."""
        if self.initial_topic_word is None:
            return None
        return normalize_topics(self.initial_topic_word, self.params.eta).astype(self.dtype)

    @abstractmethod
    def init_state(self) -> Callable[[Any, Any], S]:
        """``init_state(value, block) -> state``: a block's state before round 0."""

    @abstractmethod
    def kernel(self, t: int) -> Callable[[Any, Any, S], S]:
        """``kernel(value, block, state) -> state``: round ``t`` on a block."""

    def state_rows(self) -> Callable[[Any], int]:
        """``rows(block) -> int``: the rows a block's state has, which a state read back
        from a checkpoint must have: one per (document, term) pair (CVB0's γ) unless the
        mode says otherwise (Gibbs: one per token)."""
        return pair_rows

    @abstractmethod
    def statistics(self) -> Callable[[Any, S], np.ndarray]:
        """``statistics(block, state) -> rows``: the block's statistics from its state."""

    def kept_state(self) -> Callable[[Any, S], Any] | None:
        """``keep(block, state) -> kept``: what the executors keep of a block's state
        between rounds once its statistics are counted (None: all of it). The next
        round's kernel and the checkpoints get the kept state, whose rows are
        :meth:`state_rows`; :meth:`statistics` needs the whole one."""
        return None

    @abstractmethod
    def set_initial(self, stats: TopicStats) -> None:
        """Take the merged statistics of the initial states."""


def pair_rows(block) -> int:
    """The (document, term) pairs of a block: a per-pair state's rows."""
    return int(block.nnz)
