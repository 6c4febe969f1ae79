"""The model: persistence (atomic), topics, transform, evaluation; parameters."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

from sparklda.corpus import CorpusError, build_corpus
from sparklda.model import TopicModel
from sparklda.params import TrainParams
from tests.helpers import planted_source

# saving and loading go through Spark
pytestmark = pytest.mark.usefixtures("spark")


def small_model(vocab=True, k=3, v=7, seed=0):
    rng = np.random.default_rng(seed)
    tw = rng.gamma(1.0, 5.0, size=(v, k))
    return TopicModel(
        tw,
        0.1,
        0.01,
        [f"t{i}" for i in range(v)] if vocab else None,
        {"mode": "scvb0", "rounds": 4},
    )


@pytest.mark.parametrize("vocab", [True, False])
def test_save_load_round_trip(tmp_path, vocab):
    m = small_model(vocab)
    path = str(tmp_path / "model")
    m.save(path)
    names = sorted(os.listdir(path))
    assert names[0] == "commits" and len(names) == 2 and names[1].startswith("v000000-")
    # the commit record is named by its sequence number (one writer can take it)
    assert os.listdir(os.path.join(path, "commits")) == ["000000"]
    meta_dir = os.path.join(path, names[1], "metadata")
    part = next(f for f in os.listdir(meta_dir) if f.startswith("part-"))
    meta = json.loads(open(os.path.join(meta_dir, part)).read())
    assert meta["k"] == 3 and meta["vocab_size"] == 7 and meta["mode"] == "scvb0"
    assert {"format_version", "sparklda_version", "spark_version", "created"} <= set(meta)
    back = TopicModel.load(path)
    np.testing.assert_array_equal(back.topic_word, m.topic_word)
    np.testing.assert_array_equal(back.alpha, m.alpha)
    assert back.eta == m.eta and back.vocab == m.vocab
    assert back.metadata["rounds"] == 4


def test_classic_save_writes_its_files_without_spark_jobs(spark, tmp_path):
    """In a classic session a save writes its few files with Hadoop's FileSystem, not a
    Spark job per file (about a second each: docs/architecture.md, "Saved directories"),
    each under a hidden staging name first; a staging file left by a crash is invisible
    to the readers."""
    from sparklda.storage import SparkFiles

    sc = spark.sparkContext
    group = "test-classic-save"
    sc.setJobGroup(group, "saving a model")
    try:
        m = small_model(v=50, k=4)
        path = str(tmp_path / "model")
        m.save(path)
        files = SparkFiles(spark)
        files.write_arrays(str(tmp_path / "arrays"), {"a": np.arange(10.0), "b": np.eye(3)})
        assert sc.statusTracker().getJobIdsForGroup(group) == []
    finally:
        sc.setLocalProperty("spark.jobGroup.id", None)
    for root, _, names in os.walk(tmp_path):
        assert not [n for n in names if n.startswith("_staging")], (root, names)
    back = TopicModel.load(path)  # Spark's Parquet reader reads the driver-written file
    np.testing.assert_array_equal(back.topic_word, m.topic_word)
    arrays = files.read_arrays(str(tmp_path / "arrays"))
    np.testing.assert_array_equal(arrays["b"], np.eye(3))
    # a crash between writing and renaming leaves a hidden, partial file: never read
    commits = tmp_path / "model" / "commits"
    version = os.listdir(commits)[0]
    (commits / version / "_staging-0123").write_text('{"version": "v0000')
    (commits / "v000009-deadbeef").mkdir()
    (commits / "v000009-deadbeef" / "_staging-4567").write_text('{"vers')
    np.testing.assert_array_equal(TopicModel.load(path).topic_word, m.topic_word)


def test_save_refuses_to_overwrite_and_is_atomic(tmp_path, monkeypatch):
    from sparklda.storage import SparkFiles

    path = str(tmp_path / "model")
    good = small_model(seed=1)
    good.save(path)
    with pytest.raises(FileExistsError, match="already exists; pass overwrite=True"):
        small_model(seed=2).save(path)
    # a crash in the middle of writing the replacement leaves the good model in place
    real = SparkFiles.write_table

    def boom(self, *a, **k):
        raise OSError("disk full")

    monkeypatch.setattr(SparkFiles, "write_table", boom)
    with pytest.raises(OSError, match="disk full"):
        small_model(seed=3).save(path, overwrite=True)
    monkeypatch.setattr(SparkFiles, "write_table", real)
    np.testing.assert_array_equal(TopicModel.load(path).topic_word, good.topic_word)
    # the failed save removed its own version; a killed one's stays until the next save
    assert not [n for n in os.listdir(path) if n.startswith("v000001-")]
    stale = ["v000001-deadbeef"]
    (tmp_path / "model" / stale[0] / "metadata").mkdir(parents=True)
    # a save killed between creating and deleting its write probe leaves the empty file
    from sparklda.storage import PROBE_PREFIX

    (tmp_path / "model" / f"{PROBE_PREFIX}0123abcd").write_text("")
    # the next save commits, and removes the stale and the superseded versions, and the probe
    newer = small_model(seed=4)
    newer.save(path, overwrite=True)
    np.testing.assert_array_equal(TopicModel.load(path).topic_word, newer.topic_word)
    names = sorted(os.listdir(path))
    assert names[0] == "commits" and len(names) == 2 and names[1] != stale[0]


def test_save_refuses_foreign_directories_and_bad_parents(tmp_path):
    from sparklda.errors import ModelPathError

    m = small_model()
    precious = tmp_path / "precious"
    (precious / "sub").mkdir(parents=True)
    (precious / "precious.txt").write_text("keep me")
    with pytest.raises(ModelPathError, match="is not a sparklda model"):
        m.save(str(precious), overwrite=True)
    assert (precious / "precious.txt").read_text() == "keep me"
    assert sorted(os.listdir(precious)) == ["precious.txt", "sub"]
    (tmp_path / "afile").write_text("x")
    with pytest.raises(ModelPathError, match="is a file, not a directory"):
        m.save(str(tmp_path / "afile" / "model"))
    bad = small_model()
    bad.topic_word[2, 1] = np.nan
    with pytest.raises(ValueError, match="non-finite values .*term 2, topic 1"):
        bad.save(str(tmp_path / "nan-model"))
    assert not (tmp_path / "nan-model").exists()


def test_reads_the_format_1_layout_and_replaces_it(tmp_path):
    """Models saved by sparklda 0.1 (metadata.json + topics.parquet written with pyarrow)
    still load, through Spark, and a save over one replaces it."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    m = small_model(seed=5)
    path = tmp_path / "old"
    path.mkdir()
    meta = {
        "format": "sparklda.TopicModel",
        "format_version": 1,
        "k": m.k,
        "vocab_size": m.vocab_size,
        "alpha": float(m.alpha[0]),  # format 1: α a number
        "eta": m.eta,
        "has_vocab": m.vocab is not None,
    }
    (path / "metadata.json").write_text(json.dumps(meta))
    pq.write_table(
        pa.table(
            {
                "term_index": pa.array(np.arange(m.vocab_size, dtype=np.int32)),
                "term": pa.array(m.vocab if m.vocab else [None] * m.vocab_size, type=pa.string()),
                "topic_word": pa.FixedSizeListArray.from_arrays(
                    pa.array(m.topic_word.ravel()), m.k
                ),
            }
        ),
        str(path / "topics.parquet"),
    )
    back = TopicModel.load(f"file://{path}")
    np.testing.assert_array_equal(back.topic_word, m.topic_word)
    sharded = TopicModel.load(f"file://{path}", max_driver_bytes=0)  # kept on the executors
    assert sharded.sharded and sharded.vocab == m.vocab
    np.testing.assert_array_equal(sharded.topic_word, m.topic_word)
    with pytest.raises(FileExistsError):
        m.save(str(path))
    small_model(seed=6).save(str(path), overwrite=True)
    assert "metadata.json" not in os.listdir(path) and "topics.parquet" not in os.listdir(path)


