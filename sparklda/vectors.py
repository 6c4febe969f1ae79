"""Spark ML vectors and row positions in Arrow batches (``mapInArrow``), for the DataFrame
routes that also run under Spark Connect (docs/architecture.md, "Spark Connect")."""

from __future__ import annotations

import numpy as np

from .errors import CorpusError


def arrow_vectors(
    col,
    size: int,
    what: str,
    size_name: str = "the vocabulary size",
    check_counts: bool = True,
    first_doc: int = 0,
):
    """(term ids int64, counts float64) of each row of an Arrow column of Spark ML vectors.

    What ``mapInArrow`` hands a function for a ``VectorUDT`` column: a struct of
    ``type`` (0 sparse, 1 dense), ``size``, ``indices`` and ``values``. A null row is
    an empty document; sizes and (with ``check_counts``) counts are checked as
    :func:`vector_to_arrays` does, documents numbered from ``first_doc``.
    """
    import pyarrow as pa

    if isinstance(col, pa.ChunkedArray):
        col = col.combine_chunks()
    n = len(col)
    if n == 0:
        return []
    valid = col.is_valid().to_numpy(zero_copy_only=False)
    kinds, sizes, indices, values = col.flatten()
    kinds = kinds.fill_null(1).to_numpy(zero_copy_only=False)
    sizes = sizes.fill_null(-1).to_numpy(zero_copy_only=False)
    i_off = indices.offsets.to_numpy()
    i_all = indices.values.to_numpy(zero_copy_only=False)
    v_off = values.offsets.to_numpy()
    v_all = values.values.to_numpy(zero_copy_only=False)
    empty = (np.zeros(0, np.int64), np.zeros(0))
    out = []
    for r in range(n):
        if not valid[r]:
            out.append(empty)
            continue
        val = np.asarray(v_all[v_off[r] : v_off[r + 1]], np.float64)
        if kinds[r] == 0:
            got = int(sizes[r])
            idx = np.asarray(i_all[i_off[r] : i_off[r + 1]], np.int64)
        else:
            got = len(val)
            idx = np.flatnonzero(val).astype(np.int64)
            val = val[idx]
        if got != size:
            raise CorpusError(
                f"Vectors in {what} must all have {size_name} {size}; document "
                f"{first_doc + r} has size {got}."
            )
        if check_counts and (not np.all(np.isfinite(val)) or (val < 0).any()):
            raise CorpusError(
                f"{what} has a negative or non-finite count in document {first_doc + r}; "
                f"counts must be finite non-negative integers."
            )
        out.append((idx, val))
    return out


def with_row_positions(df, name: str = "doc_id"):
    """``df`` with a long column ``name`` numbering its rows from 0 in partition order,
    as ``RDD.zipWithIndex`` numbers them, with DataFrame operations only: one job counts
    each partition's rows, a ``mapInArrow`` adds the numbers."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import LongType, StructField, StructType

    tagged = df.withColumn("_sparklda_part", F.spark_partition_id())
    counts = dict(tagged.groupBy("_sparklda_part").count().collect())
    offsets, at = {}, 0
    for p in sorted(counts):
        offsets[p] = at
        at += counts[p]
    names = list(df.columns)

    def number(batches):
        import pyarrow as pa

        pos = None
        for batch in batches:
            n = batch.num_rows
            if n == 0:
                continue
            if pos is None:
                pos = offsets[int(batch.column("_sparklda_part")[0].as_py())]
            ids = pa.array(np.arange(pos, pos + n, dtype=np.int64))
            pos += n
            yield pa.RecordBatch.from_arrays(
                [*(batch.column(c) for c in names), ids], [*names, name]
            )

    schema = StructType(df.schema.fields + [StructField(name, LongType(), False)])
    return tagged.mapInArrow(number, schema)
