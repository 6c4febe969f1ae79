"""``pyspark.ml`` Estimator and Model over the library: :class:`LDA`, :class:`LDAModel`.

A drop-in for :class:`pyspark.ml.clustering.LDA`: the same Param names and
meanings where pyspark has them (``k``, ``maxIter``, ``seed``,
``featuresCol``, ``topicDistributionCol``, ``docConcentration``,
``topicConcentration``, ``learningOffset``, ``learningDecay``,
``subsamplingRate``, ``checkpointInterval``, ``optimizer``, ...), plus ours
(``algorithm``, ``burnInPasses``, ``minibatchSize``, ``stepScale``,
``heldoutFraction``, ``evalEvery``, ``timeBudget``, ``vocabulary``,
``initialModel``). Both classes are ``MLWritable``/``MLReadable`` and work as
stages of a :class:`pyspark.ml.Pipeline` (for example after a
``CountVectorizer``), including ``PipelineModel.save``/``load``.

There is no second implementation here: :meth:`LDA.fit` turns the Params into
:class:`sparklda.params.TrainParams`, reads the vectors with
:func:`sparklda.corpus.from_vectors` and calls :func:`sparklda.api.fit`;
:class:`LDAModel` wraps a :class:`sparklda.model.TopicModel`.

Differences from pyspark's LDA, on purpose:

* ``maxIter`` counts passes over the corpus (SCVB0, SVB) or batch iterations
  (CVB0, CVB). pyspark's online optimizer counts minibatches, so its
  ``maxIter=20`` with ``subsamplingRate=0.05`` is one pass.
* Documents with no known terms get the uniform topic distribution 1/K (the
  prior mean); pyspark returns a vector of zeros.
* :meth:`LDAModel.logLikelihood` and :meth:`LDAModel.logPerplexity` are the
  held-out document-completion estimate (Foulds et al. 2013, section 6),
  not pyspark's variational lower bound (Hoffman et al. 2010, Eq. 16).
* α is symmetric and fixed (``optimizeDocConcentration`` is not supported);
  the defaults are α = 0.1 and η = 0.01 (pyspark: 1/K + 1 and 1.1 for EM,
  1/K for online).
* The default ``seed`` is 0 (pyspark's is a hash of the class name, which
  Python randomises per process).

References
----------
Foulds, Boyles, DuBois, Smyth and Welling (2013). Stochastic collapsed
variational Bayesian inference for latent Dirichlet allocation. KDD.
"""

from __future__ import annotations

import logging
import math
import os
import posixpath
import warnings

import numpy as np
from pyspark import keyword_only
from pyspark.ml.base import Estimator, Model
from pyspark.ml.param import Param, Params, TypeConverters
from pyspark.ml.param.shared import HasCheckpointInterval, HasFeaturesCol, HasMaxIter, HasSeed
from pyspark.ml.util import DefaultParamsReader, DefaultParamsWriter, MLReadable, MLReader, \
    MLWritable, MLWriter

from .corpus import CorpusError
from .model import TopicModel
from .params import ALGORITHMS, INF, TrainParams, check

__all__ = ["LDA", "LDAModel", "load_topic_model", "path_exists"]

log = logging.getLogger("sparklda.ml")

#: pyspark's ``optimizer`` values and the algorithm each one selects here.
OPTIMIZER_ALIASES = {"online": "scvb0", "em": "cvb0"}
#: Defaults used when docConcentration / topicConcentration are "auto" (None or -1).
DEFAULT_ALPHA = 0.1
DEFAULT_ETA = 0.01
#: Fold-in iterations of transform and of the held-out estimate.
FOLDIN_MAX_ITER = 100
#: The library's defaults, which our own Params follow.
_TP = TrainParams()

#: Param name -> (type, low, high, low bound open, high bound open), checked at the top of fit.
CONSTRAINTS = {
    "k": ("int", 2, INF, False, False),
    "maxIter": ("int", 1, INF, False, False),
    "learningOffset": ("float", 0, INF, True, False),
    "learningDecay": ("float", 0.5, 1, True, False),
    "subsamplingRate": ("float", 0, 1, True, False),
    "burnInPasses": ("int", 0, INF, False, False),
    "minibatchSize": ("int", 1, INF, False, False),
    "stepScale": ("float", 0, INF, True, False),
    "heldoutFraction": ("float", 0, 1, False, True),
    "evalEvery": ("int", 0, INF, False, False),
    "timeBudget": ("float", 0, INF, False, False),
}


def _check(name, value, kind, low, high, low_open=False, high_open=False):
    """:func:`sparklda.params.check` with an optionally open upper bound."""
    if not high_open:
        return check(name, value, kind, low, high, low_open)
    lo = "(" if low_open else "["
    msg = (f"The {name!r} parameter of LDA must be {'an int' if kind == 'int' else 'a float'} "
           f"in the range {lo}{low}, {high}). Got {value!r} instead.")
    try:
        check(name, value, kind, low, high, low_open)
    except ValueError:
        raise ValueError(msg) from None
    if value >= high:
        raise ValueError(msg)


def _to_concentration_list(value):
    """docConcentration: a number or a list of numbers (pyspark takes a list)."""
    if TypeConverters._is_numeric(value):
        return [float(value)]
    return TypeConverters.toListFloat(value)


