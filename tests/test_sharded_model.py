"""The model on the executors after training (issue 33, point 3): a :class:`TopicModel`
over term shards (:class:`~sparklda.execution.topics.ShardedTopics`), what training,
evaluation and checkpoints do without collecting V×K, its save and load, the size above
which nothing collects it, and its distributed uses, each compared to the same model held
on the driver."""

from __future__ import annotations

import shutil

import numpy as np
import pytest

from sparklda.api import fit, transform
from sparklda.coherence import CorpusCoherence
from sparklda.errors import SparkLDAError
from sparklda.execution import ShardedExecutor
from sparklda.execution.topics import MAX_DRIVER_MODEL_CONF, ShardedTopics
from sparklda.model import TopicModel
from sparklda.params import TrainParams
from tests.helpers import Crash, CrashAt, planted_source

SCVB0 = {"algorithm": "scvb0", "k": 4, "seed": 3, "minibatch_size": 60, "passes": 2}
# 144 training documents in minibatches of 60: 3 rounds a pass, 6 rounds in all


@pytest.fixture(scope="module")
def source(spark):
    return planted_source(spark)


@pytest.fixture
def no_collect(monkeypatch):
    """Collecting the sharded statistics to the driver fails the test."""

    def refuse(*args, **kwargs):
        raise AssertionError("the V×K statistics were collected to the driver")

    monkeypatch.setattr(ShardedExecutor, "collect_base", refuse)
    monkeypatch.setattr(ShardedTopics, "collect", refuse)


def _fit(source, **kw):
    return fit(source, TrainParams(**{**SCVB0, "heldout_count": 16, **kw}))


@pytest.fixture(scope="module")
def pair(source):
    """(driver placement's result, executors placement's result) of one SCVB0 run."""
    out = []
    for placement in ("driver", "executors"):
        params = TrainParams(
            **{**SCVB0, "heldout_count": 16, "parts_per_slice": 2, "eval_every": 2},
            model_placement=placement,
        )
        coherence = CorpusCoherence("u_mass", top_n=5)  # counted when training ends
        result = fit(source, params, callbacks=[coherence])
        result.report["coherence"] = coherence.result
        out.append(result)
    return tuple(out)


def _vectors(spark, n=12, v=30, seed=1):
    from pyspark.ml.linalg import Vectors

    rng = np.random.default_rng(seed)
    rows = []
    for i in range(n):
        idx = np.sort(rng.choice(v, size=6, replace=False))
        rows.append((i, Vectors.sparse(v, idx.tolist(), rng.integers(1, 4, 6).tolist())))
    rows.append((n, Vectors.sparse(v, [], [])))  # an empty document: θ = 1/K
    return spark.createDataFrame(rows, ["id", "features"]).repartition(3)


def _sharded_copy(model: TopicModel, tmp_path, name="m") -> TopicModel:
    path = str(tmp_path / name)
    model.save(path)
    out = TopicModel.load(path, max_driver_bytes=0)
    assert out.sharded
    return out


# -- training ends with the sharded model ----------------------------------------------


@pytest.mark.slow
def test_training_on_the_executors_never_collects_the_model(source, tmp_path, no_collect):
    result = _fit(
        source,
        model_placement="executors",
        parts_per_slice=2,
        passes=1,  # 3 rounds: each scored, checkpoints after rounds 2 and 3 (the last)
        eval_every=1,
        checkpoint_dir=str(tmp_path / "ck"),
        checkpoint_interval=2,
        keep_checkpoint=True,
    )
    model = result.model
    assert model.sharded and model.shards is not None
    assert (model.vocab_size, model.k) == (source.vocab_size, SCVB0["k"])
    assert len(result.evaluations) == result.report["rounds"]  # every round scored
    assert result.report["checkpoints"]["checkpoints_written"] >= 2


@pytest.mark.slow
def test_the_sharded_model_is_the_driver_placements(pair):
    driver, sharded = pair
    assert sharded.model.sharded and not driver.model.sharded
    np.testing.assert_allclose(sharded.model.topic_word, driver.model.topic_word, rtol=1e-9)
    got = [e["heldout_loglik"] for e in sharded.evaluations]
    want = [e["heldout_loglik"] for e in driver.evaluations]
    assert len(got) == len(want) >= 2
    np.testing.assert_allclose(got, want, rtol=1e-9)
    got, want = (r.report["coherence"]["per_topic"] for r in (sharded, driver))
    np.testing.assert_allclose(got, want, rtol=1e-9)


SVB = {"algorithm": "svb", "learning_offset": 10.0}


