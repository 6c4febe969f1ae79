"""Crash-safe saves of ``Pipeline`` and ``PipelineModel`` objects that hold sparklda stages.

pyspark's own pipeline writer deletes the target first when asked to
overwrite (``MLWriter._handleOverwrite``; the Spark Connect server's
``handleOverwrite`` does the same) and then writes ``path/metadata`` and
``path/stages/<i>_<uid>`` in place, so a crash during
``pm.write().overwrite().save(path)`` loses the previous pipeline. Its reader
reads exactly those fixed paths, so no layout it reads can be replaced
atomically (docs/architecture.md, "Pipelines").

sparklda therefore saves a pipeline that holds a sparklda stage as a
committed directory (:mod:`sparklda.storage`)::

    path/<version>/metadata, path/<version>/stages/...   pyspark's own layout
    path/commits/<version>                                its commit record, last
    path/metadata, path/stages/0_sparklda_committed/      pointers, written once

and, when :mod:`sparklda.ml` is imported (``import sparklda.ml``,
``from sparklda import LDA``), routes ``Pipeline.write()`` /
``PipelineModel.write()`` of such pipelines and ``Pipeline.read()`` /
``PipelineModel.read()`` of such directories through it: the ordinary calls
``pm.write().overwrite().save(path)`` and ``PipelineModel.load(path)``
then work as before and are crash-safe. Pipelines without a sparklda stage
keep pyspark's writer; every pipeline directory, pyspark's layout included, is
read by :func:`read_layout` (below).
:func:`save_pipeline` and :func:`load_pipeline` are the same operations as
plain functions.

A process that calls ``PipelineModel.load(path)`` without having imported
sparklda reads the pointers: pyspark finds one stage whose class is
:class:`CommittedPipelineStage`, which imports sparklda and loads the
committed pipeline, so the result is a ``PipelineModel`` whose only stage is
the saved ``PipelineModel`` (it transforms the same way).

Paths are literal: a pipeline at ``models [v2]/pipe`` or ``a,b/pipe`` loads.
pyspark's reader hands ``<dir>/metadata`` and each stage's directory to
Spark's readers, which expand ``[ ] { } * ?`` as a Hadoop glob, so this module
reads pyspark's layout itself (:func:`read_layout`: the metadata records with
Hadoop's ``FileSystem``, each stage with its class's reader; a stage that is
not sparklda's or a pipeline gets ``literal_path`` of its directory, since its
reader is Spark's). A process without sparklda must hand pyspark's reader
``literal_path(path)`` itself; the pointer stage resolves that escaped path
back to the directory it names.
"""

from __future__ import annotations

import os
import re

from pyspark.ml.pipeline import (
    Pipeline,
    PipelineModel,
    PipelineModelWriter,
    PipelineSharedReadWrite,
    PipelineWriter,
)
from pyspark.ml.util import DefaultParamsReader, MLReader, MLWriter

from .._version import __version__
from ..errors import ModelFormatError
from ..storage import CommittedDir, SparkFiles, active_session, literal_path

PIPELINE_KIND = "sparklda.Pipeline"
PIPELINE_MODEL_KIND = "sparklda.PipelineModel"
POINTER_STAGE = "sparklda_committed"
_PYSPARK_CLASSES = ("pyspark.ml.pipeline.Pipeline", "pyspark.ml.pipeline.PipelineModel")

_original = {
    "pipeline_write": Pipeline.write,
    "model_write": PipelineModel.write,
}


def has_sparklda_stage(stages) -> bool:
    """Whether a stage (or a stage of a nested pipeline) is a sparklda class."""
    for stage in stages or ():
        if type(stage).__module__.startswith("sparklda."):
            return True
        if isinstance(stage, PipelineModel) and has_sparklda_stage(stage.stages):
            return True
        if isinstance(stage, Pipeline) and has_sparklda_stage(stage.getStages()):
            return True
    return False


def _kind(instance) -> str:
    return PIPELINE_MODEL_KIND if isinstance(instance, PipelineModel) else PIPELINE_KIND


def _is_pipeline_dir(files: SparkFiles, root: str):
    """``is_ours`` for :meth:`CommittedDir.check_target`: a pipeline directory pyspark wrote
    (its ``metadata`` names a Pipeline class), which sparklda may replace."""

    def check(names) -> bool:
        if "metadata" not in names:
            return False
        try:
            meta = files.read_json(f"{root}/metadata")
        except Exception:
            return False
        return meta.get("class") in _PYSPARK_CLASSES

    return check