def _to_initial_model(value):
    if value is None or isinstance(value, (str, LDAModel, TopicModel)):
        return value
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    raise TypeError(f"initialModel must be a sparklda LDAModel, a sparklda TopicModel or the path "
                    f"of a saved model; got {type(value).__name__}.")


class _LDAParams(HasMaxIter, HasFeaturesCol, HasSeed, HasCheckpointInterval):
    """Params shared by :class:`LDA` and :class:`LDAModel` (pyspark's names first)."""

    k = Param(Params._dummy(), "k", "K, the number of topics. Must be > 1.",
              typeConverter=TypeConverters.toInt)
    optimizer = Param(
        Params._dummy(), "optimizer",
        "pyspark's name for the inference algorithm: 'online' (= 'scvb0') or 'em' (= 'cvb0'); "
        "sparklda's algorithm names are accepted too. Setting it and 'algorithm' to different "
        "algorithms is an error.",
        typeConverter=TypeConverters.toString)
    learningOffset = Param(
        Params._dummy(), "learningOffset",
        "τ of the topic step size: ρ = s/(τ+t)^κ for SCVB0 (τ of ρ^Φ in Foulds et al. 2013, "
        "default 1000), ρ = (τ0+t)^-κ for SVB (τ0 in Hoffman et al. 2010, default 1024). "
        "Used only when set explicitly. Must be > 0.",
        typeConverter=TypeConverters.toFloat)
    learningDecay = Param(
        Params._dummy(), "learningDecay",
        "κ of the topic step size (SCVB0 default 0.9, SVB default 0.7); used only when set "
        "explicitly. In (0.5, 1] for convergence.",
        typeConverter=TypeConverters.toFloat)
    subsamplingRate = Param(
        Params._dummy(), "subsamplingRate",
        "Fraction of the documents in each round (minibatch), in (0, 1]. Used only when set "
        "explicitly; otherwise minibatchSize applies.",
        typeConverter=TypeConverters.toFloat)
    optimizeDocConcentration = Param(
        Params._dummy(), "optimizeDocConcentration",
        "Accepted for compatibility with pyspark; sparklda keeps α fixed (a warning is issued "
        "when this is True).",
        typeConverter=TypeConverters.toBoolean)
    docConcentration = Param(
        Params._dummy(), "docConcentration",
        "α, the symmetric Dirichlet prior of the documents' topic proportions θ: a number, or a "
        "list of 1 or k equal numbers (> 0). None or [-1] selects the default 0.1.",
        typeConverter=_to_concentration_list)
    topicConcentration = Param(
        Params._dummy(), "topicConcentration",
        "η, the Dirichlet prior of the topics' term distributions φ (> 0). None or -1 selects "
        "the default 0.01.",
        typeConverter=TypeConverters.toFloat)
    topicDistributionCol = Param(
        Params._dummy(), "topicDistributionCol",
        "Output column of the documents' topic proportions θ. Documents with no known terms get "
        "the uniform vector 1/K (pyspark: zeros).",
        typeConverter=TypeConverters.toString)
    keepLastCheckpoint = Param(
        Params._dummy(), "keepLastCheckpoint",
        "Accepted for compatibility with pyspark; has no effect.",
        typeConverter=TypeConverters.toBoolean)
    # -- ours ---------------------------------------------------------------
    algorithm = Param(
        Params._dummy(), "algorithm",
        "Inference algorithm: 'scvb0' (stochastic collapsed variational Bayes, Foulds et al. "
        "2013), 'cvb0', 'cvb' or 'svb' (online variational Bayes, Hoffman et al. 2010).",
        typeConverter=TypeConverters.toString)
    burnInPasses = Param(
        Params._dummy(), "burnInPasses",
        "SCVB0: burn-in passes over each document updating only its N^Θ before the pass that "
        "accumulates topic statistics (Algorithm 2 of Foulds et al. 2013). >= 0.",
        typeConverter=TypeConverters.toInt)
    minibatchSize = Param(
        Params._dummy(), "minibatchSize",
        "Documents per round (|M| in Foulds et al. 2013). >= 1.",
        typeConverter=TypeConverters.toInt)
    stepScale = Param(
        Params._dummy(), "stepScale",
        "SCVB0: s of the topic step size ρ^Φ = s/(τ+t)^κ (t in minibatches of 100 documents; "
        "paper: 10). > 0.",
        typeConverter=TypeConverters.toFloat)
    heldoutFraction = Param(
        Params._dummy(), "heldoutFraction",
        "Fraction of the documents held out of training (seeded) to measure held-out quality "
        "during training, in [0, 1).",
        typeConverter=TypeConverters.toFloat)
    evalEvery = Param(
        Params._dummy(), "evalEvery",
        "Score the held-out documents every n rounds (0: only at the end); see "
        "LDAModel.trainingHistory().",
        typeConverter=TypeConverters.toInt)
    timeBudget = Param(
        Params._dummy(), "timeBudget",
        "Stop training after this many seconds (checked between rounds); 0 = no limit.",
        typeConverter=TypeConverters.toFloat)
    vocabulary = Param(
        Params._dummy(), "vocabulary",
        "The terms of the vector columns, in index order (e.g. CountVectorizerModel.vocabulary). "
        "Optional; lets describeTopics name the terms and warm starts merge vocabularies.",
        typeConverter=TypeConverters.toListString)
    initialModel = Param(
        Params._dummy(), "initialModel",
        "Warm start: continue training from this model (an LDAModel, a TopicModel, or the path of "
        "a saved LDAModel, TopicModel or PipelineModel). Its terms keep their ids; new terms of "
        "'vocabulary' are appended and start from the prior.",
        typeConverter=_to_initial_model)

    def __init__(self, *args):
        super().__init__(*args)
        self._setDefault(
            maxIter=20, checkpointInterval=10, k=10, optimizer="online", learningOffset=1024.0,
            learningDecay=0.51, subsamplingRate=0.05, optimizeDocConcentration=False,
            docConcentration=None, topicConcentration=None,
            topicDistributionCol="topicDistribution", keepLastCheckpoint=True, seed=0,
            algorithm=_TP.algorithm, burnInPasses=_TP.burnin, minibatchSize=_TP.minibatch_size,
            stepScale=_TP.s_phi,
            heldoutFraction=0.0, evalEvery=0, timeBudget=0.0, vocabulary=None, initialModel=None)

    # -- getters ---------------------------------------------------------
    def getK(self) -> int:
        return self.getOrDefault(self.k)

    def getOptimizer(self) -> str:
        return self.getOrDefault(self.optimizer)

    def getLearningOffset(self) -> float:
        return self.getOrDefault(self.learningOffset)

    def getLearningDecay(self) -> float:
        return self.getOrDefault(self.learningDecay)

    def getSubsamplingRate(self) -> float:
        return self.getOrDefault(self.subsamplingRate)

    def getOptimizeDocConcentration(self) -> bool:
        return self.getOrDefault(self.optimizeDocConcentration)

    def getDocConcentration(self):
        return self.getOrDefault(self.docConcentration)

    def getTopicConcentration(self):
        return self.getOrDefault(self.topicConcentration)

    def getTopicDistributionCol(self) -> str:
        return self.getOrDefault(self.topicDistributionCol)

    def getKeepLastCheckpoint(self) -> bool:
        return self.getOrDefault(self.keepLastCheckpoint)

    def getAlgorithm(self) -> str:
        return self.getOrDefault(self.algorithm)

    def getBurnInPasses(self) -> int:
        return self.getOrDefault(self.burnInPasses)

    def getMinibatchSize(self) -> int:
        return self.getOrDefault(self.minibatchSize)

    def getStepScale(self) -> float:
        return self.getOrDefault(self.stepScale)

    def getHeldoutFraction(self) -> float:
        return self.getOrDefault(self.heldoutFraction)

    def getEvalEvery(self) -> int:
        return self.getOrDefault(self.evalEvery)

    def getTimeBudget(self) -> float:
        return self.getOrDefault(self.timeBudget)

    def getVocabulary(self):
        return self.getOrDefault(self.vocabulary)

    def getInitialModel(self):
        return self.getOrDefault(self.initialModel)

    # -- validation and conversion to TrainParams ------------------------
    def _resolved_algorithm(self) -> str:
        choices = sorted(OPTIMIZER_ALIASES) + list(ALGORITHMS)
        opt = self.getOptimizer()
        if opt not in choices:
            raise ValueError(f"The 'optimizer' parameter of LDA must be one of {choices}. "
                             f"Got {opt!r} instead.")
        alg = self.getAlgorithm()
        if alg not in ALGORITHMS:
            raise ValueError(f"The 'algorithm' parameter of LDA must be one of {list(ALGORITHMS)}. "
                             f"Got {alg!r} instead.")
        from_opt = OPTIMIZER_ALIASES.get(opt, opt)
        if self.isSet(self.algorithm) and self.isSet(self.optimizer) and from_opt != alg:
            raise ValueError(f"The 'optimizer' parameter ({opt!r}, i.e. {from_opt!r}) and the "
                             f"'algorithm' parameter ({alg!r}) of LDA disagree; set only one.")
        if not self.isSet(self.algorithm) and self.isSet(self.optimizer):
            alg = from_opt
        from . import modes  # noqa: F401  (registers the available modes)
        from .training import MODES

        if alg not in MODES:
            raise ValueError(f"The {alg!r} algorithm is not available in this installation of "
                             f"sparklda; available: {sorted(MODES)}.")
        return alg

    def _alpha(self) -> float:
        vals = self.getDocConcentration()
        if vals is None or list(vals) == [-1.0]:
            return DEFAULT_ALPHA
        k = self.getK()
        vals = list(vals)
        if (len(vals) not in (1, k) or not all(math.isfinite(v) and v > 0 for v in vals)):
            raise ValueError(f"The 'docConcentration' parameter of LDA must be a float in the "
                             f"range (0, inf), or a list of 1 or k={k} such floats (None or [-1] "
                             f"for the default {DEFAULT_ALPHA}). Got {vals!r} instead.")
        if len(set(vals)) > 1:
            raise ValueError(f"The 'docConcentration' parameter of LDA must be symmetric (one α "
                             f"for every topic: a float or a list of equal floats); sparklda does "
                             f"not support an asymmetric α. Got {vals!r} instead.")
        return float(vals[0])

    def _eta(self) -> float:
        eta = self.getTopicConcentration()
        if eta is None or eta == -1.0:
            return DEFAULT_ETA
        if not (math.isfinite(eta) and eta > 0):
            raise ValueError(f"The 'topicConcentration' parameter of LDA must be a float in the "
                             f"range (0, inf) (None or -1 for the default {DEFAULT_ETA}). Got "
                             f"{eta!r} instead.")
        return float(eta)

    def _seed(self) -> int:
        return int(self.getSeed()) & (2 ** 63 - 1)

    def _train_params(self) -> TrainParams:
        """Check every Param (messages name the Param, its range and the bad value) and map
        them onto :class:`TrainParams`."""
        for name, (kind, low, high, low_open, high_open) in CONSTRAINTS.items():
            _check(name, self.getOrDefault(self.getParam(name)), kind, low, high, low_open,
                   high_open)
        ci = self.getCheckpointInterval()
        if isinstance(ci, bool) or not isinstance(ci, int) or (ci < 1 and ci != -1):
            raise ValueError(f"The 'checkpointInterval' parameter of LDA must be an int in the "
                             f"range [1, inf), or -1 to disable checkpoints. Got {ci!r} instead.")
        if self.isSet(self.subsamplingRate) and self.isSet(self.minibatchSize):
            raise ValueError("The 'subsamplingRate' and 'minibatchSize' parameters of LDA both "
                             "set the documents per round; set only one.")
        if self.getOptimizeDocConcentration():
            warnings.warn("optimizeDocConcentration=True is not supported by sparklda: α stays "
                          "fixed at docConcentration.", UserWarning, stacklevel=3)
        algorithm = self._resolved_algorithm()
        tp = TrainParams(
            algorithm=algorithm, k=self.getK(), alpha=self._alpha(), eta=self._eta(),
            passes=self.getMaxIter(), burnin=self.getBurnInPasses(),
            minibatch_size=self.getMinibatchSize(), s_phi=self.getStepScale(), seed=self._seed(),
            heldout_fraction=self.getHeldoutFraction(), eval_every=self.getEvalEvery(),
            time_budget=self.getTimeBudget(), checkpoint_interval=max(ci, 0),
            foldin_max_iter=FOLDIN_MAX_ITER)
        if algorithm == "svb":
            if self.isSet(self.learningOffset):
                tp.learning_offset = self.getLearningOffset()
            if self.isSet(self.learningDecay):
                tp.learning_decay = self.getLearningDecay()
        else:
            if self.isSet(self.learningOffset):
                tp.tau_phi = self.getLearningOffset()
            if self.isSet(self.learningDecay):
                tp.kappa_phi = self.getLearningDecay()
            if algorithm == "scvb0":
                first = tp.s_phi / tp.tau_phi ** tp.kappa_phi
                if first > 1:
                    raise ValueError(
                        f"The first step stepScale/learningOffset^learningDecay of LDA must be "
                        f"at most 1. Got {first:.4g} from stepScale={tp.s_phi}, "
                        f"learningOffset={tp.tau_phi}, learningDecay={tp.kappa_phi} instead.")
        return tp.validate()


