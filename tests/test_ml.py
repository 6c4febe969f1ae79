"""The pyspark.ml layer: drop-in switch from pyspark's LDA, Param checks, persistence."""

from __future__ import annotations

import os

import numpy as np
import pytest

from tests.helpers import kos_word_docs, no_spark_job

K = 4


@pytest.fixture(scope="module")
def words_df(spark):
    """200 KOS documents as token lists, plus an empty one and one whose only term is rare."""
    rows = kos_word_docs(0, 200) + [(10_000, []), (10_001, ["zzzunique"])]
    df = spark.createDataFrame(rows, "id long, words array<string>").cache()
    df.count()
    yield df
    df.unpersist()


@pytest.fixture(scope="module")
def counted(words_df):
    from pyspark.ml.feature import CountVectorizer

    cv = CountVectorizer(inputCol="words", outputCol="features", minDF=2.0).fit(words_df)
    df = cv.transform(words_df).cache()
    df.count()
    yield cv, df
    df.unpersist()


@pytest.fixture(scope="module")
def fitted(counted):
    from sparklda import LDA

    cv, df = counted
    return LDA(k=K, maxIter=3, seed=5, minibatchSize=100, vocabulary=cv.vocabulary).fit(df)


# --------------------------------------------------------------------------
# The switch: one script, two imports


def lda_script(LDA, words_df, tmp):
    """A user's script written for pyspark.ml.clustering.LDA; returns what it observed."""
    from pyspark.ml import Pipeline, PipelineModel
    from pyspark.ml.feature import CountVectorizer

    cv = CountVectorizer(inputCol="words", outputCol="features", minDF=2.0).fit(words_df)
    df = cv.transform(words_df)
    lda = LDA(
        k=K,
        maxIter=4,
        seed=7,
        optimizer="online",
        learningOffset=64.0,
        learningDecay=0.6,
        subsamplingRate=0.5,
        docConcentration=[0.3] * K,
        topicConcentration=0.05,
        checkpointInterval=10,
        featuresCol="features",
        topicDistributionCol="topicDistribution",
    )
    lda.setMaxIter(3)
    model = lda.fit(df)
    out = model.transform(df)
    theta = {
        r.id: r.topicDistribution.toArray() for r in out.select("id", "topicDistribution").collect()
    }
    topics = model.describeTopics(3)
    tm = model.topicsMatrix()

    model.write().overwrite().save(os.path.join(tmp, "model"))
    loaded = type(model).load(os.path.join(tmp, "model"))
    theta_loaded = {
        r.id: r.topicDistribution.toArray()
        for r in loaded.transform(df).select("id", "topicDistribution").collect()
    }
    lda.write().overwrite().save(os.path.join(tmp, "estimator"))
    lda_loaded = type(lda).load(os.path.join(tmp, "estimator"))

    pipe = Pipeline(
        stages=[
            CountVectorizer(inputCol="words", outputCol="features", minDF=2.0),
            LDA(k=K, maxIter=2, seed=3),
        ]
    )
    pm = pipe.fit(words_df)
    pm.write().overwrite().save(os.path.join(tmp, "pipeline"))
    pm2 = PipelineModel.load(os.path.join(tmp, "pipeline"))
    piped = pm2.transform(words_df)

    def fields(schema):
        return [(f.name, f.dataType.simpleString(), f.nullable) for f in schema.fields]

    return {
        "transform_schema": fields(out.schema),
        "describe_schema": fields(topics.schema),
        "describe_rows": topics.count(),
        "matrix_shape": (tm.numRows, tm.numCols),
        "topics": tm.toArray(),
        "vocab_size": model.vocabSize(),
        "doc_concentration_size": len(model.estimatedDocConcentration()),
        "loglik": model.logLikelihood(df),
        "logperplexity": model.logPerplexity(df),
        "theta": theta,
        "theta_loaded": theta_loaded,
        "estimator_k": lda_loaded.getK(),
        "estimator_maxiter": lda_loaded.getMaxIter(),
        "pipeline_schema": fields(piped.schema),
        "pipeline_rows": piped.count(),
        "pipeline_stage": type(pm2.stages[-1]).__name__,
    }