def _pointer_records(instance, spark) -> tuple[dict, dict]:
    cls = "PipelineModel" if isinstance(instance, PipelineModel) else "Pipeline"
    common = {
        "timestamp": 0,
        "sparkVersion": spark.version,
        "defaultParamMap": {},
        "sparkldaVersion": __version__,
    }
    top = {
        **common,
        "class": f"pyspark.ml.pipeline.{cls}",
        "uid": f"{cls}_{POINTER_STAGE}",
        "paramMap": {"stageUids": [POINTER_STAGE], "language": "Python"},
        "sparkldaCommitted": True,
    }
    stage = {
        **common,
        "class": f"{__name__}.CommittedPipelineStage",
        "uid": POINTER_STAGE,
        "paramMap": {},
    }
    return top, stage


def save_pipeline(instance, path: str, overwrite: bool = False, spark=None) -> None:
    """Save a ``Pipeline`` or ``PipelineModel`` to ``path`` as a committed directory (see
    the module docstring): a crash at any moment leaves the previous pipeline or the new
    one, ``overwrite`` deletes nothing before the new one is committed and refuses a
    directory that is neither a sparklda nor a pyspark model or pipeline."""
    path = os.fspath(path)
    spark = active_session(spark)
    kind = _kind(instance)
    target = CommittedDir(path, kind, spark)
    files = target.files
    top, stage = _pointer_records(instance, spark)
    pointer_stage = f"stages/0_{POINTER_STAGE}"
    with target.write(
        {"class": top["class"], "uid": instance.uid},
        overwrite=overwrite,
        what="pipeline",
        is_ours=_is_pipeline_dir(files, target.root),
        hint=". To overwrite it, use write().overwrite().save(path).",
    ) as staged:
        legacy = staged.previous is None and files.exists(f"{target.root}/metadata")
        if not legacy:
            target.write_pointer(f"{pointer_stage}/metadata", stage)
            target.write_pointer("metadata", top)
        if isinstance(instance, PipelineModel):
            PipelineModelWriter(instance).session(spark).save(staged.path)
        else:
            PipelineWriter(instance).session(spark).save(staged.path)
    if legacy:  # a directory pyspark wrote: its files go once the new version is committed
        files.delete(f"{target.root}/stages")
        files.delete(f"{target.root}/metadata")
        target.write_pointer(f"{pointer_stage}/metadata", stage)
        target.write_pointer("metadata", top)


def committed_pipeline_path(path: str, spark=None) -> str | None:
    """The directory of the newest committed version of the pipeline saved at ``path``
    (either kind), or None when ``path`` is not a committed pipeline."""
    for kind in (PIPELINE_MODEL_KIND, PIPELINE_KIND):
        target = CommittedDir(os.fspath(path), kind, spark)
        latest = target.latest()
        if latest is not None:
            return latest.path(target.root)
    return None


def load_pipeline(path: str, spark=None):
    """Load the ``Pipeline`` or ``PipelineModel`` saved at ``path`` by
    :func:`save_pipeline` (the newest committed version), or a directory pyspark wrote."""
    path = os.fspath(path)
    spark = active_session(spark)
    base = committed_pipeline_path(path, spark)
    return read_layout(path if base is None else base, spark)


def read_layout(path: str, spark, cls=None):
    """The ``Pipeline`` or ``PipelineModel`` in pyspark's layout at ``path``
    (``metadata`` and ``stages/<i>_<uid>``), read as pyspark's reader does but taking
    ``path`` literally (see the module docstring). ``cls`` is the class to build, by
    default the one the metadata names."""
    files = SparkFiles(spark)
    meta = files.read_json(f"{path.rstrip('/')}/metadata")
    try:
        uid, stage_uids = meta["uid"], list(meta["paramMap"]["stageUids"])
    except (KeyError, TypeError):
        raise ModelFormatError(
            f"The pipeline at {path!r} is damaged: its metadata has no 'uid' or no "
            f"'paramMap.stageUids'."
        ) from None
    stages_dir = f"{path.rstrip('/')}/stages"
    stages = [
        _read_stage(PipelineSharedReadWrite.getStagePath(s, i, len(stage_uids), stages_dir), files)
        for i, s in enumerate(stage_uids)
    ]
    if cls is None:
        cls = Pipeline if meta.get("class") == _PYSPARK_CLASSES[0] else PipelineModel
    return cls(stages=stages)._resetUid(uid)


