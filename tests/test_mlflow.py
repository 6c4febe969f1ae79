"""MLflow: the train job's run, the training callback, the pyfunc flavor, mlflow.spark and
autolog with sparklda's stages, all against a SQLite tracking store in a temporary folder
(read back through MlflowClient); and the clear errors without the ``mlflow`` extra."""

from __future__ import annotations

import json
import subprocess
import sys

import mlflow  # the dev extra installs it (test_extras_* simulate its absence)
import numpy as np
import pytest
from mlflow.tracking import MlflowClient

from sparklda.cli import train
from sparklda.cli.config import ConfigError, load_config
from sparklda.errors import MissingExtraError
from tests.helpers import write_config

TEXTS = [
    "apple banana apple fruit orchard",
    "engine wheel car road engine",
    "banana fruit apple orchard juice",
    "wheel road engine car traffic",
] * 6


@pytest.fixture
def store(tmp_path, monkeypatch):
    """A fresh SQLite tracking store (and artifact folder) for one test."""
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    for name in ("MLFLOW_TRACKING_URI", "MLFLOW_EXPERIMENT_ID", "MLFLOW_EXPERIMENT_NAME"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path)  # the default artifact root (./mlruns) lands here
    mlflow.set_tracking_uri(uri)
    yield uri
    while mlflow.active_run():
        mlflow.end_run()
    mlflow.set_tracking_uri(None)  # also unsets MLFLOW_TRACKING_URI


def _history(client, run_id, key):
    return sorted((m.step, m.value) for m in client.get_metric_history(run_id, key))


def _text_frame(spark):
    from pyspark.ml.feature import CountVectorizer, Tokenizer

    df = spark.createDataFrame(list(enumerate(TEXTS)), ["id", "text"])
    words = Tokenizer(inputCol="text", outputCol="words").transform(df)
    cv = CountVectorizer(inputCol="words", outputCol="features").fit(words)
    return df, cv.transform(words), cv.vocabulary


# --------------------------------------------------------------------------
# the train job


@pytest.mark.slow
def test_train_job_logs_its_run_and_model(spark, tmp_path, store):
    cfg_path = write_config(
        tmp_path,
        extra=f"""plots = true

[mlflow]
tracking_uri = "{store}"
experiment = "sparklda-job"
run_name = "nightly"
registered_model = "kos-topics"

[mlflow.tags]
team = "search"
""",
    )
    metrics = train.run(spark, load_config(cfg_path))
    run_id = metrics["mlflow"]["run_id"]
    client = MlflowClient(store)
    run = client.get_run(run_id)
    assert run.info.status == "FINISHED"
    assert run.info.run_name == "nightly"
    assert run.data.tags["team"] == "search"
    assert client.get_experiment(run.info.experiment_id).name == "sparklda-job"
    # parameters: TrainParams and the [input] settings
    assert run.data.params["k"] == "8"
    assert run.data.params["algorithm"] == metrics["params"]["algorithm"]
    assert run.data.params["input.format"] == "uci"
    # every evaluation as a step metric, the step being the round
    evals = metrics["evaluations"]
    loglik = _history(client, run_id, "heldout_loglik")
    assert [s for s, _ in loglik] == [e["round"] for e in evals]
    assert [v for _, v in loglik] == pytest.approx([e["heldout_loglik"] for e in evals])
    assert len(_history(client, run_id, "perplexity")) == len(evals)
    assert len(_history(client, run_id, "eval_elapsed_s")) == len(evals)
    tps = _history(client, run_id, "tokens_per_s")
    assert [s for s, _ in tps] == [r["round"] for r in metrics["rounds"]]
    assert run.data.metrics["coherence_u_mass"] == pytest.approx(metrics["coherence"]["mean"])
    # artifacts: the corpus report, metrics.json, the plot, the model
    files = {f.path for f in client.list_artifacts(run_id, "sparklda")}
    assert {
        "sparklda/corpus_report.json",
        "sparklda/metrics.json",
        "sparklda/convergence.png",
        "sparklda/report.json",
    } <= files
    corpus = json.loads(
        open(client.download_artifacts(run_id, "sparklda/corpus_report.json")).read()
    )
    assert corpus["training_documents"] == metrics["report"]["corpus"]["training_documents"]
    png = metrics["plots"]["convergence"]
    with open(png, "rb") as f:
        assert f.read(8) == b"\x89PNG\r\n\x1a\n"
    # the model loads by runs:/ and models:/ and scores as the saved model does
    from sparklda.mlflow import load_model
    from sparklda.model import TopicModel

    saved = TopicModel.load(str(tmp_path / "model"), spark)
    by_run = load_model(metrics["mlflow"]["model_uri"])
    np.testing.assert_array_equal(by_run.topic_word, saved.topic_word)
    assert by_run.vocab == saved.vocab
    (version,) = [v.version for v in client.search_model_versions("name = 'kos-topics'")]
    scorer = mlflow.pyfunc.load_model(f"models:/kos-topics/{version}")
    import pandas as pd

    texts = pd.DataFrame({"text": ["obama senate election vote", "iraq war troops", ""]})
    theta = scorer.predict(texts)
    assert theta.shape == (3, 8)
    np.testing.assert_allclose(theta.sum(axis=1), 1.0)
    np.testing.assert_allclose(theta.iloc[2], 1 / 8)  # no known term: the prior mean


