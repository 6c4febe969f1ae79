"""Loading the kernels' compiled code before it is needed (docs/architecture.md,
"Startup: kernels compile once per machine").

With numba's on-disk cache a process still pays, at its first call of each
kernel, for reading and linking the cached machine code (a few tenths of a
second per kernel). :func:`warm` makes those first calls on tiny inputs of the
dtypes the real calls use, so a training run can pay them while it waits for
something else: the driver in a thread while the corpus is built, the Python
workers inside the corpus-building job whose workers then run the rounds.

Pure numpy/numba; the names of :data:`WARMERS` are what the modes declare.

:func:`settle_heap` is the other half of a worker's start: it takes the
long-lived objects of a reused Python worker out of the garbage collector's
sight, which PySpark's worker daemon makes walk them after every task.
"""

from __future__ import annotations

import gc
import os
import time
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np

from .cvb0 import cvb0_block, cvb0_init_gamma
from .gibbs import gibbs_init, gibbs_sweep, topic_counts
from .inference import foldin_block, loglik_block
from .left_to_right import left_to_right_block
from .map_em import map_block
from .scvb0 import add_scaled_rows, init_doc_stats, scatter_add_rows, scvb0_block
from .special import dirichlet_expectation_2d
from .svb import svb_estep_block

#: the tiny block every warmer uses: two documents, three (document, term) pairs
_INDPTR = np.array([0, 2, 3], dtype=np.int64)
_LOCAL = np.array([0, 1, 1], dtype=np.int32)
_COUNTS = np.array([2.0, 1.0, 3.0])
_K = 2


def _rows(dtype: np.dtype[Any]) -> np.ndarray:
    return np.full((2, _K), 0.5, dtype=dtype)


def _scvb0(dtype: np.dtype[Any]) -> None:
    counts = _COUNTS.astype(dtype)
    theta0 = init_doc_stats(np.full((2, _K), 0.5, dtype=dtype), np.array([3.0, 3.0]))
    theta = np.zeros((2, _K), dtype=dtype)
    logp0 = np.zeros((2, _K), dtype=dtype)
    scvb0_block(
        _INDPTR, _LOCAL, counts, _rows(dtype), theta0, 0.1, 1, theta_out=theta, logp0_out=logp0
    )


def _merge(dtype: np.dtype[Any]) -> None:
    # the merge of partial rows (kernel dtype) and of merged ones (float64)
    for rows in (_rows(dtype), _rows(np.dtype(np.float64))):
        scatter_add_rows(np.zeros((2, _K)), np.array([0, 1]), rows)


def _scvb0_update(dtype: np.dtype[Any]) -> None:
    base = np.zeros((2, _K))
    add_scaled_rows(
        base, np.zeros((2, _K), dtype=dtype), np.array([0, 1], dtype=np.int32), base + 1.0, 0.5
    )


def _cvb(dtype: np.dtype[Any]) -> None:
    gamma = cvb0_init_gamma(np.full((3, _K), 0.5, dtype=dtype))
    args = (_INDPTR, _LOCAL, _COUNTS.astype(dtype), gamma, np.ones((2, _K), dtype=dtype))
    nz = np.ones(_K, dtype=dtype)
    cvb0_block(*args, nz, 0.1, 0.01, 0.02)  # CVB0
    var_phi, var_z = np.zeros((2, _K), dtype=dtype), np.zeros(_K, dtype=dtype)
    cvb0_block(*args, nz, 0.1, 0.01, 0.02, True, var_phi, var_z)  # CVB


def _map(dtype: np.dtype[Any]) -> None:
    # MAP-EM: the round's N^Φ rows in ``dtype``, N^Θ and the sums in float64
    map_block(
        _INDPTR,
        _LOCAL,
        _COUNTS,
        _rows(dtype),
        np.ones(_K, dtype=dtype),
        np.ones((2, _K)),
        0.5,
        0.1,
        0.2,
    )


def _svb(dtype: np.dtype[Any]) -> None:
    elog = dirichlet_expectation_2d(np.ones((_K, 2)))
    svb_estep_block(
        _INDPTR,
        _LOCAL,
        _COUNTS.astype(dtype),
        np.exp(elog.T).astype(dtype),
        0.1,
        np.ones((2, _K), dtype=dtype),
        5,
    )


