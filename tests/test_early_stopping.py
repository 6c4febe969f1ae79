"""Early stopping on the held-out score: ``min_gain`` and ``patience``."""

from __future__ import annotations

import pytest

from sparklda.api import fit
from sparklda.errors import ParamError
from sparklda.params import TrainParams
from sparklda.training import MinGainStopping
from tests.helpers import planted_source


def ev(round_, passes, loglik):
    return {"round": round_, "passes": passes, "heldout_loglik": loglik}


def test_gain_is_per_pass_and_patience_counts_consecutive_evaluations():
    cb = MinGainStopping(min_gain=0.1, patience=2)
    assert cb.on_evaluation(ev(1, 0.5, -8.0)) is False  # nothing to compare with yet
    assert cb.on_evaluation(ev(2, 1.0, -7.9)) is False  # 0.1 in half a pass: 0.2 per pass
    assert cb.on_evaluation(ev(3, 1.5, -7.88)) is False  # 0.04 per pass: one below
    assert cb.on_evaluation(ev(4, 2.0, -7.8)) is False  # 0.16 per pass resets the count
    assert cb.on_evaluation(ev(5, 2.5, -7.79)) is False
    assert cb.on_evaluation(ev(6, 3.0, -7.795)) is True  # a loss is below too: two in a row
    gains = [g["gain_per_pass"] for g in cb.gains]
    assert gains == pytest.approx([0.2, 0.04, 0.16, 0.02, -0.01])
    assert [g["round"] for g in cb.gains] == [2, 3, 4, 5, 6]
    # the final evaluation repeats the last round's passes: no gain, no division by zero
    assert cb.on_evaluation(ev(6, 3.0, -7.795)) is False and len(cb.gains) == 5


def test_a_resumed_run_continues_from_the_restored_evaluations():
    cb = MinGainStopping(0.1, 1, history=[ev(1, 1.0, -8.0), ev(2, 2.0, -7.5)])
    assert len(cb.gains) == 1 and cb.below == 0
    assert cb.on_evaluation(ev(3, 3.0, -7.45)) is True


@pytest.mark.parametrize(
    "kw,message",
    [
        (
            {"min_gain": 0.01, "eval_every": 1},
            "The 'min_gain' parameter of LDA (0.01) stops training on the held-out "
            "log-likelihood, but no documents are held out: set 'heldout_fraction' or "
            "'heldout_count' above 0, or 'min_gain' to 0.",
        ),
        (
            {"min_gain": 0.01, "heldout_count": 10},
            "'eval_every' is 0 (evaluate only at the end)",
        ),
        ({"min_gain": -1.0}, "The 'min_gain' parameter of LDA must be a float in the range"),
        ({"patience": 0}, "The 'patience' parameter of LDA must be an int in the range [1, inf)"),
    ],
)
def test_bad_early_stopping_settings_are_refused(kw, message):
    with pytest.raises(ParamError) as e:
        TrainParams(**kw).validate()
    assert message in str(e.value)


def test_ml_messages_name_the_pyspark_params():
    from sparklda import LDA

    with pytest.raises(ParamError) as e:
        LDA(minGain=0.05, evalEvery=1)._train_params()
    msg = str(e.value)
    assert "'minGain'" in msg and "'heldoutFraction'" in msg and "heldout_count" not in msg
    tp = LDA(minGain=0.05, patience=3, evalEvery=2, heldoutFraction=0.1)._train_params()
    assert (tp.min_gain, tp.patience, tp.eval_every) == (0.05, 3, 2)


@pytest.mark.slow
def test_training_stops_when_the_gain_falls_below_min_gain(spark):
    source = planted_source(spark)
    params = TrainParams(
        k=4, passes=20, minibatch_size=40, heldout_count=16, eval_every=1, seed=0,
        min_gain=1e3, patience=2,
    )  # fmt: skip
    res = fit(source, params)
    rep = res.report
    assert rep["stopped_by"] == "min_gain"
    # the first evaluation has nothing to compare with; two gains below stop after round 3
    assert rep["rounds"] == 3 and len(res.rounds) == 3
    stop = rep["early_stopping"]
    assert stop["min_gain"] == 1e3 and stop["patience"] == 2
    assert [g["round"] for g in stop["gains"]] == [2, 3]
    ll = {e["round"]: e["heldout_loglik"] for e in res.evaluations}
    per_pass = res.rounds[0]["passes"]
    assert stop["gains"][0]["gain_per_pass"] == pytest.approx((ll[2] - ll[1]) / per_pass)
    # without min_gain the same run goes on
    res2 = fit(source, TrainParams(**{**params.to_dict(), "min_gain": 0.0, "passes": 1}))
    assert res2.report["stopped_by"] is None and res2.report["early_stopping"] is None
    assert res2.report["rounds"] == 4  # 144 training documents, 40 per round
