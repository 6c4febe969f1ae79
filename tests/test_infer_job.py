"""The scoring job (sparklda.cli.infer, jobs/infer_topics.py, sparklda-infer): load a model,
score a corpus, write Parquet."""

from __future__ import annotations

import gzip
import json
import os

import numpy as np
import pytest

from sparklda.cli import infer as infer_topics
from sparklda.errors import ModelPathError
from sparklda.model import TopicModel

K, W = 3, 5  # planted topics, words per topic
VOCAB = [f"w{i}" for i in range(K * W)]


def planted_model():
    """Topic t puts nearly all its mass on words [t*W, (t+1)*W)."""
    tw = np.full((K * W, K), 0.0)
    for t in range(K):
        tw[t * W : (t + 1) * W, t] = 200.0
    return TopicModel(tw, 0.1, 0.01, VOCAB, {"mode": "planted"})


def write_input(directory):
    """UCI files in their own vocabulary order, with a term the model does not know, a
    document of only that term and a declared document with no entries. Returns the
    planted topic of each single-topic document (by UCI docID)."""
    os.makedirs(directory, exist_ok=True)
    vocab = ["zz"] + VOCAB[::-1]  # other ids than the model's
    idx = {t: i for i, t in enumerate(vocab)}
    rng = np.random.default_rng(0)
    lines, topic_of = [], {}
    n_docs = 12  # docs 1-9 single topic, 10 only "zz", 11 nothing, 12 mixed
    for d in range(1, 10):
        t = (d - 1) % K
        words = rng.integers(t * W, (t + 1) * W, size=20)
        terms, counts = np.unique(words, return_counts=True)
        entries = {idx[VOCAB[w]]: int(c) for w, c in zip(terms, counts, strict=False)}
        entries[idx["zz"]] = 2
        lines += [f"{d} {i + 1} {c}" for i, c in sorted(entries.items())]
        topic_of[d] = t
    lines.append(f"10 {idx['zz'] + 1} 4")
    lines += [f"12 {idx['w0'] + 1} 5", f"12 {idx['w14'] + 1} 5"]
    with gzip.open(os.path.join(directory, "docword.txt.gz"), "wt") as f:
        f.write(f"{n_docs}\n{len(vocab)}\n{len(lines)}\n" + "\n".join(lines) + "\n")
    with open(os.path.join(directory, "vocab.txt"), "w") as f:
        f.write("\n".join(vocab) + "\n")
    return topic_of, 9 * 2 + 4


def config(tmp_path, model_path, **infer):
    return {
        "input": {
            "format": "uci",
            "docword": str(tmp_path / "in" / "docword.txt.gz"),
            "vocab": str(tmp_path / "in" / "vocab.txt"),
        },
        "output": {"model": model_path},
        "infer": {"output": str(tmp_path / "topics.parquet"), **infer},
    }


