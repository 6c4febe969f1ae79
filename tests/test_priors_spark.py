"""Learned priors on Spark, every mode: a corpus drawn from a known asymmetric α (numpy
generator below) gives back α's ordering and magnitude; η is learned; the model keeps the
learned α (saved, loaded, used by transform and LDAModel.estimatedDocConcentration).

Each run warm-starts from the generating topics, so what is tested is the learning of the
priors, not whether a mode finds a small corpus's topics from a random start (a local
optimum that splits the dominant topic would make the α of the merged ones meaningless).
"""

from __future__ import annotations

import numpy as np
import pytest

from sparklda.api import fit
from sparklda.corpus import DocSource, read_uci
from sparklda.model import TopicModel
from sparklda.params import TrainParams
from tests.helpers import KOS_DOCWORD, KOS_VOCAB

K, W, D, L = 3, 8, 300, 60  # 3 topics owning 8 words each, 300 documents of 60 tokens
V = K * W
TRUE_ALPHA = np.array([1.0, 0.4, 0.15])
VOCAB = [f"w{i}" for i in range(V)]

SETTINGS = {
    "scvb0": dict(passes=4, minibatch_size=50, s_phi=5.0, tau_phi=10.0, schedule_minibatch=100),
    "cvb0": dict(passes=12, minibatch_size=1000),
    "cvb": dict(passes=12, minibatch_size=1000),
    "svb": dict(passes=8, minibatch_size=150, learning_offset=1.0, learning_decay=0.51),
}


def generated_docs(seed=1):
    """Documents with θ_d ~ Dirichlet(TRUE_ALPHA); topic k's words are [k·W, (k+1)·W)."""
    rng = np.random.default_rng(seed)
    docs = []
    for d in range(D):
        theta = rng.dirichlet(TRUE_ALPHA)
        z = rng.choice(K, size=L, p=theta)
        words = z * W + rng.integers(0, W, size=L)
        terms, counts = np.unique(words, return_counts=True)
        docs.append((d, terms.astype(np.int64), counts.astype(np.float64)))
    return docs


def true_topics() -> TopicModel:
    tw = np.zeros((V, K))
    for k in range(K):
        tw[k * W : (k + 1) * W, k] = D * L * TRUE_ALPHA[k] / TRUE_ALPHA.sum() / W
    return TopicModel(tw, 0.3, 0.01, VOCAB)


@pytest.fixture(scope="module")
def source(spark):
    return DocSource(spark.sparkContext.parallelize(generated_docs(), 2), V, VOCAB, "generated")


@pytest.fixture(scope="module")
def learned(source):
    cache = {}

    def get(algorithm, **kw):
        key = (algorithm, tuple(sorted(kw.items())))
        if key not in cache:
            values = dict(
                algorithm=algorithm,
                k=K,
                alpha=0.3,
                eta=0.01,
                seed=0,
                heldout_count=30,
                optimize_alpha=True,
                **SETTINGS[algorithm],
            )
            p = TrainParams(**{**values, **kw})
            cache[key] = fit(source, p, initial_model=true_topics())
        return cache[key]

    return get


def topic_order(model: TopicModel) -> np.ndarray:
    """The learned topic holding each generating topic's words."""
    blocks = model.topic_word.reshape(K, W, K).sum(1)  # (generating, learned)
    order = blocks.argmax(1)
    assert sorted(order) == list(range(K)), blocks
    return order


