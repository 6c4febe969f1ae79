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

from ..errors import ParamError
from ..kernels.priors import minka_eta
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
    #: Kernel groups (:data:`sparklda.kernels.warm.WARMERS`) a round's tasks and the
    #: driver's update call, loaded ahead of the first round (docs/architecture.md,
    #: "Startup: kernels compile once per machine").
    task_kernels: ClassVar[tuple[str, ...]] = ("merge",)
    driver_kernels: ClassVar[tuple[str, ...]] = ("merge",)

    def __init__(self, corpus, params: TrainParams, initial_topic_word=None):
        self.corpus = corpus
        self.params = params
        self.dtype = np.dtype(params.dtype)
        self.tokens_seen = 0.0
        self.docs_seen = 0
        #: α (a K-vector, float64) and η as they stand: the given priors, or the learned
        #: ones with ``optimize_alpha`` / ``optimize_eta`` (docs/architecture.md, "Learned priors").
        self.alpha = np.full(params.k, float(params.alpha))
        self.eta = float(params.eta)
        #: seeded topics: the seeded terms (sorted) and their (S, K) extra pseudo-counts
        self.seed_terms, self.seed_rows = seed_boost(params, corpus)

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

    # -- priors -----------------------------------------------------------
    @property
    def seeded(self) -> bool:
        return len(self.seed_terms) > 0

    def seed_totals(self) -> np.ndarray:
        """Σ_w of the seeds' pseudo-counts per topic (what the denominators N^Z + Wη get)."""
        return self.seed_rows.sum(axis=0)

    def with_seeds(self, topic_word: np.ndarray) -> np.ndarray:
        """``topic_word`` (V, K) plus the seeds' pseudo-counts (a copy when seeded)."""
        if not self.seeded:
            return topic_word
        out = np.array(topic_word, dtype=np.float64, copy=True)
        out[self.seed_terms] += self.seed_rows
        return out

    #: Whether learning a prior waits for the burn-in passes (:meth:`prior_burnin`).
    prior_waits: ClassVar[bool] = True

    def prior_burnin(self) -> int:
        """Passes before a learned prior moves: the first quarter of the run, at least
        one pass (docs/architecture.md, "Learned priors"). Until then the topics are
        close to their random start, and the fixed point read on them takes the
        random start's spread-out assignments for a large α or η, which the next
        rounds' assignments then inherit. 0 for a mode whose ``prior_waits`` is False."""
        if not self.prior_waits:
            return 0
        return max(1, int(self.params.passes) // 4)

    def learns_priors(self, t: int) -> bool:
        """Whether round ``t``'s update moves the learned priors (past the burn-in)."""
        return t // self.rounds_per_pass >= self.prior_burnin()

    def learn_eta(self, topic_word: np.ndarray, t: int) -> None:
        """With ``optimize_eta``, after the burn-in: η from Minka's fixed point on the
        statistics ``topic_word``."""
        if self.params.optimize_eta and self.learns_priors(t):
            self.eta = minka_eta(topic_word, self.eta)

    def prior_report(self) -> dict[str, Any]:
        """What a round record shows of learned priors."""
        out: dict[str, Any] = {}
        if self.params.optimize_alpha:
            out["alpha_sum"] = float(self.alpha.sum())
        if self.params.optimize_eta:
            out["eta"] = self.eta
        return out

    # -- checkpoints -------------------------------------------------------
    def state(self) -> dict[str, Any]:
        """The driver state the next round depends on: numpy arrays and JSON scalars
        (nested dicts of them allowed). :meth:`restore` of it continues bit for bit."""
        return {
            "tokens_seen": self.tokens_seen,
            "docs_seen": self.docs_seen,
            "alpha": self.alpha,
            "eta": self.eta,
        }

    def restore(self, state: dict[str, Any]) -> None:
        self.tokens_seen = float(state["tokens_seen"])
        self.docs_seen = int(state["docs_seen"])
        if "alpha" in state:  # checkpoints written before learned priors have none
            self.alpha = np.array(state["alpha"], dtype=np.float64).reshape(self.params.k)
            self.eta = float(state["eta"])

    def report(self) -> dict:
        return {}


# --------------------------------------------------------------------------
# Per-block statistics beside the rows, and seeded topics


def with_extras(rows: np.ndarray, extras: np.ndarray) -> np.ndarray:
    """``rows`` (U, W) with ``len(extras)`` more columns, float64: ``extras`` in the first
    row, zeros below. A block's small additive statistics (a learned prior's) travel
    this way beside its topic-word rows, so every executor merges them with the rows
    (a float64 sum in partition order) and the column sums of the merged extra columns
    are their totals (:func:`split_extras`). A block with no terms has no row to carry
    them; its documents are empty and add nothing to those statistics."""
    out = np.zeros((rows.shape[0], rows.shape[1] + len(extras)), dtype=np.float64)
    out[:, : rows.shape[1]] = rows
    if rows.shape[0]:
        out[0, rows.shape[1] :] = extras
    return out


def split_extras(rows: np.ndarray, width: int) -> tuple[np.ndarray, np.ndarray]:
    """(the first ``width`` columns, the column sums of the others) of merged rows."""
    return np.ascontiguousarray(rows[:, :width]), rows[:, width:].sum(axis=0)


def seed_boost(params: TrainParams, corpus) -> tuple[np.ndarray, np.ndarray]:
    """The seeded topics' pseudo-counts as sparse rows: (sorted term ids (S,), (S, K)).

    Seed word w of topic k gets b_wk = c · (C/K) / n_k: ``seed_confidence`` c of the
    topic's expected tokens C/K (C the training tokens), shared evenly by its n_k seed
    words (docs/architecture.md, "Seeded topics"). Words given as str are looked up in
    the corpus's vocabulary; ints are term ids. Raises ParamError naming unknown words.
    """
    k = params.k
    seeds = params.seed_topics or {}
    if not seeds:
        return np.zeros(0, dtype=np.int64), np.zeros((0, k), dtype=np.float64)
    vocab = getattr(corpus, "vocab", None)
    v = int(corpus.vocab_size)
    index = {w: i for i, w in enumerate(vocab)} if vocab is not None else None
    per_topic = params.seed_confidence * float(corpus.n_train_tokens) / k
    cells: dict[tuple[int, int], float] = {}
    unknown: list = []
    for topic, words in seeds.items():
        t = int(topic)
        ids = []
        for w in words:
            if isinstance(w, str):
                if index is None:
                    raise ParamError(
                        f"The 'seed_topics' parameter gives topic {t} the word {w!r}, but the "
                        f"corpus has no vocabulary: give term ids (ints) instead."
                    )
                if w not in index:
                    unknown.append(w)
                    continue
                ids.append(index[w])
            else:
                if int(w) >= v:
                    unknown.append(int(w))
                    continue
                ids.append(int(w))
        ids = sorted(set(ids))
        for i in ids:
            cells[(i, t)] = cells.get((i, t), 0.0) + per_topic / len(ids)
    if unknown:
        raise ParamError(
            f"The 'seed_topics' parameter names words outside the corpus's vocabulary of "
            f"{v} terms: {unknown!r}."
        )
    terms = np.array(sorted({w for w, _ in cells}), dtype=np.int64)
    rows = np.zeros((len(terms), k), dtype=np.float64)
    pos = {w: i for i, w in enumerate(terms.tolist())}
    for (w, t), b in cells.items():
        rows[pos[w], t] += b
    return terms, rows


def add_seed_rows(
    rows: np.ndarray, block_terms: np.ndarray, seed_terms: np.ndarray, seed_rows: np.ndarray
) -> None:
    """``rows[i] += seed_rows[j]`` where ``block_terms[i] == seed_terms[j]`` (in place;
    both term lists sorted): the seeds' pseudo-counts of a block's seeded terms."""
    if not len(seed_terms) or not len(block_terms):
        return
    pos = np.minimum(np.searchsorted(seed_terms, block_terms), len(seed_terms) - 1)
    hit = seed_terms[pos] == block_terms
    if hit.any():
        rows[hit] += seed_rows[pos[hit]].astype(rows.dtype)