@pytest.mark.slow
def test_same_script_runs_with_pyspark_lda_and_sparklda(spark, words_df, tmp_path):
    from pyspark.ml.clustering import LDA as SparkLDA

    import sparklda

    theirs = lda_script(SparkLDA, words_df, str(tmp_path / "pyspark"))
    ours = lda_script(sparklda.LDA, words_df, str(tmp_path / "sparklda"))
    n_docs = words_df.count()
    for res in (theirs, ours):
        v = res["vocab_size"]
        assert res["matrix_shape"] == (v, K)
        assert res["describe_rows"] == K
        assert res["doc_concentration_size"] == K
        assert np.isfinite(res["loglik"]) and res["loglik"] < 0
        assert 0 < res["logperplexity"] < np.log(v) + 1
        assert len(res["theta"]) == n_docs and res["pipeline_rows"] == n_docs
        assert res["estimator_k"] == K and res["estimator_maxiter"] == 3
        for doc_id, th in res["theta"].items():
            np.testing.assert_allclose(res["theta_loaded"][doc_id], th, atol=1e-9)
    for key in ("transform_schema", "describe_schema", "pipeline_schema", "vocab_size"):
        assert ours[key] == theirs[key], key
    assert theirs["pipeline_stage"] == "LocalLDAModel" and ours["pipeline_stage"] == "LDAModel"
    # documents with no known term: pyspark gives zeros, sparklda the uniform 1/K
    for doc_id in (10_000, 10_001):
        np.testing.assert_array_equal(theirs["theta"][doc_id], np.zeros(K))
        np.testing.assert_allclose(ours["theta"][doc_id], np.full(K, 1 / K))
    for th in ours["theta"].values():
        assert th.sum() == pytest.approx(1.0)


# --------------------------------------------------------------------------
# Params


def test_params_have_pyspark_names_defaults_and_setters(spark):  # pyspark LDA needs the JVM
    from pyspark.ml.clustering import LDA as SparkLDA

    from sparklda import LDA

    ours, theirs = LDA(), SparkLDA()
    for p in theirs.params:
        assert ours.hasParam(p.name), p.name
    for name in (
        "k",
        "maxIter",
        "checkpointInterval",
        "learningOffset",
        "learningDecay",
        "subsamplingRate",
        "optimizer",
        "topicDistributionCol",
        "featuresCol",
    ):
        assert ours.getOrDefault(name) == theirs.getOrDefault(name), name
    lda = LDA().setK(7).setAlgorithm("scvb0").setBurnInPasses(2).setVocabulary(["a", "b"])
    assert (lda.getK(), lda.getBurnInPasses(), lda.getVocabulary()) == (7, 2, ["a", "b"])
    assert LDA(docConcentration=0.2).getDocConcentration() == [0.2]
    with pytest.raises(TypeError, match="k"):
        LDA(k=1.5)
    with pytest.raises(TypeError, match="initialModel"):
        LDA(initialModel=3)


def test_params_map_onto_train_params():
    from sparklda import LDA

    tp = LDA(
        k=6,
        maxIter=4,
        seed=-3,
        docConcentration=[0.2] * 6,
        topicConcentration=0.05,
        learningOffset=500.0,
        learningDecay=0.8,
        burnInPasses=2,
        stepScale=5.0,
        heldoutFraction=0.1,
        evalEvery=3,
        checkpointInterval=-1,
    )._train_params()
    assert (tp.algorithm, tp.k, tp.passes, tp.alpha, tp.eta) == ("scvb0", 6, 4, 0.2, 0.05)
    assert (tp.tau_phi, tp.kappa_phi, tp.burnin, tp.s_phi) == (500.0, 0.8, 2, 5.0)
    assert (tp.heldout_fraction, tp.eval_every, tp.checkpoint_interval) == (0.1, 3, 0)
    assert 0 <= tp.seed < 2**63
    auto = LDA(docConcentration=[-1.0], topicConcentration=-1.0)._train_params()
    assert (auto.alpha, auto.eta, auto.tau_phi, auto.kappa_phi) == (0.1, 0.01, 1000.0, 0.9)
    from sparklda.params import TrainParams

    assert auto.minibatch_size == TrainParams().minibatch_size  # subsamplingRate: only when set
    assert LDA().getMinibatchSize() == TrainParams().minibatch_size
    from sparklda.modes import MODES

    for modes, kwargs, check in (
        (
            "svb",
            dict(algorithm="svb", learningOffset=64.0, learningDecay=0.6),
            lambda tp: (tp.learning_offset, tp.learning_decay, tp.tau_phi) == (64.0, 0.6, 1000.0),
        ),
        ("cvb0", dict(optimizer="em"), lambda tp: tp.algorithm == "cvb0"),
    ):
        if modes in MODES:
            assert check(LDA(**kwargs)._train_params())
        else:  # another mode not built yet: a clear error
            with pytest.raises(ValueError, match=f"The '{modes}' algorithm is not available"):
                LDA(**kwargs)._train_params()


