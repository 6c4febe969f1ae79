"""Kernels compile once per machine: every numba kernel caches its machine code on disk,
and a second process loads it from there (docs/architecture.md, "Startup")."""

from __future__ import annotations

import importlib
import os
import subprocess
import sys

import pytest
from numba.core.registry import CPUDispatcher

from sparklda.kernels.config import ensure_cache_dir
from tests.helpers import ROOT

MODULES = ["cvb0", "inference", "lanes", "random", "scvb0", "special", "svb"]

PROBE = """
import numpy as np
from sparklda.kernels import scvb0
acc = np.zeros((4, 3))
scvb0.scatter_add_rows(acc, np.array([0, 2]), np.ones((2, 3)))
d = scvb0._scatter_add_rows
print(sum(d.stats.cache_hits.values()), sum(d.stats.cache_misses.values()))
"""


def test_every_kernel_declares_an_on_disk_cache():
    found = 0
    for name in MODULES:
        mod = importlib.import_module(f"sparklda.kernels.{name}")
        for obj in vars(mod).values():
            if isinstance(obj, CPUDispatcher) and obj.__module__ == mod.__name__:
                found += 1
                assert type(obj._cache).__name__ == "FunctionCache", obj
    assert found >= 10


@pytest.mark.slow
def test_a_second_process_loads_the_kernels_from_the_cache(tmp_path):
    cache = tmp_path / "numba-cache"
    env = {**os.environ, "NUMBA_CACHE_DIR": str(cache), "PYTHONPATH": ROOT}

    def probe():
        out = subprocess.run(
            [sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, check=True
        )
        hits, misses = out.stdout.split()
        return int(hits), int(misses)

    assert probe() == (0, 1)  # compiled, and written to the cache
    assert any(p.name.endswith(".nbi") for p in cache.rglob("*scatter_add_rows*"))
    assert probe() == (1, 0)  # loaded, not compiled


def test_cache_dir_falls_back_to_a_per_user_temporary_directory(monkeypatch):
    import numba

    from sparklda.kernels import config

    monkeypatch.delenv("NUMBA_CACHE_DIR", raising=False)
    monkeypatch.setattr(numba.config, "CACHE_DIR", numba.config.CACHE_DIR)
    monkeypatch.setattr(config, "_writable", lambda path: True)
    assert ensure_cache_dir("/any") is None  # the sources' or numba's own directory
    monkeypatch.setattr(config, "_writable", lambda path: False)  # read-only install and home
    set_to = ensure_cache_dir("/any")
    assert set_to is not None and os.environ["NUMBA_CACHE_DIR"] == set_to
    assert str(os.getuid()) in set_to
    assert numba.config.CACHE_DIR == set_to
    monkeypatch.setenv("NUMBA_CACHE_DIR", "/somewhere")
    assert ensure_cache_dir("/any") is None  # a user's setting wins


def test_writable_looks_at_the_nearest_existing_parent(tmp_path):
    from sparklda.kernels.config import _writable

    assert _writable(str(tmp_path / "not" / "yet"))


WARM_PROBE = """
import numpy as np
from numba.core.registry import CPUDispatcher
import sparklda.kernels as kernels
from sparklda.block import DocBlock
from sparklda.corpus import heldout_block
from sparklda.execution.scoring import score_blocks
from sparklda.kernels.scvb0 import add_scaled_rows
from sparklda.kernels.warm import warm
from sparklda.modes import SCVB0
from sparklda.modes.scvb0 import scvb0_kernel
from sparklda.stats import TopicStats

def signatures():
    out = {}
    for mod in ("cvb0", "inference", "scvb0", "special", "svb"):
        m = getattr(kernels, mod)
        for name, obj in vars(m).items():
            if isinstance(obj, CPUDispatcher):
                out[mod + "." + name] = len(obj.signatures)
    return out

import sys

import pytest
dtype = np.dtype(sys.argv[1])
warm(SCVB0.task_kernels + SCVB0.driver_kernels + ("inference",), dtype)
before = signatures()
rng = np.random.default_rng(0)
docs = [(d, np.sort(rng.choice(30, 5, replace=False)), rng.integers(1, 4, 5).astype(float))
        for d in range(6)]
block = DocBlock.from_docs(docs, dtype=dtype)
v, k = 30, 4
value = (None, rng.random((v, k)).astype(dtype), 1.0, np.full(k, 0.01, dtype=dtype))
for exclude in (True, False):
    rows = scvb0_kernel(0, 0, np.full(k, 0.1), 0.01, 2, 1.0, 10.0, 0.9, None, False, exclude)(
        value, block
    )
part = TopicStats(block.terms.astype(np.int32), rows)
merged = TopicStats.merge_all([part, part])
base = rng.random((v, k))
add_scaled_rows(base, base.astype(dtype), merged.terms, merged.rows, 0.5)
phi = base / base.sum(0)
score_blocks(phi, [heldout_block(docs, 0, dtype)], 0.1, 20, 1e-4)
after = signatures()
print(sorted(n for n in after if after[n] != before.get(n)))
"""


@pytest.mark.slow
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_warm_loads_what_the_rounds_then_call(dtype):
    """After :func:`sparklda.kernels.warm.warm` of SCVB0's groups, the calls a round, its
    merge, the driver's update and a held-out evaluation make add no new compiled
    signature to any kernel: the first round finds them all loaded.

    The probe uses the run's own kernel cache: a signature counts whether it was compiled
    or loaded from the cache, so a warm cache checks the same and spares two cold
    compilations of every kernel."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run(
        [sys.executable, "-c", WARM_PROBE, dtype],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    assert out.stdout.strip().splitlines()[-1] == "[]", out.stdout + out.stderr


def test_warm_refuses_an_unknown_group():
    from sparklda.kernels.warm import warm

    with pytest.raises(ValueError, match="'scvb1'.*known: scvb0"):
        warm(["scvb1"])


# --------------------------------------------------------------------------
# The worker's heap: frozen once, so PySpark's gc.collect() after each task is cheap


def test_settle_heap_freezes_once_and_only_in_a_reused_worker(monkeypatch):
    import gc

    from sparklda.kernels import warm

    frozen = []
    monkeypatch.setattr(gc, "freeze", lambda: frozen.append(1))  # not this test process's heap
    monkeypatch.setattr(warm, "_settled", False)
    monkeypatch.delenv("SPARK_REUSE_WORKER", raising=False)
    assert warm.settle_heap() is False and frozen == []  # the driver, or a one-task worker
    monkeypatch.setenv("SPARK_REUSE_WORKER", "1")
    assert warm.settle_heap() is True and frozen == [1]
    assert warm.settle_heap() is False and frozen == [1]  # once per process


def test_round_tasks_leave_their_worker_heap_frozen(spark):
    """A task that ran a round's partition function leaves its (reused) Python worker
    with the objects alive then frozen: the daemon's gc.collect() after each later task
    skips the ~10^5 objects of numpy, numba, pyspark and sparklda."""
    import gc

    import numpy as np

    from sparklda.block import DocBlock
    from sparklda.execution import stateless_partition

    class Holder:
        value = np.ones((3, 2))

    def kernel(value, block):
        return value[: len(block.terms)]

    def probe(blocks):
        from sparklda.kernels import warm

        gc.unfreeze()  # as a fresh worker: whatever an earlier task of the session froze
        warm._settled = False
        before = gc.get_freeze_count()
        list(stateless_partition(Holder(), kernel)(blocks))
        yield before, gc.get_freeze_count(), os.environ.get("SPARK_REUSE_WORKER")

    block = DocBlock.from_docs([(0, np.array([0, 2]), np.array([1.0, 2.0]))])
    seen = spark.sparkContext.parallelize([block], 1).mapPartitions(probe).collect()
    ((before, after, reuse),) = seen
    assert reuse, "the test session reuses its Python workers (spark.python.worker.reuse)"
    assert before == 0 and after > 10_000, seen
