"""Input paths and encodings.

* :func:`is_sample` and :func:`resolve_sample` recognise ``sample:kos/docword.txt.gz``
  and turn it into the file shipped in the package's data;
* :func:`check_encoding` checks the text encoding of input files.
"""

from __future__ import annotations

import codecs
from importlib.resources import files

from .errors import ParamError

__all__ = [
    "SAMPLE_PREFIX",
    "SPARK_CHARSETS",
    "check_encoding",
    "is_sample",
    "resolve_sample",
]

#: Prefix of the paths of the sample corpus shipped in the package (``sparklda/data``).
SAMPLE_PREFIX = "sample:"


def is_sample(path) -> bool:
    """Whether ``path`` names a file of the shipped sample corpus (``sample:...``)."""
    return isinstance(path, str) and path.startswith(SAMPLE_PREFIX)


def resolve_sample(path: str | None) -> str | None:
    """``sample:kos/docword.txt.gz`` -> the file of that name in the package's data;
    any other path (or None) is returned unchanged."""
    if path and path.startswith(SAMPLE_PREFIX):
        return str(files("sparklda").joinpath("data", path[len(SAMPLE_PREFIX) :]))
    return path


#: Encodings Spark's JSON reader decodes (Python's name -> Java's name).
SPARK_CHARSETS = {
    "utf-8": "UTF-8",
    "iso8859-1": "ISO-8859-1",
    "ascii": "US-ASCII",
    "utf-16": "UTF-16",
    "utf-16-be": "UTF-16BE",
    "utf-16-le": "UTF-16LE",
    "utf-32": "UTF-32",
}


def check_encoding(
    encoding: str | None, fmt: str = "text", owner: str = "load_text_dataframe", param="encoding"
) -> str:
    """Python's name of the text ``encoding`` of input files of format ``fmt`` (None: UTF-8).

    Any encoding Python knows suits a vocabulary file (``fmt="uci"``); text
    files (``"text"``) are split into lines on the byte ``\\n``, so their
    encoding must write ASCII as ASCII (UTF-8, Latin-1, cp1252, ...; not
    UTF-16); JSON lines files take the encodings Spark's JSON reader decodes;
    Parquet strings are always UTF-8. Raises :class:`ParamError` naming
    ``param`` and ``owner``.
    """
    if encoding is None:
        return "utf-8"
    start = f"The '{param}' parameter of {owner}"
    try:
        info = codecs.lookup(encoding)
    except (LookupError, TypeError):
        info = None
    if info is None or not getattr(info, "_is_text_encoding", True):
        raise ParamError(
            f"{start} must name a text encoding, such as 'utf-8' or 'latin-1'. "
            f"Got {encoding!r} instead."
        )
    name = info.name
    if fmt == "text" and "\n a".encode(name) != b"\n a":
        raise ParamError(
            f"{start} must be an encoding that writes ASCII as ASCII (utf-8, latin-1, "
            f"cp1252, ...) for format 'text', whose lines end at the byte \\n. Got "
            f"{encoding!r} instead; convert the files to UTF-8 or use JSON lines."
        )
    if fmt == "json" and name not in SPARK_CHARSETS:
        raise ParamError(
            f"{start} must be one of the encodings Spark's JSON reader decodes "
            f"{sorted(SPARK_CHARSETS.values())} for format 'json'. Got {encoding!r} instead."
        )
    if fmt == "parquet" and name != "utf-8":
        raise ParamError(
            f"{start} does not apply to format 'parquet' (Parquet strings are UTF-8). "
            f"Got {encoding!r} instead."
        )
    return name
