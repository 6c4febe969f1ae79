"""Topic distributions of new documents, on the executors (fold-in with the topics fixed).

One ``mapInArrow`` over the DataFrame, in a classic session and under Spark
Connect alike: each Arrow batch's documents are gathered into a
:class:`~sparklda.block.DocBlock` and θ is found by the EM fixed point of
:func:`sparklda.kernels.foldin_block`; the other columns pass through
unchanged. φ̂ reaches the tasks as a broadcast variable in a classic session,
and inside the task's closure under Spark Connect, which has no broadcast
(docs/architecture.md, "Spark Connect"). Documents with no terms get the
uniform vector 1/K (the prior mean).
"""

from __future__ import annotations

import numpy as np

from .block import DocBlock
from .corpus import check_output_column, check_vector_column, vector_size, vector_to_arrays
from .errors import CorpusError
from .execution import backend_for
from .execution.topics import ShardedTopics
from .kernels import foldin_block
from .kernels.warm import settle_heap
from .vectors import arrow_vectors


def _vector_struct(theta: np.ndarray):
    """A batch of dense ML vectors (rows of ``theta``) as the Arrow struct of ``VectorUDT``."""
    import pyarrow as pa

    n, k = theta.shape
    values = pa.ListArray.from_arrays(
        pa.array(np.arange(0, n * k + 1, k, dtype=np.int32)),
        pa.array(np.ascontiguousarray(theta, dtype=np.float64).ravel()),
        type=pa.list_(pa.field("element", pa.float64(), nullable=False)),
    )
    fields = [
        pa.field("type", pa.int8(), nullable=False),
        pa.field("size", pa.int32()),
        pa.field("indices", pa.list_(pa.field("element", pa.int32(), nullable=False))),
        pa.field("values", values.type),
    ]
    return pa.StructArray.from_arrays(
        [
            pa.array(np.ones(n, dtype=np.int8)),
            pa.nulls(n, pa.int32()),
            pa.nulls(n, fields[2].type),
            values,
        ],
        fields=fields,
    )


def topic_value(spark, phi: np.ndarray):
    """A zero-argument function the tasks call to get ``phi``: a broadcast variable's
    value in a classic session, the array itself (shipped in the closure) under Spark
    Connect (the session's backend shares it). Returns (getter, release)."""
    return backend_for(spark).share(spark, np.ascontiguousarray(phi))


def transform_dataframe(
    phi: np.ndarray | ShardedTopics,
    alpha: float | np.ndarray,
    df,
    features_col: str = "features",
    output_col: str = "topicDistribution",
    max_iter: int = 100,
):
    """``df`` with a vector column ``output_col`` of each document's θ under topics
    ``phi`` (V, K, columns summing to one) and prior ``alpha`` (a number, or the
    K-vector of a learned α), computed on the executors; works in a classic session
    and under Spark Connect.

    The columns are checked here, and the vectors' size against the model's
    vocabulary: the size the column's ML attribute declares (``CountVectorizer``
    sets it), else the first vector's (one small Spark job). The result is lazy:
    a later vector of another size raises when an action computes it, as
    pyspark's ``PythonException``; run the action inside
    :func:`sparklda.errors.executor_errors` to get the :class:`CorpusError`.
    """
    from pyspark.ml.linalg import VectorUDT
    from pyspark.sql.types import StructField, StructType

    check_vector_column(df, features_col)
    check_output_column(df, output_col)
    if isinstance(phi, ShardedTopics):
        return transform_sharded(phi, alpha, df, features_col, output_col, max_iter)
    v = phi.shape[0]
    size = vector_size(df, features_col)
    if size is not None and size != v:
        raise CorpusError(
            f"Vectors in column {features_col!r} have size {size} but the model's "
            f"vocabulary has {v} terms."
        )
    get_phi, _ = topic_value(df.sparkSession, phi)
    alpha = np.asarray(alpha, dtype=np.float64)  # a number, or the K-vector of a learned α
    alpha = float(alpha) if alpha.ndim == 0 else alpha
    what = f"column {features_col!r} (featuresCol)"

    def run(batches):
        import pyarrow as pa

        settle_heap()
        seen = 0
        for batch in batches:
            n = batch.num_rows
            if n == 0:
                continue
            vecs = arrow_vectors(
                batch.column(features_col), v, what, "the model's vocabulary size", True, seen
            )
            seen += n
            docs = [(i, idx[val > 0], val[val > 0]) for i, (idx, val) in enumerate(vecs)]
            block = DocBlock.from_docs(docs, dtype=np.float64)
            rows_phi = get_phi()[block.terms]
            theta = foldin_block(block.indptr, block.local, block.counts, rows_phi, alpha, max_iter)
            yield pa.RecordBatch.from_arrays(
                [*batch.columns, _vector_struct(theta)], [*batch.schema.names, output_col]
            )

    schema = StructType(df.schema.fields + [StructField(output_col, VectorUDT(), True)])
    return df.mapInArrow(run, schema)


def transform_sharded(
    phi: ShardedTopics,
    alpha: float | np.ndarray,
    df,
    features_col: str = "features",
    output_col: str = "topicDistribution",
    max_iter: int = 100,
):
    """:func:`transform_dataframe` with φ̂ held on the executors (a classic session): each
    partition of ``df``'s rows asks the shards for the rows of its documents' terms
    (:meth:`ShardedTopics.serve`, as a round's tasks do) and folds its documents in
    against them, one block a partition (fold-in is per document: the θ of the
    broadcast path). ``df`` is read twice (the terms asked, then the documents): it must
    give the same rows both times, as any DataFrame of stored data does."""
    from pyspark.ml.linalg import DenseVector, VectorUDT
    from pyspark.sql.types import StructField, StructType

    v = phi.vocab_size
    size = vector_size(df, features_col)
    if size is not None and size != v:
        raise CorpusError(
            f"Vectors in column {features_col!r} have size {size} but the model's "
            f"vocabulary has {v} terms."
        )
    alpha = np.asarray(alpha, dtype=np.float64)
    alpha = float(alpha) if alpha.ndim == 0 else alpha
    what = f"column {features_col!r} (featuresCol)"
    col = df.columns.index(features_col)

    def docs_of(rows):
        out = []
        for i, row in enumerate(rows):
            idx, val = vector_to_arrays(row[col], v, what, i, "the model's vocabulary size")
            out.append((i, idx[val > 0], val[val > 0]))
        return out

    def terms_of(rows):
        parts = [d[1] for d in docs_of(rows)]
        return np.concatenate(parts) if parts else np.zeros(0, np.int64)

    def run(pair):
        rows, served = pair
        if not rows:
            return []
        settle_heap()
        block = DocBlock.from_docs(docs_of(rows), dtype=np.float64)
        theta = foldin_block(
            block.indptr, block.local, block.counts, served[block.terms], alpha, max_iter
        )
        if len(theta) != len(rows):  # pragma: no cover - from_docs keeps every document
            raise AssertionError("fold-in lost documents")
        return [(*row, DenseVector(theta[i])) for i, row in enumerate(rows)]

    out = phi.serve(df.rdd, terms_of).flatMap(run)
    schema = StructType(df.schema.fields + [StructField(output_col, VectorUDT(), True)])
    return df.sparkSession.createDataFrame(out, schema)
