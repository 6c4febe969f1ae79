"""A topic model as an MLflow ``pyfunc`` model: :func:`save_model`, :func:`log_model`,
:func:`load_model`.

The model is stored as plain arrays (``sparklda_model.npz``: the topic-word statistics, α, η
and the vocabulary, with the training metadata as JSON), so scoring needs no Spark session:
``mlflow.pyfunc.load_model(uri).predict(pandas_df)`` folds each document in with the topics
fixed (:func:`sparklda.kernels.foldin_block`, the kernel of ``LDAModel.transform``, so the
proportions are the same) and returns a DataFrame of ``topic_0`` ... ``topic_{K-1}``.
``mlflow.pyfunc.spark_udf(spark, uri, result_type="array<double>")`` scores a Spark
DataFrame with it.

Input (a pandas DataFrame), one document a row, in the first of these columns it has:

* ``text`` (``text_col``): strings, lower-cased and split as the text reader does
  (on characters other than letters, digits, ``_`` and ``'``; tokens shorter than
  ``min_token_length`` dropped); terms outside the vocabulary are ignored;
* ``features`` (``features_col``): term counts, each a ``pyspark.ml.linalg`` vector, a
  dense list or array of the vocabulary's length (what ``mlflow.pyfunc.spark_udf`` passes
  for an ``array<double>`` column), or a dict of term (string) or term index -> count;
* else its only column, as texts if it holds strings and as counts otherwise.
"""

from __future__ import annotations

import json
import os
import re
import tempfile

import numpy as np

from sparklda.extras import require

require("mlflow", "sparklda.mlflow (MLflow tracking and models)")

import mlflow  # noqa: E402
import mlflow.pyfunc  # noqa: E402

from sparklda._version import __version__  # noqa: E402
from sparklda.block import DocBlock  # noqa: E402
from sparklda.errors import CorpusError, ParamError  # noqa: E402
from sparklda.kernels import foldin_block  # noqa: E402
from sparklda.model import TopicModel  # noqa: E402

#: The name of the model's artifact (the arrays) inside the MLflow model.
ARTIFACT = "sparklda_model"
FLAVOR_NAME = "sparklda"
#: what the text reader splits on (Spark's RegexTokenizer pattern [^\p{L}\p{N}_']+)
_SPLIT = re.compile(r"[^\w']+")


def _topic_model(model) -> TopicModel:
    """A TopicModel from a TopicModel or a ``sparklda.LDAModel`` (its ``topicModel``)."""
    tm = getattr(model, "topicModel", model)
    if not isinstance(tm, TopicModel):
        raise ParamError(
            f"sparklda.mlflow: model must be a sparklda TopicModel or LDAModel; got "
            f"{type(model).__name__} (for a PipelineModel, pass its LDAModel stage, or use "
            f"mlflow.spark.log_model)."
        )
    return tm


def write_arrays(model: TopicModel, path: str) -> str:
    """Write ``model`` as ``path`` (an ``.npz`` of plain arrays, no pickles); returns it."""
    vocab = np.asarray(model.vocab if model.vocab is not None else [], dtype=np.str_)
    meta = json.dumps(model.metadata, default=str)
    np.savez(
        path,
        topic_word=np.asarray(model.topic_word),
        alpha=np.asarray(model.alpha, dtype=np.float64),
        eta=np.asarray([model.eta], dtype=np.float64),
        vocab=vocab,
        has_vocab=np.asarray([model.vocab is not None]),
        metadata=np.asarray([meta], dtype=np.str_),
    )
    return path


def read_arrays(path: str) -> TopicModel:
    """The TopicModel written by :func:`write_arrays`."""
    with np.load(path, allow_pickle=False) as z:
        vocab = [str(t) for t in z["vocab"]] if bool(z["has_vocab"][0]) else None
        meta = json.loads(str(z["metadata"][0]))
        return TopicModel(z["topic_word"], z["alpha"], float(z["eta"][0]), vocab, meta)


