"""Score documents with a trained model, writing each one's topic distribution to Parquet.

``sparklda-infer --config my.toml`` or
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
term get the uniform distribution 1/K. The output is staged beside
``infer.output`` and put in place only when complete
(:func:`sparklda.storage.write_output`): a crash never leaves half an output
or loses the previous one.

Against a Spark Connect server (``--remote sc://host:port`` or
``SPARK_REMOTE``) the documents are read with DataFrame operations only, every
input format of the training job (UCI files, text, JSON, Parquet text or
vectors), and readers take the output as complete when it holds ``_SUCCESS``.

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
import logging
import os
import sys
import time

import numpy as np

from ..api import source_from_config
from ..corpus import DocSource, validate_frame
from ..errors import executor_errors
from ..execution import backend_for
from ..ml import load_topic_model
from ..storage import literal_path, write_output
from ..vectors import with_row_positions
from ..warmstart import project_to_vocabulary
from .config import ConfigError, check_config, input_settings
from .job import check_output, job_main
from .session import session_facts

log = logging.getLogger("sparklda.job")

DESCRIPTION = "Score documents with a trained LDA model, writing topic distributions to Parquet."
VECTOR_TYPES = ("array", "vector")


def settings_from_config(cfg: dict) -> dict:
    """The job's settings, checked before Spark starts (raises ValueError)."""
    check_config(cfg)
    infer = cfg.get("infer", {})
    model = infer.get("model") or cfg.get("output", {}).get("model")
    if not model:
        raise ConfigError("infer.model (or output.model) must name the model directory to load.")
    if not infer.get("output"):
        raise ConfigError("infer.output (the Parquet directory to write) is required.")
    vector_type = infer.get("vector_type", "array")
    if vector_type not in VECTOR_TYPES:
        raise ConfigError(
            f"The 'infer.vector_type' parameter must be one of "
            f"{list(VECTOR_TYPES)}. Got {vector_type!r} instead."
        )
    input_cfg = infer.get("input") or cfg.get("input")
    if not input_cfg:
        raise ConfigError("[infer.input] or [input] must name the documents to score.")
    return {
        "model": model,
        "output": infer["output"],
        "overwrite": infer.get("overwrite", False),
        "vector_type": vector_type,
        "input": input_settings(input_cfg),
    }


def score(spark, model, source, id_offset: int = 0):
    """(DataFrame of ``doc_id`` and ``topicDistribution`` (vector) for every document of
    ``source`` (a :class:`~sparklda.corpus.DocSource`), tokens of terms the model does not
    know, cached RDDs to unpersist once the DataFrame is written)."""
    from pyspark import StorageLevel
    from pyspark.ml.linalg import SparseVector, VectorUDT
    from pyspark.sql.types import LongType, StructField, StructType

    sc = spark.sparkContext
    raw = source.rdd.persist(StorageLevel.MEMORY_AND_DISK)
    source = DocSource(
        raw, source.vocab_size, source.vocab, source.what, source.declared_docs, spark=source.spark
    )
    docs = project_to_vocabulary(source, model.vocab, model.vocab_size).rdd.persist(
        StorageLevel.MEMORY_AND_DISK
    )
    tokens = raw.map(lambda d: float(np.sum(d[2]))).sum()
    unknown = tokens - docs.map(lambda d: float(np.sum(d[2]))).sum()
    if source.declared_docs:  # UCI: documents without any entry are still documents
        missing = sc.range(source.declared_docs).subtract(docs.map(lambda d: d[0]))
        docs = docs.union(missing.map(lambda i: (i, [], [])))
    v = model.vocab_size

    def to_row(d):
        return int(d[0]) + id_offset, SparseVector(
            v, [int(t) for t in d[1]], [float(c) for c in d[2]]
        )

    schema = StructType(
        [StructField("doc_id", LongType(), False), StructField("features", VectorUDT(), True)]
    )
    vectors = spark.createDataFrame(docs.map(to_row), schema)
    return model.transform(vectors).drop("features"), unknown, (raw, docs)


def _to_vectors(v: int, id_offset: int):
    """mapInArrow: documents (:data:`~sparklda.corpus.DOCS_SCHEMA`) to ``doc_id`` (plus
    ``id_offset``) and ``features``, a sparse ML vector of size ``v``."""

    def run(batches):
        import pyarrow as pa

        for batch in batches:
            n = batch.num_rows
            if not n:
                continue
            terms, counts = batch.column("terms"), batch.column("counts")
            fields = [
                pa.field("type", pa.int8(), nullable=False),
                pa.field("size", pa.int32()),
                pa.field("indices", pa.list_(pa.field("element", pa.int32(), nullable=False))),
                pa.field("values", pa.list_(pa.field("element", pa.float64(), nullable=False))),
            ]
            indices = pa.ListArray.from_arrays(
                terms.offsets, terms.values.cast(pa.int32()), type=fields[2].type
            )
            values = pa.ListArray.from_arrays(
                counts.offsets, counts.values.cast(pa.float64()), type=fields[3].type
            )
            kinds = pa.array(np.zeros(n, np.int8))
            sizes = pa.array(np.full(n, v, np.int32))
            vectors = pa.StructArray.from_arrays([kinds, sizes, indices, values], fields=fields)
            ids = pa.array(batch.column("doc_id").to_numpy() + np.int64(id_offset))
            yield pa.RecordBatch.from_arrays([ids, vectors], ["doc_id", "features"])

    return run


