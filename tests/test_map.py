"""MAP-EM (``algorithm = "map"``): the kernel against the plain reference, its priors
and their checks, and the mode on Spark (planted topics, determinism, held-out scoring,
the model's φ̂). Resume and the planted runs shared with the other modes are in
tests/test_resume.py and tests/test_modes.py (their ``SETTINGS``)."""

from __future__ import annotations

import numpy as np
import pytest

from sparklda import kernels
from sparklda.api import fit
from sparklda.errors import ParamError
from sparklda.params import TrainParams, validate_params
from tests import reference_modes as ref
from tests.helpers import assert_recovers_planted, planted_source
from tests.test_kernels_modes import TOL, cvb_fixture

V = 11  # the fixture's vocabulary
ALPHA, ETA = 1.5, 1.2  # MAP's priors (> 1)


def map_kernel(indptr, local, counts, gamma, nphi, nz, alpha=ALPHA, eta=ETA):
    """The kernel as the mode calls it: α − 1, η − 1, W(η − 1), the token included."""
    return kernels.cvb0_block(
        indptr,
        local,
        counts,
        gamma,
        nphi,
        nz,
        alpha - 1.0,
        eta - 1.0,
        V * (eta - 1.0),
        include_token=True,
    )


# --------------------------------------------------------------------------- kernel


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_map_kernel_matches_reference(dtype, seed):
    indptr, local, counts, gamma, nphi, nz, _, _ = cvb_fixture(seed, vocab=V, dtype=dtype)
    want_gamma, want_dphi, want_dz = ref.map_block(
        indptr, local, counts, gamma, nphi, nz, ALPHA, ETA, V
    )
    got_gamma = gamma.copy()
    d_phi, d_z = map_kernel(indptr, local, counts, got_gamma, nphi, nz)
    assert got_gamma.dtype == d_phi.dtype == d_z.dtype == dtype
    tol = TOL[dtype]
    np.testing.assert_allclose(got_gamma, want_gamma, **tol)
    np.testing.assert_allclose(d_phi, want_dphi, rtol=tol["rtol"], atol=tol["atol"] * 10)
    np.testing.assert_allclose(d_z, want_dz, rtol=tol["rtol"], atol=tol["atol"] * 10)
    np.testing.assert_allclose(got_gamma.sum(1), 1.0, rtol=tol["rtol"] * 10)
    assert not np.allclose(got_gamma, gamma)


def test_map_kernel_keeps_the_tokens_own_share():
    """MAP is not CVB0 at the shifted priors: CVB0 removes the pair's own m·γ."""
    indptr, local, counts, gamma, nphi, nz, _, _ = cvb_fixture(0, vocab=V)
    g_map, g_cvb0 = gamma.copy(), gamma.copy()
    map_kernel(indptr, local, counts, g_map, nphi, nz)
    kernels.cvb0_block(
        indptr, local, counts, g_cvb0, nphi, nz, ALPHA - 1.0, ETA - 1.0, V * (ETA - 1.0)
    )
    assert np.abs(g_map - g_cvb0).max() > 1e-3


def test_map_kernel_with_one_document_is_the_em_fixed_point_step():
    """One document of one pair, the block the whole corpus (N^Φ = N^Z = N^Θ = m γ):
    γ_k ∝ (m γ_k + η − 1)/(m γ_k + W(η − 1)) · (m γ_k + α − 1), by hand."""
    indptr = np.array([0, 1], dtype=np.int64)
    local = np.array([0], dtype=np.int32)
    counts = np.array([3.0])
    gamma = np.array([[0.25, 0.75]])
    nphi = counts[:, None] * gamma  # the block is the corpus: N^Φ = N^Z = N^Θ = m γ
    nz = nphi.sum(0)
    w = 2
    got = gamma.copy()
    kernels.cvb0_block(
        indptr, local, counts, got, nphi, nz, ALPHA - 1, ETA - 1, w * (ETA - 1), include_token=True
    )
    n = 3.0 * gamma[0]
    want = (n + ETA - 1) / (n + w * (ETA - 1)) * (n + ALPHA - 1)
    np.testing.assert_allclose(got[0], want / want.sum(), rtol=1e-12)


def test_map_kernel_never_gives_a_negative_weight():
    """Counts a little below 0 (rounding of the distributed deltas) are floored at 0."""
    indptr, local, counts, gamma, nphi, nz, _, _ = cvb_fixture(1, vocab=V)
    nphi = nphi.copy()
    nphi[local[0]] = -1e-9
    got = gamma.copy()
    map_kernel(indptr, local, counts, got, nphi, nz)
    assert np.all(got >= 0) and np.all(np.isfinite(got))


def test_include_token_does_not_take_second_order():
    indptr, local, counts, gamma, nphi, nz, var_phi, var_z = cvb_fixture(0, vocab=V)
    with pytest.raises(ValueError, match="include_token"):
        kernels.cvb0_block(
            indptr, local, counts, gamma, nphi, nz, 0.5, 0.2, 2.2, True, var_phi, var_z, True
        )


# --------------------------------------------------------------------------- priors


