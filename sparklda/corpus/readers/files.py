"""Files read on the driver or through Spark: gzip, text decoding, the vocabulary
file, a shipped sample's lines."""

from __future__ import annotations

import gzip
import zlib

from ...errors import CorpusError, executor_errors
from ...io import check_encoding, is_sample, resolve_sample
from ...storage import reader_path

__all__ = ["decode_text", "gunzip", "read_local_bytes", "read_vocab", "sample_lines", "text_lines"]


def read_local_bytes(path: str, what: str) -> bytes:
    """The bytes of a file on the driver's disk, gunzipped when its name ends in ``.gz``."""
    with open(path, "rb") as f:
        data = f.read()
    return gunzip(data, what) if path.endswith(".gz") else data


def gunzip(data: bytes, what: str) -> bytes:
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


def text_lines(text: str) -> list[str]:
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
        data = read_local_bytes(resolve_sample(name), what)
    else:
        with executor_errors(what):
            rows = (
                spark.read.format("binaryFile")
                .load(reader_path(spark, name))
                .select("path", "content")
                .collect()
            )
        data = b"".join(bytes(r["content"]) for r in sorted(rows, key=lambda r: r["path"]))
        if name.endswith(".gz"):
            data = gunzip(data, what)
    return _vocab_terms(text_lines(decode_text(data, encoding, what)), what)


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


def sample_lines(sc, path: str, min_partitions: int | None):
    """The lines of a shipped sample file, read on the driver and distributed, so
    executors that do not share the driver's disk (or package) read it too."""
    data = read_local_bytes(resolve_sample(path), f"Sample file {path!r}")
    lines = text_lines(decode_text(data, "utf-8", f"Sample file {path!r}"))
    return sc.parallelize(lines, max(sc.defaultParallelism, min_partitions or 1))
