"""Train an LDA model: ``sparklda-train --config my.toml`` or
``spark-submit jobs/train_lda.py --config conf/local.toml``.

Reads the corpus named in ``[input]``, trains with ``[training]`` (any mode),
evaluates on held-out documents (``[evaluation]``), saves the model to
``output.model`` (written atomically) and writes ``metrics.json`` beside it
(``output.metrics``), with the master the job ran on, the effective Spark
properties and the executors that ran its tasks. Prints the top words of each
topic and the held-out quality. ``[output] plots = true`` draws the convergence plot
beside ``metrics.json`` (:mod:`sparklda.plots`); an ``[mlflow]`` table (or a tracking
server named by the environment) logs the run to MLflow (:mod:`sparklda.mlflow.job`).
"""

from __future__ import annotations

import json
import logging
import os
import sys
import time
from collections.abc import Sequence
from contextlib import nullcontext
from dataclasses import dataclass

from ..api import fit, source_from_config
from ..coherence import CorpusCoherence
from ..extras import require
from ..ml import load_topic_model
from ..mlflow.settings import MlflowSettings, mlflow_settings
from ..model import TopicModel
from ..params import TrainParams
from ..progress import Progress
from .config import ConfigError, check_config, input_settings, train_params
from .job import check_local_output, check_output, job_main
from .session import session_facts

log = logging.getLogger("sparklda.job")

DESCRIPTION = "Train an LDA topic model on Spark as a TOML configuration says."


@dataclass
class TrainSettings:
    params: TrainParams
    input: dict
    model: str
    metrics: str | None
    overwrite: bool
    initial_model: str | None
    top_terms: int
    plots: bool = False
    mlflow: MlflowSettings | None = None


def _where(path: str) -> str:
    """``path`` made comparable: a local path absolute and normalized, a URI without a
    trailing slash."""
    if path.startswith("file:"):
        path = path[len("file:") :]
        path = "/" + path.lstrip("/")
    if "://" in path:
        return path.rstrip("/")
    return os.path.normpath(os.path.abspath(path))


def _inside(inner: str, outer: str) -> bool:
    return inner == outer or inner.startswith(outer.rstrip("/") + "/")


def check_paths(outputs: dict[str, str | None]) -> None:
    """Refuse two outputs (``{key: path}``) that are the same path or one inside the
    other: the model's save, the metrics file and the checkpoints would overwrite or
    delete each other (raises ConfigError naming both keys)."""
    named = [(k, p, _where(p)) for k, p in outputs.items() if p]
    for i, (key_a, a, where_a) in enumerate(named):
        for key_b, b, where_b in named[i + 1 :]:
            if where_a == where_b:
                raise ConfigError(
                    f"{key_b} {b!r} is the same path as {key_a} {a!r}; give them different paths."
                )
            for (ki, pi, wi), (ko, po, wo) in (
                ((key_a, a, where_a), (key_b, b, where_b)),
                ((key_b, b, where_b), (key_a, a, where_a)),
            ):
                if _inside(wi, wo):
                    raise ConfigError(
                        f"{ki} {pi!r} is inside {ko} {po!r}; writing one would replace or "
                        f"delete the other: give them separate paths."
                    )


