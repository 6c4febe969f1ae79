"""Train an LDA model: ``spark-submit jobs/train_lda.py --config conf/local.toml``.

Reads the corpus named in ``[input]``, trains with ``[training]`` (any mode),
evaluates on held-out documents, saves the model to ``output.model`` (written
atomically) and writes ``metrics.json`` beside it (``output.metrics``).
Prints the top words of each topic and the held-out quality.
"""

from __future__ import annotations

import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _common  # noqa: E402

log = _common.logging.getLogger("sparklda.job")


def params_from_config(cfg: dict):
    """TrainParams from the [training] and [evaluation] tables, validated."""
    from sparklda.params import TrainParams

    known = {"training", "evaluation", "input", "output", "spark", "infer"}  # infer: infer_topics
    unknown = sorted(set(cfg) - known)
    if unknown:
        raise ValueError(f"Unknown configuration table(s) {unknown}; known: {sorted(known)}.")
    if "model" not in cfg.get("output", {}):
        raise ValueError("output.model (the model directory to write) is required.")
    training = {k: v for k, v in cfg.get("training", {}).items() if k != "initial_model"}
    return TrainParams.from_dict({**training, **cfg.get("evaluation", {})}).validate()


def run(spark, cfg: dict) -> dict:
    """Train as ``cfg`` says; returns the metrics written to metrics.json."""
    from sparklda.api import fit, source_from_config

    input_cfg = dict(cfg.get("input", {}))
    for key in ("docword", "vocab", "path"):
        input_cfg[key] = _common.resolve_sample(input_cfg.get(key))
    input_cfg = {k: v for k, v in input_cfg.items() if v is not None}
    params = params_from_config(cfg)
    out = cfg.get("output", {})
    model_path = out["model"]
    metrics_path = out.get("metrics") or os.path.join(
        os.path.dirname(os.path.abspath(model_path)) if "://" not in model_path else ".",
        "metrics.json")
    initial = None
    if cfg.get("training", {}).get("initial_model"):
        from sparklda.ml import load_topic_model  # TopicModel, LDAModel or PipelineModel dir

        initial = load_topic_model(cfg["training"]["initial_model"], spark)
        log.info("warm start from %s (k=%d, %d terms)", initial.metadata.get("mode"), initial.k,
                 initial.vocab_size)

    started = time.time()
    source = source_from_config(spark, input_cfg)
    result = fit(source, params, initial_model=initial)
    model = result.model
    model.save(model_path, overwrite=bool(out.get("overwrite", False)))
    final = result.evaluations[-1] if result.evaluations else None
    metrics = {
        "command": " ".join(sys.argv), "started": started, "wall_seconds": time.time() - started,
        "params": params.to_dict(), "input": input_cfg, "model": model_path,
        "initial_model": cfg.get("training", {}).get("initial_model"),
        "report": result.report, "final": final, "evaluations": result.evaluations,
        "rounds": result.rounds,
        "spark": {"master": spark.sparkContext.master, "version": spark.version,
                  "default_parallelism": spark.sparkContext.defaultParallelism},
        "topics": model.describe_topics(10),
    }
    tmp = metrics_path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(metrics, f, indent=1, default=str)
    os.replace(tmp, metrics_path)

    print(f"\nTop words of the {model.k} topics:")
    print(model.format_topics(int(out.get("top_terms", 10))))
    c = result.report["corpus"]
    print(f"\ncorpus: {c['training_documents']} training documents, {c['heldout_documents']} "
          f"held out, {c['empty_documents_skipped']} empty documents skipped")
    print(f"trained {params.algorithm} K={params.k} for {result.report['rounds']} rounds "
          f"in {result.report['train_seconds']:.1f} s (corpus build included)")
    if final:
        print(f"held-out log-likelihood per token: {final['heldout_loglik']:.4f} "
              f"(perplexity {final['perplexity']:.1f}) on {final['heldout_documents']} documents")
    print(f"model: {model_path}\nmetrics: {metrics_path}")
    return metrics


def main(argv=None) -> int:
    # bad settings fail before Spark starts
    return _common.job_main(argv, __doc__, params_from_config, run, "sparklda-train")


if __name__ == "__main__":
    sys.exit(main())
