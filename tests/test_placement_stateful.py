"""The model on the executors for the stateful modes (issue 33): CVB0, CVB, MAP and Gibbs
keep their blocks' states beside the blocks and N^Φ in term shards, and give the driver
placement's model (sparklda/execution/sharded_stateful.py)."""

from __future__ import annotations

import shutil

import numpy as np
import pytest

from sparklda.api import fit
from sparklda.execution import ShardedExecutor
from sparklda.execution.topics import ShardedTopics
from sparklda.modes.sharded_rows import replace_rows, served_rows
from sparklda.params import TrainParams
from tests.helpers import Crash, CrashAt, planted_source

#: CVB0, CVB, MAP and Gibbs: one round a pass
BASE = {"k": 4, "seed": 3, "passes": 2, "heldout_count": 16}


@pytest.fixture(scope="module")
def source(spark):
    return planted_source(spark)


def _fit(source, initial_model=None, callbacks=(), resume=False, **kw):
    params = TrainParams(**{**BASE, **kw})
    return fit(source, params, initial_model=initial_model, callbacks=callbacks, resume=resume)


@pytest.fixture(scope="module")
def driver_fit(source):
    """``driver_fit(initial_model=None, **kw)``: the driver placement's ``_fit``, made once
    for the module (the tests that compare with the same reference share it)."""
    fits: dict = {}

    def get(initial_model=None, **kw):
        key = (id(initial_model), repr(sorted(kw.items())))
        if key not in fits:
            fits[key] = (initial_model, _fit(source, initial_model=initial_model, **kw))
        return fits[key][1]  # (the initial model is kept alive: its id stays its own)

    return get


def _same(sharded, driver):
    if sharded.model.metadata["mode"] == "gibbs":  # whole counts: every sum exact
        np.testing.assert_array_equal(sharded.model.topic_word, driver.model.topic_word)
    np.testing.assert_allclose(sharded.model.topic_word, driver.model.topic_word, rtol=1e-9)
    np.testing.assert_allclose(sharded.model.alpha, driver.model.alpha, rtol=1e-9)
    np.testing.assert_allclose(sharded.model.eta, driver.model.eta, rtol=1e-9)
    scores = [r.evaluations[-1]["heldout_loglik"] for r in (sharded, driver)]
    np.testing.assert_allclose(scores[0], scores[1], rtol=1e-9)


# -- the shard functions --------------------------------------------------------


def test_a_shard_replaces_its_rows_by_the_merged_statistics_and_sums_them():
    rng = np.random.default_rng(0)
    old = rng.random((6, 3))
    rows = rng.random((2, 3 + 4))  # learned α: K + 1 extra columns, their sums travel
    new, out = replace_rows(3, 3, True)(old, np.array([1, 4]), rows)
    want = np.zeros((6, 3))
    want[[1, 4]] = rows[:, :3]
    np.testing.assert_array_equal(new, want)
    np.testing.assert_array_equal(out["row_totals"], want.sum(axis=0))
    np.testing.assert_array_equal(out["prior_extras"], rows[:, 3:].sum(axis=0))
    assert out["nphi_change"] == pytest.approx(np.abs(want - old).sum())
    # a shard no block touched: zero rows; the first generation (no old rows): no change
    empty, out = replace_rows(3, 3, False)(np.zeros((6, 0)), None, None)
    assert empty.shape == (6, 3) and not empty.any() and "nphi_change" not in out


def test_a_shards_served_rows_are_the_driver_placements_round_value_rows():
    rng = np.random.default_rng(1)
    nphi = rng.random((10, 3)) * 50
    seed_terms, seed_rows = np.array([2, 7]), rng.random((2, 3))
    whole = nphi.astype(np.float32)  # the driver placement's seeded round value
    whole[seed_terms] += seed_rows.astype(np.float32)
    lo, terms = 5, np.array([5, 7, 9])
    got = served_rows(np.float32, seed_terms, seed_rows)(nphi[lo:], terms - lo, terms)
    assert got.dtype == np.float32
    np.testing.assert_array_equal(got, whole[terms])


