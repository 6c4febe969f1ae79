"""The Params of :class:`~sparklda.ml.LDA` and :class:`~sparklda.ml.LDAModel`, and their
mapping onto :class:`sparklda.params.TrainParams`.

Ranges are not checked here a second time: :meth:`_LDAParams._train_params`
maps pyspark's names onto TrainParams fields (:data:`TRAIN_PARAM_NAMES`,
:data:`STEP_PARAM_NAMES`) and calls :func:`sparklda.params.validate_params`,
whose messages then name the pyspark Param (``learningOffset``, not
``tau_phi``). Only the Params without a TrainParams counterpart, or with a
different form (``optimizer``, ``subsamplingRate``, ``checkpointInterval``'s
-1, the lists and "auto" values of ``docConcentration`` and
``topicConcentration``), have records of their own here, checked by the same
:func:`sparklda.params.check_param`.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from dataclasses import replace

from pyspark.ml.base import Model
from pyspark.ml.param import Param, Params, TypeConverters
from pyspark.ml.param.shared import HasCheckpointInterval, HasFeaturesCol, HasMaxIter, HasSeed

from ..corpus import check_vector_column
from ..errors import ParamError
from ..model import TopicModel
from ..modes import MODES
from ..params import (
    ALGORITHMS,
    AUTO_PRIOR,
    BY_NAME,
    DEFAULT_ALPHA,
    DEFAULT_ETA,
    MAP_ETA,
    MAX_PRIOR,
    Constraint,
    TrainParams,
    check_param,
    validate_params,
)

log = logging.getLogger("sparklda.ml")

#: pyspark's ``optimizer`` values and the algorithm each one selects here.
OPTIMIZER_ALIASES = {"online": "scvb0", "em": "cvb0"}
#: Fold-in iterations of transform and of the held-out estimate.
FOLDIN_MAX_ITER = 100
#: The library's defaults, which our own Params follow.
_TP = TrainParams()

#: pyspark Param -> the TrainParams field it sets (for every algorithm).
TRAIN_PARAM_NAMES = {
    "k": "k",
    "maxIter": "passes",
    "seed": "seed",
    "checkpointInterval": "checkpoint_interval",
    "docConcentration": "alpha",
    "topicConcentration": "eta",
    "burnInPasses": "burnin",
    "minibatchSize": "minibatch_size",
    "stepScale": "s_phi",
    "heldoutFraction": "heldout_fraction",
    "evalEvery": "eval_every",
    "timeBudget": "time_budget",
    "checkpointDir": "checkpoint_dir",
    "keepLastCheckpoint": "keep_checkpoint",
    "optimizeDocConcentration": "optimize_alpha",
    "optimizeTopicConcentration": "optimize_eta",
    "seedTopics": "seed_topics",
    "seedConfidence": "seed_confidence",
    "minGain": "min_gain",
    "patience": "patience",
    "execution": "execution",
    "evaluator": "evaluator",
    "particles": "particles",
    "modelPlacement": "model_placement",
}
#: pyspark Param -> the candidate fields; it sets the one whose algorithms (in
#: :data:`sparklda.params.CONSTRAINTS`) include the algorithm in use, and is ignored
#: (with a logged note) when none does.
STEP_PARAM_NAMES = {
    "learningOffset": ("tau_phi", "learning_offset"),
    "learningDecay": ("kappa_phi", "learning_decay"),
}

#: TrainParams field -> the pyspark Param that sets it: how the parameter table's docs
#: (:meth:`sparklda.params.Constraint.text`) name other parameters here.
ML_NAMES = {field: name for name, field in TRAIN_PARAM_NAMES.items()}


def _doc(name: str, note: str = "") -> str:
    """The doc of the Param ``name``, written once in the parameter table: its
    TrainParams field's documentation (other parameters under their pyspark names) and,
    unless ``note`` describes pyspark's form of the value, the field's range."""
    c = BY_NAME[TRAIN_PARAM_NAMES[name]]
    if not note and c.type is not bool:
        note = f"Must be {c.describe()}."
    return f"{c.text(ML_NAMES)} {note}".strip()


def _algorithm_doc() -> str:
    """The ``algorithm`` Param's doc: every mode of the registry with its title."""
    modes = ", ".join(f"{name!r} ({mode.title})" for name, mode in MODES.items())
    return f"Inference algorithm: {modes}."


