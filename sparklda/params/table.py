"""The parameter table: every training parameter's type, range, the algorithms that read
it and its documentation, written once here.

:data:`CONSTRAINTS` has one :class:`Constraint` per field of
:class:`~sparklda.params.TrainParams`, in field order. Its ``doc`` is the parameter's
one documentation: ``help(TrainParams)`` lists it, and the ``pyspark.ml`` Params
(:mod:`sparklda.ml.params`) take their text from it (:meth:`Constraint.text` names the
other parameters a doc refers to, written ```name```, as the caller names them).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import ParamError
from .defaults import (
    ALGORITHMS,
    BATCH_MAX_DOCS_PER_TASK,
    EVALUATORS,
    EXECUTIONS,
    MAX_DEFAULT_ROUNDS_PER_PASS,
    MAX_PRIOR,
    PLACEMENTS,
    SEEDED_ALGORITHMS,
)

_REFERENCE = re.compile(r"`(\w+)`")


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

    def text(self, names: Mapping[str, str] | None = None) -> str:
        """``doc`` with each parameter it refers to (```name```) as ``'name'``, or as
        ``names`` calls it (e.g. pyspark's ``'evalEvery'`` for ``eval_every``)."""
        names = names or {}
        return _REFERENCE.sub(lambda m: repr(names.get(m[1], m[1])), self.doc)


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


_SCVB0, _SVB = ("scvb0",), ("svb",)

#: Every field of :class:`~sparklda.params.TrainParams`, in field order. Symbols are
#: those of Foulds et al. (2013) unless stated.
CONSTRAINTS: tuple[Constraint, ...] = (
    Constraint(
        "algorithm",
        str,
        options=ALGORITHMS,
        doc="Inference algorithm (the modes of sparklda.modes.MODES).",
    ),
    Constraint("k", int, 2, doc="K, the number of topics."),
    Constraint(
        "alpha",
        float,
        0,
        MAX_PRIOR,
        low_open=True,
        doc="α, the symmetric document-topic Dirichlet prior (the start of a learned α); "
        "unset: 0.1, and 50/k + 1 for 'map', whose α must exceed 1.",
    ),
    Constraint(
        "eta",
        float,
        0,
        MAX_PRIOR,
        low_open=True,
        doc="η, the topic-word Dirichlet prior (the start of a learned η); unset: 0.01, "
        "and 1.1 for 'map', whose η must exceed 1.",
    ),
    Constraint(
        "passes",
        int,
        1,
        doc="Passes over the training corpus (SCVB0, SVB), iterations (CVB0, CVB, MAP) or "
        "sweeps (Gibbs).",
    ),
    Constraint(
        "time_budget",
        float,
        0,
        allow_inf=True,
        doc="Stop after this many seconds from the start of fit (checked between rounds, "
        "at least one round runs; evaluation time excluded); 0 or inf: no limit.",
    ),
    Constraint(
        "minibatch_size",
        int,
        0,
        doc="Documents per round (|M|); the corpus is cut into minibatch slices of this "
        "size. 0: max(2000, 1000 × tasks per round, training documents / "
        f"{MAX_DEFAULT_ROUNDS_PER_PASS}) (sparklda.params.default_minibatch_size; "
        'docs/benchmarks.md, "Minibatch size"); gibbs: one slice, at most '
        f"{BATCH_MAX_DOCS_PER_TASK:,} documents per task "
        "(sparklda.params.default_batch_minibatch_size).",
    ),
    Constraint(
        "burnin",
        int,
        0,
        algorithms=_SCVB0,
        doc="SCVB0: burn-in passes over each document, updating only its N^Θ, before the "
        "pass that accumulates topic statistics (Algorithm 2 of Foulds et al. 2013).",
    ),
    Constraint(
        "exclude_token",
        bool,
        algorithms=_SCVB0,
        doc="SCVB0: compute each token's γ from N^Θ_j without the token's own share, as "
        "CVB0 does (its ¬ij); false: Eq. 5 as printed, which lets a short document's "
        "tokens reinforce their own topics (docs/architecture.md, \"SCVB0: the token's "
        'own share").',
    ),
    Constraint(
        "s_phi",
        float,
        0,
        low_open=True,
        algorithms=_SCVB0,
        doc="SCVB0: s of the topic step ρ^Φ = s/(τ+t)^κ, t counting steps of the "
        "schedule (`schedule_minibatch`) (paper: 10).",
    ),
    Constraint(
        "tau_phi",
        float,
        0,
        low_open=True,
        algorithms=_SCVB0,
        doc="SCVB0: τ of the topic step ρ^Φ (paper: 1000).",
    ),
    Constraint(
        "kappa_phi",
        float,
        0.5,
        1,
        low_open=True,
        algorithms=_SCVB0,
        doc="SCVB0: κ of the topic step ρ^Φ (paper: 0.9; Robbins-Monro: in (0.5, 1]).",
    ),
    Constraint(
        "schedule_minibatch",
        int,
        0,
        algorithms=_SCVB0,
        doc="SCVB0: documents per step t of the ρ^Φ schedule (paper: 100). 0: adapt to "
        "the corpus, min(100, max(20, training documents / 200)) "
        '(docs/architecture.md, "Step schedules").',
    ),
    Constraint(
        "s_theta",
        float,
        0,
        low_open=True,
        algorithms=_SCVB0,
        doc="SCVB0: s of the document step ρ^Θ = s/(τ+t)^κ over a document's tokens (paper: 1).",
    ),
    Constraint(
        "tau_theta",
        float,
        0,
        low_open=True,
        algorithms=_SCVB0,
        doc="SCVB0: τ of the document step ρ^Θ (paper: 10).",
    ),
    Constraint(
        "kappa_theta",
        float,
        0,
        1,
        algorithms=_SCVB0,
        doc="SCVB0: κ of the document step ρ^Θ (paper: 0.9).",
    ),
    Constraint(
        "learning_offset",
        float,
        0,
        low_open=True,
        algorithms=_SVB,
        doc="SVB: τ0 of the step ρ = (τ0+t)^-κ (Hoffman et al. 2010; scikit-learn's default 10).",
    ),
    Constraint(
        "learning_decay",
        float,
        0.5,
        1,
        low_open=True,
        algorithms=_SVB,
        doc="SVB: κ of the step ρ (scikit-learn's default 0.7; Robbins-Monro: in (0.5, 1]).",
    ),
    Constraint(
        "learning_minibatch",
        int,
        0,
        algorithms=_SVB,
        doc="SVB: t in ρ_t counts minibatches of this many documents, a round of M "
        "documents taking the M/`learning_minibatch` steps at once (scikit-learn's 128); "
        '0: one step per round, Algorithm 2 as written (docs/architecture.md, "Step '
        'schedules").',
    ),
    Constraint(
        "batch",
        bool,
        algorithms=_SVB,
        doc="SVB: batch VB (the whole corpus as one minibatch, ρ = 1).",
    ),
    Constraint(
        "estep_tol",
        float,
        0,
        low_open=True,
        algorithms=_SVB,
        doc="SVB E-step: mean |Δγ| threshold.",
    ),
    Constraint("estep_max_iter", int, 1, algorithms=_SVB, doc="SVB E-step: iteration cap."),
    Constraint(
        "gibbs_average",
        int,
        1,
        algorithms=("gibbs",),
        doc="Gibbs: the topic-word counts of the model are averaged over the last n "
        "sweeps of the run (1: the last sample only).",
    ),
    Constraint(
        "seed",
        int,
        0,
        2**63 - 1,
        doc="Seed of every random choice (initialisation, splits, order).",
    ),
    Constraint(
        "dtype",
        str,
        options=("float32", "float64"),
        doc="Floating point type of the kernels and broadcasts.",
    ),
    Constraint(
        "eval_every",
        int,
        0,
        doc="Score the held-out documents every n rounds (0: only at the end).",
    ),
    Constraint(
        "heldout_fraction",
        float,
        0,
        1,
        high_open=True,
        doc="Seeded fraction of the documents held out of training to measure held-out quality.",
    ),
    Constraint(
        "heldout_count",
        int,
        0,
        doc="Documents held out of training (wins over `heldout_fraction` when > 0).",
    ),
    Constraint(
        "parts_per_slice",
        int,
        0,
        doc="Partitions (tasks) per round (0: the cluster's default parallelism).",
    ),
    Constraint(
        "combine",
        str,
        options=("auto", "executors", "driver"),
        doc="Where a round's partial statistics are merged: 'executors' (by term shard, "
        "one shuffle; the driver receives one copy of the merged rows), 'driver' (every "
        "task's partial reaches the driver) or 'auto' (executors when a round has more "
        "than 8 tasks). The same model either way.",
    ),
    Constraint("foldin_max_iter", int, 1, doc="Fold-in iterations of evaluation and transform."),
    Constraint(
        "evaluator",
        str,
        options=EVALUATORS,
        doc="How held-out documents are scored: 'completion' (the second half of each "
        "document given the first, θ folded in) or 'left_to_right' (the whole document, "
        "log p(w | Φ, α) by the left-to-right particle estimate of Wallach et al. 2009 "
        'with `particles` particles; docs/architecture.md, "Evaluation").',
    ),
    Constraint(
        "particles",
        int,
        1,
        doc="Particles per document of the 'left_to_right' `evaluator` (its cost grows "
        "in proportion).",
    ),
    Constraint(
        "execution",
        str,
        options=EXECUTIONS,
        doc="How training rounds run: 'classic' (RDDs and broadcasts), 'dataframe' "
        "(DataFrames only, as Spark Connect needs) or 'auto' (dataframe under Spark "
        "Connect, else classic).",
    ),
    Constraint(
        "model_placement",
        str,
        options=PLACEMENTS,
        doc="Where the topic-word statistics live during training: 'driver' (a V×K "
        "array on the driver, broadcast each round), 'executors' (sharded by term in a "
        "persisted RDD, each task sent only its block's rows; classic sessions, no learned "
        "η) or 'auto' (the driver when the memory model says the driver holds it, "
        'else the executors; docs/architecture.md, "Memory model").',
    ),
    Constraint(
        "checkpoint_interval",
        int,
        0,
        doc="Checkpoint every n rounds (0: never): the driver state to `checkpoint_dir` "
        "when it is set (every mode; resume continues from it), and for CVB0, CVB, "
        "MAP and Gibbs also the lineage of their γ or topic-assignment blocks.",
    ),
    Constraint(
        "checkpoint_dir",
        str,
        doc="Directory (any Spark file system) of the resumable training checkpoints, "
        "none when empty; a run that finds a checkpoint of the same run (same data and "
        "parameters) there continues from it.",
    ),
    Constraint(
        "checkpoint_seconds",
        float,
        0,
        doc="Also checkpoint when this many seconds passed since the last one (0: by rounds only).",
    ),
    Constraint(
        "keep_checkpoint",
        bool,
        doc="Keep the last checkpoint after training succeeds (false: remove the checkpoints).",
    ),
    Constraint(
        "optimize_alpha",
        bool,
        doc="Learn an asymmetric α (one value per topic) from the data, starting at "
        "`alpha`: Minka's fixed point (SCVB0 as an online step, CVB0 and CVB once per "
        "iteration, Gibbs once per sweep on its sampled counts) or Hoffman's Newton "
        "step (SVB) (docs/architecture.md, \"Learned priors\"); not with 'map'.",
    ),
    Constraint(
        "optimize_alpha_sum",
        bool,
        doc="With `optimize_alpha`: learn α's total as well; without it the total stays "
        "K·`alpha` and the fixed point learns how it is shared among topics.",
    ),
    Constraint(
        "optimize_eta",
        bool,
        doc="Learn a symmetric η from the topic-word statistics (Minka's fixed point, "
        "once a pass), starting at `eta`; not with 'map'.",
    ),
    Constraint(
        "seed_topics",
        dict,
        algorithms=SEEDED_ALGORITHMS,
        doc="Seeded topics {topic: [words or term ids]}: each seed word gets extra "
        "pseudo-counts in its topic (SCVB0, CVB0 and Gibbs only; docs/architecture.md, "
        '"Seeded topics").',
    ),
    Constraint(
        "seed_confidence",
        float,
        0,
        MAX_PRIOR,
        algorithms=SEEDED_ALGORITHMS,
        doc="Strength of `seed_topics`: the fraction of a seeded topic's expected tokens "
        "added to its seed words as pseudo-counts, shared evenly.",
    ),
    Constraint(
        "min_gain",
        float,
        0,
        doc="Early stopping: stop when the held-out log-likelihood per token gains less "
        "than this many nats per pass for `patience` consecutive evaluations (0: off). "
        "Needs held-out documents and `eval_every` > 0.",
    ),
    Constraint(
        "patience",
        int,
        1,
        doc="Early stopping: consecutive evaluations below `min_gain` that stop training.",
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
