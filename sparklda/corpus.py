"""Reading every input form into cached document blocks, with validation.

Inputs (each becomes a :class:`DocSource`, an RDD of ``(doc_id, term_ids,
counts)`` plus the vocabulary):

* UCI bag-of-words files: :func:`read_uci`;
* a DataFrame with a Spark ML vector column of term counts: :func:`from_vectors`;
* raw text (DataFrame or text / JSON lines / Parquet files), tokenised and
  counted with Spark ML's ``RegexTokenizer``, ``StopWordsRemover`` and
  ``CountVectorizer``: :func:`from_text`.

:func:`build_corpus` validates the documents on the driver's behalf before any
training job runs, holds out a seeded set of whole documents, and lays the
training documents out so that a round touches only its own partitions: the
corpus is cut into ``n_slices`` minibatch slices of ``parts_per_slice``
partitions each, and round ``t`` runs tasks on one slice's partitions only.
"""

from __future__ import annotations

import gzip
import logging
import math
import re
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from pyspark import StorageLevel

from .block import (
    DocBlock,
    HeldoutBlock,
    bitmap_terms,
    split_halves,
    terms_digest,
    union_bitmap,
)
from .errors import CorpusError, executor_errors
from .io import SPARK_CHARSETS, check_encoding, is_sample, resolve_sample
from .kernels.random import Stream, doc_keys, uniform_per_doc
from .kernels.warm import settle_heap
from .limits import MAX_COUNT
from .packs import (
    Pack,
    check_pack,
    check_packs,
    clean_pack,
    compact_pack,
    concat_packs,
    doc_of_pair,
    docs_of_pack,
    empty_summary,
    group_by,
    make_pack,
    merge_checks,
    n_docs,
    narrow_pack,
    pack_from_bytes,
    pack_of,
    pack_starts,
    pack_to_bytes,
    packs_of_docs,
    segment_gather,
    slice_docs,
    take_docs,
)
from .params import BY_NAME, Constraint, check_param, default_minibatch_size
from .storage import checkpoint_frame, is_connect, persist_frame, release_frame

log = logging.getLogger(__name__)


#: Parameters of the input functions that are not training parameters.
_TEXT_FORMAT = Constraint("format", str, options=("json", "parquet", "text"))
_VOCAB_SIZE = Constraint("vocab_size", int, 1)


def _check_params(owner: str, **values) -> None:
    """Check training parameters passed to a corpus function directly (the same table and
    messages as :class:`~sparklda.params.TrainParams`; None means "not given")."""
    for name, value in values.items():
        if value is not None:
            check_param(BY_NAME[name], value, owner)


@dataclass
class DocSource:
    """Documents as an RDD of ``(doc_id: int, term_ids: int64[], counts: float64[])``.

    ``what`` names the input in error messages (a column or a file);
    ``declared_docs`` is the document count a file header declares (UCI), so
    documents with no entries are still counted as empty.
    """

    rdd: object
    vocab_size: int
    vocab: list | None
    what: str
    declared_docs: int | None = None
    #: Builds the same documents as a DataFrame (:data:`DOCS_SCHEMA`), with no RDD, for
    #: the DataFrame-only path (Spark Connect); None when the input has no such form.
    #: Under Spark Connect ``rdd`` is None and only this is set. It returns the DataFrame
    #: and the intermediate DataFrames it cached (unpersisted by :meth:`release_frame`).
    frame: Callable[[], tuple[Any, list]] | None = None
    #: Builds an RDD of the same documents in packs (:mod:`sparklda.packs`), read without
    #: a Python step per document (classic sessions); None: :func:`source_packs` packs
    #: ``rdd``'s documents.
    packs: Callable[[], Any] | None = None

    def documents_frame(self):
        """The documents as a DataFrame of :data:`DOCS_SCHEMA` (built once)."""
        if self.frame is None:
            raise CorpusError(
                f"{self.what} has no DataFrame form (it was built from an RDD); the "
                f"DataFrame-only path ('execution' = 'dataframe') needs an input read by "
                f"read_uci, from_vectors or from_text."
            )
        cached = getattr(self, "_frame", None)
        if cached is None:
            cached = self.frame()
            self._frame = cached
        return cached[0]

    def release_frame(self) -> None:
        """Unpersist what building :meth:`documents_frame` cached (called once the
        corpus's blocks are cached); it is built again if asked for later."""
        cached = getattr(self, "_frame", None)
        self._frame = None
        for frame in cached[1] if cached else ():
            release_frame(frame)


# --------------------------------------------------------------------------
# Readers


def _read_local_bytes(path: str, what: str) -> bytes:
    """The bytes of a file on the driver's disk, gunzipped when its name ends in ``.gz``."""
    with open(path, "rb") as f:
        data = f.read()
    return _gunzip(data, what) if path.endswith(".gz") else data


def _gunzip(data: bytes, what: str) -> bytes:
    try:
        return gzip.decompress(data)
    except (OSError, EOFError, zlib.error) as e:
        raise CorpusError(
            f"{what} is not a valid, complete gzip file ({e}): it is cut short (an "
            f"interrupted copy or download?) or corrupt."
        ) from None


def decode_text(data: bytes, encoding: str, what: str) -> str:
    """``data`` decoded as ``encoding`` (a name :func:`~sparklda.io.check_encoding` returned);
    bytes that are not valid raise :class:`CorpusError` naming ``what``, the byte offset
    and the line. A UTF-8 byte-order mark is dropped."""
    try:
        text = data.decode(encoding)
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        raise CorpusError(
            f"{what} is not valid {encoding} text: byte offset {e.start} (line {line}) "
            f"holds byte 0x{data[e.start]:02x} ({e.reason}). Pass its encoding (for example "
            f"encoding='latin-1'; in a job's [input] table, encoding = \"latin-1\")."
        ) from None
    return text.removeprefix("\ufeff") if encoding == "utf-8" else text


def _text_lines(text: str) -> list[str]:
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return [line.removesuffix("\r") for line in lines]


def read_vocab(path, spark=None, encoding: str | None = None) -> list[str]:
    """One term per line (UCI ``vocab.txt``, ``.gz`` too), decoded as ``encoding`` (default
    UTF-8; bytes that are not valid raise :class:`CorpusError` naming the file and the byte
    offset).

    Read through Spark (its ``binaryFile`` source: any file system Spark
    reaches) when ``spark`` is given, else from the driver's disk;
    ``sample:...`` names a file of the shipped corpus.
    """
    encoding = check_encoding(encoding, "uci", "read_vocab")
    name = str(path)
    what = f"Vocabulary file {name!r}"
    if is_sample(path) or spark is None:
        data = _read_local_bytes(resolve_sample(name), what)
    else:
        with executor_errors(what):
            rows = spark.read.format("binaryFile").load(name).select("path", "content").collect()
        data = b"".join(bytes(r["content"]) for r in sorted(rows, key=lambda r: r["path"]))
        if name.endswith(".gz"):
            data = _gunzip(data, what)
    return _vocab_terms(_text_lines(decode_text(data, encoding, what)), what)


def _vocab_terms(lines: list[str], what: str) -> list[str]:
    """The terms of a vocabulary file's lines, line n the term of id n: blank lines at
    the end are dropped, a blank line before a term or a term on two lines is a
    :class:`CorpusError` naming the line (either would misalign every later id)."""
    while lines and lines[-1].strip() == "":
        lines = lines[:-1]
    seen: dict[str, int] = {}
    for number, line in enumerate(lines, 1):
        if line.strip() == "":
            raise CorpusError(
                f"{what}, line {number} is blank; every line must hold one term (line n "
                f"is the term of id n, so a blank line would shift every later id)."
            )
        first = seen.setdefault(line, number)
        if first != number:
            raise CorpusError(
                f"{what}, line {number}: the term {line!r} is also on line {first}; "
                f"every term must be on one line only."
            )
    return lines


def _sample_lines(sc, path: str, min_partitions: int | None):
    """The lines of a shipped sample file, read on the driver and distributed, so
    executors that do not share the driver's disk (or package) read it too."""
    data = _read_local_bytes(resolve_sample(path), f"Sample file {path!r}")
    lines = _text_lines(decode_text(data, "utf-8", f"Sample file {path!r}"))
    return sc.parallelize(lines, max(sc.defaultParallelism, min_partitions or 1))


#: What a line of a UCI docword file's body holds.
_UCI_LINE = "'docID wordID count' (three numbers, ids from 1)"


def _uci_line_problem(line: str, n_docs: int, n_words: int) -> str:
    """What is wrong with a line of a docword file's body (a line that failed the check)."""
    fields = line.split()
    if len(fields) != 3:
        return f"has {len(fields)} field(s); expected {_UCI_LINE}"
    try:
        d, w, c = int(fields[0]), int(fields[1]), float(fields[2])
    except ValueError:
        return f"is not {_UCI_LINE}"
    if not 1 <= d <= n_docs:
        return f"has document id {d}, outside 1..D={n_docs} (D is declared on line 1 of the header)"
    if not 1 <= w <= n_words:
        return (
            f"has term id {w}, outside the vocabulary 1..W={n_words} (W is declared on line 2 "
            f"of the header)"
        )
    if math.isfinite(c) and c > MAX_COUNT and c.is_integer():
        return f"has a term count above {MAX_COUNT}, more than a document can hold"
    kind = "non-finite" if not math.isfinite(c) else "negative" if c < 0 else "non-integer"
    return f"has a {kind} term count; counts must be finite non-negative integers"