#: Params with no TrainParams field of the same form, checked by the same validator.
OPTIMIZER = Constraint(
    "optimizer",
    str,
    options=tuple(sorted(OPTIMIZER_ALIASES)) + ALGORITHMS,
    doc="pyspark's name of the algorithm.",
)
SUBSAMPLING_RATE = Constraint(
    "subsamplingRate", float, 0, 1, low_open=True, doc="Fraction of the documents per round."
)
CHECKPOINT_INTERVAL = Constraint(
    "checkpointInterval",
    int,
    1,
    special=(-1,),
    note="or -1 to disable checkpoints",
    doc="Checkpoint every n rounds.",
)
TOPIC_CONCENTRATION = replace(
    BY_NAME["eta"],
    name="topicConcentration",
    special=(-1,),
    note=f"or None or -1 for the algorithm's default ({DEFAULT_ETA}; 'map': {MAP_ETA})",
)


def doc_concentration_constraint(k) -> Constraint:
    """``docConcentration``: α's range, as a number or a list of 1 or ``k`` of them."""
    return replace(
        BY_NAME["alpha"],
        name="docConcentration",
        note=f"or a list of 1 or k={k} such floats (None or [-1] for the algorithm's default "
        f"{DEFAULT_ALPHA}; 'map': 50/k + 1)",
    )


def _to_concentration_list(value):
    """docConcentration: a number or a list of numbers (pyspark takes a list)."""
    if TypeConverters._is_numeric(value):
        return [float(value)]
    return TypeConverters.toListFloat(value)