def test_mlflow_table_is_checked_before_spark_starts(tmp_path):
    cfg = load_config(write_config(tmp_path, extra="\n[mlflow]\ntags = { team = 3 }\n"))
    with pytest.raises(ConfigError, match=r"mlflow.tags must be a table of strings"):
        train.check(cfg)
    cfg = load_config(write_config(tmp_path, extra='\n[mlflow]\nexperimnt = "x"\n'))
    with pytest.raises(ConfigError, match=r"Unknown key\(s\) \['mlflow.experimnt'\]"):
        train.check(cfg)


def test_tracking_is_on_by_the_environment_and_off_by_enabled(tmp_path):
    from sparklda.mlflow.settings import mlflow_settings

    assert mlflow_settings({}, environ={}) is None
    on = mlflow_settings({}, environ={"MLFLOW_TRACKING_URI": "sqlite:///x.db"})
    assert on is not None and on.reason == "MLFLOW_TRACKING_URI"
    on = mlflow_settings({}, environ={"DATABRICKS_RUNTIME_VERSION": "15.4"})
    assert on is not None and on.reason == "DATABRICKS_RUNTIME_VERSION"
    off = {"mlflow": {"enabled": False}}
    assert mlflow_settings(off, environ={"DATABRICKS_RUNTIME_VERSION": "15.4"}) is None
    table = mlflow_settings({"mlflow": {"experiment": "e", "log_model": False}}, environ={})
    assert table.experiment == "e" and table.log_model is False


# --------------------------------------------------------------------------
# library users: the callback, the pyfunc flavor


@pytest.mark.slow
def test_callback_logs_every_round_to_the_active_run(spark, store):
    from sparklda.api import fit
    from sparklda.mlflow import MlflowCallback
    from sparklda.params import TrainParams
    from tests.helpers import planted_source

    params = TrainParams(k=4, passes=2, minibatch_size=40, heldout_count=20, eval_every=1, seed=3)
    with mlflow.start_run() as run:
        result = fit(planted_source(spark), params, callbacks=[MlflowCallback()])
    client = MlflowClient(store)
    data = client.get_run(run.info.run_id).data
    assert data.params["k"] == "4" and data.params["minibatch_size"] == "40"
    assert data.params["total_rounds"] == str(len(result.rounds))
    steps = [s for s, _ in _history(client, run.info.run_id, "round_s")]
    assert steps == [r["round"] for r in result.rounds]
    loglik = _history(client, run.info.run_id, "heldout_loglik")
    assert [v for _, v in loglik] == pytest.approx(
        [e["heldout_loglik"] for e in result.evaluations]
    )
    assert data.metrics["final_heldout_loglik"] == pytest.approx(
        result.evaluations[-1]["heldout_loglik"]
    )
    # with no active run the callback starts one and ends it
    with_own = MlflowCallback()
    fit(planted_source(spark), params, callbacks=[with_own])
    assert mlflow.active_run() is None
    assert client.get_run(with_own.run_id).info.status == "FINISHED"


