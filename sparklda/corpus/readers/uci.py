"""The UCI bag-of-words reader (:func:`read_uci`): ``docword.txt[.gz]`` and
``vocab.txt``, its body checked against its header as an RDD (classic sessions) or
a DataFrame (the DataFrame-only path)."""

from __future__ import annotations

import math
import re

import numpy as np

from ...errors import CorpusError, executor_errors
from ...io import check_encoding, is_sample, resolve_sample
from ...limits import MAX_COUNT
from ...storage import persist_frame, reader_path, release_frame
from ..arrow import DOCS_SCHEMA, docs_to_batch
from ..source import DocSource
from .files import decode_text, read_local_bytes, read_vocab, sample_lines, text_lines

__all__ = ["read_uci"]


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
    path = str(docword_path)
    header = _uci_header(spark, path, what)
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
        lf = _uci_line_frame(spark, path, min_partitions)
        return _uci_documents_frame(lf, what, n_docs, n_words, nnz)

    def documents():
        sc = spark.sparkContext
        if is_sample(path):
            lines = sample_lines(sc, path, min_partitions)
        else:
            lines = sc.textFile(reader_path(spark, path), minPartitions=min_partitions)
        n_parts = max(sc.defaultParallelism, min_partitions or 1)
        return (
            lines.mapPartitionsWithIndex(_uci_parser(n_docs, n_words))
            .groupByKey(numPartitions=n_parts, partitionFunc=_uci_partition)
            .mapPartitionsWithIndex(_uci_documents(what, nnz))
        )

    return DocSource(
        None,
        n_words,
        vocab,
        what,
        declared_docs=n_docs,
        frame=frame,
        spark=spark,
        documents=documents,
    )


def _uci_header(spark, path: str, what: str) -> list[str]:
    """The first three lines of a docword file: a shipped sample's read on the driver,
    another's through Spark's text source (any file system Spark reaches)."""
    if is_sample(path):
        data = read_local_bytes(resolve_sample(path), f"Sample file {path!r}")
        return text_lines(decode_text(data, "utf-8", f"Sample file {path!r}"))[:3]
    try:
        with executor_errors(what):
            return [r[0] for r in spark.read.text(reader_path(spark, path)).head(3)]
    except CorpusError as e:
        # Spark's text source names the file it failed on ("File 'file:/...'"): named
        # here as the rest of read_uci names it
        err = CorpusError(re.sub(r"^File '[^']*'", lambda _: what, str(e), count=1))
        err.spark_exception = getattr(e, "spark_exception", None)  # type: ignore[attr-defined]
        raise err from None


def _uci_line_frame(spark, path: str, min_partitions: int | None):
    """The lines of a docword file as a DataFrame (column ``value``), in file order
    partition by partition; a shipped sample's lines are read on the driver."""
    if is_sample(path):
        data = read_local_bytes(resolve_sample(path), f"Sample file {path!r}")
        lines = text_lines(decode_text(data, "utf-8", f"Sample file {path!r}"))
        # one partition, in file order: a local relation's projection may be evaluated
        # on the driver (all rows in partition 0) before the rows are sliced, so the
        # header would be skipped in every slice (docs/architecture.md, "Spark Connect path")
        frame = spark.createDataFrame([(line,) for line in lines], "value string").coalesce(1)
    else:
        frame = spark.read.text(reader_path(spark, path))
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
