"""Topic distributions of new documents, on the executors (fold-in with the topics fixed).

The model's φ̂ is broadcast; each partition's documents are gathered into a
:class:`~sparklda.block.DocBlock` and θ is found by the EM fixed point of
:func:`sparklda.kernels.foldin_block`. Documents with no terms get the
uniform vector 1/K (the prior mean).
"""

from __future__ import annotations

import numpy as np

from .block import DocBlock
from .corpus import check_output_column, check_vector_column, vector_size, vector_to_arrays
from .errors import CorpusError
from .kernels import foldin_block


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
    K-vector of a learned α), computed on the executors.

    The columns are checked here, and the vectors' size against the model's
    vocabulary: the size the column's ML attribute declares (``CountVectorizer``
    sets it), else the first vector's (one small Spark job). The result is lazy:
    a later vector of another size raises when an action computes it, as
    pyspark's ``PythonException``; run the action inside
    :func:`sparklda.errors.executor_errors` to get the :class:`CorpusError`.
    """
    from pyspark.ml.linalg import DenseVector, VectorUDT
    from pyspark.sql import Row
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
    phi_bc = df.sparkSession.sparkContext.broadcast(np.ascontiguousarray(phi))
    alpha = np.asarray(alpha, dtype=np.float64)  # a number, or the K-vector of a learned α
    alpha = float(alpha) if alpha.ndim == 0 else alpha
    pos = df.columns.index(features_col)
    what = f"column {features_col!r} (featuresCol)"

    def run(rows):
        rows = list(rows)
        if not rows:
            return
        docs = []
        for i, r in enumerate(rows):
            idx, val = vector_to_arrays(r[pos], v, what, i, "the model's vocabulary size")
            keep = val > 0
            docs.append((i, idx[keep], val[keep]))
        block = DocBlock.from_docs(docs, dtype=np.float64)
        rows_phi = phi_bc.value[block.terms]
        theta = foldin_block(block.indptr, block.local, block.counts, rows_phi, alpha, max_iter)
        for i, r in enumerate(rows):
            yield Row(*r, DenseVector(theta[i]))

    schema = StructType(df.schema.fields + [StructField(output_col, VectorUDT(), True)])
    return df.sparkSession.createDataFrame(df.rdd.mapPartitions(run), schema)
