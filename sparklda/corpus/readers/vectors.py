"""Documents from a DataFrame column of Spark ML vectors of term counts
(:func:`from_vectors`), and the column checks the ``pyspark.ml`` stages share."""

from __future__ import annotations

import numpy as np

from ...errors import CorpusError, executor_errors
from ...packs import (
    Pack,
    doc_of_pair,
    make_pack,
    narrow_pack,
    pack_from_bytes,
    pack_starts,
    pack_to_bytes,
)
from ..arrow import DOCS_SCHEMA, arrow_batch_rdd, list_values, pack_to_batch
from ..source import DocSource

__all__ = [
    "check_output_column",
    "check_vector_column",
    "declared_size",
    "from_vectors",
    "vector_size",
    "vector_to_arrays",
    "vectors_to_pack",
]


def check_column(df, col: str, param: str, kind: type, what: str) -> None:
    """Raise :class:`CorpusError` unless ``df[col]`` exists and its type is a ``kind``
    (``what`` names the type for the message)."""
    if col not in df.columns:
        raise CorpusError(
            f"Column {col!r} ({param}) does not exist; the DataFrame has columns {df.columns}."
        )
    dtype = df.schema[col].dataType
    if not isinstance(dtype, kind):
        raise CorpusError(f"Column {col!r} ({param}) must be {what}; got {dtype.simpleString()}.")


def check_vector_column(df, col: str, param: str = "featuresCol"):
    """Raise :class:`CorpusError` unless ``df[col]`` exists and holds Spark ML
    vectors (term counts, as ``CountVectorizer`` produces)."""
    from pyspark.ml.linalg import VectorUDT

    check_column(
        df,
        col,
        param,
        VectorUDT,
        "of type pyspark.ml.linalg.VectorUDT (term counts, as CountVectorizer produces)",
    )


def declared_size(df, col: str) -> int | None:
    """The vector size the ML attribute group of ``df[col]`` declares (``CountVectorizer``
    sets it), or None."""
    attr = (df.schema[col].metadata or {}).get("ml_attr", {})
    n = attr.get("num_attrs")
    return int(n) if n is not None else None


def vector_size(df, col: str) -> int | None:
    """The size of the vectors of ``df[col]``: the declared one (:func:`declared_size`),
    else the first non-null vector's (a small Spark job); None for a column of nulls."""
    size = declared_size(df, col)
    if size is None:
        with executor_errors(f"column {col!r}"):
            first = df.select(col).dropna().head()
        size = int(first[0].size) if first is not None else None
    return size


def check_output_column(df, col: str, param: str = "topicDistributionCol"):
    """Raise :class:`CorpusError` if the output column ``col`` already exists."""
    if col in df.columns:
        raise CorpusError(
            f"Output column {col!r} ({param}) already exists; the DataFrame has "
            f"columns {df.columns}."
        )


def vector_to_arrays(
    vec,
    size: int,
    what: str,
    doc,
    size_name: str = "the vocabulary size",
    check_counts: bool = True,
):
    """(term ids int64, counts float64) of a Spark ML vector of term counts.

    ``None`` is an empty document. A vector of another size than ``size``, or
    (with ``check_counts``) a negative or non-finite count, raises
    :class:`CorpusError` naming ``what`` and the document ``doc``.
    """
    if vec is None:
        return np.zeros(0, np.int64), np.zeros(0)
    if vec.size != size:
        raise CorpusError(
            f"Vectors in {what} must all have {size_name} {size}; document {doc} "
            f"has size {vec.size}."
        )
    if hasattr(vec, "indices"):
        idx, val = np.asarray(vec.indices, np.int64), np.asarray(vec.values, np.float64)
    else:
        arr = vec.toArray()
        idx = np.flatnonzero(arr).astype(np.int64)
        val = np.asarray(arr[idx], np.float64)
    if check_counts and (not np.all(np.isfinite(val)) or (val < 0).any()):
        raise CorpusError(
            f"{what} has a negative or non-finite count in document {doc}; counts "
            f"must be finite non-negative integers."
        )
    return idx, val