def _uci_parser(n_docs: int, n_words: int):
    """Parse one partition of a docword file's lines into ``(doc, (term, count))`` pairs
    (0-based ids), checking each line against the header; the partition ends with one
    summary record ``(-1 - partition, (lines, entries, first bad line or None))``."""
    top = float(MAX_COUNT)  # 1e40 would overflow the blocks' float32 counts

    def parse(part, lines):
        n_lines = entries = 0
        first_bad = None
        for i, line in enumerate(lines):
            n_lines += 1
            if part == 0 and i < 3:  # the header, read on the driver
                continue
            fields = line.split()
            if len(fields) == 3:
                try:
                    d, w, c = int(fields[0]), int(fields[1]), float(fields[2])
                except ValueError:
                    pass
                else:
                    if 0 < d <= n_docs and 0 < w <= n_words and 0.0 <= c <= top and c.is_integer():
                        entries += 1
                        yield d - 1, (w - 1, c)
                        continue
            elif not fields:  # a blank line
                continue
            if first_bad is None:
                first_bad = (i, _uci_line_problem(line, n_docs, n_words), line)
        yield -1 - part, (n_lines, entries, first_bad)

    return parse


def _uci_partition(key: int) -> int:
    """Partition of a parsed docword record: documents by id, every partition's summary
    record in partition 0 (where the body is checked against the header)."""
    return key if key >= 0 else 0


def _check_uci_body(what: str, nnz: int, summaries: list) -> None:
    """Raise :class:`CorpusError` for the first bad line of the body (its 1-based line
    number counted from the partitions' line counts) or a body whose entries are not
    the NNZ the header declares."""
    summaries.sort()
    first_line = 1
    bad = None
    for _, (n_lines, _, first_bad) in summaries:
        if first_bad is not None and bad is None:
            i, problem, line = first_bad
            bad = (first_line + i, problem, line)
        first_line += n_lines
    if bad is not None:
        number, problem, line = bad
        shown = line if len(line) <= 80 else line[:77] + "..."
        raise CorpusError(f"{what}, line {number}: {shown!r} {problem}.")
    entries = sum(s[1][1] for s in summaries)
    if entries != nnz:
        why = (
            "the file is cut short or its header is wrong"
            if entries < nnz
            else ("its header is wrong")
        )
        raise CorpusError(
            f"{what}: the header declares NNZ={nnz} entries (line 3) but the body has "
            f"{entries} entry lines ({first_line - 1} lines in all); {why}."
        )


def _uci_documents(what: str, nnz: int):
    def documents(index, groups):
        summaries = []
        for key, values in groups:
            if key < 0:
                summaries.extend((-1 - key, v) for v in values)
                continue
            entries = sorted(values)
            terms = np.fromiter((e[0] for e in entries), dtype=np.int64, count=len(entries))
            counts = np.fromiter((e[1] for e in entries), dtype=np.float64, count=len(entries))
            yield key, terms, counts
        if index == 0:
            _check_uci_body(what, nnz, summaries)

    return documents


def read_uci(
    spark,
    docword_path: str,
    vocab_path: str | None = None,
    min_partitions: int | None = None,
    encoding: str | None = None,
) -> DocSource:
    """Read UCI bag-of-words files (``docword.txt[.gz]`` and ``vocab.txt``).

    The docword file has three header lines (D, W, NNZ) and then
    ``docID wordID count`` lines with 1-based ids. Returned ids are 0-based.
    ``encoding`` is the vocabulary file's (default UTF-8).

    The header is read here; the body is checked against it in the job that
    first reads the whole file (:func:`build_corpus`'s validation): a line
    that is not three numbers, an id outside ``1..D`` or ``1..W``, a bad count,
    or a number of entries other than NNZ (a file cut short) raises
    :class:`CorpusError` naming the file and the line. A ``.gz`` file that is
    cut short or corrupt raises :class:`CorpusError` naming the file.
    """
    what = f"UCI docword file {docword_path!r}"
    connect = is_connect(spark)
    if connect:
        lines = None
        line_frame = _uci_line_frame(spark, str(docword_path), min_partitions)
        with executor_errors(what):
            header = [r[0] for r in line_frame.head(3)]
    else:
        sc = spark.sparkContext
        if is_sample(docword_path):
            lines = _sample_lines(sc, str(docword_path), min_partitions)
        else:
            lines = sc.textFile(str(docword_path), minPartitions=min_partitions)
        with executor_errors(what):
            header = lines.take(3)
    try:
        n_docs, n_words, nnz = (int(h.strip()) for h in header)
    except ValueError:
        raise CorpusError(
            f"{what}: the first three lines must be the integers D, W and NNZ; got {header!r}."
        ) from None
    for line, name, value, low in ((1, "D", n_docs, 0), (2, "W", n_words, 1), (3, "NNZ", nnz, 0)):
        if value < low:
            raise CorpusError(f"{what}: line {line} declares {name}={value}; it must be ≥ {low}.")
    vocab = None
    if vocab_path is not None:
        vocab = read_vocab(vocab_path, spark, encoding)
        if len(vocab) != n_words:
            raise CorpusError(
                f"{what} declares W={n_words} terms but vocabulary file "
                f"{vocab_path!r} has {len(vocab)} lines."
            )
    else:
        check_encoding(encoding, "uci", "read_uci")

    def frame():
        lf = line_frame if connect else _uci_line_frame(spark, str(docword_path), min_partitions)
        return _uci_documents_frame(lf, what, n_docs, n_words, nnz)

    documents = None
    if lines is not None:
        n_parts = max(sc.defaultParallelism, min_partitions or 1)
        documents = (
            lines.mapPartitionsWithIndex(_uci_parser(n_docs, n_words))
            .groupByKey(numPartitions=n_parts, partitionFunc=_uci_partition)
            .mapPartitionsWithIndex(_uci_documents(what, nnz))
        )
    return DocSource(documents, n_words, vocab, what, declared_docs=n_docs, frame=frame)