@pytest.fixture(scope="module")
def reference(source, pair):
    """``reference(algorithm)``: the driver placement's run of SCVB0 (the pair's) or of SVB
    (made once for the module) on 2 tasks a round, the resumed runs' and the warm starts'."""
    svb: list = []

    def get(algorithm):
        if algorithm == "scvb0":
            return pair[0]
        if not svb:
            svb.append(_fit(source, parts_per_slice=2, **SVB))
        return svb[0]

    return get


@pytest.mark.slow
@pytest.mark.parametrize("algorithm", ["scvb0", "svb"])
def test_a_checkpoint_of_the_shards_resumes_to_the_driver_placements_model(
    source, reference, tmp_path, algorithm, monkeypatch
):
    kw = {"parts_per_slice": 2, "checkpoint_interval": 2, **(SVB if algorithm == "svb" else {})}
    full = reference(algorithm)
    assert full.report["rounds"] == 6  # 2 passes of 3 rounds
    ck = str(tmp_path / "ck")
    params = TrainParams(
        **{**SCVB0, **kw, "heldout_count": 16, "model_placement": "executors", "checkpoint_dir": ck}
    )
    with monkeypatch.context() as m:  # the checkpoints are written from the shards
        m.setattr(ShardedExecutor, "collect_base", _refuse)
        with pytest.raises(Crash):
            fit(source, params, callbacks=[CrashAt(5)])
        shutil.copytree(ck, tmp_path / "ck_driver")  # what the driver placement resumes from
        resumed = fit(source, params, resume=True)
    assert resumed.report["resumed_after_round"] == 4  # mid-pass
    np.testing.assert_allclose(resumed.model.topic_word, full.model.topic_word, rtol=1e-9)
    # the driver placement resumes from the same shards, collected (they fit)
    on_driver = fit(
        source,
        TrainParams(
            **{
                **params.to_dict(),
                "model_placement": "driver",
                "checkpoint_dir": str(tmp_path / "ck_driver"),
            }
        ),
        resume=True,
    )
    assert on_driver.report["resumed_after_round"] == 4
    np.testing.assert_allclose(on_driver.model.topic_word, full.model.topic_word, rtol=1e-9)


def _refuse(*args, **kwargs):
    raise AssertionError("the V×K statistics were collected to the driver")


# -- save and load ---------------------------------------------------------------------


@pytest.mark.slow
def test_a_sharded_model_saves_in_the_format_todays_loader_reads(pair, tmp_path):
    driver, sharded = pair
    path = str(tmp_path / "sharded")
    sharded.model.save(path)
    loaded = TopicModel.load(path)  # small: on the driver, as every model before
    assert not loaded.sharded
    np.testing.assert_array_equal(loaded.topic_word, sharded.model.topic_word)
    np.testing.assert_allclose(loaded.topic_word, driver.model.topic_word, rtol=1e-9)
    assert loaded.vocab == driver.model.vocab
    np.testing.assert_array_equal(loaded.alpha, sharded.model.alpha)
    assert loaded.metadata["params"]["model_placement"] == "executors"


@pytest.mark.slow
def test_a_large_model_loads_sharded_and_round_trips(pair, tmp_path, spark):
    driver, sharded = pair
    path = str(tmp_path / "sharded")
    sharded.model.save(path)
    nbytes = 8 * sharded.model.vocab_size * sharded.model.k
    spark.conf.set(MAX_DRIVER_MODEL_CONF, str(nbytes))
    try:
        assert not TopicModel.load(path).sharded
        spark.conf.set(MAX_DRIVER_MODEL_CONF, str(nbytes - 1))
        again = TopicModel.load(path)
    finally:
        spark.conf.unset(MAX_DRIVER_MODEL_CONF)
    assert again.sharded and again.vocab == driver.model.vocab
    np.testing.assert_array_equal(again.topic_word, sharded.model.topic_word)
    # saved again from its shards, loaded on the driver: the same bits
    again.save(str(tmp_path / "again"))
    np.testing.assert_array_equal(
        TopicModel.load(str(tmp_path / "again")).topic_word, sharded.model.topic_word
    )