def from_vectors(
    df, features_col: str = "features", id_col: str | None = None, vocab: list | None = None
) -> DocSource:
    """Documents from a DataFrame column of Spark ML vectors of term counts.

    This is what ``CountVectorizer`` produces and ``pyspark.ml.clustering.LDA``
    takes. ``id_col`` (integral) names each document; without it documents
    are numbered by their position in the DataFrame.
    """
    from pyspark.sql.types import IntegralType

    check_vector_column(df, features_col)
    if id_col is not None:
        check_column(df, id_col, "idCol", IntegralType, "an integer column")
    # the vectors' size: declared by the column (CountVectorizer's metadata), else the
    # vocabulary's, else the first vector's (a Spark job). Every vector's size is
    # checked against it when the corpus is validated.
    size = declared_size(df, features_col)
    if size is None and vocab is not None:
        size = len(vocab)
    if size is None:
        with executor_errors(f"column {features_col!r}"):
            first = df.select(features_col).dropna().head()
        if first is None:
            raise CorpusError(f"The corpus is empty: column {features_col!r} has no rows.")
        size = int(first[0].size)
    if vocab is not None and len(vocab) != size:
        raise CorpusError(
            f"The vocabulary has {len(vocab)} terms but vectors in column "
            f"{features_col!r} have size {size}."
        )
    what = f"column {features_col!r}"
    vocab = list(vocab) if vocab is not None else None

    def frame():
        return _vector_documents_frame(df, features_col, id_col, size, what)

    def to_doc(row_id, vec):
        # counts are checked, with the bad value named, by validate()
        return (row_id, *vector_to_arrays(vec, size, what, row_id, check_counts=False))

    def packs():
        # each Arrow batch read straight into a pack, kept in the exact narrow dtypes
        sel, offsets = _vector_selection(df, features_col, id_col, what)
        batches = arrow_batch_rdd(sel)
        if batches is not None:
            to_pack = _vector_batch_pack(size, what, offsets)
            return batches.map(lambda b: narrow_pack(to_pack(b)))
        frame = sel.mapInArrow(_vector_documents(size, what, offsets, packed=True), "pack binary")
        return frame.rdd.map(lambda r: pack_from_bytes(r[0]))

    def documents():
        if id_col is not None:
            return df.select(id_col, features_col).rdd.map(lambda r: to_doc(int(r[0]), r[1]))
        return (
            df.select(features_col).rdd.zipWithIndex().map(lambda ri: to_doc(int(ri[1]), ri[0][0]))
        )

    return DocSource(
        None,
        size,
        vocab,
        what,
        frame=frame,
        packs=packs,
        spark=df.sparkSession,
        documents=documents,
    )


def vectors_to_pack(col, ids: np.ndarray, size: int, what: str) -> Pack:
    """The documents of an Arrow column of Spark ML vectors of term counts (the struct
    ``VectorUDT`` stores: type, size, indices, values), ids ``ids``, as a pack; what
    :func:`vector_to_arrays` gives row by row (a null vector is an empty document; a
    dense vector's zeros are dropped), without a Python step per row. A vector of
    another size than ``size`` raises :class:`CorpusError` naming ``what`` and the
    first such document."""
    import pyarrow as pa

    n = len(col)
    if isinstance(col, pa.ChunkedArray):
        col = col.combine_chunks()
    names = [col.type.field(i).name for i in range(col.type.num_fields)]
    fields = dict(zip(names, col.flatten(), strict=True))
    valid = col.is_valid().to_numpy(zero_copy_only=False) if col.null_count else np.ones(n, bool)
    sparse = fields["type"].fill_null(1).to_numpy(zero_copy_only=False) == 0
    values, vlen = list_values(fields["values"])
    vlen[~valid] = 0
    sizes = np.where(sparse, fields["size"].fill_null(-1).to_numpy(zero_copy_only=False), vlen)
    wrong = np.flatnonzero(valid & (sizes != size))
    if len(wrong):
        j = wrong[0]
        raise CorpusError(
            f"Vectors in {what} must all have the vocabulary size {size}; document "
            f"{int(ids[j])} has size {int(sizes[j])}."
        )
    if not len(values):
        return make_pack(ids, np.zeros(n, np.int64), np.zeros(0, np.int64), np.zeros(0))
    row = doc_of_pair(vlen)
    pos = np.arange(len(values), dtype=np.int64) - pack_starts(vlen)[row]
    terms = pos
    pair_sparse = sparse[row]
    if pair_sparse.any():
        ioffsets = fields["indices"].offsets.to_numpy().astype(np.int64)
        indices = fields["indices"].values.to_numpy(zero_copy_only=False)
        terms = np.where(pair_sparse, indices[(ioffsets[:-1][row] + pos) * pair_sparse], pos)
    keep = pair_sparse | (values != 0)
    if keep.all():
        return make_pack(ids, vlen, terms, values)
    lengths = np.bincount(row[keep], minlength=n)
    return make_pack(ids, lengths, terms[keep], values[keep])