def test_map_priors_default_to_mllibs_em_defaults():
    p = TrainParams(algorithm="map", k=10)
    assert (p.alpha, p.eta) == (6.0, 1.1)
    assert validate_params({"algorithm": "map", "k": 25}).alpha == 3.0
    assert validate_params({"algorithm": "map", "k": 25}).eta == 1.1
    # the other algorithms keep theirs, and a given prior wins
    assert (TrainParams().alpha, TrainParams().eta) == (0.1, 0.01)
    assert validate_params({"algorithm": "map", "alpha": 2.0}).alpha == 2.0
    assert TrainParams(algorithm="map", k=5).alpha == 11.0
    # a -1 given is refused as before (only pyspark's Params read -1 as "the default")
    with pytest.raises(ParamError, match="'alpha' parameter of LDA must be a float in the range"):
        TrainParams(algorithm="map", alpha=-1).validate()


@pytest.mark.parametrize(
    "kw, name",
    [
        ({"alpha": 0.1}, "alpha"),
        ({"alpha": 1.0}, "alpha"),
        ({"eta": 0.01}, "eta"),
        ({"eta": 1}, "eta"),
    ],
)
def test_map_refuses_priors_at_or_below_one(kw, name):
    with pytest.raises(ParamError, match=rf"'{name}' parameter of LDA must be greater than 1"):
        validate_params({"algorithm": "map", **kw})
    with pytest.raises(ParamError, match="leave it unset for the default"):
        TrainParams(algorithm="map", **kw).validate()
    # the same values are fine for CVB0
    validate_params({"algorithm": "cvb0", **kw})


@pytest.mark.parametrize("name", ["optimize_alpha", "optimize_eta"])
def test_map_refuses_learned_priors(name):
    with pytest.raises(ParamError, match=rf"'{name}' parameter of LDA is not supported by 'map'"):
        validate_params({"algorithm": "map", name: True})


def test_the_ml_layer_names_its_own_params_and_takes_maps_defaults():
    from sparklda.ml import LDA

    tp = LDA(algorithm="map", k=5)._train_params()
    assert (tp.alpha, tp.eta) == (11.0, 1.1)
    with pytest.raises(ParamError, match="'docConcentration' parameter of LDA must be greater"):
        LDA(algorithm="map", k=5, docConcentration=[0.5])._train_params()
    with pytest.raises(ParamError, match="'topicConcentration' parameter of LDA must be greater"):
        LDA(algorithm="map", k=5, topicConcentration=0.5)._train_params()
    # the other algorithms keep their defaults
    assert LDA(k=5)._train_params().alpha == 0.1


# --------------------------------------------------------------------------- on Spark


def map_params(**kw):
    base = dict(
        algorithm="map",
        k=4,
        alpha=1.1,
        eta=1.01,
        passes=25,
        minibatch_size=1000,
        heldout_count=16,
        seed=0,
        checkpoint_interval=5,
    )
    return TrainParams(**{**base, **kw})


@pytest.fixture(scope="module")
def source(spark):
    return planted_source(spark)


@pytest.fixture(scope="module")
def trained(source):
    return fit(source, map_params(eval_every=5))


@pytest.fixture(scope="module")
def short(source):
    """Three passes: what the tests of MAP's estimates and of its determinism read."""
    return fit(source, map_params(passes=3))


@pytest.mark.slow  # 25 iterations; the fast subset trains MAP in the tests below
def test_map_recovers_planted_topics_and_scores_held_out_documents(trained):
    res = trained
    assert_recovers_planted(res.model.topic_word)
    assert res.model.metadata["mode"] == "map"
    assert res.model.metadata["params"]["alpha"] == 1.1
    # held-out scoring every 5 iterations and at the end, better than uniform words
    assert [e["round"] for e in res.evaluations] == [5, 10, 15, 20, 25]
    assert res.evaluations[-1]["heldout_loglik"] > np.log(1 / 24) + 1.0
    assert res.evaluations[-1]["heldout_documents"] == 16
    # quality rises (not a timing: the scores of one run)
    assert res.evaluations[-1]["heldout_loglik"] > res.evaluations[0]["heldout_loglik"] - 1e-3


def test_the_model_gives_maps_estimates(short):
    """The model keeps α − 1 and η − 1, so its φ̂ is (N^Φ + η − 1)/(N^Z + W(η − 1))."""
    m = short.model
    np.testing.assert_allclose(m.alpha, 0.1)
    assert m.eta == pytest.approx(0.01)
    nphi = m.topic_word
    want = (nphi + 1.01 - 1) / (nphi.sum(0) + nphi.shape[0] * (1.01 - 1))
    np.testing.assert_allclose(m.topics_matrix(), want, rtol=1e-12)
    # the token-count total: N^Φ sums to the training tokens
    assert nphi.sum() == pytest.approx(short.report["corpus"]["training_tokens"], rel=1e-5)
    assert short.report["mode"]["map_eta_minus_one"] == pytest.approx(0.01)


def test_same_seed_same_model(source, short):
    a = short
    b = fit(source, map_params(passes=3))
    np.testing.assert_array_equal(a.model.topic_word, b.model.topic_word)
    assert a.evaluations[-1]["heldout_loglik"] == b.evaluations[-1]["heldout_loglik"]
    c = fit(source, map_params(passes=3, seed=1))
    assert not np.allclose(a.model.topic_word, c.model.topic_word)
