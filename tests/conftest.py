"""Shared fixtures: one SparkSession for the whole run (local[2], UI off)."""

from __future__ import annotations

import os
import sys

import pytest


@pytest.fixture(scope="session")
def spark():
    from sparklda._java import java_problem

    problem = java_problem()
    if problem:
        pytest.exit(problem, returncode=3)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    session = (
        SparkSession.builder.master("local[2]")
        .appName("sparklda-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.default.parallelism", "2")
        .config("spark.driver.memory", "6g")
        .config("spark.python.worker.reuse", "true")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    session.sparkContext.setCheckpointDir(
        os.path.join(os.environ.get("TMPDIR", "/tmp"), f"sparklda-test-checkpoints-{os.getpid()}")
    )
    yield session
    session.stop()