# --------------------------------------------------------------------------
# Data checks (driver side, no Spark job)


def _check_features(dataset, col):
    from .corpus import check_vector_column

    check_vector_column(dataset, col)


def _declared_size(dataset, col):
    """The vector size an ML attribute group declares (CountVectorizer sets it), or None."""
    attr = (dataset.schema[col].metadata or {}).get("ml_attr", {})
    n = attr.get("num_attrs")
    return int(n) if n is not None else None


# --------------------------------------------------------------------------
# Paths: one location for Spark (Hadoop) and pyarrow


def _resolve_path(path: str, spark=None) -> str:
    """The path as :class:`TopicModel` (pyarrow) should see it, qualified the way Spark does.

    A relative or scheme-less path is resolved by Hadoop against the default
    file system, so a model's Param metadata (written by Spark) and its
    topics (written by pyarrow) land in one directory: ``file:`` becomes a
    local path, ``dbfs:/x`` the Databricks mount ``/dbfs/x``, ``s3a://`` is
    ``s3://``; other URIs (``hdfs://``, ``gs://``) are passed on.
    """
    path = os.fspath(path)
    try:
        if spark is None:
            from pyspark.sql import SparkSession

            spark = SparkSession.getActiveSession()
        sc = spark.sparkContext if spark is not None else None
        jvm = sc._jvm if sc is not None else None
    except Exception:  # Spark Connect, or no session: take the path as given
        jvm = None
    if jvm is None:
        return path[len("file:"):] if path.startswith("file:") else path
    jpath = jvm.org.apache.hadoop.fs.Path(path)
    q = jpath.getFileSystem(sc._jsc.hadoopConfiguration()).makeQualified(jpath).toUri()
    scheme = q.getScheme()
    if scheme == "file":
        return q.getPath()
    if scheme == "dbfs":
        return "/dbfs" + q.getPath()
    text = q.toString()
    if scheme in ("s3a", "s3n"):
        return "s3" + text[len(scheme):]
    return text


