"""The model placement (issue 33): the parameter, the driver placement's memory model
and its refusals, and the model on the executors (sharded by term), which gives the
driver placement's model."""

from __future__ import annotations

import shutil

import numpy as np
import pytest

from sparklda.api import fit
from sparklda.errors import ParamError
from sparklda.limits import DriverNeed, driver_need, placement_for
from sparklda.modes.scvb0 import initial_rows
from sparklda.params import TrainParams
from sparklda.stats import shard_bounds
from sparklda.training import Callback, check_placement
from tests.helpers import Crash, CrashAt, planted_source

GiB = 1 << 30


# -- the parameter ----------------------------------------------------------------


def test_model_placement_defaults_to_the_driver_and_takes_three_values():
    assert TrainParams().model_placement == "driver"
    for value in ("driver", "executors", "auto"):
        TrainParams(model_placement=value).validate()
    with pytest.raises(ParamError, match=r"'model_placement' parameter of LDA must be one of"):
        TrainParams(model_placement="gpu").validate()


def test_every_algorithm_takes_the_executors_placement(monkeypatch):
    from sparklda.params import ALGORITHMS

    for algorithm in ALGORITHMS:
        TrainParams(algorithm=algorithm, model_placement="executors").validate()
        if algorithm != "map":  # MAP refuses learned priors whatever the placement
            TrainParams(
                algorithm=algorithm, model_placement="executors", optimize_eta=True
            ).validate()
    assert (
        check_placement("classic", TrainParams(model_placement="executors", optimize_eta=True))
        == ""
    )
    # an algorithm without a sharded update is refused by name
    monkeypatch.setattr("sparklda.params.train.SHARDED_ALGORITHMS", ("scvb0",))
    with pytest.raises(
        ParamError, match=r"'gibbs' algorithm does not support yet \(only \['scvb0'\]\)"
    ):
        TrainParams(algorithm="gibbs", model_placement="executors").validate()
    TrainParams(algorithm="gibbs", model_placement="auto").validate()


def test_the_pyspark_param_and_the_toml_key_set_it():
    from sparklda.cli.config import train_params
    from sparklda.ml import LDA

    lda = LDA(k=3, modelPlacement="executors")
    assert lda.getModelPlacement() == "executors"
    assert lda._train_params().model_placement == "executors"
    assert LDA(k=3)._train_params().model_placement == "driver"
    learned = LDA(k=3, optimizeTopicConcentration=True, modelPlacement="executors")
    assert learned._train_params().optimize_eta
    tp = train_params({"training": {"k": 3, "model_placement": "auto"}})
    assert tp.model_placement == "auto"


# -- the memory model ---------------------------------------------------------------


def test_driver_need_follows_the_memory_model():
    v, k = 500_000, 200
    need = driver_need(v, k, "float32", "scvb0")  # a round that ships every row
    assert need.python == {
        "model": 8 * v * k,
        "mirror": 4 * v * k,
        "round value": 4 * v * k,
        "its serialized copy": 4 * v * k,
        "merged statistics": 8 * v * k,
    }
    assert need.jvm == {"broadcast": 4 * v * k, "results": 8 * v * k}
    small = driver_need(v, k, "float32", "scvb0", round_rows=1000)
    assert small.python_total == 12 * v * k + (4 + 4 + 8) * 1000 * k
    cvb = driver_need(v, k, "float64", "cvb")
    assert cvb.python["model"] == 16 * v * k and "mirror" not in cvb.python
    assert driver_need(v, k, "float64", "svb").python["mirror"] == 8 * v * k


