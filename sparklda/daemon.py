"""A PySpark worker daemon whose Python workers start with sparklda already loaded.

PySpark starts one daemon per executor (``python -m pyspark.daemon``) and it forks a
Python worker for each task slot. A worker is not kept for ever: one whose task raised
leaves (PySpark does not reuse it), and idle ones are stopped after a while. Every new
worker then imports numpy, pyarrow, numba and sparklda and reads the kernels' compiled
code from numba's cache before its first task can run: a couple of CPU-seconds each, paid
again on every failed task and after every idle spell.

Set ``spark.python.daemon.module=sparklda.daemon`` and the daemon does that once, before
it forks: it imports those modules, loads every kernel in both dtypes
(:func:`sparklda.kernels.warm.warm`), freezes the heap it built
(:func:`sparklda.kernels.warm.settle_heap`), and hands over to PySpark's own daemon loop.
The workers it forks share those pages and start at once. What the workers run does not
change.

The executors' Python must be able to import ``sparklda`` when the daemon starts, so it
suits an installed package (the wheel in the executors' environment, local mode, the test
suite's sessions); with the library shipped only by ``--py-files`` keep PySpark's daemon,
which adds those files to the workers' path later.
"""

from __future__ import annotations

import importlib

#: the modules the tasks' functions live in (their imports bring the rest)
TASK_MODULES = (
    "sparklda.corpus",
    "sparklda.evaluation",
    "sparklda.execution",
    "sparklda.inference",
    "sparklda.modes",
)


def preload() -> None:
    """Import what sparklda's tasks import and load the kernels' compiled code."""
    import numpy as np
    import pyarrow  # noqa: F401  (the DataFrame path's batches)
    import pyspark.worker  # noqa: F401  (what every forked worker runs)

    for module in TASK_MODULES:
        importlib.import_module(module)
    from sparklda.kernels.warm import WARMERS, settle_heap, warm

    for dtype in (np.float32, np.float64):
        warm(list(WARMERS), dtype)
    settle_heap()


if __name__ == "__main__":
    preload()
    from pyspark.daemon import manager

    manager()
