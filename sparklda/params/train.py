""":class:`TrainParams`, the parameters of a training run, and the one validator.

:func:`validate_params` checks a mapping against the parameter table
(:data:`~sparklda.params.table.CONSTRAINTS`) and is the only validator:
:meth:`TrainParams.validate`, the ``pyspark.ml`` layer (:mod:`sparklda.ml`, which maps
pyspark's Param names onto these and reports errors under pyspark's names) and the jobs
all call it. Every message has one form::

    The 'k' parameter of LDA must be an int in the range [2, inf). Got 50.0 instead.

Integers must be real ints (``int`` or a numpy integer, never a float or a
bool); floats accept ints and must be finite unless the table allows inf.
Besides the per-value checks, the step schedules of the algorithm in use must
start with a step of at most 1 (:data:`~sparklda.params.table.FIRST_STEPS`); other
algorithms' schedules are not checked.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from ..errors import ParamError
from .defaults import (
    ABOVE_ONE_ALGORITHMS,
    AUTO_PRIOR,
    SEEDED_ALGORITHMS,
    SHARDED_ALGORITHMS,
    default_alpha,
    default_eta,
)
from .table import (
    BY_NAME,
    CONSTRAINTS,
    FIRST_STEPS,
    Constraint,
    _seed_key,
    _seed_word,
    seed_topics_problem,
)


@dataclass
class TrainParams:
    """Parameters of a training run (all modes). Each field's documentation, type and
    range are its entry in the parameter table (:data:`sparklda.params.CONSTRAINTS`),
    listed below."""

    algorithm: str = "scvb0"
    k: int = 10
    alpha: float = AUTO_PRIOR
    eta: float = AUTO_PRIOR
    passes: int = 20
    time_budget: float = 0.0
    minibatch_size: int = 0
    burnin: int = 2
    exclude_token: bool = True
    s_phi: float = 10.0
    tau_phi: float = 1000.0
    kappa_phi: float = 0.9
    schedule_minibatch: int = 0
    s_theta: float = 1.0
    tau_theta: float = 10.0
    kappa_theta: float = 0.9
    learning_offset: float = 10.0
    learning_decay: float = 0.7
    learning_minibatch: int = 128
    batch: bool = False
    estep_tol: float = 1e-3
    estep_max_iter: int = 100
    gibbs_average: int = 5
    seed: int = 0
    dtype: str = "float32"
    eval_every: int = 0
    heldout_fraction: float = 0.0
    heldout_count: int = 0
    parts_per_slice: int = 0
    combine: str = "auto"
    foldin_max_iter: int = 100
    evaluator: str = "completion"
    particles: int = 10
    execution: str = "auto"
    model_placement: str = "driver"
    checkpoint_interval: int = 10
    checkpoint_dir: str = ""
    checkpoint_seconds: float = 0.0
    keep_checkpoint: bool = True
    optimize_alpha: bool = False
    optimize_alpha_sum: bool = False
    optimize_eta: bool = False
    seed_topics: dict[str, list[Any]] = field(default_factory=dict)
    seed_confidence: float = 0.1
    min_gain: float = 0.0
    patience: int = 1

    def __post_init__(self) -> None:
        # α and η left unset (AUTO_PRIOR): the algorithm's defaults
        resolved = _resolve_priors(
            {"algorithm": self.algorithm, "k": self.k, "alpha": self.alpha, "eta": self.eta}
        )
        self.alpha, self.eta = resolved["alpha"], resolved["eta"]

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


def fields_doc(constraints: tuple[Constraint, ...] = CONSTRAINTS) -> str:
    """The fields' documentation from the table: one entry per field, with its range."""
    return "\n".join(f"* ``{c.name}`` ({c.describe()}): {c.text()}" for c in constraints)


TrainParams.__doc__ = f"{inspect.cleandoc(TrainParams.__doc__ or '')}\n\n{fields_doc()}\n"

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
    values = _resolve_priors({**_DEFAULTS, **mapping})
    _check_values(values, owner, aliases or {})
    return TrainParams(**values)


def _refuse_unknown(mapping: Mapping[str, Any], owner: str) -> None:
    unknown = sorted(set(mapping) - set(BY_NAME), key=str)
    if unknown:
        raise ParamError(
            f"Unknown {owner} parameter(s) {unknown}; known parameters: {sorted(BY_NAME)}."
        )


