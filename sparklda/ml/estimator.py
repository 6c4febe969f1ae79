"""The ``pyspark.ml`` Estimator :class:`LDA`: Params in, :func:`sparklda.api.fit`, an
:class:`~sparklda.ml.LDAModel` out."""

from __future__ import annotations

import math

from pyspark import keyword_only
from pyspark.ml.base import Estimator
from pyspark.ml.util import MLReadable, MLReader, MLWritable, MLWriter

from ..api import fit
from ..corpus import declared_size, from_vectors
from ..errors import CorpusError, ParamError
from ..model import TopicModel
from .model import LDAModel
from .params import _TP, _LDAParams, check_features
from .persistence import LDAReader, LDAWriter, load_topic_model


def _as_topic_model(value, spark=None):
    """(TopicModel, description) of an initialModel value, or (None, None)."""
    if value is None:
        return None, None
    if isinstance(value, LDAModel):
        return value.topicModel, f"LDAModel {value.uid}"
    if isinstance(value, TopicModel):
        return value, "TopicModel"
    return load_topic_model(value, spark), str(value)


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

    # Saved metadata names the class "sparklda.ml.LDA" whatever module defines it.
    __module__ = "sparklda.ml"

    @keyword_only
    def __init__(
        self,
        *,
        featuresCol="features",
        maxIter=20,
        seed=None,
        checkpointInterval=10,
        k=10,
        optimizer="online",
        learningOffset=1024.0,
        learningDecay=0.51,
        subsamplingRate=0.05,
        optimizeDocConcentration=False,
        optimizeTopicConcentration=False,
        seedTopics=None,
        seedConfidence=_TP.seed_confidence,
        docConcentration=None,
        topicConcentration=None,
        topicDistributionCol="topicDistribution",
        keepLastCheckpoint=True,
        algorithm=_TP.algorithm,
        burnInPasses=_TP.burnin,
        minibatchSize=_TP.minibatch_size,
        stepScale=_TP.s_phi,
        heldoutFraction=0.0,
        evalEvery=0,
        timeBudget=0.0,
        minGain=_TP.min_gain,
        patience=_TP.patience,
        execution="auto",
        evaluator=_TP.evaluator,
        particles=_TP.particles,
        modelPlacement="driver",
        checkpointDir=None,
        vocabulary=None,
        initialModel=None,
    ):
        super().__init__()
        self.setParams(**self._input_kwargs)

    @keyword_only
    def setParams(
        self,
        *,
        featuresCol="features",
        maxIter=20,
        seed=None,
        checkpointInterval=10,
        k=10,
        optimizer="online",
        learningOffset=1024.0,
        learningDecay=0.51,
        subsamplingRate=0.05,
        optimizeDocConcentration=False,
        optimizeTopicConcentration=False,
        seedTopics=None,
        seedConfidence=_TP.seed_confidence,
        docConcentration=None,
        topicConcentration=None,
        topicDistributionCol="topicDistribution",
        keepLastCheckpoint=True,
        algorithm=_TP.algorithm,
        burnInPasses=_TP.burnin,
        minibatchSize=_TP.minibatch_size,
        stepScale=_TP.s_phi,
        heldoutFraction=0.0,
        evalEvery=0,
        timeBudget=0.0,
        minGain=_TP.min_gain,
        patience=_TP.patience,
        execution="auto",
        evaluator=_TP.evaluator,
        particles=_TP.particles,
        modelPlacement="driver",
        checkpointDir=None,
        vocabulary=None,
        initialModel=None,
    ) -> LDA:
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

    def setOptimizeTopicConcentration(self, value):
        """Set :py:attr:`optimizeTopicConcentration`."""
        return self._set(optimizeTopicConcentration=value)

    def setSeedTopics(self, value):
        """Set :py:attr:`seedTopics`."""
        return self._set(seedTopics=value)

    def setSeedConfidence(self, value):
        """Set :py:attr:`seedConfidence`."""
        return self._set(seedConfidence=value)

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

    def setMinGain(self, value):
        """Set :py:attr:`minGain`."""
        return self._set(minGain=value)

    def setPatience(self, value):
        """Set :py:attr:`patience`."""
        return self._set(patience=value)

    def setExecution(self, value):
        """Set :py:attr:`execution`."""
        return self._set(execution=value)

    def setEvaluator(self, value):
        """Set :py:attr:`evaluator`."""
        return self._set(evaluator=value)

    def setParticles(self, value):
        """Set :py:attr:`particles`."""
        return self._set(particles=value)

    def setModelPlacement(self, value):
        """Set :py:attr:`modelPlacement`."""
        return self._set(modelPlacement=value)

    def setCheckpointDir(self, value):
        """Set :py:attr:`checkpointDir`."""
        return self._set(checkpointDir=value)

    def setVocabulary(self, value):
        """Set :py:attr:`vocabulary`."""
        return self._set(vocabulary=value)

    def setInitialModel(self, value):
        """Set :py:attr:`initialModel`."""
        return self._set(initialModel=value)

    def setCallbacks(self, callbacks) -> LDA:
        """Training callbacks for the next fits (:class:`sparklda.training.Callback`, e.g.
        ``[sparklda.progress.Progress()]`` for a progress bar). Not a Param: they are
        not saved with the estimator."""
        self._callbacks = list(callbacks)
        return self

    def getCallbacks(self) -> list:
        return list(getattr(self, "_callbacks", []))

    def _fit(self, dataset) -> LDAModel:
        tp = self._train_params()
        col = self.getFeaturesCol()
        check_features(dataset, col)
        vocab = self.getVocabulary()
        size = declared_size(dataset, col)
        if vocab is not None and size is not None and len(vocab) != size:
            raise CorpusError(
                f"The 'vocabulary' parameter has {len(vocab)} terms but column "
                f"{col!r} holds vectors of size {size}."
            )
        spark = dataset.sparkSession
        initial, initial_desc = _as_topic_model(self.getInitialModel(), spark)
        if initial is not None:
            if initial.k != tp.k:
                raise ParamError(
                    f"The 'k' parameter of LDA ({tp.k}) must equal the initial "
                    f"model's k ({initial.k}) to continue training from it."
                )
            if (
                size is not None
                and (vocab is None or initial.vocab is None)
                and size != initial.vocab_size
            ):
                raise CorpusError(
                    f"Column {col!r} holds vectors of size {size} but the initial "
                    f"model has {initial.vocab_size} terms; set 'vocabulary' (and "
                    f"save the initial model with its vocabulary) to merge them."
                )
        if self.isSet(self.subsamplingRate):
            n_docs = dataset.count()
            tp.minibatch_size = max(
                1, math.ceil(self.getSubsamplingRate() * n_docs * (1.0 - tp.heldout_fraction))
            )
        source = from_vectors(dataset, col, vocab=vocab)
        # with a checkpoint directory, a killed fit of the same run continues where it was
        result = fit(
            source,
            tp,
            initial_model=initial,
            resume=bool(tp.checkpoint_dir),
            callbacks=self.getCallbacks(),
        )
        tm = result.model
        tm.metadata["evaluations"] = result.evaluations
        if initial is not None:
            tm.metadata["warm_start"] = {
                "initial_model": initial_desc,
                "initial_vocab_size": initial.vocab_size,
                "new_terms": tm.vocab_size - initial.vocab_size,
            }
        model = LDAModel(tm)
        self._copyValues(model)
        model._sync_vocabulary()
        model._report = result.report
        return model

    # -- persistence -------------------------------------------------------
    def write(self) -> MLWriter:
        """A writer of the Params (metadata) and, if ``initialModel`` is a model object, of that
        model in ``initialModel/``."""
        return LDAWriter(self)

    @classmethod
    def read(cls) -> MLReader:
        return LDAReader(cls, LDAModel)
