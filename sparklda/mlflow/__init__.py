"""MLflow for sparklda: tracking callbacks and a ``pyfunc`` model flavor (docs/mlflow.md).

Optional: needs ``mlflow`` (``pip install 'sparklda[mlflow]'``). Importing this package does
not import ``mlflow``; its names load their module on first use, and without ``mlflow`` they
raise :class:`sparklda.errors.MissingExtraError` naming the extra.
:mod:`sparklda.mlflow.settings` (the train job's ``[mlflow]`` table) never imports it.

* :class:`MlflowCallback` (:mod:`.tracking`): a training callback that logs parameters, the
  per-round metrics and the held-out scores to the active MLflow run; pass it to
  :func:`sparklda.api.fit` or ``sparklda.LDA().setCallbacks([...])``.
* :func:`log_model`, :func:`save_model`, :func:`load_model` (:mod:`.flavor`): a topic model
  as an MLflow ``pyfunc`` model that scores a pandas DataFrame of texts or term counts
  (topic proportions out), in a plain Python process or through
  ``mlflow.pyfunc.spark_udf``; :func:`load_model` gives the :class:`~sparklda.model.TopicModel`
  back. ``mlflow.spark.log_model`` holds a ``sparklda.LDAModel`` or a ``PipelineModel`` with
  one as well (docs/mlflow.md).

This package is named ``sparklda.mlflow``; its modules import the ``mlflow`` distribution by
absolute imports (``import mlflow``), never relative ones.
"""

from __future__ import annotations

import importlib

_EXPORTS = {
    "MlflowCallback": "tracking",
    "TopicModelPyfunc": "flavor",
    "log_model": "flavor",
    "save_model": "flavor",
    "load_model": "flavor",
    "FLAVOR_NAME": "flavor",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name):
    if name in _EXPORTS:
        value = getattr(importlib.import_module(f"sparklda.mlflow.{_EXPORTS[name]}"), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'sparklda.mlflow' has no attribute {name!r}")


def __dir__():
    return sorted(list(globals()) + list(_EXPORTS))