def test_a_model_saved_from_the_driver_loads_sharded(tmp_path, spark):
    rng = np.random.default_rng(0)
    tw = rng.gamma(1.0, 5.0, size=(23, 3))
    model = TopicModel(tw, [0.1, 0.2, 0.3], 0.05, [f"t{i}" for i in range(23)], {"mode": "x"})
    loaded = _sharded_copy(model, tmp_path)
    assert loaded.shards is not None and loaded.shards.n_shards == 2
    np.testing.assert_array_equal(loaded.topic_word, tw)
    np.testing.assert_array_equal(loaded.alpha, model.alpha)
    assert loaded.vocab == model.vocab and loaded.metadata["mode"] == "x"
    np.testing.assert_array_equal(loaded.shards.column_sums(), tw[:12].sum(0) + tw[12:].sum(0))
    loaded.save(str(tmp_path / "again"))  # written from the shards, read on the driver
    again = TopicModel.load(str(tmp_path / "again"))
    assert not again.sharded and again.vocab == model.vocab
    np.testing.assert_array_equal(again.topic_word, tw)


def test_a_damaged_table_is_refused_when_loading_sharded(tmp_path, spark):
    from sparklda.errors import ModelFormatError

    model = TopicModel(np.ones((10, 2)), 0.1, 0.01)
    path = str(tmp_path / "m")
    model.save(path)
    version = next(p for p in (tmp_path / "m").iterdir() if p.name.startswith("v"))
    topics = str(version / "topics")
    frame = spark.read.parquet(topics)
    short = frame.filter("term_index != 4").toPandas()

    shutil.rmtree(topics)
    spark.createDataFrame(short, frame.schema).write.parquet(topics)
    with pytest.raises(ModelFormatError, match=r"does not hold k=2 weights for each of the terms"):
        TopicModel.load(path, max_driver_bytes=0)


def test_a_sharded_model_with_a_non_finite_statistic_is_not_saved(tmp_path, spark):
    tw = np.ones((10, 2))
    tw[7, 1] = np.nan
    model = TopicModel(np.ones((10, 2)), 0.1, 0.01)
    sharded = _sharded_copy(model, tmp_path)
    bad = TopicModel(sharded.shards.map_rows(lambda lo, rows: tw[lo : lo + len(rows)]), 0.1, 0.01)
    with pytest.raises(SparkLDAError, match=r"1 non-finite values \(first: term 7, topic 1\)"):
        bad.save(str(tmp_path / "bad"))


# -- collecting only below a size the user sets ----------------------------------------


def test_collecting_a_large_sharded_model_is_refused_naming_the_bytes_and_the_setting(
    tmp_path, spark
):
    from sparklda.ml import LDAModel

    model = TopicModel(np.ones((50, 4)), 0.1, 0.01)  # 8·V·K = 1600 bytes
    sharded = _sharded_copy(model, tmp_path)
    ml = LDAModel(sharded)
    assert ml.isDistributed()
    df = _vectors(spark, v=50)
    spark.conf.set(MAX_DRIVER_MODEL_CONF, "1000")
    try:
        for call in (
            sharded.topics_matrix,
            lambda: sharded.topic_word,
            ml.topicsMatrix,
            lambda: ml.toPyLDAvis(df),
        ):
            with pytest.raises(SparkLDAError) as e:
                call()
            msg = str(e.value)
            assert "has 1600 bytes" in msg and "more than the 1000 bytes" in msg
            assert MAX_DRIVER_MODEL_CONF in msg
        spark.conf.set(MAX_DRIVER_MODEL_CONF, "1600")
        np.testing.assert_array_equal(sharded.topics_matrix(), model.topics_matrix())
    finally:
        spark.conf.unset(MAX_DRIVER_MODEL_CONF)


# -- the distributed uses equal the driver's ---------------------------------------------


@pytest.fixture(scope="module")
def models(tmp_path_factory, spark):
    """(a model on the driver, the same model loaded sharded), V=30, K=3, learned α."""
    rng = np.random.default_rng(4)
    tw = rng.gamma(0.5, 20.0, size=(30, 3))
    tw[3] = tw[17]  # tied rows: the top terms keep term order
    model = TopicModel(tw, [0.3, 0.1, 0.2], 0.05, [f"w{i}" for i in range(30)])
    return model, _sharded_copy(model, tmp_path_factory.mktemp("models"))


def test_describe_topics_of_the_shards_is_the_drivers(models):
    driver, sharded = models
    for n in (1, 5, 30, 100):
        want, got = driver.describe_topics(n), sharded.describe_topics(n)
        for w, g in zip(want, got, strict=True):
            assert g["termIndices"] == w["termIndices"] and g["terms"] == w["terms"]
            np.testing.assert_allclose(g["termWeights"], w["termWeights"], rtol=1e-12)


