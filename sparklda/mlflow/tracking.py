"""A training callback that logs to MLflow: :class:`MlflowCallback`.

Pass it to :func:`sparklda.api.fit` (``callbacks=[MlflowCallback()]``) or to the Estimator
(``sparklda.LDA(...).setCallbacks([MlflowCallback()])``). It logs to the run active when
training starts (under ``mlflow.pyspark.ml.autolog()``, the run autolog opened for the fit),
or to a run it starts and ends itself when none is active:

* parameters: the plan (``algorithm``, ``k``, ``total_rounds``, ``rounds_per_pass``,
  ``training_documents``, ``training_tokens``) when training starts, and the training
  parameters (``TrainParams``) when it ends;
* step metrics, the step being the round: ``round_s``, ``tokens_per_s``, ``elapsed_s``
  (training seconds, evaluation excluded) and ``passes`` every round; ``heldout_loglik``
  (per token), ``perplexity`` and ``eval_elapsed_s`` at every held-out evaluation;
* at the end: ``train_seconds``, ``rounds``, ``final_heldout_loglik``, ``final_perplexity``
  and the training report as ``sparklda/report.json``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping

from sparklda.extras import require

require("mlflow", "sparklda.mlflow (MLflow tracking and models)")

import mlflow  # noqa: E402
from mlflow.entities import Metric, Param  # noqa: E402
from mlflow.tracking import MlflowClient  # noqa: E402

from sparklda.training import Callback, TrainResult  # noqa: E402

log = logging.getLogger("sparklda.mlflow")

#: Round record fields logged every round, and evaluation fields logged at each evaluation.
ROUND_METRICS = ("round_s", "tokens_per_s", "elapsed_s", "passes")
EVALUATION_METRICS = {"heldout_loglik": "heldout_loglik", "perplexity": "perplexity"}
PLAN_PARAMS = (
    "algorithm",
    "k",
    "total_rounds",
    "rounds_per_pass",
    "training_documents",
    "training_tokens",
)
#: MLflow's limit on a parameter value's length (longer values are cut, with a note).
MAX_PARAM_LENGTH = 6000


def _param_value(value) -> str:
    text = str(value)
    if len(text) > MAX_PARAM_LENGTH:
        text = text[: MAX_PARAM_LENGTH - 12] + "...(cut)"
    return text


def log_params(client: MlflowClient, run_id: str, params: Mapping, prefix: str = "") -> None:
    """Log ``params`` (name -> value) to the run, skipping those it already has with the same
    value; one it has with another value (MLflow's parameters are immutable) is logged as
    ``sparklda.<name>`` instead."""
    have = client.get_run(run_id).data.params
    out: dict[str, str] = {}
    for name, value in params.items():
        key, text = f"{prefix}{name}", _param_value(value)
        if key in have:
            if have[key] == text:
                continue
            key = f"sparklda.{key}"
            if have.get(key) == text:
                continue
        out[key] = text
    if out:
        client.log_batch(run_id, params=[Param(k, v) for k, v in out.items()])


def log_metrics(client: MlflowClient, run_id: str, values: Mapping, step: int) -> None:
    """Log the finite numbers of ``values`` (name -> number) at ``step``, in one call."""
    now = int(time.time() * 1000)
    metrics = []
    for name, value in values.items():
        if value is None or isinstance(value, bool):
            continue
        try:
            number = float(value)
        except (TypeError, ValueError):
            continue
        if number == number and abs(number) != float("inf"):
            metrics.append(Metric(name, number, now, int(step)))
    if metrics:
        client.log_batch(run_id, metrics=metrics)


class MlflowCallback(Callback):
    """Log a training run to MLflow (see the module's doc for what is logged).

    ``run_id``: log to this run (default: the active run when training starts, else a new
    run that this callback ends when training ends). ``tracking_uri``: the store to log to
    (default: MLflow's current one). ``log_report``: log the training report as an
    artifact (``sparklda/report.json``).
    """

    def __init__(
        self, run_id: str | None = None, tracking_uri: str | None = None, log_report: bool = True
    ):
        self.run_id = run_id
        self.tracking_uri = tracking_uri
        self.log_report = log_report
        self._owned = False
        self._client: MlflowClient | None = None

    @property
    def client(self) -> MlflowClient:
        if self._client is None:
            self._client = MlflowClient(tracking_uri=self.tracking_uri)
        return self._client

    def _ensure_run(self) -> str:
        if self.run_id is None:
            active = mlflow.active_run()
            if active is None:
                active = mlflow.start_run()
                self._owned = True
            self.run_id = active.info.run_id
        return self.run_id

    def on_train_start(self, plan: dict) -> None:
        run_id = self._ensure_run()
        log_params(self.client, run_id, {k: plan[k] for k in PLAN_PARAMS if k in plan})

    def on_round(self, record: dict) -> None:
        if self.run_id is None:
            return
        values = {k: record.get(k) for k in ROUND_METRICS}
        log_metrics(self.client, self.run_id, values, record["round"])

    def on_evaluation(self, record: dict) -> None:
        if self.run_id is None:
            return
        values = {name: record.get(key) for key, name in EVALUATION_METRICS.items()}
        values["eval_elapsed_s"] = record.get("elapsed_s")
        log_metrics(self.client, self.run_id, values, record["round"])

    def on_train_end(self, result: TrainResult | None) -> None:
        if self.run_id is None:
            return
        try:
            if result is not None:
                self._log_result(result)
        finally:
            if self._owned:
                self.client.set_terminated(
                    self.run_id, "FINISHED" if result is not None else "FAILED"
                )
                if mlflow.active_run() and mlflow.active_run().info.run_id == self.run_id:
                    mlflow.end_run("FINISHED" if result is not None else "FAILED")
                self._owned = False

    def _log_result(self, result: TrainResult) -> None:
        client, run_id = self.client, self.run_id
        assert run_id is not None
        rep = result.report
        values = {"train_seconds": rep.get("train_seconds"), "rounds": rep.get("rounds")}
        if result.evaluations:
            last = result.evaluations[-1]
            values["final_heldout_loglik"] = last.get("heldout_loglik")
            values["final_perplexity"] = last.get("perplexity")
        log_metrics(client, run_id, values, int(rep.get("rounds") or 0))
        if result.model is not None:
            params = result.model.metadata.get("params") or {}
            log_params(client, run_id, {k: v for k, v in params.items() if v is not None})
        if self.log_report and rep:
            client.log_dict(run_id, _plain(rep), "sparklda/report.json")


def _plain(value):
    """``value`` with numpy numbers and other objects made JSON-friendly (as str)."""
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if hasattr(value, "item"):
        try:
            return value.item()
        except (TypeError, ValueError):
            pass
    if hasattr(value, "tolist"):
        return value.tolist()
    return str(value)
