"""Spark Connect: a model trained in a classic session serves, scores, saves and loads under
Connect (no SparkContext, RDD, broadcast or JVM), and the infer job runs against a Connect
server. The ``connect`` fixture (tests/conftest.py) is a real Connect server beside the
classic ``spark`` session."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from tests.helpers import ROOT, job_env, kos_word_docs

K = 4


@pytest.fixture(scope="module")
def trained(spark, tmp_path_factory):
    """A model and pipeline made in the classic session, saved; the vectors as Parquet
    so that both sessions read the same rows in the same partitions."""
    from pyspark.ml import PipelineModel
    from pyspark.ml.feature import CountVectorizer

    from sparklda import LDAModel
    from sparklda.model import TopicModel

    base = tmp_path_factory.mktemp("connect-models")
    rows = kos_word_docs(0, 150) + [(10_000, [])]
    words = spark.createDataFrame(rows, "id long, words array<string>").repartition(2, "id")
    words.write.parquet(str(base / "words"))
    words = spark.read.parquet(str(base / "words"))
    cv = CountVectorizer(inputCol="words", outputCol="features", minDF=2.0).fit(words)
    counted = cv.transform(words)
    counted.write.parquet(str(base / "counted"))
    counted = spark.read.parquet(str(base / "counted"))
    rng = np.random.default_rng(4)  # serving needs topics, not training: Dirichlet topics
    topics = TopicModel(rng.gamma(0.3, 20.0, (len(cv.vocabulary), K)), 0.1, 0.01, cv.vocabulary)
    model = LDAModel(topics).setSeed(4)
    model.write().save(str(base / "model"))
    PipelineModel([cv, model]).write().save(str(base / "pipeline"))
    # what the classic session computes (pyspark decides classic or Connect per process
    # while the connect fixture is active, so classic Python UDFs run here, before it)
    return {
        "base": base,
        "model": model,
        "theta": _theta(model.transform(counted)),
        "describe": [r.asDict() for r in model.describeTopics(5).orderBy("topic").collect()],
        "loglik": model.logLikelihood(counted),
        "logperplexity": model.logPerplexity(counted),
        "left_to_right": LDAModel(topics)
        .setSeed(4)
        .setEvaluator("left_to_right")
        .setParticles(2)
        .logLikelihood(counted),
    }


def _theta(df, col="topicDistribution"):
    return {r.id: r[col].toArray() for r in df.select("id", col).collect()}


def test_classic_model_serves_scores_and_saves_under_connect(spark, trained, connect):
    from sparklda import LDAModel
    from sparklda.model import TopicModel

    base, model = trained["base"], trained["model"]
    loaded = LDAModel.load(str(base / "model"))
    assert loaded.uid == model.uid
    np.testing.assert_array_equal(loaded.topicModel.topic_word, model.topicModel.topic_word)
    counted_c = connect.read.parquet(str(base / "counted"))
    assert type(counted_c.sparkSession).__module__.startswith("pyspark.sql.connect")
    # transform: mapInArrow with φ̂ in the closure, equal to the classic session's
    ours = _theta(loaded.transform(counted_c))
    theirs = trained["theta"]
    assert ours.keys() == theirs.keys() and len(ours) == 151
    for doc_id, th in theirs.items():
        np.testing.assert_allclose(ours[doc_id], th, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(ours[10_000], np.full(K, 1 / K))
    # describeTopics, topicsMatrix
    d_c = loaded.describeTopics(5).orderBy("topic").collect()
    assert [r.asDict() for r in d_c] == trained["describe"]
    assert d_c[0].terms and len(d_c[0].terms) == 5
    np.testing.assert_array_equal(loaded.topicsMatrix().toArray(), model.topicsMatrix().toArray())
    # held-out completion score on a DataFrame: the same documents, halves and score
    ll_c, ll_s = loaded.logLikelihood(counted_c), trained["loglik"]
    assert np.isfinite(ll_c) and ll_c < 0
    assert ll_c == pytest.approx(ll_s, rel=1e-6)
    assert loaded.logPerplexity(counted_c) == pytest.approx(trained["logperplexity"], rel=1e-6)
    # the left-to-right estimate of the whole documents, the same under Connect
    ltr = loaded.copy().setEvaluator("left_to_right").setParticles(2)
    assert ltr.logLikelihood(counted_c) == pytest.approx(trained["left_to_right"], rel=1e-6)
    # saves from Connect (plain, then overwrite) load in the classic session
    path = str(base / "from-connect")
    loaded.setSeed(21).write().save(path)
    with pytest.raises(FileExistsError, match="already exists"):
        loaded.write().save(path)
    loaded.setSeed(22).write().overwrite().save(path)
    versions = [n for n in os.listdir(path) if n.startswith("v")]
    assert len(versions) == 1, versions  # the superseded version is deleted under Connect too
    back = LDAModel.read().session(spark).load(path)
    assert back.getSeed() == 22 and back.uid == model.uid
    np.testing.assert_array_equal(back.topicModel.topic_word, model.topicModel.topic_word)
    tm_path = str(base / "tm-from-connect")
    model.topicModel.save(tm_path, spark=connect)
    model.topicModel.save(tm_path, overwrite=True, spark=connect)
    tm = TopicModel.load(tm_path, spark=spark)
    np.testing.assert_array_equal(tm.topic_word, model.topicModel.topic_word)
    assert tm.vocab == model.topicModel.vocab


def test_pipelines_write_overwrite_and_load_under_connect(spark, trained, connect):
    from pyspark.ml import Pipeline, PipelineModel
    from pyspark.ml.feature import CountVectorizer

    from sparklda import LDA, LDAModel

    base = trained["base"]
    pm = PipelineModel.load(str(base / "pipeline"))  # saved in the classic session
    assert [type(s).__name__ for s in pm.stages] == ["CountVectorizerModel", "LDAModel"]
    words_c = connect.read.parquet(str(base / "words"))
    got = _theta(pm.transform(words_c))
    want = trained["theta"]
    for doc_id, th in want.items():
        np.testing.assert_allclose(got[doc_id], th, rtol=1e-12, atol=1e-14)
    path = str(base / "pipeline-from-connect")
    pm.write().save(path)
    pm.write().overwrite().save(path)
    assert sorted(n for n in os.listdir(path) if not n.startswith("v")) == [
        "commits",
        "metadata",
        "stages",
    ]
    assert len([n for n in os.listdir(path) if n.startswith("v")]) == 1
    again = PipelineModel.load(path)
    assert isinstance(again.stages[-1], LDAModel)
    # the classic session finds the model in it (pyspark would read the Connect ML
    # stages with the Connect session while the fixture is active)
    from sparklda.ml import load_topic_model

    np.testing.assert_array_equal(
        load_topic_model(path, spark).topic_word, trained["model"].topicModel.topic_word
    )
    # an unfitted Pipeline with an LDA stage
    pipe = Pipeline(stages=[CountVectorizer(inputCol="words", outputCol="features"), LDA(k=3)])
    pipe.write().overwrite().save(str(base / "pipe-from-connect"))
    stage = Pipeline.load(str(base / "pipe-from-connect")).getStages()[-1]
    assert isinstance(stage, LDA) and stage.getK() == 3 and stage.uid == pipe.getStages()[-1].uid


@pytest.mark.slow
def test_same_script_runs_under_connect_as_in_the_classic_session(spark, connect, tmp_path):
    """The drop-in script of tests/test_ml.py (written for pyspark's LDA) with sparklda's
    LDA against the Connect session: it runs, and gives what it gives in the classic
    session on the same rows (one Parquet dataset, so both sessions read the same
    partitions): the same model, scores and output schemas. tests/test_ml.py shows the
    classic run's schemas equal to pyspark's LDA's. sparklda's fit under Connect is the
    DataFrame-only training executor (docs/architecture.md, "Spark Connect")."""
    import sparklda
    from tests.conftest import CONNECT_MODE
    from tests.test_ml import lda_script

    rows = kos_word_docs(0, 200) + [(10_000, []), (10_001, ["zzzunique"])]
    path = str(tmp_path / "words")
    had = os.environ.pop(CONNECT_MODE, None)
    try:  # the classic session's run (pyspark picks classic or Connect process-wide)
        spark.createDataFrame(rows, "id long, words array<string>").repartition(
            2, "id"
        ).write.parquet(path)
        classic = lda_script(sparklda.LDA, spark.read.parquet(path), str(tmp_path / "classic"))
    finally:
        if had is not None:
            os.environ[CONNECT_MODE] = had
    ours = lda_script(sparklda.LDA, connect.read.parquet(path), str(tmp_path / "sparklda"))
    assert ours["matrix_shape"] == (ours["vocab_size"], K)
    assert ours["describe_rows"] == K and ours["pipeline_rows"] == len(rows)
    for doc_id, th in ours["theta"].items():
        np.testing.assert_allclose(ours["theta_loaded"][doc_id], th, atol=1e-9)
    for key in ("transform_schema", "describe_schema", "pipeline_schema", "vocab_size"):
        assert ours[key] == classic[key], key
    assert ours["pipeline_stage"] == "LDAModel"
    # the same model as the classic session's, and the same scores
    np.testing.assert_allclose(ours["topics"], classic["topics"], rtol=1e-5)
    assert ours["theta"].keys() == classic["theta"].keys()
    for doc_id, th in classic["theta"].items():
        np.testing.assert_allclose(ours["theta"][doc_id], th, rtol=1e-5, atol=1e-7)
    assert ours["loglik"] == pytest.approx(classic["loglik"], rel=1e-6)
    assert ours["logperplexity"] == pytest.approx(classic["logperplexity"], rel=1e-6)


def test_infer_job_against_the_connect_server(spark, trained, connect, tmp_path):
    """``sparklda-infer --remote sc://...``: Parquet vectors in, topic distributions out,
    equal to the classic transform; run twice, the second replaces the first (staged,
    ``_SUCCESS`` last) and leaves no staging directory (the second run by the job's
    ``run`` in this process). UCI and text inputs are read
    with DataFrame readers and scored as in the classic session."""
    base = trained["base"]
    url = f"sc://{connect.client._builder.url.netloc}"
    out = tmp_path / "topics"
    cfg = tmp_path / "infer.toml"
    cfg.write_text(
        f"""
[infer]
model = "{base / "model"}"
output = "{out}"
overwrite = true
[infer.input]
format = "parquet"
path = "{base / "counted"}"
features_col = "features"
id_col = "id"
"""
    )
    env = job_env(PYTHONPATH=ROOT, SPARK_CONNECT_MODE_ENABLED=None, SPARK_REMOTE=None)
    proc = _run_infer(cfg, url, env)
    assert "scored 151 documents with 4 topics" in proc.stdout
    assert os.path.exists(out / "_SUCCESS")
    first = os.stat(out / "_SUCCESS").st_mtime_ns
    # run again (by the job's run, in this process: a second process would be another
    # Connect session, with new Python workers on the server): the output is replaced
    from sparklda.cli import infer
    from sparklda.cli.config import load_config

    assert infer.run(connect, load_config(str(cfg), []))["documents"] == 151
    assert os.stat(out / "_SUCCESS").st_mtime_ns != first
    _infer_uci_and_text_like_classic(spark, connect, base, tmp_path)
    assert not [n for n in os.listdir(tmp_path) if "sparklda-staging" in n]
    rows = spark.read.parquet(str(out)).collect()
    got = {r.doc_id: np.asarray(r.topicDistribution) for r in rows}
    want = trained["theta"]
    assert got.keys() == want.keys()
    for doc_id, th in want.items():
        np.testing.assert_allclose(got[doc_id], th, rtol=1e-12, atol=1e-14)


def _run_infer(cfg, url, env):
    """The infer job with ``cfg`` against the Connect server at ``url``; it must succeed."""
    proc = subprocess.run(
        [sys.executable, "-m", "sparklda.cli.infer", "--config", str(cfg), "--remote", url],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc


def _infer_uci_and_text_like_classic(spark, connect, base, tmp_path):
    """UCI files (with a declared document that has no entry) and one-document-a-line
    text, scored by the infer job's ``run`` in the Connect session (read with DataFrame
    readers, terms matched to the model's vocabulary by name) as the classic session
    scores them. In this process: the job's own command line and output lines are
    checked by the Parquet runs above, and each new process costs a new Connect session
    (new Python workers on the server)."""
    from sparklda.cli import infer
    from sparklda.cli.config import load_config
    from tests.conftest import CONNECT_MODE
    from tests.helpers import KOS_DOCWORD, KOS_VOCAB

    with gzip.open(KOS_DOCWORD, "rt") as f:
        _, n_words, _ = (int(f.readline()) for _ in range(3))
        body = [line for line in f if int(line.split()[0]) <= 40]
    docword = tmp_path / "docword.txt"
    docword.write_text(f"41\n{n_words}\n{len(body)}\n" + "".join(body))
    text = tmp_path / "docs.txt"
    lines = [" ".join(words) for _, words in kos_word_docs(150, 170)]
    text.write_text("\n".join([*lines, "zzznever seen words"]) + "\n")
    inputs = {
        "uci": f'format = "uci"\ndocword = "{docword}"\nvocab = "{KOS_VOCAB}"',
        "text": f'format = "text"\npath = "{text}"',
    }
    for name, table in inputs.items():
        cfg = tmp_path / f"{name}.toml"
        cfg.write_text(
            f'[infer]\nmodel = "{base / "model"}"\noutput = "{tmp_path / name}"\n'
            f"[infer.input]\n{table}\n"
        )
        remote = infer.run(connect, load_config(str(cfg), []))
        had = os.environ.pop(CONNECT_MODE, None)
        try:
            classic_cfg = load_config(str(cfg), [f"infer.output={tmp_path / (name + '-classic')}"])
            report = infer.run(spark, classic_cfg)
        finally:
            if had is not None:
                os.environ[CONNECT_MODE] = had
        n = report["documents"]
        assert n == (41 if name == "uci" else len(lines) + 1)
        assert report["unknown_term_tokens"] > 0
        assert remote["documents"] == n
        assert remote["unknown_term_tokens"] == report["unknown_term_tokens"]
        got = {
            r.doc_id: np.asarray(r.topicDistribution)
            for r in spark.read.parquet(str(tmp_path / name)).collect()
        }
        want = {
            r.doc_id: np.asarray(r.topicDistribution)
            for r in spark.read.parquet(str(tmp_path / (name + "-classic"))).collect()
        }
        assert got.keys() == want.keys() and len(got) == n
        for doc_id, th in want.items():
            np.testing.assert_allclose(got[doc_id], th, rtol=1e-12, atol=1e-14)
        if name == "uci":  # doc 41 has no entry: the uniform distribution
            np.testing.assert_allclose(got[41], np.full(K, 1 / K))


@pytest.mark.slow
def test_train_job_against_the_connect_server(spark, connect, tmp_path):
    """``sparklda-train --remote sc://...`` trains the first 200 documents of the shipped
    KOS sample (its vocabulary file read through the ``sample:`` prefix) on the DataFrame
    path, writes the model and metrics.json (which record the remote URL), and the model
    equals the same configuration trained in the classic session."""
    from sparklda.cli import train
    from sparklda.cli.config import load_config
    from sparklda.model import TopicModel
    from tests.conftest import CONNECT_MODE
    from tests.helpers import KOS_DOCWORD, write_config

    url = f"sc://{connect.client._builder.url.netloc}"
    cfg = write_config(tmp_path)
    with gzip.open(KOS_DOCWORD, "rt") as f:
        _, n_words, _ = (int(f.readline()) for _ in range(3))
        body = [line for line in f if int(line.split()[0]) <= 200]
    docword = tmp_path / "docword.txt"
    docword.write_text(f"200\n{n_words}\n{len(body)}\n" + "".join(body))
    overrides = [
        f"input.docword={docword}",
        "training.k=5",
        "training.minibatch_size=100",
        "training.dtype=float64",
        "evaluation.heldout_count=20",
    ]
    sets = [a for o in overrides for a in ("--set", o)]
    env = job_env(PYTHONPATH=ROOT, SPARK_CONNECT_MODE_ENABLED=None, SPARK_REMOTE=None)
    proc = subprocess.run(
        [sys.executable, "-m", "sparklda.cli.train", "--config", cfg, "--remote", url, *sets],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    remote = TopicModel.load(str(tmp_path / "model"))
    metrics = json.loads((tmp_path / "metrics.json").read_text())
    assert metrics["spark"]["remote"] == url
    assert metrics["report"]["mode"]["execution"] == "dataframe"
    assert remote.k == 5 and remote.vocab_size == 6906 and remote.vocab[0] == "aarp"

    had = os.environ.pop(CONNECT_MODE, None)
    try:
        classic_cfg = load_config(cfg, [*overrides, f"output.model={tmp_path / 'classic'}"])
        expected = train.run(spark, classic_cfg)
    finally:
        if had is not None:
            os.environ[CONNECT_MODE] = had
    classic = TopicModel.load(str(tmp_path / "classic"))
    assert metrics["report"]["rounds"] == expected["report"]["rounds"]
    np.testing.assert_allclose(remote.topic_word, classic.topic_word, rtol=1e-6)
    # u_mass counted on the DataFrame path's cached blocks, as on the classic RDD
    assert metrics["coherence"]["per_topic"] == pytest.approx(expected["coherence"]["per_topic"])
