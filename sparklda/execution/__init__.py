"""The execution seam: how sparklda's work reaches the executors and comes back.

A :class:`Backend` (:mod:`.base`) is picked once per entry point from its input by
:func:`backend_for` (:mod:`.select`, the one place that tells a Spark Connect session
from a classic one): :class:`ClassicBackend` (:mod:`.classic`: RDDs, broadcast
variables, ``runJob``) or :class:`FrameBackend` (:mod:`.frame`: DataFrames and
``mapInArrow`` only, Spark Connect). A backend builds the corpus (choosing its
layout), gives the round skeleton (:mod:`sparklda.training`) its :class:`Executor`,
scores held-out documents (by document completion or the left-to-right estimate),
shares the topics with fold-in tasks and releases what it
cached. The per-block work of a round (:mod:`.tasks`) and of document completion
(:mod:`.scoring`) is the same under both. See docs/architecture.md, "The round".
"""

from .base import Backend, Executor, RoundOutput, value_nbytes
from .checkpointer import PeriodicCheckpointer
from .classic import (
    COMBINE_AUTO_TASKS,
    ClassicBackend,
    ClassicExecutor,
    combine_on_executors,
    direct_result_hint,
    merge_pieces,
    shard_pieces,
    size_bytes,
)
from .frame import DataFrameExecutor, FrameBackend
from .scoring import EVALUATORS, HeldoutScore, LeftToRight, evaluator_spec
from .select import backend_for, backend_of
from .sharded import ShardedExecutor, driver_limits
from .sharded_stateful import StatefulShardedExecutor
from .tasks import (
    advance_partition,
    check_restored_state,
    init_partition,
    stateless_partition,
    statistics_partition,
)
from .topics import MAX_DRIVER_MODEL_CONF, ShardedTopics

__all__ = [
    "COMBINE_AUTO_TASKS",
    "EVALUATORS",
    "MAX_DRIVER_MODEL_CONF",
    "Backend",
    "ClassicBackend",
    "ClassicExecutor",
    "DataFrameExecutor",
    "Executor",
    "FrameBackend",
    "HeldoutScore",
    "LeftToRight",
    "PeriodicCheckpointer",
    "RoundOutput",
    "ShardedExecutor",
    "ShardedTopics",
    "StatefulShardedExecutor",
    "advance_partition",
    "backend_for",
    "backend_of",
    "check_restored_state",
    "combine_on_executors",
    "direct_result_hint",
    "driver_limits",
    "evaluator_spec",
    "init_partition",
    "merge_pieces",
    "shard_pieces",
    "size_bytes",
    "stateless_partition",
    "statistics_partition",
    "value_nbytes",
]
