"""sparklda: LDA topic models on Apache Spark (SCVB0, CVB0, CVB, SVB).

``sparklda.LDA`` and ``sparklda.LDAModel`` (the ``pyspark.ml`` Estimator and
Model of :mod:`sparklda.ml`) are imported on first use, so that importing
``sparklda.kernels`` never imports pyspark.
"""

from ._version import __version__

__all__ = ["LDA", "LDAModel", "__version__"]

_LAZY = {"LDA": "sparklda.ml", "LDAModel": "sparklda.ml"}


def __getattr__(name):
    if name in _LAZY:
        import importlib

        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'sparklda' has no attribute {name!r}")


def __dir__():
    return sorted(list(globals()) + list(_LAZY))