def _exists(path: str) -> bool:
    from .model import _exists as exists, _filesystem

    filesystem, p = _filesystem(path)
    return exists(filesystem, p)


def path_exists(path: str, spark=None) -> bool:
    """Whether ``path`` exists, resolved the way Spark resolves it (see
    :func:`_resolve_path`)."""
    return _exists(_resolve_path(path, spark))


def load_topic_model(path: str, spark=None) -> TopicModel:
    """The :class:`TopicModel` saved at ``path``: a TopicModel directory (the train job's
    output), an :class:`LDAModel` directory, or a ``PipelineModel`` with an LDAModel stage
    (the last such stage). ``path`` is looked up as Spark resolves it (its default file
    system) and, failing that, as :meth:`TopicModel.save` took it (a local path or a URI)."""
    from pyarrow import fs

    from .model import _filesystem

    candidates = [_resolve_path(path, spark).rstrip("/")]
    if os.fspath(path).rstrip("/") not in candidates:
        candidates.append(os.fspath(path).rstrip("/"))
    for p in candidates:
        if _exists(f"{p}/metadata.json"):
            return TopicModel.load(p)
        if _exists(f"{p}/topicModel/metadata.json"):
            return TopicModel.load(f"{p}/topicModel")
        if _exists(f"{p}/stages"):
            filesystem, stages = _filesystem(f"{p}/stages")
            names = sorted(posixpath.basename(i.path)
                           for i in filesystem.get_file_info(fs.FileSelector(stages))
                           if i.type == fs.FileType.Directory)
            found = [n for n in names if _exists(f"{p}/stages/{n}/topicModel/metadata.json")]
            if found:
                return TopicModel.load(f"{p}/stages/{found[-1]}/topicModel")
    raise FileNotFoundError(f"No sparklda model at {path!r}: expected a TopicModel directory "
                            f"(metadata.json), an LDAModel directory (topicModel/) or a "
                            f"PipelineModel directory with an LDAModel stage.")


