"""Topic coherence on Spark: u_mass and c_npmi of the topics' top terms.

Only the top ``top_n`` terms of the topics matter. The driver gathers that
small set of term ids and ships it in the closure of the counting function
(no broadcast, so this works under Spark Connect too); each partition counts
the occurrences and co-occurrences of those terms in its documents with
:func:`sparklda.kernels.coherence.cooccurrence_counts` (``mapInArrow`` on a
DataFrame, ``mapPartitions`` on a :class:`~sparklda.corpus.DocSource`), and the
driver adds the integer partials and scores the topics
(:func:`~sparklda.kernels.coherence.umass_scores`,
:func:`~sparklda.kernels.coherence.npmi_scores`). See docs/architecture.md,
"Topic coherence".
"""

from __future__ import annotations

import numpy as np

from .corpus import DocSource, check_vector_column
from .errors import CorpusError, ParamError, executor_errors
from .kernels.coherence import cooccurrence_counts, npmi_scores, umass_scores
from .kernels.warm import settle_heap

MEASURES = ("u_mass", "c_npmi")
#: c_npmi's sliding window in tokens (gensim's default for c_npmi).
DEFAULT_WINDOW = 10


def check_measure(measure, top_n, window=None) -> None:
    if measure not in MEASURES:
        raise ParamError(
            f"The 'measure' parameter of coherence must be one of {list(MEASURES)}. "
            f"Got {measure!r} instead."
        )
    if isinstance(top_n, bool) or not isinstance(top_n, (int, np.integer)) or top_n < 2:
        raise ParamError(
            f"The 'top_n' parameter of coherence must be an int in the range [2, inf). "
            f"Got {top_n!r} instead."
        )
    if window is not None and (
        isinstance(window, bool) or not isinstance(window, (int, np.integer)) or window < 1
    ):
        raise ParamError(
            f"The 'window' parameter of coherence must be an int in the range [1, inf). "
            f"Got {window!r} instead."
        )


def top_terms(phi: np.ndarray, top_n: int) -> tuple[np.ndarray, np.ndarray]:
    """(needed: sorted unique term ids, top: (K, n) local ids into ``needed``) of the
    ``top_n`` most probable terms of each column of ``phi`` (V, K), best first (the order
    of :meth:`TopicModel.describe_topics`)."""
    n = min(int(top_n), phi.shape[0])
    idx = np.stack([np.argsort(-phi[:, k], kind="stable")[:n] for k in range(phi.shape[1])])
    needed = np.unique(idx)
    return needed, np.searchsorted(needed, idx).astype(np.int64)


def _partial(occ, co, n) -> dict:
    rows, cols = np.nonzero(np.triu(co, 1))
    return {
        "occ": occ.tolist(),
        "rows": rows.astype(np.int32).tolist(),
        "cols": cols.astype(np.int32).tolist(),
        "vals": co[rows, cols].tolist(),
        "n": int(n),
    }


def _combine(partials, n_terms: int) -> tuple[np.ndarray, np.ndarray, int]:
    occ = np.zeros(n_terms, np.int64)
    co = np.zeros((n_terms, n_terms), np.int64)
    n = 0
    for p in partials:
        occ += np.asarray(p["occ"], np.int64)
        r, c = np.asarray(p["rows"], np.int64), np.asarray(p["cols"], np.int64)
        np.add.at(co, (r, c), np.asarray(p["vals"], np.int64))
        n += int(p["n"])
    return occ, co + co.T, n


def _vector_docs(column, needed: np.ndarray):
    """(indptr, local ids) of an Arrow column of Spark ML vectors (struct of type, size,
    indices, values): the needed terms present (count > 0) in each document."""
    types = column.field("type").to_numpy(zero_copy_only=False)
    indices = column.field("indices").to_pylist()
    values = column.field("values").to_pylist()
    valid = column.is_valid().to_numpy(zero_copy_only=False)
    parts, indptr = [], [0]
    for i in range(len(column)):
        if not valid[i] or values[i] is None:
            ids = np.zeros(0, np.int64)
        else:
            val = np.asarray(values[i], np.float64)
            if types[i] == 1:  # dense
                ids = np.flatnonzero(val > 0)
            else:
                ids = np.asarray(indices[i], np.int64)[val > 0]
        pos = np.searchsorted(needed, ids)
        pos[pos >= len(needed)] = 0
        local = pos[needed[pos] == ids] if len(ids) else pos
        parts.append(local.astype(np.int32))
        indptr.append(indptr[-1] + len(local))
    flat = np.concatenate(parts) if parts else np.zeros(0, np.int32)
    return np.asarray(indptr, np.int64), flat


