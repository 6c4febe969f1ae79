"""The train job's MLflow settings: the ``[mlflow]`` table, or the environment.

Tracking is off unless the configuration has an ``[mlflow]`` table, and on by itself when
the environment says a tracking server is there (``MLFLOW_TRACKING_URI`` set, or a
Databricks runtime: ``DATABRICKS_RUNTIME_VERSION``); ``enabled = false`` turns it off
either way. Checked before Spark starts; never imports ``mlflow`` (it only checks that it
can be imported, when tracking is on).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass, field

from sparklda.errors import ParamError
from sparklda.extras import available, require

log = logging.getLogger("sparklda.job")

#: [mlflow] key -> what it is (the job configuration's schema: sparklda.cli.config)
KEYS = {
    "enabled": "a boolean: false turns tracking off, true turns it on",
    "tracking_uri": "a string: the tracking server or store (default: MLflow's own)",
    "experiment": "a string: the experiment's name (default: MLflow's default experiment)",
    "run_name": "a string: the run's name",
    "tags": "a table of strings: tags set on the run",
    "log_model": "a boolean: log the model (pyfunc flavor) with the run (default true)",
    "registered_model": "a string: also register the model under this name",
}

#: Environment variables that turn tracking on without an [mlflow] table.
ENV_SIGNS = ("MLFLOW_TRACKING_URI", "DATABRICKS_RUNTIME_VERSION")


@dataclass
class MlflowSettings:
    """Where and how the train job logs to MLflow (None fields: MLflow's defaults)."""

    tracking_uri: str | None = None
    experiment: str | None = None
    run_name: str | None = None
    tags: dict[str, str] = field(default_factory=dict)
    log_model: bool = True
    registered_model: str | None = None
    #: why tracking is on: "[mlflow]", or the environment variable that said so
    reason: str = "[mlflow]"


def mlflow_settings(
    cfg: Mapping, environ: Mapping[str, str] | None = None
) -> MlflowSettings | None:
    """The job's MLflow settings from ``cfg`` (the whole configuration; its ``[mlflow]``
    table already type-checked) and ``environ`` (default: ``os.environ``); None when
    tracking is off. Raises :class:`~sparklda.errors.MissingExtraError` when an
    ``[mlflow]`` table asks for tracking and ``mlflow`` is not installed."""
    environ = os.environ if environ is None else environ
    table = cfg.get("mlflow")
    if table is not None and not isinstance(table, Mapping):
        raise ParamError(f"[mlflow] must be a table; got mlflow = {table!r}.")
    table = dict(table or {})
    if table.get("enabled") is False:
        return None
    tags = table.get("tags", {})
    bad = {k: v for k, v in tags.items() if not isinstance(v, str)}
    if bad:
        raise ParamError(f"mlflow.tags values must be strings; got {bad}.")
    if table:
        reason = "[mlflow]"
        require("mlflow", "MLflow tracking (the [mlflow] table of the job configuration)")
    else:
        sign = next((name for name in ENV_SIGNS if environ.get(name)), None)
        if sign is None:
            return None
        reason = sign
        if not available("mlflow"):
            log.warning(
                "%s is set but the mlflow package is not installed: not logging to MLflow "
                "(pip install 'sparklda[mlflow]', or set [mlflow] enabled = false)",
                sign,
            )
            return None
    return MlflowSettings(
        tracking_uri=table.get("tracking_uri"),
        experiment=table.get("experiment"),
        run_name=table.get("run_name"),
        tags={str(k): v for k, v in tags.items()},
        log_model=table.get("log_model", True),
        registered_model=table.get("registered_model"),
        reason=reason,
    )
