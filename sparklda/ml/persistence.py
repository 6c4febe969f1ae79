"""Saving and loading :class:`~sparklda.ml.LDA` and :class:`~sparklda.ml.LDAModel`, and
finding the :class:`~sparklda.model.TopicModel` in a saved directory.

Layout: ``path`` is a committed directory (:mod:`sparklda.storage`): each
save writes a new version holding ``params`` (the Params record in the form
of pyspark's ``DefaultParamsWriter``) and, for an LDAModel, ``topicModel``
(the :class:`TopicModel` payload), for an LDA whose ``initialModel`` is a
model object, ``initialModel``; its commit record is written last, so a
crash never leaves ``path`` unloadable and ``overwrite()`` never deletes the
previous model before the new one is committed. ``path/metadata`` is the
pointer pyspark's ``Pipeline``/``PipelineModel`` readers use to find the
class of a stage; it is written once (it only names the class). The
format-1 layout (``metadata`` with the Params and ``topicModel/``) is read
too.

The classes take the estimator and model classes as arguments instead of
importing them, so this module sits below :mod:`sparklda.ml.model` and
:mod:`sparklda.ml.estimator`.
"""

from __future__ import annotations

import json
import os

from pyspark.ml.base import Model
from pyspark.ml.util import DefaultParamsReader, DefaultParamsWriter, MLReader, MLWriter

from .._version import __version__
from ..errors import ModelFormatError, ModelPathError
from ..model import TopicModel
from ..storage import CommittedDir, SparkFiles, literal_path
from .pipeline import committed_pipeline_path

MODEL_KIND = "sparklda.LDAModel"
ESTIMATOR_KIND = "sparklda.LDA"
#: entries of the format-1 layout (removed by the next save)
LEGACY = ("topicModel", "initialModel")


def load_topic_model(path: str, spark=None) -> TopicModel:
    """The :class:`TopicModel` saved at ``path``: a TopicModel directory (the train job's
    output), an :class:`~sparklda.ml.LDAModel` directory, or a ``PipelineModel`` with an
    LDAModel stage (the last such stage)."""
    path = os.fspath(path)
    if TopicModel.exists_at(path, spark):
        return TopicModel.load(path, spark)
    found = _lda_model_payload(path, spark)
    if found is not None:
        return TopicModel.load(found, spark)
    files = SparkFiles(spark)
    stages = f"{files.qualify(path).rstrip('/')}/stages"
    committed = committed_pipeline_path(path, spark)
    if committed is not None:  # a pipeline saved by sparklda.ml.pipeline
        stages = f"{committed}/stages"
    for name in reversed(files.children(stages)):
        found = _lda_model_payload(f"{stages}/{name}", spark)
        if found is not None:
            return TopicModel.load(found, spark)
    raise FileNotFoundError(
        f"No sparklda model at {path!r}: expected a TopicModel, an "
        f"LDAModel or a PipelineModel with an LDAModel stage."
    )


def _lda_model_payload(path: str, spark=None) -> str | None:
    """Where the TopicModel of the LDAModel saved at ``path`` is, or None."""
    target = CommittedDir(path, MODEL_KIND, spark)
    latest = target.latest()
    if latest is not None:
        return f"{latest.path(target.root)}/topicModel"
    if TopicModel.exists_at(f"{target.root}/topicModel", spark):
        return f"{target.root}/topicModel"
    return None


def _json_params(instance, skip=("vocabulary", "initialModel")) -> dict:
    params = {p.name: v for p, v in instance._paramMap.items() if p.name not in skip}
    init = instance._paramMap.get(instance.initialModel)
    if isinstance(init, str):
        params["initialModel"] = init
    return params


def _check_class(metadata: dict, cls, path: str) -> None:
    expected = f"{cls.__module__}.{cls.__name__}"
    if (
        not isinstance(metadata, dict)
        or not isinstance(metadata.get("uid"), str)
        or not isinstance(metadata.get("paramMap", {}), dict)
        or not isinstance(metadata.get("defaultParamMap", {}), dict)
    ):
        raise ModelFormatError(
            f"The {cls.__name__} at {path!r} is damaged: its Params record is not a JSON "
            f"object with 'class', 'uid' and 'paramMap'."
        )
    if metadata.get("class") != expected:
        raise ModelPathError(f"{path!r} holds a {metadata.get('class')}, not a {expected}.")


def _ours(files: SparkFiles, root: str):
    """``is_ours`` for :meth:`CommittedDir.check_target`: a ``metadata`` pointer that names
    a sparklda class."""

    def check(names) -> bool:
        if "metadata" not in names:
            return False
        try:
            meta = files.read_json(f"{root}/metadata")
        except Exception:
            return False
        return str(meta.get("class", "")).startswith("sparklda.")

    return check


def _save_stage(writer: MLWriter, path: str, kind: str, record: dict, payload) -> None:
    """The committed save shared by both writers: check the target, write the pointer
    (once), the version's ``params`` record and ``payload(base)``, then commit."""
    spark = writer.sparkSession
    target = CommittedDir(path, kind, spark)
    files = target.files
    with target.write(
        {"class": record["class"]},
        overwrite=writer.shouldOverwrite,
        what="model" if kind == MODEL_KIND else "estimator",
        legacy=LEGACY,
        is_ours=_ours(files, target.root),
        hint=". To overwrite it, use write().overwrite().save(path).",
        extra=LEGACY,
    ) as staged:
        files.write_json(f"{staged.path}/params", record)
        payload(staged.path)
        target.write_pointer("metadata", record)


