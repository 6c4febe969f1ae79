"""MAP-EM (``algorithm = "map"``): the kernel against the plain reference, its priors
and their checks, and the mode on Spark (planted topics, determinism, held-out scoring,
the model's φ̂). Resume and the planted runs shared with the other modes are in
tests/test_resume.py and tests/test_modes.py (their ``SETTINGS``)."""

from __future__ import annotations

import numpy as np
import pytest

from sparklda import kernels
from sparklda.api import fit
from sparklda.corpus import read_uci
from sparklda.errors import ParamError
from sparklda.params import TrainParams, validate_params
from tests import reference_modes as ref
from tests.helpers import assert_recovers_planted, planted_docs, planted_source
from tests.test_kernels_modes import TOL, cvb_fixture, term_sums

V = 11  # the fixture's vocabulary
ALPHA, ETA = 1.5, 1.2  # MAP's priors (> 1)


def map_fixture(seed, dtype=np.float64):
    """A block, the round's N^Φ / N^Z (the block's own sums plus other blocks' mass) and
    the block's N^Θ of the previous iteration, all from one random γ."""
    indptr, local, counts, gamma, nphi, nz, _, _ = cvb_fixture(seed, vocab=V, dtype=dtype)
    docs = np.repeat(np.arange(len(indptr) - 1), np.diff(indptr))
    ntheta = term_sums(docs, counts[:, None].astype(np.float64) * gamma, len(indptr) - 1)
    return indptr, local, counts, nphi, nz, ntheta


def map_kernel(indptr, local, counts, nphi, nz, ntheta, alpha=ALPHA, eta=ETA, out=None):
    """The kernel as the mode calls it: α − 1, η − 1, W(η − 1)."""
    return kernels.map_block(
        indptr, local, counts, nphi, nz, ntheta, alpha - 1.0, eta - 1.0, V * (eta - 1.0), out=out
    )


# --------------------------------------------------------------------------- kernel


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_map_kernel_matches_reference(dtype, seed):
    indptr, local, counts, nphi, nz, ntheta = map_fixture(seed, dtype)
    want_theta, want_phi = ref.map_block(indptr, local, counts, nphi, nz, ntheta, ALPHA, ETA, V)
    before = ntheta.copy()
    got_theta, got_phi = map_kernel(indptr, local, counts, nphi, nz, ntheta)
    assert got_theta.dtype == got_phi.dtype == np.float64
    tol = TOL[dtype]
    np.testing.assert_allclose(got_theta, want_theta, rtol=tol["rtol"], atol=tol["atol"] * 10)
    np.testing.assert_allclose(got_phi, want_phi, rtol=tol["rtol"], atol=tol["atol"] * 10)
    # every token's responsibilities sum to one: each document keeps its length
    docs = np.repeat(np.arange(len(indptr) - 1), np.diff(indptr))
    lengths = np.bincount(docs, weights=counts.astype(np.float64), minlength=len(indptr) - 1)
    np.testing.assert_allclose(got_theta.sum(1), lengths, rtol=tol["rtol"])
    assert got_phi.sum() == pytest.approx(counts.sum(), rel=tol["rtol"])
    np.testing.assert_array_equal(ntheta, before)  # the previous N^Θ is not modified
    assert not np.allclose(got_theta, ntheta)


def test_map_kernel_is_jacobi_each_pair_against_the_previous_counts():
    """MLlib's EM, not CVB0's sweep: a pair's γ depends only on the previous counts, so a
    document's pairs give the same rows whatever their order or their neighbours."""
    indptr, local, counts, nphi, nz, ntheta = map_fixture(0)
    theta, _ = map_kernel(indptr, local, counts, nphi, nz, ntheta)
    j = int(np.flatnonzero(np.diff(indptr) > 1)[0])  # a document of several pairs
    a, b = int(indptr[j]), int(indptr[j + 1])
    total = np.zeros(4)
    for p in range(a, b):  # each pair alone (a one-pair document with j's N^Θ)
        one_theta, one_rows = map_kernel(
            np.array([0, 1]), local[p : p + 1], counts[p : p + 1], nphi, nz, ntheta[j : j + 1]
        )
        u = int(local[p])
        gamma = (nphi[u] + ETA - 1) / (nz + V * (ETA - 1)) * (ntheta[j] + ALPHA - 1)
        np.testing.assert_allclose(one_theta[0], counts[p] * gamma / gamma.sum(), rtol=1e-12)
        np.testing.assert_allclose(one_rows[u], one_theta[0], rtol=1e-15)
        total += one_theta[0]
    np.testing.assert_allclose(theta[j], total, rtol=1e-12)
    reversed_theta, _ = map_kernel(
        np.array([0, b - a]),
        local[a:b][::-1].copy(),
        counts[a:b][::-1].copy(),
        nphi,
        nz,
        ntheta[j : j + 1],
    )
    np.testing.assert_allclose(reversed_theta[0], theta[j], rtol=1e-12)