def _resolve_priors(values: dict[str, Any]) -> dict[str, Any]:
    """``values`` with α and η left at :data:`AUTO_PRIOR` (unset) replaced by the
    algorithm's defaults (:func:`default_alpha`, :func:`default_eta`); α stays -1 while
    ``k`` is not a valid int (its own check reports that first)."""
    algorithm, k = values["algorithm"], values["k"]
    if _is_auto(values["alpha"]) and BY_NAME["k"].accepts(k):
        values["alpha"] = default_alpha(algorithm, k)
    if _is_auto(values["eta"]):
        values["eta"] = default_eta(algorithm)
    return values


def _is_auto(value: Any) -> bool:
    return value is AUTO_PRIOR


def _check_values(values: Mapping[str, Any], owner: str, aliases: Mapping[str, str]) -> None:
    for c in CONSTRAINTS:
        check_param(c, values[c.name], owner, aliases.get(c.name))
    _check_above_one(values, owner, aliases)
    _check_seeds(values, owner, aliases)
    _check_early_stopping(values, owner, aliases)
    _check_placement(values, owner, aliases)
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


def _check_above_one(values: Mapping[str, Any], owner: str, aliases: Mapping[str, str]) -> None:
    """MAP estimation (:data:`ABOVE_ONE_ALGORITHMS`) takes α − 1 and η − 1 as its
    pseudo-counts: both priors must exceed 1, and neither is learned (a learned prior
    could fall to 1 or below)."""
    algorithm = values["algorithm"]
    if algorithm not in ABOVE_ONE_ALGORITHMS:
        return
    defaults = {"alpha": f"50/k + 1 = {default_alpha(algorithm, values['k']):g}"}
    defaults["eta"] = f"{default_eta(algorithm):g}"
    for param, symbol in (("alpha", "α"), ("eta", "η")):
        if values[param] > 1:
            continue
        name = aliases.get(param, param)
        raise ParamError(
            f"The {name!r} parameter of {owner} must be greater than 1 for the "
            f"{algorithm!r} algorithm (MAP estimation takes {symbol} − 1 as its "
            f"pseudo-count, which must be positive); leave it unset for the default "
            f"{defaults[param]}. Got {values[param]!r} instead."
        )
    for param in ("optimize_alpha", "optimize_eta"):
        if values[param]:
            name = aliases.get(param, param)
            raise ParamError(
                f"The {name!r} parameter of {owner} is not supported by {algorithm!r} "
                f"(MAP-EM: a learned prior could fall to 1 or below, where MAP "
                f"estimation has no positive mode); set it to false, or choose one of "
                f"the other algorithms."
            )


def _check_seeds(values: Mapping[str, Any], owner: str, aliases: Mapping[str, str]) -> None:
    """Seeded topics: topics below k, and only for the algorithms that support them."""
    seeds = values["seed_topics"]
    if not seeds:
        return
    name = aliases.get("seed_topics", "seed_topics")
    if values["algorithm"] not in SEEDED_ALGORITHMS:
        raise ParamError(
            f"The {name!r} parameter of {owner} is supported by the {list(SEEDED_ALGORITHMS)} "
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


def _check_placement(values: Mapping[str, Any], owner: str, aliases: Mapping[str, str]) -> None:
    """``model_placement="executors"``: the algorithms whose model can live on the
    executors so far (:data:`SHARDED_ALGORITHMS`)."""
    if values["model_placement"] != "executors":
        return
    name = aliases.get("model_placement", "model_placement")
    if values["algorithm"] not in SHARDED_ALGORITHMS:
        raise ParamError(
            f"The {name!r} parameter of {owner} is 'executors', which the "
            f"{values['algorithm']!r} algorithm does not support yet (only "
            f"{list(SHARDED_ALGORITHMS)}); set it to 'driver' or 'auto'."
        )


#: every field's default; α and η unresolved (the algorithm's, :func:`_resolve_priors`)
_DEFAULTS = {**TrainParams().to_dict(), "alpha": AUTO_PRIOR, "eta": AUTO_PRIOR}
