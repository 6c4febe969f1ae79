"""Collapsed Gibbs sampling (``algorithm = "gibbs"``): the sparse sampler against the
dense reference written from Eq. 52 (same draws, same topics), the sampled
frequencies against the exact conditional, the draws' keys, and the mode on Spark
(planted topics, determinism, averaging, warm start, seeded topics, learned α, the
DataFrame path, the pyspark.ml API). Resume and the planted runs shared with the other
modes are in tests/test_resume.py and tests/test_modes.py (their ``SETTINGS``)."""

from __future__ import annotations

import os

import numpy as np
import pytest
from scipy.stats import chisquare

from sparklda.api import fit
from sparklda.block import DocBlock
from sparklda.kernels.gibbs import (
    assignment_dtype,
    count_refresh,
    gibbs_init,
    gibbs_sweep,
    int_counts,
    shipped_counts,
    topic_counts,
)
from sparklda.kernels.random import doc_keys, uniform_matrix
from sparklda.modes.gibbs import sweep_fn
from sparklda.params import TrainParams
from tests import reference_modes as ref
from tests.helpers import (
    KOS_DOCWORD,
    KOS_VOCAB,
    Crash,
    CrashAt,
    assert_recovers_planted,
    planted_source,
)

# --------------------------------------------------------------------------- kernel


def block_fixture(seed, n_docs=7, n_terms=10, k=6, max_count=4):
    """A random block (documents of distinct sorted terms, counts 1..max_count), its
    initial topics, and global counts: the block's own plus other blocks' tokens."""
    rng = np.random.default_rng(seed)
    lens = rng.integers(1, 6, n_docs)
    lens[2] = 0  # an empty document
    indptr = np.concatenate([[0], np.cumsum(lens)]).astype(np.int64)
    local = np.concatenate([np.sort(rng.choice(n_terms, n, replace=False)) for n in lens]).astype(
        np.int32
    )
    counts = rng.integers(1, max_count + 1, len(local)).astype(np.float32)
    z = rng.integers(0, k, int(counts.sum())).astype(assignment_dtype(k))
    nphi = topic_counts(local, n_terms, counts, z, k)
    nphi += rng.integers(0, 3, (n_terms, k))  # other blocks' tokens of these terms
    nz = nphi.sum(0) + rng.integers(0, 20, k)  # ... and of other terms
    return indptr, local, counts, z, nphi, nz


def doc_draws(seed, stream, indptr, counts):
    """The keyed draws of a block's tokens: each document's uniform_matrix row."""
    out = []
    for j in range(len(indptr) - 1):
        n = int(counts[indptr[j] : indptr[j + 1]].sum())
        out.append(uniform_matrix(seed, stream, [j], n)[0] if n else np.zeros(0))
    return np.concatenate(out)


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
@pytest.mark.parametrize("alpha", [0.3, "vector"])
def test_sparse_sampler_picks_the_dense_references_topics(seed, alpha):
    """Same uniforms, same topics: the SparseLDA buckets walk Eq. 52's conditional in the
    reference's order, token after token, and the counts follow."""
    indptr, local, counts, z, nphi, nz = block_fixture(seed)
    k = nphi.shape[1]
    a = np.linspace(0.05, 0.8, k) if alpha == "vector" else alpha
    eta, w_eta = 0.05, 0.05 * 40
    draws = np.random.default_rng(100 + seed).random(len(z))
    got_z, got_phi, got_nz = z.copy(), nphi.copy(), nz.astype(np.float64)
    moved = gibbs_sweep(indptr, local, counts, got_z, got_phi, got_nz, a, eta, w_eta, draws=draws)
    want_z, want_phi, want_nz = ref.gibbs_block(
        indptr, local, counts, z, nphi, nz, a, eta, w_eta, draws
    )
    np.testing.assert_array_equal(got_z, want_z)
    np.testing.assert_array_equal(got_phi, want_phi)
    np.testing.assert_array_equal(got_nz, want_nz)
    assert moved == int((got_z != z).sum()) > 0
    # the block's own counts moved with its tokens; the other blocks' stayed
    np.testing.assert_array_equal(
        got_phi - nphi,
        topic_counts(local, nphi.shape[0], counts, got_z, k)
        - topic_counts(local, nphi.shape[0], counts, z, k),
    )


