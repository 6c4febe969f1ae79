"""sparklda.daemon: PySpark's worker daemon with sparklda loaded before it forks."""

from __future__ import annotations

import os
import subprocess
import sys

PRELOADED = r"""
import gc, sys
import sparklda.kernels.warm as warm
from sparklda.kernels.gibbs import _gibbs_sweep
from sparklda.kernels.scvb0 import _scvb0_block
assert not warm._settled and gc.get_freeze_count() == 0
assert "pyspark.worker" not in sys.modules
from sparklda.daemon import preload
preload()
print(len(_scvb0_block.signatures), len(_gibbs_sweep.signatures), warm._settled,
      gc.get_freeze_count() > 10000, "pyspark.worker" in sys.modules,
      "sparklda.execution" in sys.modules)
"""


def test_preload_loads_the_kernels_in_both_dtypes_and_freezes_the_heap():
    env = {**os.environ, "SPARK_REUSE_WORKER": "1"}  # as Spark starts the daemon
    out = subprocess.run(
        [sys.executable, "-c", PRELOADED], capture_output=True, text=True, check=True, env=env
    ).stdout.split()
    # SCVB0's block kernel in float32 and float64; Gibbs's sweep with the round's counts
    # as int32 (whole counts) and as float64 (seeded topics), whatever the dtype; the heap
    # frozen; the modules a task needs imported
    assert out == ["2", "2", "True", "True", "True", "True"]


def test_the_sessions_workers_are_forked_by_sparklda_daemon(spark):
    """The test sessions (and every JVM the tests start) run their Python workers from
    sparklda.daemon (tests/conftest.py), and those workers run tasks."""

    def parent(_):
        with open(f"/proc/{os.getppid()}/cmdline", "rb") as f:
            yield f.read().replace(b"\0", b" ").decode()

    parents = spark.sparkContext.parallelize(range(4), 2).mapPartitions(parent).collect()
    assert len(parents) == 2
    assert all("-m sparklda.daemon" in p for p in parents), parents
