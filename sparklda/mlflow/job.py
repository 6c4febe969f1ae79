"""The train job's MLflow run: :class:`JobTracking` (``sparklda-train`` with ``[mlflow]``).

One run per job: the training parameters and the input settings as parameters, the
per-round and held-out metrics as the training goes (:class:`~.tracking.MlflowCallback`),
then the final coherence, the corpus report, ``metrics.json``, the convergence plot (with
``[output] plots = true``) and the model (:func:`~.flavor.log_model`, optionally registered)
when it ends. A job that fails ends its run as FAILED.
"""

from __future__ import annotations

import logging
import os
from contextlib import suppress

from sparklda.extras import require

require("mlflow", "MLflow tracking (the [mlflow] table of the job configuration)")

import mlflow  # noqa: E402

from sparklda.mlflow.flavor import log_model  # noqa: E402
from sparklda.mlflow.settings import MlflowSettings  # noqa: E402
from sparklda.mlflow.tracking import MlflowCallback, _plain, log_metrics, log_params  # noqa: E402

log = logging.getLogger("sparklda.job")
_ENV = "MLFLOW_TRACKING_URI"


class JobTracking:
    """A context manager around the job: starts the run, ends it (FAILED on an error)."""

    def __init__(self, settings: MlflowSettings):
        self.settings = settings
        self.run_id: str | None = None
        self.tracking_uri: str | None = None
        self.callback: MlflowCallback | None = None
        self._restore: tuple | None = None

    def __enter__(self) -> JobTracking:
        s = self.settings
        if s.tracking_uri:
            # mlflow.set_tracking_uri also sets MLFLOW_TRACKING_URI in this process's
            # environment: both are put back on exit (a later job in the same process
            # must not find tracking on by that variable)
            from mlflow.tracking._tracking_service import utils

            self._restore = (getattr(utils, "_tracking_uri", None), os.environ.get(_ENV))
            mlflow.set_tracking_uri(s.tracking_uri)
        experiment_id = None
        if s.experiment:  # by id: mlflow.set_experiment would stay set in this process
            client = mlflow.MlflowClient()
            found = client.get_experiment_by_name(s.experiment)
            experiment_id = found.experiment_id if found else client.create_experiment(s.experiment)
        run = mlflow.start_run(
            run_name=s.run_name, tags=s.tags or None, experiment_id=experiment_id
        )
        self.run_id = run.info.run_id
        self.tracking_uri = mlflow.get_tracking_uri()
        self.callback = MlflowCallback(run_id=self.run_id)
        log.info("logging to MLflow (%s): %s, run %s", s.reason, self.tracking_uri, self.run_id)
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        active = mlflow.active_run()
        if active is not None and active.info.run_id == self.run_id:
            mlflow.end_run("FAILED" if exc_type is not None else "FINISHED")
        if self._restore is not None:
            previous, env = self._restore
            with suppress(Exception):
                mlflow.set_tracking_uri(previous)
            if env is None:
                os.environ.pop(_ENV, None)
            else:
                os.environ[_ENV] = env

    @property
    def callbacks(self) -> list:
        return [self.callback] if self.callback is not None else []

    def log_start(self, params: dict, input_settings: dict) -> None:
        """Parameters before training: the TrainParams and the ``[input]`` settings."""
        assert self.callback is not None and self.run_id is not None
        client = self.callback.client
        log_params(client, self.run_id, {k: v for k, v in params.items() if v is not None})
        log_params(client, self.run_id, input_settings, prefix="input.")

    def log_end(self, metrics: dict, model, metrics_path: str, plot: str | None) -> str | None:
        """After the model is saved: the final coherence, the corpus report, metrics.json, the
        plot and the model; returns the model's URI (None without ``log_model``)."""
        assert self.callback is not None and self.run_id is not None
        client, run_id = self.callback.client, self.run_id
        coherence = metrics.get("coherence")
        rounds = int((metrics.get("report") or {}).get("rounds") or 0)
        if coherence:
            name = f"coherence_{coherence['measure']}"
            log_metrics(client, run_id, {name: coherence["mean"]}, rounds)
        corpus = (metrics.get("report") or {}).get("corpus", {})
        client.log_dict(run_id, _plain(corpus), "sparklda/corpus_report.json")
        client.log_dict(run_id, _plain(metrics.get("topics") or []), "sparklda/topics.json")
        if os.path.exists(metrics_path):
            client.log_artifact(run_id, metrics_path, "sparklda")
        if plot and os.path.exists(plot):
            client.log_artifact(run_id, plot, "sparklda")
        client.set_tag(run_id, "sparklda.model_path", str(metrics.get("model")))
        if not self.settings.log_model:
            return None
        info = log_model(model, "model", registered_model_name=self.settings.registered_model)
        return info.model_uri