def _load_stage(reader: MLReader, path: str, kind: str, cls) -> tuple[dict, str | None]:
    """(the Params record, the committed version's directory or None for format 1)."""
    spark = reader.sparkSession
    target = CommittedDir(path, kind, spark)
    latest = target.latest()
    if latest is not None:
        base = latest.path(target.root)
        record = target.files.read_json(f"{base}/params")
    else:
        if not target.files.exists(f"{target.root}/metadata"):
            raise FileNotFoundError(f"No sparklda {cls.__name__} at {path!r}.")
        record = DefaultParamsReader.loadMetadata(literal_path(path), spark)
        base = None
    _check_class(record, cls, path)
    return record, base


class _CommittedWriter(MLWriter):
    """An MLWriter whose ``overwrite()`` never deletes before the new save is committed
    (pyspark's own deletes ``path`` first)."""

    def __init__(self, instance):
        super().__init__()
        self.instance = instance

    def save(self, path: str) -> None:
        if not isinstance(path, str):
            raise TypeError(f"path should be a string, got type {type(path)}")
        self.saveImpl(path)

    def _record(self, extra: dict, skip=("vocabulary", "initialModel")) -> dict:
        text = DefaultParamsWriter._get_metadata_to_save(
            self.instance,
            self.sparkSession,
            extraMetadata={"sparkldaVersion": __version__, **extra},
            paramMap=_json_params(self.instance, skip=skip),
        )
        return json.loads(text)


class LDAModelWriter(_CommittedWriter):
    """Writes an LDAModel: its Params record and its TopicModel, committed together."""

    def saveImpl(self, path: str) -> None:
        tm = self.instance.topicModel
        tm.check_finite()
        spark = self.sparkSession
        _save_stage(
            self,
            path,
            MODEL_KIND,
            self._record({}),
            lambda base: tm.write_payload(f"{base}/topicModel", spark),
        )


class LDAModelReader(MLReader):
    """Reads an LDAModel of class ``cls`` written by :class:`LDAModelWriter`."""

    def __init__(self, cls):
        super().__init__()
        self.cls = cls

    def load(self, path: str):
        spark = self.sparkSession
        record, base = _load_stage(self, path, MODEL_KIND, self.cls)
        root = CommittedDir(path, MODEL_KIND, spark).root
        tm = TopicModel.load(f"{base or root}/topicModel", spark)
        model = self.cls(tm)
        model._resetUid(record["uid"])
        DefaultParamsReader.getAndSetParams(model, record, skipParams=["vocabulary"])
        model._sync_vocabulary()
        return model


class LDAWriter(_CommittedWriter):
    """Writes an LDA's Params and, if ``initialModel`` is a model object, that model in
    the same version (``initialModel``)."""

    def saveImpl(self, path: str) -> None:
        spark = self.sparkSession
        init = self.instance._paramMap.get(self.instance.initialModel)
        kind = None
        if isinstance(init, Model):  # an LDAModel (the only Model initialModel accepts)
            tm, kind = init.topicModel, "LDAModel"
            sub_record = LDAModelWriter(init).session(spark)._record({})
        elif isinstance(init, TopicModel):
            tm, kind, sub_record = init, "TopicModel", None

        def payload(base):
            if kind is None:
                return
            if sub_record is not None:
                SparkFiles(spark).write_json(f"{base}/initialModelParams", sub_record)
            tm.write_payload(f"{base}/initialModel", spark)

        record = self._record({"initialModelSaved": kind}, skip=("initialModel",))
        _save_stage(self, path, ESTIMATOR_KIND, record, payload)


class LDAReader(MLReader):
    """Reads an LDA of class ``cls``; a saved initial model is read with ``model_cls``."""

    def __init__(self, cls, model_cls):
        super().__init__()
        self.cls = cls
        self.model_cls = model_cls

    def load(self, path: str):
        spark = self.sparkSession
        record, base = _load_stage(self, path, ESTIMATOR_KIND, self.cls)
        est = self.cls()
        est._resetUid(record["uid"])
        DefaultParamsReader.getAndSetParams(est, record)
        kind = record.get("initialModelSaved")
        if kind is not None:
            root = CommittedDir(path, ESTIMATOR_KIND, spark).root
            sub = f"{base or root}/initialModel"
            if kind == "LDAModel" and base is None:  # format 1: a whole LDAModel directory
                est._set(initialModel=self.model_cls.read().session(spark).load(sub))
            elif kind == "LDAModel":
                sub_record = SparkFiles(spark).read_json(f"{base}/initialModelParams")
                model = self.model_cls(TopicModel.load(sub, spark))
                model._resetUid(sub_record["uid"])
                DefaultParamsReader.getAndSetParams(model, sub_record, skipParams=["vocabulary"])
                model._sync_vocabulary()
                est._set(initialModel=model)
            else:
                est._set(initialModel=TopicModel.load(sub, spark))
        return est
