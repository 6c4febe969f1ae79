"""``pyspark.ml`` Estimator and Model over the library: :class:`LDA`, :class:`LDAModel`.

A drop-in for :class:`pyspark.ml.clustering.LDA`: the same Param names and
meanings where pyspark has them (``k``, ``maxIter``, ``seed``,
``featuresCol``, ``topicDistributionCol``, ``docConcentration``,
``topicConcentration``, ``learningOffset``, ``learningDecay``,
``subsamplingRate``, ``checkpointInterval``, ``optimizer``, ...), plus ours
(``algorithm``, ``burnInPasses``, ``minibatchSize``, ``stepScale``,
``heldoutFraction``, ``evalEvery``, ``timeBudget``, ``execution``, ``vocabulary``,
``initialModel``). Both classes are ``MLWritable``/``MLReadable`` and work as
stages of a :class:`pyspark.ml.Pipeline` (for example after a
``CountVectorizer``), including ``PipelineModel.save``/``load``.

There is no second implementation here: :meth:`LDA.fit` turns the Params into
:class:`sparklda.params.TrainParams` (checked by the library's one validator,
:func:`sparklda.params.validate_params`, with messages naming pyspark's
Params), reads the vectors with :func:`sparklda.corpus.from_vectors` and
calls :func:`sparklda.api.fit`;
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
* ``learningOffset`` and ``learningDecay`` are τ and κ of SCVB0's topic step
  ρ^Φ or τ0 and κ of SVB's step, and apply only when set; CVB0 and CVB have no
  step size and ignore them (with a logged note).
* ``docConcentration`` is a symmetric α (a number, or a list of equal
  values); with ``optimizeDocConcentration`` an asymmetric α is learned from
  it during training (Minka's fixed point for SCVB0, CVB0 and CVB, Hoffman's
  Newton step for SVB; ``LDAModel.estimatedDocConcentration()`` returns it),
  and ``optimizeTopicConcentration`` learns a symmetric η. The defaults are
  α = 0.1 and η = 0.01 (pyspark: 1/K + 1 and 1.1 for EM, 1/K for online).
* The default ``seed`` is 0 (pyspark's is a hash of the class name, which
  Python randomises per process).

Modules: :mod:`.params` (the Params and their mapping onto TrainParams),
:mod:`.estimator` (:class:`LDA`), :mod:`.model` (:class:`LDAModel`),
:mod:`.persistence` (writers, readers, :func:`load_topic_model`), :mod:`.pipeline`
(crash-safe ``Pipeline``/``PipelineModel`` saves: :func:`save_pipeline`,
:func:`load_pipeline`, and pyspark's ``write()``/``read()`` routed through them).

References
----------
Foulds, Boyles, DuBois, Smyth and Welling (2013). Stochastic collapsed
variational Bayesian inference for latent Dirichlet allocation. KDD.
"""

from __future__ import annotations

from .estimator import LDA
from .model import LDAModel
from .persistence import load_topic_model
from .pipeline import install as _install_pipeline_persistence
from .pipeline import load_pipeline, save_pipeline

# Pipeline/PipelineModel write() and read() of pipelines with sparklda stages go through
# sparklda.ml.pipeline (committed, crash-safe saves; docs/architecture.md, "Pipelines").
_install_pipeline_persistence()

__all__ = ["LDA", "LDAModel", "load_pipeline", "load_topic_model", "save_pipeline"]
