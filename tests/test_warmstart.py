"""Warm start: continue training from a model on a new or grown corpus."""

from __future__ import annotations

import gzip
import os
from collections import Counter

import numpy as np
import pytest

from sparklda.corpus import CorpusError, DocSource
from sparklda.model import TopicModel
from sparklda.params import TrainParams
from sparklda.warmstart import align_initial, merge_vocabularies, project_to_vocabulary
from tests.helpers import ROOT, kos_word_docs

K = 6


def source_of(spark, docs, vocab, what="test corpus"):
    rdd = spark.sparkContext.parallelize(
        [(i, np.asarray(t, np.int64), np.asarray(c, np.float64)) for i, t, c in docs], 2
    )
    return DocSource(rdd, len(vocab), vocab, what)


# --------------------------------------------------------------------------
# Vocabulary alignment


def test_merge_keeps_old_ids_and_appends_new_terms_in_order():
    merged, mapping = merge_vocabularies(["a", "b", "c"], ["d", "b", "e", "a"])
    assert merged == ["a", "b", "c", "d", "e"]
    assert mapping.tolist() == [3, 1, 4, 0]


def test_align_initial_remaps_documents_by_term(spark):
    old = TopicModel(np.arange(12.0).reshape(3, 4) + 1, 0.1, 0.01, ["a", "b", "c"])
    new_vocab = ["d", "c", "a"]
    docs = [(0, [0, 1, 2], [1, 2, 3]), (1, [1], [5]), (2, [], [])]
    src, tw = align_initial(old, source_of(spark, docs, new_vocab), TrainParams(k=4))
    assert src.vocab == ["a", "b", "c", "d"] and src.vocab_size == 4
    np.testing.assert_array_equal(tw[:3], old.topic_word)
    np.testing.assert_array_equal(tw[3], 0)  # a new term starts from the prior
    got = {
        d: dict(zip((src.vocab[t] for t in terms), counts, strict=False))
        for d, terms, counts in src.rdd.collect()
    }
    assert got == {0: {"d": 1, "c": 2, "a": 3}, 1: {"c": 5}, 2: {}}
    for _, terms, _ in src.rdd.collect():
        assert list(terms) == sorted(terms)


def test_align_initial_checks_term_ids_before_remapping(spark):
    old = TopicModel(np.ones((3, 4)), 0.1, 0.01, ["a", "b", "c"])
    for bad in (-1, 3):
        src, _ = align_initial(
            old,
            source_of(spark, [(0, [0], [1]), (7, [bad], [2])], ["c", "b", "x"]),
            TrainParams(k=4),
        )
        with pytest.raises(
            Exception, match=f"term id {bad} in document 7, outside the vocabulary of 3 terms"
        ):
            src.rdd.collect()


def test_align_initial_without_vocabularies(spark):
    old = TopicModel(np.ones((3, 4)), 0.1, 0.01, ["a", "b", "c"])
    docs = [(0, [0, 2], [1, 1])]
    vectors = DocSource(source_of(spark, docs, ["x", "y", "z"]).rdd, 3, None, "vectors")
    src, tw = align_initial(old, vectors, TrainParams(k=4))
    assert src.vocab == ["a", "b", "c"]  # ids taken as the model's: its vocabulary is kept
    np.testing.assert_array_equal(tw, old.topic_word)
    with pytest.raises(CorpusError, match="has 5 terms but the initial model has 3"):
        align_initial(old, DocSource(src.rdd, 5, None, "vectors"), TrainParams(k=4))
    with pytest.raises(
        CorpusError, match="The 'k' parameter \\(5\\) must equal the initial model's k \\(4\\)"
    ):
        align_initial(old, src, TrainParams(k=5))


def test_project_to_vocabulary_drops_unknown_terms(spark):
    src = source_of(spark, [(0, [0, 1, 2], [1, 2, 3]), (1, [1], [4])], ["c", "zz", "a"])
    out = project_to_vocabulary(src, ["a", "b", "c"], 3)
    got = {d: (t.tolist(), c.tolist()) for d, t, c in out.rdd.collect()}
    assert got == {0: ([0, 2], [3.0, 1.0]), 1: ([], [])}
    assert out.vocab == ["a", "b", "c"] and out.vocab_size == 3
    with pytest.raises(CorpusError, match="have 3 terms but the model has 4"):
        project_to_vocabulary(DocSource(src.rdd, 3, None, "v"), ["a", "b", "c", "d"], 4)


# --------------------------------------------------------------------------
# Continue training: A, then B


@pytest.fixture(scope="module")
def corpora(spark):
    from pyspark.ml.feature import CountVectorizer

    def frame(a, b):
        df = spark.createDataFrame(
            kos_word_docs(a, b) + [(100_000 + a, [])], "id long, words array<string>"
        )
        return df.cache()

    a, b, held = frame(0, 400), frame(400, 800), frame(800, 1000)
    cv_a = CountVectorizer(inputCol="words", outputCol="features", minDF=2.0).fit(a)
    cv_b = CountVectorizer(inputCol="words", outputCol="features", minDF=2.0).fit(b)
    yield a, b, held, cv_a, cv_b
    for df in (a, b, held):
        df.unpersist()


