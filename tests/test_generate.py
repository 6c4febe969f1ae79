"""Synthetic corpora: the pure generator (sparklda.synthetic) and the Spark job
(sparklda.cli.generate), with a recovery check of SCVB0 on a generated corpus."""

from __future__ import annotations

import numpy as np
import pytest

from sparklda.api import fit, source_from_config
from sparklda.cli import COMMANDS
from sparklda.cli import main as cli_main
from sparklda.cli.generate import generate, read_generated
from sparklda.errors import ModelPathError, ParamError
from sparklda.params import TrainParams
from sparklda.synthetic import (
    CorpusSpec,
    draw_document,
    draw_documents,
    match_topics,
    topic_cdfs,
    true_topics,
    zipf_base,
)

SMALL = CorpusSpec(n_docs=2000, vocab_size=500, k_true=5, alpha=0.1, mean_length=100, seed=7)


def corpus_of(spec, ids):
    cdf = topic_cdfs(true_topics(spec))
    return draw_documents(cdf, np.asarray(ids, np.int64), spec.alpha, spec.mean_length, spec.seed)


def test_true_topics_are_distributions_with_their_own_emphasis():
    topics = true_topics(SMALL)
    assert topics.shape == (5, 500)
    np.testing.assert_allclose(topics.sum(1), 1.0)
    assert np.all(topics >= 0)
    _, dist = match_topics(topics, topics)
    np.testing.assert_allclose(dist, 0.0, atol=1e-6)
    # topics differ from each other by far more than from themselves
    a = np.sqrt(topics)
    cross = np.sqrt(np.clip(1 - a @ a.T, 0, None))[~np.eye(5, dtype=bool)]
    assert cross.min() > 0.3
    np.testing.assert_array_equal(true_topics(SMALL), topics)  # seeded


def test_same_seed_same_corpus_and_each_document_independent_of_its_batch():
    a = corpus_of(SMALL, range(50))
    b = corpus_of(SMALL, range(50))
    for x, y in zip(a, b, strict=True):
        np.testing.assert_array_equal(x, y)
    indptr, terms, counts = a
    cdf = topic_cdfs(true_topics(SMALL))
    for d in (0, 17, 49):  # one document alone equals its slice of the batch
        t, c = draw_document(cdf, d, SMALL.alpha, SMALL.mean_length, SMALL.seed)
        np.testing.assert_array_equal(t, terms[indptr[d] : indptr[d + 1]])
        np.testing.assert_array_equal(c, counts[indptr[d] : indptr[d + 1]])
    other = corpus_of(CorpusSpec(**{**SMALL.to_dict(), "seed": 8}), range(50))
    assert not np.array_equal(other[1], terms)


def test_lengths_are_poisson_and_term_frequencies_zipfian():
    spec = CorpusSpec(n_docs=3000, vocab_size=500, k_true=5, boost_fraction=0.0, seed=4)
    indptr, terms, counts = corpus_of(spec, range(spec.n_docs))
    lengths = np.add.reduceat(counts, indptr[:-1])
    assert abs(lengths.mean() - 100) < 1.0  # sd of the mean: 10/sqrt(3000) ≈ 0.18
    assert abs(lengths.var() / lengths.mean() - 1) < 0.15  # Poisson: variance = mean
    assert np.all(np.diff(terms[indptr[0] : indptr[1]]) > 0)  # sorted, distinct
    freq = np.bincount(terms, weights=counts, minlength=500)
    ranks = np.arange(1, 201)
    slope = np.polyfit(np.log(ranks), np.log(np.sort(freq)[::-1][:200]), 1)[0]
    assert -1.3 < slope < -0.8  # the Zipf exponent is 1
    np.testing.assert_allclose(zipf_base(4, 1.0), np.array([1, 1 / 2, 1 / 3, 1 / 4]) / (25 / 12))


def test_spec_validation_names_the_parameter():
    with pytest.raises(ParamError, match="'k_true' parameter of the corpus generator"):
        CorpusSpec(k_true=0).validate()
    assert cli_main(["generate", "/nonexistent/x", "--docs", "0"]) == 2  # before Spark
    assert "generate" in COMMANDS


# --------------------------------------------------------------------------
# Spark


@pytest.fixture(scope="module")
def generated(spark, tmp_path_factory):
    out = str(tmp_path_factory.mktemp("gen") / "corpus_out")
    generate(spark, SMALL, out, partitions=3)
    return out