@pytest.mark.slow
def test_infer_job_scores_every_document(spark, tmp_path):
    model = planted_model()
    model.save(str(tmp_path / "model"))
    topic_of, unknown_tokens = write_input(tmp_path / "in")
    report = infer_topics.run(spark, config(tmp_path, str(tmp_path / "model")))

    out = spark.read.parquet(str(tmp_path / "topics.parquet"))
    assert [(f.name, f.dataType.simpleString()) for f in out.schema.fields] == [
        ("doc_id", "bigint"),
        ("topicDistribution", "array<double>"),
    ]
    theta = {r.doc_id: np.array(r.topicDistribution) for r in out.collect()}
    assert sorted(theta) == list(range(1, 13))  # UCI docIDs, including the one with no entry
    assert report["documents"] == 12 and report["unknown_term_tokens"] == unknown_tokens
    for th in theta.values():
        assert th.shape == (K,) and th.sum() == pytest.approx(1.0)
    for d, t in topic_of.items():
        assert int(np.argmax(theta[d])) == t and theta[d][t] > 0.8, d
    for d in (10, 11):  # no known term: the uniform distribution
        np.testing.assert_allclose(theta[d], np.full(K, 1 / K))
    assert theta[12][0] == pytest.approx(theta[12][2], abs=0.05) and theta[12][1] < 0.1
    with open(tmp_path / "topics.parquet" / "_report.json") as f:
        assert json.load(f)["documents"] == 12

    # the same numbers as LDAModel.transform on vectors in the model's own vocabulary
    from pyspark.ml.linalg import SparseVector

    from sparklda import LDAModel

    rows = [(12, SparseVector(K * W, [0, 14], [5.0, 5.0]))]
    direct = LDAModel(model).transform(spark.createDataFrame(rows, ["doc_id", "features"]))
    np.testing.assert_allclose(direct.head().topicDistribution.toArray(), theta[12], rtol=1e-6)

    with pytest.raises(ModelPathError, match="already exists; set infer.overwrite = true"):
        infer_topics.run(spark, config(tmp_path, str(tmp_path / "model")))
    # checked before anything is read: the model here does not exist
    with pytest.raises(ModelPathError, match="infer.output .* already exists"):
        infer_topics.run(spark, config(tmp_path, str(tmp_path / "no-model")))

    # an LDAModel directory, Spark ML vectors, overwriting the output
    LDAModel(model).save(str(tmp_path / "lda"))
    infer_topics.run(
        spark,
        config(
            tmp_path, "unused", model=str(tmp_path / "lda"), vector_type="vector", overwrite=True
        ),
    )
    out = spark.read.parquet(str(tmp_path / "topics.parquet"))
    assert out.schema["topicDistribution"].dataType.simpleString() == "vector"
    again = {r.doc_id: r.topicDistribution.toArray() for r in out.collect()}
    assert sorted(again) == sorted(theta)
    for d, th in theta.items():
        np.testing.assert_allclose(again[d], th, rtol=1e-9)


BAD = [
    ({"infer": {"output": "o"}}, "infer.model (or output.model) must name the model"),
    (
        {"output": {"model": "m"}, "input": {"format": "uci", "docword": "d"}},
        "infer.output (the Parquet",
    ),
    (
        {"output": {"model": "m"}, "infer": {"output": "o", "input": {"format": "text"}}},
        "infer.input.format = 'text' needs infer.input.path.",
    ),
    (
        {"output": {"model": "m"}, "infer": {"output": "o", "vector_type": "list"}},
        "The 'infer.vector_type' parameter must be one of ['array', 'vector']. Got 'list'",
    ),
    ({"output": {"model": "m"}, "infer": {"output": "o"}}, "[infer.input] or [input]"),
    (
        {"output": {"model": "m"}, "infer": {"output": "o", "modle": "x"}},
        "Unknown key(s) ['infer.modle'] in [infer]; known keys: ['input', 'model', 'output', ",
    ),
    ({"scoring": {}}, "Unknown configuration table(s) ['scoring']"),
    (
        {"output": {"model": "m"}, "infer": {"output": "o", "overwrite": "yes"}},
        "infer.overwrite must be a TOML boolean (true or false); got 'yes'",
    ),
    (
        {"output": {"model": "m"}, "infer": {"output": "o", "input": {"format": "uci", "x": 1}}},
        "Unknown key(s) ['infer.input.x'] in [infer.input]",
    ),
    (
        {"output": {"model": "m"}, "infer": {"output": "o", "input": "docs.txt"}},
        "[infer.input] must be a table; got infer.input = 'docs.txt'",
    ),
]


@pytest.mark.parametrize("cfg,message", BAD)
def test_bad_settings_fail_before_spark(cfg, message):
    with pytest.raises(ValueError) as err:
        infer_topics.settings_from_config(cfg)
    assert message in str(err.value)


def test_main_reports_bad_settings_without_starting_spark(capsys):
    code = infer_topics.main(
        [
            "--set",
            "output.model=m",
            "--set",
            "infer.output=o",
            "--set",
            "infer.vector_type=list",
            "--set",
            "input.format=uci",
            "--set",
            "input.docword=d",
        ]
    )
    assert code == 2
    assert "error: The 'infer.vector_type' parameter" in capsys.readouterr().err


def test_settings_default_to_the_training_tables():
    s = infer_topics.settings_from_config(
        {
            "input": {"format": "uci", "docword": "sample:kos/docword.txt.gz"},
            "output": {"model": "out/m"},
            "infer": {"output": "out/t.parquet"},
        }
    )
    assert s["model"] == "out/m" and s["vector_type"] == "array" and not s["overwrite"]
    assert s["input"]["docword"] == "sample:kos/docword.txt.gz"  # read on the driver