class TopicModelPyfunc(mlflow.pyfunc.PythonModel):
    """The ``pyfunc`` scorer of a topic model: topic proportions of each input document."""

    def __init__(
        self,
        text_col: str = "text",
        features_col: str = "features",
        max_iter: int = 100,
        min_token_length: int = 2,
    ):
        self.text_col = text_col
        self.features_col = features_col
        self.max_iter = int(max_iter)
        self.min_token_length = int(min_token_length)
        self.topic_model: TopicModel | None = None
        self._phi: np.ndarray | None = None
        self._index: dict[str, int] = {}

    def __getstate__(self):  # pickled without the model: it is in the artifact
        state = dict(self.__dict__)
        state.update(topic_model=None, _phi=None, _index={})
        return state

    def load_context(self, context) -> None:
        self.set_model(read_arrays(context.artifacts[ARTIFACT]))

    def set_model(self, model: TopicModel) -> None:
        self.topic_model = model
        self._phi = np.ascontiguousarray(model.topics_matrix())
        self._index = {t: i for i, t in enumerate(model.vocab or [])}

    # -- input ---------------------------------------------------------------
    def _text_doc(self, text) -> tuple[np.ndarray, np.ndarray]:
        if not self._index:
            raise CorpusError(
                f"Column {self.text_col!r}: this model has no vocabulary, so it scores term "
                f"counts (column {self.features_col!r}) only, not texts."
            )
        ids = [
            self._index[w]
            for w in _SPLIT.split(str(text).lower())
            if len(w) >= self.min_token_length and w in self._index
        ]
        terms, counts = np.unique(np.asarray(ids, dtype=np.int64), return_counts=True)
        return terms, counts.astype(np.float64)

    def _count_doc(self, value, v: int, row: int) -> tuple[np.ndarray, np.ndarray]:
        if isinstance(value, dict) and "indices" in value and "values" in value:
            idx = np.asarray(value["indices"] or [], dtype=np.int64)
            val = np.asarray(value["values"] or [], dtype=np.float64)
            if not len(idx) and len(val):  # a dense vector as a struct
                idx = np.arange(len(val))
        elif isinstance(value, dict):
            idx_list = []
            for key in value:
                if isinstance(key, str):
                    if key not in self._index:
                        raise CorpusError(
                            f"Column {self.features_col!r}, row {row}: term {key!r} is not in "
                            f"the model's vocabulary."
                        )
                    idx_list.append(self._index[key])
                else:
                    idx_list.append(int(key))
            idx = np.asarray(idx_list, dtype=np.int64)
            val = np.asarray(list(value.values()), dtype=np.float64)
        elif hasattr(value, "indices") and hasattr(value, "values"):  # SparseVector
            idx = np.asarray(value.indices, dtype=np.int64)
            val = np.asarray(value.values, dtype=np.float64)
        else:
            dense = np.asarray(value.toArray() if hasattr(value, "toArray") else value, float)
            if dense.ndim != 1 or len(dense) != v:
                raise CorpusError(
                    f"Column {self.features_col!r}, row {row}: dense term counts must have "
                    f"the vocabulary's length {v}; got shape {dense.shape}."
                )
            idx = np.flatnonzero(dense)
            val = dense[idx]
        if len(idx) and (idx.min() < 0 or idx.max() >= v):
            raise CorpusError(
                f"Column {self.features_col!r}, row {row}: term index {int(idx.max())} is "
                f"outside the model's vocabulary of {v} terms."
            )
        keep = val > 0
        return idx[keep], val[keep]

    def _column(self, frame) -> tuple[str, bool]:
        """(column, holds texts)."""
        cols = list(frame.columns)
        if self.text_col in cols:
            return self.text_col, True
        if self.features_col in cols:
            return self.features_col, False
        if len(cols) == 1:
            series = frame[cols[0]]
            first = next((x for x in series if x is not None), None)
            return cols[0], isinstance(first, str)
        raise CorpusError(
            f"sparklda pyfunc model: the input needs a column {self.text_col!r} (texts) or "
            f"{self.features_col!r} (term counts), or a single column; got columns {cols}."
        )

    # -- scoring -------------------------------------------------------------
    def predict(self, context, model_input, params=None):
        """Topic proportions θ of each row: a DataFrame of ``topic_0`` ... ``topic_{K-1}``."""
        import pandas as pd

        if self.topic_model is None or self._phi is None:
            raise ParamError("This sparklda pyfunc model has no topics loaded.")
        frame = model_input if isinstance(model_input, pd.DataFrame) else pd.DataFrame(model_input)
        col, texts = self._column(frame)
        v = self._phi.shape[0]
        docs = []
        for i, value in enumerate(frame[col].tolist()):
            missing = value is None or (isinstance(value, float) and value != value)
            if missing:
                terms, counts = np.zeros(0, np.int64), np.zeros(0)
            elif texts:
                terms, counts = self._text_doc(value)
            else:
                terms, counts = self._count_doc(value, v, i)
            docs.append((i, terms, counts))
        k = self._phi.shape[1]
        if docs:
            block = DocBlock.from_docs(docs, dtype=np.float64)
            theta = foldin_block(
                block.indptr,
                block.local,
                block.counts,
                self._phi[block.terms],
                self.topic_model._alpha_arg(),
                self.max_iter,
            )
        else:
            theta = np.zeros((0, k))
        return pd.DataFrame(theta, columns=[f"topic_{j}" for j in range(k)], index=frame.index)


