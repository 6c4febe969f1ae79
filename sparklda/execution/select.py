"""The one place that tells a Spark Connect session from a classic one
(:func:`sparklda.storage.is_connect`) and picks the :class:`~sparklda.execution.base.Backend`
an entry point runs on."""

from __future__ import annotations

from ..errors import ParamError
from ..storage import is_connect
from .base import Backend
from .classic import ClassicBackend
from .frame import FrameBackend

__all__ = ["backend_for", "backend_of", "context_parallelism"]


def backend_for(spark, execution: str = "auto", what: str | None = None) -> Backend:
    """The backend of session ``spark`` under ``execution``: "dataframe" always the
    DataFrame backend; "classic" the classic one, which a Spark Connect session (no
    RDDs) refuses (``what`` names the input read in it); "auto" the DataFrame backend
    under Spark Connect, else the classic one."""
    connect = spark is not None and is_connect(spark)
    if execution == "dataframe":
        return FrameBackend(spark, parallelism=None if connect else context_parallelism)
    if execution == "classic" and connect:
        read = f"{what} was read in" if what else "this is"
        raise ParamError(
            f"The 'execution' parameter is 'classic' but {read} a Spark Connect session, "
            f"which has no RDDs; use 'auto' or 'dataframe'."
        )
    return FrameBackend(spark) if connect else ClassicBackend()


def context_parallelism(spark) -> int:
    """The default parallelism of a session with a SparkContext."""
    return int(spark.sparkContext.defaultParallelism)


def backend_of(data) -> Backend:
    """The backend whose form ``data`` has: a built corpus (its layout's kind), a
    DataFrame (the DataFrame backend) or an RDD (the classic backend)."""
    kind = getattr(data, "kind", None)
    if kind is not None:
        return FrameBackend() if kind == "dataframe" else ClassicBackend()
    if hasattr(data, "sparkSession"):
        return FrameBackend(data.sparkSession)
    return ClassicBackend()