@pytest.mark.slow
@pytest.mark.parametrize("algorithm", list(SETTINGS))
def test_learned_alpha_recovers_the_generating_alpha(learned, algorithm):
    """With its total learned too (optimize_alpha_sum)."""
    res = learned(algorithm, optimize_alpha_sum=True)
    alpha = res.model.alpha[topic_order(res.model)]
    assert np.corrcoef(alpha, TRUE_ALPHA)[0, 1] > 0.9, alpha
    assert list(np.argsort(alpha)) == [2, 1, 0], alpha
    ratio = alpha / TRUE_ALPHA
    assert ratio.min() > 0.5 and ratio.max() < 2.0, alpha
    # the rounds show it moving; η stays as given
    sums = [r["alpha_sum"] for r in res.rounds]
    assert sums[-1] != pytest.approx(0.9) and len(set(sums)) > 1
    if algorithm != "svb":  # the first quarter of the run (at least a pass) is burn-in
        burnin = max(1, SETTINGS[algorithm]["passes"] // 4)
        held = {r["alpha_sum"] for r in res.rounds if r["passes"] <= burnin}
        assert len(held) == 1 and held.pop() == pytest.approx(0.9)
        assert res.rounds[0]["passes"] <= burnin
    assert res.model.eta == 0.01
    assert res.evaluations[-1]["heldout_loglik"] > np.log(1 / V)
    # the fit's report carries the learned α per topic, the model's
    pri = res.report["priors"]
    np.testing.assert_array_equal(pri["alpha"], res.model.alpha)
    assert pri["learned_alpha"] and not pri["learned_eta"] and pri["eta"] == 0.01


@pytest.mark.slow
@pytest.mark.parametrize("algorithm", list(SETTINGS))
def test_learned_alpha_beats_a_mis_set_symmetric_alpha_on_held_out_documents(learned, algorithm):
    """From a symmetric α = 0.3 (the data's is asymmetric, 1.0 / 0.4 / 0.15), the default
    optimize_alpha (α's total kept at 3 · 0.3 in every mode) learns the asymmetry: its
    ordering matches the generating α's and the held-out score rises."""
    fixed = learned(algorithm, optimize_alpha=False)
    res = learned(algorithm)
    alpha = res.model.alpha[topic_order(res.model)]
    assert list(np.argsort(alpha)) == [2, 1, 0], alpha
    assert alpha.sum() == pytest.approx(0.9, rel=1e-9)
    gain = res.evaluations[-1]["heldout_loglik"] - fixed.evaluations[-1]["heldout_loglik"]
    assert gain > 0.002, gain


@pytest.mark.slow
def test_learned_alpha_is_saved_loaded_and_used(tmp_path, spark):
    truth = true_topics()
    model = TopicModel(truth.topic_word, TRUE_ALPHA, 0.01, VOCAB)
    assert not model.symmetric_alpha
    path = str(tmp_path / "m")
    model.save(path)
    back = TopicModel.load(path)
    np.testing.assert_array_equal(back.alpha, model.alpha)
    assert back.metadata["format_version"] == 3
    # transform folds in with the learned α: an empty document gets the prior mean α/α0
    from pyspark.ml.linalg import Vectors

    df = spark.createDataFrame([(Vectors.sparse(V, [], []),)], ["features"])
    theta = back.transform(df).collect()[0]["topicDistribution"].toArray()
    np.testing.assert_allclose(theta, model.alpha / model.alpha.sum(), rtol=1e-6)
    from sparklda.ml import LDAModel

    est = LDAModel(back).estimatedDocConcentration().toArray()
    np.testing.assert_array_equal(est, model.alpha)
    # a symmetric model is still written as format 2 with α a number
    sym = TopicModel(model.topic_word, 0.2, model.eta, model.vocab)
    sym.save(str(tmp_path / "s"))
    again = TopicModel.load(str(tmp_path / "s"))
    assert again.metadata["format_version"] == 2 and again.symmetric_alpha
    np.testing.assert_array_equal(again.alpha, np.full(K, 0.2))


@pytest.mark.slow
def test_learned_eta_moves_towards_the_data_from_either_side(learned):
    """η learned by the fixed point on the topic-word statistics moves down from a start
    above the data's value and up from one below it; the model keeps the learned η.
    (From either side it settles near 0.2-0.3 on this corpus, whose soft assignments
    give every word some mass in every topic, so the start above is 1.0.)"""
    high = learned("cvb0", optimize_eta=True, eta=1.0)
    low = learned("cvb0", optimize_eta=True, eta=0.001)
    assert high.model.eta < 1.0 * 0.97
    assert low.model.eta > 0.001 * 1.5
    for res in (high, low):
        assert res.rounds[-1]["eta"] == res.model.eta


# --------------------------------------------------------------------------
# Seeded topics on KOS

SEEDS = {
    0: ["iraq", "war", "troops"],
    1: ["dean", "edwards", "clark"],
    2: ["senate", "race", "governor"],
}
SEED_SETTINGS = {
    "scvb0": dict(passes=3, minibatch_size=1000),
    "cvb0": dict(passes=15, minibatch_size=4000),
}


@pytest.mark.slow
@pytest.mark.parametrize("algorithm", list(SEED_SETTINGS))
def test_seeded_topics_carry_their_seed_words_at_no_cost_in_quality(spark, algorithm):
    """K=8 on KOS: each seeded topic's top 10 terms hold its seed words, and the held-out
    score stays within 0.02 nats per token of the unseeded model's."""
    src = read_uci(spark, KOS_DOCWORD, KOS_VOCAB)
    base = dict(algorithm=algorithm, k=8, heldout_count=300, seed=0, **SEED_SETTINGS[algorithm])
    plain = fit(src, TrainParams(**base))
    seeded = fit(src, TrainParams(**base, seed_topics=SEEDS, seed_confidence=0.1))
    topics = seeded.model.describe_topics(10)
    for k, words in SEEDS.items():
        assert set(words) <= set(topics[k]["terms"]), (k, topics[k]["terms"])
    # without seeds the same topics do not hold them
    unseeded = plain.model.describe_topics(10)
    assert not all(set(w) <= set(unseeded[k]["terms"]) for k, w in SEEDS.items())
    gap = plain.evaluations[-1]["heldout_loglik"] - seeded.evaluations[-1]["heldout_loglik"]
    assert gap < 0.02, gap
