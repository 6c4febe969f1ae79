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
from .corpus import check_output_column, check_vector_column, vector_size
from .errors import CorpusError
from .execution import backend_for
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
    phi: np.ndarray,
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