@pytest.mark.slow
def test_transform_of_the_shards_is_the_drivers(models, spark):
    driver, sharded = models
    df = _vectors(spark)
    want = {r.id: r.topicDistribution.toArray() for r in driver.transform(df).collect()}
    got = {r.id: r.topicDistribution.toArray() for r in sharded.transform(df).collect()}
    assert sorted(got) == sorted(want)
    for i in want:
        np.testing.assert_allclose(got[i], want[i], rtol=1e-9)
    np.testing.assert_allclose(got[12], driver.alpha / driver.alpha.sum())  # the prior mean
    api = {r.id: r.topicDistribution.toArray() for r in transform(sharded, df).collect()}
    for i in want:
        np.testing.assert_allclose(api[i], want[i], rtol=1e-9)


@pytest.mark.slow
def test_held_out_scores_of_the_shards_are_the_drivers(models, spark):
    from sparklda.ml import LDAModel

    driver, sharded = models
    df = _vectors(spark, n=20)
    for evaluator in ("completion", "left_to_right"):
        a = LDAModel(driver).setEvaluator(evaluator).setSeed(2)
        b = LDAModel(sharded).setEvaluator(evaluator).setSeed(2)
        np.testing.assert_allclose(b.logLikelihood(df), a.logLikelihood(df), rtol=1e-9)
        np.testing.assert_allclose(b.logPerplexity(df), a.logPerplexity(df), rtol=1e-9)


@pytest.mark.slow
def test_coherence_and_pyldavis_of_the_shards_are_the_drivers(models, spark):
    from sparklda.ml import LDAModel

    driver, sharded = models
    df = _vectors(spark, n=20)
    for measure in ("u_mass", "c_npmi"):
        np.testing.assert_allclose(
            sharded.coherence(df, measure, top_n=4), driver.coherence(df, measure, top_n=4)
        )
    got, want = LDAModel(sharded).toPyLDAvis(df), LDAModel(driver).toPyLDAvis(df)
    np.testing.assert_array_equal(got["topic_term_dists"], want["topic_term_dists"])
    np.testing.assert_allclose(got["doc_topic_dists"], want["doc_topic_dists"], rtol=1e-9)
    assert got["vocab"] == want["vocab"]


def test_the_ml_wrapper_of_a_sharded_model_describes_saves_and_loads_it(models, tmp_path):
    from sparklda.ml import LDAModel

    driver, sharded = models
    ml = LDAModel(sharded)
    want = LDAModel(driver).describeTopics(4).collect()
    got = ml.describeTopics(4).collect()
    assert [r.termIndices for r in got] == [r.termIndices for r in want]
    assert [r.terms for r in got] == [r.terms for r in want]
    renamed = ml.setVocabulary([f"v{i}" for i in range(30)])
    assert renamed.topicModel.sharded and renamed.topicModel.shards is sharded.shards
    path = str(tmp_path / "ml")
    ml.write().save(path)
    back = LDAModel.load(path)
    assert not back.isDistributed() and back.topicModel.vocab[0] == "v0"
    np.testing.assert_array_equal(back.topicModel.topic_word, driver.topic_word)


@pytest.mark.slow
@pytest.mark.parametrize("algorithm", ["scvb0", "svb"])
def test_a_warm_start_from_a_sharded_model_stays_on_the_executors(
    source, reference, tmp_path, algorithm, monkeypatch
):
    first = reference(algorithm)  # any earlier run: the one the tests above compare with
    initial = _sharded_copy(first.model, tmp_path)
    again = {**SCVB0, "passes": 1, "parts_per_slice": 2, "seed": 5}
    if algorithm == "svb":
        again.update(SVB)
    driver = fit(source, TrainParams(**again), initial_model=first.model)
    with monkeypatch.context() as m:
        m.setattr(ShardedExecutor, "collect_base", _refuse)
        m.setattr(ShardedTopics, "collect", _refuse)
        sharded = fit(
            source, TrainParams(**again, model_placement="executors"), initial_model=initial
        )
    np.testing.assert_allclose(sharded.model.topic_word, driver.model.topic_word, rtol=1e-9)
    # the driver placement collects the sharded initial model (it fits)
    collected = fit(source, TrainParams(**again), initial_model=initial)
    np.testing.assert_array_equal(collected.model.topic_word, driver.model.topic_word)


@pytest.mark.slow
def test_a_sharded_model_grows_by_zero_rows_and_recuts(models):
    _, sharded = models
    tw = sharded.topic_word
    grown = sharded.shards.extended(37)
    assert grown.n_shards == 2 and grown.shape == (37, 3)
    np.testing.assert_array_equal(grown.collect(), np.vstack([tw, np.zeros((7, 3))]))
    for n in (1, 3, 30):
        recut = sharded.shards.recut(n)
        assert recut.n_shards == n
        np.testing.assert_array_equal(recut.collect(), tw)