def score_frame(spark, model, s: dict):
    """(DataFrame of ``doc_id`` and ``topicDistribution`` (vector), unknown-term tokens, the
    source whose cached frames to release) for the documents of ``s["input"]``, read with
    DataFrame operations only (Spark Connect). Every input format of the training job
    works: Parquet vectors in the model's term ids (``features_col``, numbered by
    ``id_col`` or by their position) are scored as they are; UCI files, text, JSON and
    Parquet text are read as the train job reads them under Connect and their terms
    matched to the model's vocabulary by name, as in a classic session."""
    from pyspark.ml.linalg import VectorUDT
    from pyspark.sql import functions as F
    from pyspark.sql.types import LongType, StructField, StructType

    inp = s["input"]
    if inp.get("format") == "parquet" and inp.get("features_col"):
        col = inp["features_col"]
        df = spark.read.parquet(literal_path(inp["path"]))
        if inp.get("id_col"):
            docs = df.select(F.col(inp["id_col"]).cast("long").alias("doc_id"), F.col(col))
        else:
            docs = with_row_positions(df.select(col), "doc_id").select("doc_id", col)
        scored = model.transform(docs, features_col=col)
        return scored.drop(col), 0.0, None
    source = source_from_config(spark, inp)
    id_offset = 1 if inp.get("format", "uci") == "uci" else 0
    tokens = validate_frame(source, source.documents_frame())["tokens"]
    source.release_frame()
    projected = project_to_vocabulary(source, model.vocab, model.vocab_size)
    docs = projected.documents_frame()
    known = docs.select(F.aggregate("counts", F.lit(0.0), lambda a, c: a + c).alias("n"))
    unknown = float(tokens) - float(known.agg(F.sum("n")).first()[0] or 0.0)
    if source.declared_docs:  # UCI: documents without any entry are still documents
        missing = (
            spark.range(source.declared_docs)
            .withColumnRenamed("id", "doc_id")
            .join(docs.select("doc_id"), "doc_id", "left_anti")
            .select(
                "doc_id",
                F.array().cast("array<long>").alias("terms"),
                F.array().cast("array<double>").alias("counts"),
            )
        )
        docs = docs.unionByName(missing)
    schema = StructType(
        [StructField("doc_id", LongType(), False), StructField("features", VectorUDT(), True)]
    )
    vectors = docs.mapInArrow(_to_vectors(model.vocab_size, id_offset), schema)
    return model.transform(vectors).drop("features"), unknown, projected


def run(spark, cfg: dict) -> dict:
    """Score as ``cfg`` says; returns the report (also written as ``_report.json`` beside the
    Parquet files when the output is a local path of a classic session).

    The output is written to a staging directory beside ``infer.output`` and then put in
    its place (:func:`sparklda.storage.write_output`): a crash never leaves a half-written
    output or loses the previous one; under Spark Connect ``_SUCCESS`` marks it complete."""
    from pyspark.ml.functions import vector_to_array

    s = settings_from_config(cfg)
    connect = not backend_for(spark).has_rdds
    output = check_output(spark, s["output"], "infer.output", s["overwrite"])
    started = time.time()
    model = load_topic_model(s["model"], spark)
    log.info("model %s: k=%d, %d terms", s["model"], model.k, model.vocab_size)
    cached: tuple = ()
    frames: DocSource | None = None
    what = "the documents"
    try:
        if connect:
            with executor_errors(what):
                scored, unknown, frames = score_frame(spark, model, s)
            what = frames.what if frames is not None else what
        else:
            source = source_from_config(spark, s["input"])
            what = source.what
            id_offset = 1 if s["input"].get("format", "uci") == "uci" else 0
            with executor_errors(what):  # bad documents are found on the executors
                scored, unknown, cached = score(spark, model, source, id_offset)
        if s["vector_type"] == "array":
            scored = scored.withColumn("topicDistribution", vector_to_array("topicDistribution"))
        with executor_errors(what):
            write_output(
                spark,
                s["output"],
                lambda path: scored.write.mode("error").parquet(path),
                s["overwrite"],
            )
    finally:
        for rdd in cached:
            rdd.unpersist()
        if frames is not None:
            frames.release_frame()
    written = spark.read.parquet(literal_path(s["output"])).count()
    report = {
        "model": s["model"],
        "input": s["input"],
        "output": s["output"],
        "k": model.k,
        "documents": written,
        "unknown_term_tokens": unknown,
        "wall_seconds": time.time() - started,
        **session_facts(spark, properties=False),
    }
    if "://" not in output and not connect:
        with open(os.path.join(output, "_report.json"), "w") as f:
            json.dump(report, f, indent=1, default=str)
    print(
        f"scored {written} documents with {model.k} topics -> {s['output']} "
        f"({unknown:.0f} tokens of terms unknown to the model dropped)"
    )
    return report


def main(argv=None, prog: str | None = None) -> int:
    """``sparklda-infer``: bad settings fail before Spark starts (exit 2)."""
    return job_main(argv, DESCRIPTION, settings_from_config, run, "sparklda-infer", prog)


if __name__ == "__main__":
    sys.exit(main())
