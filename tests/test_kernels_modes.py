"""Batch CVB0 / CVB and online VB kernels against tests/reference_modes.py (no JVM).

Tolerances: float64 kernels agree with the float64 references to rtol 1e-9
(absolute floor 1e-12, 1e-11 for the N^Φ / N^Z deltas). float32 kernels, run on
float32-rounded inputs and compared with the float64 reference on the same
rounded values, agree to rtol 1e-4 with an absolute floor of 1e-5 for γ and
sstats and 1e-4 for the deltas (differences of sums of counts × γ, so they
lose relative precision to cancellation). Measured worst cases over ten seeds:
2e-6 relative for γ, 5e-5 for the deltas, 1e-6 for SVB.
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.special

from sparklda import kernels
from tests import reference_modes as ref

ALPHA, ETA = 0.1, 0.01
TOL = {np.float64: dict(rtol=1e-9, atol=1e-12), np.float32: dict(rtol=1e-4, atol=1e-5)}


def random_block(rng, n_docs=8, vocab=11, max_terms=7, empty_every=3):
    """A clumped CSR block with empty documents (every ``empty_every``-th, and the last)."""
    indptr = [0]
    local, counts = [], []
    for j in range(n_docs):
        if j % empty_every == 1 or j == n_docs - 1:
            indptr.append(indptr[-1])
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


def term_sums(local, values, n_rows):
    out = np.zeros((n_rows, values.shape[1]))
    np.add.at(out, local, values)
    return out


def cvb_fixture(seed, k=4, vocab=11, dtype=np.float64):
    """Random γ (no burn-in) and broadcast statistics = the block's own
    contributions plus positive mass from other partitions (and other terms for N^Z)."""
    rng = np.random.default_rng(seed)
    indptr, local, counts = random_block(rng, vocab=vocab)
    gamma = kernels.cvb0_init_gamma(rng.random((len(local), k)) + 0.01)
    nphi = term_sums(local, counts[:, None] * gamma, vocab) + 3 * rng.random((vocab, k))
    nz = nphi.sum(0) + 5 * rng.random(k)
    var = counts[:, None] * gamma * (1 - gamma)
    var_phi = term_sums(local, var, vocab) + rng.random((vocab, k))
    var_z = var_phi.sum(0) + 2 * rng.random(k)
    arrays = [a.astype(dtype) for a in (counts, gamma, nphi, nz, var_phi, var_z)]
    # references see exactly the values the kernel sees
    return (indptr, local, *arrays)


# --------------------------------------------------------------------------- CVB0 / CVB


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_cvb0_block_matches_reference(dtype, seed):
    indptr, local, counts, gamma, nphi, nz, _, _ = cvb_fixture(seed, dtype=dtype)
    w_eta = 11 * ETA
    want_gamma, want_dphi, want_dz = ref.cvb0_block(
        indptr, local, counts, gamma, nphi, nz, ALPHA, ETA, w_eta
    )
    got_gamma = gamma.copy()
    out = kernels.cvb0_block(indptr, local, counts, got_gamma, nphi, nz, ALPHA, ETA, w_eta)
    assert isinstance(out, tuple) and len(out) == 2
    d_phi, d_z = out
    assert got_gamma.dtype == d_phi.dtype == d_z.dtype == dtype
    assert d_phi.shape == nphi.shape and d_z.shape == nz.shape
    tol = TOL[dtype]
    np.testing.assert_allclose(got_gamma, want_gamma, **tol)
    np.testing.assert_allclose(d_phi, want_dphi, rtol=tol["rtol"], atol=tol["atol"] * 10)
    np.testing.assert_allclose(d_z, want_dz, rtol=tol["rtol"], atol=tol["atol"] * 10)
    assert not np.allclose(got_gamma, gamma)  # the sweep did change γ


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_cvb_second_order_matches_reference(dtype, seed):
    indptr, local, counts, gamma, nphi, nz, var_phi, var_z = cvb_fixture(seed, dtype=dtype)
    w_eta = 11 * ETA
    want = ref.cvb_block(indptr, local, counts, gamma, nphi, nz, var_phi, var_z, ALPHA, ETA, w_eta)
    got_gamma = gamma.copy()
    out = kernels.cvb0_block(
        indptr,
        local,
        counts,
        got_gamma,
        nphi,
        nz,
        ALPHA,
        ETA,
        w_eta,
        second_order=True,
        var_phi=var_phi,
        var_z=var_z,
    )
    assert isinstance(out, tuple) and len(out) == 4
    assert all(a.dtype == dtype for a in out)
    tol = TOL[dtype]
    np.testing.assert_allclose(got_gamma, want[0], **tol)
    for got, exp in zip(out, want[1:], strict=True):
        np.testing.assert_allclose(got, exp, rtol=tol["rtol"], atol=tol["atol"] * 10)
    # the correction does something: CVB differs from CVB0 on the same input
    g0 = gamma.copy()
    kernels.cvb0_block(indptr, local, counts, g0, nphi, nz, ALPHA, ETA, w_eta)
    assert np.abs(g0 - got_gamma).max() > 1e-3


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("second_order", [False, True])
def test_cvb0_block_invariants(dtype, second_order):
    indptr, local, counts, gamma, nphi, nz, var_phi, var_z = cvb_fixture(5, dtype=dtype)
    inputs = [a.copy() for a in (nphi, nz, var_phi, var_z)]
    old = gamma.astype(np.float64)
    out = kernels.cvb0_block(
        indptr, local, counts, gamma, nphi, nz, ALPHA, ETA, 11 * ETA, second_order, var_phi, var_z
    )
    new = gamma.astype(np.float64)
    c = counts.astype(np.float64)[:, None]
    tight = 1e-12 if dtype == np.float64 else 1e-5
    # inputs other than γ are left alone
    for before, after in zip(inputs, (nphi, nz, var_phi, var_z), strict=True):
        np.testing.assert_array_equal(before, after)
    # each pair's γ is a distribution, so the block's m·γ mass is its token count
    np.testing.assert_allclose(new.sum(1), 1.0, rtol=0, atol=tight)
    assert (new >= 0).all()
    assert (c * new).sum() == pytest.approx(counts.sum(), rel=tight)
    # the returned deltas are exactly the block's new minus old contributions
    d_phi, d_z = out[:2]
    np.testing.assert_allclose(d_phi.sum(0), d_z, rtol=0, atol=10 * tight)
    assert abs(float(d_z.sum())) < 10 * tight * counts.sum()  # mass moves between topics only
    np.testing.assert_allclose(
        d_phi, term_sums(local, c * (new - old), nphi.shape[0]), rtol=0, atol=10 * tight
    )
    if second_order:
        d_var_phi, d_var_z = out[2:]
        want = term_sums(local, c * (new * (1 - new) - old * (1 - old)), nphi.shape[0])
        np.testing.assert_allclose(d_var_phi, want, rtol=0, atol=10 * tight)
        np.testing.assert_allclose(d_var_phi.sum(0), d_var_z, rtol=0, atol=10 * tight)


def test_cvb0_block_only_empty_documents():
    indptr = np.zeros(4, dtype=np.int64)
    gamma = np.zeros((0, 3))
    d_phi, d_z = kernels.cvb0_block(
        indptr,
        np.zeros(0, np.int32),
        np.zeros(0),
        gamma,
        np.ones((2, 3)),
        np.ones(3),
        ALPHA,
        ETA,
        1.0,
    )
    np.testing.assert_array_equal(d_phi, 0)
    np.testing.assert_array_equal(d_z, 0)


def test_cvb0_block_rejects_gamma_it_cannot_update_in_place():
    indptr, local, counts, gamma, nphi, nz, _, _ = cvb_fixture(0)
    with pytest.raises(ValueError, match="C-contiguous"):
        kernels.cvb0_block(
            indptr, local, counts, np.asfortranarray(gamma), nphi, nz, ALPHA, ETA, 1.0
        )
    with pytest.raises(ValueError, match="var_phi"):
        kernels.cvb0_block(
            indptr, local, counts, gamma, nphi, nz, ALPHA, ETA, 1.0, second_order=True
        )


@pytest.mark.parametrize("dtype,rtol", [(np.float64, 1e-15), (np.float32, 1e-6)])
def test_cvb0_init_gamma_matches_reference(dtype, rtol):
    u = np.random.default_rng(0).random((5, 4)).astype(dtype)
    g = kernels.cvb0_init_gamma(u)
    assert g.dtype == dtype and g.flags.c_contiguous
    np.testing.assert_allclose(g, ref.cvb0_init_gamma(u), rtol=rtol)
    np.testing.assert_allclose(g.sum(1), 1.0, rtol=rtol)


def test_cvb0_init_gamma_of_integer_draws_is_float64():
    u = np.array([[1, 3], [2, 2], [5, 1]])
    g = kernels.cvb0_init_gamma(np.asfortranarray(u))
    assert g.dtype == np.float64 and g.flags.c_contiguous
    np.testing.assert_allclose(g, ref.cvb0_init_gamma(u), rtol=1e-15)


# ---- CVB sign conventions: against the exact expectations of Eq. 15 (Teh et al. appendix)

K_EXACT = 3


def _exact_scenario(which, seed):
    """A one-block corpus whose first pair (one token of a term used nowhere
    else) sees variance in only one of its three counts: every other γ is
    one-hot (zero variance) except the tokens feeding N^Θ_j ('theta'), N^Φ_u
    ('phi') or N^Z only ('z')."""
    rng = np.random.default_rng(seed)
    docs = []
    if which == "theta":
        docs.append([(0, 1, 0)] + [(t, int(rng.integers(2, 4)), 1) for t in range(1, 7)])
        docs += [[(t, 10, 0) for t in range(7, 12)] for _ in range(6)]
    elif which == "phi":
        docs.append([(0, 1, 0)] + [(t, 3, 0) for t in range(1, 4)])
        docs += [[(0, int(rng.integers(2, 4)), 1), (4 + d % 4, 10, 0)] for d in range(8)]
        docs += [[(t, 10, 0) for t in range(8, 12)] for _ in range(6)]
    else:
        docs.append([(0, 1, 0)] + [(t, 3, 0) for t in range(1, 4)])
        docs += [[(t, int(rng.integers(1, 3)), 1) for t in range(4, 8)] for _ in range(4)]
    indptr, local, counts, gamma = [0], [], [], []
    for doc in docs:
        for term, count, spread in doc:
            local.append(term)
            counts.append(float(count))
            if spread:
                gamma.append(rng.dirichlet(2.0 * np.ones(K_EXACT)))
            else:
                gamma.append(np.eye(K_EXACT)[rng.integers(K_EXACT)])
        indptr.append(indptr[-1] + len(doc))
    return (
        np.array(indptr, np.int64),
        np.array(local, np.int32),
        np.array(counts),
        np.array(gamma),
    )


@pytest.mark.parametrize("which", ["theta", "phi", "z"])
def test_cvb_correction_moves_towards_exact_expectation(which):
    """Each of the three exp(∓V/2(.)²) factors of Eq. 18 must move γ from the
    CVB0 value towards the exact Eq. 15 (expectations over the exact
    Poisson-binomial distribution of each count). A flipped sign moves it
    away; over 30 seeds the error ratio CVB/CVB0 stays below 0.47."""
    indptr, local, counts, gamma = _exact_scenario(which, seed=0)
    n_terms = int(local.max()) + 1
    alpha, eta = 0.1, 0.05
    w_eta = n_terms * eta
    c = counts[:, None]
    nphi = term_sums(local, c * gamma, n_terms)
    var_phi = term_sums(local, c * gamma * (1 - gamma), n_terms)
    exact = ref.cvb_exact_pair_gamma(indptr, local, counts, gamma, 0, alpha, eta, w_eta)
    g0, g1 = gamma.copy(), gamma.copy()
    kernels.cvb0_block(indptr, local, counts, g0, nphi, nphi.sum(0), alpha, eta, w_eta)
    kernels.cvb0_block(
        indptr,
        local,
        counts,
        g1,
        nphi,
        nphi.sum(0),
        alpha,
        eta,
        w_eta,
        second_order=True,
        var_phi=var_phi,
        var_z=var_phi.sum(0),
    )
    err_cvb0 = np.abs(g0[0] - exact).sum()
    err_cvb = np.abs(g1[0] - exact).sum()
    assert err_cvb0 > 1e-3  # the scenario does have variance to correct for
    assert err_cvb < 0.5 * err_cvb0


# --------------------------------------------------------------------------- SVB


def svb_fixture(seed, k=4, vocab=11, dtype=np.float64):
    rng = np.random.default_rng(seed)
    indptr, local, counts = random_block(rng, vocab=vocab)
    lam = rng.gamma(1.0, 1.0, size=(k, vocab)) + ETA
    exp_elogbeta = np.exp(
        scipy.special.digamma(lam) - scipy.special.digamma(lam.sum(1, keepdims=True))
    ).T
    gamma_init = rng.gamma(100.0, 0.01, size=(len(indptr) - 1, k))
    return (
        indptr,
        local,
        counts.astype(dtype),
        np.ascontiguousarray(exp_elogbeta, dtype=dtype),
        gamma_init.astype(dtype),
    )


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_svb_estep_matches_reference_float64(seed):
    indptr, local, counts, eb, g0 = svb_fixture(seed)
    want_gamma, want_ss = ref.svb_estep_block(
        indptr, local, counts, eb, ALPHA, g0, max_iter=100, tol=1e-3
    )
    got_gamma, got_ss = kernels.svb_estep_block(
        indptr, local, counts, eb, ALPHA, g0, max_iter=100, tol=1e-3
    )
    assert got_gamma.dtype == got_ss.dtype == np.float64
    np.testing.assert_allclose(got_gamma, want_gamma, rtol=1e-9)
    np.testing.assert_allclose(got_ss, want_ss, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("max_iter", [0, 1, 25])
def test_svb_estep_float32_matches_reference(max_iter):
    # tol=0 runs exactly max_iter updates in both, so a stopping test that
    # flips between float32 and float64 cannot hide a real difference
    indptr, local, counts, eb, g0 = svb_fixture(3, dtype=np.float32)
    want_gamma, want_ss = ref.svb_estep_block(
        indptr, local, counts, eb, ALPHA, g0, max_iter=max_iter, tol=0.0
    )
    got_gamma, got_ss = kernels.svb_estep_block(
        indptr, local, counts, eb, ALPHA, g0, max_iter=max_iter, tol=0.0
    )
    assert got_gamma.dtype == got_ss.dtype == np.float32
    np.testing.assert_allclose(got_gamma, want_gamma, **TOL[np.float32])
    np.testing.assert_allclose(got_ss, want_ss, **TOL[np.float32])


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_svb_estep_invariants(dtype):
    indptr, local, counts, eb, g0 = svb_fixture(4, dtype=dtype)
    g0_before = g0.copy()
    gamma, ss = kernels.svb_estep_block(indptr, local, counts, eb, ALPHA, g0)
    rel = 1e-12 if dtype == np.float64 else 1e-5
    np.testing.assert_array_equal(g0, g0_before)
    # each token's responsibilities φ sum to one
    assert float(ss.sum()) == pytest.approx(float(counts.sum()), rel=rel)
    lengths = np.array(
        [counts[indptr[j] : indptr[j + 1]].astype(np.float64).sum() for j in range(len(indptr) - 1)]
    )
    np.testing.assert_allclose(gamma.sum(1), eb.shape[1] * ALPHA + lengths, rtol=rel)
    # empty documents: γ = α and nothing in sstats from them; unused terms stay zero
    empty = np.diff(indptr) == 0
    assert empty.sum() >= 2
    np.testing.assert_array_equal(gamma[empty], np.asarray(ALPHA, dtype=dtype))
    unused = np.setdiff1d(np.arange(eb.shape[0]), local)
    np.testing.assert_array_equal(ss[unused], 0)
    assert (gamma > 0).all() and (ss >= 0).all()


def test_svb_estep_zero_iterations_keeps_gamma_init():
    indptr, local, counts, eb, g0 = svb_fixture(6)
    gamma, ss = kernels.svb_estep_block(indptr, local, counts, eb, ALPHA, g0, max_iter=0)
    full = np.diff(indptr) > 0
    np.testing.assert_array_equal(gamma[full], g0[full])
    assert ss.sum() == pytest.approx(counts.sum(), rel=1e-12)


# --------------------------------------------------------------------------- digamma


ROOT = 1.4616321449683622


def test_digamma_matches_scipy():
    x = np.concatenate(
        [
            np.logspace(-6, 6, 4001),
            ROOT + np.linspace(-0.3, 0.3, 601),  # both sides of the series' radius
            ROOT + np.array([-1e-9, -1e-12, 1e-12, 1e-9, 1e-6]),  # where ψ ≈ 0
            [1e-6, 1.0, 2.0, 2.5, 5.999999, 6.0, 6.000001, 10.0, 1e6],
        ]
    )
    got = np.array([kernels.digamma(v) for v in x])
    want = scipy.special.digamma(x)
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=0)


def test_digamma_domain():
    assert np.isnan(kernels.digamma(0.0))
    assert np.isnan(kernels.digamma(-2.5))
    assert np.isnan(kernels.digamma(np.nan))
    assert kernels.digamma(np.inf) == np.inf
    assert kernels.digamma(np.float32(3.0)) == pytest.approx(scipy.special.digamma(3.0), rel=1e-12)


@pytest.mark.parametrize("dtype,rtol", [(np.float64, 1e-10), (np.float32, 1e-6)])
def test_dirichlet_expectation_2d_matches_scipy(dtype, rtol):
    a = np.random.default_rng(0).gamma(0.5, 2.0, size=(6, 9)) + 1e-3
    a = a.astype(dtype)
    want = np.array([ref.dirichlet_expectation(row) for row in a])
    np.testing.assert_allclose(  # the row-by-row reference is scipy's vectorised formula
        want,
        scipy.special.digamma(a.astype(np.float64))
        - scipy.special.digamma(a.astype(np.float64).sum(1, keepdims=True)),
        rtol=1e-13,
    )
    got = kernels.dirichlet_expectation_2d(a)
    assert got.dtype == dtype and got.shape == a.shape
    np.testing.assert_allclose(got, want, rtol=rtol)


# --------------------------------------------------------------------------- planted corpus

N_TOPICS, WORDS_PER_TOPIC = 3, 5
VOCAB = N_TOPICS * WORDS_PER_TOPIC


def planted_block(seed=0, n_docs=30, doc_len=20):
    """Topic t owns words [5t, 5t+5); document d draws all its tokens from
    topic d % 3. Three empty documents are interleaved. Returns the block and
    each document's topic (−1 for empty ones)."""
    rng = np.random.default_rng(seed)
    indptr, local, counts, owner = [0], [], [], []
    for d in range(n_docs):
        t = d % N_TOPICS
        words = t * WORDS_PER_TOPIC + rng.integers(0, WORDS_PER_TOPIC, size=doc_len)
        terms, c = np.unique(words, return_counts=True)
        local.extend(terms)
        counts.extend(c)
        indptr.append(indptr[-1] + len(terms))
        owner.append(t)
        if d % 10 == 4:
            indptr.append(indptr[-1])
            owner.append(-1)
    return (
        np.array(indptr, np.int64),
        np.array(local, np.int32),
        np.array(counts, np.float64),
        np.array(owner),
    )