def _read_stage(path: str, files: SparkFiles):
    """One stage of a pipeline, as ``DefaultParamsReader.loadParamsInstance`` reads it:
    sparklda's readers and the pipeline readers (this module's) take ``path`` literally,
    any other reader is Spark's and is given ``literal_path(path)``."""
    meta = files.read_json(f"{path}/metadata")
    name = str(meta.get("class", ""))
    if not DefaultParamsReader.isPythonParamsInstance(meta):
        name = name.replace("org.apache.spark", "pyspark")
    py_type = DefaultParamsReader._DefaultParamsReader__get_class(name)  # type: ignore[attr-defined]
    literal = name.startswith("sparklda.") or issubclass(py_type, (Pipeline, PipelineModel))
    return py_type.load(path if literal else literal_path(path))


class CommittedPipelineWriter(MLWriter):
    """What ``write()`` of a pipeline with a sparklda stage returns: :func:`save_pipeline`,
    honouring ``overwrite()`` and ``session()``."""

    def __init__(self, instance):
        super().__init__()
        self.instance = instance

    def save(self, path: str) -> None:
        if not isinstance(path, str):
            raise TypeError(f"path should be a string, got type {type(path)}")
        save_pipeline(self.instance, path, self.shouldOverwrite, self.sparkSession)

    def saveImpl(self, path: str) -> None:  # pragma: no cover - save() does the work
        save_pipeline(self.instance, path, self.shouldOverwrite, self.sparkSession)


class CommittedPipelineReader(MLReader):
    """What ``read()`` of ``Pipeline``/``PipelineModel`` returns once sparklda is imported:
    the newest version of a committed directory, or pyspark's layout at ``path``, read by
    :func:`read_layout` as a ``cls`` (as pyspark's reader would)."""

    def __init__(self, cls):
        super().__init__()
        self.cls = cls

    def load(self, path: str):
        spark = self.sparkSession
        base = committed_pipeline_path(path, spark)
        if base is not None:
            return read_layout(base, spark)
        return read_layout(path, spark, self.cls)

    @property
    def sparkSession(self):
        if self._sparkSession is None:
            self._sparkSession = active_session()
        return self._sparkSession


class CommittedPipelineStage:
    """The stage pyspark's ``PipelineModel.load`` finds in the pointer of a committed
    pipeline when sparklda was not imported: loads the committed pipeline two levels up.
    pyspark's reader reaches it only through ``literal_path`` of a path with glob
    characters, so an escaped path that names nothing is read as the path it escapes."""

    @classmethod
    def load(cls, path: str):
        root = os.fspath(path).rstrip("/").rsplit("/", 2)[0]
        if committed_pipeline_path(root) is None and _unescaped(root) != root:
            root = _unescaped(root)
        return load_pipeline(root)


def _unescaped(path: str) -> str:
    """The path :func:`~sparklda.storage.literal_path` escaped to ``path``."""
    return re.sub(r"\\(.)", r"\1", path.replace("{\\,}", ","))


def _model_write(self):
    if has_sparklda_stage(self.stages):
        return CommittedPipelineWriter(self)
    return _original["model_write"](self)


def _pipeline_write(self):
    if has_sparklda_stage(self.getStages()):
        return CommittedPipelineWriter(self)
    return _original["pipeline_write"](self)


def _model_read(cls):
    return CommittedPipelineReader(cls)


def _pipeline_read(cls):
    return CommittedPipelineReader(cls)


def install() -> None:
    """Route pyspark's pipeline ``write()``/``read()`` through this module (idempotent)."""
    if getattr(PipelineModel, "_sparklda_committed", False):
        return
    _model_write.__doc__ = _original["model_write"].__doc__
    _pipeline_write.__doc__ = _original["pipeline_write"].__doc__
    PipelineModel.write = _model_write  # type: ignore[method-assign]
    Pipeline.write = _pipeline_write  # type: ignore[method-assign]
    PipelineModel.read = classmethod(_model_read)  # type: ignore[method-assign,assignment]
    Pipeline.read = classmethod(_pipeline_read)  # type: ignore[method-assign,assignment]
    PipelineModel._sparklda_committed = True  # type: ignore[attr-defined]