def test_whole_counts_as_int32_sample_as_float64():
    """The mode passes the round's whole counts as int32 (fewer bytes for the sweep to
    read): the same draws pick the same topics and leave the same counts."""
    indptr, local, counts, z, nphi, nz = block_fixture(7)
    draws = np.random.default_rng(7).random(len(z))
    z64, z32, rows = z.copy(), z.copy(), nphi.astype(np.int32)
    gibbs_sweep(indptr, local, counts, z64, nphi, nz.astype(float), 0.2, 0.05, 2.0, draws=draws)
    gibbs_sweep(indptr, local, counts, z32, rows, nz.astype(float), 0.2, 0.05, 2.0, draws=draws)
    np.testing.assert_array_equal(z32, z64)
    np.testing.assert_array_equal(rows, nphi)
    assert not np.array_equal(z32, z)
    near_end = np.full_like(rows, 2**31 - 20)
    with pytest.raises(ValueError, match="int32"):
        gibbs_sweep(
            indptr, local, counts, z32, near_end, nz.astype(float), 0.2, 0.05, 2.0, draws=draws
        )


def test_the_drivers_count_pass_matches_numpy():
    """N^Z, the change measure and the largest count from one pass: numpy's figures."""
    rng = np.random.default_rng(3)
    old = rng.integers(0, 70, (40, 6)).astype(np.float64)
    new = rng.integers(0, 70, (40, 6)).astype(np.float64)
    new[5] = 0.0  # a term no block holds any more
    nz, change, top = count_refresh(new, old)
    ref_nz, ref_change, ref_top = ref.count_refresh(new, old)
    np.testing.assert_array_equal(nz, ref_nz)
    assert (change, top) == (ref_change, ref_top)
    with pytest.raises(ValueError, match="shape"):
        count_refresh(new, old[:3])


@pytest.mark.parametrize(
    ("top", "dtype"), [(65535, np.uint16), (65536, np.int32), (2**31, np.float64)]
)
def test_counts_ship_in_the_smallest_exact_dtype(top, dtype):
    nphi = np.array([[0.0, 3.0], [float(top), 1.0]])
    shipped = shipped_counts(nphi, float(top))
    assert shipped.dtype == dtype
    np.testing.assert_array_equal(shipped, nphi)


def test_a_sweep_on_uint16_counts_is_the_sweep_on_int32_counts():
    """A block's rows shipped as uint16 are widened before the sweep: the same topics as
    from int32 rows, even where the block's changes take a count past 65535."""
    indptr, local, counts, z, nphi, nz = block_fixture(11)
    nphi[:, 0] += 65535 - nphi[:, 0].max()  # a count at uint16's end, to be exceeded
    nz = nphi.sum(0) + 5
    block = DocBlock(
        np.arange(len(indptr) - 1, dtype=np.int64),
        indptr,
        np.arange(10, dtype=np.int32),
        local,
        counts,
    )
    run = sweep_fn(5, 2, np.full(6, 0.2), 0.05, 0.5)
    empty = (np.zeros(0, np.int64), np.zeros((0, 6)))
    z16 = run((nphi.astype(np.uint16), nz, *empty), block, z)
    z32 = run((nphi.astype(np.int32), nz, *empty), block, z)
    np.testing.assert_array_equal(z16, z32)
    assert not np.array_equal(z16, z)


def test_the_buckets_add_up_to_eq52():
    rng = np.random.default_rng(0)
    k = 7
    ndk, nwk, nk = rng.integers(0, 4, k), rng.integers(0, 3, k), rng.integers(5, 30, k)
    alpha = rng.random(k) + 0.01
    q, r, s = ref.gibbs_buckets(ndk, nwk, nk, alpha, 0.02, 0.02 * 50)
    p = ref.gibbs_conditional(ndk, nwk, nk, alpha, 0.02, 0.02 * 50)
    np.testing.assert_allclose(np.add(np.add(q, r), s), p, rtol=1e-14)


def test_keyed_draws_are_each_documents_uniform_matrix_row():
    indptr, local, counts, z, nphi, nz = block_fixture(5)
    keys = doc_keys(9, 77, np.arange(len(indptr) - 1))
    got = z.copy()
    gibbs_sweep(indptr, local, counts, got, nphi.copy(), nz.astype(float), 0.2, 0.1, 1.0, keys)
    want, _, _ = ref.gibbs_block(
        indptr, local, counts, z, nphi, nz, 0.2, 0.1, 1.0, doc_draws(9, 77, indptr, counts)
    )
    np.testing.assert_array_equal(got, want)
    # another key, other draws
    other = z.copy()
    gibbs_sweep(
        indptr, local, counts, other, nphi.copy(), nz.astype(float), 0.2, 0.1, 1.0, keys + 1
    )
    assert not np.array_equal(other, got)