def _pyfunc_args(model, text_col, features_col, max_iter, folder):
    tm = _topic_model(model)
    path = write_arrays(tm, os.path.join(folder, f"{ARTIFACT}.npz"))
    python_model = TopicModelPyfunc(text_col, features_col, max_iter)
    return {"python_model": python_model, "artifacts": {ARTIFACT: path}}


def default_requirements() -> list[str]:
    """The pip requirements written with the model: this sparklda."""
    return [f"sparklda=={__version__}"]


def save_model(
    model,
    path: str,
    text_col: str = "text",
    features_col: str = "features",
    max_iter: int = 100,
    pip_requirements=None,
    **kwargs,
) -> None:
    """Save ``model`` (a TopicModel or ``sparklda.LDAModel``) as an MLflow pyfunc model in the
    local directory ``path``. ``kwargs`` go to ``mlflow.pyfunc.save_model``."""
    with tempfile.TemporaryDirectory() as folder:
        mlflow.pyfunc.save_model(
            path,
            **_pyfunc_args(model, text_col, features_col, max_iter, folder),
            pip_requirements=pip_requirements or default_requirements(),
            **kwargs,
        )


def log_model(
    model,
    name: str = "model",
    registered_model_name: str | None = None,
    text_col: str = "text",
    features_col: str = "features",
    max_iter: int = 100,
    pip_requirements=None,
    **kwargs,
):
    """Log ``model`` (a TopicModel or ``sparklda.LDAModel``) as an MLflow pyfunc model named
    ``name`` in the active run (or a new one), registered as ``registered_model_name`` when
    given; returns MLflow's ``ModelInfo`` (``model_uri`` loads it back). ``kwargs`` go to
    ``mlflow.pyfunc.log_model``."""
    with tempfile.TemporaryDirectory() as folder:
        return mlflow.pyfunc.log_model(
            name=name,
            **_pyfunc_args(model, text_col, features_col, max_iter, folder),
            registered_model_name=registered_model_name,
            pip_requirements=pip_requirements or default_requirements(),
            **kwargs,
        )


def load_model(model_uri: str) -> TopicModel:
    """The :class:`~sparklda.model.TopicModel` of a model logged by :func:`log_model` or saved
    by :func:`save_model` (``runs:/<run>/model``, ``models:/<name>/<version>``, a path).
    For scoring, ``mlflow.pyfunc.load_model(model_uri)`` gives the pyfunc model."""
    wrapped = mlflow.pyfunc.load_model(model_uri).unwrap_python_model()
    if not isinstance(wrapped, TopicModelPyfunc) or wrapped.topic_model is None:
        raise ParamError(
            f"{model_uri!r} is not a sparklda pyfunc model (logged by sparklda.mlflow.log_model)."
        )
    return wrapped.topic_model