def _as_topic_model(value, spark=None):
    """(TopicModel, description) of an initialModel value, or (None, None)."""
    if value is None:
        return None, None
    if isinstance(value, LDAModel):
        return value.topicModel, f"LDAModel {value.uid}"
    if isinstance(value, TopicModel):
        return value, "TopicModel"
    return load_topic_model(value, spark), str(value)


# --------------------------------------------------------------------------
# Estimator


class LDA(Estimator, _LDAParams, MLReadable, MLWritable):
    """Latent Dirichlet allocation on Spark, a drop-in for ``pyspark.ml.clustering.LDA``.

    Input: a column (``featuresCol``) of term-count vectors, as
    ``CountVectorizer`` produces. The default algorithm is SCVB0 (Foulds et
    al. 2013); ``optimizer="online"`` selects it too and ``optimizer="em"``
    selects CVB0. Ranges are checked when ``fit`` starts, with messages that
    name the Param, its range and the bad value.

    Examples
    --------
    >>> from sparklda import LDA            # was: from pyspark.ml.clustering import LDA
    >>> model = LDA(k=10, maxIter=10, seed=1).fit(df)  # doctest: +SKIP
    >>> model.describeTopics(5).show()                 # doctest: +SKIP

    Warm start from a saved model on a grown corpus, merging vocabularies:

    >>> LDA(k=10, initialModel="models/lda-2024-05",
    ...     vocabulary=cv_model.vocabulary).fit(df)   # doctest: +SKIP
    """

    @keyword_only
    def __init__(self, *, featuresCol="features", maxIter=20, seed=None, checkpointInterval=10,
                 k=10, optimizer="online", learningOffset=1024.0, learningDecay=0.51,
                 subsamplingRate=0.05, optimizeDocConcentration=False, docConcentration=None,
                 topicConcentration=None, topicDistributionCol="topicDistribution",
                 keepLastCheckpoint=True, algorithm=_TP.algorithm, burnInPasses=_TP.burnin,
                 minibatchSize=_TP.minibatch_size, stepScale=_TP.s_phi, heldoutFraction=0.0,
                 evalEvery=0, timeBudget=0.0, vocabulary=None, initialModel=None):
        super().__init__()
        self.setParams(**self._input_kwargs)

    @keyword_only
    def setParams(self, *, featuresCol="features", maxIter=20, seed=None, checkpointInterval=10,
                  k=10, optimizer="online", learningOffset=1024.0, learningDecay=0.51,
                  subsamplingRate=0.05, optimizeDocConcentration=False, docConcentration=None,
                  topicConcentration=None, topicDistributionCol="topicDistribution",
                  keepLastCheckpoint=True, algorithm=_TP.algorithm, burnInPasses=_TP.burnin,
                  minibatchSize=_TP.minibatch_size, stepScale=_TP.s_phi, heldoutFraction=0.0,
                  evalEvery=0, timeBudget=0.0, vocabulary=None, initialModel=None) -> "LDA":
        """Set the given Params (only those passed)."""
        kwargs = dict(self._input_kwargs)
        if kwargs.get("seed", 0) is None:
            del kwargs["seed"]  # pyspark's "no seed given": keep the default
        return self._set(**kwargs)

    # -- setters (pyspark's names) ---------------------------------------
    def setFeaturesCol(self, value):
        """Set :py:attr:`featuresCol`."""
        return self._set(featuresCol=value)

    def setMaxIter(self, value):
        """Set :py:attr:`maxIter`."""
        return self._set(maxIter=value)

    def setSeed(self, value):
        """Set :py:attr:`seed`."""
        return self._set(seed=value)

    def setCheckpointInterval(self, value):
        """Set :py:attr:`checkpointInterval`."""
        return self._set(checkpointInterval=value)

    def setK(self, value):
        """Set :py:attr:`k`."""
        return self._set(k=value)

    def setOptimizer(self, value):
        """Set :py:attr:`optimizer`."""
        return self._set(optimizer=value)

    def setLearningOffset(self, value):
        """Set :py:attr:`learningOffset`."""
        return self._set(learningOffset=value)

    def setLearningDecay(self, value):
        """Set :py:attr:`learningDecay`."""
        return self._set(learningDecay=value)

    def setSubsamplingRate(self, value):
        """Set :py:attr:`subsamplingRate`."""
        return self._set(subsamplingRate=value)

    def setOptimizeDocConcentration(self, value):
        """Set :py:attr:`optimizeDocConcentration`."""
        return self._set(optimizeDocConcentration=value)

    def setDocConcentration(self, value):
        """Set :py:attr:`docConcentration`."""
        return self._set(docConcentration=value)

    def setTopicConcentration(self, value):
        """Set :py:attr:`topicConcentration`."""
        return self._set(topicConcentration=value)

    def setTopicDistributionCol(self, value):
        """Set :py:attr:`topicDistributionCol`."""
        return self._set(topicDistributionCol=value)

    def setKeepLastCheckpoint(self, value):
        """Set :py:attr:`keepLastCheckpoint`."""
        return self._set(keepLastCheckpoint=value)

    # -- setters (ours) ---------------------------------------------------
    def setAlgorithm(self, value):
        """Set :py:attr:`algorithm`."""
        return self._set(algorithm=value)

    def setBurnInPasses(self, value):
        """Set :py:attr:`burnInPasses`."""
        return self._set(burnInPasses=value)

    def setMinibatchSize(self, value):
        """Set :py:attr:`minibatchSize`."""
        return self._set(minibatchSize=value)

    def setStepScale(self, value):
        """Set :py:attr:`stepScale`."""
        return self._set(stepScale=value)

    def setHeldoutFraction(self, value):
        """Set :py:attr:`heldoutFraction`."""
        return self._set(heldoutFraction=value)

    def setEvalEvery(self, value):
        """Set :py:attr:`evalEvery`."""
        return self._set(evalEvery=value)

    def setTimeBudget(self, value):
        """Set :py:attr:`timeBudget`."""
        return self._set(timeBudget=value)

    def setVocabulary(self, value):
        """Set :py:attr:`vocabulary`."""
        return self._set(vocabulary=value)

    def setInitialModel(self, value):
        """Set :py:attr:`initialModel`."""
        return self._set(initialModel=value)

    def _fit(self, dataset) -> "LDAModel":
        from .api import fit
        from .corpus import from_vectors

        tp = self._train_params()
        col = self.getFeaturesCol()
        _check_features(dataset, col)
        vocab = self.getVocabulary()
        size = _declared_size(dataset, col)
        if vocab is not None and size is not None and len(vocab) != size:
            raise CorpusError(f"The 'vocabulary' parameter has {len(vocab)} terms but column "
                              f"{col!r} holds vectors of size {size}.")
        spark = dataset.sparkSession
        initial, initial_desc = _as_topic_model(self.getInitialModel(), spark)
        if initial is not None:
            if initial.k != tp.k:
                raise ValueError(f"The 'k' parameter of LDA ({tp.k}) must equal the initial "
                                 f"model's k ({initial.k}) to continue training from it.")
            if (size is not None and (vocab is None or initial.vocab is None)
                    and size != initial.vocab_size):
                raise CorpusError(f"Column {col!r} holds vectors of size {size} but the initial "
                                  f"model has {initial.vocab_size} terms; set 'vocabulary' (and "
                                  f"save the initial model with its vocabulary) to merge them.")
        if self.isSet(self.subsamplingRate):
            n_docs = dataset.count()
            tp.minibatch_size = max(1, math.ceil(self.getSubsamplingRate() * n_docs
                                                 * (1.0 - tp.heldout_fraction)))
        source = from_vectors(dataset, col, vocab=vocab)
        result = fit(source, tp, initial_model=initial)
        tm = result.model
        tm.metadata["evaluations"] = result.evaluations
        if initial is not None:
            tm.metadata["warm_start"] = {
                "initial_model": initial_desc, "initial_vocab_size": initial.vocab_size,
                "new_terms": tm.vocab_size - initial.vocab_size}
        model = LDAModel(tm)
        self._copyValues(model)
        model._sync_vocabulary()
        model._report = result.report
        return model

    # -- persistence -------------------------------------------------------
    def write(self) -> MLWriter:
        """A writer of the Params (metadata) and, if ``initialModel`` is a model object, of that
        model in ``initialModel/``."""
        return _LDAWriter(self)

    @classmethod
    def read(cls) -> MLReader:
        return _LDAReader(cls)


