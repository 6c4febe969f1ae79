"""The library's error types (no imports of sparklda or pyspark: every layer may raise them).

Every error a user can cause is a :class:`SparkLDAError`, a ``ValueError``,
whose message names the problem and the parameter, column, file or path.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager


class SparkLDAError(ValueError):
    """Base class of sparklda's errors about input, parameters and paths."""


class ParamError(SparkLDAError):
    """A bad parameter value: the message names the parameter, the accepted range and the value."""


class CorpusError(SparkLDAError):
    """Bad input documents: the message names the problem and the column, file or parameter."""


class ModelPathError(SparkLDAError):
    """A model, checkpoint or output path that cannot be used as asked."""


class ModelExistsError(ModelPathError, FileExistsError):
    """The output exists and overwriting was not asked for."""


class ConcurrentWriteError(ModelExistsError):
    """Another writer committed the same model, checkpoint or pipeline path at the same time:
    this save was not committed (and its files were removed); the path holds the other's."""


class ModelFormatError(ModelPathError):
    """A saved model, checkpoint or commit record that is damaged or not sparklda's: the
    message names the path, the file and what is wrong."""


# --------------------------------------------------------------------------
# Errors raised on Spark's executors

#: ``sparklda.errors.CorpusError: message`` in a Python traceback (or a Spark SQL
#: ``raise_error`` message) carried back to the driver inside Spark's exception text.
_RAISED = re.compile(r"(?:\bsparklda\.errors\.|(?<![\w.]))(\w+Error): ")
#: the end of a message inside Spark's exception text: a blank line, a Java stack frame,
#: a chained cause, or the SQL state Spark appends to a ``raise_error`` message
_MESSAGE_END = re.compile(
    r"\n\s*\n|\n\s+at |\n\s*\.\.\. \d+ more|\nCaused by: |\nJVM stacktrace:|\s+SQLSTATE: \w+"
)
#: a Java exception and its message, as Spark prints a chained cause
_CAUSE = re.compile(r"Caused by: ((?:java\.io|java\.util\.zip)\.\w+): ([^\n]*)")
#: the file a Spark SQL reader names when reading it failed
_READ_FILE = re.compile(r"Encountered error while reading file (\S+?)\.?\s")
#: an input path that does not exist, as Spark SQL's readers ([PATH_NOT_FOUND]) and Hadoop's
#: input formats (the RDD readers: InvalidInputException) say it
_MISSING_PATH = re.compile(
    r"\[PATH_NOT_FOUND\] Path does not exist: (\S+?)\.?(?:\s|$)"
    r"|Input path does not exist: (\S+?)\.?(?:\s|$)"
)


def _error_classes() -> dict[str, type[SparkLDAError]]:
    found: dict[str, type[SparkLDAError]] = {SparkLDAError.__name__: SparkLDAError}
    todo: list[type[SparkLDAError]] = [SparkLDAError]
    while todo:
        for sub in todo.pop().__subclasses__():
            if sub.__module__ == __name__ and sub.__name__ not in found:
                found[sub.__name__] = sub
                todo.append(sub)
    return found


def _is_spark_exception(exc: BaseException) -> bool:
    module = type(exc).__module__ or ""
    return module.startswith(("pyspark.", "py4j."))


def _raised_error(text: str) -> SparkLDAError | None:
    """The first of sparklda's errors named in ``text`` (a task's Python traceback), rebuilt
    with its message (without the Java stack around it)."""
    classes = _error_classes()
    for m in _RAISED.finditer(text):
        cls = classes.get(m.group(1))
        if cls is None:
            continue
        rest = text[m.end() :]
        end = _MESSAGE_END.search(rest)
        message = (rest[: end.start()] if end else rest).strip()
        try:
            return cls(message)
        except TypeError:  # a subclass with another signature: the closest plain class
            return CorpusError(message) if issubclass(cls, CorpusError) else SparkLDAError(message)
    return None


def _decompression_error(text: str, what: str | None) -> CorpusError | None:
    """A :class:`CorpusError` for a compressed input file Hadoop could not decompress (cut
    short or corrupt), naming the file (from Spark's message, else ``what``)."""
    for m in _CAUSE.finditer(text):
        frames = text[m.end() : m.end() + 600]
        if "org.apache.hadoop.io.compress." not in frames and "java.util.zip." not in frames:
            continue
        named = _READ_FILE.search(text)
        name = f"File {named.group(1)!r}" if named else (what or "An input file")
        gzip = ".gz" in name or "Gzip" in frames or "zlib" in frames or "not a gzip" in text
        kind = "gzip" if gzip else "compressed"
        return CorpusError(
            f"{name} is not a valid, complete {kind} file ({m.group(1)}: {m.group(2)}): "
            f"it is cut short (an interrupted copy or download?) or corrupt."
        )
    return None


def _missing_path_error(text: str, what: str | None) -> CorpusError | None:
    """A :class:`CorpusError` for an input path Spark found missing, naming it."""
    m = _MISSING_PATH.search(text)
    if m is None:
        return None
    path = m.group(1) or m.group(2)
    reading = f" (reading {what})" if what else ""
    return CorpusError(f"Input path {path!r} does not exist{reading}.")


def translate_spark_error(exc: BaseException, what: str | None = None) -> SparkLDAError | None:
    """sparklda's error that ``exc``, an exception from a Spark action, carries, or None.

    * a :class:`SparkLDAError` raised on an executor (Spark wraps it as a
      ``PythonException`` or ``Py4JJavaError`` whose text holds the Python
      traceback): the same class with the same message;
    * a compressed input file Hadoop could not read to the end: a
      :class:`CorpusError` naming the file (``what`` describes the input when
      Spark's message names no file);
    * an input path that does not exist (Spark SQL's ``PATH_NOT_FOUND``, Hadoop's
      ``InvalidInputException``): a :class:`CorpusError` naming the path.
    """
    if isinstance(exc, SparkLDAError) or not _is_spark_exception(exc):
        return None
    text = str(exc)
    return (
        _raised_error(text) or _decompression_error(text, what) or _missing_path_error(text, what)
    )


@contextmanager
def executor_errors(what: str | None = None) -> Iterator[None]:
    """Re-raise errors of the Spark actions run inside as sparklda's own errors.

    A :class:`SparkLDAError` raised by a function running on an executor (a
    document check, for example) reaches the driver wrapped in pyspark's
    ``PythonException`` or py4j's ``Py4JJavaError`` with the Java stack
    around it; inside this block it is raised again as its own class with its
    own message. A gzip (or other compressed) input file that ends early or is
    corrupt becomes a :class:`CorpusError` naming the file (``what``
    describes the input for messages that name none). Other exceptions pass
    unchanged.

    ``DataFrame`` transformations are lazy: their errors surface at the action
    (``collect``, ``write``, ...), so wrap the action::

        with executor_errors():
            model.transform(df).write.parquet(path)
    """
    try:
        yield
    except Exception as exc:
        err = translate_spark_error(exc, what)
        if err is None:
            raise
        err.spark_exception = exc  # type: ignore[attr-defined]  # the original, for debugging
        raise err from None


class MissingExtraError(SparkLDAError, ImportError):
    """An optional package (an extra such as ``sparklda[mlflow]``) that a setting or call needs
    is not installed: the message names the setting and the ``pip install`` that brings it."""