def assert_planted_recovered(doc_topic, topic_word, owner):
    """Each document's mass on one topic; each topic's mass on one planted block."""
    doc_topic = np.asarray(doc_topic, np.float64)[owner >= 0]
    doc_topic = doc_topic / doc_topic.sum(1, keepdims=True)
    assert doc_topic.max(1).min() > 0.9
    phi = np.asarray(topic_word, np.float64)  # (V, K)
    phi = phi / phi.sum(0, keepdims=True)
    winners = set()
    for t in range(N_TOPICS):
        block = phi[t * WORDS_PER_TOPIC : (t + 1) * WORDS_PER_TOPIC].sum(0)
        k = int(block.argmax())
        assert block[k] > 0.9, f"planted block {t} holds only {block[k]:.3f} of topic {k}"
        winners.add(k)
    assert len(winners) == N_TOPICS, "two planted blocks were merged into one topic"
    # documents of the same planted topic share one learned topic
    learned = doc_topic.argmax(1)
    for t in range(N_TOPICS):
        assert len(set(learned[owner[owner >= 0] == t])) == 1


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("second_order", [False, True])
def test_cvb0_recovers_planted_topics(dtype, second_order):
    # seed 0 of the random initial γ; with 30 iterations and this corpus,
    # 49/50 (CVB0) and 47/50 (CVB) seeds recover, the rest merge two topics
    indptr, local, counts, owner = planted_block()
    c = counts[:, None]
    gamma = kernels.cvb0_init_gamma(np.random.default_rng(0).random((len(local), N_TOPICS))).astype(
        dtype
    )
    for _ in range(30):
        # a single block: the broadcast statistics are recomputed from γ
        g = gamma.astype(np.float64)
        nphi = term_sums(local, c * g, VOCAB)
        var_phi = term_sums(local, c * g * (1 - g), VOCAB)
        kernels.cvb0_block(
            indptr,
            local,
            counts,
            gamma,
            nphi,
            nphi.sum(0),
            ALPHA,
            ETA,
            VOCAB * ETA,
            second_order,
            var_phi,
            var_phi.sum(0),
        )
    assert np.isfinite(gamma).all()
    g = gamma.astype(np.float64)
    doc_topic = np.array(
        [(c * g)[indptr[j] : indptr[j + 1]].sum(0) for j in range(len(indptr) - 1)]
    )
    assert_planted_recovered(doc_topic, term_sums(local, c * g, VOCAB), owner)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_svb_estep_recovers_planted_topics(dtype):
    # batch VB (Algorithm 1): E-step alternated with λ = η + sstats;
    # seed 0 of λ's Gamma(100, 1/100) initialisation (44/50 seeds recover)
    indptr, local, counts, owner = planted_block()
    lam = np.random.default_rng(0).gamma(100.0, 0.01, size=(N_TOPICS, VOCAB)).astype(dtype)
    gamma_init = np.ones((len(indptr) - 1, N_TOPICS), dtype=dtype)
    for _ in range(30):
        exp_elogbeta = np.ascontiguousarray(np.exp(kernels.dirichlet_expectation_2d(lam)).T)
        gamma, sstats = kernels.svb_estep_block(
            indptr, local, counts, exp_elogbeta, ALPHA, gamma_init
        )
        lam = (ETA + sstats.T).astype(dtype)
    assert gamma.dtype == dtype
    assert_planted_recovered(gamma - ALPHA, lam.T, owner)