# --------------------------------------------------------------------------
# Model


class LDAModel(Model, _LDAParams, MLReadable, MLWritable):
    """A fitted LDA model: wraps a :class:`sparklda.model.TopicModel`.

    ``transform`` appends ``topicDistributionCol``, each document's topic
    proportions θ inferred with the topics fixed (fold-in on the executors).
    Documents with no known terms (empty or null vectors) get the uniform
    vector 1/K, the prior mean; pyspark's LDAModel returns zeros there.
    """

    def __init__(self, topicModel: TopicModel | None = None):
        super().__init__()
        self._topic_model = topicModel
        self._report = {}
        if topicModel is not None:
            self._set(k=topicModel.k)
            self._sync_vocabulary()

    @property
    def topicModel(self) -> TopicModel:
        """The underlying :class:`sparklda.model.TopicModel` (statistics, α, η, vocabulary,
        training metadata)."""
        if self._topic_model is None:
            raise ValueError("This LDAModel holds no topics (it was not fitted or loaded).")
        return self._topic_model

    def _sync_vocabulary(self):
        vocab = self._topic_model.vocab if self._topic_model is not None else None
        if vocab is None:
            self.clear(self.vocabulary)
        else:
            self._set(vocabulary=vocab)

    # -- setters -----------------------------------------------------------
    def setFeaturesCol(self, value):
        """Set :py:attr:`featuresCol`."""
        return self._set(featuresCol=value)

    def setSeed(self, value):
        """Set :py:attr:`seed`."""
        return self._set(seed=value)

    def setTopicDistributionCol(self, value):
        """Set :py:attr:`topicDistributionCol`."""
        return self._set(topicDistributionCol=value)

    def setVocabulary(self, value) -> "LDAModel":
        """Name the model's terms (e.g. with ``CountVectorizerModel.vocabulary`` after a
        Pipeline was fitted); describeTopics then has a ``terms`` column."""
        tm = self.topicModel
        vocab = TypeConverters.toListString(value)
        if len(vocab) != tm.vocab_size:
            raise CorpusError(f"The 'vocabulary' parameter has {len(vocab)} terms but the model "
                              f"has {tm.vocab_size}.")
        self._topic_model = TopicModel(tm.topic_word, tm.alpha, tm.eta, vocab, tm.metadata)
        return self._set(vocabulary=vocab)

    # -- pyspark LDAModel API ----------------------------------------------
    def isDistributed(self) -> bool:
        """False: the topics live on the driver (like pyspark's LocalLDAModel)."""
        return False

    def toLocal(self) -> "LDAModel":
        """This model (it is already local); for scripts written for ``optimizer="em"``."""
        return self

    def vocabSize(self) -> int:
        """V, the number of terms."""
        return self.topicModel.vocab_size

    def topicsMatrix(self):
        """φ̂ as a V × K :class:`pyspark.ml.linalg.DenseMatrix`; column k is topic k's
        distribution over terms, φ̂_kw = (N^Φ_wk + η) / (N^Z_k + Vη)."""
        from pyspark.ml.linalg import DenseMatrix

        phi = self.topicModel.topics_matrix()
        return DenseMatrix(phi.shape[0], phi.shape[1], phi.ravel(order="F"))

    def estimatedDocConcentration(self):
        """α for each of the K topics (fixed during training, so the given or default value)."""
        from pyspark.ml.linalg import DenseVector

        return DenseVector(np.full(self.topicModel.k, self.topicModel.alpha))

    def describeTopics(self, maxTermsPerTopic: int = 10):
        """A DataFrame of each topic's top terms: ``topic``, ``termIndices``,
        ``termWeights`` (φ̂, descending) and, when the vocabulary is known, ``terms``."""
        from pyspark.sql import SparkSession
        from pyspark.sql.types import ArrayType, DoubleType, IntegerType, StringType, \
            StructField, StructType

        rows = self.topicModel.describe_topics(maxTermsPerTopic)
        has_terms = self.topicModel.vocab is not None
        fields = [StructField("topic", IntegerType(), False),
                  StructField("termIndices", ArrayType(IntegerType(), False), True),
                  StructField("termWeights", ArrayType(DoubleType(), False), True)]
        if has_terms:
            fields.append(StructField("terms", ArrayType(StringType(), False), True))
        data = [(r["topic"], r["termIndices"], r["termWeights"], *([r["terms"]] if has_terms
                                                                   else [])) for r in rows]
        return SparkSession.active().createDataFrame(data, StructType(fields))

    def _completion(self, dataset):
        from .corpus import from_vectors, heldout_blocks, split_documents, validate
        from .evaluation import completion_loglik

        col = self.getFeaturesCol()
        _check_features(dataset, col)
        tm = self.topicModel
        size = _declared_size(dataset, col)
        source = from_vectors(dataset, col)
        size = size if size is not None else source.vocab_size
        if size != tm.vocab_size:
            raise CorpusError(f"Vectors in column {col!r} have size {size} but the model's "
                              f"vocabulary has {tm.vocab_size} terms.")
        docs, _ = split_documents(source, validate(source))
        blocks = heldout_blocks(docs, self._seed(), np.float64)
        try:
            return completion_loglik(blocks, tm.topics_matrix(), tm.alpha, FOLDIN_MAX_ITER)
        finally:
            blocks.unpersist()

    def logLikelihood(self, dataset) -> float:
        """Held-out document-completion log-likelihood of ``dataset`` (higher is better).

        Each document's tokens are split in half at random (seeded by the
        ``seed`` Param and the row); θ is inferred from the first half with the
        topics fixed and the result is Σ log Σ_k θ_k φ̂_kw over the tokens of
        the second halves (Foulds et al. 2013, section 6). This is an
        estimate of predictive quality on those tokens; pyspark's
        ``logLikelihood`` is instead a variational lower bound on the
        likelihood of the whole documents (Hoffman et al. 2010, Eq. 16), so
        the two numbers are not comparable.
        """
        s = self._completion(dataset)
        return float(s.loglik_per_token * s.tokens)

    def logPerplexity(self, dataset) -> float:
        """−(mean per-token log-likelihood) of the second halves (see :meth:`logLikelihood`);
        lower is better, perplexity = exp of it. pyspark's is the bound's per-token value."""
        return float(-self._completion(dataset).loglik_per_token)

    def trainingHistory(self) -> list[dict]:
        """Held-out evaluations during training (rows with ``round``, ``passes``, ``elapsed_s``,
        ``heldout_loglik``, ``perplexity``); empty when ``heldoutFraction`` was 0."""
        return list(self.topicModel.metadata.get("evaluations", []))

    def _transform(self, dataset):
        from .api import transform_dataframe

        col, out = self.getFeaturesCol(), self.getTopicDistributionCol()
        _check_features(dataset, col)
        if out in dataset.columns:
            raise CorpusError(f"Output column {out!r} (topicDistributionCol) already exists.")
        tm = self.topicModel
        size = _declared_size(dataset, col)
        if size is None:
            first = dataset.select(col).dropna().head()
            size = int(first[0].size) if first is not None else None
        if size is not None and size != tm.vocab_size:
            raise CorpusError(f"Vectors in column {col!r} have size {size} but the model's "
                              f"vocabulary has {tm.vocab_size} terms.")
        return transform_dataframe(tm, dataset, col, out, FOLDIN_MAX_ITER)

    # -- persistence -------------------------------------------------------
    def write(self) -> MLWriter:
        """A writer of ``path/metadata`` (Params, as pyspark's DefaultParamsWriter) and
        ``path/topicModel`` (:meth:`TopicModel.save`)."""
        return _LDAModelWriter(self)

    @classmethod
    def read(cls) -> MLReader:
        return _LDAModelReader(cls)


