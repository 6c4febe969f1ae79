"""Scored output written beside its path and put in place when complete (the infer job's).

docs/architecture.md, "Scored output".
"""

from __future__ import annotations

import logging
import uuid

from ..errors import ModelExistsError, ModelPathError
from .files import SparkFiles, literal_path

log = logging.getLogger("sparklda.storage")

#: Staging directory of :func:`write_output`: a hidden sibling of the output path.
STAGING_SUFFIX = ".sparklda-staging"


def staging_path(out: str) -> str:
    """Where :func:`write_output` stages the new output of ``out``: ``.<name>.sparklda-staging``
    beside it (hidden: Spark's readers skip names starting with a dot)."""
    out = str(out).rstrip("/")
    parent, _, name = out.rpartition("/")
    return (
        f"{parent}/.{name}{STAGING_SUFFIX}"
        if parent or out.startswith("/")
        else (f".{name}{STAGING_SUFFIX}")
    )


def write_output(spark, out: str, write, overwrite: bool, fmt: str = "parquet") -> None:
    """Write a dataset to ``out`` so that a crash never loses the previous one.

    ``write(path)`` writes the new dataset (with Spark's writer, in format ``fmt``) to
    a staging directory beside ``out`` (:func:`staging_path`); only then is ``out``
    replaced. In a classic session by two renames through Hadoop's ``FileSystem``
    (``out`` to ``staging/old``, ``staging/new-…`` to ``out``), then the staging
    directory is deleted. Under Spark Connect, which cannot rename, ``out`` is
    deleted and the staged dataset copied to it with Spark's writer; Spark writes
    ``out/_SUCCESS`` last, so readers should take ``out`` as complete only when it
    holds ``_SUCCESS`` (during the copy the complete new dataset is in the staging
    directory). The next call for the same ``out`` first repairs what a crash left:
    a classic crash between the two renames (``out`` missing, ``staging/old``
    present) gets the old dataset renamed back; then the staging directory is
    removed. With ``overwrite``, an existing ``out`` holding anything but Spark's own
    output files (``part-*``, ``_*``, ``.*``) is refused, not replaced.
    docs/architecture.md, "Scored output".
    """
    files = SparkFiles(spark)
    out = files.qualify(str(out)).rstrip("/")
    staging = staging_path(out)
    recover_output(spark, out)
    if files.exists(out):
        if not overwrite:
            raise ModelExistsError(
                f"The output path {out!r} already exists; set overwrite to replace it."
            )
        foreign = [n for n in files.children(out) if not n.startswith(("part-", "_", "."))]
        if foreign:
            raise ModelPathError(
                f"{out!r} exists and is not a dataset Spark wrote (it holds "
                f"{sorted(foreign)[:5]}); refusing to replace it. Choose another path or "
                f"remove it yourself."
            )
    new = f"{staging}/new-{uuid.uuid4().hex[:8]}"
    write(new)
    if files.connect:
        if files.exists(out) and not files.delete(out):
            raise ModelPathError(
                f"Cannot replace {out!r}: the Spark Connect server cannot delete it. The "
                f"new output is complete in {new!r}."
            )
        spark.read.format(fmt).load(literal_path(new)).write.mode("error").format(fmt).save(out)
    else:
        if files.exists(out):
            files.rename(out, f"{staging}/old")
        files.rename(new, out)
    files.delete(staging)


def recover_output(spark, out: str) -> None:
    """Repair what a crashed :func:`write_output` to ``out`` left (see there)."""
    files = SparkFiles(spark)
    out = files.qualify(str(out)).rstrip("/")
    staging = staging_path(out)
    if not files.exists(staging):
        return
    old = f"{staging}/old"
    if not files.connect and not files.exists(out) and files.exists(old):
        log.warning("a crashed write left %s missing; restoring the previous output", out)
        files.rename(old, out)
    files.delete(staging)