def test_sampled_topics_follow_the_exact_conditional():
    """One document of three tokens; the first token's topic, over 6,000 keys, against
    Eq. 52's conditional given the other two (chi-square)."""
    k = 5
    indptr = np.array([0, 2], dtype=np.int64)
    local = np.array([0, 1], dtype=np.int32)
    counts = np.array([1.0, 2.0])
    z0 = np.array([3, 1, 1], dtype=np.uint16)
    other = np.array([[4.0, 0, 2, 1, 0], [0, 3, 0, 0, 5]])  # other blocks' tokens
    nphi = topic_counts(local, 2, counts, z0, k) + other
    nz = nphi.sum(0) + np.array([10.0, 3, 0, 8, 1])
    alpha, eta, w_eta = np.array([0.5, 0.1, 0.2, 0.3, 0.4]), 0.3, 0.3 * 20
    # the exact conditional of token 0 (term 0): its own topic 3 removed
    ndk = np.array([0, 2.0, 0, 0, 0])
    nwk = nphi[0] - np.eye(k)[3]
    nk = nz - np.eye(k)[3]
    p = np.array(ref.gibbs_conditional(ndk, nwk, nk, alpha, eta, w_eta))
    p /= p.sum()
    n = 6_000
    picks = np.zeros(k)
    for i in range(n):
        z = z0.copy()
        key = doc_keys(1, 5, [i])
        gibbs_sweep(indptr, local, counts, z, nphi.copy(), nz.copy(), alpha, eta, w_eta, key)
        picks[z[0]] += 1
    assert chisquare(picks, p * n).pvalue > 1e-3
    assert np.all(picks > 0)


def test_sweep_refuses_mismatched_inputs():
    indptr, local, counts, z, nphi, nz = block_fixture(0)
    with pytest.raises(ValueError, match="z has"):
        gibbs_sweep(indptr, local, counts, z[:-1], nphi, nz.astype(float), 0.1, 0.1, 1.0)
    with pytest.raises(ValueError, match="one key per document"):
        gibbs_sweep(indptr, local, counts, z, nphi, nz.astype(float), 0.1, 0.1, 1.0)
    with pytest.raises(ValueError, match="whole non-negative"):
        int_counts(np.array([1.0, 0.5]))


@pytest.mark.parametrize("warm", [False, True])
def test_initial_topics_match_the_reference(warm):
    indptr, local, counts, _, _, _ = block_fixture(4)
    k = 6
    keys = doc_keys(3, 41, np.arange(len(indptr) - 1))
    phi = np.random.default_rng(0).random((10, k)) if warm else None
    got = gibbs_init(indptr, local, counts, k, keys, phi, 0.2)
    want = ref.gibbs_init(indptr, local, counts, k, doc_draws(3, 41, indptr, counts), phi, 0.2)
    assert got.dtype == np.uint16
    np.testing.assert_array_equal(got, want)


def test_assignments_are_compact():
    assert assignment_dtype(65535) == np.uint16
    assert assignment_dtype(65536) == np.int32
    indptr = np.array([0, 1], dtype=np.int64)
    z = gibbs_init(indptr, np.array([0], np.int32), np.array([3.0]), 70_000, np.ones(1, np.uint64))
    assert z.dtype == np.int32 and z.max() < 70_000


def test_sparse_sampler_with_many_topics_matches_the_reference():
    """K = 200, few used: the word and document lists stay short, and the picks are the
    reference's (with int32 assignments as beyond 65535 topics)."""
    indptr, local, counts, z, nphi, nz = block_fixture(7, k=200)
    z = z.astype(np.int32)
    draws = np.random.default_rng(1).random(len(z))
    got = z.copy()
    gibbs_sweep(
        indptr, local, counts, got, nphi.copy(), nz.astype(float), 0.1, 0.01, 0.1, None, draws
    )
    want, _, _ = ref.gibbs_block(indptr, local, counts, z, nphi, nz, 0.1, 0.01, 0.1, draws)
    np.testing.assert_array_equal(got, want)


