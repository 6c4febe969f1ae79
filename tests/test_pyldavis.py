"""LDAModel.toPyLDAvis: the five inputs of pyLDAvis.prepare, computed on Spark."""

from __future__ import annotations

import numpy as np
import pytest

from sparklda.ml import LDAModel
from sparklda.model import TopicModel
from tests.helpers import planted_docs


@pytest.fixture(scope="module")
def data(spark):
    from pyspark.ml.linalg import DenseVector, SparseVector

    docs, v = planted_docs(n_docs=60, n_empty=1)
    rows = [(int(d), SparseVector(v, t.tolist(), c.tolist())) for d, t, c in docs]
    rows.append((1000, DenseVector([1.0] + [0.0] * (v - 2) + [2.0])))  # a dense vector too
    df = spark.createDataFrame(rows, ["id", "features"]).repartition(3)
    rng = np.random.default_rng(1)
    tm = TopicModel(rng.gamma(1.0, 5.0, size=(v, 4)), 0.1, 0.01, [f"w{i}" for i in range(v)])
    dense = np.zeros((len(rows), v))
    for i, (_, vec) in enumerate(rows):
        dense[i] = vec.toArray()
    return {"df": df, "model": LDAModel(tm), "ids": [r[0] for r in rows], "dense": dense}


@pytest.fixture(scope="module")
def inputs(data):
    return data["model"].toPyLDAvis(data["df"])


def test_inputs_have_pyldavis_shapes_and_normalisation(data, inputs):
    out = dict(inputs)
    assert set(out) == {
        "topic_term_dists",
        "doc_topic_dists",
        "doc_lengths",
        "vocab",
        "term_frequency",
    }
    k, v = 4, data["dense"].shape[1]
    n = len(data["ids"])
    assert out["topic_term_dists"].shape == (k, v)
    assert out["topic_term_dists"].sum(1) == pytest.approx(np.ones(k))
    assert out["doc_topic_dists"].shape == (n, k)
    assert out["doc_topic_dists"].sum(1) == pytest.approx(np.ones(n))
    assert out["vocab"] == [f"w{i}" for i in range(v)]
    # lengths and frequencies are the vectors' sums, whatever the partitioning
    assert sorted(out["doc_lengths"]) == sorted(data["dense"].sum(1))
    assert out["term_frequency"] == pytest.approx(data["dense"].sum(0))
    assert (out["doc_lengths"] == 0).sum() == 1  # the empty document: uniform θ
    empty = out["doc_topic_dists"][out["doc_lengths"] == 0][0]
    assert empty == pytest.approx(np.full(k, 0.25))


def test_pyldavis_prepare_accepts_them(inputs):
    import pyLDAvis

    vis = pyLDAvis.prepare(**inputs, sort_topics=False, n_jobs=1)
    assert len(vis.topic_coordinates) == 4
    assert "w0" in set(vis.topic_info["Term"])