def check_vector_column(df, col: str, param: str = "featuresCol"):
    """Raise :class:`CorpusError` unless ``df[col]`` exists and holds Spark ML
    vectors (term counts, as ``CountVectorizer`` produces)."""
    from pyspark.ml.linalg import VectorUDT

    if col not in df.columns:
        raise CorpusError(
            f"Column {col!r} ({param}) does not exist; the DataFrame has columns {df.columns}."
        )
    dtype = df.schema[col].dataType
    if not isinstance(dtype, VectorUDT):
        raise CorpusError(
            f"Column {col!r} ({param}) must be of type "
            f"pyspark.ml.linalg.VectorUDT (term counts, as CountVectorizer "
            f"produces); got {dtype.simpleString()}."
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
        if id_col not in df.columns:
            raise CorpusError(
                f"Column {id_col!r} (idCol) does not exist; the DataFrame has columns {df.columns}."
            )
        if not isinstance(df.schema[id_col].dataType, IntegralType):
            raise CorpusError(
                f"Column {id_col!r} (idCol) must be an integer column; got "
                f"{df.schema[id_col].dataType.simpleString()}."
            )
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

    if is_connect(df.sparkSession):
        return DocSource(None, size, vocab, what, frame=frame)

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

    if id_col is not None:
        rdd = df.select(id_col, features_col).rdd.map(lambda r: to_doc(int(r[0]), r[1]))
    else:
        rdd = (
            df.select(features_col).rdd.zipWithIndex().map(lambda ri: to_doc(int(ri[1]), ri[0][0]))
        )
    return DocSource(rdd, size, vocab, what, frame=frame, packs=packs)


def load_text_dataframe(
    spark, path: str, fmt: str | None = None, text_col: str = "text", encoding: str | None = None
):
    """Read raw text files: ``json`` (JSON lines, ``.jsonl[.gz]``), ``parquet``
    or ``text`` (one document per line).

    ``encoding`` (default UTF-8) is the files' text encoding: any encoding
    that writes ASCII as ASCII for ``text`` (``"latin-1"``, ``"cp1252"``, ...),
    one of Spark's JSON encodings for ``json``; Parquet strings are UTF-8.
    Text that is not valid in it raises :class:`CorpusError` naming the file
    (and the line and byte for ``text``) when the text is first read, in
    :func:`from_text`; a JSON line that does not parse raises it here (Spark
    reads every line to infer the schema). A ``.gz`` file that is cut short or
    corrupt raises :class:`CorpusError` naming the file.
    """
    fmt = fmt or ("json" if ".json" in path else "parquet" if path.endswith(".parquet") else "text")
    if fmt not in _TEXT_FORMAT.options:
        raise _TEXT_FORMAT.error(fmt, "load_text_dataframe")
    encoding = check_encoding(encoding, fmt, "load_text_dataframe")
    if fmt == "json":
        return _read_json_lines(spark, path, encoding)
    if fmt == "parquet":
        return spark.read.parquet(path)
    return _read_text_lines(spark, path, text_col, encoding)


def _read_json_lines(spark, path: str, encoding: str):
    reader = spark.read.option("mode", "FAILFAST")
    if encoding != "utf-8":
        reader = reader.option("encoding", SPARK_CHARSETS[encoding]).option("lineSep", "\n")
    what = f"JSON lines file(s) {path!r}"
    try:
        with executor_errors(what):
            return reader.json(path)
    except CorpusError:
        raise
    except Exception as e:
        text = str(e)
        if "MALFORMED_RECORD" not in text:
            raise
        cause = re.search(r"Caused by: \S*?(\w+Exception): ([^\n]*)", text)
        detail = f" ({cause.group(1)}: {cause.group(2)})" if cause else ""
        hint = (
            " The text is not UTF-8: pass its encoding (for example encoding='latin-1'; "
            'in a job\'s [input] table, encoding = "latin-1").'
            if cause and "UTF-8" in cause.group(2) and encoding == "utf-8"
            else ""
        )
        raise CorpusError(
            f"{what} hold a line that is not a JSON object in {encoding}{detail}.{hint}"
        ) from None


#: The message of a line of a text file that is not valid UTF-8 (Spark SQL format string:
#: file, start of the line, byte offset in the line); the executor_errors protocol.
_NOT_UTF8 = (
    f"{CorpusError.__module__}.{CorpusError.__name__}: File '%s' is not valid utf-8 text: the "
    "line starting '%s' holds an invalid byte at byte offset %d of the line. Pass its "
    "encoding (for example encoding='latin-1'; in a job's [input] table, "
    'encoding = "latin-1").'
)


def _read_text_lines(spark, path: str, text_col: str, encoding: str):
    """One row per line, column ``text_col``, decoded as ``encoding`` on the executors.

    Spark's text reader keeps each line's bytes as they are; UTF-8 lines are
    checked (a line that is not valid UTF-8 raises, naming the file, the line
    and the byte), Latin-1 is decoded by Spark, other encodings by Python.
    """
    from pyspark.sql import functions as F
    from pyspark.sql.types import StringType

    raw = spark.read.text(path)
    value, file = F.col("value"), raw["_metadata.file_path"]
    if encoding == "utf-8":
        valid = F.make_valid_utf8(value)
        at = F.instr(valid, "\ufffd")
        message = F.format_string(
            _NOT_UTF8,
            file,
            F.substring(valid, 1, 60),
            F.octet_length(F.substring(valid, 1, at - 1)),
        )
        text = F.when(F.is_valid_utf8(value), value).otherwise(F.raise_error(message))
    elif encoding == "iso8859-1":  # every byte is a character: nothing to check
        text = F.decode(value.cast("binary"), "ISO-8859-1")
    else:
        decode = F.udf(_line_decoder(encoding), StringType())
        text = decode(value.cast("binary"), file)
    return raw.select(text.alias(text_col))


def _line_decoder(encoding: str):
    def decode(data, file):
        if data is None:
            return None
        data = bytes(data)
        try:
            return data.decode(encoding)
        except UnicodeDecodeError as e:
            start = data[:60].decode(encoding, errors="replace")
            raise CorpusError(
                f"File {file!r} is not valid {encoding} text: the line starting {start!r} "
                f"holds byte 0x{data[e.start]:02x} at byte offset {e.start} of the line "
                f"({e.reason}). Pass the files' encoding if it is not {encoding} "
                f'(encoding=...; in a job\'s [input] table, encoding = "...").'
            ) from None

    return decode


def from_text(
    df,
    text_col: str = "text",
    id_col: str | None = None,
    vocab_size: int = 1 << 18,
    min_df: float = 1.0,
    max_df: float = 2**63 - 1,
    min_token_length: int = 2,
    stop_words: list | None = None,
    pattern: str = "[^\\p{L}\\p{N}_']+",
) -> DocSource:
    """Documents from raw text, counted with Spark ML's own feature stages.

    ``RegexTokenizer`` (lower-cases, splits on ``pattern``), ``StopWordsRemover``
    (English list unless ``stop_words`` is given) and ``CountVectorizer``
    (``vocab_size``, ``min_df``, ``max_df`` with Spark's meanings: a count of
    documents if ≥ 1, else a fraction). The fitted vocabulary stays with the
    documents and so with the model.
    """
    from pyspark.ml.feature import CountVectorizer, RegexTokenizer, StopWordsRemover
    from pyspark.sql.types import StringType

    if text_col not in df.columns:
        raise CorpusError(
            f"Column {text_col!r} (textCol) does not exist; the DataFrame has columns {df.columns}."
        )
    if not isinstance(df.schema[text_col].dataType, StringType):
        raise CorpusError(
            f"Column {text_col!r} (textCol) must be a string column; got "
            f"{df.schema[text_col].dataType.simpleString()}."
        )
    check_param(_VOCAB_SIZE, vocab_size, "from_text")
    tok = RegexTokenizer(
        inputCol=text_col,
        outputCol="_tokens",
        pattern=pattern,
        gaps=True,
        minTokenLength=min_token_length,
        toLowercase=True,
    )
    sw = StopWordsRemover(inputCol="_tokens", outputCol="_terms")
    if stop_words is not None:
        sw.setStopWords(list(stop_words))
    tokens = sw.transform(tok.transform(df.na.fill({text_col: ""})))
    cv = CountVectorizer(
        inputCol="_terms",
        outputCol="_counts",
        vocabSize=int(vocab_size),
        minDF=float(min_df),
        maxDF=float(max_df),
    )
    with executor_errors(f"column {text_col!r}"):  # the job that reads the text
        cv_model = cv.fit(tokens)
    if not cv_model.vocabulary:
        raise CorpusError(
            f"The corpus is empty: no term of column {text_col!r} survived "
            f"tokenising, stop words and the min_df/max_df limits."
        )
    counted = cv_model.transform(tokens)
    return from_vectors(counted, "_counts", id_col, cv_model.vocabulary)


# --------------------------------------------------------------------------
# Validation


def source_packs(source: DocSource):
    """The source's documents as an RDD of packs (:mod:`sparklda.packs`): its own
    (:attr:`DocSource.packs`) or its documents packed per partition."""
    from pyspark.sql.utils import is_remote

    # pyspark builds a mapInArrow's function for Spark Connect whenever the process is in
    # Connect mode (a process-wide switch), also for a classic session's DataFrame: a
    # classic session in such a process reads row by row
    if source.packs is not None and not is_remote():
        return source.packs()
    return source.rdd.mapPartitions(packs_of_docs)


def validate_packs(packs, source: DocSource, holdout: Holdout | None = None) -> dict:
    """:func:`validate` of an RDD of the source's documents in packs. With ``holdout``
    the same pass also gathers what choosing the held-out documents needs
    (:func:`holdout_keys_summary`), in ``stats["holdout"]``: no job of its own."""
    return validate_and_keep(packs, source, holdout)[0]


def validate_and_keep(
    packs,
    source: DocSource,
    holdout: Holdout | None = None,
    keep_pairs: int = 0,
    warm: Callable[[], object] | None = None,
) -> tuple[dict, list | None]:
    """``(stats, kept)``: :func:`validate_packs`, and, when the documents have at most
    ``keep_pairs`` (document, term) pairs, their packs as the validation pass read them
    (``kept``, brought to the driver by the same job; None otherwise). Each partition
    keeps its packs while they hold at most ``keep_pairs`` / the number of partitions
    pairs, so the driver never receives more than ``keep_pairs``. ``warm`` is called
    once in every task (the kernels loaded in the workers, as the caching job does)."""
    vocab_size = source.vocab_size
    cap = int(keep_pairs) // max(1, packs.getNumPartitions()) if keep_pairs > 0 else -1

    def check(it):
        if warm is not None:  # first: the heap is frozen once the kernels are loaded
            warm()
        settle_heap()
        summary, keys, pairs = empty_summary(), None, 0
        kept: list | None = [] if cap >= 0 else None
        for pack in it:
            summary = merge_checks(summary, check_pack(pack, vocab_size))
            if holdout is not None:
                keys = merge_holdout_keys(keys, holdout_keys_summary(pack, holdout), holdout)
            if kept is not None:
                pairs += len(pack[2])
                if pairs <= cap:
                    kept.append(pack)
                else:
                    kept = None
        yield summary, keys, kept

    def merge(a, b):
        both = None if a[2] is None or b[2] is None else a[2] + b[2]
        return merge_checks(a[0], b[0]), merge_holdout_keys(a[1], b[1], holdout), both

    with executor_errors(source.what):
        stats, keys, kept = packs.mapPartitions(check).reduce(merge)
    stats = check_counts(source, stats)
    if holdout is not None:
        stats["holdout"] = (holdout, keys)
    return stats, kept


@dataclass(frozen=True)
class Holdout:
    """How held-out documents are chosen: the ``count`` with the smallest seeded keys,
    or (count 0) those whose key is below ``fraction``."""

    fraction: float
    count: int
    seed: int

    @staticmethod
    def of(heldout_fraction: float, heldout_count: int | None, seed: int) -> Holdout | None:
        if heldout_count:
            return Holdout(0.0, int(heldout_count), int(seed))
        if heldout_fraction > 0:
            return Holdout(float(heldout_fraction), 0, int(seed))
        return None


def holdout_keys_summary(pack, holdout: Holdout):
    """Of the pack's documents with a positive count: the ``count + 1`` smallest
    held-out keys, sorted (a count), or how many keys are below the fraction."""
    ids = clean_pack(pack)[0]
    keys = heldout_keys(ids, holdout.seed)
    if holdout.count:
        n = holdout.count + 1
        return np.sort(keys)[:n] if len(keys) <= n else np.sort(np.partition(keys, n - 1)[:n])
    return int(np.count_nonzero(keys < holdout.fraction))


def merge_holdout_keys(a, b, holdout: Holdout | None):
    """Two :func:`holdout_keys_summary` results merged (None: nothing yet)."""
    if a is None:
        return b
    if b is None:
        return a
    if holdout is not None and holdout.count:
        return np.sort(np.concatenate([a, b]))[: holdout.count + 1]
    return a + b


def holdout_summary(stats: dict, holdout: Holdout | None):
    """The validation pass's :func:`holdout_keys_summary` if it was gathered for
    ``holdout``; None otherwise."""
    spec, keys = stats.get("holdout", (None, None))
    return keys if holdout is not None and spec == holdout else None


def known_heldout_docs(stats: dict, holdout: Holdout | None) -> int | None:
    """How many documents the split holds out, known from the validation pass's
    ``stats["holdout"]`` without counting them: every document below the fraction,
    or exactly ``count`` when no other key ties with the count-th smallest.
    None: not known (a tie; or no summary)."""
    if holdout is None:
        return 0
    keys = holdout_summary(stats, holdout)
    if keys is None:
        return None
    if not holdout.count:
        return int(keys)
    n = holdout.count
    if len(keys) < n or (len(keys) > n and keys[n] == keys[n - 1]):
        return None
    return n


def validate(source: DocSource) -> dict:
    """Scan the documents once and raise :class:`CorpusError` on bad input.

    Checks: counts finite, non-negative and integral; term ids inside the
    vocabulary; at least one non-empty document. Returns the counts
    (documents, empty documents, pairs, tokens).
    """
    return validate_packs(source_packs(source), source)


def check_counts(source: DocSource, stats: dict) -> dict:
    """Raise :class:`CorpusError` for the first kind of problem the validation pass found
    (``stats``, :func:`_check_partition` summaries merged); the counts otherwise."""
    what = source.what
    p = stats["problems"]
    if "non-finite" in p:
        d, v = p["non-finite"]
        raise CorpusError(
            f"{what} has a non-finite term count ({v}) in document {d}; counts "
            f"must be finite non-negative integers."
        )
    if "negative" in p:
        d, v = p["negative"]
        raise CorpusError(
            f"{what} has a negative term count ({v}) in document {d}; counts must "
            f"be finite non-negative integers."
        )
    if "non-integer" in p:
        d, v = p["non-integer"]
        raise CorpusError(
            f"{what} has a non-integer term count ({v}) in document {d}; counts "
            f"must be finite non-negative integers."
        )
    if "term" in p:
        d, v = p["term"]
        shown = v + 1 if "UCI" in what else v
        raise CorpusError(
            f"{what} has term id {shown} in document {d}, outside the vocabulary "
            f"of {source.vocab_size} terms."
        )
    if source.declared_docs is not None:
        stats["empty"] += max(0, source.declared_docs - stats["docs"])
        stats["docs"] = max(stats["docs"], source.declared_docs)
    if stats["tokens"] <= 0:
        raise CorpusError(
            f"The corpus is empty: {what} has no document with a positive count "
            f"({stats['docs']} documents read)."
        )
    return stats


# --------------------------------------------------------------------------
# Pure helpers shared by the RDD and the DataFrame paths


def heldout_keys(ids: np.ndarray, seed: int) -> np.ndarray:
    """Each document's seeded held-out key in [0, 1): a count holds out the smallest."""
    return uniform_per_doc(seed, Stream.HELDOUT, np.asarray(ids, dtype=np.int64))


def heldout_mask(ids: np.ndarray, seed: int, threshold: float, by_count: bool) -> np.ndarray:
    """Which documents are held out: key ≤ threshold (a count's largest kept key) or
    key < threshold (a fraction)."""
    u = heldout_keys(ids, seed)
    return u <= threshold if by_count else u < threshold


def block_partitions(ids: np.ndarray, seed: int, n_slices: int, p: int) -> np.ndarray:
    """Each training document's partition ``slice * p + i`` (seeded by its id only)."""
    ids = np.asarray(ids, dtype=np.int64)
    s = np.minimum(
        (uniform_per_doc(seed, Stream.SLICE, ids) * n_slices).astype(np.int64), n_slices - 1
    )
    i = np.minimum((uniform_per_doc(seed, Stream.PART, ids) * p).astype(np.int64), p - 1)
    return s * p + i


def heldout_block(docs, seed: int, dtype=np.float32) -> HeldoutBlock:
    """A :class:`HeldoutBlock` of (doc_id, terms, counts): each document's tokens split
    in half, seeded by (seed, doc id) (:func:`sparklda.block.split_halves`). The
    documents' keys are drawn at once and each half becomes a block through
    :meth:`DocBlock.from_packed`: the blocks of :meth:`DocBlock.from_docs` of the
    halves (tests/reference.py, ``heldout_block``), without its Python steps."""
    docs = list(docs)
    if not docs:
        return HeldoutBlock(
            DocBlock.from_docs([], dtype=dtype), DocBlock.from_docs([], dtype=dtype)
        )
    ids = np.fromiter((int(d[0]) for d in docs), dtype=np.int64, count=len(docs))
    keys = doc_keys(seed, Stream.SPLIT_HALVES, ids)
    halves: tuple[list, list] = ([], [])
    for d, key in zip(docs, keys.tolist(), strict=True):
        for out, half in zip(halves, split_halves(d[0], d[1], d[2], seed, key), strict=True):
            out.append(half)
    obs, tgt = (
        DocBlock.from_packed(
            [
                (
                    ids,
                    np.array([len(t) for t, _ in half], dtype=np.int64),
                    np.concatenate([t for t, _ in half]),
                    np.concatenate([c for _, c in half]),
                )
            ],
            dtype=dtype,
        )
        for half in halves
    )
    return HeldoutBlock(obs, tgt)


# --------------------------------------------------------------------------
# Layout


def pruned(rdd, partitions: list[int] | None):
    """``rdd`` restricted to ``partitions`` (in their order), without running a task on
    the others: Spark's ``PartitionPruningRDD`` (classic sessions only). PySpark has
    no partition-pruning RDD of its own (docs/architecture.md, "Corpus layout")."""
    if partitions is None or list(partitions) == list(range(rdd.getNumPartitions())):
        return rdd
    from pyspark.rdd import RDD

    sc = rdd.context
    jvm = sc._jvm
    keep = jvm.java.util.HashSet()
    for p in partitions:
        keep.add(int(p))
    keep_set = jvm.scala.jdk.javaapi.CollectionConverters.asScala(keep).toSet()
    jrdd = jvm.org.apache.spark.rdd.PartitionPruningRDD.create(rdd._jrdd.rdd(), keep_set)
    return RDD(jrdd.toJavaRDD(), sc, rdd._jrdd_deserializer)


@dataclass
class Corpus:
    """Training blocks laid out by minibatch slice, plus held-out blocks.

    ``train`` has ``n_slices * parts_per_slice`` partitions, one
    :class:`DocBlock` each; partition ``s * parts_per_slice + i`` belongs to
    slice ``s``. ``heldout`` holds :class:`HeldoutBlock` s (or is None).
    """

    train: object
    heldout: object | None
    vocab_size: int
    vocab: list | None
    n_slices: int
    parts_per_slice: int
    slice_docs: np.ndarray
    slice_tokens: np.ndarray
    n_train_docs: int
    n_train_tokens: float
    n_train_pairs: int
    n_heldout_docs: int
    n_empty_docs: int
    train_bytes: int
    seed: int
    report: dict = field(default_factory=dict)
    #: "rdd": ``train``/``heldout`` are RDDs of blocks; "dataframe": cached DataFrames of
    #: :data:`BLOCKS_SCHEMA` / :data:`HELDOUT_SCHEMA` (the DataFrame-only path)
    kind: str = "rdd"
    #: (n_slices, ceil(V/8)) packed bitmaps of each slice's distinct terms (from corpus
    #: building), or None when unknown: see :meth:`slice_terms`
    slice_bitmaps: np.ndarray | None = None

    @property
    def spark(self):
        """The session of a DataFrame-path corpus (None for an RDD one: the active one)."""
        return self.train.sparkSession if self.kind == "dataframe" else None

    def slice_terms(self, s: int) -> np.ndarray | None:
        """The sorted distinct term ids (int32) of slice ``s``'s documents, or None when
        the corpus does not know them. A round ships the state's rows of these terms
        only (docs/architecture.md, "The round value")."""
        if self.slice_bitmaps is None:
            return None
        return bitmap_terms(self.slice_bitmaps[s], self.vocab_size)

    def slice_partitions(self, s: int) -> list[int]:
        p = self.parts_per_slice
        return list(range(s * p, (s + 1) * p))

    def unpersist(self):
        if self.kind == "dataframe":
            release_frame(self.train)
        else:
            self.train.unpersist()
        if self.heldout is not None:
            if self.kind == "dataframe":
                release_frame(self.heldout)
            else:
                self.heldout.unpersist()


def split_documents(
    source: DocSource,
    stats: dict,
    heldout_fraction: float = 0.0,
    heldout_count: int | None = None,
    seed: int = 0,
):
    """Drop empty documents and split the rest into (training RDD, held-out RDD) of
    documents ``(doc_id, terms, counts)``.

    Held-out documents are chosen by a seeded hash of the document id: a
    ``heldout_count`` takes the documents with the smallest hashes, a
    ``heldout_fraction`` those whose hash falls below it. The held-out RDD is
    None when nothing is held out.
    """
    tagged, holding = tag_packs(
        source_packs(source), source, stats, heldout_fraction, heldout_count, seed
    )
    return (
        tagged.filter(lambda x: not x[0]).flatMap(lambda x: docs_of_pack(make_pack(*x[1]))),
        (
            tagged.filter(lambda x: x[0]).flatMap(lambda x: docs_of_pack(make_pack(*x[1])))
            if holding
            else None
        ),
    )


def tag_packs(
    packs,
    source: DocSource,
    stats: dict,
    heldout_fraction: float = 0.0,
    heldout_count: int | None = None,
    seed: int = 0,
):
    """``(tagged, holding)``: the cleaned packs of an RDD of packs as ``(held, pack)``,
    each pack cut into its training documents (``held`` False) and its held-out ones
    (True), empty packs dropped; ``holding`` False when no document is held out (then
    every ``held`` is False)."""
    clean = packs.map(clean_pack)

    def smallest(n: int) -> float:
        def part(it):
            keys = [heldout_keys(q[0], seed) for q in it]
            return iter(np.sort(np.concatenate(keys))[:n].tolist() if keys else ())

        with executor_errors(source.what):
            return clean.mapPartitions(part).takeOrdered(n)[-1]

    threshold = holdout_threshold(source, stats, heldout_fraction, heldout_count, seed, smallest)
    by_count = bool(heldout_count)
    return clean.flatMap(lambda q: tag_pack(q, seed, threshold, by_count)), threshold >= 0


def tag_packs_locally(
    packs: list,
    source: DocSource,
    stats: dict,
    heldout_fraction: float = 0.0,
    heldout_count: int | None = None,
    seed: int = 0,
) -> tuple[list, bool]:
    """:func:`tag_packs` of packs on the driver (a list; the result a list too)."""
    clean = [clean_pack(q) for q in packs]

    def smallest(n: int) -> float:
        return float(np.sort(np.concatenate([heldout_keys(q[0], seed) for q in clean]))[n - 1])

    threshold = holdout_threshold(source, stats, heldout_fraction, heldout_count, seed, smallest)
    by_count = bool(heldout_count)
    return [x for q in clean for x in tag_pack(q, seed, threshold, by_count)], threshold >= 0


def holdout_threshold(
    source: DocSource,
    stats: dict,
    heldout_fraction: float,
    heldout_count: int | None,
    seed: int,
    smallest: Callable[[int], float],
) -> float:
    """The held-out key threshold of :func:`heldout_mask` (-1: no document is held out):
    the ``heldout_count``-th smallest key (from the validation pass's summary, else
    ``smallest(n)``), or ``heldout_fraction``."""
    _check_params(
        "split_documents", heldout_fraction=heldout_fraction, heldout_count=heldout_count, seed=seed
    )
    n_nonempty = stats["docs"] - stats["empty"]
    if heldout_count:
        if heldout_count >= n_nonempty:
            raise CorpusError(
                f"The 'heldout_count' parameter ({heldout_count}) must be smaller "
                f"than the number of non-empty documents ({n_nonempty} of the "
                f"{stats['docs']} documents of {source.what}) to leave documents to train on."
            )
        n = heldout_count
        known = holdout_summary(stats, Holdout.of(heldout_fraction, heldout_count, seed))
        if known is not None:  # gathered by the validation pass (n < the documents)
            return float(known[n - 1])
        return float(smallest(n))
    if heldout_fraction > 0:
        return float(heldout_fraction)
    return -1.0


def tag_pack(q: Pack, seed: int, threshold: float, by_count: bool) -> list:
    """A cleaned pack as ``[(held, pack)]``: its training documents (``held`` False) and
    its held-out ones (True) under ``threshold`` (:func:`holdout_threshold`; below 0
    none are held out), without empty packs."""
    if threshold >= 0:
        held = heldout_mask(q[0], seed, threshold, by_count)
        if held.any():
            cut = [(h, take_docs(q, np.flatnonzero(held == h))) for h in (False, True)]
            return [x for x in cut if n_docs(x[1]) > 0]
    return [(False, q)] if n_docs(q) > 0 else []  # most packs: no copy


def heldout_blocks(docs_rdd, seed: int = 0, dtype=np.float32, n_parts: int | None = None):
    """Document-completion blocks from an RDD of (doc_id, terms, counts).

    Each document's tokens are split in half at random, seeded by (seed,
    doc id) (:func:`sparklda.block.split_halves`). Cached; one
    :class:`HeldoutBlock` per partition.
    """
    n_parts = n_parts or docs_rdd.context.defaultParallelism

    def make_heldout(it):
        yield heldout_block(it, seed, dtype)

    return (
        docs_rdd.map(lambda d: (d[0], d))
        .partitionBy(n_parts)
        .values()
        .mapPartitions(make_heldout)
        .setName("sparklda held-out blocks")
        .persist(StorageLevel.MEMORY_ONLY)
    )


#: ``on_phase(phase, counts)`` of :func:`build_corpus` / :func:`build_corpus_frame`.
PhaseHook = Callable[[str, dict], None]

#: The phases of corpus building, in order, as told to ``on_phase``: "reading" (the
#: documents are read and validated in one pass), "validated" (counts: documents,
#: empty_documents, tokens), "splitting" (the held-out documents are chosen), "caching"
#: (counts: training_documents; the training blocks are built and cached), "cached"
#: (counts: training_documents, heldout_documents, training_tokens, cached_bytes).
BUILD_PHASES = ("reading", "validated", "splitting", "caching", "cached")


def _no_phase(phase: str, counts: dict) -> None:
    return None


def _read_counts(stats: dict) -> dict:
    return {
        "documents": int(stats["docs"]),
        "empty_documents": int(stats["empty"]),
        "tokens": float(stats["tokens"]),
    }


def _cached_counts(arr: np.ndarray, n_train: int, n_held: int) -> dict:
    return {
        "training_documents": int(n_train),
        "heldout_documents": int(n_held),
        "training_tokens": float(arr[:, 1].sum()),
        "cached_bytes": int(arr[:, 3].sum()),
    }


def build_corpus(
    source: DocSource,
    minibatch_size: int | None = 1000,
    heldout_fraction: float = 0.0,
    heldout_count: int | None = None,
    seed: int = 0,
    parts_per_slice: int | None = None,
    dtype=np.float32,
    on_phase: PhaseHook | None = None,
    warm: Callable[[], object] | None = None,
    local_layout: int | None = None,
) -> Corpus:
    """Validate, hold out whole documents and cache the training blocks.

    Parameters
    ----------
    minibatch_size : documents per round (SCVB0's |M| in documents); the
        corpus is cut into ceil(D_train / minibatch_size) slices. 0 or None:
        :func:`sparklda.params.default_minibatch_size` of ``parts_per_slice``
        and the number of training documents.
    heldout_fraction, heldout_count : whole documents kept out of training
        for evaluation, chosen by a seeded hash of the document id (a count
        takes precedence over a fraction).
    parts_per_slice : partitions (tasks) per round; default the cluster's
        default parallelism.
    on_phase : called as ``on_phase(phase, counts)`` when a phase of the building
        starts and ends (:data:`BUILD_PHASES`), for live progress.
    warm : called once in every task of the job that caches the blocks, before it
        measures them: the Python workers that run the rounds load the kernels
        there (docs/architecture.md, "Startup: kernels compile once per machine").
    local_layout : the most (document, term) pairs a corpus may have to be laid out
        on the driver (its packs come back with the validation pass, the blocks are
        built there and sent to the executors: one Spark job fewer, and no shuffle);
        default :data:`LOCAL_LAYOUT_MAX_PAIRS`, 0 never. The blocks are the same
        either way (docs/architecture.md, "Corpus layout").
    """
    _check_params(
        "build_corpus",
        minibatch_size=minibatch_size,
        heldout_fraction=heldout_fraction,
        heldout_count=heldout_count,
        seed=seed,
        parts_per_slice=parts_per_slice,
    )
    sc = source.rdd.context
    parts_per_slice = parts_per_slice or sc.defaultParallelism

    phase = on_phase or _no_phase
    # read once, in packs: every step below is array operations per pack
    # (docs/architecture.md, "Corpus layout")
    packs = source_packs(source).persist(StorageLevel.MEMORY_AND_DISK)
    try:
        with executor_errors(source.what):  # errors of the checks run on executors
            phase("reading", {})
            holdout = Holdout.of(heldout_fraction, heldout_count, seed)
            stats, kept = validate_and_keep(
                packs,
                source,
                holdout,
                keep_pairs=LOCAL_LAYOUT_MAX_PAIRS if local_layout is None else local_layout,
                warm=warm,
            )
            phase("validated", _read_counts(stats))
            # (held, pack): each pack cut into its training and held-out documents, on
            # the driver when the validation pass brought a small corpus's packs there
            on_driver = kept is not None
            if on_driver:
                tagged, holding = tag_packs_locally(
                    kept, source, stats, heldout_fraction, heldout_count, seed
                )
                del kept
            else:
                tagged, holding = tag_packs(
                    packs, source, stats, heldout_fraction, heldout_count, seed
                )
            n_held_parts = sc.defaultParallelism if holding else 0
            phase("splitting", {})
            # the validation pass told how many documents are held out (a count job only
            # when two held-out keys tie)
            n_held_known = known_heldout_docs(stats, holdout)
            if n_held_known is not None:
                n_train = stats["docs"] - stats["empty"] - n_held_known
            elif on_driver:
                n_train = sum(n_docs(q) for held, q in tagged if not held)
            else:
                n_train = tagged.filter(lambda x: not x[0]).map(lambda x: n_docs(x[1])).sum()
            phase("caching", {"training_documents": int(n_train)})
            if n_train == 0:
                raise CorpusError(
                    "No training documents are left after holding out documents; "
                    "lower 'heldout_fraction' or 'heldout_count'."
                )
            minibatch_size = minibatch_size or default_minibatch_size(parts_per_slice, n_train)
            n_slices = max(1, math.ceil(n_train / minibatch_size))
            p = parts_per_slice
            n_parts = n_slices * p
            layout = Layout(seed, n_slices, p, n_held_parts, np.dtype(dtype))
            vocab_size = source.vocab_size
            if on_driver:  # a small corpus: the same blocks, built here, no shuffle
                train, heldout, measured = layout.on_driver(sc, tagged, vocab_size)
            else:
                train, heldout, measured = layout.on_executors(tagged, vocab_size, warm)
            per_part = [r for r in measured if len(r) > 1]
            n_held = sum(r[0] for r in measured if len(r) == 1)
            arr = np.array([r[:4] for r in per_part], dtype=np.float64).reshape(n_parts, 4)
            bitmaps = slice_bitmaps([r[4] for r in per_part], n_slices, p, vocab_size)
            slice_docs = arr[:, 0].reshape(n_slices, p).sum(1).astype(np.int64)
            slice_tokens = arr[:, 1].reshape(n_slices, p).sum(1)
            phase("cached", _cached_counts(arr, n_train, n_held))
    finally:
        packs.unpersist()
        source.release_frame()
    return _corpus(
        source,
        stats,
        train,
        heldout,
        n_slices,
        p,
        slice_docs,
        slice_tokens,
        arr,
        n_held,
        seed,
        minibatch_size=minibatch_size,
        bitmaps=bitmaps,
        laid_out_on="driver" if on_driver else "executors",
    )


#: Corpora with at most this many (document, term) pairs are laid out on the driver by
#: default (:func:`build_corpus`'s ``local_layout``): at most about 32 MB of packs
#: there, and as much again of blocks. The Spark job and shuffle of the executors'
#: layout cost more than that below it (docs/architecture.md, "Corpus layout").
LOCAL_LAYOUT_MAX_PAIRS = 4_000_000


@dataclass(frozen=True)
class Layout:
    """Where :func:`build_corpus` puts each document: a training document in block
    partition ``slice * p + i`` (:func:`block_partitions`), a held-out one in
    ``n_parts + hash(id) % n_held_parts`` (``hash`` of an int is Python's own,
    PySpark's ``portable_hash`` without its check of ``PYTHONHASHSEED``); on the
    executors (one shuffle) or, for a small corpus, on the driver, with the same
    blocks."""

    seed: int
    n_slices: int
    p: int
    n_held_parts: int
    dtype: Any

    @property
    def n_parts(self) -> int:
        return self.n_slices * self.p

    def records(self, tagged) -> Iterator[tuple[int, Any]]:
        """``(partition, record)`` of ``(held, pack)`` items: one packed record per
        (input partition, block), not one per document (the shuffle's cost per record
        dominated corpus building), in the blocks' dtypes (int32 terms, counts in
        ``dtype``: half the bytes of float64 packs, and the same block); each held-out
        document a record of its own."""
        n_parts, n_held = self.n_parts, self.n_held_parts
        groups: dict[int, list] = {}
        held: list = []
        for is_held, pack in tagged:
            if is_held:
                held.extend((n_parts + hash(int(d[0])) % n_held, d) for d in docs_of_pack(pack))
                continue
            parts = block_partitions(pack[0], self.seed, self.n_slices, self.p)
            for part, sub in group_by(pack, parts):
                groups.setdefault(part, []).append(sub)
        yield from (
            (part, compact_pack(concat_packs(groups[part]), self.dtype)) for part in sorted(groups)
        )
        yield from held

    def on_executors(self, tagged, vocab_size: int, warm=None):
        """``(train, heldout, measured)``: the blocks of an RDD of ``(held, pack)``,
        cached by one job after one shuffle, and each block's :func:`block_measures`."""
        n_parts, n_held_parts, seed, dtype = self.n_parts, self.n_held_parts, self.seed, self.dtype

        def assign(it):
            settle_heap()
            yield from self.records(it)

        def make_block(it):
            settle_heap()
            yield DocBlock.from_packed((q for _, q in it), dtype=dtype)

        def make_heldout(it):
            settle_heap()
            yield heldout_block((d for _, d in it), seed, dtype)

        shuffled = tagged.mapPartitions(assign).partitionBy(n_parts + n_held_parts, lambda x: x)
        train = (
            pruned(shuffled, list(range(n_parts)))
            .mapPartitions(make_block, preservesPartitioning=True)
            .setName("sparklda training blocks")
            .persist(StorageLevel.MEMORY_ONLY)
        )
        heldout = (
            pruned(shuffled, list(range(n_parts, n_parts + n_held_parts)))
            .mapPartitions(make_heldout)
            .setName("sparklda held-out blocks")
            .persist(StorageLevel.MEMORY_ONLY)
            if n_held_parts
            else None
        )

        def measure(blocks):
            if warm is not None:
                warm()
            for b in blocks:
                yield block_measures(b, vocab_size)

        # one job caches the training blocks and the held-out ones
        both = train if heldout is None else train.union(heldout)
        return train, heldout, both.mapPartitions(measure).collect()

    def on_driver(self, sc, tagged: list, vocab_size: int):
        """:meth:`on_executors` of a list of ``(held, pack)`` on the driver: the blocks
        are built here and become RDDs of one block per partition, cached as the
        first round reads them."""
        n_parts = self.n_parts
        records: dict[int, list] = {}
        for part, record in self.records(tagged):
            records.setdefault(part, []).append(record)
        train_blocks = [
            DocBlock.from_packed(records.get(i, []), dtype=self.dtype) for i in range(n_parts)
        ]
        held_blocks = [
            heldout_block(records.get(n_parts + i, []), self.seed, self.dtype)
            for i in range(self.n_held_parts)
        ]
        measured = [block_measures(b, vocab_size) for b in train_blocks + held_blocks]
        train = (
            sc.parallelize(train_blocks, n_parts)
            .setName("sparklda training blocks")
            .persist(StorageLevel.MEMORY_ONLY)
        )
        heldout = (
            sc.parallelize(held_blocks, self.n_held_parts)
            .setName("sparklda held-out blocks")
            .persist(StorageLevel.MEMORY_ONLY)
            if held_blocks
            else None
        )
        return train, heldout, measured


def block_measures(b, vocab_size: int) -> tuple:
    """What corpus building reports of a block: ``(docs,)`` of a held-out block; of a
    training block ``(docs, tokens, pairs, bytes, terms digest)``."""
    if isinstance(b, HeldoutBlock):
        return (b.n_docs,)
    return b.n_docs, b.n_tokens, b.nnz, b.nbytes(), terms_digest(b.terms, vocab_size)


def slice_bitmaps(digests: list, n_slices: int, p: int, vocab_size: int) -> np.ndarray:
    """(n_slices, ceil(V/8)) bitmaps: the union of the terms digests of each slice's
    ``p`` blocks (``digests`` in partition order, None for a missing block)."""
    return np.stack(
        [union_bitmap(digests[s * p : (s + 1) * p], vocab_size) for s in range(n_slices)]
    )


def _corpus(
    source,
    stats,
    train,
    heldout,
    n_slices,
    p,
    slice_docs,
    slice_tokens,
    arr,
    n_held,
    seed,
    kind: str = "rdd",
    minibatch_size: int = 0,
    bitmaps: np.ndarray | None = None,
    laid_out_on: str = "executors",
) -> Corpus:
    """The :class:`Corpus` and its report from what either path built."""
    corpus = Corpus(
        train=train,
        heldout=heldout,
        vocab_size=source.vocab_size,
        vocab=source.vocab,
        n_slices=n_slices,
        parts_per_slice=p,
        slice_docs=slice_docs,
        slice_tokens=slice_tokens,
        n_train_docs=int(slice_docs.sum()),
        n_train_tokens=float(slice_tokens.sum()),
        n_train_pairs=int(arr[:, 2].sum()),
        n_heldout_docs=int(n_held),
        n_empty_docs=int(stats["empty"]),
        train_bytes=int(arr[:, 3].sum()),
        seed=seed,
        kind=kind,
        slice_bitmaps=bitmaps,
    )
    corpus.report = {
        "documents_read": int(stats["docs"]),
        "empty_documents_skipped": corpus.n_empty_docs,
        "training_documents": corpus.n_train_docs,
        "training_tokens": corpus.n_train_tokens,
        "training_pairs": corpus.n_train_pairs,
        "heldout_documents": corpus.n_heldout_docs,
        "vocab_size": corpus.vocab_size,
        "slices": n_slices,
        "parts_per_slice": p,
        "minibatch_size": minibatch_size,
        "cached_bytes": corpus.train_bytes,
        "cached_bytes_per_pair": corpus.train_bytes / max(1, corpus.n_train_pairs),
        "laid_out_on": laid_out_on,
    }
    log.info("corpus: %s", corpus.report)
    if corpus.n_empty_docs:
        log.info("skipped %d empty documents", corpus.n_empty_docs)
    return corpus


# --------------------------------------------------------------------------
# The DataFrame-only path (Spark Connect): the same documents, checks, split and
# block layout as above, with DataFrames and mapInArrow instead of RDDs
# (docs/architecture.md, "Spark Connect path").

#: Columns of a documents DataFrame (:meth:`DocSource.documents_frame`).
DOCS_SCHEMA = "doc_id long, terms array<long>, counts array<double>"
#: Columns of the cached training blocks of the DataFrame path (one row per block).
BLOCKS_SCHEMA = (
    "part int, docs long, tokens double, pairs long, nbytes long, terms binary, block binary"
)
#: Columns of the cached held-out blocks of the DataFrame path.
HELDOUT_SCHEMA = "docs long, observed binary, target binary"


def default_parallelism(spark) -> int:
    """The session's default parallelism, also without a SparkContext (Spark Connect:
    the partitions of a ``range`` without a partition count, which Spark sets to it)."""
    if not is_connect(spark):
        return int(spark.sparkContext.defaultParallelism)
    from pyspark.sql import functions as F

    ids = spark.range(0, 1 << 16).select(F.spark_partition_id().alias("p"))
    return len(ids.groupBy("p").count().collect())


def pack_from_batch(batch) -> Pack:
    """The documents of an Arrow batch of :data:`DOCS_SCHEMA` as a pack
    (:mod:`sparklda.packs`), without a Python step per document."""
    ids = batch.column("doc_id").to_numpy(zero_copy_only=False)
    terms, lengths = _list_values(batch.column("terms"))
    counts, _ = _list_values(batch.column("counts"))
    return make_pack(ids, lengths, terms, counts)


def _list_values(col) -> tuple[np.ndarray, np.ndarray]:
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


def _frame_docs(batches) -> Iterator[tuple[int, np.ndarray, np.ndarray]]:
    for batch in batches:
        yield from docs_from_batch(batch)


def _uci_line_frame(spark, path: str, min_partitions: int | None):
    """The lines of a docword file as a DataFrame (column ``value``), in file order
    partition by partition; a shipped sample's lines are read on the driver."""
    if is_sample(path):
        data = _read_local_bytes(resolve_sample(path), f"Sample file {path!r}")
        lines = _text_lines(decode_text(data, "utf-8", f"Sample file {path!r}"))
        # one partition, in file order: a local relation's projection may be evaluated
        # on the driver (all rows in partition 0) before the rows are sliced, so the
        # header would be skipped in every slice (docs/architecture.md, "Spark Connect path")
        frame = spark.createDataFrame([(line,) for line in lines], "value string").coalesce(1)
    else:
        frame = spark.read.text(path)
    return frame


_UCI_PARSED = "doc long, term long, count double, bad_line long, problem string, line string"


def _uci_parse_frame(n_docs: int, n_words: int):
    """mapInArrow: :func:`_uci_parser` over a partition of lines (its index from the
    ``_p`` column); entries as (doc, term, count), the summary as a row with doc < 0."""
    import pyarrow as pa

    parser = _uci_parser(n_docs, n_words)

    def run(batches):
        batches = iter(batches)
        first = next((b for b in batches if b.num_rows), None)
        if first is None:  # no lines: nothing to count
            return
        part = int(first.column("_p")[0].as_py())

        def lines():
            yield from first.column("value").to_pylist()
            for batch in batches:
                yield from batch.column("value").to_pylist()

        docs, terms, counts = [], [], []
        summary = None
        for key, value in parser(part, lines()):
            if key < 0:
                summary = (key, value)
                continue
            docs.append(key)
            terms.append(value[0])
            counts.append(value[1])
            if len(docs) >= 65536:
                yield _parsed_batch(pa, docs, terms, counts)
                docs, terms, counts = [], [], []
        if docs:
            yield _parsed_batch(pa, docs, terms, counts)
        key, (n_lines, entries, bad) = summary  # the parser always ends with it
        yield pa.RecordBatch.from_pydict(
            {
                "doc": pa.array([key], pa.int64()),
                "term": pa.array([n_lines], pa.int64()),
                "count": pa.array([float(entries)], pa.float64()),
                "bad_line": pa.array([bad[0] if bad else None], pa.int64()),
                "problem": pa.array([bad[1] if bad else None], pa.string()),
                "line": pa.array([bad[2] if bad else None], pa.string()),
            }
        )

    return run


def _parsed_batch(pa, docs, terms, counts):
    n = len(docs)
    return pa.RecordBatch.from_pydict(
        {
            "doc": pa.array(docs, pa.int64()),
            "term": pa.array(terms, pa.int64()),
            "count": pa.array(counts, pa.float64()),
            "bad_line": pa.nulls(n, pa.int64()),
            "problem": pa.nulls(n, pa.string()),
            "line": pa.nulls(n, pa.string()),
        }
    )


def _group_uci_entries(batches):
    """mapInArrow over (doc, term, count) rows sorted by doc then term then count within
    the partition: one document per doc id, as :func:`_uci_documents` builds them."""
    import pyarrow as pa

    table = pa.Table.from_batches(list(batches))
    if table.num_rows == 0:
        return
    doc = table.column("doc").to_numpy()
    term = table.column("term").to_numpy()
    count = table.column("count").to_numpy()
    starts = np.flatnonzero(np.concatenate([[True], doc[1:] != doc[:-1]]))
    ends = np.append(starts[1:], len(doc))
    docs = [
        (int(doc[a]), term[a:b].astype(np.int64), count[a:b].astype(np.float64))
        for a, b in zip(starts, ends, strict=True)
    ]
    for k in range(0, len(docs), 4096):
        yield docs_to_batch(docs[k : k + 4096])


def _uci_documents_frame(line_frame, what: str, n_docs: int, n_words: int, nnz: int):
    """The documents of a docword file (DataFrame of :data:`DOCS_SCHEMA`), its body
    checked against the header first (:func:`_check_uci_body`: the same errors)."""
    from pyspark.sql import functions as F

    parsed = line_frame.select(F.spark_partition_id().alias("_p"), "value").mapInArrow(
        _uci_parse_frame(n_docs, n_words), _UCI_PARSED
    )
    parsed = persist_frame(parsed, what)
    with executor_errors(what):
        rows = parsed.filter(F.col("doc") < 0).collect()
    summaries = [
        (
            -1 - int(r["doc"]),
            (
                int(r["term"]),
                int(r["count"]),
                (int(r["bad_line"]), r["problem"], r["line"]) if r["problem"] is not None else None,
            ),
        )
        for r in rows
    ]
    try:
        _check_uci_body(what, nnz, summaries)
    except CorpusError:
        release_frame(parsed)
        raise
    n_parts = max(1, len(summaries))
    docs = (
        parsed.filter(F.col("doc") >= 0)
        .select("doc", "term", "count")
        .repartition(n_parts, "doc")
        .sortWithinPartitions("doc", "term", "count")
        .mapInArrow(_group_uci_entries, DOCS_SCHEMA)
    )
    return docs, [parsed]


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
    values, vlen = _list_values(fields["values"])
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


def _check_frame_partition(what: str, vocab_size: int):
    import json

    import pyarrow as pa

    def run(batches):
        settle_heap()
        summary = check_packs((pack_from_batch(b) for b in batches), vocab_size)
        text = json.dumps(summary, default=lambda o: o.item())
        yield pa.RecordBatch.from_pydict({"summary": [text]})

    return run


def validate_frame(source: DocSource, docs) -> dict:
    """:func:`validate` on a documents DataFrame: the same checks, counts and errors."""
    import functools
    import json

    with executor_errors(source.what):
        rows = docs.mapInArrow(
            _check_frame_partition(source.what, source.vocab_size), "summary string"
        ).collect()
    summaries = [json.loads(r[0]) for r in rows]
    for s in summaries:
        s["problems"] = {k: tuple(v) for k, v in s["problems"].items()}
    return check_counts(source, functools.reduce(merge_checks, summaries, empty_summary()))


def _tag_documents(seed: int, threshold: float, by_count: bool):
    """mapInArrow: the non-empty documents without zero counts, with ``held``."""

    def run(batches):
        for batch in batches:
            pack = clean_pack(pack_from_batch(batch))
            held = (
                heldout_mask(pack[0], seed, threshold, by_count)
                if threshold >= 0
                else np.zeros(n_docs(pack), bool)
            )
            yield pack_to_batch(pack, {"held": held})

    return run


def _smallest_keys(seed: int, n: int):
    import pyarrow as pa

    def run(batches):
        keys = [heldout_keys(clean_pack(pack_from_batch(b))[0], seed) for b in batches]
        allk = np.sort(np.concatenate(keys)) if keys else np.zeros(0)
        yield pa.RecordBatch.from_pydict({"key": pa.array(allk[:n], pa.float64())})

    return run


def _assign_parts(seed: int, n_slices: int, p: int):
    import pyarrow as pa

    def run(batches):
        for batch in batches:
            ids = batch.column("doc_id").to_numpy(zero_copy_only=False)
            parts = block_partitions(ids, seed, n_slices, p).astype(np.int32)
            yield batch.append_column("part", pa.array(parts))

    return run


def _make_blocks(dtype, vocab_size: int):
    """mapInArrow over documents with ``part``, sorted by part within the partition: one
    :class:`DocBlock` per part (:data:`BLOCKS_SCHEMA`), as the RDD path builds it. A
    partition holds several parts (one per slice); each block is yielded once its
    documents have all arrived, so a task holds one block's documents at a time."""
    import pyarrow as pa

    from .block import block_to_bytes

    def emit(part: int, packs: list):
        block = DocBlock.from_packed(packs, dtype=dtype)
        docs, tokens, pairs, nbytes, digest = block_measures(block, vocab_size)
        return pa.RecordBatch.from_pydict(
            {
                "part": pa.array([part], pa.int32()),
                "docs": pa.array([docs], pa.int64()),
                "tokens": pa.array([tokens], pa.float64()),
                "pairs": pa.array([pairs], pa.int64()),
                "nbytes": pa.array([nbytes], pa.int64()),
                "terms": pa.array([digest], pa.binary()),
                "block": pa.array([block_to_bytes(block)], pa.binary()),
            }
        )

    def run(batches):
        settle_heap()
        current: int | None = None
        pending: list = []
        for batch in batches:
            if not batch.num_rows:
                continue
            parts = batch.column("part").to_numpy()
            pack = pack_from_batch(batch)
            starts = np.flatnonzero(np.concatenate([[True], parts[1:] != parts[:-1]]))
            ends = np.append(starts[1:], len(parts))
            for a, b in zip(starts, ends, strict=True):
                part = int(parts[a])
                if part != current:
                    if current is not None:
                        yield emit(current, pending)
                    current, pending = part, []
                pending.append(slice_docs(pack, int(a), int(b)))
        if current is not None:
            yield emit(current, pending)

    return run


# --------------------------------------------------------------------------
# Exact hash partitioning (the DataFrame path's block layout)


def _murmur3_int(value: int, seed: int = 42) -> int:
    """Spark's ``Murmur3_x86_32.hashInt`` (what ``F.hash`` and ``repartition(n, col)``
    compute for an int column, seed 42), as a signed 32-bit int."""
    mask = 0xFFFFFFFF

    def rotl(x: int, r: int) -> int:
        return ((x << r) | (x >> (32 - r))) & mask

    k1 = (value & mask) * 0xCC9E2D51 & mask
    k1 = rotl(k1, 15) * 0x1B873593 & mask
    h1 = rotl((seed & mask) ^ k1, 13)
    h1 = (h1 * 5 + 0xE6546B64) & mask
    h1 ^= 4
    h1 ^= h1 >> 16
    h1 = h1 * 0x85EBCA6B & mask
    h1 ^= h1 >> 13
    h1 = h1 * 0xC2B2AE35 & mask
    h1 ^= h1 >> 16
    return h1 - (1 << 32) if h1 & 0x80000000 else h1


def partition_keys(n: int) -> list[int]:
    """``keys[i]``: the smallest int that ``repartition(n, key)`` sends to partition ``i``
    (Spark's hash partitioning is ``pmod(murmur3(key), n)``). Repartitioning by
    ``keys[x]`` therefore puts every row with ``x = i`` in partition ``i``, which a
    hash of ``x`` itself does not (two values may share a partition)."""
    keys: list[int | None] = [None] * n
    missing, k = n, 0
    while missing:
        i = _murmur3_int(k) % n
        if keys[i] is None:
            keys[i] = k
            missing -= 1
        k += 1
    return [int(x) for x in keys if x is not None]


def exact_partition_column(col, n: int):
    """A column that ``repartition(n, ...)`` sends to partition ``col`` (an int column
    with values in ``[0, n)``): see :func:`partition_keys`."""
    from pyspark.sql import functions as F

    keys = F.array(*[F.lit(k) for k in partition_keys(n)])
    return F.element_at(keys, col.cast("int") + 1)


def _make_heldout(seed: int, dtype):
    import pyarrow as pa

    from .block import block_to_bytes

    def run(batches):
        docs = list(_frame_docs(batches))
        if not docs:
            return
        hb = heldout_block(docs, seed, dtype)
        yield pa.RecordBatch.from_pydict(
            {
                "docs": pa.array([hb.n_docs], pa.int64()),
                "observed": pa.array([block_to_bytes(hb.observed)], pa.binary()),
                "target": pa.array([block_to_bytes(hb.target)], pa.binary()),
            }
        )

    return run


def build_corpus_frame(
    source: DocSource,
    minibatch_size: int | None = 1000,
    heldout_fraction: float = 0.0,
    heldout_count: int | None = None,
    seed: int = 0,
    parts_per_slice: int | None = None,
    dtype=np.float32,
    on_phase: PhaseHook | None = None,
) -> Corpus:
    """:func:`build_corpus` without RDDs (the DataFrame-only path, Spark Connect).

    The same validation and errors, the same held-out documents and the same blocks
    (partition ``s * parts_per_slice + i`` holds the same documents) as
    :func:`build_corpus` for the same input and seed. ``train`` is a cached DataFrame
    of :data:`BLOCKS_SCHEMA`, one row per non-empty block, and ``heldout`` one of
    :data:`HELDOUT_SCHEMA` (or None).
    """
    from pyspark.sql import functions as F

    _check_params(
        "build_corpus",
        minibatch_size=minibatch_size,
        heldout_fraction=heldout_fraction,
        heldout_count=heldout_count,
        seed=seed,
        parts_per_slice=parts_per_slice,
    )
    docs = source.documents_frame()
    spark = docs.sparkSession
    p = parts_per_slice or default_parallelism(spark)
    docs = persist_frame(docs, source.what)
    train = heldout = None
    phase = on_phase or _no_phase
    try:
        with executor_errors(source.what):
            phase("reading", {})
            stats = validate_frame(source, docs)
            phase("validated", _read_counts(stats))
            phase("splitting", {})
            n_nonempty = stats["docs"] - stats["empty"]

            def smallest(n: int) -> float:
                rows = docs.mapInArrow(_smallest_keys(seed, n), "key double").collect()
                return float(sorted(r[0] for r in rows)[n - 1])

            threshold = holdout_threshold(
                source, stats, heldout_fraction, heldout_count, seed, smallest
            )
            by_count = bool(heldout_count)
            tagged = docs.mapInArrow(
                _tag_documents(seed, threshold, by_count), DOCS_SCHEMA + ", held boolean"
            )
            train_docs = tagged.filter(~F.col("held")).drop("held")
            n_train = n_nonempty if threshold < 0 else train_docs.count()
            phase("caching", {"training_documents": int(n_train)})
            if n_train == 0:
                raise CorpusError(
                    "No training documents are left after holding out documents; "
                    "lower 'heldout_fraction' or 'heldout_count'."
                )
            minibatch_size = minibatch_size or default_minibatch_size(p, n_train)
            n_slices = max(1, math.ceil(n_train / minibatch_size))
            n_parts = n_slices * p
            # block s * p + i in partition i: a round's filter on its slice keeps p tasks,
            # one block each (docs/architecture.md, "Spark Connect path")
            # checkpointed, not cached: a round's plan is then a scan of the checkpoint,
            # not the whole building pipeline (docs/architecture.md, "Spark Connect path")
            train = checkpoint_frame(
                train_docs.mapInArrow(_assign_parts(seed, n_slices, p), DOCS_SCHEMA + ", part int")
                .repartition(p, exact_partition_column(F.col("part") % p, p))
                .sortWithinPartitions("part")
                .mapInArrow(_make_blocks(dtype, source.vocab_size), BLOCKS_SCHEMA),
                "the training blocks",
            )
            meta = train.select("part", "docs", "tokens", "pairs", "nbytes", "terms").collect()
            arr = np.zeros((n_parts, 4))
            digests: list = [None] * n_parts
            for r in meta:
                arr[int(r[0])] = (r[1], r[2], r[3], r[4])
                digests[int(r[0])] = r[5]
            bitmaps = slice_bitmaps(digests, n_slices, p, source.vocab_size)
            slice_docs = arr[:, 0].reshape(n_slices, p).sum(1).astype(np.int64)
            slice_tokens = arr[:, 1].reshape(n_slices, p).sum(1)
            n_held = n_nonempty - n_train
            if threshold >= 0:
                # cached when first scored
                heldout = persist_frame(
                    tagged.filter(F.col("held"))
                    .drop("held")
                    .repartition(p, "doc_id")
                    .mapInArrow(_make_heldout(seed, dtype), HELDOUT_SCHEMA),
                    "the held-out blocks",
                )
            phase("cached", _cached_counts(arr, n_train, n_held))
    except BaseException:
        for frame in (train, heldout):
            if frame is not None:
                release_frame(frame)
        raise
    finally:
        release_frame(docs)
        source.release_frame()
    return _corpus(
        source,
        stats,
        train,
        heldout,
        n_slices,
        p,
        slice_docs,
        slice_tokens,
        arr,
        n_held,
        seed,
        "dataframe",
        minibatch_size=minibatch_size,
        bitmaps=bitmaps,
    )