# --------------------------------------------------------------------------- on Spark


def gibbs_params(**kw):
    base = dict(
        algorithm="gibbs",
        k=4,
        alpha=0.1,
        eta=0.01,
        passes=15,
        heldout_count=16,
        seed=0,
        checkpoint_interval=5,
        gibbs_average=3,
    )
    return TrainParams(**{**base, **kw})


def test_a_batch_layout_is_one_slice_of_a_block_per_task():
    from sparklda.modes import MODES
    from sparklda.params import (
        BATCH_MAX_DOCS_PER_TASK,
        default_batch_minibatch_size,
        default_minibatch_size,
    )

    assert MODES["gibbs"].batch_layout and MODES["map"].batch_layout
    assert not MODES["scvb0"].batch_layout
    # 20 Newsgroups' training documents on local[2]: one slice (2 blocks), not 10
    assert default_batch_minibatch_size(2, 18_344) == 18_344
    assert default_minibatch_size(2, 18_344) == 2000
    # never below the minibatch default; at most BATCH_MAX_DOCS_PER_TASK per task
    assert default_batch_minibatch_size(2, 500) == default_minibatch_size(2, 500)
    assert default_batch_minibatch_size(2, 10**6) == 2 * BATCH_MAX_DOCS_PER_TASK
    assert default_batch_minibatch_size(64, 10**9) == default_minibatch_size(64, 10**9)


@pytest.fixture(scope="module")
def source(spark):
    return planted_source(spark)


@pytest.fixture(scope="module")
def trained(source):
    return fit(source, gibbs_params(eval_every=5))


@pytest.mark.slow
def test_gibbs_recovers_planted_topics_and_scores_held_out_documents(trained):
    res = trained
    assert_recovers_planted(res.model.topic_word)
    assert res.model.metadata["mode"] == "gibbs"
    assert [e["round"] for e in res.evaluations] == [5, 10, 15]
    assert res.evaluations[-1]["heldout_loglik"] > np.log(1 / 24) + 1.0
    assert res.evaluations[-1]["heldout_documents"] == 16
    # the counts are the training tokens', averaged over the last 3 sweeps
    tokens = res.report["corpus"]["training_tokens"]
    assert res.model.topic_word.sum() == pytest.approx(tokens, rel=1e-12)
    mode = res.report["mode"]
    assert mode["averaged_sweeps"] == 3 and mode["assignment_dtype"] == "uint16"
    assert mode["assignment_bytes"] == 2 * tokens
    assert [r["averaged_sweeps"] for r in res.rounds] == [0] * 12 + [1, 2, 3]
    # the batch layout: one slice, a block per task of the round
    assert res.report["corpus"]["slices"] == 1
    assert res.rounds[-1]["tasks"] == res.report["corpus"]["parts_per_slice"]


@pytest.mark.slow
def test_same_seed_same_model(source, trained):
    a = fit(source, gibbs_params(eval_every=5))
    np.testing.assert_array_equal(a.model.topic_word, trained.model.topic_word)
    assert a.evaluations[-1]["heldout_loglik"] == trained.evaluations[-1]["heldout_loglik"]
    c = fit(source, gibbs_params(passes=3, seed=1, gibbs_average=1))
    d = fit(source, gibbs_params(passes=3, gibbs_average=1))
    assert not np.array_equal(c.model.topic_word, d.model.topic_word)
    # one sample: whole counts
    np.testing.assert_array_equal(d.model.topic_word, np.round(d.model.topic_word))


@pytest.mark.slow
def test_warm_start_keeps_the_topics(source, trained):
    res = fit(source, gibbs_params(passes=2, gibbs_average=1), initial_model=trained.model)
    assert_recovers_planted(res.model.topic_word)
    start = trained.model.topics_matrix()
    got = res.model.topics_matrix()
    assert np.abs(got - start).max() < 0.05  # the same topics, in the same order
    assert res.evaluations[-1]["heldout_loglik"] > trained.evaluations[-1]["heldout_loglik"] - 0.02


@pytest.mark.slow
def test_seeded_topics_pull_their_words(source):
    """Words 0-2 of planted block 0 seeded into topic 3, words of block 1 into topic 0:
    the planted blocks land in the seeded topics."""
    res = fit(
        source,
        gibbs_params(passes=6, seed_topics={3: [0, 1, 2], 0: [6, 7]}, seed_confidence=0.2),
    )
    phi = res.model.topics_matrix()
    assert phi[:6, 3].sum() > 0.9
    assert phi[6:12, 0].sum() > 0.9


