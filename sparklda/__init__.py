"""sparklda: LDA topic models on Apache Spark (SCVB0, CVB0, CVB, SVB).

``sparklda.LDA`` and ``sparklda.LDAModel`` (the ``pyspark.ml`` Estimator and
Model of :mod:`sparklda.ml`) are imported on first use, so that importing
``sparklda.kernels`` never imports pyspark.
"""

from ._version import __version__

__all__ = ["LDA", "SESSION_PROPERTIES", "LDAModel", "__version__", "ship_package"]

#: Spark properties a session that trains with sparklda should be built with (the jobs
#: set them): each task of a round returns a few MB of topic rows, which above
#: ``spark.task.maxDirectResultSize`` (Spark's default: 1m) wait for a block-manager
#: fetch after the task, the first of a process for a new connection
#: (docs/architecture.md, "Startup"). For example
#: ``SparkSession.builder.config(map=sparklda.SESSION_PROPERTIES)``.
SESSION_PROPERTIES = {"spark.task.maxDirectResultSize": "64m"}

#: ``ship_package(spark)``: send this sparklda to a cluster's executors (``addPyFile`` of a
#: zip, as the jobs do), for a session built by hand whose executors have no sparklda
#: installed, or another version of it.
_LAZY = {"LDA": "sparklda.ml", "LDAModel": "sparklda.ml", "ship_package": "sparklda.cli.session"}


def __getattr__(name):
    if name in _LAZY:
        import importlib

        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'sparklda' has no attribute {name!r}")


def __dir__():
    return sorted(list(globals()) + list(_LAZY))