def _gibbs(dtype: np.dtype[Any]) -> None:
    # the counts are float64 whatever ``dtype``; uint16 assignments (K ≤ 65535)
    keys = np.arange(2, dtype=np.uint64)
    z = gibbs_init(_INDPTR, _LOCAL, _COUNTS, _K, keys)
    gibbs_init(_INDPTR, _LOCAL, _COUNTS, _K, keys, np.full((2, _K), 0.5))
    nphi = topic_counts(_LOCAL, 2, _COUNTS, z, _K)
    topic_counts(_LOCAL, 2, _COUNTS, z, _K, np.float32)  # the statistics' rows
    gibbs_sweep(_INDPTR, _LOCAL, _COUNTS, z, nphi, nphi.sum(0), 0.1, 0.01, 0.02, keys)
    # whole counts as int32 (the mode's rows without seeded topics)
    rows = nphi.astype(np.int32)
    gibbs_sweep(_INDPTR, _LOCAL, _COUNTS, z, rows, nphi.sum(0), 0.1, 0.01, 0.02, keys)


def _inference(dtype: np.dtype[Any]) -> None:
    # the held-out evaluation folds in against float64 topics (its blocks' counts in
    # ``dtype``); CVB0's start in ``dtype``
    for dt in {np.dtype(np.float64), dtype}:
        phi = _rows(dt)
        theta = foldin_block(_INDPTR, _LOCAL, _COUNTS.astype(dt), phi, 0.1, 5)
        loglik_block(_INDPTR, _LOCAL, _COUNTS.astype(dtype), phi, theta)


def _left_to_right(dtype: np.dtype[Any]) -> None:
    # the left-to-right evaluator computes in float64 whatever ``dtype``
    phi = _rows(np.dtype(np.float64))
    left_to_right_block(np.arange(2), _INDPTR, _LOCAL, _COUNTS, phi, 0.1, 2, 0)


#: what a mode may ask to have loaded: name -> the first calls, for a dtype
WARMERS: dict[str, Callable[[np.dtype[Any]], None]] = {
    "scvb0": _scvb0,
    "merge": _merge,
    "scvb0_update": _scvb0_update,
    "cvb": _cvb,
    "map": _map,
    "svb": _svb,
    "gibbs": _gibbs,
    "inference": _inference,
    "left_to_right": _left_to_right,
}


def warm(names: Iterable[str], dtype: Any = np.float32) -> float:
    """Call the kernels of each of ``names`` (keys of :data:`WARMERS`) once on tiny
    inputs of ``dtype``, loading their cached code (or compiling it); returns the
    seconds it took. Calling it again in the same process costs nothing."""
    t0 = time.perf_counter()
    dt = np.dtype(dtype)
    for name in names:
        if name not in WARMERS:
            raise ValueError(f"warm: unknown kernel group {name!r}; known: {', '.join(WARMERS)}")
        WARMERS[name](dt)
    return time.perf_counter() - t0


#: whether :func:`settle_heap` has frozen this process's heap
_settled = False


def settle_heap() -> bool:
    """Once per reused PySpark worker process: ``gc.collect()`` then ``gc.freeze()``.

    PySpark's worker daemon runs a full ``gc.collect()`` after every task of a reused
    worker (``spark.python.worker.reuse``, the default). With numpy, numba, pyspark and
    sparklda imported that walks some 140,000 objects, about 60 ms of CPU per task: a
    third of a short round, and most of a task's fixed cost (docs/architecture.md,
    "Startup: kernels compile once per machine"). Frozen objects are left out of every
    later collection; reference counting still frees them, so only reference cycles
    among the objects alive now (the modules, functions and classes a worker keeps
    for its life) are never collected. Nothing happens outside a reused worker (Spark
    sets ``SPARK_REUSE_WORKER`` in its environment) or after the first call; returns
    whether it froze now."""
    global _settled
    if _settled or not os.environ.get("SPARK_REUSE_WORKER"):
        return False
    gc.collect()
    gc.freeze()
    _settled = True
    return True
