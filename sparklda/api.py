"""Library entry points over Spark: train from any input, transform a DataFrame.

The library never builds a SparkSession: callers pass ``spark`` or a DataFrame.
"""

from __future__ import annotations

import logging
import time

import numpy as np

from .block import DocBlock
from .corpus import (CorpusError, DocSource, build_corpus, check_vector_column, from_text,
                     from_vectors, read_uci)
from .params import TrainParams
from .training import TrainResult, train

log = logging.getLogger("sparklda")


def fit(source: DocSource, params: TrainParams, initial_model=None, on_round=None,
        on_corpus=None, heldout=None) -> TrainResult:
    """Validate ``params`` and the documents, build the corpus and train.

    Elapsed times in the result count from the start of this call, so corpus
    building (block layout and caching) is included. ``heldout`` (an RDD of
    :class:`~sparklda.block.HeldoutBlock`, see :func:`sparklda.corpus.heldout_blocks`)
    replaces the held-out split of ``params``. ``initial_model`` (a
    :class:`~sparklda.model.TopicModel`) warm-starts training; its
    vocabulary is merged with the corpus's by :func:`sparklda.warmstart`.
    """
    start = time.perf_counter()
    params.validate()
    initial = None
    if initial_model is not None:
        from .warmstart import align_initial

        source, initial = align_initial(initial_model, source, params)
    corpus = build_corpus(
        source, minibatch_size=params.minibatch_size, heldout_fraction=params.heldout_fraction,
        heldout_count=params.heldout_count or None, seed=params.seed,
        parts_per_slice=params.parts_per_slice or None, dtype=np.dtype(params.dtype),
        heldout=heldout)
    if on_corpus is not None:
        on_corpus(corpus)
    build_seconds = time.perf_counter() - start
    log.info("corpus built in %.2f s: %s", build_seconds, corpus.report)
    try:
        result = train(corpus, params, initial, on_round=on_round, clock_start=start)
    finally:
        corpus.train.unpersist()
        if heldout is None and corpus.heldout is not None:
            corpus.heldout.unpersist()
    result.report["corpus_build_seconds"] = build_seconds
    return result


def transform_dataframe(model, df, features_col="features", output_col="topicDistribution",
                        max_iter=100):
    """Fold every document of ``df[features_col]`` into ``model`` on the executors."""
    from pyspark.ml.linalg import DenseVector, VectorUDT
    from pyspark.sql import Row
    from pyspark.sql.types import StructField, StructType

    from .kernels import foldin_block

    check_vector_column(df, features_col)
    if output_col in df.columns:
        raise CorpusError(f"Output column {output_col!r} (topicDistributionCol) already exists.")
    v = model.vocab_size
    phi_bc = df.sparkSession.sparkContext.broadcast(model.topics_matrix())
    alpha = model.alpha
    pos = df.columns.index(features_col)

    def run(rows):
        rows = list(rows)
        if not rows:
            return
        docs = []
        for i, r in enumerate(rows):
            vec = r[pos]
            if vec is None:
                docs.append((i, np.zeros(0, np.int64), np.zeros(0)))
                continue
            if vec.size != v:
                raise CorpusError(f"Vectors in column {features_col!r} must have the model's "
                                  f"vocabulary size {v}; got size {vec.size}.")
            if hasattr(vec, "indices"):
                idx, val = np.asarray(vec.indices, np.int64), np.asarray(vec.values, np.float64)
            else:
                arr = vec.toArray()
                idx = np.flatnonzero(arr)
                val = arr[idx]
            if not np.all(np.isfinite(val)) or (val < 0).any():
                raise CorpusError(f"Column {features_col!r} has a negative or non-finite count.")
            keep = val > 0
            docs.append((i, idx[keep], val[keep]))
        block = DocBlock.from_docs(docs, dtype=np.float64)
        phi = phi_bc.value[block.terms]
        theta = foldin_block(block.indptr, block.local, block.counts, phi, alpha, max_iter)
        for i, r in enumerate(rows):
            yield Row(*r, DenseVector(theta[i]))

    schema = StructType(df.schema.fields + [StructField(output_col, VectorUDT(), True)])
    return df.sparkSession.createDataFrame(df.rdd.mapPartitions(run), schema)


def source_from_config(spark, cfg: dict) -> DocSource:
    """A :class:`DocSource` from the ``[input]`` table of a job config."""
    fmt = cfg.get("format", "uci")
    if fmt == "uci":
        if "docword" not in cfg:
            raise CorpusError("input.format = 'uci' needs input.docword (path of docword.txt[.gz]).")
        return read_uci(spark, cfg["docword"], cfg.get("vocab"))
    if fmt in ("text", "json", "parquet"):
        if "path" not in cfg:
            raise CorpusError(f"input.format = {fmt!r} needs input.path.")
        from .corpus import load_text_dataframe

        df = load_text_dataframe(spark, cfg["path"], fmt, cfg.get("text_col", "text"))
        opts = {k: cfg[k] for k in ("vocab_size", "min_df", "max_df", "min_token_length")
                if k in cfg}
        if fmt == "parquet" and cfg.get("features_col"):
            return from_vectors(df, cfg["features_col"], cfg.get("id_col"))
        return from_text(df, cfg.get("text_col", "text"), cfg.get("id_col"), **opts)
    raise CorpusError(f"The 'input.format' parameter must be one of 'uci', 'text', 'json', "
                      f"'parquet'; got {fmt!r}.")