# --------------------------------------------------------------------------
# Writers and readers


def _refuse_existing(writer, path):
    if not writer.shouldOverwrite and path_exists(path, writer.sparkSession):
        raise FileExistsError(f"Path {path!r} already exists. To overwrite it, use "
                              f"write().overwrite().save(path).")


def _json_params(instance, skip=("vocabulary", "initialModel")):
    params = {p.name: v for p, v in instance._paramMap.items() if p.name not in skip}
    init = instance._paramMap.get(instance.initialModel)
    if isinstance(init, str):
        params["initialModel"] = init
    return params


def _check_class(metadata, cls, path):
    expected = f"{cls.__module__}.{cls.__name__}"
    if metadata.get("class") != expected:
        raise ValueError(f"{path!r} holds a {metadata.get('class')}, not a {expected}.")


class _LDAModelWriter(MLWriter):
    def __init__(self, instance: LDAModel):
        super().__init__()
        self.instance = instance

    def saveImpl(self, path: str) -> None:
        _refuse_existing(self, path)
        spark = self.sparkSession
        tm = self.instance.topicModel
        DefaultParamsWriter.saveMetadata(self.instance, path, spark,
                                         extraMetadata={"sparkldaVersion": _version()},
                                         paramMap=_json_params(self.instance))
        tm.save(_resolve_path(posixpath.join(path, "topicModel"), spark), overwrite=True)