def _token_docs(column, words: list[str]):
    """(indptr, local ids, -1 for other words) of an Arrow column of token arrays."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    column = pc.fill_null(column, pa.scalar([], column.type))
    offsets = column.offsets.to_numpy(zero_copy_only=False).astype(np.int64)
    flat = column.flatten()
    local = pc.fill_null(pc.index_in(flat, value_set=pa.array(words, flat.type)), -1)
    local = local.to_numpy(zero_copy_only=False).astype(np.int32)
    return offsets - offsets[0], local


def _arrow_counter(kind: str, needed: np.ndarray, words, window: int):
    """The ``mapInArrow`` function: one row of partial counts per partition."""
    import pyarrow as pa

    n_terms = len(needed)

    def count(batches):
        settle_heap()
        occ = np.zeros(n_terms, np.int64)
        co = np.zeros((n_terms, n_terms), np.int64)
        n = 0
        for batch in batches:
            col = batch.column(0)
            if kind == "tokens":
                indptr, local = _token_docs(col, words)
            else:
                indptr, local = _vector_docs(col, needed)
            o, c, m = cooccurrence_counts(indptr, local, n_terms, window)
            occ += o
            co += c
            n += m
        p = _partial(occ, co, n)
        yield pa.RecordBatch.from_pylist([p], schema=_arrow_schema())

    return count


def _arrow_schema():
    import pyarrow as pa

    return pa.schema(
        [
            ("occ", pa.list_(pa.int64())),
            ("rows", pa.list_(pa.int32())),
            ("cols", pa.list_(pa.int32())),
            ("vals", pa.list_(pa.int64())),
            ("n", pa.int64()),
        ]
    )


_SCHEMA_DDL = "occ array<bigint>, rows array<int>, cols array<int>, vals array<bigint>, n bigint"


def count_dataframe(
    df,
    needed: np.ndarray,
    features_col: str | None = None,
    tokens_col: str | None = None,
    vocab: list | None = None,
    window: int = 0,
) -> tuple[np.ndarray, np.ndarray, int]:
    """Occurrence and co-occurrence counts of the terms ``needed`` in ``df`` (Spark job):
    from ``tokens_col`` (arrays of words, named by ``vocab``) when given, else from the
    vectors of ``features_col`` (whole documents only)."""
    from pyspark.sql.types import ArrayType, StringType

    needed = np.asarray(needed, np.int64)
    if tokens_col is not None:
        if tokens_col not in df.columns:
            raise CorpusError(
                f"Column {tokens_col!r} (tokensCol) does not exist; the DataFrame has "
                f"columns {df.columns}."
            )
        dtype = df.schema[tokens_col].dataType
        if not (isinstance(dtype, ArrayType) and isinstance(dtype.elementType, StringType)):
            raise CorpusError(
                f"Column {tokens_col!r} (tokensCol) must be an array of strings (the "
                f"documents' tokens in order); got {dtype.simpleString()}."
            )
        if vocab is None:
            raise CorpusError(
                f"Column {tokens_col!r} (tokensCol) holds words, but the model has no "
                f"vocabulary to match them with; set the model's vocabulary first."
            )
        words = [vocab[i] for i in needed]
        fn = _arrow_counter("tokens", needed, words, window)
        col = tokens_col
    else:
        assert features_col is not None
        check_vector_column(df, features_col)
        fn = _arrow_counter("vectors", needed, None, 0)
        col = features_col
    with executor_errors(f"column {col!r}"):
        rows = df.select(col).mapInArrow(fn, _SCHEMA_DDL).collect()
    return _combine([r.asDict() for r in rows], len(needed))


def count_source(source: DocSource, needed: np.ndarray) -> tuple[np.ndarray, np.ndarray, int]:
    """Occurrence and co-occurrence counts of ``needed`` in the documents of ``source``
    (an RDD of (id, term ids, counts); whole documents)."""
    needed = np.asarray(needed, np.int64)
    n_terms = len(needed)

    def count(docs):
        indptr, parts = [0], []
        for d in docs:
            ids = np.asarray(d[1], np.int64)[np.asarray(d[2], np.float64) > 0]
            pos = np.searchsorted(needed, ids)
            pos[pos >= n_terms] = 0
            local = pos[needed[pos] == ids] if len(ids) else pos
            parts.append(local.astype(np.int32))
            indptr.append(indptr[-1] + len(local))
        flat = np.concatenate(parts) if parts else np.zeros(0, np.int32)
        yield _partial(*cooccurrence_counts(np.asarray(indptr, np.int64), flat, n_terms, 0))

    with executor_errors(source.what):
        partials = source.rdd.mapPartitions(count).collect()
    return _combine(partials, n_terms)


def count_blocks(blocks, needed: np.ndarray) -> tuple[np.ndarray, np.ndarray, int]:
    """Occurrence and co-occurrence counts of ``needed`` in a corpus's cached training
    documents: an RDD of :class:`~sparklda.block.DocBlock` (classic path) or the
    DataFrame path's blocks (a ``block`` column of :func:`~sparklda.block.block_to_bytes`
    bytes, counted in ``mapInArrow``: Spark Connect has no RDDs)."""
    needed = np.asarray(needed, np.int64)
    n_terms = len(needed)

    def count(docblocks):
        occ = np.zeros(n_terms, np.int64)
        co = np.zeros((n_terms, n_terms), np.int64)
        n = 0
        for b in docblocks:
            ids = np.asarray(b.terms, np.int64)[b.local]
            pos = np.searchsorted(needed, ids)
            pos[pos >= n_terms] = 0
            local = np.where((needed[pos] == ids) & (b.counts > 0), pos, -1) if n_terms else pos
            o, c, m = cooccurrence_counts(b.indptr, local.astype(np.int32), n_terms, 0)
            occ += o
            co += c
            n += m
        return _partial(occ, co, n)

    if not hasattr(blocks, "mapInArrow"):
        return _combine(blocks.mapPartitions(lambda it: [count(it)]).collect(), n_terms)

    def count_frame(batches):
        import pyarrow as pa

        from .block import block_from_bytes

        docblocks = (
            block_from_bytes(data) for batch in batches for data in batch.column(0).to_pylist()
        )
        yield pa.RecordBatch.from_pylist([count(docblocks)], schema=_arrow_schema())

    rows = blocks.select("block").mapInArrow(count_frame, _SCHEMA_DDL).collect()
    return _combine([r.asDict() for r in rows], n_terms)


def score(measure: str, top: np.ndarray, counts) -> list[float]:
    """The scores of the topics ``top`` (local ids, best first) from ``counts``."""
    occ, co, n = counts
    if n == 0:
        raise CorpusError("Coherence needs documents; the data has none.")
    scores = umass_scores(top, occ, co, n) if measure == "u_mass" else npmi_scores(top, occ, co, n)
    return [float(s) for s in scores]


class CorpusCoherence:
    """A training :class:`~sparklda.training.Callback`-like hook: u_mass (or c_npmi over
    whole documents) of the trained topics on the cached training documents, counted
    when training ends, before the corpus is released. ``result`` holds
    ``{"measure", "top_n", "per_topic", "mean"}`` afterwards (None if training failed).
    Duck-typed (the training layer sits above this one): pass it in ``callbacks``."""

    stop_reason = None

    def __init__(self, measure: str = "u_mass", top_n: int = 10):
        check_measure(measure, top_n)
        self.measure, self.top_n = measure, top_n
        self.corpus = None
        self.result: dict | None = None

    def on_corpus(self, corpus) -> None:
        self.corpus = corpus

    def on_train_end(self, result) -> None:
        if result is None or result.model is None or self.corpus is None:
            return
        model = result.model
        if getattr(model, "shards", None) is not None:  # the model on the executors
            idx = np.array([t["termIndices"] for t in model.describe_topics(self.top_n)])
            needed = np.unique(idx)
            top = np.searchsorted(needed, idx).astype(np.int64)
        else:
            needed, top = top_terms(model.topics_matrix(), self.top_n)
        per_topic = score(self.measure, top, count_blocks(self.corpus.train, needed))
        self.result = {
            "measure": self.measure,
            "top_n": self.top_n,
            "documents": "training",
            "per_topic": per_topic,
            "mean": float(np.mean(per_topic)),
        }


def coherence(
    phi: np.ndarray | None,
    data,
    measure: str = "u_mass",
    top_n: int = 10,
    features_col: str = "features",
    tokens_col: str | None = None,
    vocab: list | None = None,
    window: int | None = None,
    top_indices: np.ndarray | None = None,
) -> list[float]:
    """Coherence of each topic (columns of ``phi``, V × K) on ``data``, in topic order;
    with ``top_indices`` (K, n), those term ids best first instead of ``phi``'s top
    ``top_n`` (a model held on the executors finds them there).

    ``data`` is a DataFrame (vectors in ``features_col``, or token arrays in
    ``tokens_col``) or a :class:`~sparklda.corpus.DocSource`. ``u_mass`` counts whole
    documents. ``c_npmi`` counts boolean sliding windows of ``window`` tokens (default
    10) when ``tokens_col`` is given, and whole documents otherwise (vectors carry no
    token order).
    """
    check_measure(measure, top_n, window)
    if top_indices is not None:
        needed = np.unique(top_indices)
        top = np.searchsorted(needed, top_indices).astype(np.int64)
    else:
        needed, top = top_terms(np.asarray(phi), top_n)
    sliding = measure == "c_npmi" and tokens_col is not None
    if isinstance(data, DocSource):
        if tokens_col is not None:
            raise CorpusError("A DocSource holds term counts; 'tokens_col' needs a DataFrame.")
        counts = count_source(data, needed)
    else:
        counts = count_dataframe(
            data,
            needed,
            features_col=features_col,
            tokens_col=tokens_col,
            vocab=vocab,
            window=(window or DEFAULT_WINDOW) if sliding else 0,
        )
    return score(measure, top, counts)