@pytest.mark.slow
def test_pyfunc_flavor_scores_as_transform_does(spark, store):
    import pandas as pd
    from pyspark.ml.functions import vector_to_array

    from sparklda import LDA
    from sparklda.mlflow import load_model, log_model

    _, counted, vocab = _text_frame(spark)
    model = LDA(k=2, maxIter=3, seed=1, vocabulary=vocab).fit(counted)
    expected = np.array(
        [r.topicDistribution.toArray() for r in model.transform(counted).orderBy("id").collect()]
    )
    with mlflow.start_run():
        info = log_model(model, "topics", registered_model_name="fruit-or-cars")
    tm = load_model(info.model_uri)
    np.testing.assert_array_equal(tm.topic_word, model.topicModel.topic_word)
    scorer = mlflow.pyfunc.load_model("models:/fruit-or-cars/1")
    by_text = scorer.predict(pd.DataFrame({"text": TEXTS}))
    assert list(by_text.columns) == ["topic_0", "topic_1"]
    np.testing.assert_allclose(by_text.to_numpy(), expected, rtol=1e-12, atol=1e-14)
    rows = counted.orderBy("id").collect()
    by_vectors = scorer.predict(pd.DataFrame({"features": [r.features for r in rows]}))
    np.testing.assert_allclose(by_vectors.to_numpy(), expected, rtol=1e-12, atol=1e-14)
    by_terms = scorer.predict(pd.DataFrame({"features": [{"apple": 2, "fruit": 1}]}))
    assert by_terms.shape == (1, 2)
    # a Spark DataFrame through mlflow.pyfunc.spark_udf
    udf = mlflow.pyfunc.spark_udf(spark, info.model_uri, result_type="array<double>")
    dense = counted.select("id", vector_to_array("features").alias("counts"))
    scored = dense.withColumn("theta", udf("counts")).orderBy("id").collect()
    np.testing.assert_allclose([r.theta for r in scored], expected, rtol=1e-12, atol=1e-14)


def test_pyfunc_model_in_a_folder_scores_texts_and_counts_alike(tmp_path):
    import pandas as pd

    from sparklda.kernels import foldin_block
    from sparklda.mlflow import load_model, save_model
    from sparklda.model import TopicModel

    rng = np.random.default_rng(0)
    vocab = ["apple", "banana", "car", "engine", "fruit", "wheel"]
    tm = TopicModel(rng.gamma(1.0, size=(6, 3)), 0.1, 0.01, vocab, {"mode": "scvb0"})
    save_model(tm, str(tmp_path / "m"))
    back = load_model(str(tmp_path / "m"))
    np.testing.assert_array_equal(back.topic_word, tm.topic_word)
    assert back.vocab == vocab and back.metadata["mode"] == "scvb0"
    scorer = mlflow.pyfunc.load_model(str(tmp_path / "m"))
    texts = scorer.predict(pd.DataFrame({"text": ["Apple apple, FRUIT and a car!", None]}))
    counts = scorer.predict(pd.DataFrame({"features": [[2, 0, 1, 0, 1, 0], [0] * 6]}))
    np.testing.assert_array_equal(texts.to_numpy(), counts.to_numpy())
    phi = tm.topics_matrix()
    expected = foldin_block(
        np.array([0, 3]), np.array([0, 1, 2]), np.array([2.0, 1.0, 1.0]), phi[[0, 2, 4]], 0.1
    )
    np.testing.assert_allclose(texts.to_numpy()[:1], expected, rtol=1e-12)
    np.testing.assert_allclose(texts.to_numpy()[1], 1 / 3)  # no terms: the prior mean


def test_pyfunc_input_errors_name_the_column(store):
    import pandas as pd

    from sparklda.errors import CorpusError
    from sparklda.mlflow.flavor import TopicModelPyfunc
    from sparklda.model import TopicModel

    scorer = TopicModelPyfunc()
    scorer.set_model(TopicModel(np.ones((3, 2)), 0.1, 0.01, ["a", "b", "c"]))
    with pytest.raises(CorpusError, match=r"'text' \(texts\) or 'features'"):
        scorer.predict(None, pd.DataFrame({"x": ["a"], "y": ["b"]}))
    with pytest.raises(CorpusError, match=r"term 'zebra' is not in the model's vocabulary"):
        scorer.predict(None, pd.DataFrame({"features": [{"zebra": 1}]}))
    with pytest.raises(CorpusError, match=r"vocabulary's length 3"):
        scorer.predict(None, pd.DataFrame({"features": [[1.0, 2.0]]}))


# --------------------------------------------------------------------------
# mlflow.spark and autolog with sparklda's pyspark.ml stages


@pytest.mark.slow
def test_mlflow_spark_round_trips_a_pipeline_and_a_bare_model(spark, store):
    import mlflow.spark
    from pyspark.ml import Pipeline
    from pyspark.ml.feature import CountVectorizer, Tokenizer

    from sparklda import LDA

    df = spark.createDataFrame(list(enumerate(TEXTS)), ["id", "text"])
    pipe = Pipeline(
        stages=[
            Tokenizer(inputCol="text", outputCol="words"),
            CountVectorizer(inputCol="words", outputCol="features"),
            LDA(k=2, maxIter=2, seed=1),
        ]
    ).fit(df)
    expected = pipe.transform(df).orderBy("id").select("topicDistribution").collect()
    reqs = ["sparklda"]  # named: MLflow's inference would load the model in a new process
    with mlflow.start_run():
        piped = mlflow.spark.log_model(pipe, "pipeline", pip_requirements=reqs)
        mlflow.spark.log_model(
            pipe.stages[-1], "lda", pip_requirements=reqs, registered_model_name="bare-lda"
        )
    loaded = mlflow.spark.load_model(piped.model_uri)
    got = loaded.transform(df).orderBy("id").select("topicDistribution").collect()
    assert got == expected
    lda = mlflow.spark.load_model("models:/bare-lda/1")
    counted = pipe.stages[1].transform(pipe.stages[0].transform(df))
    got = lda.transform(counted).orderBy("id").select("topicDistribution").collect()
    assert got == expected