class _LDAModelReader(MLReader):
    def __init__(self, cls):
        super().__init__()
        self.cls = cls

    def load(self, path: str) -> LDAModel:
        spark = self.sparkSession
        metadata = DefaultParamsReader.loadMetadata(path, spark)
        _check_class(metadata, self.cls, path)
        tm = TopicModel.load(_resolve_path(posixpath.join(path, "topicModel"), spark))
        model = self.cls(tm)
        model._resetUid(metadata["uid"])
        DefaultParamsReader.getAndSetParams(model, metadata, skipParams=["vocabulary"])
        model._sync_vocabulary()
        return model


class _LDAWriter(MLWriter):
    def __init__(self, instance: LDA):
        super().__init__()
        self.instance = instance

    def saveImpl(self, path: str) -> None:
        _refuse_existing(self, path)
        spark = self.sparkSession
        init = self.instance._paramMap.get(self.instance.initialModel)
        kind = None
        if isinstance(init, LDAModel):
            init.write().session(spark).save(posixpath.join(path, "initialModel"))
            kind = "LDAModel"
        elif isinstance(init, TopicModel):
            init.save(_resolve_path(posixpath.join(path, "initialModel"), spark), overwrite=True)
            kind = "TopicModel"
        DefaultParamsWriter.saveMetadata(
            self.instance, path, spark,
            extraMetadata={"sparkldaVersion": _version(), "initialModelSaved": kind},
            paramMap=_json_params(self.instance, skip=("initialModel",)))


class _LDAReader(MLReader):
    def __init__(self, cls):
        super().__init__()
        self.cls = cls

    def load(self, path: str) -> LDA:
        spark = self.sparkSession
        metadata = DefaultParamsReader.loadMetadata(path, spark)
        _check_class(metadata, self.cls, path)
        est = self.cls()
        est._resetUid(metadata["uid"])
        DefaultParamsReader.getAndSetParams(est, metadata)
        kind = metadata.get("initialModelSaved")
        sub = posixpath.join(path, "initialModel")
        if kind == "LDAModel":
            est._set(initialModel=LDAModel.read().session(spark).load(sub))
        elif kind == "TopicModel":
            est._set(initialModel=TopicModel.load(_resolve_path(sub, spark)))
        return est


def _version():
    from . import __version__

    return __version__
