"""Documents as Arrow batches: the form of the DataFrame path's documents
(:data:`DOCS_SCHEMA`) and of a classic session's Arrow export of a DataFrame."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import numpy as np

from ..packs import Pack, docs_of_pack, make_pack, pack_of, segment_gather

__all__ = [
    "DOCS_SCHEMA",
    "arrow_batch_rdd",
    "docs_from_batch",
    "docs_to_batch",
    "frame_docs",
    "list_values",
    "pack_from_batch",
    "pack_to_batch",
]

log = logging.getLogger("sparklda.corpus")


#: Columns of a documents DataFrame (:meth:`DocSource.documents_frame`).
DOCS_SCHEMA = "doc_id long, terms array<long>, counts array<double>"


def pack_from_batch(batch) -> Pack:
    """The documents of an Arrow batch of :data:`DOCS_SCHEMA` as a pack
    (:mod:`sparklda.packs`), without a Python step per document."""
    ids = batch.column("doc_id").to_numpy(zero_copy_only=False)
    terms, lengths = list_values(batch.column("terms"))
    counts, _ = list_values(batch.column("counts"))
    return make_pack(ids, lengths, terms, counts)


def list_values(col) -> tuple[np.ndarray, np.ndarray]:
    """(the values of every row in row order, each row's length) of an Arrow list
    column; a null list has no values."""
    offsets = col.offsets.to_numpy()
    lengths = np.diff(offsets).astype(np.int64)
    if col.null_count:
        lengths[~col.is_valid().to_numpy(zero_copy_only=False)] = 0
    values = col.values.to_numpy(zero_copy_only=False)
    if col.null_count or (len(offsets) and offsets[0] != 0):
        return values[segment_gather(offsets[:-1], lengths)], lengths
    return values[: offsets[-1] if len(offsets) else 0], lengths


def pack_to_batch(pack: Pack, extra: dict | None = None):
    """An Arrow batch of :data:`DOCS_SCHEMA` (plus ``extra`` columns) of a pack."""
    import pyarrow as pa

    ids, lengths, terms, counts = make_pack(*pack)
    offsets = np.zeros(len(ids) + 1, np.int32)
    np.cumsum(lengths, out=offsets[1:])
    columns = {
        "doc_id": pa.array(ids),
        "terms": pa.ListArray.from_arrays(pa.array(offsets), pa.array(terms)),
        "counts": pa.ListArray.from_arrays(pa.array(offsets), pa.array(counts)),
    }
    for name, values in (extra or {}).items():
        columns[name] = pa.array(values)
    return pa.RecordBatch.from_pydict(columns)


def docs_from_batch(batch) -> Iterator[tuple[int, np.ndarray, np.ndarray]]:
    """``(doc_id, terms int64, counts float64)`` of each row of an Arrow batch of
    :data:`DOCS_SCHEMA`."""
    return docs_of_pack(pack_from_batch(batch))


def docs_to_batch(docs, extra: dict | None = None):
    """An Arrow batch of :data:`DOCS_SCHEMA` (plus ``extra`` columns) from documents."""
    return pack_to_batch(pack_of(list(docs)), extra)


def frame_docs(batches) -> Iterator[tuple[int, np.ndarray, np.ndarray]]:
    for batch in batches:
        yield from docs_from_batch(batch)


def arrow_batch_rdd(df):
    """An RDD of ``df``'s rows as pyarrow RecordBatches, read on the executors straight
    from the JVM's Arrow form (classic sessions), or None where this Spark has no such
    form (then callers use ``mapInArrow``).

    A DataFrame's public ways into a Python RDD (``df.rdd``) pickle every row in the
    JVM, binary columns as text: about 3 s per GB here, on top of the read. This is
    Spark's own Arrow export of a Dataset (``toArrowBatchRdd``, the one ``toPandas``
    builds on), each record an Arrow IPC message of one batch in the schema pyspark
    derives for ``df`` (docs/architecture.md, "Corpus layout")."""
    from pyspark import RDD
    from pyspark.serializers import NoOpSerializer
    from pyspark.sql.pandas.types import to_arrow_schema

    try:
        jrdd = df._jdf.toArrowBatchRdd().toJavaRDD()
        schema = to_arrow_schema(df.schema)
    except Exception as e:  # another Spark: no Arrow export of a Dataset to Python
        log.debug("no Arrow batches of a Dataset (%s); reading through mapInArrow", e)
        return None

    def read(data):
        import pyarrow as pa

        return pa.ipc.read_record_batch(pa.py_buffer(data), schema)

    return RDD(jrdd, df.sparkSession.sparkContext, NoOpSerializer()).map(read)
