"""The fitted ``pyspark.ml`` Model :class:`LDAModel`, a wrapper of
:class:`sparklda.model.TopicModel`."""

from __future__ import annotations

import numpy as np
from pyspark.ml.base import Model
from pyspark.ml.param import TypeConverters
from pyspark.ml.util import MLReadable, MLReader, MLWritable, MLWriter

from ..api import transform
from ..corpus import check_output_column
from ..errors import CorpusError
from ..execution import backend_for, evaluator_spec
from ..model import TopicModel
from .params import FOLDIN_MAX_ITER, _LDAParams, check_features
from .persistence import LDAModelReader, LDAModelWriter


class LDAModel(Model, _LDAParams, MLReadable, MLWritable):
    """A fitted LDA model: wraps a :class:`sparklda.model.TopicModel`.

    ``transform`` appends ``topicDistributionCol``, each document's topic
    proportions θ inferred with the topics fixed (fold-in on the executors).
    Documents with no known terms (empty or null vectors) get the uniform
    vector 1/K, the prior mean; pyspark's LDAModel returns zeros there.
    """

    # Saved metadata names the class "sparklda.ml.LDAModel" whatever module defines it.
    __module__ = "sparklda.ml"

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

    def setEvaluator(self, value):
        """Set :py:attr:`evaluator` (of :meth:`logLikelihood` and :meth:`logPerplexity`)."""
        return self._set(evaluator=value)

    def setParticles(self, value):
        """Set :py:attr:`particles` (of the 'left_to_right' evaluator)."""
        return self._set(particles=value)

    def setVocabulary(self, value) -> LDAModel:
        """Name the model's terms (e.g. with ``CountVectorizerModel.vocabulary`` after a
        Pipeline was fitted); describeTopics then has a ``terms`` column."""
        tm = self.topicModel
        vocab = TypeConverters.toListString(value)
        if len(vocab) != tm.vocab_size:
            raise CorpusError(
                f"The 'vocabulary' parameter has {len(vocab)} terms but the model "
                f"has {tm.vocab_size}."
            )
        self._topic_model = TopicModel(tm.statistics, tm.alpha, tm.eta, vocab, tm.metadata)
        return self._set(vocabulary=vocab)

    # -- pyspark LDAModel API ----------------------------------------------
    def isDistributed(self) -> bool:
        """Whether the topics live on the executors (a model trained with
        ``modelPlacement="executors"`` or loaded above ``spark.sparklda.driver.maxModelBytes``);
        False when they live on the driver (like pyspark's LocalLDAModel)."""
        return self.topicModel.sharded

    def toLocal(self) -> LDAModel:
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
        """α for each of the K topics: the learned α with optimizeDocConcentration, else the
        given or default value."""
        from pyspark.ml.linalg import DenseVector

        return DenseVector(np.array(self.topicModel.alpha, dtype=np.float64))

    def describeTopics(self, maxTermsPerTopic: int = 10):
        """A DataFrame of each topic's top terms: ``topic``, ``termIndices``,
        ``termWeights`` (φ̂, descending) and, when the vocabulary is known, ``terms``."""
        from pyspark.sql import SparkSession
        from pyspark.sql.types import (
            ArrayType,
            DoubleType,
            IntegerType,
            StringType,
            StructField,
            StructType,
        )

        rows = self.topicModel.describe_topics(maxTermsPerTopic)
        has_terms = self.topicModel.vocab is not None
        fields = [
            StructField("topic", IntegerType(), False),
            StructField("termIndices", ArrayType(IntegerType(), False), True),
            StructField("termWeights", ArrayType(DoubleType(), False), True),
        ]
        if has_terms:
            fields.append(StructField("terms", ArrayType(StringType(), False), True))
        data = [
            (r["topic"], r["termIndices"], r["termWeights"], *([r["terms"]] if has_terms else []))
            for r in rows
        ]
        return SparkSession.active().createDataFrame(data, StructType(fields))

    def _completion(self, dataset):
        col = self.getFeaturesCol()
        check_features(dataset, col)
        tm = self.topicModel
        backend = backend_for(dataset.sparkSession)
        ltr = evaluator_spec(self.getEvaluator(), self.getParticles(), self._seed())
        return backend.score_vectors(
            dataset, col, tm.phi(), tm.alpha, self._seed(), FOLDIN_MAX_ITER, ltr
        )

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

        With ``evaluator="left_to_right"``: Σ_d log p(w_d | Φ̂, α) of the whole
        documents, θ integrated out, by the left-to-right particle estimate (Wallach et
        al. 2009) with ``particles`` particles, seeded by ``seed`` and the row: an
        estimate of the quantity pyspark's bound is below.
        """
        s = self._completion(dataset)
        return float(s.loglik_per_token * s.tokens)

    def logPerplexity(self, dataset) -> float:
        """−(mean per-token log-likelihood) of the second halves, or of the whole documents
        with ``evaluator="left_to_right"`` (see :meth:`logLikelihood`); lower is better,
        perplexity = exp of it. pyspark's is the bound's per-token value."""
        return float(-self._completion(dataset).loglik_per_token)

    def topicCoherence(
        self,
        dataset,
        measure: str = "u_mass",
        topN: int = 10,
        tokensCol: str | None = None,
        windowSize: int | None = None,
    ) -> list[float]:
        """Coherence of each topic's ``topN`` top terms on ``dataset``: a list of K floats
        in topic order (higher is more coherent).

        ``measure="u_mass"`` (Mimno et al. 2011) counts documents in which the terms
        co-occur, from the vectors of ``featuresCol`` (or the token arrays of
        ``tokensCol``). ``measure="c_npmi"`` (normalised PMI, Bouma 2009) counts boolean
        sliding windows of ``windowSize`` tokens (default 10) when ``tokensCol`` names a
        column of token arrays, and whole documents otherwise. The definitions are
        gensim's ``CoherenceModel``'s; the counting runs on Spark over ``dataset``.
        """
        return self.topicModel.coherence(
            dataset,
            measure=measure,
            top_n=topN,
            features_col=self.getFeaturesCol(),
            tokens_col=tokensCol,
            window=windowSize,
        )

    def toPyLDAvis(self, dataset) -> dict:
        """The five inputs of ``pyLDAvis.prepare`` for ``dataset`` (term-count vectors in
        ``featuresCol``), computed on Spark: ``topic_term_dists`` (K × V, rows summing to
        one), ``doc_topic_dists`` (D × K, from :meth:`transform`), ``doc_lengths``,
        ``vocab`` and ``term_frequency``. ``pyLDAvis.prepare(**model.toPyLDAvis(df))``
        draws the topics (``pip install sparklda[viz]``)."""
        col = self.getFeaturesCol()
        check_features(dataset, col)
        return self.topicModel.pyldavis_inputs(dataset, col, FOLDIN_MAX_ITER)

    def trainingHistory(self) -> list[dict]:
        """Held-out evaluations during training (rows with ``round``, ``passes``, ``elapsed_s``,
        ``heldout_loglik``, ``perplexity``); empty when ``heldoutFraction`` was 0."""
        return list(self.topicModel.metadata.get("evaluations", []))

    def _transform(self, dataset):
        col, out = self.getFeaturesCol(), self.getTopicDistributionCol()
        check_features(dataset, col)
        check_output_column(dataset, out)
        # the vectors' size is checked by sparklda.inference.transform_dataframe (the declared
        # size, else the first vector's); a later vector of another size raises at the action
        return transform(self.topicModel, dataset, col, out, FOLDIN_MAX_ITER)

    # -- persistence -------------------------------------------------------
    def write(self) -> MLWriter:
        """A writer of ``path/metadata`` (Params, as pyspark's DefaultParamsWriter) and
        ``path/topicModel`` (:meth:`TopicModel.save`)."""
        return LDAModelWriter(self)

    @classmethod
    def read(cls) -> MLReader:
        return LDAModelReader(cls)