def _driver_only_gibbs(**kw):
    """A Gibbs mode on a stand-in corpus (12 terms), for its driver-side updates."""
    from types import SimpleNamespace

    from sparklda.modes.gibbs import Gibbs

    corpus = SimpleNamespace(
        vocab=[f"w{i}" for i in range(12)],
        vocab_size=12,
        n_train_tokens=40,
        n_train_docs=5,
        n_train_pairs=30,
        n_slices=1,
        parts_per_slice=2,
        slice_docs=[5],
        slice_tokens=[40],
    )
    return Gibbs(corpus, TrainParams(algorithm="gibbs", k=3, **kw))


def test_learned_alpha_steps_on_statistics_pooled_over_sweeps():
    """After the burn-in (a quarter of the sweeps) a learned α moves once every
    ALPHA_INTERVAL sweeps, by Minka's step on those sweeps' statistics summed, and stays
    put in between; a resume between two steps keeps the pool."""
    from sparklda.kernels.priors import keep_total, minka_alpha_step
    from sparklda.modes.gibbs import ALPHA_INTERVAL
    from sparklda.modes.priors import with_extras
    from sparklda.stats import TopicStats

    assert ALPHA_INTERVAL == 5
    counts = np.random.default_rng(4).poisson(1.0, size=(12, 3)).astype(np.float64)
    rng = np.random.default_rng(5)
    sweeps = [np.append(rng.uniform(5, 40, 3), rng.uniform(20, 30)) for _ in range(12)]

    def stats(t):
        rows = with_extras(counts, sweeps[t])
        return TopicStats(np.arange(12, dtype=np.int32), rows, {"tokens": 40.0})

    mode = _driver_only_gibbs(passes=12, optimize_alpha=True)  # burn-in: sweeps 0-2
    mode.set_initial(stats(0))
    start = mode.alpha.copy()
    for t in range(7):
        mode.update(stats(t), t)
        np.testing.assert_array_equal(mode.alpha, start)  # burn-in, then pooling
        if t == 5:
            resumed = _driver_only_gibbs(passes=12, optimize_alpha=True)
            resumed.restore(mode.state())
    assert mode.alpha_pooled == 4
    mode.update(stats(7), 7)  # the fifth sweep after the burn-in (sweeps 3-7)
    pool = np.sum(sweeps[3:8], axis=0)
    want = keep_total(minka_alpha_step(start, pool[:3], pool[3]), 0.3)
    np.testing.assert_allclose(mode.alpha, want, rtol=1e-12)
    assert not np.allclose(want, start) and mode.alpha_pool is None
    for t in (6, 7):
        resumed.update(stats(t), t)
    np.testing.assert_array_equal(resumed.alpha, mode.alpha)
    mode.update(stats(8), 8)  # the next pool starts: α holds
    np.testing.assert_array_equal(resumed.alpha, mode.alpha)


def test_learned_eta_reads_the_sampled_counts_as_whole_numbers():
    """Gibbs's N^Φ are a sample's whole counts: its learned η is Minka's fixed point for
    integer counts (``expected=False``), after the burn-in (a quarter of the passes), not
    the collapsed variational modes' expected-count reading, which weighs a count-1 cell
    by P(N ≥ 1) = 0.63 and gives a smaller η."""
    from sparklda.kernels.priors import minka_eta
    from sparklda.stats import TopicStats

    v, k = 12, 3
    mode = _driver_only_gibbs(passes=4, optimize_eta=True)
    counts = np.random.default_rng(3).poisson(0.6, size=(v, k)).astype(np.float64)
    counts[0] = [5, 0, 0]
    stats = TopicStats(np.arange(v, dtype=np.int32), counts.astype(np.float32), {"tokens": 40.0})
    mode.set_initial(stats)
    mode.update(stats, 0)  # the burn-in: η as given
    assert mode.eta == 0.01
    mode.update(stats, 1)
    whole = minka_eta(counts, 0.01, expected=False)
    assert mode.eta == whole
    assert whole > 1.2 * minka_eta(counts, 0.01, expected=True)
    assert mode.update(stats, 2)["eta"] == minka_eta(counts, whole, expected=False)