def _to_seed_topics(value):
    """seedTopics: a mapping {topic: [words or term ids]} (checked at fit)."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise TypeError(f"seedTopics must be a dict {{topic: [words]}}; got {value!r}.")
    return dict(value)


def _to_initial_model(value):
    if value is None or isinstance(value, (str, TopicModel)):
        return value
    if isinstance(value, Model) and isinstance(value, _LDAParams):  # an LDAModel
        return value
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    raise TypeError(
        f"initialModel must be a sparklda LDAModel, a sparklda TopicModel or the path "
        f"of a saved model; got {type(value).__name__}."
    )


class _LDAParams(HasMaxIter, HasFeaturesCol, HasSeed, HasCheckpointInterval):
    """Params shared by :class:`LDA` and :class:`LDAModel` (pyspark's names first)."""

    k = Param(Params._dummy(), "k", _doc("k"), typeConverter=TypeConverters.toInt)
    optimizer = Param(
        Params._dummy(),
        "optimizer",
        "pyspark's name for the inference algorithm: 'online' (= 'scvb0') or 'em' (= 'cvb0'); "
        "sparklda's algorithm names are accepted too. Setting it and 'algorithm' to different "
        "algorithms is an error.",
        typeConverter=TypeConverters.toString,
    )
    learningOffset = Param(
        Params._dummy(),
        "learningOffset",
        "τ of the topic step size: ρ = s/(τ+t)^κ for SCVB0 (τ of ρ^Φ in Foulds et al. 2013, "
        "default 1000), ρ = (τ0+t)^-κ for SVB (τ0 in Hoffman et al. 2010, default 10, t counting "
        "minibatches of 128 documents). "
        "Used only when set explicitly; ignored by CVB0 and CVB. Must be > 0.",
        typeConverter=TypeConverters.toFloat,
    )
    learningDecay = Param(
        Params._dummy(),
        "learningDecay",
        "κ of the topic step size (SCVB0 default 0.9, SVB default 0.7); used only when set "
        "explicitly; ignored by CVB0 and CVB. In (0.5, 1] for convergence.",
        typeConverter=TypeConverters.toFloat,
    )
    subsamplingRate = Param(
        Params._dummy(),
        "subsamplingRate",
        "Fraction of the documents in each round (minibatch), in (0, 1]. Used only when set "
        "explicitly; otherwise minibatchSize applies.",
        typeConverter=TypeConverters.toFloat,
    )
    optimizeDocConcentration = Param(
        Params._dummy(),
        "optimizeDocConcentration",
        _doc("optimizeDocConcentration", "estimatedDocConcentration() returns it."),
        typeConverter=TypeConverters.toBoolean,
    )
    optimizeTopicConcentration = Param(
        Params._dummy(),
        "optimizeTopicConcentration",
        _doc("optimizeTopicConcentration"),
        typeConverter=TypeConverters.toBoolean,
    )
    seedTopics = Param(
        Params._dummy(),
        "seedTopics",
        _doc("seedTopics", "Words are terms of 'vocabulary', or term ids."),
        typeConverter=_to_seed_topics,
    )
    seedConfidence = Param(
        Params._dummy(),
        "seedConfidence",
        _doc("seedConfidence"),
        typeConverter=TypeConverters.toFloat,
    )
    docConcentration = Param(
        Params._dummy(),
        "docConcentration",
        _doc(
            "docConcentration",
            f"A number in (0, {MAX_PRIOR:g}], or a list of 1 or k equal such numbers; None or "
            f"[-1] selects the algorithm's default: {DEFAULT_ALPHA}, and 50/k + 1 for 'map' "
            "(MAP-EM's α must exceed 1; the trained model keeps α − 1, the pseudo-count of "
            "its estimates).",
        ),
        typeConverter=_to_concentration_list,
    )
    topicConcentration = Param(
        Params._dummy(),
        "topicConcentration",
        _doc(
            "topicConcentration",
            f"In (0, {MAX_PRIOR:g}]; None or -1 selects the algorithm's default: "
            f"{DEFAULT_ETA}, and {MAP_ETA} for 'map' (MAP-EM's η must exceed 1; the "
            "trained model keeps η − 1).",
        ),
        typeConverter=TypeConverters.toFloat,
    )
    topicDistributionCol = Param(
        Params._dummy(),
        "topicDistributionCol",
        "Output column of the documents' topic proportions θ. Documents with no known terms get "
        "the uniform vector 1/K (pyspark: zeros).",
        typeConverter=TypeConverters.toString,
    )
    keepLastCheckpoint = Param(
        Params._dummy(),
        "keepLastCheckpoint",
        _doc("keepLastCheckpoint"),
        typeConverter=TypeConverters.toBoolean,
    )
    # -- ours ---------------------------------------------------------------
    algorithm = Param(
        Params._dummy(), "algorithm", _algorithm_doc(), typeConverter=TypeConverters.toString
    )
    burnInPasses = Param(
        Params._dummy(), "burnInPasses", _doc("burnInPasses"), typeConverter=TypeConverters.toInt
    )
    minibatchSize = Param(
        Params._dummy(), "minibatchSize", _doc("minibatchSize"), typeConverter=TypeConverters.toInt
    )
    stepScale = Param(
        Params._dummy(), "stepScale", _doc("stepScale"), typeConverter=TypeConverters.toFloat
    )
    heldoutFraction = Param(
        Params._dummy(),
        "heldoutFraction",
        _doc("heldoutFraction"),
        typeConverter=TypeConverters.toFloat,
    )
    evalEvery = Param(
        Params._dummy(),
        "evalEvery",
        _doc("evalEvery", "See LDAModel.trainingHistory()."),
        typeConverter=TypeConverters.toInt,
    )
    checkpointDir = Param(
        Params._dummy(),
        "checkpointDir",
        _doc("checkpointDir", "Checkpoints every checkpointInterval rounds; None: no checkpoints."),
        typeConverter=TypeConverters.toString,
    )
    timeBudget = Param(
        Params._dummy(), "timeBudget", _doc("timeBudget"), typeConverter=TypeConverters.toFloat
    )
    minGain = Param(
        Params._dummy(), "minGain", _doc("minGain"), typeConverter=TypeConverters.toFloat
    )
    patience = Param(
        Params._dummy(), "patience", _doc("patience"), typeConverter=TypeConverters.toInt
    )
    execution = Param(
        Params._dummy(), "execution", _doc("execution"), typeConverter=TypeConverters.toString
    )
    evaluator = Param(
        Params._dummy(),
        "evaluator",
        _doc("evaluator", "Also LDAModel.logLikelihood's and logPerplexity's."),
        typeConverter=TypeConverters.toString,
    )
    particles = Param(
        Params._dummy(), "particles", _doc("particles"), typeConverter=TypeConverters.toInt
    )
    modelPlacement = Param(
        Params._dummy(),
        "modelPlacement",
        _doc("modelPlacement"),
        typeConverter=TypeConverters.toString,
    )
    vocabulary = Param(
        Params._dummy(),
        "vocabulary",
        "The terms of the vector columns, in index order (e.g. CountVectorizerModel.vocabulary). "
        "Optional; lets describeTopics name the terms and warm starts merge vocabularies.",
        typeConverter=TypeConverters.toListString,
    )
    initialModel = Param(
        Params._dummy(),
        "initialModel",
        "Warm start: continue training from this model (an LDAModel, a TopicModel, or the path of "
        "a saved LDAModel, TopicModel or PipelineModel). Its terms keep their ids; new terms of "
        "'vocabulary' are appended and start from the prior.",
        typeConverter=_to_initial_model,
    )

    def __init__(self, *args):
        super().__init__(*args)
        self._setDefault(
            maxIter=20,
            checkpointInterval=10,
            k=10,
            optimizer="online",
            learningOffset=1024.0,
            learningDecay=0.51,
            subsamplingRate=0.05,
            optimizeDocConcentration=False,
            optimizeTopicConcentration=False,
            seedTopics={},
            seedConfidence=_TP.seed_confidence,
            docConcentration=None,
            topicConcentration=None,
            topicDistributionCol="topicDistribution",
            keepLastCheckpoint=True,
            seed=0,
            algorithm=_TP.algorithm,
            burnInPasses=_TP.burnin,
            minibatchSize=_TP.minibatch_size,
            stepScale=_TP.s_phi,
            heldoutFraction=0.0,
            evalEvery=0,
            timeBudget=0.0,
            minGain=_TP.min_gain,
            patience=_TP.patience,
            execution=_TP.execution,
            evaluator=_TP.evaluator,
            particles=_TP.particles,
            modelPlacement=_TP.model_placement,
            checkpointDir=None,
            vocabulary=None,
            initialModel=None,
        )

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

    def getOptimizeTopicConcentration(self) -> bool:
        return self.getOrDefault(self.optimizeTopicConcentration)

    def getSeedTopics(self) -> dict:
        return self.getOrDefault(self.seedTopics)

    def getSeedConfidence(self) -> float:
        return self.getOrDefault(self.seedConfidence)

    def getDocConcentration(self):
        return self.getOrDefault(self.docConcentration)

    def getTopicConcentration(self):
        return self.getOrDefault(self.topicConcentration)

    def getTopicDistributionCol(self) -> str:
        return self.getOrDefault(self.topicDistributionCol)

    def getKeepLastCheckpoint(self) -> bool:
        return self.getOrDefault(self.keepLastCheckpoint)

    def getCheckpointDir(self) -> str | None:
        return self.getOrDefault(self.checkpointDir)

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

    def getMinGain(self) -> float:
        return self.getOrDefault(self.minGain)

    def getPatience(self) -> int:
        return self.getOrDefault(self.patience)

    def getExecution(self) -> str:
        return self.getOrDefault(self.execution)

    def getEvaluator(self) -> str:
        return self.getOrDefault(self.evaluator)

    def getParticles(self) -> int:
        return self.getOrDefault(self.particles)

    def getModelPlacement(self) -> str:
        return self.getOrDefault(self.modelPlacement)

    def getVocabulary(self):
        return self.getOrDefault(self.vocabulary)

    def getInitialModel(self):
        return self.getOrDefault(self.initialModel)

    # -- mapping onto TrainParams ------------------------------------------
    def _algorithm(self) -> tuple[str, str]:
        """(algorithm, the Param that chose it): ``algorithm``, or ``optimizer`` when only
        that one is set; setting both to different algorithms is an error."""
        opt = self.getOptimizer()
        check_param(OPTIMIZER, opt)
        from_opt = OPTIMIZER_ALIASES.get(opt, opt)
        alg = self.getAlgorithm()
        check_param(BY_NAME["algorithm"], alg, name="algorithm")
        if self.isSet(self.algorithm) and self.isSet(self.optimizer) and from_opt != alg:
            raise ParamError(
                f"The 'optimizer' parameter ({opt!r}, i.e. {from_opt!r}) and the "
                f"'algorithm' parameter ({alg!r}) of LDA disagree; set only one."
            )
        if not self.isSet(self.algorithm) and self.isSet(self.optimizer):
            return from_opt, "optimizer"
        return alg, "algorithm"

    def _alpha(self) -> float:
        vals = self.getDocConcentration()
        if vals is None or list(vals) == [-1.0]:
            return AUTO_PRIOR  # the algorithm's (sparklda.params.default_alpha)
        vals = list(vals)
        c = doc_concentration_constraint(self.getK())
        if len(vals) not in (1, self.getK()) or not all(c.accepts(v) for v in vals):
            raise c.error(vals)
        if len(set(vals)) > 1:
            raise ParamError(
                f"The 'docConcentration' parameter of LDA must be symmetric (one α "
                f"for every topic: a float or a list of equal floats); sparklda does "
                f"not support an asymmetric α. Got {vals!r} instead."
            )
        return float(vals[0])

    def _eta(self) -> float:
        eta = self.getTopicConcentration()
        if eta is None:
            return AUTO_PRIOR  # the algorithm's (sparklda.params.default_eta)
        check_param(TOPIC_CONCENTRATION, eta)
        return AUTO_PRIOR if eta == -1 else eta

    def _seed(self) -> int:
        return int(self.getSeed()) & (2**63 - 1)

    def _param_value(self, name: str):
        """The value a Param gives its TrainParams field."""
        if name == "docConcentration":
            return self._alpha()
        if name == "topicConcentration":
            return self._eta()
        if name == "seed":
            return self._seed()
        if name == "checkpointDir":
            return self.getCheckpointDir() or ""
        if name == "checkpointInterval":
            ci = self.getCheckpointInterval()
            check_param(CHECKPOINT_INTERVAL, ci)
            return 0 if ci == -1 else ci
        return self.getOrDefault(self.getParam(name))

    def _train_params(self) -> TrainParams:
        """The :class:`TrainParams` these Params select, validated by
        :func:`sparklda.params.validate_params` (messages name the pyspark Params); raises
        :class:`~sparklda.errors.ParamError`. Runs no Spark job."""
        check_param(SUBSAMPLING_RATE, self.getSubsamplingRate())
        if self.isSet(self.subsamplingRate) and self.isSet(self.minibatchSize):
            raise ParamError(
                "The 'subsamplingRate' and 'minibatchSize' parameters of LDA both "
                "set the documents per round; set only one."
            )
        algorithm, chosen_by = self._algorithm()
        values = {"algorithm": algorithm, "foldin_max_iter": FOLDIN_MAX_ITER}
        aliases = {"algorithm": chosen_by}
        for name, field in TRAIN_PARAM_NAMES.items():
            values[field] = self._param_value(name)
            aliases[field] = name
            if self.isSet(name) and not BY_NAME[field].applies_to(algorithm):
                log.info("LDA: %s is not used by the %s algorithm.", name, algorithm)
        for name, candidates in STEP_PARAM_NAMES.items():
            field = next((f for f in candidates if BY_NAME[f].applies_to(algorithm)), None)
            if field is None:
                if self.isSet(name):
                    log.info("LDA: %s is ignored by the %s algorithm.", name, algorithm)
                continue
            aliases[field] = name
            if self.isSet(name):
                values[field] = self.getOrDefault(name)
        tp = validate_params(values, "LDA", aliases=aliases)
        if algorithm not in MODES:
            raise ParamError(
                f"The {algorithm!r} algorithm is not available in this installation "
                f"of sparklda; available: {sorted(MODES)}."
            )
        return tp


# --------------------------------------------------------------------------
# Column checks (driver side, no Spark job)


def check_features(dataset, col: str) -> None:
    """``col`` exists and holds Spark ML vectors (:func:`sparklda.corpus.check_vector_column`)."""
    check_vector_column(dataset, col)