def test_auto_keeps_the_driver_while_it_fits_and_the_driver_placement_refuses_up_front():
    need = DriverNeed({"model": 3 * GiB}, {"broadcast": GiB // 2})
    assert placement_for("auto", need, 8 * GiB, 2 * GiB) == "driver"
    assert placement_for("driver", need, None, None) == "driver"  # unknown: not checked
    assert placement_for("auto", need, 2 * GiB, 2 * GiB) == "executors"
    assert placement_for("auto", need, 8 * GiB, GiB // 4) == "executors"
    assert placement_for("executors", need, 1, 1) == "executors"
    with pytest.raises(ParamError) as e:
        placement_for("driver", need, 8 * GiB, GiB // 4)
    msg = str(e.value)
    assert "512.0 MiB in the driver's JVM, whose heap is 256.0 MiB (spark.driver.memory)" in msg
    assert "set 'model_placement' to 'executors'" in msg
    with pytest.raises(ParamError, match=r"3.0 GiB in the driver's Python process.*pythonMemory"):
        placement_for("driver", need, GiB, None)
    with pytest.raises(ParamError, match=r"the executors cannot hold it instead \(Connect\)"):
        placement_for("auto", need, GiB, None, executors_ok=False, why_not="Connect")


@pytest.mark.slow
def test_a_training_run_refuses_the_driver_placement_before_the_first_round(spark):
    source = planted_source(spark)
    spark.conf.set("spark.sparklda.driver.pythonMemory", "1k")
    try:
        with pytest.raises(ParamError, match=r"cannot live on the driver: it needs at least"):
            fit(source, TrainParams(k=4, passes=1))
        result = fit(source, TrainParams(k=4, passes=1, model_placement="auto"))
    finally:
        spark.conf.unset("spark.sparklda.driver.pythonMemory")
    assert result.model.metadata["params"]["model_placement"] == "executors"


def test_the_dataframe_backend_refuses_the_executors_placement_before_building(spark):
    source = planted_source(spark)
    with pytest.raises(ParamError, match=r"DataFrame backend \(Spark Connect\) keeps the model"):
        fit(source, TrainParams(k=4, execution="dataframe", model_placement="executors"))


# -- the model on the executors ------------------------------------------------------


def test_initial_rows_of_a_shard_are_the_rows_of_the_whole_draw():
    from sparklda.kernels.random import Stream

    v, k = 37, 5
    whole = np.random.default_rng([7, Stream.INIT_PHI]).random((v, k))
    b = shard_bounds(v, 4)
    got = np.concatenate([initial_rows(7, k, int(b[s]), int(b[s + 1])) for s in range(4)])
    np.testing.assert_array_equal(got, whole)


def test_a_shards_exp_elog_beta_rows_are_the_whole_arrays_rows():
    from sparklda.kernels import digamma, dirichlet_expectation_2d, dirichlet_expectation_given
    from sparklda.modes.svb import exp_dirichlet_expectation, exp_elog_rows

    lam = np.random.default_rng(1).gamma(100.0, 0.01, size=(23, 6))
    psi = np.array([digamma(float(c)) for c in lam.sum(axis=0)])
    idx = np.array([0, 4, 5, 22])
    whole = dirichlet_expectation_2d(np.ascontiguousarray(lam.T))
    np.testing.assert_array_equal(dirichlet_expectation_given(lam[idx], psi), whole[:, idx].T)
    for dtype in (np.float32, np.float64):
        served = exp_elog_rows(psi, dtype)(lam, None, idx)
        np.testing.assert_array_equal(served, exp_dirichlet_expectation(lam, dtype)[idx])


SCVB0 = {"algorithm": "scvb0", "k": 4, "seed": 3, "minibatch_size": 60, "passes": 2}
# 144 training documents in minibatches of 60: 3 rounds a pass, 6 rounds in all


@pytest.fixture(scope="module")
def source(spark):
    return planted_source(spark)


def _fit(source, **kw):
    return fit(source, TrainParams(**{**SCVB0, "heldout_count": 16, **kw}))


@pytest.fixture(scope="module")
def driver_fit(source):
    """``driver_fit(**kw)``: the driver placement's ``_fit(source, **kw)``, made once for the
    module (the tests that compare with the same reference share it)."""
    fits: dict = {}

    def get(**kw):
        key = repr(sorted(kw.items()))
        if key not in fits:
            fits[key] = _fit(source, **kw)
        return fits[key]

    return get


@pytest.mark.slow
@pytest.mark.parametrize("tasks", [2, 8])
def test_scvb0_on_the_executors_gives_the_driver_placements_model(source, driver_fit, tasks):
    driver = driver_fit(parts_per_slice=tasks)
    sharded = _fit(source, parts_per_slice=tasks, model_placement="executors")
    np.testing.assert_allclose(sharded.model.topic_word, driver.model.topic_word, rtol=1e-9)
    assert sharded.model.metadata["params"]["model_placement"] == "executors"
    assert sharded.report["mode"]["model_placement"] == "executors"
    scores = [r.evaluations[-1]["heldout_loglik"] for r in (sharded, driver)]
    np.testing.assert_allclose(scores[0], scores[1], rtol=1e-9)
    for row in sharded.rounds:
        assert row["merged_bytes"] == 0  # no rows of the model reach the driver
        assert row["driver_bytes"] < 64 * SCVB0["k"] * 4


VARIANTS = {
    "learned_alpha": {"optimize_alpha": True},
    "seeded": {"seed_topics": {"0": ["w0", "w1"]}, "seed_confidence": 0.5},
    "float64": {"dtype": "float64", "exclude_token": False},
    # η moves at the last pass's end, from the pass's sums held in the shards (unclipped)
    "learned_eta": {"optimize_eta": True, "eta": 0.5},
}


@pytest.mark.slow
@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_scvb0_variants_on_the_executors_give_the_driver_placements_model(
    source, driver_fit, variant
):
    kw = {"parts_per_slice": 2, **VARIANTS[variant]}
    driver = driver_fit(**kw)
    sharded = _fit(source, model_placement="executors", **kw)
    _same_model(sharded, driver)


def _same_model(sharded, driver):
    np.testing.assert_allclose(sharded.model.topic_word, driver.model.topic_word, rtol=1e-9)
    np.testing.assert_allclose(sharded.model.alpha, driver.model.alpha, rtol=1e-9)
    np.testing.assert_allclose(sharded.model.eta, driver.model.eta, rtol=1e-9)
    if sharded.model.metadata["params"]["optimize_eta"]:  # η was learned
        assert driver.model.eta != pytest.approx(sharded.model.metadata["params"]["eta"])


SVB = {"algorithm": "svb", "learning_offset": 10.0, "parts_per_slice": 2}
SVB_VARIANTS = {
    "online": {},
    "learned_alpha": {"optimize_alpha": True},
    "batch": {"batch": True},
    "learned_eta": {"optimize_eta": True, "eta": 0.2},
}


@pytest.mark.slow
@pytest.mark.parametrize("variant", sorted(SVB_VARIANTS))
def test_svb_on_the_executors_gives_the_driver_placements_model(source, driver_fit, variant):
    kw = {**SVB, **SVB_VARIANTS[variant]}
    driver = driver_fit(**kw)
    sharded = _fit(source, model_placement="executors", **kw)
    _same_model(sharded, driver)
    assert all(r["merged_bytes"] == 0 for r in sharded.rounds)


@pytest.mark.slow
def test_a_warm_start_on_the_executors_gives_the_driver_placements_model(source, driver_fit):
    first = driver_fit(parts_per_slice=2)  # any earlier run: the one the tests above compare with
    kw = {"passes": 1, "parts_per_slice": 2, "seed": 5}
    driver = fit(source, TrainParams(**{**SCVB0, **kw}), initial_model=first.model)
    sharded = fit(
        source,
        TrainParams(**{**SCVB0, **kw, "model_placement": "executors"}),
        initial_model=first.model,
    )
    np.testing.assert_allclose(sharded.model.topic_word, driver.model.topic_word, rtol=1e-9)


#: the resumed runs' references: the runs the tests above compare with (not checkpointed)
RESUMED = {
    "scvb0": {},
    "svb": SVB,
    # η moves at the last pass's end: the crash comes mid-pass, in the last pass
    "scvb0_learned_eta": VARIANTS["learned_eta"],
}


@pytest.mark.slow
@pytest.mark.parametrize("algorithm", sorted(RESUMED))
def test_a_run_on_the_executors_resumes_to_the_driver_placements_model(
    source, driver_fit, tmp_path, algorithm
):
    kw = {"parts_per_slice": 2, **RESUMED[algorithm]}
    full = driver_fit(**kw)
    ck = str(tmp_path / "ck")
    sharded = TrainParams(
        **{
            **SCVB0,
            **kw,
            "heldout_count": 16,
            "model_placement": "executors",
            "checkpoint_dir": ck,
            "checkpoint_interval": 2,
        }
    )
    with pytest.raises(Crash):  # after round 5, the second of the last pass's 3
        fit(source, sharded, callbacks=[CrashAt(5)])
    if algorithm == "scvb0_learned_eta":
        # the pass's sums for η were checkpointed by the shards holding them, and the
        # driver placement resumes from them too (collected)
        assert list(tmp_path.glob("ck/**/eta_pass"))
        shutil.copytree(ck, tmp_path / "ck_driver")
        where = str(tmp_path / "ck_driver")
        on_driver = TrainParams(
            **{**sharded.to_dict(), "model_placement": "driver", "checkpoint_dir": where}
        )
        _same_model(fit(source, on_driver, resume=True), full)
    resumed = fit(source, sharded, resume=True)
    assert resumed.report["resumed_after_round"] == 4  # mid-pass
    assert resumed.report["rounds"] == full.report["rounds"] == 6
    np.testing.assert_allclose(resumed.model.topic_word, full.model.topic_word, rtol=1e-9)
    _same_model(resumed, full)
    # the shards' lineage is cut every checkpoint_interval rounds
    assert any(r["checkpointed"] for r in resumed.rounds[4:])
    assert all(r["lineage_rounds"] < 2 for r in resumed.rounds[4:])


class StageCounter(Callback):
    """The task counts of the stages that ran tasks, round by round (the jobs started
    since the round before; a stage counted once)."""

    def __init__(self, sc):
        self.tracker = sc.statusTracker()
        self.jobs = set(self.tracker.getJobIdsForGroup())
        self.stages: set = set()
        self.rounds: list[list[int]] = []

    def on_round(self, record):
        tasks = []
        for j in sorted(set(self.tracker.getJobIdsForGroup()) - self.jobs):
            self.jobs.add(j)
            for sid in self.tracker.getJobInfo(j).stageIds:
                stage = self.tracker.getStageInfo(sid)
                if sid not in self.stages and stage is not None and stage.numCompletedTasks:
                    self.stages.add(sid)
                    tasks.append(stage.numTasks)
        self.rounds.append(tasks)


@pytest.mark.slow
def test_scvb0_on_the_executors_runs_two_stages_a_round_serving_the_next_rounds_rows(spark, source):
    # the update stage serves the next round's rows: a round after the first runs the
    # kernels' stage and the update's (2 tasks each), and the summaries' one-task
    # stage, which reads the update stage's output without Python (three stages of 2
    # tasks before: serving, kernels, update)
    counter = StageCounter(spark.sparkContext)
    out = fit(
        source,
        TrainParams(**{**SCVB0, "parts_per_slice": 2}, model_placement="executors"),
        callbacks=[counter],
    )
    assert len(out.rounds) >= 4
    assert [r["served_ahead"] for r in out.rounds] == [False] + [True] * (len(out.rounds) - 1)
    # (the second round also caches the requests keyed by the shards' partitions: once)
    for row, tasks in zip(out.rounds[2:], counter.rounds[2:], strict=True):
        if not row["checkpointed"]:
            assert sorted(tasks) == [1, 2, 2], tasks
    # SVB's rows need the driver's update of the round before (ψ of λ's column sums)
    svb = _fit(source, **{**SVB, "passes": 1}, model_placement="executors")
    assert not any(r["served_ahead"] for r in svb.rounds)
