"""Training parameters: one table of names, types, ranges and uses, and one validator.

:data:`CONSTRAINTS` declares every field of :class:`TrainParams` (type, range,
the algorithms that read it, a one-line doc). :func:`validate_params` checks a
mapping against it and is the only validator: :meth:`TrainParams.validate`,
the ``pyspark.ml`` layer (:mod:`sparklda.ml`, which maps pyspark's Param names
onto these and reports errors under pyspark's names) and the jobs all call
it. Every message has one form::

    The 'k' parameter of LDA must be an int in the range [2, inf). Got 50.0 instead.

Integers must be real ints (``int`` or a numpy integer, never a float or a
bool); floats accept ints and must be finite unless the table allows inf.
Besides the per-value checks, the step schedules of the algorithm in use must
start with a step of at most 1 (:data:`FIRST_STEPS`); other algorithms' schedules
are not checked.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from .errors import ParamError

ALGORITHMS = ("scvb0", "cvb0", "cvb", "svb")
#: How rounds run (the 'execution' parameter; docs/architecture.md, "Spark Connect path").
EXECUTIONS = ("auto", "classic", "dataframe")
#: α, the document-topic prior, when none is given (pyspark's "auto" maps here too).
DEFAULT_ALPHA = 0.1
#: η, the topic-word prior, when none is given.
DEFAULT_ETA = 0.01
#: Upper end of the documented range of α and η.
MAX_PRIOR = 1e4


#: The default minibatch: at least this many documents per round ...
MIN_DEFAULT_MINIBATCH = 2000
#: ... and at least this many per task, so each task keeps enough documents ...
DEFAULT_DOCS_PER_TASK = 1000
#: ... and, on large corpora, no more than this many rounds per pass.
MAX_DEFAULT_ROUNDS_PER_PASS = 50


def default_minibatch_size(tasks_per_round: int, n_train_docs: int = 0) -> int:
    """The minibatch size when none is set:
    ``max(2000, 1000 × tasks_per_round, ceil(n_train_docs / MAX_DEFAULT_ROUNDS_PER_PASS))``
    (50 rounds).

    ``tasks_per_round`` is ``parts_per_slice`` (by default the cluster's default
    parallelism), so the documents per task, which set how much of a round the
    kernel is, stay at 1000 or more as the cluster grows. ``n_train_docs`` (the
    training documents, known once the corpus is read) caps the rounds of a pass on
    large corpora, where a round's fixed cost of Spark work would otherwise be paid
    hundreds of times a pass; SCVB0's per-document step schedule keeps the quality of
    a pass at that size (docs/architecture.md, "Corpus layout")."""
    if tasks_per_round < 1:
        raise ValueError(f"tasks_per_round must be at least 1, got {tasks_per_round}")
    return max(
        MIN_DEFAULT_MINIBATCH,
        DEFAULT_DOCS_PER_TASK * int(tasks_per_round),
        -(-max(int(n_train_docs), 0) // MAX_DEFAULT_ROUNDS_PER_PASS),
    )


#: The paper's ρ^Φ schedule counts minibatches of this many documents ...
PAPER_SCHEDULE_MINIBATCH = 100
#: ... and the automatic one (``schedule_minibatch`` 0) counts 1/200 of the training
#: documents, when that is fewer: the paper's τ = 1000 steps are then 5 passes ...
AUTO_SCHEDULE_STEPS_PER_PASS = 200
#: ... but never fewer than this many documents per step (corpora under 4,000
#: training documents: docs/architecture.md, "Step schedules").
AUTO_SCHEDULE_MIN_DOCS = 20


def schedule_minibatch_docs(schedule_minibatch: int, n_train_docs: int) -> float:
    """M0, the documents per step t of SCVB0's ρ^Φ schedule (docs/architecture.md,
    "Step schedules").

    A positive ``schedule_minibatch`` is taken as it is. 0 (the default) gives
    ``min(100, max(20, n_train_docs / 200))``: the paper's 100 documents on corpora of
    20,000 training documents or more; on smaller ones the paper's schedule compressed
    so that it takes as many passes as on 20,000 documents, down to 20 documents per
    step."""
    if schedule_minibatch > 0:
        return float(schedule_minibatch)
    return min(
        float(PAPER_SCHEDULE_MINIBATCH),
        max(
            float(AUTO_SCHEDULE_MIN_DOCS),
            max(int(n_train_docs), 1) / AUTO_SCHEDULE_STEPS_PER_PASS,
        ),
    )


@dataclass
class TrainParams:
    """Parameters of a training run (all modes); :data:`CONSTRAINTS` has their ranges.

    Symbols are those of Foulds et al. (2013) unless stated.
    """

    algorithm: str = "scvb0"
    #: K, the number of topics.
    k: int = 10
    #: α, the document-topic Dirichlet prior (pyspark: docConcentration).
    alpha: float = DEFAULT_ALPHA
    #: η, the topic-word Dirichlet prior (pyspark: topicConcentration).
    eta: float = DEFAULT_ETA
    #: Passes over the training corpus (SCVB0/SVB) or iterations (CVB0/CVB).
    passes: int = 20
    #: Stop after this many seconds from the start of fit (checked between rounds, at
    #: least one round runs; evaluation time excluded); 0 or inf = no limit.
    time_budget: float = 0.0
    #: Documents per round (|M|); the corpus is cut into minibatch slices of this size.
    #: 0 = :func:`default_minibatch_size` of the tasks per round and the training
    #: documents: 2000 (see docs/benchmarks.md, "Minibatch size"), 1000 per task on
    #: larger clusters, and at most 50 rounds a pass on large corpora.
    minibatch_size: int = 0
    #: SCVB0 burn-in passes over each document before the accumulating pass
    #: (docs/architecture.md, "SCVB0: the token's own share").
    burnin: int = 2
    #: SCVB0: compute each token's γ from N^Θ_j without the token's own share, as CVB0
    #: does (docs/architecture.md, "SCVB0: the token's own share"); false = Eq. 5 as
    #: printed, which lets a short document's tokens reinforce their own topics.
    exclude_token: bool = True
    #: ρ^Φ = s/(τ+t)^κ per minibatch of ``schedule_minibatch`` documents
    #: (paper: 10, 1000, 0.9, 100). ``schedule_minibatch`` 0 = adapt to the corpus:
    #: :func:`schedule_minibatch_docs` (docs/architecture.md, "Step schedules").
    s_phi: float = 10.0
    tau_phi: float = 1000.0
    kappa_phi: float = 0.9
    schedule_minibatch: int = 0
    #: ρ^Θ = s/(τ+t)^κ over a document's tokens (paper: 1, 10, 0.9).
    s_theta: float = 1.0
    tau_theta: float = 10.0
    kappa_theta: float = 0.9
    #: SVB: ρ = (τ0 + t)^-κ (Hoffman et al.; pyspark learningOffset, learningDecay); the
    #: defaults are scikit-learn's (τ0 = 10, κ = 0.7, t counting minibatches of 128).
    learning_offset: float = 10.0
    learning_decay: float = 0.7
    #: SVB: t in ρ_t counts minibatches of this many documents, a round of M documents
    #: taking the M/``learning_minibatch`` steps at once (0: one step per round, Algorithm 2
    #: as written; docs/architecture.md, "Step schedules").
    learning_minibatch: int = 128
    #: SVB: batch VB when true (minibatch = corpus and ρ = 1).
    batch: bool = False
    #: SVB E-step: mean |Δγ| threshold and iteration cap.
    estep_tol: float = 1e-3
    estep_max_iter: int = 100
    #: Seed of every random choice (initialisation, splits, order).
    seed: int = 0
    #: Floating point type of the kernels and broadcasts: float32 or float64.
    dtype: str = "float32"
    #: Evaluate held-out quality every n rounds (0: only at the end).
    eval_every: int = 0
    #: Held-out documents: a seeded fraction, or a count (count wins when > 0).
    heldout_fraction: float = 0.0
    heldout_count: int = 0
    #: Partitions (tasks) per round; 0 = the cluster's default parallelism.
    parts_per_slice: int = 0
    #: Where a round's partial statistics are merged: "executors" (by term shard, one
    #: shuffle; the driver receives one copy of the merged rows), "driver" (every task's
    #: partial reaches the driver) or "auto" (executors when a round has more than 8
    #: tasks). The same model either way (docs/architecture.md).
    combine: str = "auto"
    #: Fold-in iterations for evaluation and transform.
    foldin_max_iter: int = 100
    #: How rounds run: "classic" (RDDs, broadcasts), "dataframe" (DataFrames only, as
    #: Spark Connect needs) or "auto" (dataframe under Spark Connect, classic otherwise).
    execution: str = "auto"
    #: Checkpoint every n rounds (0: never): the driver state to ``checkpoint_dir`` when it
    #: is set (every mode; resume continues from it), and for CVB0/CVB also the lineage of
    #: their γ blocks (Spark's checkpointInterval).
    checkpoint_interval: int = 10
    #: Directory (any Spark file system) of the resumable training checkpoints ("": none).
    checkpoint_dir: str = ""
    #: Also checkpoint when this many seconds passed since the last one (0: by rounds only).
    checkpoint_seconds: float = 0.0
    #: Keep the last checkpoint after training succeeds (pyspark's keepLastCheckpoint).
    keep_checkpoint: bool = True
    #: Learn an asymmetric α (a K-vector) from the data, starting at ``alpha``
    #: (pyspark: optimizeDocConcentration; docs/architecture.md, "Learned priors").
    optimize_alpha: bool = False
    #: With ``optimize_alpha``: learn α's total α0 as well; without it α0 stays K·``alpha``
    #: and the fixed point (SVB: Hoffman's step) learns how it is shared among topics.
    optimize_alpha_sum: bool = False
    #: Learn a symmetric η from the topic-word statistics, starting at ``eta``.
    optimize_eta: bool = False
    #: Seeded topics: topic -> seed words (terms, or term ids); their (topic, word) pairs get
    #: extra pseudo-counts (docs/architecture.md, "Seeded topics"). SCVB0 and CVB0 only.
    seed_topics: dict[str, list[Any]] = field(default_factory=dict)
    #: Strength of the seeds: the fraction of a seeded topic's expected tokens (C/K) added
    #: as pseudo-counts, shared evenly by its seed words.
    seed_confidence: float = 0.1
    #: Early stopping: stop when the held-out per-token log-likelihood gains less than this
    #: many nats per pass for ``patience`` consecutive evaluations (0: never stop early).
    #: Needs held-out documents and ``eval_every``.
    min_gain: float = 0.0
    #: Consecutive evaluations below ``min_gain`` that stop training.
    patience: int = 1

    def to_dict(self) -> dict[str, Any]:
        """The fields as a dict, ``seed_topics`` in the form it reads back from JSON
        (topic numbers as str keys, lists of words)."""
        out = asdict(self)
        if isinstance(self.seed_topics, Mapping):
            out["seed_topics"] = {
                _seed_key(t): [_seed_word(w) for w in ws] if isinstance(ws, (list, tuple)) else ws
                for t, ws in self.seed_topics.items()
            }
        return out

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> TrainParams:
        """TrainParams from a mapping of field names (not validated: call :meth:`validate`);
        an unknown key raises :class:`~sparklda.errors.ParamError`."""
        _refuse_unknown(d, "LDA")
        return cls(**d)

    def validate(self) -> TrainParams:
        """Check every field with :func:`validate_params`; raise ParamError, else return self."""
        _check_values(asdict(self), "LDA", {})
        return self


# --------------------------------------------------------------------------
# The table


@dataclass(frozen=True)
class Constraint:
    """What one parameter accepts.

    ``type`` is ``int``, ``float``, ``str`` or ``bool``. Numbers must lie in
    the range from ``low`` to ``high`` (None: unbounded), each end closed
    unless ``low_open``/``high_open``; floats must be finite unless
    ``allow_inf`` (then +inf is accepted). A ``str`` must be one of
    ``options``. ``algorithms`` are the algorithms that read the parameter
    (None: all). ``special`` values are accepted besides the range and
    ``note`` describes them in messages (used by the pyspark layer, e.g.
    ``checkpointInterval=-1``).
    """

    name: str
    type: type
    low: float | None = None
    high: float | None = None
    low_open: bool = False
    high_open: bool = False
    options: tuple[str, ...] | None = None
    algorithms: tuple[str, ...] | None = None
    doc: str = ""
    allow_inf: bool = False
    special: tuple[Any, ...] = field(default=())
    note: str = ""

    def applies_to(self, algorithm: str) -> bool:
        return self.algorithms is None or algorithm in self.algorithms

    def accepts(self, value: Any) -> bool:
        """Whether ``value`` has the right type and lies in the range (or is special)."""
        if self.type is bool:
            return isinstance(value, (bool, np.bool_))
        if self.type is dict:
            return seed_topics_problem(value) is None
        if self.type is str:
            return isinstance(value, str) and (self.options is None or value in self.options)
        if isinstance(value, (bool, np.bool_)):
            return False
        kinds = (int, np.integer) if self.type is int else (int, float, np.integer, np.floating)
        if not isinstance(value, kinds):
            return False
        if value in self.special:
            return True
        if self.type is float:
            try:
                v = float(value)
            except OverflowError:  # an int beyond the floats
                return False
            if math.isnan(v) or (math.isinf(v) and not (self.allow_inf and v > 0)):
                return False
        above_low = (
            self.low is None or value > self.low or (value == self.low and not self.low_open)
        )
        below_high = (
            self.high is None or value < self.high or (value == self.high and not self.high_open)
        )
        return bool(above_low and below_high)

    def describe(self) -> str:
        """What the parameter must be, e.g. ``an int in the range [2, inf)``."""
        if self.type is bool:
            text = "a bool (True or False)"
        elif self.type is dict:
            text = "a mapping {topic: [words]} (topic numbers >= 0, words as str or term ids)"
        elif self.type is str:
            text = f"one of {list(self.options)}" if self.options else "a str"
        else:
            lo = "(-inf" if self.low is None else ("(" if self.low_open else "[") + _num(self.low)
            if self.high is None:
                hi = "inf]" if self.allow_inf else "inf)"
            else:
                hi = _num(self.high) + (")" if self.high_open else "]")
            text = f"{'an int' if self.type is int else 'a float'} in the range {lo}, {hi}"
        return f"{text}, {self.note}" if self.note else text

    def error(self, value: Any, owner: str = "LDA", name: str | None = None) -> ParamError:
        """The ParamError for ``value`` (shown as given) under ``name`` (default: this name)."""
        return ParamError(
            f"The {name or self.name!r} parameter of {owner} must be "
            f"{self.describe()}. Got {value!r} instead."
        )


def _seed_key(t: Any) -> Any:
    if isinstance(t, (int, np.integer)) and not isinstance(t, (bool, np.bool_)):
        return str(int(t))
    return t


def _seed_word(w: Any) -> Any:
    return int(w) if isinstance(w, np.integer) else w


def seed_topics_problem(value: Any, k: int | None = None) -> str | None:
    """Why ``value`` is not a valid ``seed_topics`` (None if it is): a mapping from topic
    numbers (ints, or their decimal strings as a config file gives them) in [0, k) to
    non-empty lists of words (str) or term ids (ints >= 0)."""
    if not isinstance(value, Mapping):
        return "must be a mapping {topic: [words]}"
    for t, words in value.items():
        key = _seed_key(t)
        if not (isinstance(key, str) and key.isdigit()):
            return f"has topic {t!r}, not a topic number"
        if k is not None and int(key) >= k:
            return f"has topic {int(key)}, outside the k={k} topics 0..{k - 1}"
        if not isinstance(words, (list, tuple)) or not words:
            return f"gives topic {t!r} {words!r}, not a non-empty list of words"
        for w in words:
            ok_id = isinstance(w, (int, np.integer)) and not isinstance(w, (bool, np.bool_))
            if not (isinstance(w, str) or (ok_id and w >= 0)):
                return f"gives topic {t!r} the word {w!r}, not a term (str) or term id (int >= 0)"
    return None


def _num(x: Any) -> str:
    if isinstance(x, float) and x.is_integer() and abs(x) < 1e16:
        return str(int(x))
    return str(x)


_SCVB0, _SVB, _CVB = ("scvb0",), ("svb",), ("cvb0", "cvb")
_SEEDED = ("scvb0", "cvb0")

#: Every field of :class:`TrainParams`, in field order.
CONSTRAINTS: tuple[Constraint, ...] = (
    Constraint("algorithm", str, options=ALGORITHMS, doc="Inference algorithm."),
    Constraint("k", int, 2, doc="K, the number of topics."),
    Constraint(
        "alpha",
        float,
        0,
        MAX_PRIOR,
        low_open=True,
        doc="α, the symmetric document-topic Dirichlet prior.",
    ),
    Constraint("eta", float, 0, MAX_PRIOR, low_open=True, doc="η, the topic-word Dirichlet prior."),
    Constraint(
        "passes", int, 1, doc="Passes over the corpus (SCVB0, SVB) or iterations (CVB0, CVB)."
    ),
    Constraint(
        "time_budget",
        float,
        0,
        allow_inf=True,
        doc="Seconds of training before stopping between rounds; 0 or inf: no limit.",
    ),
    Constraint(
        "minibatch_size",
        int,
        0,
        doc="Documents per round (0: max(2000, 1000 × tasks per round, training documents / "
        f"{MAX_DEFAULT_ROUNDS_PER_PASS})).",
    ),
    Constraint(
        "burnin",
        int,
        0,
        algorithms=_SCVB0,
        doc="Burn-in passes over each document before the accumulating pass.",
    ),
    Constraint(
        "exclude_token",
        bool,
        algorithms=_SCVB0,
        doc="Take each token's own share out of N^Θ_j before computing its γ (CVB0's ¬ij).",
    ),
    Constraint(
        "s_phi",
        float,
        0,
        low_open=True,
        algorithms=_SCVB0,
        doc="s of the topic step ρ^Φ = s/(τ+t)^κ.",
    ),
    Constraint(
        "tau_phi", float, 0, low_open=True, algorithms=_SCVB0, doc="τ of the topic step ρ^Φ."
    ),
    Constraint(
        "kappa_phi",
        float,
        0.5,
        1,
        low_open=True,
        algorithms=_SCVB0,
        doc="κ of the topic step ρ^Φ (Robbins-Monro: in (0.5, 1]).",
    ),
    Constraint(
        "schedule_minibatch",
        int,
        0,
        algorithms=_SCVB0,
        doc="Documents per step t of the ρ^Φ schedule "
        "(0: min(100, max(20, training documents / 200))).",
    ),
    Constraint(
        "s_theta",
        float,
        0,
        low_open=True,
        algorithms=_SCVB0,
        doc="s of the document step ρ^Θ = s/(τ+t)^κ over a document's tokens.",
    ),
    Constraint(
        "tau_theta", float, 0, low_open=True, algorithms=_SCVB0, doc="τ of the document step ρ^Θ."
    ),
    Constraint("kappa_theta", float, 0, 1, algorithms=_SCVB0, doc="κ of the document step ρ^Θ."),
    Constraint(
        "learning_offset",
        float,
        0,
        low_open=True,
        algorithms=_SVB,
        doc="τ0 of the SVB step ρ = (τ0+t)^-κ.",
    ),
    Constraint(
        "learning_decay",
        float,
        0.5,
        1,
        low_open=True,
        algorithms=_SVB,
        doc="κ of the SVB step (Robbins-Monro: in (0.5, 1]).",
    ),
    Constraint(
        "learning_minibatch",
        int,
        0,
        algorithms=_SVB,
        doc="Documents per step t of the SVB step ρ (0: one step per round).",
    ),
    Constraint("batch", bool, algorithms=_SVB, doc="SVB: batch VB (one minibatch, ρ = 1)."),
    Constraint(
        "estep_tol",
        float,
        0,
        low_open=True,
        algorithms=_SVB,
        doc="SVB E-step: mean |Δγ| threshold.",
    ),
    Constraint("estep_max_iter", int, 1, algorithms=_SVB, doc="SVB E-step: iteration cap."),
    Constraint("seed", int, 0, 2**63 - 1, doc="Seed of every random choice."),
    Constraint(
        "dtype",
        str,
        options=("float32", "float64"),
        doc="Floating point type of the kernels and broadcasts.",
    ),
    Constraint(
        "eval_every", int, 0, doc="Score the held-out documents every n rounds (0: at the end)."
    ),
    Constraint(
        "heldout_fraction",
        float,
        0,
        1,
        high_open=True,
        doc="Seeded fraction of the documents held out of training.",
    ),
    Constraint("heldout_count", int, 0, doc="Documents held out of training (wins when > 0)."),
    Constraint("parts_per_slice", int, 0, doc="Tasks per round (0: default parallelism)."),
    Constraint(
        "combine",
        str,
        options=("auto", "executors", "driver"),
        doc="Where a round's partial statistics are merged (the same model either way).",
    ),
    Constraint("foldin_max_iter", int, 1, doc="Fold-in iterations of evaluation and transform."),
    Constraint(
        "execution",
        str,
        options=EXECUTIONS,
        doc="Rounds on RDDs ('classic'), DataFrames only ('dataframe') or 'auto' (by session).",
    ),
    Constraint(
        "checkpoint_interval",
        int,
        0,
        doc="Checkpoint every n rounds (0: never): driver state to checkpoint_dir, CVB0/CVB "
        "γ lineage.",
    ),
    Constraint("checkpoint_dir", str, doc="Directory of resumable checkpoints ('': none)."),
    Constraint(
        "checkpoint_seconds",
        float,
        0,
        doc="Also checkpoint after this many seconds since the last one (0: rounds only).",
    ),
    Constraint("keep_checkpoint", bool, doc="Keep the last checkpoint after success."),
    Constraint(
        "optimize_alpha",
        bool,
        doc="Learn an asymmetric α (a K-vector) from the documents' topic statistics.",
    ),
    Constraint(
        "optimize_alpha_sum",
        bool,
        doc="With optimize_alpha: learn α's total too (else it stays K·alpha).",
    ),
    Constraint("optimize_eta", bool, doc="Learn a symmetric η from the topic-word statistics."),
    Constraint(
        "seed_topics",
        dict,
        algorithms=_SEEDED,
        doc="Seeded topics {topic: [words or term ids]} (SCVB0, CVB0).",
    ),
    Constraint(
        "seed_confidence",
        float,
        0,
        MAX_PRIOR,
        algorithms=_SEEDED,
        doc="Fraction of a seeded topic's expected tokens added to its seed words as "
        "pseudo-counts.",
    ),
    Constraint(
        "min_gain",
        float,
        0,
        doc="Early stopping: least held-out log-likelihood gain per pass (nats per token) "
        "that continues training (0: off; needs held-out documents and eval_every).",
    ),
    Constraint(
        "patience",
        int,
        1,
        doc="Early stopping: consecutive evaluations below min_gain that stop training.",
    ),
)

#: name -> :class:`Constraint`.
BY_NAME: dict[str, Constraint] = {c.name: c for c in CONSTRAINTS}


@dataclass(frozen=True)
class FirstStep:
    """A step schedule of ``algorithm`` whose first step must be at most 1.

    ``formula`` names the parameters in braces; ``first`` computes the step
    from the values; ``applies`` says whether the schedule is in use.
    """

    algorithm: str
    names: tuple[str, ...]
    formula: str
    first: Callable[[Mapping[str, Any]], float]
    applies: Callable[[Mapping[str, Any]], bool] = lambda v: True


#: The step schedules checked after the per-value checks (only for their algorithm).
FIRST_STEPS: tuple[FirstStep, ...] = (
    FirstStep(
        "scvb0",
        ("s_phi", "tau_phi", "kappa_phi"),
        "{s_phi}/{tau_phi}^{kappa_phi}",
        lambda v: v["s_phi"] / v["tau_phi"] ** v["kappa_phi"],
    ),
    FirstStep(
        "scvb0",
        ("s_theta", "tau_theta", "kappa_theta"),
        "{s_theta}/{tau_theta}^{kappa_theta}",
        lambda v: v["s_theta"] / v["tau_theta"] ** v["kappa_theta"],
    ),
    FirstStep(
        "svb",
        ("learning_offset", "learning_decay"),
        "{learning_offset}^-{learning_decay}",
        lambda v: v["learning_offset"] ** -v["learning_decay"],
        applies=lambda v: not v["batch"],
    ),
)


# --------------------------------------------------------------------------
# The validator


def check_param(
    constraint: Constraint, value: Any, owner: str = "LDA", name: str | None = None
) -> None:
    """Raise :class:`~sparklda.errors.ParamError` unless ``constraint`` accepts ``value``;
    the message names the parameter as ``name`` (default: the constraint's name)."""
    if not constraint.accepts(value):
        raise constraint.error(value, owner, name)


def validate_params(
    mapping: Mapping[str, Any], owner: str = "LDA", *, aliases: Mapping[str, str] | None = None
) -> TrainParams:
    """Check ``mapping`` (TrainParams field names; missing fields take their defaults)
    against :data:`CONSTRAINTS` and :data:`FIRST_STEPS` and return the TrainParams.

    ``owner`` and ``aliases`` (field -> the caller's name for it, e.g. ``tau_phi`` ->
    ``learningOffset``) only change how messages name things. Raises
    :class:`~sparklda.errors.ParamError` for an unknown name or a bad value.
    """
    _refuse_unknown(mapping, owner)
    values = {**_DEFAULTS, **mapping}
    _check_values(values, owner, aliases or {})
    return TrainParams(**values)


def _refuse_unknown(mapping: Mapping[str, Any], owner: str) -> None:
    unknown = sorted(set(mapping) - set(BY_NAME), key=str)
    if unknown:
        raise ParamError(
            f"Unknown {owner} parameter(s) {unknown}; known parameters: {sorted(BY_NAME)}."
        )


def _check_values(values: Mapping[str, Any], owner: str, aliases: Mapping[str, str]) -> None:
    for c in CONSTRAINTS:
        check_param(c, values[c.name], owner, aliases.get(c.name))
    _check_seeds(values, owner, aliases)
    _check_early_stopping(values, owner, aliases)
    for s in FIRST_STEPS:
        if values["algorithm"] != s.algorithm or not s.applies(values):
            continue
        try:
            first = s.first(values)
        except (OverflowError, ZeroDivisionError):
            first = math.inf
        if first > 1:
            shown = {n: aliases.get(n, n) for n in s.names}
            given = ", ".join(f"{shown[n]}={values[n]!r}" for n in s.names)
            raise ParamError(
                f"The first step {s.formula.format(**shown)} of {owner} must be at "
                f"most 1. Got {first:.4g} from {given} instead."
            )


def _check_seeds(values: Mapping[str, Any], owner: str, aliases: Mapping[str, str]) -> None:
    """Seeded topics: topics below k, and only for the algorithms that support them."""
    seeds = values["seed_topics"]
    if not seeds:
        return
    name = aliases.get("seed_topics", "seed_topics")
    if values["algorithm"] not in _SEEDED:
        raise ParamError(
            f"The {name!r} parameter of {owner} is supported by the {list(_SEEDED)} "
            f"algorithms only; the {values['algorithm']!r} algorithm does not take seeded "
            f"topics."
        )
    problem = seed_topics_problem(seeds, values["k"])
    if problem is not None:
        raise ParamError(f"The {name!r} parameter of {owner} {problem}. Got {seeds!r} instead.")


def _check_early_stopping(
    values: Mapping[str, Any], owner: str, aliases: Mapping[str, str]
) -> None:
    """``min_gain`` > 0 needs held-out documents to score and evaluations to compare."""
    if not values["min_gain"] > 0:
        return
    name = aliases.get("min_gain", "min_gain")
    if values["heldout_fraction"] == 0 and values["heldout_count"] == 0:
        # the pyspark layer has no count: name only what the caller can set
        fields = [n for n in ("heldout_fraction", "heldout_count") if not aliases or n in aliases]
        held = [aliases.get(n, n) for n in fields]
        raise ParamError(
            f"The {name!r} parameter of {owner} ({values['min_gain']!r}) stops training on "
            f"the held-out log-likelihood, but no documents are held out: set "
            f"{' or '.join(repr(h) for h in held)} above 0, or {name!r} to 0."
        )
    if values["eval_every"] == 0:
        every = aliases.get("eval_every", "eval_every")
        raise ParamError(
            f"The {name!r} parameter of {owner} ({values['min_gain']!r}) compares "
            f"evaluations during training, but {every!r} is 0 (evaluate only at the end): "
            f"set {every!r} to the rounds between evaluations, or {name!r} to 0."
        )


_DEFAULTS = TrainParams().to_dict()