def test_map_kernel_with_one_document_is_the_em_fixed_point_step():
    """One document of one pair, the block the whole corpus (N^Φ = N^Z = N^Θ = m γ):
    γ_k ∝ (m γ_k + η − 1)/(m γ_k + W(η − 1)) · (m γ_k + α − 1), by hand."""
    counts = np.array([3.0])
    n = 3.0 * np.array([0.25, 0.75])
    w = 2
    theta, rows = kernels.map_block(
        np.array([0, 1]),
        np.array([0], np.int32),
        counts,
        n[None, :],
        n,
        n[None, :],
        ALPHA - 1,
        ETA - 1,
        w * (ETA - 1),
    )
    want = (n + ETA - 1) / (n + w * (ETA - 1)) * (n + ALPHA - 1)
    np.testing.assert_allclose(theta[0], 3.0 * want / want.sum(), rtol=1e-12)
    np.testing.assert_allclose(rows[0], theta[0], rtol=1e-15)


def test_map_kernel_never_gives_a_negative_weight_and_writes_into_out():
    """Counts a little below 0 (rounding) are floored at 0; ``out`` is zeroed and filled."""
    indptr, local, counts, nphi, nz, ntheta = map_fixture(1)
    nphi = nphi.copy()
    nphi[local[0]] = -1e-9
    ntheta = ntheta.copy()
    ntheta[0] = -1e-9
    out = np.full((len(ntheta) + V, 4), 7.0)
    theta, rows = map_kernel(indptr, local, counts, nphi, nz, ntheta, out=out)
    assert np.shares_memory(theta, out) and np.shares_memory(rows, out)
    assert np.all(out >= 0) and np.all(np.isfinite(out))
    assert out.sum() == pytest.approx(2 * counts.sum())


def test_map_kernel_refuses_bad_shapes():
    indptr, local, counts, nphi, nz, ntheta = map_fixture(0)
    with pytest.raises(ValueError, match="'ntheta'"):
        map_kernel(indptr, local, counts, nphi, nz, ntheta[1:])
    with pytest.raises(ValueError, match="'out'"):
        map_kernel(indptr, local, counts, nphi, nz, ntheta, out=np.zeros((2, 4)))


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


@pytest.mark.slow
def test_the_model_does_not_depend_on_the_partitions_or_the_path(spark, source, short, tmp_path):
    """Jacobi updates (MLlib's EM): a block's iteration reads only the previous
    iteration's counts, never another block's changes, so one partition instead of
    several gives the same model up to the order of the float64 sums of the blocks'
    rows; and the DataFrame path (the block states through Arrow rows) gives the classic
    path's model."""
    # float64 states: the blocks' rows summed in one order or another, nothing else
    one = fit(
        source, map_params(passes=3, parts_per_slice=1, minibatch_size=10**6, dtype="float64")
    )
    many = fit(source, map_params(passes=3, minibatch_size=60, parts_per_slice=3, dtype="float64"))
    assert one.report["rounds"] == many.report["rounds"] == 3
    # 9 tasks: their rows merged on the executors by term shard ('combine' = 'auto')
    assert one.rounds[-1]["tasks"] == 1 and many.rounds[-1]["tasks"] == 9
    assert many.rounds[-1]["combine"] == "executors"
    np.testing.assert_allclose(one.model.topic_word, many.model.topic_word, rtol=1e-9, atol=1e-9)
    # float32 states (the default): the float32 rounding of the blocks' rows
    np.testing.assert_allclose(one.model.topic_word, short.model.topic_word, rtol=1e-4, atol=1e-3)
    # the planted documents as a UCI file: a source with a DataFrame form
    docs, v = planted_docs()
    lines = [
        f"{d + 1} {t + 1} {int(c)}"
        for d, terms, counts in docs
        for t, c in zip(terms, counts, strict=True)
    ]
    path = tmp_path / "docword.txt"
    path.write_text(f"{len(docs)}\n{v}\n{len(lines)}\n" + "\n".join(lines) + "\n")
    fits = {
        ex: fit(read_uci(spark, str(path)), map_params(passes=3, execution=ex))
        for ex in ("classic", "dataframe")
    }
    assert fits["dataframe"].rounds[-1]["tasks"] == fits["classic"].rounds[-1]["tasks"]
    np.testing.assert_array_equal(
        fits["dataframe"].model.topic_word, fits["classic"].model.topic_word
    )