@pytest.mark.slow
def test_continuing_on_b_beats_the_initial_model_and_keeps_a_term_ids(corpora):
    from pyspark.ml.feature import CountVectorizerModel
    from pyspark.sql import functions as F

    from sparklda import LDA, LDAModel

    a, b, held, cv_a, cv_b = corpora
    model_a = LDA(k=K, maxIter=3, seed=1, minibatchSize=200, vocabulary=cv_a.vocabulary).fit(
        cv_a.transform(a)
    )
    counted_b = cv_b.transform(b)
    warm = LDA(
        k=K, maxIter=1, seed=2, minibatchSize=200, vocabulary=cv_b.vocabulary, initialModel=model_a
    ).fit(counted_b)

    # A's term ids are never lost: the merged vocabulary starts with A's, in order
    va, merged = cv_a.vocabulary, warm.topicModel.vocab
    new_terms = [t for t in cv_b.vocabulary if t not in set(va)]
    assert new_terms and merged == va + new_terms
    assert warm.topicModel.metadata["warm_start"] == {
        "initial_model": f"LDAModel {model_a.uid}",
        "initial_vocab_size": len(va),
        "new_terms": len(new_terms),
    }
    # ... and A's topics are continued, not replaced: each keeps most of its top terms (a
    # cold start would label its topics in an unrelated order)
    phi_a = model_a.topicModel.topics_matrix()
    phi_w = warm.topicModel.topics_matrix()[: len(va)]
    for k in range(K):
        top_a, top_w = set(np.argsort(-phi_a[:, k])[:20]), set(np.argsort(-phi_w[:, k])[:20])
        assert len(top_a & top_w) >= 10, f"topic {k} lost its terms"

    # B's held-out documents, over the terms every model knows (B's vocabulary)
    known = list(cv_b.vocabulary)
    held_b = held.withColumn("words", F.filter("words", lambda w: w.isin(known)))

    def perplexity(model):
        cvm = CountVectorizerModel.from_vocabulary(
            model.topicModel.vocab, inputCol="words", outputCol="features"
        )
        return model.logPerplexity(cvm.transform(held_b))

    tm = model_a.topicModel
    padded = np.zeros((len(merged), K))
    padded[: tm.vocab_size] = tm.topic_word
    initial = LDAModel(TopicModel(padded, tm.alpha, tm.eta, merged))
    # continuing on B improves on B's held-out documents
    assert perplexity(warm) < perplexity(initial)


# --------------------------------------------------------------------------
# The job: conf/warmstart.toml


def write_uci(directory, docs, vocab):
    """UCI docword.txt.gz + vocab.txt of [(id, words)] over ``vocab`` (words outside it are
    dropped)."""
    os.makedirs(directory, exist_ok=True)
    index = {t: i for i, t in enumerate(vocab)}
    lines = []
    for d, words in docs:
        for t, c in sorted(Counter(index[w] for w in words if w in index).items()):
            lines.append(f"{d + 1} {t + 1} {c}")
    with gzip.open(os.path.join(directory, "docword.txt.gz"), "wt") as f:
        # D is the largest document id (ids need not start at 1)
        n_docs = max(d for d, _ in docs) + 1
        f.write(f"{n_docs}\n{len(vocab)}\n{len(lines)}\n" + "\n".join(lines) + "\n")
    with open(os.path.join(directory, "vocab.txt"), "w") as f:
        f.write("\n".join(vocab) + "\n")
    return os.path.join(directory, "docword.txt.gz"), os.path.join(directory, "vocab.txt")


@pytest.mark.slow
def test_train_job_warm_starts_from_conf_warmstart(spark, tmp_path):
    from sparklda.cli import train as train_lda
    from sparklda.cli.config import load_config

    docs_a, docs_b = kos_word_docs(0, 200), kos_word_docs(200, 400)
    vocab_a = sorted({w for _, ws in docs_a for w in ws})
    vocab_b = sorted({w for _, ws in docs_b for w in ws}, reverse=True)  # other ids
    dw_a, v_a = write_uci(tmp_path / "a", docs_a, vocab_a)
    dw_b, v_b = write_uci(tmp_path / "b", docs_b, vocab_b)

    conf = os.path.join(ROOT, "conf", "warmstart.toml")
    first = load_config(
        conf,
        [
            f"input.docword={dw_a}",
            f"input.vocab={v_a}",
            f"output.model={tmp_path / 'm1'}",
            f"training.k={K}",
            "training.passes=1",
            "training.minibatch_size=100",
            "evaluation.heldout_count=20",
        ],
    )
    del first["training"]["initial_model"]  # the first run starts cold
    train_lda.run(spark, first)
    m1 = TopicModel.load(str(tmp_path / "m1"))
    assert m1.vocab == vocab_a

    second = load_config(
        conf,
        [
            f"input.docword={dw_b}",
            f"input.vocab={v_b}",
            f"output.model={tmp_path / 'm2'}",
            f"output.metrics={tmp_path / 'metrics2.json'}",
            f"training.initial_model={tmp_path / 'm1'}",
            f"training.k={K}",
            "training.passes=1",
            "training.minibatch_size=100",
            "evaluation.heldout_count=20",
        ],
    )
    assert second["training"]["initial_model"] == str(tmp_path / "m1")
    metrics = train_lda.run(spark, second)
    m2 = TopicModel.load(str(tmp_path / "m2"))
    new_terms = [t for t in vocab_b if t not in set(vocab_a)]
    assert m2.vocab == vocab_a + new_terms and new_terms
    assert metrics["initial_model"] == str(tmp_path / "m1")
    assert metrics["final"]["heldout_loglik"] > np.log(1 / len(m2.vocab))
