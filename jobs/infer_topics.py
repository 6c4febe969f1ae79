"""Score documents with a trained model, writing each one's topic distribution to Parquet.

``spark-submit jobs/infer_topics.py --config conf/warmstart.toml``

Loads the model named by ``infer.model`` (default: ``output.model``, the
training job's output; a TopicModel, LDAModel or PipelineModel directory),
reads the documents of ``[infer.input]`` (default: ``[input]``; any input
format of the training job), matches their terms to the model's vocabulary
by name (terms the model does not know are dropped and counted), infers each
document's topic distribution on the executors with the topics fixed, and
writes Parquet to ``infer.output``: ``doc_id`` (long) and
``topicDistribution`` (array<double> of K values summing to one, or a Spark
ML vector with ``infer.vector_type = "vector"``). Documents with no known
term get the uniform distribution 1/K.

``doc_id`` is the document's id in its input: the UCI docID (1-based, as in
the file), the ``input.id_col`` value, or else the row number (0-based).

Configuration (``[infer]``)::

    model = "out/kos-scvb0"            # default: output.model
    output = "out/kos-topics.parquet"  # required
    overwrite = true                   # default false
    vector_type = "array"              # "array" (default) or "vector"
    [infer.input]                      # default: the [input] table
    format = "uci"
    docword = "sample:kos/docword.txt.gz"
    vocab = "sample:kos/vocab.txt"
"""

from __future__ import annotations

import json
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _common  # noqa: E402

log = _common.logging.getLogger("sparklda.job")

KNOWN_TABLES = {"input", "infer", "output", "training", "evaluation", "spark"}
KNOWN_KEYS = {"model", "output", "overwrite", "vector_type", "input"}


def settings_from_config(cfg: dict) -> dict:
    """The job's settings, checked before Spark starts (raises ValueError)."""
    unknown = sorted(set(cfg) - KNOWN_TABLES)
    if unknown:
        raise ValueError(f"Unknown configuration table(s) {unknown}; known: "
                         f"{sorted(KNOWN_TABLES)}.")
    infer = dict(cfg.get("infer", {}))
    bad = sorted(set(infer) - KNOWN_KEYS)
    if bad:
        raise ValueError(f"Unknown key(s) {['infer.' + b for b in bad]}; known: "
                         f"{sorted('infer.' + k for k in KNOWN_KEYS)}.")
    model = infer.get("model") or cfg.get("output", {}).get("model")
    if not model:
        raise ValueError("infer.model (or output.model) must name the model directory to load.")
    if not infer.get("output"):
        raise ValueError("infer.output (the Parquet directory to write) is required.")
    vector_type = infer.get("vector_type", "array")
    if vector_type not in ("array", "vector"):
        raise ValueError(f"The 'infer.vector_type' parameter must be one of ['array', 'vector']. "
                         f"Got {vector_type!r} instead.")
    input_cfg = dict(infer.get("input") or cfg.get("input") or {})
    if not input_cfg:
        raise ValueError("[infer.input] or [input] must name the documents to score.")
    for key in ("docword", "vocab", "path"):
        input_cfg[key] = _common.resolve_sample(input_cfg.get(key))
    input_cfg = {k: v for k, v in input_cfg.items() if v is not None}
    return {"model": model, "output": infer["output"], "overwrite": bool(infer.get("overwrite")),
            "vector_type": vector_type, "input": input_cfg}


def score(spark, model, source, id_offset: int = 0):
    """(DataFrame of ``doc_id`` and ``topicDistribution`` (vector) for every document of
    ``source`` (a :class:`~sparklda.corpus.DocSource`), tokens of terms the model does not
    know, cached RDDs to unpersist once the DataFrame is written)."""
    from pyspark import StorageLevel
    from pyspark.ml.linalg import SparseVector, VectorUDT
    from pyspark.sql.types import LongType, StructField, StructType

    from sparklda.corpus import DocSource
    from sparklda.warmstart import project_to_vocabulary

    sc = spark.sparkContext
    raw = source.rdd.persist(StorageLevel.MEMORY_AND_DISK)
    source = DocSource(raw, source.vocab_size, source.vocab, source.what, source.declared_docs)
    docs = project_to_vocabulary(source, model.vocab, model.vocab_size).rdd.persist(
        StorageLevel.MEMORY_AND_DISK)
    tokens = raw.map(lambda d: float(np.sum(d[2]))).sum()
    unknown = tokens - docs.map(lambda d: float(np.sum(d[2]))).sum()
    if source.declared_docs:  # UCI: documents without any entry are still documents
        missing = sc.range(source.declared_docs).subtract(docs.map(lambda d: d[0]))
        docs = docs.union(missing.map(lambda i: (i, [], [])))
    v = model.vocab_size

    def to_row(d):
        return int(d[0]) + id_offset, SparseVector(v, [int(t) for t in d[1]],
                                                   [float(c) for c in d[2]])

    schema = StructType([StructField("doc_id", LongType(), False),
                         StructField("features", VectorUDT(), True)])
    vectors = spark.createDataFrame(docs.map(to_row), schema)
    return model.transform(vectors).drop("features"), unknown, (raw, docs)


def run(spark, cfg: dict) -> dict:
    """Score as ``cfg`` says; returns the report (also written as ``_report.json`` beside the
    Parquet files when the output is a local path)."""
    from pyspark.ml.functions import vector_to_array

    from sparklda.api import source_from_config
    from sparklda.ml import load_topic_model, path_exists

    s = settings_from_config(cfg)
    if not s["overwrite"] and path_exists(s["output"], spark):
        raise FileExistsError(f"infer.output {s['output']!r} already exists; set "
                              f"infer.overwrite = true to replace it.")
    started = time.time()
    model = load_topic_model(s["model"], spark)
    log.info("model %s: k=%d, %d terms", s["model"], model.k, model.vocab_size)
    source = source_from_config(spark, s["input"])
    id_offset = 1 if s["input"].get("format", "uci") == "uci" else 0
    scored, unknown, cached = score(spark, model, source, id_offset)
    if s["vector_type"] == "array":
        scored = scored.withColumn("topicDistribution", vector_to_array("topicDistribution"))
    try:
        scored.write.mode("overwrite" if s["overwrite"] else "errorifexists").parquet(
            s["output"])
    finally:
        for rdd in cached:
            rdd.unpersist()
    written = spark.read.parquet(s["output"]).count()
    report = {"model": s["model"], "input": s["input"], "output": s["output"], "k": model.k,
              "documents": written, "unknown_term_tokens": unknown,
              "wall_seconds": time.time() - started}
    if "://" not in s["output"]:
        with open(os.path.join(s["output"], "_report.json"), "w") as f:
            json.dump(report, f, indent=1, default=str)
    print(f"scored {written} documents with {model.k} topics -> {s['output']} "
          f"({unknown:.0f} tokens of terms unknown to the model dropped)")
    return report


def main(argv=None) -> int:
    # bad settings fail before Spark starts
    return _common.job_main(argv, __doc__, settings_from_config, run, "sparklda-infer")


if __name__ == "__main__":
    sys.exit(main())
