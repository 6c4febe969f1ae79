"""Learned priors and seeded topics without Spark: the kernels with a K-vector α against
their references (tests/reference.py, tests/reference_modes.py), a symmetric vector giving
the scalar's bits, the prior statistics and steps, Minka's fixed point recovering a known
α, and the parameters of seeded topics."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.special

from sparklda import kernels
from sparklda.errors import ParamError
from sparklda.kernels import priors
from sparklda.modes.priors import split_extras, with_extras
from sparklda.modes.seeds import add_seed_rows, seed_boost
from sparklda.params import TrainParams
from tests import reference
from tests import reference_modes as ref
from tests.test_kernels_modes import cvb_fixture, svb_fixture

ALPHA_VEC = np.array([0.05, 0.3, 0.1, 1.2])


def block(seed, n_docs=9, vocab=11, max_terms=7):
    rng = np.random.default_rng(seed)
    indptr, local, counts = [0], [], []
    for j in range(n_docs):
        if j % 4 == 2:
            indptr.append(indptr[-1])  # an empty document
            continue
        n = int(rng.integers(1, max_terms))
        local.extend(np.sort(rng.choice(vocab, size=n, replace=False)))
        counts.extend(rng.integers(1, 5, size=n))
        indptr.append(indptr[-1] + n)
    return (
        np.array(indptr, dtype=np.int64),
        np.array(local, dtype=np.int32),
        np.array(counts, dtype=np.float64),
    )


# --------------------------------------------------------------------------
# Kernels with a K-vector α


@pytest.mark.parametrize("dtype,rtol", [(np.float64, 1e-10), (np.float32, 2e-4)])
def test_scvb0_asymmetric_alpha_and_final_doc_stats_match_reference(dtype, rtol):
    rng = np.random.default_rng(0)
    indptr, local, counts = block(0)
    k = len(ALPHA_VEC)
    phi_norm = rng.random((11, k)) + 0.01
    lengths = np.diff(np.concatenate([[0], np.cumsum(counts)])[indptr])
    theta0 = kernels.init_doc_stats(rng.random((len(indptr) - 1, k)), lengths)
    want, want_theta, want_logp0 = reference.scvb0_block(
        indptr, local, counts, phi_norm, theta0, ALPHA_VEC, 1, return_theta=True
    )
    theta_out = np.zeros(theta0.shape, dtype=dtype)
    logp0 = np.full(theta0.shape, 7.0, dtype=dtype)  # overwritten, not added to
    got = kernels.scvb0_block(
        indptr,
        local,
        counts.astype(dtype),
        phi_norm.astype(dtype),
        theta0.astype(dtype),
        ALPHA_VEC,
        1,
        theta_out=theta_out,
        logp0_out=logp0,
    )
    np.testing.assert_allclose(got, want, rtol=rtol, atol=rtol * 1e-3)
    empty = np.diff(indptr) == 0
    np.testing.assert_allclose(theta_out[~empty], want_theta[~empty], rtol=rtol * 10)
    # log P(N_dk = 0) of the last pass's assignments; 0 for an empty document
    np.testing.assert_allclose(logp0, want_logp0, rtol=rtol * 10, atol=rtol * 1e-2)
    assert (logp0 < 0).all(axis=1)[~empty].all() and not logp0[empty].any()
    assert not theta_out[empty].any()
    # each document's N^Θ keeps its length
    np.testing.assert_allclose(theta_out.sum(1), lengths, rtol=rtol * 10)
    # the prior matters: a symmetric α of the same mean gives other statistics
    other = kernels.scvb0_block(indptr, local, counts, phi_norm, theta0, float(ALPHA_VEC.mean()), 1)
    assert np.abs(other - want).max() > 1e-3


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_symmetric_alpha_vector_gives_the_scalars_bits_in_every_kernel(dtype):
    rng = np.random.default_rng(5)
    indptr, local, counts = block(5)
    k = 7
    alpha = 0.1
    vec = np.full(k, alpha)
    c = counts.astype(dtype)
    phi = (rng.random((11, k)) + 0.01).astype(dtype)
    theta0 = (rng.random((len(indptr) - 1, k)) * 3).astype(dtype)
    a = kernels.scvb0_block(indptr, local, c, phi, theta0, alpha, 2)
    b = kernels.scvb0_block(indptr, local, c, phi, theta0, vec, 2)
    assert np.array_equal(a, b)
    g = rng.random((len(local), k)).astype(dtype)
    g /= g.sum(1, keepdims=True)
    nphi = (rng.random((11, k)) * 5).astype(dtype)
    for second in (False, True):
        extra = (nphi * 0.1, nphi.sum(0) * 0.1) if second else (None, None)
        g1, g2 = g.copy(), g.copy()
        r1 = kernels.cvb0_block(
            indptr, local, c, g1, nphi, nphi.sum(0), alpha, 0.01, 0.2, second, *extra
        )
        r2 = kernels.cvb0_block(
            indptr, local, c, g2, nphi, nphi.sum(0), vec, 0.01, 0.2, second, *extra
        )
        assert np.array_equal(g1, g2) and all(
            np.array_equal(x, y) for x, y in zip(r1, r2, strict=True)
        )
    s1 = kernels.svb_estep_block(indptr, local, c, phi, alpha, theta0 + 1)
    s2 = kernels.svb_estep_block(indptr, local, c, phi, vec, theta0 + 1)
    assert all(np.array_equal(x, y) for x, y in zip(s1, s2, strict=True))
    f1 = kernels.foldin_block(indptr, local, c, phi / phi.sum(0), alpha)
    f2 = kernels.foldin_block(indptr, local, c, phi / phi.sum(0), vec)
    assert np.array_equal(f1, f2)


@pytest.mark.parametrize("second_order", [False, True])
def test_cvb_asymmetric_alpha_matches_reference(second_order):
    indptr, local, counts, gamma, nphi, nz, var_phi, var_z = cvb_fixture(1)
    w_eta = 11 * 0.01
    if second_order:
        want = ref.cvb_block(
            indptr, local, counts, gamma, nphi, nz, var_phi, var_z, ALPHA_VEC, 0.01, w_eta
        )
    else:
        want = ref.cvb0_block(indptr, local, counts, gamma, nphi, nz, ALPHA_VEC, 0.01, w_eta)
    got_gamma = gamma.copy()
    out = kernels.cvb0_block(
        indptr,
        local,
        counts,
        got_gamma,
        nphi,
        nz,
        ALPHA_VEC,
        0.01,
        w_eta,
        second_order,
        var_phi if second_order else None,
        var_z if second_order else None,
    )
    np.testing.assert_allclose(got_gamma, want[0], rtol=1e-9, atol=1e-12)
    for got, exp in zip(out, want[1:], strict=True):
        np.testing.assert_allclose(got, exp, rtol=1e-9, atol=1e-11)


def test_svb_asymmetric_alpha_matches_reference():
    indptr, local, counts, eb, g0 = svb_fixture(2)
    k = eb.shape[1]
    alpha = np.linspace(0.05, 0.9, k)
    want_gamma, want_ss = ref.svb_estep_block(indptr, local, counts, eb, alpha, g0)
    got_gamma, got_ss = kernels.svb_estep_block(indptr, local, counts, eb, alpha, g0)
    np.testing.assert_allclose(got_gamma, want_gamma, rtol=1e-9)
    np.testing.assert_allclose(got_ss, want_ss, rtol=1e-9, atol=1e-12)
    empty = np.diff(indptr) == 0
    np.testing.assert_array_equal(got_gamma[empty], np.broadcast_to(alpha, got_gamma[empty].shape))


def test_foldin_asymmetric_alpha_matches_reference():
    rng = np.random.default_rng(3)
    indptr, local, counts = block(3, vocab=13)
    phi = rng.dirichlet(np.ones(13), size=4).T
    want = reference.foldin_block(indptr, local, counts, phi, ALPHA_VEC, max_iter=50, tol=1e-6)
    got = kernels.foldin_block(indptr, local, counts, phi, ALPHA_VEC, max_iter=50, tol=1e-6)
    np.testing.assert_allclose(got, want, rtol=1e-9)
    empty = np.diff(indptr) == 0
    np.testing.assert_allclose(
        got[empty], np.broadcast_to(ALPHA_VEC / ALPHA_VEC.sum(), got[empty].shape)
    )


def test_kernels_refuse_an_alpha_of_the_wrong_length():
    indptr, local, counts = block(0)
    phi = np.ones((11, 4)) / 11
    with pytest.raises(ValueError, match="K=4"):
        kernels.foldin_block(indptr, local, counts, phi, np.ones(3))


# --------------------------------------------------------------------------
# Prior statistics and steps


def test_doc_prior_stats_and_offsets_match_references():
    rng = np.random.default_rng(0)
    ntheta = rng.random((12, 4)) * rng.integers(0, 30, size=(12, 1))
    ntheta[3] = 0.0  # an empty document adds nothing
    num, den = priors.doc_prior_stats(ntheta, ALPHA_VEC)
    want_num, want_den = ref.doc_prior_stats(ntheta, ALPHA_VEC)
    np.testing.assert_allclose(num, want_num, rtol=1e-10)
    assert den == pytest.approx(want_den, rel=1e-10)
    gamma = rng.random((12, 4)) * 5 + 0.01
    np.testing.assert_allclose(
        priors.elog_theta_offsets(gamma, ALPHA_VEC),
        ref.elog_theta_offsets(gamma, ALPHA_VEC),
        rtol=1e-10,
        atol=1e-10,
    )
    # documents at the prior (γ = α) add nothing
    assert np.abs(priors.elog_theta_offsets(np.tile(ALPHA_VEC, (3, 1)), ALPHA_VEC)).max() < 1e-12


def test_expected_count_statistics_match_the_reference_and_the_integer_case():
    rng = np.random.default_rng(1)
    ntheta = rng.random((12, 4)) * rng.integers(0, 30, size=(12, 1))
    ntheta[3] = 0.0
    logp0 = -rng.random((12, 4)) * 3 * (ntheta > 0)
    num, den = priors.doc_prior_stats(ntheta, ALPHA_VEC, logp0)
    want_num, want_den = ref.doc_prior_stats(ntheta, ALPHA_VEC, logp0)
    np.testing.assert_allclose(num, want_num, rtol=1e-10)
    assert den == pytest.approx(want_den, rel=1e-10)
    # every γ 0 or 1 (integer counts, P(N = 0) is 0 or 1): Minka's integer statistics
    counts = rng.integers(0, 6, size=(12, 4)).astype(np.float64)
    certain = np.where(counts > 0, -1e6, 0.0)
    np.testing.assert_allclose(
        priors.doc_prior_stats(counts, ALPHA_VEC, certain)[0],
        priors.doc_prior_stats(counts, ALPHA_VEC)[0],
        rtol=1e-12,
    )
    # a topic spread thinly over a document's 20 tokens (γ = 0.01 each: 0.2 expected) counts
    # about P(N ≥ 1)/α, far below ψ(0.2 + α) − ψ(α)
    thin = np.array([[0.2, 19.8]])
    lp = np.array([[20 * np.log(0.99), 20 * np.log(0.01)]])
    got = priors.doc_prior_stats(thin, [0.1, 0.1], lp)[0][0]
    plain = priors.doc_prior_stats(thin, [0.1, 0.1])[0][0]
    p1 = 1 - 0.99**20
    assert got == pytest.approx(
        p1 * (scipy.special.digamma(0.2 / p1 + 0.1) + 1 / 0.1 - scipy.special.digamma(1.1)),
        rel=1e-9,
    )
    assert got < 0.4 * plain
    with pytest.raises(ValueError, match="logp0"):
        priors.doc_prior_stats(thin, [0.1, 0.1], lp[:, :1])


def test_keep_total_rescales_to_the_given_total():
    got = priors.keep_total([0.2, 0.6, 1.2], 0.5)
    np.testing.assert_allclose(got, [0.05, 0.15, 0.3], rtol=1e-12)
    assert got.sum() == pytest.approx(0.5)


def test_trigamma_matches_scipy():
    x = np.geomspace(1e-4, 1e5, 200)
    got = np.array([priors.trigamma(v) for v in x])
    np.testing.assert_allclose(got, scipy.special.polygamma(1, x), rtol=1e-10)
    assert np.isnan(priors.trigamma(0.0))


def test_alpha_steps_match_references():
    num, den = np.array([3.0, 1.0, 0.5, 8.0]), 4.0
    np.testing.assert_allclose(
        priors.minka_alpha_step(ALPHA_VEC, num, den), ref.minka_alpha_step(ALPHA_VEC, num, den)
    )
    np.testing.assert_array_equal(priors.minka_alpha_step(ALPHA_VEC, num, 0.0), ALPHA_VEC)
    g = np.array([0.2, -0.1, 0.05, -0.3])
    np.testing.assert_allclose(
        priors.hoffman_alpha_step(ALPHA_VEC, g, 0.5),
        ref.hoffman_alpha_step(ALPHA_VEC, g, 0.5),
        rtol=1e-10,
    )


@pytest.mark.parametrize("expected", [True, False])
def test_minka_eta_matches_reference(expected):
    rng = np.random.default_rng(1)
    tw = rng.gamma(0.3, 20.0, size=(15, 3))
    tw[0, 0] = 0.0
    tw[1, 1] = 0.02
    got = priors.minka_eta(tw, 0.5, expected=expected)
    assert got == pytest.approx(ref.minka_eta(tw, 0.5, expected=expected), rel=1e-9)
    assert got != pytest.approx(0.5, rel=1e-3)


@pytest.mark.parametrize("expected", [True, False])
def test_minka_eta_from_row_pieces_is_minka_eta(expected):
    """The parts the model's term shards compute (docs/architecture.md, "Learned
    priors"): the column sums and positive cells of each piece of rows, the numerator
    summed piece by piece (whole counts: from the merged histograms) give the whole
    array's η, and the numerator is the reference's sum of ψ terms."""
    rng = np.random.default_rng(2)
    tw = np.floor(rng.gamma(0.3, 20.0, size=(40, 3)))
    if expected:
        tw = tw + rng.random(tw.shape) * (rng.random(tw.shape) < 0.3)
    tw[0, 0] = -1e-12  # rounding below 0 counts as 0
    pieces = [tw[:7], tw[7:8], tw[8:8], tw[8:]]
    cells = [priors.eta_cells(p) for p in pieces]
    totals = sum(c[0] for c in cells)
    if expected:

        def numerator(e):
            return sum(priors.eta_numerator(c[1], e) for c in cells)
    else:
        hist = priors.merge_histograms([np.unique(c[1], return_counts=True) for c in cells])
        assert hist[1].sum() == (tw > 0).sum() and len(hist[0]) == len(np.unique(tw[tw > 0]))

        def numerator(e):
            return priors.eta_count_numerator(*hist, e)

    whole = priors.minka_eta(tw, 0.5, expected=expected)
    assert priors.eta_fixed_point(numerator, totals, len(tw), 0.5) == pytest.approx(
        whole, rel=1e-12
    )
    assert whole != pytest.approx(0.5, rel=1e-3)
    clean = np.maximum(tw, 0.0)
    psi = scipy.special.digamma
    if expected:
        p1 = -np.expm1(-clean[clean > 0])
        want = (p1 * (psi(np.maximum(clean[clean > 0] / p1, 1) + 0.3) - psi(0.3))).sum()
    else:
        want = (psi(clean + 0.3) - psi(0.3)).sum()
    assert numerator(0.3) == pytest.approx(want, rel=1e-10)


@pytest.mark.parametrize("center", [1e-4, 0.05, 3.0, 200.0])
def test_the_interpolated_eta_numerator_is_the_sum_to_rounding(center):
    """The numerator the shards give at 24 values of η (summed piece by piece), read
    between them (kernels/priors.py, eta_interpolant): the exact sum to rounding over a
    factor 8 either way, nothing beyond."""
    rng = np.random.default_rng(3)
    tw = rng.gamma(0.1, 3.0, size=(80, 5))
    nodes = priors.eta_nodes(center)
    sums = priors.eta_node_sums(tw[:30], nodes) + priors.eta_node_sums(tw[30:], nodes)
    numerator = priors.eta_interpolant(center, sums)
    for eta in center * np.exp(np.linspace(-np.log(8), np.log(8), 23)):
        assert numerator(eta) == pytest.approx(priors.eta_numerator(tw, eta), rel=1e-11)
    assert numerator(center * 8.5) is None and numerator(center / 8.5) is None


def generated_counts(alpha, n_docs=600, doc_len=80, seed=0):
    rng = np.random.default_rng(seed)
    theta = rng.dirichlet(alpha, size=n_docs)
    return np.array([rng.multinomial(doc_len, t) for t in theta], dtype=np.float64)


def test_minka_fixed_point_recovers_a_known_alpha():
    truth = np.array([1.0, 0.5, 0.25, 0.1, 0.05])
    counts = generated_counts(truth)
    alpha = np.full(5, 0.3)
    for _ in range(300):
        alpha = priors.minka_alpha_step(alpha, *priors.doc_prior_stats(counts, alpha))
    np.testing.assert_allclose(alpha, truth, rtol=0.25)
    # the online form (a step towards the fixed point) reaches the same place
    online = np.full(5, 0.3)
    for i in range(600):
        part = counts[(i % 6) * 100 : (i % 6 + 1) * 100]
        rho = 1.0 / (1 + i) ** 0.6
        online = (1 - rho) * online + rho * priors.minka_alpha_step(
            online, *priors.doc_prior_stats(part, online)
        )
    np.testing.assert_allclose(online, alpha, rtol=0.15)


def test_hoffman_step_recovers_a_known_alpha_from_exact_posteriors():
    truth = np.array([0.8, 0.4, 0.2, 0.1])
    counts = generated_counts(truth, seed=2)
    alpha = np.full(4, 0.3)
    for _ in range(200):
        # γ_d = α + n_d: the exact Dirichlet posterior of each document's θ given its counts
        g = priors.elog_theta_offsets(counts + alpha, alpha) / len(counts)
        alpha = priors.hoffman_alpha_step(alpha, g, 1.0)
    np.testing.assert_allclose(alpha, truth, rtol=0.25)


def test_minka_eta_recovers_a_known_eta():
    rng = np.random.default_rng(4)
    beta = rng.dirichlet(np.full(200, 0.05), size=6)
    tw = np.array([rng.multinomial(3000, b) for b in beta], dtype=np.float64).T
    assert priors.minka_eta(tw, 1.0, expected=False) == pytest.approx(0.05, rel=0.25)
    # integer counts read as expected ones: close too
    assert priors.minka_eta(tw, 1.0) == pytest.approx(0.05, rel=0.25)


def test_minka_eta_on_expected_counts_does_not_take_a_thin_spread_for_use():
    """The same counts with 1% of each word's tokens spread evenly over the topics, as
    soft assignments spread them: read as integer counts every topic seems to use
    every word and η more than doubles; the Poisson expectation stays near the truth."""
    rng = np.random.default_rng(4)
    beta = rng.dirichlet(np.full(200, 0.05), size=6)
    tw = np.array([rng.multinomial(3000, b) for b in beta], dtype=np.float64).T
    soft = 0.99 * tw + 0.01 * tw.sum(axis=1, keepdims=True) / 6
    as_integers = priors.minka_eta(soft, 1.0, expected=False)
    as_expected = priors.minka_eta(soft, 1.0)
    assert as_integers > 2.2 * 0.05
    assert as_expected < 0.08


# --------------------------------------------------------------------------
# Statistics beside the rows, and seeded topics


def test_extras_travel_in_the_first_row_and_sum_on_merge():
    rows = np.arange(6.0).reshape(3, 2)
    a = with_extras(rows, np.array([1.0, 2.0, 3.0]))
    assert a.shape == (3, 5) and a.dtype == np.float64
    np.testing.assert_array_equal(a[:, :2], rows)
    b = with_extras(rows[:1], np.array([10.0, 20.0, 30.0]))
    merged = np.vstack([a, b])
    first, totals = split_extras(merged, 2)
    np.testing.assert_array_equal(first, np.vstack([rows, rows[:1]]))
    np.testing.assert_array_equal(totals, [11.0, 22.0, 33.0])
    assert with_extras(np.zeros((0, 2)), np.ones(3)).shape == (0, 5)


class _Corpus:
    vocab = ("apple", "pear", "war", "peace", "bush", "kerry")
    vocab_size = 6
    n_train_tokens = 1200


def test_seed_boost_maps_words_and_spreads_the_confidence():
    p = TrainParams(k=3, seed_topics={0: ["war", "peace"], 2: [4, "apple"]}, seed_confidence=0.5)
    terms, rows = seed_boost(p.validate(), _Corpus())
    np.testing.assert_array_equal(terms, [0, 2, 3, 4])
    per_topic = 0.5 * 1200 / 3  # c · C/K, shared by the topic's seed words
    want = np.zeros((4, 3))
    want[[1, 2], 0] = per_topic / 2
    want[[0, 3], 2] = per_topic / 2
    np.testing.assert_allclose(rows, want)
    # the rows of a block's seeded terms get them, other rows nothing
    block_rows = np.ones((3, 3), dtype=np.float32)
    add_seed_rows(block_rows, np.array([1, 2, 4]), terms, rows)
    np.testing.assert_allclose(
        block_rows, [[1, 1, 1], [1 + per_topic / 2, 1, 1], [1, 1, 1 + per_topic / 2]]
    )


def test_bad_seeds_are_refused():
    with pytest.raises(ParamError, match="'durian'"):
        seed_boost(TrainParams(k=3, seed_topics={1: ["war", "durian"]}), _Corpus())
    with pytest.raises(ParamError, match="99"):
        seed_boost(TrainParams(k=3, seed_topics={1: [99]}), _Corpus())
    with pytest.raises(ParamError, match="outside the k=3 topics"):
        TrainParams(k=3, seed_topics={3: ["war"]}).validate()
    with pytest.raises(ParamError, match="seed_confidence"):
        TrainParams(seed_topics={0: ["war"]}, seed_confidence=-0.1).validate()
    for bad in ({0: []}, {"x": ["war"]}, {0: [-2]}, ["war"]):
        with pytest.raises(ParamError, match="'seed_topics' parameter of LDA must be a mapping"):
            TrainParams(seed_topics=bad).validate()
    for algorithm in ("svb", "cvb"):
        with pytest.raises(ParamError, match="does not take seeded topics"):
            TrainParams(algorithm=algorithm, seed_topics={0: ["war"]}).validate()


def test_seed_topics_have_one_form_that_survives_json():
    import json

    p = TrainParams(seed_topics={np.int64(1): ("war", np.int64(3))})
    assert p.to_dict()["seed_topics"] == {"1": ["war", 3]}
    back = TrainParams(**json.loads(json.dumps(p.to_dict())))
    assert back.validate().to_dict() == p.validate().to_dict()


def test_lda_params_map_onto_the_prior_fields():
    from sparklda.ml import LDA

    tp = LDA(
        k=4,
        optimizeDocConcentration=True,
        optimizeTopicConcentration=True,
        seedTopics={1: ["war"], 3: [7]},
        seedConfidence=0.3,
    )._train_params()
    assert (tp.optimize_alpha, tp.optimize_eta, tp.seed_confidence) == (True, True, 0.3)
    assert tp.to_dict()["seed_topics"] == {"1": ["war"], "3": [7]}
    assert LDA()._train_params().seed_topics == {}
    lda = LDA(k=4, seedTopics={4: ["war"]})
    with pytest.raises(ParamError, match="'seedTopics' parameter of LDA .*outside the k=4"):
        lda._train_params()
    with pytest.raises(ParamError, match="'seedConfidence'"):
        LDA(seedTopics={0: ["war"]}, seedConfidence=-1.0)._train_params()
    with pytest.raises(ParamError, match="'seedTopics' parameter of LDA is supported by"):
        LDA(algorithm="svb", seedTopics={0: ["war"]})._train_params()
    with pytest.raises(TypeError, match="seedTopics must be a dict"):
        LDA(seedTopics=["war"])


@pytest.mark.parametrize("algorithm", ["scvb0", "cvb0", "svb"])
def test_learned_priors_are_part_of_the_checkpointed_driver_state(algorithm):
    from types import SimpleNamespace

    from sparklda.modes import MODES

    corpus = SimpleNamespace(
        vocab=list(_Corpus.vocab),
        vocab_size=6,
        n_train_tokens=1200,
        n_train_docs=40,
        n_train_pairs=100,
        n_slices=2,
        parts_per_slice=1,
        slice_docs=[20, 20],
        slice_tokens=[600, 600],
    )
    p = TrainParams(algorithm=algorithm, k=3, optimize_alpha=True, optimize_eta=True)
    mode = MODES[algorithm](corpus, p)
    mode.alpha = np.array([0.5, 0.2, 0.05])
    mode.eta = 0.03
    if algorithm == "cvb0":
        mode._set_stats(np.ones((6, 3)))  # what the initial statistics set
    state = mode.state()
    fresh = MODES[algorithm](corpus, p)
    fresh.restore(state)
    np.testing.assert_array_equal(fresh.alpha, mode.alpha)
    assert fresh.eta == 0.03
    # checkpoints written before learned priors keep the given ones
    old = {k: v for k, v in state.items() if k not in ("alpha", "eta")}
    older = MODES[algorithm](corpus, p)
    older.restore(old)
    np.testing.assert_array_equal(older.alpha, np.full(3, p.alpha))


def test_online_modes_learn_eta_from_a_pass_of_counts_not_their_running_estimate():
    """SCVB0 and SVB learn η at a pass's end from the sum of the pass's rounds' statistics
    (each document's expected counts once), not from N^Φ or λ − η, which keep the random
    start's mass in every cell; after half the passes, by at most a factor 2 a pass. The
    half-pass sum is part of the checkpointed state."""
    from sparklda.modes.priors import ETA_PASS_FACTOR, Priors

    rng = np.random.default_rng(5)
    v, k = 30, 4
    first = rng.gamma(0.3, 2.0, size=(12, k))
    second = rng.gamma(0.3, 2.0, size=(20, k))
    t1 = rng.choice(v, 12, replace=False)
    t2 = rng.choice(v, 20, replace=False)
    total = np.zeros((v, k))
    total[t1] += first
    total[t2] += second

    def params(eta):
        return TrainParams(k=k, eta=eta, optimize_eta=True, passes=4)

    for eta in (0.2, 0.001, 5.0):  # the target inside, below and above the factor's reach
        pri = Priors(params(eta))
        assert pri.eta_pass_burnin() == 2
        for p in (0, 1):  # burn-in: η stays
            pri.learn_eta_pass(v, t1, first, p, False)
            pri.learn_eta_pass(v, t2, second, p, True)
            assert pri.eta == eta
        pri.learn_eta_pass(v, t1, first, 2, False)
        assert pri.eta == eta
        mid = Priors(params(eta))
        mid.restore(pri.state())  # a checkpoint in the middle of pass 2
        pri.learn_eta_pass(v, t2, second, 2, True)
        mid.learn_eta_pass(v, t2, second, 2, True)
        target = priors.minka_eta(total, eta)
        expected = min(max(target, eta / ETA_PASS_FACTOR), eta * ETA_PASS_FACTOR)
        assert pri.eta == expected == mid.eta
        assert not pri.eta_pass.any()  # the next pass starts from zero
        if eta == 0.2:
            assert eta / 2 < target < eta * 2  # undamped here
        else:
            assert pri.eta == (eta * 2 if eta < target else eta / 2)
    # without optimize_eta nothing is kept
    off = Priors(TrainParams(k=k, eta=0.05, passes=4))
    off.learn_eta_pass(v, t1, first, 3, True)
    assert off.eta_pass is None and off.eta == 0.05