def test_load_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="No sparklda model"):
        TopicModel.load(str(tmp_path / "missing"))


def test_topics_matrix_and_describe_topics():
    tw = np.zeros((5, 2))
    tw[[0, 1], 0] = [10, 5]
    tw[[3, 4], 1] = [2, 8]
    m = TopicModel(tw, 0.1, 0.01, list("abcde"))
    phi = m.topics_matrix()
    assert phi.shape == (5, 2)
    np.testing.assert_allclose(phi.sum(0), 1.0)
    np.testing.assert_allclose(phi[:, 0], (tw[:, 0] + 0.01) / (15 + 5 * 0.01))
    top = m.describe_topics(2)
    assert top[0]["terms"] == ["a", "b"] and top[1]["terms"] == ["e", "d"]
    assert top[1]["termIndices"] == [4, 3]
    assert top[0]["termWeights"][0] == pytest.approx(phi[0, 0])
    assert "topic   1: e d" in m.format_topics(2)
    with pytest.raises(ValueError, match="'maxTermsPerTopic' parameter must be an int"):
        m.describe_topics(0)


def test_transform_folds_in_on_executors(spark):
    from pyspark.ml.linalg import Vectors

    tw = np.full((6, 2), 0.0)
    tw[:3, 0] = 50.0
    tw[3:, 1] = 50.0
    m = TopicModel(tw, 0.1, 0.01)
    df = spark.createDataFrame(
        [
            (0, Vectors.sparse(6, {0: 5.0, 1: 3.0})),
            (1, Vectors.sparse(6, {4: 4.0, 5: 1.0})),
            (2, Vectors.sparse(6, {})),
        ],
        ["id", "features"],
    )
    out = m.transform(df).orderBy("id").collect()
    assert out[0]["topicDistribution"][0] > 0.95
    assert out[1]["topicDistribution"][1] > 0.95
    np.testing.assert_allclose(out[2]["topicDistribution"].toArray(), [0.5, 0.5])
    for r in out:
        assert r["topicDistribution"].toArray().sum() == pytest.approx(1.0)
    with pytest.raises(CorpusError, match="already exists"):
        m.transform(df.withColumnRenamed("id", "topicDistribution"))
    bad = spark.createDataFrame([(0, Vectors.sparse(9, {0: 1.0}))], ["id", "features"])
    with pytest.raises(CorpusError, match="have size 9 but the model's vocabulary has 6 terms"):
        m.transform(bad)  # checked up front (the first vector's size), before any action