BAD_PARAMS = [
    (dict(k=1), "The 'k' parameter of LDA must be an int in the range [2, inf). Got 1 instead."),
    (
        dict(maxIter=0),
        "The 'maxIter' parameter of LDA must be an int in the range [1, inf). Got 0 instead.",
    ),
    (
        dict(learningDecay=0.5),
        "The 'learningDecay' parameter of LDA must be a float in the "
        "range (0.5, 1]. Got 0.5 instead.",
    ),
    (
        dict(learningOffset=-1.0),
        "The 'learningOffset' parameter of LDA must be a float in the "
        "range (0, inf). Got -1.0 instead.",
    ),
    (
        dict(subsamplingRate=1.5),
        "The 'subsamplingRate' parameter of LDA must be a float in the "
        "range (0, 1]. Got 1.5 instead.",
    ),
    (
        dict(heldoutFraction=1.0),
        "The 'heldoutFraction' parameter of LDA must be a float in the "
        "range [0, 1). Got 1.0 instead.",
    ),
    (
        dict(burnInPasses=-1),
        "The 'burnInPasses' parameter of LDA must be an int in the range [0, inf). Got -1 instead.",
    ),
    (
        dict(checkpointInterval=0),
        "The 'checkpointInterval' parameter of LDA must be an int in "
        "the range [1, inf), or -1 to disable checkpoints. Got 0 "
        "instead.",
    ),
    (
        dict(k=2, docConcentration=[0.1, 0.2]),
        "The 'docConcentration' parameter of LDA must be symmetric",
    ),
    (dict(k=2, docConcentration=[0.1] * 3), "or a list of 1 or k=2 such floats"),
    (dict(docConcentration=0.0), "Got [0.0] instead."),
    (
        dict(topicConcentration=0.0),
        "The 'topicConcentration' parameter of LDA must be a float "
        "in the range (0, 10000], or None or -1 for the algorithm's default (0.01; "
        "'map': 1.1). "
        "Got 0.0 instead.",
    ),
    (
        dict(optimizer="nmf"),
        "The 'optimizer' parameter of LDA must be one of ['em', 'online', "
        "'scvb0', 'cvb0', 'cvb', 'svb', 'map', 'gibbs']. Got 'nmf' instead.",
    ),
    (dict(algorithm="lsa"), "The 'algorithm' parameter of LDA must be one of"),
    (
        dict(optimizer="em", algorithm="scvb0"),
        "The 'optimizer' parameter ('em', i.e. 'cvb0') "
        "and the 'algorithm' parameter ('scvb0') of LDA "
        "disagree",
    ),
    (dict(subsamplingRate=0.1, minibatchSize=10), "set only one"),
    (
        dict(learningOffset=1.0),
        "The first step stepScale/learningOffset^learningDecay of LDA "
        "must be at most 1. Got 10 from",
    ),
]


@pytest.mark.parametrize("kwargs,message", BAD_PARAMS, ids=[",".join(kw) for kw, _ in BAD_PARAMS])
def test_bad_params_fail_at_fit_before_any_job(spark, counted, kwargs, message):
    from sparklda import LDA

    _, df = counted
    lda = LDA(**kwargs)  # construction never checks ranges ...
    with no_spark_job(spark), pytest.raises(ValueError) as err:
        lda.fit(df)  # ... fit does, first
    assert message in str(err.value)
    # fit(df, params) checks the copy it fits
    with no_spark_job(spark), pytest.raises(ValueError) as err:
        plain = LDA()
        plain.fit(df, {plain.getParam(n): v for n, v in kwargs.items()})
    assert message in str(err.value)


