"""The library's error types (no imports: every layer may raise them).

Every error a user can cause is a :class:`SparkLDAError`, a ``ValueError``,
whose message names the problem and the parameter, column, file or path.
"""

from __future__ import annotations


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