def test_evaluate_prefers_the_true_topics(spark):
    """The document-completion score ranks the planted topics above noise."""
    corpus = build_corpus(planted_source(spark), heldout_count=30, seed=1)
    try:
        k, w = 4, 6
        truth = np.zeros((k * w, k))
        for t in range(k):
            truth[t * w : (t + 1) * w, t] = 100.0
        good = TopicModel(truth, 0.1, 0.01).evaluate(corpus.heldout)
        noise = TopicModel(np.random.default_rng(0).random((k * w, k)), 0.1, 0.01).evaluate(
            corpus.heldout
        )
        assert good.documents == 30
        assert good.loglik_per_token > noise.loglik_per_token + 0.5
        assert good.perplexity == pytest.approx(np.exp(-good.loglik_per_token))
        # a uniform model scores exactly log(1/V)
        flat = TopicModel(np.ones((k * w, k)), 0.1, 0.0).evaluate(corpus.heldout)
        assert flat.loglik_per_token == pytest.approx(np.log(1 / (k * w)), abs=1e-6)
    finally:
        corpus.unpersist()


@pytest.mark.parametrize(
    "name,value,message",
    [
        ("k", 1, "The 'k' parameter of LDA must be an int in the range [2, inf). Got 1 instead."),
        (
            "k",
            2.5,
            "The 'k' parameter of LDA must be an int in the range [2, inf). Got 2.5 instead.",
        ),
        (
            "alpha",
            0.0,
            "The 'alpha' parameter of LDA must be a float in the range (0, 10000]. Got 0.0",
        ),
        ("eta", -1, "The 'eta' parameter of LDA must be a float in the range (0, 10000]. Got -1"),
        ("passes", 0, "The 'passes' parameter of LDA must be an int in the range [1, inf). Got 0"),
        (
            "kappa_phi",
            0.2,
            "The 'kappa_phi' parameter of LDA must be a float in the range (0.5, 1].",
        ),
        ("minibatch_size", True, "The 'minibatch_size' parameter of LDA must be an int"),
        ("algorithm", "nmf", "The 'algorithm' parameter of LDA must be one of"),
        ("dtype", "float16", "The 'dtype' parameter of LDA must be one of ['float32', 'float64']"),
        ("alpha", float("nan"), "The 'alpha' parameter of LDA must be a float"),
    ],
)
def test_parameter_validation_messages(name, value, message):
    with pytest.raises(ValueError) as e:
        TrainParams(**{name: value}).validate()
    assert message in str(e.value)


