"""Documents from raw text (:func:`from_text`), counted with Spark ML's own feature
stages, and the raw text files' reader (:func:`load_text_dataframe`)."""

from __future__ import annotations

import re

from ...errors import CorpusError, executor_errors
from ...io import SPARK_CHARSETS, check_encoding
from ...params import Constraint, check_param
from ...storage import reader_path
from ..source import DocSource
from .vectors import check_column, from_vectors

__all__ = ["from_text", "load_text_dataframe"]


#: Parameters of the input functions that are not training parameters.
_TEXT_FORMAT = Constraint("format", str, options=("json", "parquet", "text"))
_VOCAB_SIZE = Constraint("vocab_size", int, 1)


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
        return spark.read.parquet(reader_path(spark, path))
    return _read_text_lines(spark, path, text_col, encoding)


def _read_json_lines(spark, path: str, encoding: str):
    reader = spark.read.option("mode", "FAILFAST")
    if encoding != "utf-8":
        reader = reader.option("encoding", SPARK_CHARSETS[encoding]).option("lineSep", "\n")
    what = f"JSON lines file(s) {path!r}"
    try:
        with executor_errors(what):
            return reader.json(reader_path(spark, path))
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

    raw = spark.read.text(reader_path(spark, path))
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

    check_column(df, text_col, "textCol", StringType, "a string column")
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