@pytest.mark.slow
def test_learned_alpha_moves_after_the_burnin(source):
    res = fit(source, gibbs_params(passes=8, optimize_alpha=True))
    sums = [r["alpha_sum"] for r in res.rounds]
    assert sums[0] == pytest.approx(0.4)
    assert np.all(res.model.alpha > 0)
    assert not np.allclose(res.model.alpha, 0.1)  # asymmetric once learned
    assert sums[-1] == pytest.approx(0.4)  # the total kept (optimize_alpha_sum off)


@pytest.mark.slow
def test_the_dataframe_path_gives_the_classic_model(spark, tmp_path):
    """The same KOS documents (the first thousand) trained with RDDs and with DataFrames
    only: the same assignments, so the same model; resumed from a checkpoint on the
    DataFrame path, too."""
    from sparklda.corpus.readers.uci import read_uci
    from tests.test_resume import _small_kos

    src = read_uci(spark, _small_kos(tmp_path), KOS_VOCAB)
    p = dict(k=8, passes=3, heldout_count=100, minibatch_size=1000, gibbs_average=2)
    a = fit(src, gibbs_params(**p, execution="classic"))
    b = fit(src, gibbs_params(**p, execution="dataframe"))
    np.testing.assert_array_equal(a.model.topic_word, b.model.topic_word)
    # killed after round 2 (checkpoints every round), resumed on the DataFrame path
    ck = str(tmp_path / "ck")
    with pytest.raises(Crash):
        fit(
            src,
            gibbs_params(**p, execution="dataframe", checkpoint_dir=ck, checkpoint_interval=1),
            callbacks=[CrashAt(2)],
        )
    c = fit(
        src,
        gibbs_params(**p, execution="dataframe", checkpoint_dir=ck, checkpoint_interval=1),
        resume=True,
    )
    assert c.report["resumed_after_round"] == 1
    np.testing.assert_array_equal(c.model.topic_word, a.model.topic_word)


@pytest.mark.slow
def test_kos_heldout_close_to_cvb0(spark):
    """Quality sanity on KOS (K = 10, α = 0.1, η = 0.01): after 40 sweeps Gibbs's held-out
    score is within 0.1 nats per token of CVB0's after 20 iterations (measured 0.061:
    CVB0 scores better than a Gibbs sample at small priors, Asuncion et al. 2009; the
    comparison with tomotopy and the lda package is in docs/benchmarks/findings.md),
    and it rose from the 10th sweep."""
    from sparklda.corpus.readers.uci import read_uci

    src = read_uci(spark, KOS_DOCWORD, KOS_VOCAB)
    base = dict(k=10, heldout_count=430, seed=0, alpha=0.1, eta=0.01, minibatch_size=100_000)
    g = fit(src, TrainParams(algorithm="gibbs", passes=40, eval_every=10, **base))
    c = fit(src, TrainParams(algorithm="cvb0", passes=20, **base))
    gap = c.evaluations[-1]["heldout_loglik"] - g.evaluations[-1]["heldout_loglik"]
    assert gap < 0.1, gap
    assert g.evaluations[-1]["heldout_loglik"] > g.evaluations[0]["heldout_loglik"]


@pytest.mark.slow
def test_the_ml_lda_trains_gibbs(spark, tmp_path):
    from pyspark.ml.feature import CountVectorizer

    from sparklda import LDA, LDAModel
    from tests.helpers import kos_word_docs

    words = spark.createDataFrame(kos_word_docs(0, 120), "id long, words array<string>")
    cv = CountVectorizer(inputCol="words", outputCol="features", minDF=2.0).fit(words)
    df = cv.transform(words).cache()
    model = LDA(k=4, maxIter=4, seed=2, algorithm="gibbs", vocabulary=cv.vocabulary).fit(df)
    theta = np.array(
        [r[0].toArray() for r in model.transform(df).select("topicDistribution").collect()]
    )
    np.testing.assert_allclose(theta.sum(1), 1.0, rtol=1e-6)
    path = os.path.join(str(tmp_path), "m")
    model.write().save(path)
    loaded = LDAModel.load(path)
    np.testing.assert_array_equal(loaded.topicsMatrix().toArray(), model.topicsMatrix().toArray())
    assert np.isfinite(model.logPerplexity(df))
    df.unpersist()