def test_unavailable_algorithm_is_named(spark, counted, monkeypatch):
    from sparklda import LDA
    from sparklda.modes import MODES

    registry = dict(MODES)  # restored in its order (delitem's undo would append scvb0)
    del MODES["scvb0"]
    try:
        with (
            no_spark_job(spark),
            pytest.raises(
                ValueError, match="The 'scvb0' algorithm is not available in this installation"
            ),
        ):
            LDA().fit(counted[1])
    finally:
        MODES.clear()
        MODES.update(registry)


@pytest.mark.slow
def test_data_checks_before_any_job(spark, counted, fitted, words_df):
    from sparklda import LDA
    from sparklda.corpus import CorpusError

    cv, df = counted
    with no_spark_job(spark):
        with pytest.raises(CorpusError, match="Column 'counts' \\(featuresCol\\) does not exist"):
            LDA(featuresCol="counts").fit(df)
        with pytest.raises(CorpusError, match="must be of type pyspark.ml.linalg.VectorUDT"):
            LDA(featuresCol="words").fit(df)
        with pytest.raises(
            CorpusError,
            match=f"has 2 terms but column 'features' holds vectors of size {len(cv.vocabulary)}",
        ):
            LDA(vocabulary=["a", "b"]).fit(df)
        with pytest.raises(ValueError, match="must equal the initial model's k"):
            LDA(k=K + 1, initialModel=fitted).fit(df)
        with pytest.raises(
            FileNotFoundError,
            match="No sparklda model at '/nonexistent/m': expected a TopicModel, an LDAModel",
        ):
            LDA(k=K, initialModel="/nonexistent/m").fit(df)
        with pytest.raises(
            CorpusError, match="'topicDistribution' \\(topicDistributionCol\\) already exists"
        ):
            fitted.transform(fitted.transform(df))
    from pyspark.ml.feature import CountVectorizer

    other = CountVectorizer(inputCol="words", outputCol="features", vocabSize=50).fit(words_df)
    with (
        no_spark_job(spark),
        pytest.raises(CorpusError, match="have size 50 but the model's vocabulary has"),
    ):
        fitted.transform(other.transform(words_df))


# --------------------------------------------------------------------------
# Model API


