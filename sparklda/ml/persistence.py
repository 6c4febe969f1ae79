"""Saving and loading :class:`~sparklda.ml.LDA` and :class:`~sparklda.ml.LDAModel`, and
finding the :class:`~sparklda.model.TopicModel` in a saved directory.

Layout: ``path/metadata`` holds the Params as pyspark's ``DefaultParamsWriter``
writes them (so both classes work as stages of a saved ``Pipeline`` or
``PipelineModel``); an LDAModel adds ``path/topicModel``
(:meth:`TopicModel.save`), an LDA whose ``initialModel`` is a model object
adds ``path/initialModel``. Paths are resolved the way Spark resolves them
(:func:`sparklda.io.resolve_path`), so the Param metadata and the topics land in
one directory.

The classes take the estimator and model classes as arguments instead of
importing them, so this module sits below :mod:`sparklda.ml.model` and
:mod:`sparklda.ml.estimator`.
"""

from __future__ import annotations

import os
import posixpath

from pyspark.ml.base import Model
from pyspark.ml.util import DefaultParamsReader, DefaultParamsWriter, MLReader, MLWriter

from .._version import __version__
from ..io import exists, filesystem, path_exists, resolve_path
from ..model import TopicModel


def load_topic_model(path: str, spark=None) -> TopicModel:
    """The :class:`TopicModel` saved at ``path``: a TopicModel directory (the train job's
    output), an :class:`~sparklda.ml.LDAModel` directory, or a ``PipelineModel`` with an
    LDAModel stage (the last such stage). ``path`` is looked up as Spark resolves it (its
    default file system) and, failing that, as :meth:`TopicModel.save` took it (a local path
    or a URI)."""
    from pyarrow import fs

    candidates = [resolve_path(path, spark).rstrip("/")]
    if os.fspath(path).rstrip("/") not in candidates:
        candidates.append(os.fspath(path).rstrip("/"))
    for p in candidates:
        if exists(f"{p}/metadata.json"):
            return TopicModel.load(p)
        if exists(f"{p}/topicModel/metadata.json"):
            return TopicModel.load(f"{p}/topicModel")
        if exists(f"{p}/stages"):
            fsys, stages = filesystem(f"{p}/stages")
            names = sorted(posixpath.basename(i.path)
                           for i in fsys.get_file_info(fs.FileSelector(stages))
                           if i.type == fs.FileType.Directory)
            found = [n for n in names if exists(f"{p}/stages/{n}/topicModel/metadata.json")]
            if found:
                return TopicModel.load(f"{p}/stages/{found[-1]}/topicModel")
    raise FileNotFoundError(f"No sparklda model at {path!r}: expected a TopicModel directory "
                            f"(metadata.json), an LDAModel directory (topicModel/) or a "
                            f"PipelineModel directory with an LDAModel stage.")


def _refuse_existing(writer: MLWriter, path: str) -> None:
    if not writer.shouldOverwrite and path_exists(path, writer.sparkSession):
        raise FileExistsError(f"Path {path!r} already exists. To overwrite it, use "
                              f"write().overwrite().save(path).")


def _json_params(instance, skip=("vocabulary", "initialModel")) -> dict:
    params = {p.name: v for p, v in instance._paramMap.items() if p.name not in skip}
    init = instance._paramMap.get(instance.initialModel)
    if isinstance(init, str):
        params["initialModel"] = init
    return params


def _check_class(metadata: dict, cls, path: str) -> None:
    expected = f"{cls.__module__}.{cls.__name__}"
    if metadata.get("class") != expected:
        raise ValueError(f"{path!r} holds a {metadata.get('class')}, not a {expected}.")


class LDAModelWriter(MLWriter):
    """Writes ``path/metadata`` (Params) and ``path/topicModel`` of an LDAModel."""

    def __init__(self, instance):
        super().__init__()
        self.instance = instance

    def saveImpl(self, path: str) -> None:
        _refuse_existing(self, path)
        spark = self.sparkSession
        tm = self.instance.topicModel
        DefaultParamsWriter.saveMetadata(self.instance, path, spark,
                                         extraMetadata={"sparkldaVersion": __version__},
                                         paramMap=_json_params(self.instance))
        tm.save(resolve_path(posixpath.join(path, "topicModel"), spark), overwrite=True)


class LDAModelReader(MLReader):
    """Reads an LDAModel of class ``cls`` written by :class:`LDAModelWriter`."""

    def __init__(self, cls):
        super().__init__()
        self.cls = cls

    def load(self, path: str):
        spark = self.sparkSession
        metadata = DefaultParamsReader.loadMetadata(path, spark)
        _check_class(metadata, self.cls, path)
        tm = TopicModel.load(resolve_path(posixpath.join(path, "topicModel"), spark))
        model = self.cls(tm)
        model._resetUid(metadata["uid"])
        DefaultParamsReader.getAndSetParams(model, metadata, skipParams=["vocabulary"])
        model._sync_vocabulary()
        return model


class LDAWriter(MLWriter):
    """Writes an LDA's Params and, if ``initialModel`` is a model object, that model in
    ``path/initialModel``."""

    def __init__(self, instance):
        super().__init__()
        self.instance = instance

    def saveImpl(self, path: str) -> None:
        _refuse_existing(self, path)
        spark = self.sparkSession
        init = self.instance._paramMap.get(self.instance.initialModel)
        kind = None
        if isinstance(init, Model):  # an LDAModel (the only Model initialModel accepts)
            init.write().session(spark).save(posixpath.join(path, "initialModel"))
            kind = "LDAModel"
        elif isinstance(init, TopicModel):
            init.save(resolve_path(posixpath.join(path, "initialModel"), spark), overwrite=True)
            kind = "TopicModel"
        DefaultParamsWriter.saveMetadata(
            self.instance, path, spark,
            extraMetadata={"sparkldaVersion": __version__, "initialModelSaved": kind},
            paramMap=_json_params(self.instance, skip=("initialModel",)))


class LDAReader(MLReader):
    """Reads an LDA of class ``cls``; a saved initial model is read with ``model_cls``."""

    def __init__(self, cls, model_cls):
        super().__init__()
        self.cls = cls
        self.model_cls = model_cls

    def load(self, path: str):
        spark = self.sparkSession
        metadata = DefaultParamsReader.loadMetadata(path, spark)
        _check_class(metadata, self.cls, path)
        est = self.cls()
        est._resetUid(metadata["uid"])
        DefaultParamsReader.getAndSetParams(est, metadata)
        kind = metadata.get("initialModelSaved")
        sub = posixpath.join(path, "initialModel")
        if kind == "LDAModel":
            est._set(initialModel=self.model_cls.read().session(spark).load(sub))
        elif kind == "TopicModel":
            est._set(initialModel=TopicModel.load(resolve_path(sub, spark)))
        return est
