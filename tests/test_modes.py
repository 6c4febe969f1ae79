"""CVB0, CVB and SVB (online and batch VB) on the shared round skeleton.

Planted recovery for every mode, CVB0/CVB agreement, determinism under a
fixed seed, batch VB against a driver-side numpy computation, CVB0
checkpointing (lineage cut, same model with and without), γ memory report.
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.special
from scipy.optimize import linear_sum_assignment

from sparklda.api import fit
from sparklda.corpus import split_documents, validate
from sparklda.kernels.random import Stream
from sparklda.model import TopicModel
from sparklda.modes.svb import gamma_draws, initial_lambda
from sparklda.params import TrainParams
from tests.helpers import assert_recovers_planted, planted_source

V, K = 24, 4  # the planted corpus: 4 topics × 6 words
COMMON_ROUND_KEYS = {
    "round",
    "passes",
    "elapsed_s",
    "round_s",
    "ship_s",
    "job_s",
    "release_s",
    "merge_s",
    "update_s",
    "tokens",
    "tokens_per_s",
    "tasks",
    "shipped_bytes",
    "driver_bytes",
    "merged_bytes",
    "task_kernel_max_s",
}

# Mode settings for the planted corpus (160 documents, 16 held out). CVB0/CVB: a
# minibatch of 1000 gives one slice, so the iteration runs over 2 partitions (the
# approximate distributed scheme needs more iterations the more partitions there are).
# SVB: one step per round (learning_minibatch=0) with τ0 = 1: 144 training documents
# need a fast schedule to move far from the random λ in a few passes (as the SCVB0
# tests do with their ρ^Φ).
SETTINGS = {
    "cvb0": dict(algorithm="cvb0", passes=25, minibatch_size=1000, checkpoint_interval=5),
    "cvb": dict(algorithm="cvb", passes=25, minibatch_size=1000, checkpoint_interval=5),
    "svb": dict(
        algorithm="svb",
        passes=10,
        minibatch_size=40,
        learning_offset=1.0,
        learning_decay=0.51,
        learning_minibatch=0,  # one step per round
    ),
    "svb-batch": dict(algorithm="svb", batch=True, passes=10),
    # MAP-EM: CVB0's settings, its priors above 1
    "map": dict(
        algorithm="map", alpha=1.1, eta=1.01, passes=25, minibatch_size=1000, checkpoint_interval=5
    ),
    "gibbs": dict(algorithm="gibbs", passes=25, minibatch_size=1000, checkpoint_interval=5),
}


def planted_params(name, **kw):
    base = dict(k=K, heldout_count=16, seed=0, alpha=0.1, eta=0.01)
    base.update(SETTINGS[name])
    base.update(kw)
    return TrainParams(**base)


@pytest.fixture(scope="module")
def source(spark):
    return planted_source(spark)


@pytest.fixture(scope="module")
def trained(source):
    """Full planted runs, shared by the tests that only read them."""
    cache = {}

    def get(name):
        if name not in cache:
            res = fit(source, planted_params(name, eval_every=5))
            cache[name] = (res, res.rounds)
        return cache[name]

    return get


def phi_of(model: TopicModel) -> np.ndarray:
    return model.topics_matrix()


def matched(phi_a, phi_b):
    """φ̂_b with its topics reordered to best match φ̂_a (Hungarian, L1 distance)."""
    cost = np.abs(phi_a[:, :, None] - phi_b[:, None, :]).sum(0)
    rows, cols = linear_sum_assignment(cost)
    return phi_b[:, cols[np.argsort(rows)]]


@pytest.mark.slow
@pytest.mark.parametrize("name", list(SETTINGS))
def test_every_mode_recovers_planted_topics(trained, name):
    res, rows = trained(name)
    assert_recovers_planted(res.model.topic_word)
    # the same progress records, evaluation schedule and report as every other mode
    assert res.model.metadata["mode"] == SETTINGS[name]["algorithm"]
    assert res.report["corpus"]["empty_documents_skipped"] == 3
    assert len(rows) == res.report["rounds"]
    assert all(COMMON_ROUND_KEYS <= set(r) for r in rows)
    evaluated = [e["round"] for e in res.evaluations]
    assert evaluated[:-1] == [r for r in range(5, len(rows), 5)]
    assert evaluated[-1] == len(rows)
    assert res.evaluations[-1]["heldout_loglik"] > np.log(1 / V) + 1.0
    assert res.evaluations[-1]["heldout_documents"] == 16


@pytest.mark.slow
def test_rounds_of_each_mode(trained):
    _cvb0, cvb0_rows = trained("cvb0")
    assert len(cvb0_rows) == 25  # one round per iteration, over every partition
    assert cvb0_rows[-1]["passes"] == 25
    # the iterations converge: the share of moved assignments shrinks
    assert cvb0_rows[-1]["nphi_change"] < 0.2 * max(r["nphi_change"] for r in cvb0_rows)
    svb, svb_rows = trained("svb")
    slices = svb.report["corpus"]["slices"]
    assert slices == 4 and len(svb_rows) == 10 * slices
    rhos = [r["rho"] for r in svb_rows]
    np.testing.assert_allclose(rhos, [(1.0 + t) ** -0.51 for t in range(len(rhos))])
    # each pass visits every slice once
    for p in range(10):
        assert sorted(r["slice"] for r in svb_rows[p * slices : (p + 1) * slices]) == [0, 1, 2, 3]
    assert sum(r["docs"] for r in svb_rows[:slices]) == svb.report["corpus"]["training_documents"]


@pytest.mark.slow
def test_cvb0_and_cvb_agree_on_planted_data(trained):
    a, _ = trained("cvb0")
    b, _ = trained("cvb")
    phi_a = phi_of(a.model)
    phi_b = matched(phi_a, phi_of(b.model))
    # φ̂ of the two modes, topic by topic: entries are ~1/6 on a topic's own words
    assert np.abs(phi_a - phi_b).max() < 0.005  # measured 8e-4
    assert abs(a.evaluations[-1]["heldout_loglik"] - b.evaluations[-1]["heldout_loglik"]) < 0.02


@pytest.mark.slow
@pytest.mark.parametrize("name", ["cvb", "svb"])
def test_same_seed_same_model(source, name):
    a = fit(source, planted_params(name, passes=3))
    b = fit(source, planted_params(name, passes=3))
    np.testing.assert_array_equal(a.model.topic_word, b.model.topic_word)
    assert a.evaluations[-1]["heldout_loglik"] == b.evaluations[-1]["heldout_loglik"]
    c = fit(source, planted_params(name, passes=3, seed=1))
    assert not np.allclose(a.model.topic_word, c.model.topic_word)


@pytest.mark.slow
def test_cvb0_checkpoints_cut_the_lineage_and_leave_the_model_unchanged(source):
    """Same seed twice: with a checkpoint every iteration and without any. The
    models are identical (so CVB0 is deterministic, and checkpointing is
    transparent); the lineage of the γ blocks stays short only with checkpoints."""
    every = fit(source, planted_params("cvb0", passes=4, checkpoint_interval=1))
    never = fit(source, planted_params("cvb0", passes=4, checkpoint_interval=0))
    rows_1, rows_0 = every.rounds, never.rounds
    np.testing.assert_array_equal(every.model.topic_word, never.model.topic_word)
    assert every.evaluations[-1]["heldout_loglik"] == never.evaluations[-1]["heldout_loglik"]
    assert every.report["mode"]["checkpoints"] == 4
    assert every.report["mode"]["checkpoint_kind"] == "reliable"
    assert never.report["mode"]["checkpoints"] == 0
    assert all(r["checkpointed"] for r in rows_1) and not any(r["checkpointed"] for r in rows_0)
    depth_1 = [r["lineage_depth"] for r in rows_1]
    depth_0 = [r["lineage_depth"] for r in rows_0]
    assert len(set(depth_1)) == 1  # cut every iteration
    assert depth_0 == sorted(depth_0) and depth_0[-1] >= depth_0[0] + 3  # grows each iteration
    assert depth_1[-1] < depth_0[-1]
    # another seed gives another model
    other = fit(source, planted_params("cvb0", passes=4, checkpoint_interval=0, seed=1))
    assert not np.allclose(other.model.topic_word, never.model.topic_word)


@pytest.mark.slow
def test_cvb0_reports_gamma_memory(trained):
    res, _ = trained("cvb0")
    mode = res.report["mode"]
    pairs = res.report["corpus"]["training_pairs"]
    assert mode["pairs"] == pairs
    assert mode["gamma_bytes"] == pairs * K * 4 and mode["gamma_dtype"] == "float32"


@pytest.mark.slow
@pytest.mark.parametrize("name", ["cvb0", "svb"])
def test_warm_start_from_a_trained_model(source, trained, name):
    """γ (CVB0) or λ (SVB) start from another mode's model: two more rounds keep
    its topics (CVB0 with no checkpoint, so the lineage keeps the broadcast of the
    initial topics: it must stay usable)."""
    start, _ = trained("cvb0")
    res = fit(
        source, planted_params(name, passes=2, checkpoint_interval=0), initial_model=start.model
    )
    assert_recovers_planted(res.model.topic_word)
    phi = matched(phi_of(start.model), phi_of(res.model))
    assert np.abs(phi - phi_of(start.model)).max() < 0.02
    assert (
        abs(res.evaluations[-1]["heldout_loglik"] - start.evaluations[-1]["heldout_loglik"]) < 0.01
    )


# -- batch VB against numpy ---------------------------------------------------------


def numpy_estep(terms, counts, expelogbeta, alpha, gamma0, max_iter, tol):
    """Hoffman's do_e_step for one document, in numpy: returns sstats rows
    (len(terms), K) = n_dw φ_dwk with the final γ."""
    eb = expelogbeta[terms]  # (n, K)
    gamma = gamma0.copy()
    etheta = np.exp(scipy.special.digamma(gamma) - scipy.special.digamma(gamma.sum()))
    for _ in range(max_iter):
        norm = eb @ etheta + 1e-100
        new = alpha + etheta * ((counts / norm) @ eb)
        change = np.abs(new - gamma).mean()
        gamma = new
        etheta = np.exp(scipy.special.digamma(gamma) - scipy.special.digamma(gamma.sum()))
        if change < tol:
            break
    norm = eb @ etheta + 1e-100
    return (counts / norm)[:, None] * etheta[None, :] * eb


@pytest.mark.slow
def test_batch_vb_is_one_full_round_per_pass_with_rho_one(spark, source):
    """batch=True: each pass is one round over every document with ρ = 1, so
    λ = η + Σ_d sstats_d (Algorithm 1 of Hoffman et al. 2010), checked against
    the same computation written in numpy on the driver."""
    passes, alpha, eta = 2, 0.1, 0.01
    params = planted_params("svb-batch", passes=passes, dtype="float64")
    res = fit(source, params)
    rows = res.rounds
    n_train = res.report["corpus"]["training_documents"]
    assert [r["rho"] for r in rows] == [1.0] * passes
    assert [r["docs"] for r in rows] == [n_train] * passes

    # the same training documents as fit used (same seeded split)
    stats = validate(source)
    train_docs, _ = split_documents(source, stats, heldout_count=16, seed=params.seed)
    docs = sorted(train_docs.collect(), key=lambda d: d[0])
    assert len(docs) == n_train
    lam = initial_lambda(params.seed, V, K)
    for p in range(passes):
        elog = scipy.special.digamma(lam) - scipy.special.digamma(lam.sum(0, keepdims=True))
        expelogbeta = np.exp(elog)
        sstats = np.zeros((V, K))
        for doc_id, terms, counts in docs:
            g0 = gamma_draws(params.seed, Stream.DOC_GAMMA + p, np.array([doc_id]), K)[0]
            sstats[terms] += numpy_estep(
                terms, counts, expelogbeta, alpha, g0, params.estep_max_iter, params.estep_tol
            )
        lam = eta + sstats  # ρ = 1, D/|S| = 1
    np.testing.assert_allclose(res.model.topic_word + eta, lam, rtol=1e-6, atol=1e-9)
    # the model's φ̂ is λ / Σλ
    np.testing.assert_allclose(res.model.topics_matrix(), lam / lam.sum(0), rtol=1e-6)


def test_gamma_draws_follow_gamma_100():
    """Hoffman's Gamma(100, 1/100) initialisation of γ: mean 1, sd 0.1, skewness 0.2,
    a function of (seed, stream, document id) only."""
    ids = np.arange(20000)
    x = gamma_draws(0, 5, ids, 8)
    assert x.min() > 0
    assert abs(x.mean() - 1.0) < 2e-3 and abs(x.std() - 0.1) < 2e-3
    skew = ((x - x.mean()) ** 3).mean() / x.std() ** 3
    assert abs(skew - 0.2) < 0.03
    np.testing.assert_array_equal(gamma_draws(0, 5, ids[[7, 3]], 8), x[[7, 3]])
    assert not np.array_equal(gamma_draws(1, 5, ids[:5], 8), x[:5])


class _Sink:
    """A stand-in for the round's accumulator (what a Spark task's add would do)."""

    def __init__(self):
        self.value = {}

    def add(self, term):
        from sparklda.execution.tasks import ByPartition

        self.value = ByPartition().addInPlace(self.value, term)


def test_statistics_sent_in_the_sweeps_pass_equal_the_ones_read_back():
    """A stateful round's one-pass statistics (sent through the accumulator) are the
    ones the statistics pass reads from the new states, block for block, in order; a
    partition that sent nothing leaves them to that pass."""
    from sparklda.block import DocBlock
    from sparklda.execution.tasks import (
        advance_partition,
        init_partition,
        sent_statistics,
        statistics_partition,
    )
    from sparklda.modes.gibbs import init_state_fn, statistics_fn, sweep_fn
    from tests.helpers import planted_docs

    docs, v = planted_docs(n_docs=40)
    blocks = [DocBlock.from_docs(docs[i : i + 15], dtype=np.float32) for i in (0, 15, 30)]
    alpha = np.full(K, 0.1)

    class Value:
        value = None

    init = init_partition(Value, init_state_fn(0, K, alpha))
    items = list(init(blocks))
    nphi = sum(statistics_fn(K)(b, z).sum() for b, z in ((b, s) for b, s, _ in items))
    Value.value = (
        np.full((v, K), nphi / (v * K)),
        np.full(K, nphi / K),
        np.zeros(0, np.int64),
        np.zeros((0, K)),
    )
    kernel, stats = sweep_fn(0, 0, alpha, 0.01, 0.01 * v), statistics_fn(K)

    sink = _Sink()
    sent = list(advance_partition(Value, kernel, stats, sink)(items))
    read = list(statistics_partition(stats)(advance_partition(Value, kernel)(items)))
    got = sent_statistics(sink.value, 1)
    assert [len(x) for x in sent] == [3, 3, 3]  # the items carry no statistics
    assert got is not None and len(got) == len(read) == 3
    for a, b in zip(got, read, strict=True):
        np.testing.assert_array_equal(a.terms, b.terms)
        np.testing.assert_array_equal(a.rows, b.rows)
        assert a.extra == b.extra and set(a.timings) == set(b.timings) == {"kernel", "stats"}
    assert sent_statistics(sink.value, 2) is None  # partition 1 sent nothing
    sink.add({0: []})  # a partition computed again replaces its entry
    assert sent_statistics(sink.value, 1) == []