def _vector_batch_pack(size: int, what: str, offsets: np.ndarray | None):
    """The pack of an Arrow batch of :func:`_vector_selection`'s columns: the vectors
    (``_v``, Arrow struct of a Spark ML vector), ids from ``_id`` or, without one, the
    row's position in the DataFrame (``offsets`` of each partition plus the row's index
    in it: zipWithIndex's ids)."""
    mask = (1 << 33) - 1

    def run(batch) -> Pack:
        if offsets is None:
            id_col = batch.column("_id")
            if id_col.null_count:
                raise CorpusError(
                    f"The id column of {what} (idCol) has a null; every document needs an id."
                )
            ids = id_col.to_numpy(zero_copy_only=False)
        else:
            p = batch.column("_p").to_numpy(zero_copy_only=False)
            m = batch.column("_m").to_numpy(zero_copy_only=False)
            ids = offsets[p] + (m & mask)
        return vectors_to_pack(batch.column("_v"), ids, size, what)

    return run


def _vector_documents(size: int, what: str, offsets: np.ndarray | None, packed: bool = False):
    """mapInArrow: the documents of :func:`_vector_selection`'s batches
    (:func:`_vector_batch_pack`), as batches of :data:`DOCS_SCHEMA`, or with ``packed``
    one ``pack`` (binary) row per batch (:func:`sparklda.packs.pack_to_bytes`)."""
    import pyarrow as pa

    to_pack = _vector_batch_pack(size, what, offsets)

    def run(batches):
        for batch in batches:
            pack = to_pack(batch)
            if packed:
                yield pa.RecordBatch.from_pydict(
                    {"pack": pa.array([pack_to_bytes(pack)], pa.binary())}
                )
            else:
                yield pack_to_batch(pack)

    return run


def _quoted(name: str) -> str:
    """A column name as a SQL identifier."""
    return "`" + name.replace("`", "``") + "`"


def _vector_selection(df, features_col: str, id_col: str | None, what: str):
    """``(sel, offsets)``: the columns :func:`_vector_batch_pack` reads (``_id``, or
    ``_p`` and ``_m`` with each partition's first position ``offsets``, from a count
    job, when there is no id column)."""
    # SQL text, not pyspark.sql.functions: its Columns follow the process-wide Spark
    # Connect mode, not the DataFrame's session
    vec = f"{_quoted(features_col)} AS _v"
    if id_col is not None:
        return df.selectExpr(f"CAST({_quoted(id_col)} AS BIGINT) AS _id", vec), None
    sel = df.selectExpr("spark_partition_id() AS _p", "monotonically_increasing_id() AS _m", vec)
    with executor_errors(what):
        counts = {int(r[0]): int(r[1]) for r in sel.groupBy("_p").count().collect()}
    n = max(counts, default=-1) + 1
    per_part = np.array([counts.get(i, 0) for i in range(n)], np.int64)
    offsets = np.concatenate([[0], np.cumsum(per_part)[:-1]]).astype(np.int64)
    return sel, offsets


def _vector_documents_frame(
    df, features_col: str, id_col: str | None, size: int, what: str, packed: bool = False
):
    """The documents of a vector column as a DataFrame of :data:`DOCS_SCHEMA` (or, with
    ``packed``, of packs: ``pack binary``, one row per Arrow batch) and the DataFrames
    it cached (none)."""
    schema = "pack binary" if packed else DOCS_SCHEMA
    sel, offsets = _vector_selection(df, features_col, id_col, what)
    return sel.mapInArrow(_vector_documents(size, what, offsets, packed), schema), []
