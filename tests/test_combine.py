"""Combining a round's partial statistics on the executors, by term shard.

The pure functions (sparklda.stats) against a plain numpy sum and against the
driver-side merge (bit for bit); then every mode trained with
``combine="executors"`` against ``combine="driver"``: the same model, the
driver receiving about one merged copy of the touched rows.
"""

from __future__ import annotations

import logging

import numpy as np
import pytest

from sparklda.api import fit
from sparklda.execution import (
    COMBINE_AUTO_TASKS,
    ClassicExecutor,
    combine_on_executors,
    direct_result_hint,
    size_bytes,
)
from sparklda.params import TrainParams
from sparklda.stats import (
    TopicStats,
    combine_by_shard,
    concat_shards,
    shard_bounds,
    shard_of,
    split_shards,
)
from tests.helpers import planted_source


def random_parts(rng, n_parts, v, k):
    parts = []
    for i in range(n_parts):
        terms = np.sort(rng.choice(v, size=rng.integers(0, v // 2 + 1), replace=False))
        rows = rng.standard_normal((len(terms), k)).astype(np.float32)
        parts.append(
            TopicStats(
                terms.astype(np.int32),
                rows,
                extra={"tokens": float(10 + i), "vec": rng.standard_normal(3)},
                timings={"kernel": 0.01 * (i + 1)},
            )
        )
    return parts


def test_shard_bounds_cover_the_vocabulary_in_contiguous_ranges():
    b = shard_bounds(10, 3)
    np.testing.assert_array_equal(b, [0, 3, 6, 10])
    np.testing.assert_array_equal(shard_of(np.arange(10), b), [0, 0, 0, 1, 1, 1, 2, 2, 2, 2])
    assert len(shard_bounds(4, 16)) - 1 == 4  # never more shards than terms
    assert len(shard_bounds(4, 0)) - 1 == 1
    with pytest.raises(ValueError, match="term ids"):
        shard_of([10], b)


def test_split_shards_keeps_every_row_and_puts_the_counts_on_shard_zero():
    rng = np.random.default_rng(1)
    (part,) = random_parts(rng, 1, 40, 3)
    part = TopicStats(part.terms[part.terms >= 20], part.rows[part.terms >= 20], part.extra)
    bounds = shard_bounds(40, 4)
    pieces = split_shards(part, bounds)
    assert pieces[0][0] == 0 and len(pieces[0][1].terms) == 0  # shard 0 carries the counts
    assert pieces[0][1].extra["tokens"] == part.extra["tokens"]
    assert all(not p.extra for _, p in pieces[1:])
    for s, p in pieces:
        assert np.all(shard_of(p.terms, bounds) == s)
    np.testing.assert_array_equal(np.concatenate([p.terms for _, p in pieces]), part.terms)
    np.testing.assert_array_equal(np.concatenate([p.rows for _, p in pieces]), part.rows)


@pytest.mark.parametrize("n_shards", [1, 3, 7, 64])
def test_combine_by_shard_equals_a_numpy_sum_and_the_driver_merge_bit_for_bit(n_shards):
    rng = np.random.default_rng(n_shards)
    v, k = 50, 4
    parts = random_parts(rng, 9, v, k)
    bounds = shard_bounds(v, n_shards)
    shards = combine_by_shard([*parts[:4], None, *parts[4:]], bounds)
    merged = concat_shards(shards)
    # plain numpy reference: a dense float64 sum in part order
    dense = np.zeros((v, k))
    seen = np.zeros(v, bool)
    for p in parts:
        dense[p.terms] += p.rows.astype(np.float64)
        seen[p.terms] = True
    np.testing.assert_array_equal(merged.terms, np.flatnonzero(seen))
    np.testing.assert_allclose(merged.rows, dense[seen], rtol=1e-12)
    # the driver's merge, bit for bit (the same sums in the same order)
    driver = TopicStats.merge_all(parts)
    np.testing.assert_array_equal(merged.terms, driver.terms)
    assert merged.rows.dtype == np.float64
    assert merged.rows.tobytes() == driver.rows.tobytes()
    assert merged.extra["tokens"] == driver.extra["tokens"]
    assert merged.extra["vec"].tobytes() == driver.extra["vec"].tobytes()
    assert merged.timings == driver.timings
    # one copy of the merged rows: the shards' bytes add up to the merged statistics'
    assert sum(s.nbytes for s in shards) == merged.nbytes


def test_concat_shards_refuses_shards_out_of_order():
    a = TopicStats(np.array([5], np.int32), np.ones((1, 2)))
    b = TopicStats(np.array([2], np.int32), np.ones((1, 2)))
    with pytest.raises(ValueError, match="shard order"):
        concat_shards([a, b])


def test_auto_combines_on_the_executors_above_the_threshold():
    assert not combine_on_executors("auto", COMBINE_AUTO_TASKS)
    assert combine_on_executors("auto", COMBINE_AUTO_TASKS + 1)
    assert combine_on_executors("executors", 1)
    assert not combine_on_executors("driver", 1000)


# --------------------------------------------------------------------------
# Spark: every mode, executors against driver

PARTS = 12  # many tasks per round on a tiny corpus: the driver merge's worst case
MODES = {
    "scvb0": dict(algorithm="scvb0", passes=1, minibatch_size=60),
    "cvb0": dict(algorithm="cvb0", passes=2, checkpoint_interval=1),  # lineage cut each round
    "cvb": dict(algorithm="cvb", passes=2),
    "svb": dict(algorithm="svb", passes=1, minibatch_size=60, learning_offset=1.0),
}


@pytest.fixture(scope="module")
def source(spark):
    return planted_source(spark)


@pytest.fixture(scope="module")
def executors_run(source):
    """``executors_run(name)``: the fit of mode ``name`` with ``combine="executors"`` (one
    per mode for the module)."""
    done: dict = {}

    def get(name):
        if name not in done:
            done[name] = run(source, name, "executors")
        return done[name]

    return get


def run(source, name, combine):
    params = TrainParams(
        k=4, seed=3, heldout_count=0, parts_per_slice=PARTS, combine=combine, **MODES[name]
    )
    return fit(source, params)


def check_same_model(source, executors_run, name):
    driver = run(source, name, "driver")
    executors = executors_run(name)
    if MODES[name].get("checkpoint_interval") == 1:
        assert executors.report["mode"]["checkpoints"] >= 2
    np.testing.assert_array_equal(executors.model.topic_word, driver.model.topic_word)
    for d, e in zip(driver.rounds, executors.rounds, strict=True):
        assert d["combine"] == "driver" and e["combine"] == "executors"
        assert e["tasks"] == d["tasks"] > COMBINE_AUTO_TASKS
        assert e["tokens"] == d["tokens"]
        assert e["merged_bytes"] == d["merged_bytes"]
        assert e["driver_bytes"] <= 1.2 * e["merged_bytes"]
        assert d["driver_bytes"] > 1.5 * d["merged_bytes"]  # what the combine saves here
        assert e["task_kernel_max_s"] > 0
    return executors


@pytest.mark.slow
def test_scvb0_same_model_and_bounded_driver_bytes(source, executors_run):
    check_same_model(source, executors_run, "scvb0")


@pytest.mark.slow
def test_executor_combine_is_deterministic(source, executors_run):
    first = executors_run("scvb0")  # shared with the test above
    again = run(source, "scvb0", "executors")
    assert again.model.topic_word.tobytes() == first.model.topic_word.tobytes()


@pytest.mark.slow
@pytest.mark.parametrize("name", ["cvb0", "cvb", "svb"])
def test_other_modes_same_model_with_executor_combine(source, executors_run, name):
    check_same_model(source, executors_run, name)


def test_spark_sizes_parse_as_spark_reads_them():
    assert size_bytes("64m") == 64 << 20
    assert size_bytes("1048576") == 1 << 20
    assert size_bytes(" 2G ") == 2 << 30
    assert size_bytes("512k") == 512 << 10
    with pytest.raises(ValueError, match="not a Spark size: 'lots'"):
        size_bytes("lots")


def test_a_session_with_small_direct_results_is_told_what_to_set(caplog):
    """At Spark's default (1m) every round's results take a block-manager fetch: the
    classic executor says which property to set; at the jobs' 64m it says nothing."""
    from types import SimpleNamespace

    for value, hinted in ((None, True), ("4m", True), ("64m", False)):
        conf = SimpleNamespace(get=lambda key, v=value: v)
        context = SimpleNamespace(_conf=conf)
        corpus = SimpleNamespace(train=SimpleNamespace(context=context))
        caplog.clear()
        with caplog.at_level(logging.INFO, logger="sparklda.execution"):
            ClassicExecutor(corpus)
        said = [r.getMessage() for r in caplog.records]
        assert bool(said) == hinted, (value, said)
        if hinted:
            assert "spark.task.maxDirectResultSize" in said[0]
            assert (value or "1m") in said[0] and "sparklda.SESSION_PROPERTIES (64m)" in said[0]
    assert direct_result_hint("64m") is None
    assert direct_result_hint("1p") is None and direct_result_hint("64 MiB") is None
