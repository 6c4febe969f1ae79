"""Training parameters: one table of names, types, ranges, uses and docs, and one
validator.

* :mod:`.defaults`: the algorithms' names, the priors' defaults and the defaults that
  depend on the corpus or the cluster (:func:`default_minibatch_size`,
  :func:`schedule_minibatch_docs`);
* :mod:`.table`: :data:`CONSTRAINTS`, one :class:`Constraint` per parameter (type,
  range, the algorithms that read it, its documentation, written once), and the step
  schedules' first-step checks (:data:`FIRST_STEPS`);
* :mod:`.train`: :class:`TrainParams` and :func:`validate_params`, the one validator.
"""

from __future__ import annotations

from .defaults import (
    ABOVE_ONE_ALGORITHMS,
    ALGORITHMS,
    AUTO_PRIOR,
    AUTO_SCHEDULE_MIN_DOCS,
    AUTO_SCHEDULE_STEPS_PER_PASS,
    BATCH_MAX_DOCS_PER_TASK,
    DEFAULT_ALPHA,
    DEFAULT_DOCS_PER_TASK,
    DEFAULT_ETA,
    EVALUATORS,
    EXECUTIONS,
    MAP_ETA,
    MAX_DEFAULT_ROUNDS_PER_PASS,
    MAX_PRIOR,
    MIN_DEFAULT_MINIBATCH,
    PAPER_SCHEDULE_MINIBATCH,
    PLACEMENTS,
    SEEDED_ALGORITHMS,
    SHARDED_ALGORITHMS,
    default_alpha,
    default_batch_minibatch_size,
    default_eta,
    default_minibatch_size,
    schedule_minibatch_docs,
)
from .table import (
    BY_NAME,
    CONSTRAINTS,
    FIRST_STEPS,
    Constraint,
    FirstStep,
    seed_topics_problem,
)
from .train import TrainParams, check_param, fields_doc, validate_params

__all__ = [
    "ABOVE_ONE_ALGORITHMS",
    "ALGORITHMS",
    "AUTO_PRIOR",
    "AUTO_SCHEDULE_MIN_DOCS",
    "AUTO_SCHEDULE_STEPS_PER_PASS",
    "BATCH_MAX_DOCS_PER_TASK",
    "BY_NAME",
    "CONSTRAINTS",
    "DEFAULT_ALPHA",
    "DEFAULT_DOCS_PER_TASK",
    "DEFAULT_ETA",
    "EVALUATORS",
    "EXECUTIONS",
    "FIRST_STEPS",
    "MAP_ETA",
    "MAX_DEFAULT_ROUNDS_PER_PASS",
    "MAX_PRIOR",
    "MIN_DEFAULT_MINIBATCH",
    "PAPER_SCHEDULE_MINIBATCH",
    "PLACEMENTS",
    "SEEDED_ALGORITHMS",
    "SHARDED_ALGORITHMS",
    "Constraint",
    "FirstStep",
    "TrainParams",
    "check_param",
    "default_alpha",
    "default_batch_minibatch_size",
    "default_eta",
    "default_minibatch_size",
    "fields_doc",
    "schedule_minibatch_docs",
    "seed_topics_problem",
    "validate_params",
]
