"""The cost model's formulas (sparklda/cost.py, docs/architecture.md "Cost model: where
each placement wins") on hand-computed cases."""

import math

import pytest

from sparklda.cost import (
    MEASURED,
    Constants,
    Workload,
    distinct_terms,
    holds,
    round_cost,
    round_parts,
)
from sparklda.errors import ParamError

C = Constants(
    t_stage=0.1,
    t_task=0.05,
    t_launch=0.001,
    sigma_b=1e-8,
    sigma_sh=2e-8,
    sigma_c=1e-8,
    sigma_sd=3e-8,
    r_k=1e8,
    u=1e-9,
    net_bytes_per_s=1e9,
)
W = Workload(vocab_size=1000, k=10, executors=4, round_tokens=4e6, round_terms=500, block_terms=200)


def test_driver_round_by_hand():
    parts = round_parts("driver", W, C)
    # value 4·500·10 = 20,000 B; torrent: 20,000·(1e-8 + 1e-9) + ⌈log2 4⌉·20,000·1e-9
    expected = {
        "stages": 2 * 0.15 + 2 * 4 * 0.001,
        "broadcast": 2.2e-4 + 4e-5,
        "kernel": 1e6 * 10 / 1e8,
        "combine": 4 * 200 * 10 * 2e-8,
        "collect": 8 * 500 * 10 * 1e-8,
        "update": 500 * 10 * 1e-9,
    }
    assert parts == pytest.approx(expected, rel=1e-12)
    assert round_cost("driver", W, C) == pytest.approx(0.408825, rel=1e-12)
    # every executor fetching from the driver: 20,000·1e-8 + 4·20,000·1e-9
    fetch = round_parts("driver", W, C, broadcast="fetch")["broadcast"]
    assert fetch == pytest.approx(2.8e-4, rel=1e-12)


def test_executors_round_by_hand():
    parts = round_parts("executors", W, C)
    # a shard: 8·1000·10/4 = 20,000 B, read and written by the update, which serves the
    # next round's rows (two stages)
    expected = {
        "stages": 2 * 0.15 + 2 * 4 * 0.001,
        "serve": 1.6e-4,
        "kernel": 0.1,
        "combine": 1.6e-4,
        "update": 2_500 * 1e-9 + 2 * 20_000 * 3e-8,
    }
    assert parts == pytest.approx(expected, rel=1e-12)
    assert round_cost("executors", W, C) == pytest.approx(0.4095225, rel=1e-12)


def test_torrent_broadcast_grows_with_log_executors_and_fetch_linearly():
    big = Workload(10**6, 1000, 8, 1e7, 10**6, 10**5)
    many = Workload(10**6, 1000, 1024, 1e7, 10**6, 10**5)
    t8, t1024 = (round_parts("driver", w, C)["broadcast"] for w in (big, many))
    # 4 GB value; the pipeline adds ⌈log2 E⌉ blocks of 4 MiB: 3 against 10
    assert t1024 - t8 == pytest.approx(7 * (4 << 20) * 1e-9, rel=1e-12)
    f8, f1024 = (round_parts("driver", w, C, "fetch")["broadcast"] for w in (big, many))
    assert f1024 - f8 == pytest.approx(1016 * 4e9 * 1e-9, rel=1e-12)


def test_holds_by_hand():
    assert holds("driver", W) == {"driver": 200_000.0, "executor": 36_000.0}
    assert holds("executors", W) == {"driver": 640.0, "executor": 56_000.0}


def test_the_measured_constants_predict_a_crossover():
    small = Workload(10**5, 1000, 8, 2e7, 10**5, 6e4)
    large = Workload(10**7, 1000, 1000, 2e7, 3e6, 2e4)
    assert round_cost("driver", small, MEASURED) < round_cost("executors", small, MEASURED)
    assert round_cost("executors", large, MEASURED) < round_cost("driver", large, MEASURED)


def test_distinct_terms():
    # uniform (exponent 0): V·(1 − (1 − 1/V)^n)
    assert distinct_terms(100, 100, exponent=0.0) == pytest.approx(100 * (1 - 0.99**100))
    assert distinct_terms(1, 3) == pytest.approx(1.0)
    assert distinct_terms(0, 50) == 0.0
    # the tail's integral against the exact sum
    v, n = 300_000, 2e5
    norm = sum(1 / r for r in range(1, v + 1))
    exact = sum(-math.expm1(n * math.log1p(-1 / (r * norm))) for r in range(1, v + 1))
    assert distinct_terms(n, v) == pytest.approx(exact, rel=1e-3)


def test_refusals_name_the_parameter():
    with pytest.raises(ParamError, match="placement"):
        round_cost("cluster", W, C)
    with pytest.raises(ParamError, match="broadcast"):
        round_cost("driver", W, C, broadcast="http")
    with pytest.raises(ParamError, match="executors"):
        round_cost("driver", Workload(10, 10, 0, 1, 1, 1), C)