def check(cfg: dict, resume: bool = False) -> TrainSettings:
    """The job's settings from ``cfg``, checked before Spark starts (raises ValueError);
    ``resume``: the job's ``--resume``, which needs ``checkpoint.dir``."""
    check_config(cfg)
    out = cfg.get("output", {})
    if not out.get("model"):
        raise ConfigError("output.model (the model directory to write) is required.")
    if not cfg.get("input"):
        raise ConfigError(
            '[input] must name the corpus to train on (e.g. format = "uci" '
            'and docword = "sample:kos/docword.txt.gz").'
        )
    top_terms = out.get("top_terms", 10)
    if top_terms < 1:
        raise ConfigError(f"output.top_terms must be at least 1; got {top_terms}.")
    params = train_params(cfg)
    plots = out.get("plots", False)
    if plots:
        require("matplotlib", "output.plots = true (the convergence plot)")
        if not (params.heldout_fraction or params.heldout_count):
            raise ConfigError(
                "output.plots = true draws held-out quality: set evaluation.heldout_count or "
                "evaluation.heldout_fraction above 0."
            )
    if resume and not params.checkpoint_dir:
        raise ConfigError(
            "--resume needs checkpoint.dir (where the interrupted run wrote its checkpoints)."
        )
    check_paths(
        {
            "output.model": out["model"],
            "output.metrics": out.get("metrics"),
            "checkpoint.dir": params.checkpoint_dir or None,
        }
    )
    return TrainSettings(
        params=params,
        input=input_settings(cfg["input"]),
        model=out["model"],
        metrics=out.get("metrics"),
        overwrite=out.get("overwrite", False),
        initial_model=cfg.get("training", {}).get("initial_model"),
        top_terms=top_terms,
        plots=plots,
        mlflow=mlflow_settings(cfg),
    )


def check_outputs(spark, s: TrainSettings) -> str:
    """Refuse unusable outputs before any work; returns the metrics.json path."""
    model = check_output(spark, s.model, "output.model", s.overwrite)
    TopicModel.check_save_target(s.model, s.overwrite, spark)
    if s.metrics:
        metrics = s.metrics
    elif "://" not in model:  # a local model directory: metrics.json beside it
        metrics = os.path.join(os.path.dirname(os.path.abspath(model.rstrip("/"))), "metrics.json")
    else:
        metrics = "metrics.json"
    check_paths({"output.model": model, "output.metrics": metrics})
    check_local_output(metrics, "output.metrics", None)
    return metrics


def spark_record(spark, facts: dict) -> dict:
    """``metrics.json``'s ``spark`` table: the master (classic) or the Connect URL, the
    version, and what the session can tell (application id, default parallelism and
    executors need the JVM: recorded in a classic session, None under Spark Connect)."""
    from ..execution import backend_for

    record = {
        "master": facts.get("master"),
        "remote": facts.get("remote"),
        "version": spark.version,
        "properties": facts["properties"],
        "executors": facts["executors"],
    }
    if not backend_for(spark).has_rdds:
        record.update(app_id=None, default_parallelism=None)
    else:
        sc = spark.sparkContext
        record.update(app_id=sc.applicationId, default_parallelism=sc.defaultParallelism)
    return record


def run(spark, cfg: dict, resume: bool = False, callbacks: Sequence = ()) -> dict:
    """Train as ``cfg`` says (``resume``: from the newest checkpoint in [checkpoint] dir;
    ``callbacks``: told of training, e.g. :class:`sparklda.progress.Progress`); returns
    the metrics written to metrics.json."""
    s = check(cfg, resume)
    metrics_path = check_outputs(spark, s)
    initial = None
    if s.initial_model:  # TopicModel, LDAModel or PipelineModel directory
        initial = load_topic_model(s.initial_model, spark)
        log.info(
            "warm start from %s (k=%d, %d terms)",
            initial.metadata.get("mode"),
            initial.k,
            initial.vocab_size,
        )
    tracking = _job_tracking(s.mlflow)
    with tracking:
        return _run(spark, s, initial, resume, callbacks, metrics_path, tracking)


def _job_tracking(settings: MlflowSettings | None):
    """The job's MLflow run (:class:`sparklda.mlflow.job.JobTracking`), or a null context."""
    if settings is None:
        return nullcontext()
    from ..mlflow.job import JobTracking

    return JobTracking(settings)