def test_unknown_parameter_and_schedule_start():
    with pytest.raises(ValueError, match="Unknown LDA parameter\\(s\\) \\['topics'\\]"):
        TrainParams.from_dict({"topics": 5})
    with pytest.raises(
        ValueError,
        match="The first step s_phi/tau_phi\\^kappa_phi of LDA must be "
        "at most 1. Got 100 from s_phi=100.0",
    ):
        TrainParams(s_phi=100.0, tau_phi=1.0).validate()
    TrainParams().validate()  # the defaults are valid


def test_k_below_two_fails_before_any_spark_job(spark):
    from sparklda.api import fit

    sc = spark.sparkContext
    before = sc.statusTracker().getJobIdsForGroup()
    with pytest.raises(ValueError, match="'k' parameter of LDA must be an int in the range \\[2"):
        fit(planted_source(spark), TrainParams(k=1))
    assert sc.statusTracker().getJobIdsForGroup() == before


KILLED_SAVER = r"""
import os, sys, time
import numpy as np
os.environ["PYSPARK_PYTHON"] = sys.executable
from pyspark.sql import SparkSession
spark = (SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
         .config("spark.ui.showConsoleProgress", "false").getOrCreate())
from sparklda.model import TopicModel
path = sys.argv[1]
models = [TopicModel(np.full((3000, 20), float(i + 1)), 0.1, 0.01) for i in range(2)]
models[0].save(path, overwrite=True)
print("READY", flush=True)
i = 1
while True:  # overwrite again and again until killed
    models[i % 2].save(path, overwrite=True)
    i += 1
"""


@pytest.mark.slow
@pytest.mark.parametrize("delay", [0.0, 0.7, 1.9])
def test_a_save_killed_at_any_moment_leaves_a_loadable_model(tmp_path, delay):
    """SIGKILL a process that keeps overwriting a model, at several delays after its
    first complete save: the directory always loads, as one of the two models."""
    import signal
    import subprocess
    import sys
    import time

    script = tmp_path / "saver.py"
    script.write_text(KILLED_SAVER)
    path = str(tmp_path / "model")
    proc = subprocess.Popen(
        [sys.executable, str(script), path],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        start_new_session=True,
    )
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            if line.startswith("READY"):
                break
        time.sleep(delay)
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    back = TopicModel.load(path)
    assert back.topic_word.shape == (3000, 20)
    assert float(back.topic_word[0, 0]) in (1.0, 2.0)
    assert np.all(back.topic_word == back.topic_word[0, 0])
    # the next save cleans up whatever the killed one left half-written
    small_model().save(path, overwrite=True)
    names = sorted(os.listdir(path))
    assert names[0] == "commits" and len(names) == 2