def test_blocks_keep_their_n_theta_only_and_lost_statistics_are_computed_again(
    spark, source, short, tmp_path, monkeypatch, caplog
):
    """Between iterations the executors keep each block's N^Θ only (one row a document;
    the N^Φ rows are the round's statistics, sent in the sweep's own pass), which the
    checkpoints hold. If a partition's statistics do not arrive through the sink, the
    round computes its generation again, carrying them, rather than reading them from
    the kept states (which hold none): the same model."""
    import glob
    import io
    import logging

    from sparklda.execution import classic

    res = fit(source, map_params(passes=3, checkpoint_dir=str(tmp_path), keep_checkpoint=True))
    np.testing.assert_array_equal(res.model.topic_word, short.model.topic_word)
    (blocks,) = glob.glob(f"{tmp_path}/**/blocks", recursive=True)
    rows = spark.read.parquet(blocks).collect()
    assert len(rows) == res.rounds[-1]["tasks"] >= 1
    for r in rows:
        state = np.load(io.BytesIO(bytes(r["state"])), allow_pickle=False)
        assert state.shape == (r["docs"], 4)
    assert sum(r["docs"] for r in rows) == res.report["corpus"]["training_documents"]

    real = classic.sent_statistics
    calls = []

    def lose_the_first_round(received, n):  # the start and round 1 lose theirs
        calls.append(n)
        return None if len(calls) <= 2 else real(received, n)

    monkeypatch.setattr(classic, "sent_statistics", lose_the_first_round)
    with caplog.at_level(logging.WARNING, logger="sparklda.execution"):
        again = fit(source, map_params(passes=3))
    assert len(calls) == 4
    assert sum("sent no statistics" in r.getMessage() for r in caplog.records) == 2
    np.testing.assert_array_equal(again.model.topic_word, short.model.topic_word)


def test_a_round_keeps_n_theta_and_counts_the_statistics_of_the_whole_state():
    """The per-partition functions (no Spark): each item keeps the kept state (MAP:
    N^Θ, D rows) without its block, while the statistics (sent or carried) are the
    N^Φ rows of the whole new state; a kept state has no statistics to read back."""
    from sparklda.block import DocBlock
    from sparklda.execution.tasks import (
        advance_partition,
        init_partition,
        sent_statistics,
        statistics_partition,
        with_blocks,
        without_blocks,
    )
    from sparklda.modes.map_em import _doc_topics, _statistics, em_kernel, init_state_fn
    from tests.test_modes import _Sink

    docs, v = planted_docs(n_docs=30)
    blocks = [DocBlock.from_docs(docs[i : i + 15], dtype=np.float32) for i in (0, 15)]
    k, alpha = 4, np.full(4, 0.1)

    class Value:
        value = None

    init = init_state_fn(0, v, k, np.float32, alpha)
    full = [init(None, b) for b in blocks]
    kept = list(without_blocks(init_partition(Value, init, _statistics, None, _doc_topics))(blocks))
    for b, f, (state, _, carried) in zip(blocks, full, kept, strict=True):
        assert state.shape == (b.n_docs, k)
        np.testing.assert_array_equal(state, f[: b.n_docs])
        np.testing.assert_array_equal(carried[0], f[b.n_docs :])  # dense rows: not packed
    with pytest.raises(ValueError, match="N\\^Φ rows"):
        _statistics(blocks[0], kept[0][0])

    nphi = np.full((v, k), 2.0, dtype=np.float32)
    Value.value = (nphi, nphi.sum(axis=0))
    kernel = em_kernel(alpha, 0.01, 0.01 * v)
    pairs = list(zip(blocks, kept, strict=True))
    sink = _Sink()
    step = without_blocks(
        with_blocks(advance_partition(Value, kernel, _statistics, sink, _doc_topics))
    )
    items = list(step(pairs))
    sent = sent_statistics(sink.value, 1)
    assert sent is not None
    for b, (state, _), st, f in zip(blocks, items, sent, full, strict=True):
        whole = kernel(Value.value, b, f)  # the kernel reads N^Θ only
        np.testing.assert_array_equal(state, whole[: b.n_docs])
        np.testing.assert_array_equal(st.rows, whole[b.n_docs :])
    # without a sink the items carry them, and the statistics pass passes them on
    carried = with_blocks(advance_partition(Value, kernel, _statistics, None, _doc_topics))(pairs)
    read = list(statistics_partition(_statistics)(carried))
    for a, b in zip(read, sent, strict=True):
        np.testing.assert_array_equal(a.rows, b.rows)