@pytest.mark.slow
def test_model_api(spark, counted, fitted):
    cv, df = counted
    v = len(cv.vocabulary)
    assert fitted.vocabSize() == v and fitted.getK() == K and not fitted.isDistributed()
    tm = fitted.topicsMatrix().toArray()
    assert tm.shape == (v, K)
    np.testing.assert_allclose(tm.sum(axis=0), 1.0)
    np.testing.assert_allclose(tm, fitted.topicModel.topics_matrix())
    np.testing.assert_allclose(fitted.estimatedDocConcentration().toArray(), np.full(K, 0.1))
    rows = fitted.describeTopics(4).orderBy("topic").collect()
    assert [r.topic for r in rows] == list(range(K))
    for r in rows:
        assert list(r.termWeights) == sorted(r.termWeights, reverse=True)
        assert [cv.vocabulary[i] for i in r.termIndices] == list(r.terms)
        np.testing.assert_allclose(r.termWeights, tm[r.termIndices, r.topic])
    assert fitted.getVocabulary() == cv.vocabulary
    # logLikelihood is the completion score's total, logPerplexity minus its mean
    ll, lp = fitted.logLikelihood(df), fitted.logPerplexity(df)
    from sparklda.corpus import from_vectors

    assert ll < 0 and lp > 0
    # the second halves hold C - floor(C/2) of each document's C tokens
    halves = from_vectors(df, "features").rdd.map(lambda d: d[2].sum() - d[2].sum() // 2).sum()
    assert ll == pytest.approx(-lp * halves, rel=1e-9)
    # the seed Param fixes the random halves (the switch test checks repeatability)
    assert fitted.copy({fitted.seed: 99}).logPerplexity(df) != lp


@pytest.mark.slow
def test_training_history(spark, counted, fitted, tmp_path):
    from sparklda import LDA, LDAModel

    cv, df = counted
    m = LDA(
        k=K,
        maxIter=2,
        seed=1,
        minibatchSize=100,
        heldoutFraction=0.2,
        evalEvery=1,
        vocabulary=cv.vocabulary,
    ).fit(df)
    hist = m.trainingHistory()
    assert len(hist) >= 4 and [h["round"] for h in hist] == sorted(h["round"] for h in hist)
    assert all(np.isfinite(h["heldout_loglik"]) for h in hist)
    # the training clock at each evaluation: positive and rising round by round
    elapsed = [h["elapsed_s"] for h in hist]
    assert 0 < elapsed[0] and elapsed == sorted(set(elapsed))
    assert fitted.trainingHistory() == []  # nothing held out
    m.save(str(tmp_path / "m"))  # it is saved with the model
    assert LDAModel.load(str(tmp_path / "m")).trainingHistory() == hist


# --------------------------------------------------------------------------
# Persistence


@pytest.mark.slow
def test_model_round_trip(spark, counted, fitted, tmp_path):
    from sparklda import LDAModel

    _, df = counted
    model = fitted.copy().setTopicDistributionCol("theta").setSeed(11)
    path = str(tmp_path / "model")
    model.write().save(path)
    names = sorted(os.listdir(path))
    assert names[:2] == ["commits", "metadata"] and names[2].startswith("v000000-")
    assert sorted(os.listdir(os.path.join(path, names[2]))) == ["params", "topicModel"]
    loaded = LDAModel.load(path)
    assert loaded.uid == model.uid
    assert (loaded.getTopicDistributionCol(), loaded.getSeed(), loaded.getK()) == ("theta", 11, K)
    np.testing.assert_array_equal(loaded.topicModel.topic_word, model.topicModel.topic_word)
    assert loaded.topicModel.vocab == model.topicModel.vocab == loaded.getVocabulary()
    a = model.transform(df).select("id", "theta").orderBy("id").collect()
    b = loaded.transform(df).select("id", "theta").orderBy("id").collect()
    assert [r.id for r in a] == [r.id for r in b]
    np.testing.assert_allclose([r.theta.toArray() for r in a], [r.theta.toArray() for r in b])
    with pytest.raises(
        FileExistsError,
        match="already exists. To overwrite it, use write\\(\\).overwrite\\(\\).save\\(path\\)",
    ):
        model.save(path)
    model.setSeed(12).write().overwrite().save(path)
    assert LDAModel.load(path).getSeed() == 12
    from sparklda import LDA

    with pytest.raises(ValueError, match="holds a sparklda.ml.LDAModel, not a sparklda.ml.LDA"):
        LDA.load(path)


@pytest.mark.slow
def test_fitted_pipeline_round_trip_and_warm_start_from_it(spark, words_df, tmp_path):
    from pyspark.ml import Pipeline, PipelineModel
    from pyspark.ml.feature import CountVectorizer

    from sparklda import LDA, LDAModel
    from sparklda.ml import load_topic_model

    pipe = Pipeline(
        stages=[
            CountVectorizer(inputCol="words", outputCol="features", minDF=2.0),
            LDA(k=K, maxIter=2, seed=2, minibatchSize=150),
        ]
    )
    pm = pipe.fit(words_df)
    cv_model, lda_model = pm.stages
    assert isinstance(lda_model, LDAModel)
    lda_model.setVocabulary(cv_model.vocabulary)
    path = str(tmp_path / "pipeline")
    pm.save(path)
    loaded = PipelineModel.load(path)
    assert isinstance(loaded.stages[-1], LDAModel)
    assert loaded.stages[-1].topicModel.vocab == cv_model.vocabulary
    a = pm.transform(words_df).orderBy("id").collect()
    b = loaded.transform(words_df).orderBy("id").collect()
    np.testing.assert_allclose(
        [r.topicDistribution.toArray() for r in a], [r.topicDistribution.toArray() for r in b]
    )
    # the pipeline's directory (or the stage's) is a valid initialModel path
    np.testing.assert_array_equal(
        load_topic_model(path).topic_word, lda_model.topicModel.topic_word
    )
    counted = cv_model.transform(words_df)
    warm = LDA(k=K, maxIter=1, seed=2, initialModel=path, vocabulary=cv_model.vocabulary).fit(
        counted
    )
    assert warm.topicModel.vocab == cv_model.vocabulary
    assert warm.topicModel.metadata["warm_start"]["initial_model"] == path


@pytest.mark.slow
def test_estimator_and_unfitted_pipeline_round_trip(spark, fitted, tmp_path):
    from pyspark.ml import Pipeline
    from pyspark.ml.feature import CountVectorizer

    from sparklda import LDA, LDAModel

    lda = LDA(
        k=K,
        maxIter=7,
        docConcentration=0.3,
        algorithm="scvb0",
        vocabulary=["x"] * 3,
        initialModel=fitted,
    )
    pipe = Pipeline(stages=[CountVectorizer(inputCol="words", outputCol="features"), lda])
    path = str(tmp_path / "pipe")
    pipe.save(path)
    stage = Pipeline.load(path).getStages()[-1]
    assert isinstance(stage, LDA) and stage.uid == lda.uid
    assert (stage.getMaxIter(), stage.getDocConcentration(), stage.getVocabulary()) == (
        7,
        [0.3],
        ["x"] * 3,
    )
    assert stage.isSet(stage.algorithm) and not stage.isSet(stage.optimizer)
    init = stage.getInitialModel()
    assert isinstance(init, LDAModel) and init.uid == fitted.uid
    np.testing.assert_array_equal(init.topicModel.topic_word, fitted.topicModel.topic_word)
    # a path stays a path
    lda2 = LDA(initialModel="/models/previous")
    lda2.save(str(tmp_path / "est"))
    assert LDA.load(str(tmp_path / "est")).getInitialModel() == "/models/previous"


@pytest.mark.slow
def test_saves_go_through_spark_uris_and_overwrite_never_loses_the_model(
    spark, words_df, counted, fitted, tmp_path, monkeypatch
):
    """TopicModel, LDAModel and PipelineModel round-trip through ``file://`` URIs (the
    writers and readers are Spark's, so any URI Spark opens works); an
    ``overwrite()`` that crashes mid-save leaves the previous model loadable."""
    from pyspark.ml import Pipeline, PipelineModel
    from pyspark.ml.feature import CountVectorizer

    from sparklda import LDA, LDAModel
    from sparklda.model import TopicModel
    from sparklda.storage import SparkFiles

    tm_uri = f"file://{tmp_path}/tm"
    fitted.topicModel.save(tm_uri)
    np.testing.assert_array_equal(TopicModel.load(tm_uri).topic_word, fitted.topicModel.topic_word)
    model_uri = f"file://{tmp_path}/lda"
    fitted.write().save(model_uri)
    assert LDAModel.load(model_uri).uid == fitted.uid
    pm = Pipeline(
        stages=[
            CountVectorizer(inputCol="words", outputCol="features", minDF=2.0),
            LDA(k=K, maxIter=1, seed=3, minibatchSize=150),
        ]
    ).fit(words_df)
    pm_uri = f"file://{tmp_path}/pipe"
    pm.write().save(pm_uri)
    np.testing.assert_array_equal(
        PipelineModel.load(pm_uri).stages[-1].topicModel.topic_word,
        pm.stages[-1].topicModel.topic_word,
    )

    # overwrite() of an LDAModel: pyspark's writer would delete the directory first
    other = LDA(k=K, maxIter=1, seed=9, minibatchSize=150).fit(counted[1])

    def boom(self, *a, **k):
        raise OSError("killed mid-save")

    monkeypatch.setattr(SparkFiles, "write_table", boom)
    with pytest.raises(OSError, match="killed mid-save"):
        other.write().overwrite().save(model_uri)
    monkeypatch.undo()
    back = LDAModel.load(model_uri)
    assert back.uid == fitted.uid
    np.testing.assert_array_equal(back.topicModel.topic_word, fitted.topicModel.topic_word)
    other.write().overwrite().save(model_uri)
    assert LDAModel.load(model_uri).uid == other.uid
    # a directory that is not a sparklda model is never overwritten
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("keep")
    with pytest.raises(ValueError, match="is not a sparklda model"):
        fitted.write().overwrite().save(str(tmp_path / "mine"))
    assert (tmp_path / "mine" / "notes.txt").read_text() == "keep"
