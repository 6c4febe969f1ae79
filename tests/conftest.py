"""Shared fixtures: one SparkSession for the whole run (local[2], UI off) in each pytest-xdist
worker (or in the one pytest process, with ``-n 0``), and how the tests are shared out among
the workers (``pytest_collection_modifyitems``)."""

from __future__ import annotations

import os
import sys

import pytest

from tests.jvm_share import archive_path, jvm_options, start_archive

#: The JVM options of every JVM the tests start through spark-submit: C1-only compilation
#: and a class-data sharing archive (tests/jvm_share.py). Test-only: the library and its
#: jobs leave the JVM's defaults.
TEST_JVM_OPTS = jvm_options(archive_path())
if TEST_JVM_OPTS not in os.environ.get("SPARK_SUBMIT_OPTS", ""):
    os.environ["SPARK_SUBMIT_OPTS"] = (
        os.environ.get("SPARK_SUBMIT_OPTS", "") + " " + TEST_JVM_OPTS
    ).strip()

_archive_thread = None


def pytest_configure(config):
    """The controller (or the one pytest process) starts making the archive, if this
    machine has none yet; the JVMs started before it is in place run without it."""
    global _archive_thread
    archive = archive_path()
    if archive and not hasattr(config, "workerinput"):
        _archive_thread = start_archive(archive)


def pytest_unconfigure(config):
    """Wait for the archive's JVM (about 30 s on a machine that had none), so that the
    archive is renamed into place for the next run rather than left half made."""
    if _archive_thread is not None:
        _archive_thread.join(timeout=600)


@pytest.fixture(scope="session")
def spark():
    from sparklda._java import java_problem

    problem = java_problem()
    if problem:
        pytest.exit(problem, returncode=3)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    from sparklda.cli.session import DEFAULT_PROPERTIES

    builder = SparkSession.builder
    for key, value in DEFAULT_PROPERTIES.items():  # the jobs' properties (64m direct results)
        builder = builder.config(key, value)
    session = (
        builder.master("local[2]")
        .appName("sparklda-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.default.parallelism", "2")
        .config("spark.driver.memory", "3g")  # one such driver per xdist worker
        .config("spark.python.worker.reuse", "true")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    session.sparkContext.setCheckpointDir(
        os.path.join(os.environ.get("TMPDIR", "/tmp"), f"sparklda-test-checkpoints-{os.getpid()}")
    )
    yield session
    session.stop()


@pytest.fixture(scope="session")
def _connect_session(spark, tmp_path_factory):
    from pyspark.sql import SparkSession

    from tests.helpers import connect_server

    with connect_server(tmp_path_factory.mktemp("connect")) as url:
        had = os.environ.get(CONNECT_MODE)
        session = SparkSession.builder.remote(url).create()
        _restore_env(CONNECT_MODE, had)  # pyspark sets it process-wide on create()
        try:
            yield session
        finally:
            os.environ[CONNECT_MODE] = "1"
            session.stop()
            _restore_env(CONNECT_MODE, had)


@pytest.fixture
def connect(_connect_session):
    """A Spark Connect session, beside the classic ``spark`` session, on a Connect server
    this run starts (``tests.helpers.connect_server``; stopped by its pid at the end).

    pyspark decides "is this Spark Connect?" from one process-wide environment variable;
    it is set for the duration of each test that takes this fixture only, so the classic
    tests around it keep their classic code paths. Library code must take its session
    from the DataFrame it is given, never from ``SparkSession.builder``."""
    had = os.environ.get(CONNECT_MODE)
    os.environ[CONNECT_MODE] = "1"
    try:
        yield _connect_session
    finally:
        _restore_env(CONNECT_MODE, had)


CONNECT_MODE = "SPARK_CONNECT_MODE_ENABLED"


def _restore_env(name: str, value: str | None) -> None:
    if value is None:
        os.environ.pop(name, None)
    else:
        os.environ[name] = value


#: The groups that take longest, handed out first (longest first keeps the two workers
#: busy to the end): a group is a test module, or ``connect`` (every test that needs the
#: Connect server, so one worker starts it).
LONGEST_FIRST = (
    "connect",
    "test_resume",
    "test_scvb0",
    "test_cluster",
    "test_atomic_saves",
    "test_wheel",
    "test_combine",
    "test_benchmark",
    "test_notebook",
)


def _group(item) -> str:
    if "connect" in getattr(item, "fixturenames", ()):
        return "connect"
    return item.module.__name__.rsplit(".", 1)[-1] if item.module else item.nodeid


@pytest.hookimpl(tryfirst=True)  # before xdist reads the groups
def pytest_collection_modifyitems(config, items):
    """Tests that need the Spark Connect server (the ``connect`` fixture) are slow: the
    server is a second Spark driver, started once for the run, which the fast subset
    (``-m "not slow"``) does without.

    Under pytest-xdist (``-n 2 --dist loadgroup``, pyproject's addopts) each test is put
    in its group (``_group``): a group runs whole on one worker, so a module's
    module-scoped fixtures (a shared training run, a cluster, a built wheel) run once, and
    the Connect server starts on one worker only. The groups of ``LONGEST_FIRST`` come
    first, in that order (xdist hands groups out in collection order)."""
    for item in items:
        if "connect" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.slow)
    if not getattr(config.option, "loadgroup", False):  # set in the workers of --dist loadgroup
        return
    for item in items:
        item.add_marker(pytest.mark.xdist_group(_group(item)))
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(_group(item), len(rank)))  # stable: else as collected