@pytest.mark.slow
def test_generated_directory_reads_back(spark, generated, tmp_path):
    df = spark.read.parquet(f"{generated}/corpus")
    assert df.columns == ["id", "features"]
    rows = sorted(df.collect(), key=lambda r: r.id)
    assert [r.id for r in rows] == list(range(SMALL.n_docs))
    assert {r.features.size for r in rows} == {SMALL.vocab_size}
    # the same documents as the pure generator draws, whatever the partitioning
    indptr, terms, counts = corpus_of(SMALL, [0, 999, 1999])
    for i, d in enumerate([0, 999, 1999]):
        np.testing.assert_array_equal(rows[d].features.indices, terms[indptr[i] : indptr[i + 1]])
        np.testing.assert_array_equal(rows[d].features.values, counts[indptr[i] : indptr[i + 1]])
    spec, topics = read_generated(spark, generated)
    assert spec == SMALL
    assert topics.tobytes() == true_topics(SMALL).tobytes()  # bit for bit
    with pytest.raises(ModelPathError, match="already exists; pass --overwrite"):
        generate(spark, SMALL, generated)
    # another partitioning, overwriting: the same corpus
    small = CorpusSpec(**{**SMALL.to_dict(), "n_docs": 40})
    out = str(tmp_path / "again")
    generate(spark, small, out, partitions=1)
    generate(spark, small, out, partitions=4, overwrite=True)
    again = {r.id: r.features for r in spark.read.parquet(f"{out}/corpus").collect()}
    assert len(again) == 40
    assert all(again[d] == rows[d].features for d in range(40))
    assert not [p for p in (tmp_path).iterdir() if ".tmp-" in p.name]  # renamed into place


@pytest.fixture(scope="module")
def parquet_source(spark, generated):
    return source_from_config(
        spark,
        {
            "format": "parquet",
            "path": f"{generated}/corpus",
            "features_col": "features",
            "id_col": "id",
        },
    )


@pytest.mark.slow
def test_scvb0_recovers_the_true_topics_from_the_parquet_output(spark, generated, parquet_source):
    """SCVB0 at K = K_true on 2,000 documents: each true topic is matched (one to one) by a
    learned topic nearer to it than any two true topics are to each other. (SCVB0 lands
    in a local optimum on a corpus this small, merging parts of two topics, so the bound
    is the true topics' separation; CVB0 below reaches a tight one.)"""
    params = TrainParams(k=5, passes=8, minibatch_size=500, seed=1, alpha=0.1, eta=0.01)
    model = fit(parquet_source, params).model
    _, topics = read_generated(spark, generated)
    _, dist = match_topics(topics, model.topics_matrix().T)
    a = np.sqrt(topics)
    separation = np.sqrt(np.clip(1 - a @ a.T, 0, None))[~np.eye(5, dtype=bool)].min()
    assert dist.max() < separation, (dist, separation)
    assert np.median(dist) < 0.3, dist


@pytest.mark.slow
def test_cvb0_recovers_the_true_topics_closely(spark, generated, parquet_source):
    params = TrainParams(algorithm="cvb0", k=5, passes=30, seed=1, alpha=0.1, eta=0.01)
    model = fit(parquet_source, params).model
    _, topics = read_generated(spark, generated)
    _, dist = match_topics(topics, model.topics_matrix().T)
    assert dist.max() < 0.12, dist


@pytest.mark.slow
def test_generate_under_spark_connect(connect, tmp_path):
    """DataFrame API only: the same documents through a Spark Connect session."""
    small = CorpusSpec(**{**SMALL.to_dict(), "n_docs": 30})
    out = str(tmp_path / "connect_out")
    generate(connect, small, out, partitions=2)
    rows = sorted(connect.read.parquet(f"{out}/corpus").collect(), key=lambda r: r.id)
    assert [r.id for r in rows] == list(range(30))
    _, terms, counts = corpus_of(small, [29])
    np.testing.assert_array_equal(rows[29].features.indices, terms)
    np.testing.assert_array_equal(rows[29].features.values, counts)
    spec, topics = read_generated(connect, out)
    assert spec == small and topics.tobytes() == true_topics(small).tobytes()
    with pytest.raises(ModelPathError, match="already exists"):
        generate(connect, small, out)