def test_a_gibbs_shard_replaces_its_counts_and_sums_the_averaged_sweeps():
    from sparklda.modes.gibbs import count_shard, served_counts

    terms = np.array([0, 3])
    first = np.array([[2.0, 1.0], [0.0, 5.0]])
    base, out = count_shard(2, False, False)(np.zeros((5, 0)), terms, first)
    assert base.shape == (5, 2) and "nphi_change" not in out
    np.testing.assert_array_equal(out["row_totals"], [2.0, 6.0])
    assert out["above_uint16"] == out["above_int32"] == 0.0
    second = np.array([[1.0, 2.0], [70000.0, 0.0]])
    base, out = count_shard(2, False, True)(base, terms, second)  # the first averaged sweep
    np.testing.assert_array_equal(base[terms], np.hstack([second, second]))
    assert out["nphi_change"] == 1 + 1 + 70000 + 5
    assert out["above_uint16"] == 1.0 and out["above_int32"] == 0.0
    base, _ = count_shard(2, False, True)(base, terms[:1], first[:1])  # term 3: no tokens
    np.testing.assert_array_equal(base[terms, :2], [[2.0, 1.0], [0.0, 0.0]])
    np.testing.assert_array_equal(base[terms, 2:], [[3.0, 3.0], [70000.0, 0.0]])
    # served as the driver placement ships the whole N^Φ: the smallest exact dtype
    rows = served_counts(2, 0.0)(base, terms, terms)
    assert rows.dtype == np.uint16
    np.testing.assert_array_equal(rows, base[terms, :2])
    assert served_counts(2, 65536.0)(base, terms, terms).dtype == np.int32


# -- the same model as the driver placement -------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("expected", [True, False])
def test_eta_from_the_shards_is_minka_eta_of_the_whole_array(spark, monkeypatch, expected):
    """Learned η read where the rows live (sparklda/execution/learned_eta.py): the
    driver's fixed point to rounding, from an η far enough from it that the iterates
    leave the first interpolant's span; and again by one job an iteration (the
    interpolation's safety net, forced)."""
    from sparklda.execution import learned_eta
    from sparklda.kernels.priors import minka_eta
    from sparklda.stats import shard_bounds

    rng = np.random.default_rng(5)
    whole = np.floor(rng.gamma(0.2, 30.0, size=(57, 4)))
    if expected:
        whole = whole + rng.random(whole.shape) * (rng.random(whole.shape) < 0.4)
    bounds = shard_bounds(len(whole), 3)
    items = [(s, int(bounds[s]), whole[bounds[s] : bounds[s + 1]]) for s in range(3)]
    rows = ShardedTopics(spark.sparkContext.parallelize(items, 3), len(whole), 4, bounds)
    want = minka_eta(whole, 1e-3, expected=expected)
    assert want > 0.05  # beyond a factor 8 of the start
    assert learned_eta.sharded_minka_eta(rows, 1e-3, expected) == pytest.approx(want, rel=1e-10)
    if expected:
        monkeypatch.setattr(learned_eta, "INTERPOLATION_RTOL", -1.0)
        got = learned_eta.sharded_minka_eta(rows, 1e-3, expected)
        assert got == pytest.approx(want, rel=1e-12)


@pytest.mark.slow
@pytest.mark.parametrize("algorithm", ["cvb0", "map", "gibbs"])
@pytest.mark.parametrize("tasks", [2, 8])
def test_a_stateful_mode_on_the_executors_gives_the_driver_placements_model(
    source, driver_fit, algorithm, tasks
):
    kw = {"algorithm": algorithm, "parts_per_slice": tasks}
    driver = driver_fit(**kw)
    sharded = _fit(source, model_placement="executors", **kw)
    _same(sharded, driver)
    assert sharded.report["mode"]["model_placement"] == "executors"
    assert len(sharded.rounds) == BASE["passes"]  # the second round replaces the first's rows
    for row, ref in zip(sharded.rounds, driver.rounds, strict=True):
        assert row["merged_bytes"] == 0  # no rows of the model reach the driver
        assert row["driver_bytes"] < 64 * BASE["k"] * 8
        assert row["nphi_change"] == pytest.approx(ref["nphi_change"], rel=1e-9)


VARIANTS = {
    "cvb": {"algorithm": "cvb"},
    "cvb_float64": {"algorithm": "cvb", "dtype": "float64"},
    "cvb_learned_alpha": {"algorithm": "cvb", "optimize_alpha": True, "burnin": 0},
    "cvb0_learned_alpha": {"algorithm": "cvb0", "optimize_alpha": True, "burnin": 0},
    "map_float64": {"algorithm": "map", "dtype": "float64"},
    "gibbs_average": {"algorithm": "gibbs", "passes": 3, "gibbs_average": 2},
    "gibbs_learned_alpha": {
        "algorithm": "gibbs",
        "passes": 6,  # one α step: 5 sweeps pooled after the first pass
        "optimize_alpha": True,
    },
    "gibbs_seeded": {"algorithm": "gibbs", "seed_topics": {"0": ["w0", "w1"]}},
    # η from N^Φ in the shards (per-shard sums; Gibbs: the counts' histograms)
    "cvb0_learned_eta": {"algorithm": "cvb0", "optimize_eta": True},
    "cvb_learned_eta": {"algorithm": "cvb", "optimize_eta": True},
    "gibbs_learned_eta": {"algorithm": "gibbs", "optimize_eta": True},
    "cvb0_seeded": {
        "algorithm": "cvb0",
        "seed_topics": {"0": ["w0", "w1"]},
        "seed_confidence": 0.5,
    },
}