@pytest.mark.slow
def test_autolog_records_a_sparklda_fit_and_its_allowlisted_model(spark, store, tmp_path):
    import mlflow.pyspark.ml
    import mlflow.spark

    from sparklda import LDA

    allow = tmp_path / "allowlist.txt"
    allow.write_text("sparklda.ml.LDAModel\n")
    conf = spark.sparkContext._conf
    key = "spark.mlflow.pysparkml.autolog.logModelAllowlistFile"
    conf.set(key, str(allow))
    try:
        mlflow.pyspark.ml.autolog(log_input_examples=False, log_model_signatures=False)
        _, counted, _ = _text_frame(spark)
        model = LDA(k=2, maxIter=2, seed=5).fit(counted)
    finally:
        mlflow.pyspark.ml.autolog(disable=True)
        conf._jconf.remove(key)
    client = MlflowClient(store)
    run = client.get_run(mlflow.last_active_run().info.run_id)
    assert run.data.params["k"] == "2"
    assert run.data.params["maxIter"] == "2"
    assert run.data.tags.get("estimator_class") == "sparklda.ml.LDA"
    logged = mlflow.spark.load_model(f"runs:/{run.info.run_id}/model")
    expected = model.transform(counted).orderBy("id").select("topicDistribution").collect()
    got = logged.transform(counted).orderBy("id").select("topicDistribution").collect()
    assert got == expected


# --------------------------------------------------------------------------
# without the extra


def test_nothing_imports_mlflow_or_matplotlib_at_import_time():
    code = (
        "import sys, sparklda, sparklda.ml, sparklda.cli.train, sparklda.mlflow, "
        "sparklda.mlflow.settings, sparklda.api\n"
        "print(sorted(m for m in ('mlflow', 'matplotlib') if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=300
    )
    assert out.stdout.strip() == "[]"


def _without(monkeypatch, *names):
    """Make ``names`` (top-level packages) impossible to import, and forget sparklda's
    modules that imported them."""
    for name in list(sys.modules):
        if any(name == n or name.startswith(n + ".") for n in names):
            monkeypatch.setitem(sys.modules, name, None)
    for name in names:
        monkeypatch.setitem(sys.modules, name, None)
    for mod in ("sparklda.mlflow.tracking", "sparklda.mlflow.flavor", "sparklda.mlflow.job"):
        monkeypatch.delitem(sys.modules, mod, raising=False)
    import sparklda.mlflow as pkg

    for attr in ("MlflowCallback", "log_model", "load_model", "save_model", "TopicModelPyfunc"):
        if attr in vars(pkg):  # loaded (and cached) by an earlier test
            monkeypatch.delattr(pkg, attr)


def test_extras_missing_mlflow_gives_a_clear_error(tmp_path, monkeypatch, caplog):
    _without(monkeypatch, "mlflow")
    cfg = load_config(write_config(tmp_path, extra='\n[mlflow]\nexperiment = "x"\n'))
    with pytest.raises(MissingExtraError, match=r"\[mlflow\].*pip install 'sparklda\[mlflow\]'"):
        train.check(cfg)
    import sparklda.mlflow

    with pytest.raises(MissingExtraError, match=r"pip install 'sparklda\[mlflow\]'"):
        sparklda.mlflow.log_model  # noqa: B018
    with pytest.raises(ImportError, match=r"sparklda\[mlflow\]"):
        from sparklda.mlflow import MlflowCallback  # noqa: F401
    # a tracking server named by the environment alone: a warning, and no tracking
    from sparklda.mlflow.settings import mlflow_settings

    with caplog.at_level("WARNING", logger="sparklda.job"):
        assert mlflow_settings({}, environ={"MLFLOW_TRACKING_URI": "http://x"}) is None
    assert "pip install 'sparklda[mlflow]'" in caplog.text
    assert train.check(load_config(write_config(tmp_path))).mlflow is None
