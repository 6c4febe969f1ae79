"""Left-to-right evaluation on Spark: on the executors of both backends (the classic RDD
one and the DataFrame one that Spark Connect uses), the same score whatever the
partitioning, and chosen by training's `evaluator` parameter."""

from __future__ import annotations

import numpy as np
import pytest
from pyspark.ml.linalg import Vectors

from sparklda.api import fit
from sparklda.block import HeldoutBlock
from sparklda.corpus import FrameLayout, build_corpus, from_vectors
from sparklda.errors import ParamError
from sparklda.evaluation import completion_loglik, heldout_loglik, left_to_right_loglik
from sparklda.execution.scoring import LeftToRight, score_blocks
from sparklda.model import TopicModel
from sparklda.params import TrainParams
from tests.helpers import planted_docs


@pytest.fixture(scope="module")
def vectors(spark):
    docs, v = planted_docs(n_docs=60, doc_len=20)
    rows = [(int(d), Vectors.sparse(v, t.tolist(), c.tolist())) for d, t, c in docs]
    return spark.createDataFrame(rows, ["doc", "features"])


def _phi(v, k=4, seed=0):
    phi = np.random.default_rng(seed).random((v, k)) + 0.05
    return phi / phi.sum(0)


@pytest.mark.slow  # two corpus builds and five scoring jobs (about 10 s)
def test_both_backends_and_any_partitioning_give_the_same_score(spark, vectors):
    """The classic and the DataFrame layouts of one input give the same left-to-right
    score, and so do the held-out documents in one partition or in five, and the blocks
    scored locally: each document's estimate is keyed by the seed and its id only."""
    args = dict(minibatch_size=30, heldout_count=15, seed=3)
    rdd_corpus = build_corpus(from_vectors(vectors, "features", "doc"), **args)
    frame_corpus = build_corpus(
        from_vectors(vectors, "features", "doc"), layout=FrameLayout(), **args
    )
    try:
        phi = _phi(rdd_corpus.vocab_size)
        a = left_to_right_loglik(rdd_corpus.heldout, phi, 0.2, particles=4, seed=8)
        b = left_to_right_loglik(frame_corpus.heldout, phi, 0.2, particles=4, seed=8)
        assert a.documents == b.documents == 15
        assert a.tokens == b.tokens == 15 * 20  # whole documents: both halves
        assert a.loglik_per_token == pytest.approx(b.loglik_per_token, rel=1e-12)
        blocks: list[HeldoutBlock] = rdd_corpus.heldout.collect()
        total, tokens, _ = score_blocks(phi, blocks, 0.2, 100, 1e-4, LeftToRight(4, 8))
        assert a.loglik_per_token == pytest.approx(total / tokens, rel=1e-12)
        one = rdd_corpus.heldout.coalesce(1)
        five = rdd_corpus.heldout.flatMap(lambda hb: _singletons(hb)).repartition(5)
        for parts in (one, five):
            s = heldout_loglik(parts, phi, 0.2, "left_to_right", particles=4, seed=8)
            assert s.loglik_per_token == pytest.approx(a.loglik_per_token, rel=1e-12)
        other_seed = left_to_right_loglik(rdd_corpus.heldout, phi, 0.2, particles=4, seed=9)
        assert other_seed.loglik_per_token != a.loglik_per_token
        completion = completion_loglik(rdd_corpus.heldout, phi, 0.2)
        assert completion.tokens < a.tokens  # the second halves only
    finally:
        rdd_corpus.unpersist()
        frame_corpus.unpersist()


def _singletons(hb):
    """A held-out block cut into one block per document."""
    from sparklda.block import DocBlock

    for j in range(hb.n_docs):
        halves = []
        for b in (hb.observed, hb.target):
            a, e = b.indptr[j], b.indptr[j + 1]
            terms = b.terms[b.local[a:e]]
            halves.append(DocBlock.from_docs([(int(b.doc_ids[j]), terms, b.counts[a:e])]))
        yield HeldoutBlock(*halves)