@pytest.mark.slow
@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_stateful_variants_on_the_executors_give_the_driver_placements_model(
    source, driver_fit, variant
):
    kw = {"parts_per_slice": 2, **VARIANTS[variant]}
    driver = driver_fit(**kw)
    sharded = _fit(source, model_placement="executors", **kw)
    _same(sharded, driver)
    if kw.get("optimize_alpha"):  # α was learned (it moved from 0.1)
        assert np.abs(driver.model.alpha - 0.1).max() > 1e-3
    if kw.get("optimize_eta"):  # η was learned (it moved from 0.01)
        assert abs(driver.model.eta - 0.01) > 1e-3


#: a warm start's initial model: an earlier run, the one the tests above compare with
WARM = {"passes": 1, "parts_per_slice": 2, "seed": 5}


@pytest.mark.slow
@pytest.mark.parametrize("algorithm", ["cvb0", "cvb", "map", "gibbs"])
def test_a_stateful_warm_start_on_the_executors_gives_the_driver_placements_model(
    source, driver_fit, algorithm
):
    first = driver_fit(algorithm=algorithm, parts_per_slice=2)
    driver = driver_fit(initial_model=first.model, algorithm=algorithm, **WARM)
    sharded = _fit(
        source, initial_model=first.model, model_placement="executors", algorithm=algorithm, **WARM
    )
    _same(sharded, driver)


def _refuse(*args, **kwargs):
    raise AssertionError("the V×K statistics were collected to the driver")


@pytest.mark.slow
@pytest.mark.parametrize(
    "algorithm, extra",
    [
        ("cvb0", {"seed_topics": {"0": ["w0", "w1"]}, "seed_confidence": 0.5}),
        ("cvb", {}),
        ("map", {}),
        # the average of the last 3 sweeps (2 to 4) spans the resume after round 2
        ("gibbs", {"gibbs_average": 3, "seed_topics": {"0": ["w0", "w1"]}}),
    ],
)
def test_a_stateful_run_on_the_executors_resumes_to_the_driver_placements_model_never_collected(
    source, tmp_path, monkeypatch, algorithm, extra
):
    """A run on the executors killed after round 3 resumes from its checkpoint of round 2
    (the shards' and the states', never collected) to the driver placement's model, its
    evaluations too; the driver placement resumes from the same checkpoint, collected."""
    kw = {"algorithm": algorithm, "parts_per_slice": 2, "passes": 4, "eval_every": 1, **extra}
    full = _fit(source, **kw)
    ck = tmp_path / "ck"
    sharded = {**kw, "model_placement": "executors", "checkpoint_dir": str(ck)}
    sharded["checkpoint_interval"] = 2
    with monkeypatch.context() as m:  # evaluation, checkpoints, resume, the model: shards
        m.setattr(ShardedExecutor, "collect_base", _refuse)
        m.setattr(ShardedTopics, "collect", _refuse)
        with pytest.raises(Crash):
            _fit(source, callbacks=[CrashAt(3)], **sharded)
        shutil.copytree(ck, tmp_path / "ck_driver")  # what the driver placement resumes from
        resumed = _fit(source, resume=True, **sharded)
    assert resumed.report["resumed_after_round"] == 2
    assert resumed.model.sharded
    _same(resumed, full)
    for ev, ref in zip(resumed.evaluations, full.evaluations, strict=True):
        assert ev["heldout_loglik"] == pytest.approx(ref["heldout_loglik"], rel=1e-9)
    # the shards' and the states' lineage is cut every checkpoint_interval rounds
    assert any(r["checkpointed"] for r in resumed.rounds[2:])
    assert all(r["lineage_rounds"] < 2 for r in resumed.rounds[2:])
    # the driver placement resumes from the same shards, collected (they fit)
    where = str(tmp_path / "ck_driver")
    on_driver = _fit(
        source, resume=True, **{**sharded, "model_placement": "driver", "checkpoint_dir": where}
    )
    assert on_driver.report["resumed_after_round"] == 2
    _same(on_driver, full)


@pytest.mark.slow
def test_a_stateful_warm_start_from_a_sharded_model_collects_it_for_the_initial_states(
    source, driver_fit, tmp_path
):
    from sparklda.model import TopicModel

    first = driver_fit(algorithm="cvb0", parts_per_slice=2)  # as in the warm starts above
    path = str(tmp_path / "m")
    first.model.save(path)
    initial = TopicModel.load(path, max_driver_bytes=0)
    assert initial.sharded
    driver = driver_fit(initial_model=first.model, algorithm="cvb0", **WARM)
    sharded = _fit(
        source, initial_model=initial, model_placement="executors", algorithm="cvb0", **WARM
    )
    _same(sharded, driver)
