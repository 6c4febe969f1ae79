"""Shared fixtures: one SparkSession for the whole run (local[2], UI off) in each pytest-xdist
worker (or in the one pytest process, with ``-n 0``), and how the tests are shared out among
the workers (``pytest_collection_modifyitems``)."""

from __future__ import annotations

import os
import sys

import pytest

from tests.jvm_share import archive_path, jvm_options, start_archive

#: Bytecode caches on, for this process and every Python process the tests start (job
#: subprocesses, Spark's Python daemons, notebook kernels): with ``PYTHONDONTWRITEBYTECODE``
#: set (as in some images) each of them compiled sparklda's modules again, and each
#: pytest-xdist worker rewrote and compiled every test module again (half of a worker's
#: collection time). The caches are ``__pycache__`` directories, which git ignores.
sys.dont_write_bytecode = False
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)

#: The JVM options of every JVM the tests start through spark-submit: C1-only compilation
#: and a class-data sharing archive (tests/jvm_share.py), and PySpark's worker daemon
#: replaced by :mod:`sparklda.daemon`, whose workers are forked with sparklda loaded (a
#: worker whose task raised is not reused, and many tests raise on purpose: each new
#: worker would import and load the kernels again). Test-only: the library and its jobs
#: leave the JVM's, PySpark's and Spark SQL's defaults. (The cluster tests, whose
#: executors import sparklda from the zip the driver ships, keep PySpark's daemon.)
JVM_OPTS = jvm_options(archive_path())
DAEMON_OPT = "-Dspark.python.daemon.module=sparklda.daemon"
#: Spark SQL's expressions interpreted, not compiled to Java (whole-stage or one by one):
#: the same results (Spark tests both paths), and the tests' queries run on a few
#: thousand rows each, where compiling a query costs more CPU than running it.
SQL_OPTS = "-Dspark.sql.codegen.wholeStage=false -Dspark.sql.codegen.factoryMode=NO_CODEGEN"
TEST_JVM_OPTS = f"{JVM_OPTS} {DAEMON_OPT} {SQL_OPTS}"
if TEST_JVM_OPTS not in os.environ.get("SPARK_SUBMIT_OPTS", ""):
    os.environ["SPARK_SUBMIT_OPTS"] = (
        os.environ.get("SPARK_SUBMIT_OPTS", "") + " " + TEST_JVM_OPTS
    ).strip()

_archive_thread = None


def pytest_configure(config):
    """The controller (or the one pytest process) starts making the archive, if this
    machine has none yet; the JVMs started before it is in place run without it. Then,
    if the kernels' on-disk cache is empty, it compiles them (:func:`_compile_kernels`)."""
    global _archive_thread
    if hasattr(config, "workerinput"):
        return
    archive = archive_path()
    if archive:
        _archive_thread = start_archive(archive)
    if not (config.option.collectonly or getattr(config.option, "help", False)):
        _compile_kernels()
        import compileall

        import sparklda

        # sparklda's bytecode, once, before the workers and their Spark processes import it
        compileall.compile_dir(os.path.dirname(sparklda.__file__), quiet=1)


def _compile_kernels() -> None:
    """Compile the kernels the rounds call, in both dtypes, into their on-disk cache,
    before the pytest-xdist workers start, when the cache has none of them (a fresh
    clone, as in CI).

    Otherwise the processes that meet a kernel first compile it at the same time (the
    two workers' drivers and each one's Python workers: four to six processes; all the
    kernels in both dtypes take about 20 CPU-seconds), and numba's cache keeps one of
    the results. Compiled once here, every later process loads them (a few tenths of a
    second). A cache that has them already is left alone."""
    import numpy as np

    from sparklda.kernels.scvb0 import _scvb0_block
    from sparklda.kernels.warm import WARMERS, warm

    index = getattr(
        getattr(getattr(_scvb0_block, "_cache", None), "_cache_file", None), "_index_path", None
    )
    if index is None or os.path.exists(index):
        return
    for dtype in (np.float32, np.float64):
        warm(list(WARMERS), dtype)


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
#: busy to the end): ``connect`` (every test that needs the Connect server, so one worker
#: starts it), then test modules whose tests share module-scoped fixtures (see
#: :func:`_groups`).
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