def test_evaluator_values_are_checked(spark):
    """Bad values fail before any Spark job, naming the parameter and its owner."""
    with pytest.raises(ParamError, match="'evaluator' parameter of LDA must be one of"):
        TrainParams(evaluator="harmonic_mean").validate()
    with pytest.raises(ParamError, match="'particles' parameter of LDA must be an int"):
        TrainParams(evaluator="left_to_right", particles=0).validate()
    held = spark.sparkContext.emptyRDD()
    with pytest.raises(ParamError, match="'particles' parameter of left_to_right_loglik"):
        left_to_right_loglik(held, _phi(24), 0.1, particles=-1)
    with pytest.raises(
        ParamError,
        match=r"'evaluator' parameter of heldout_loglik must be one of "
        r"\['completion', 'left_to_right'\]. Got 'perplexity'",
    ):
        heldout_loglik(held, _phi(24), 0.1, evaluator="perplexity")


@pytest.mark.slow  # two fits and a corpus build (about 15 s)
@pytest.mark.parametrize("execution", ["classic", "dataframe"])
def test_training_scores_with_the_chosen_evaluator(spark, vectors, execution):
    """`evaluator = "left_to_right"`: training's evaluations are the left-to-right score
    of the model on the held-out documents (seeded by the run's seed), recorded with
    the evaluator's name, the same on both executions."""
    params = TrainParams(
        algorithm="cvb0",
        k=4,
        passes=1,
        heldout_count=12,
        seed=2,
        dtype="float64",
        evaluator="left_to_right",
        particles=3,
        execution=execution,
    )
    res = fit(from_vectors(vectors, "features", "doc"), params)
    final = res.evaluations[-1]
    assert final["evaluator"] == "left_to_right"
    corpus = build_corpus(from_vectors(vectors, "features", "doc"), heldout_count=12, seed=2)
    try:
        model: TopicModel = res.model
        again = model.evaluate(corpus.heldout, evaluator="left_to_right", particles=3, seed=2)
        assert final["heldout_loglik"] == pytest.approx(again.loglik_per_token, rel=1e-9)
        assert final["heldout_tokens"] == again.tokens == 12 * 20
        completion = model.evaluate(corpus.heldout)
        assert completion.loglik_per_token != again.loglik_per_token
    finally:
        corpus.unpersist()


@pytest.mark.slow  # three scoring jobs over a DataFrame (about 5 s)
def test_ml_model_scores_whole_documents_with_the_evaluator_param(spark, vectors):
    """LDAModel's `evaluator` and `particles` Params: logLikelihood is the sum of the
    whole documents' estimates (rows numbered by position, seeded by `seed`), the
    same through the DataFrame backend, and logPerplexity minus its per-token mean."""
    from sparklda import LDAModel
    from sparklda.execution import FrameBackend
    from sparklda.kernels.left_to_right import left_to_right_block

    df = vectors.orderBy("doc").coalesce(2)
    phi = _phi(24, seed=3)
    model = LDAModel(TopicModel(phi, 0.3, 0.0)).setSeed(5)
    model.setEvaluator("left_to_right").setParticles(3)
    rows = [r.features for r in df.collect()]
    docs = [(i, v.indices, v.values) for i, v in enumerate(rows) if v.numNonzeros()]
    want = sum(
        left_to_right_block([i], [0, len(t)], np.arange(len(t)), c, phi[t], 0.3, 3, 5)[0]
        for i, t, c in docs
    )
    tokens = sum(c.sum() for _, _, c in docs)
    assert model.logLikelihood(df) == pytest.approx(want, rel=1e-12)
    assert model.logPerplexity(df) == pytest.approx(-want / tokens, rel=1e-12)
    frame = FrameBackend().score_vectors(
        df, "features", model.topicModel.topics_matrix(), 0.3, 5, 100, LeftToRight(3, 5)
    )
    assert frame.loglik_per_token * frame.tokens == pytest.approx(want, rel=1e-12)
    with pytest.raises(ParamError, match="'evaluator' parameter of LDA must be one of"):
        model.setEvaluator("bound").logLikelihood(df)