def _run(spark, s: TrainSettings, initial, resume, callbacks, metrics_path, tracking) -> dict:
    """Train, save the model, write metrics.json (and the plot); log to MLflow when on."""
    tracked = list(getattr(tracking, "callbacks", []))
    if tracked:
        tracking.log_start(s.params.to_dict(), s.input)
    started = time.time()
    source = source_from_config(spark, s.input)
    coherence = CorpusCoherence("u_mass", 10)
    result = fit(
        source,
        s.params,
        initial_model=initial,
        resume=resume,
        callbacks=[*callbacks, coherence, *tracked],
    )
    model = result.model
    model.save(s.model, overwrite=s.overwrite)
    final = result.evaluations[-1] if result.evaluations else None
    facts = session_facts(spark)
    where = facts.get("master") or facts.get("remote")
    metrics = {
        "command": " ".join(sys.argv),
        "started": started,
        "wall_seconds": time.time() - started,
        "params": s.params.to_dict(),
        "input": s.input,
        "model": s.model,
        "initial_model": s.initial_model,
        "report": result.report,
        "final": final,
        "evaluations": result.evaluations,
        "rounds": result.rounds,
        "spark": spark_record(spark, facts),
        "topics": model.describe_topics(10),
        # u_mass (gensim's definition) of the top 10 terms on the training documents
        "coherence": coherence.result,
    }
    plot = _plot(s, result.evaluations, metrics_path) if s.plots else None
    if plot:
        metrics["plots"] = {"convergence": plot}
    if tracked:
        metrics["mlflow"] = {"run_id": tracking.run_id, "tracking_uri": tracking.tracking_uri}
    os.makedirs(os.path.dirname(os.path.abspath(metrics_path)), exist_ok=True)
    tmp = metrics_path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(metrics, f, indent=1, default=str)
    os.replace(tmp, metrics_path)
    if tracked:
        metrics["mlflow"]["model_uri"] = tracking.log_end(metrics, model, metrics_path, plot)

    print(f"\nTop words of the {model.k} topics:")
    print(model.format_topics(s.top_terms))
    c = result.report["corpus"]
    print(
        f"\ncorpus: {c['training_documents']} training documents, {c['heldout_documents']} "
        f"held out, {c['empty_documents_skipped']} empty documents skipped"
    )
    print(
        f"trained {s.params.algorithm} K={s.params.k} for {result.report['rounds']} rounds "
        f"in {result.report['train_seconds']:.1f} s (corpus build included) on {where}"
    )
    if final:
        print(
            f"held-out log-likelihood per token: {final['heldout_loglik']:.4f} "
            f"(perplexity {final['perplexity']:.1f}) on {final['heldout_documents']} documents, "
            f"by {final.get('evaluator', 'completion')}"
        )
    if coherence.result:
        print(f"topic coherence (u_mass, top 10 terms): {coherence.result['mean']:.4f} mean")
    print(f"model: {s.model}\nmetrics: {metrics_path}")
    if plot:
        print(f"plot: {plot}")
    if tracked:
        print(f"MLflow run {tracking.run_id} at {tracking.tracking_uri}")
    return metrics


def _plot(s: TrainSettings, evaluations: list, metrics_path: str) -> str:
    """The convergence plot (``[output] plots``), beside metrics.json; returns its path."""
    from ..plots import CONVERGENCE_PNG, save_convergence_plot

    path = os.path.join(os.path.dirname(os.path.abspath(metrics_path)), CONVERGENCE_PNG)
    return save_convergence_plot(evaluations, path, f"{s.params.algorithm} K={s.params.k}")


def main(argv=None, prog: str | None = None) -> int:
    """``sparklda-train``: bad settings fail before Spark starts (exit 2). Progress goes
    to stderr (:class:`sparklda.progress.Progress`: a live line on a terminal, plain
    lines otherwise)."""

    def run_with_progress(spark, cfg: dict, resume: bool = False) -> dict:
        return run(spark, cfg, resume=resume, callbacks=[Progress(sys.stderr)])

    return job_main(
        argv, DESCRIPTION, check, run_with_progress, "sparklda-train", prog, resume=True
    )


if __name__ == "__main__":
    sys.exit(main())