def _module_name(item) -> str:
    return item.module.__name__.rsplit(".", 1)[-1] if item.module else item.nodeid


def _shared_fixtures(item) -> set[str]:
    """The module- (or class-, package-) scoped fixtures ``item`` uses: what it may share
    with the other tests of its module."""
    info = getattr(item, "_fixtureinfo", None)
    if info is None:
        return set()
    return {
        name
        for name, defs in info.name2fixturedefs.items()
        if defs and defs[-1].scope in ("module", "class", "package")
    }


def _groups(items) -> dict:
    """Each test's pytest-xdist group.

    - ``connect``: the tests that need the Connect server (the ``connect`` fixture), and
      every test of a module where such a test shares a module-scoped fixture with the
      others (a training run made once for the module, not once on each worker);
    - the module's name, for the tests of a module that share a module-scoped fixture
      (a cluster, a built wheel, a fit several tests read);
    - else the test itself, so that the workers share out the module's other tests and
      neither waits at the end of the run while the other finishes a long module alone."""
    by_module: dict = {}
    for item in items:
        by_module.setdefault(_module_name(item), []).append(item)
    group = {}
    for module, members in by_module.items():
        fixtures = [_shared_fixtures(item) for item in members]
        connect = [_needs_connect(item) for item in members]
        with_connect = set().union(*(f for f, c in zip(fixtures, connect, strict=True) if c))
        without = set().union(*(f for f, c in zip(fixtures, connect, strict=True) if not c))
        counts: dict = {}
        for f in fixtures:
            for name in f:
                counts[name] = counts.get(name, 0) + 1
        shared = {name for name, n in counts.items() if n > 1}
        for item, needs, uses in zip(members, connect, fixtures, strict=True):
            if needs or with_connect & without:
                group[item.nodeid] = "connect"
            elif uses & shared:
                group[item.nodeid] = module
            else:
                group[item.nodeid] = item.nodeid
    return group


def _needs_connect(item) -> bool:
    return "connect" in getattr(item, "fixturenames", ())


@pytest.hookimpl(tryfirst=True)  # before xdist reads the groups
def pytest_collection_modifyitems(config, items):
    """Tests that need the Spark Connect server (the ``connect`` fixture) are slow: the
    server is a second Spark driver, started once for the run, which the fast subset
    (``-m "not slow"``) does without.

    Under pytest-xdist (``-n 2 --dist loadgroup``, pyproject's addopts) each test is put
    in its group (:func:`_groups`): a group runs whole on one worker, so module-scoped
    fixtures that several tests share (a training run, a cluster, a built wheel) run
    once, and the Connect server starts on one worker only. Longest first: the groups of
    ``LONGEST_FIRST`` in that order, then the other modules' groups, then the tests that
    share nothing, slow ones first (xdist hands groups out in collection order)."""
    for item in items:
        if _needs_connect(item):
            item.add_marker(pytest.mark.slow)
    if not getattr(config.option, "loadgroup", False):  # set in the workers of --dist loadgroup
        return
    group = _groups(items)
    for item in items:
        if group[item.nodeid] != item.nodeid:  # a test alone is its own unit for xdist
            item.add_marker(pytest.mark.xdist_group(group[item.nodeid]))
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
    modules = set(group.values()) - {item.nodeid for item in items}

    def order(item):
        name = group[item.nodeid]
        if name in rank or _module_name(item) in rank:  # a long module, whole or test by test
            return (rank.get(name, rank.get(_module_name(item))), 0)
        if name in modules:
            return (len(rank), 0)
        return (len(rank) + 1, 0 if item.get_closest_marker("slow") else 1)

    items.sort(key=order)  # stable: else as collected
