"""The jobs' SparkSession: who decides the master and the Spark properties.

Precedence, highest first:

1. What Spark's launcher resolved. Under ``spark-submit`` that is its
   command line (``--master``, ``--deploy-mode``, ``--conf``,
   ``--executor-memory``, ``--driver-memory``, ``--py-files``, ``--archives``,
   ...), its ``--properties-file`` and the cluster's ``spark-defaults.conf``.
   With plain ``python`` it is ``PYSPARK_SUBMIT_ARGS`` (``--master``,
   ``--conf``), when set.
2. The configuration: ``[spark.conf]`` (also ``--conf-set PROPERTY=VALUE``
   and ``--set spark.conf."PROPERTY"=VALUE``) and ``[spark] app_name``.
3. The jobs' defaults (:data:`DEFAULT_PROPERTIES`).

The master: under spark-submit always spark-submit's. With plain python the
job's ``--master`` option, else ``[spark] master``, else ``local[2]``
(``PYSPARK_SUBMIT_ARGS --master`` beats all three).

How: a spark-submit'ed driver finds the launcher's JVM (the Py4J gateway,
``PYSPARK_GATEWAY_PORT``) already running with the resolved properties as
system properties. :func:`build_session` connects to it, reads them
(``SparkConf()``), and hands the builder only the configuration's
properties that are not set there; the master is never set. With plain
python it launches the gateway itself with the configuration's properties
as ``--conf`` arguments placed before ``PYSPARK_SUBMIT_ARGS``, which
therefore win, exactly as they would on a spark-submit command line.
Properties of the driver JVM (``spark.driver.memory``, ...) cannot change
once spark-submit has started it: the configuration's values for them are
reported and skipped.

Python workers: in local mode, when neither ``PYSPARK_PYTHON`` nor
``spark.pyspark.python`` is set, the workers run this interpreter
(``sys.executable``), so a job started as ``/path/to/venv/bin/python ...``
without an activated venv finds its own packages.
"""

from __future__ import annotations

import logging
import os
import re
import sys
import tempfile
import zipfile

from .. import SESSION_PROPERTIES
from .config import ConfigError, flatten_spark_conf

log = logging.getLogger("sparklda.job")

DEFAULT_MASTER = "local[2]"
#: Set unless spark-submit or the configuration says otherwise: no console progress bar
#: (it mixes with the job's output), and :data:`sparklda.SESSION_PROPERTIES` (round
#: results straight back to the driver instead of through the block manager).
DEFAULT_PROPERTIES = {"spark.ui.showConsoleProgress": "false", **SESSION_PROPERTIES}
#: Properties of the driver JVM: fixed once spark-submit has started it.
DRIVER_JVM_PROPERTIES = (
    "spark.driver.memory",
    "spark.driver.extraJavaOptions",
    "spark.driver.extraClassPath",
    "spark.driver.extraLibraryPath",
    "spark.driver.defaultJavaOptions",
)
#: Spark's own default of ``spark.redaction.regex``.
REDACTION_REGEX = r"(?i)secret|password|token|access[.]?key"
REDACTED = "*********(redacted)"


#: Loggers whose warnings at every start say nothing about the job (a loopback hostname,
#: no native Hadoop library): quiet at the default level WARN.
QUIET_AT_STARTUP = ("org.apache.hadoop.util.NativeCodeLoader", "org.apache.spark.util.Utils")


#: Loggers that print a failed task's exception with its whole Java (and Python) stack
#: ("ERROR Executor: Exception in task ...", "WARN TaskSetManager: Lost task ..."): the job
#: reports the error itself, as one ``error:`` line, so they are off unless Spark logs at
#: DEBUG (or finer).
QUIET_TASK_FAILURES = {
    "org.apache.spark.executor.Executor": "off",
    "org.apache.spark.scheduler.TaskSetManager": "off",
    "org.apache.spark.scheduler.TaskSchedulerImpl": "off",
    "org.apache.spark.api.python.PythonRunner": "off",
    "org.apache.spark.sql.execution.datasources.FileFormatWriter": "off",
    # "Error in TaskCompletionListener ... Block broadcast_N does not exist": a task still
    # running when the failed job's broadcasts were released
    "org.apache.spark.TaskContextImpl": "off",
    # "Putting block ... failed due to exception ...", with the task's Python traceback
    "org.apache.spark.storage.BlockManager": "error",
}
#: Spark log levels that show :data:`QUIET_TASK_FAILURES`.
VERBOSE_LEVELS = ("DEBUG", "TRACE", "ALL")


def quiet_task_failures(spark, level: str) -> None:
    """Set :data:`QUIET_TASK_FAILURES`' levels in the driver's JVM (local mode runs the
    executors there too) unless ``level`` is one of :data:`VERBOSE_LEVELS`."""
    from py4j.protocol import Py4JError

    if level.upper() in VERBOSE_LEVELS:
        return
    jvm = spark.sparkContext._jvm
    try:
        for name, quiet in QUIET_TASK_FAILURES.items():
            jvm.org.apache.logging.log4j.core.config.Configurator.setLevel(
                name, jvm.org.apache.logging.log4j.Level.toLevel(quiet.upper())
            )
    except Py4JError as e:  # another logging backend: its messages stay
        log.debug("could not quiet Spark's task failure loggers: %s", e)


def check_spark_settings(cfg: dict, master: str | None) -> None:
    """Refuse, before Spark starts, a master URL Spark cannot use (``--master`` or
    ``[spark] master``) and a malformed memory size among the ``[spark.conf]``
    properties Spark reads as sizes (``spark.driver.memory``, ...): Spark would fail
    with a Java stack (``JAVA_GATEWAY_EXITED`` for the driver's memory)."""
    spark_cfg = cfg.get("spark", {})
    for key, value in (("--master", master), ("spark.master", spark_cfg.get("master"))):
        if value is not None and not MASTER_URL.fullmatch(str(value)):
            raise ConfigError(
                f"{key} {value!r} is not a Spark master URL; use local, local[N], local[*], "
                f"local[N,F], spark://HOST:PORT, yarn, k8s://HOST:PORT or mesos://HOST:PORT."
            )
    props = flatten_spark_conf(spark_cfg.get("conf", {}))
    if props.get("spark.master") is not None and not MASTER_URL.fullmatch(props["spark.master"]):
        raise ConfigError(
            f'spark.conf."spark.master" {props["spark.master"]!r} is not a Spark master URL; '
            f"use local, local[N], local[*], spark://HOST:PORT, yarn, k8s://HOST:PORT, ..."
        )
    for key in SIZE_PROPERTIES:
        value = props.get(key)
        if value is not None and not MEMORY_SIZE.fullmatch(value.strip().lower()):
            raise ConfigError(
                f'spark.conf."{key}" = {value!r} is not a memory size; write a whole number '
                f'with an optional unit k, m, g, t or p (e.g. "4g", "512m").'
            )


#: What Spark takes as a master: local modes, a cluster manager URL, yarn.
MASTER_URL = re.compile(
    r"local(?:\[(?:\d+|\*)(?:,\d+)?\])?|local-cluster\[\d+,\d+,\d+\]|yarn"
    r"|(?:spark|mesos|k8s)://\S+"
)
#: Spark's size strings (JavaUtils.byteStringAs): a whole number and an optional unit.
MEMORY_SIZE = re.compile(r"\d+(?:[kmgtp]b?|b)?")
#: Properties Spark parses as memory sizes.
SIZE_PROPERTIES = (
    "spark.driver.memory",
    "spark.executor.memory",
    "spark.driver.memoryOverhead",
    "spark.executor.memoryOverhead",
    "spark.driver.maxResultSize",
    "spark.executor.pyspark.memory",
    "spark.python.worker.memory",
)


def log4j2_config(level: str) -> str:
    """A log4j2 configuration: Spark's console layout on stderr at ``level`` from the
    first line the JVM logs (at WARN, :data:`QUIET_AT_STARTUP` log only errors; below
    DEBUG, :data:`QUIET_TASK_FAILURES` are off)."""
    level = level.upper()
    lines = [
        f"rootLogger.level = {level.lower()}",
        "rootLogger.appenderRef.stderr.ref = console",
        "appender.console.type = Console",
        "appender.console.name = console",
        "appender.console.target = SYSTEM_ERR",
        "appender.console.layout.type = PatternLayout",
        "appender.console.layout.pattern = %d{yy/MM/dd HH:mm:ss} %p %c{1}: %m%n%ex",
    ]
    if level == "WARN":
        for i, name in enumerate(QUIET_AT_STARTUP):
            lines += [f"logger.quiet{i}.name = {name}", f"logger.quiet{i}.level = error"]
    if level not in VERBOSE_LEVELS:
        for i, (name, quiet) in enumerate(QUIET_TASK_FAILURES.items()):
            lines += [f"logger.task{i}.name = {name}", f"logger.task{i}.level = {quiet}"]
    return "\n".join(lines) + "\n"


def _startup_logging(properties: dict[str, str], level: str) -> dict[str, str]:
    """``properties`` plus the driver JVM option that makes log4j2 read
    :func:`log4j2_config` (``level``) from its start: no "default log4j profile" and
    no startup warnings. Left alone when the configuration sets the driver's Java
    options itself."""
    if "spark.driver.extraJavaOptions" in properties:
        return properties
    fd, path = tempfile.mkstemp(prefix="sparklda-log4j2-", suffix=".properties")
    with os.fdopen(fd, "w") as f:
        f.write(log4j2_config(level))
    return {**properties, "spark.driver.extraJavaOptions": f"-Dlog4j2.configurationFile={path}"}


def launched_by_spark_submit() -> bool:
    """Whether this Python process is a driver started by ``spark-submit``: its launcher
    JVM is already running and passed its Py4J gateway in the environment."""
    return "PYSPARK_GATEWAY_PORT" in os.environ


def _launch_gateway(properties: dict[str, str]) -> None:
    """Start the driver JVM with ``properties`` as spark-submit ``--conf`` arguments
    (``PYSPARK_SUBMIT_ARGS`` follow them, so its settings win)."""
    from pyspark import SparkConf, SparkContext
    from pyspark.find_spark_home import _find_spark_home

    # bin/spark-submit otherwise runs `python3` from PATH to find SPARK_HOME
    os.environ.setdefault("SPARK_HOME", _find_spark_home())
    SparkContext._ensure_initialized(
        conf=SparkConf(loadDefaults=False).setAll(list(properties.items()))
    )


def _jvm_properties() -> dict[str, str]:
    """The Spark properties the running launcher JVM holds (its system properties)."""
    from pyspark import SparkConf

    return dict(SparkConf().getAll())


def _worker_python(properties: dict[str, str]) -> None:
    """Point the Python workers at an interpreter unless ``PYSPARK_PYTHON`` names one:
    ``spark.pyspark.python`` when set (pyspark itself reads only the environment
    variable), else, in local mode, this interpreter."""
    if os.environ.get("PYSPARK_PYTHON"):
        return
    if properties.get("spark.pyspark.python"):
        os.environ["PYSPARK_PYTHON"] = properties["spark.pyspark.python"]
    elif properties.get("spark.master", "").startswith("local"):
        os.environ["PYSPARK_PYTHON"] = sys.executable
        log.info("Python workers run %s (local mode, PYSPARK_PYTHON not set)", sys.executable)


def plan_properties(
    cfg: dict,
    master: str | None,
    app_name: str,
    given: dict[str, str] | None,
    submitted: bool,
    script: str | None = None,
) -> tuple[dict, dict]:
    """(properties to hand the builder, properties of the configuration that lost to the
    launcher's) for configuration ``cfg``. ``given`` holds the launcher's properties (None:
    the launcher has not run yet), ``submitted`` whether spark-submit started this driver,
    ``script`` its main file (spark-submit names the application after it unless --name)."""
    spark_cfg = cfg.get("spark", {})
    wanted = {**DEFAULT_PROPERTIES, **flatten_spark_conf(spark_cfg.get("conf", {}))}
    name = spark_cfg.get("app_name", app_name)
    if not submitted:
        wanted["spark.master"] = master or spark_cfg.get("master") or DEFAULT_MASTER
        wanted["spark.app.name"] = name
        if given is None:
            return wanted, {}
    given = given or {}
    apply, lost = {}, {}
    if submitted and given.get("spark.app.name") in (None, script):
        apply["spark.app.name"] = name  # spark-submit's default name: the main file's
    for key, value in wanted.items():
        if key in given:
            if given[key] != value:
                lost[key] = value
        elif submitted and key in DRIVER_JVM_PROPERTIES:
            lost[key] = value
        else:
            apply[key] = value
    return apply, lost


def build_connect_session(cfg: dict, remote: str, app_name: str = "sparklda"):
    """A Spark Connect session on the server ``remote`` (``sc://host:port``). The master
    and the server's static properties are the server's; the configuration's
    ``[spark.conf]`` properties are set on the session where Spark allows it (runtime
    SQL properties), the others are logged and skipped. The sparklda package is added
    to the session's Python path on the server (``addArtifacts``) unless
    ``[spark] ship_package = false``."""
    from pyspark.sql import SparkSession

    spark_cfg = cfg.get("spark", {})
    if spark_cfg.get("master"):
        log.info(
            "[spark] master = %r ignored: the Connect server's master runs the job",
            spark_cfg["master"],
        )
    spark = SparkSession.builder.remote(remote).create()
    for key, value in flatten_spark_conf(spark_cfg.get("conf", {})).items():
        try:
            spark.conf.set(key, value)
        except Exception as e:
            log.warning(
                "%s = %s not applied on the Connect server: %s",
                key,
                value,
                str(e).splitlines()[0][:200],
            )
    if spark_cfg.get("ship_package", True):
        ship_package(spark)
    return spark


def build_session(
    cfg: dict, master: str | None = None, app_name: str = "sparklda", remote: str | None = None
):
    """The job's SparkSession for configuration ``cfg`` (its ``[spark]`` table), with the
    precedence described in this module's docstring. ``master`` is the job's ``--master``
    option (ignored under spark-submit). Ships the sparklda package to the executors
    when the master is not local (``[spark] ship_package = false`` turns that off).
    With ``remote`` (``sc://host:port``), a Spark Connect session
    (:func:`build_connect_session`)."""
    from pyspark import SparkContext
    from pyspark.sql import SparkSession

    if remote:
        return build_connect_session(cfg, remote, app_name)

    spark_cfg = cfg.get("spark", {})
    submitted = launched_by_spark_submit()
    if SparkContext._active_spark_context is not None:
        log.warning(
            "a SparkContext is already running (master %s); the configuration's "
            "[spark] settings are not applied",
            SparkContext._active_spark_context.master,
        )
        return SparkSession.builder.getOrCreate()
    script = os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else None
    if submitted:
        if master:
            log.warning("--master %s ignored: under spark-submit its --master decides", master)
        SparkContext._ensure_initialized()  # the gateway spark-submit started
        given = _jvm_properties()
        apply, lost = plan_properties(cfg, master, app_name, given, True, script)
        if spark_cfg.get("master"):
            log.info(
                "[spark] master = %r applies only to plain python; spark-submit's master is %s",
                spark_cfg["master"],
                given.get("spark.master"),
            )
    elif SparkContext._gateway is None:
        launch = plan_properties(cfg, master, app_name, None, False)[0]
        _launch_gateway(_startup_logging(launch, spark_cfg.get("log_level", "WARN")))
        given = _jvm_properties()
        apply, lost = plan_properties(cfg, master, app_name, given, False)
    else:  # the JVM of an earlier, stopped session of this process: the configuration wins
        given = _jvm_properties()
        apply, lost = plan_properties(cfg, master, app_name, None, False)
    for key, value in sorted(lost.items()):
        if key in DRIVER_JVM_PROPERTIES and key not in given:
            log.warning(
                "%s = %s from the configuration is not applied: the driver JVM is "
                "already running; pass it to spark-submit (e.g. --driver-memory)",
                key,
                value,
            )
        else:
            log.info(
                "%s = %s from %s wins over %s from the configuration",
                key,
                given[key],
                "spark-submit" if submitted else "PYSPARK_SUBMIT_ARGS",
                value,
            )
    builder = SparkSession.builder
    for key, value in apply.items():
        builder = builder.config(key, value)
    _worker_python({**given, **apply})
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel(spark_cfg.get("log_level", "WARN"))
    quiet_task_failures(spark, spark_cfg.get("log_level", "WARN"))
    if spark_cfg.get("ship_package", True):
        ship_package(spark)
    return spark


def session_facts(spark, properties: bool = True) -> dict:
    """What a job records about its session: ``master`` (classic) or ``remote`` (the Spark
    Connect URL; a Connect client cannot see the server's master), Spark's version and,
    with ``properties``, the effective properties and executors (classic; under Connect
    the session's runtime properties and no executor list, which needs the JVM)."""
    from ..execution import backend_for

    if backend_for(spark).has_rdds:
        facts = {"master": spark.sparkContext.master, "spark_version": spark.version}
        if properties:
            facts["properties"] = effective_properties(spark)
            facts["executors"] = executor_summary(spark)
        return facts
    facts = {"remote": _connect_url(spark), "spark_version": spark.version}
    if properties:
        facts["properties"] = _redact(_connect_properties(spark))
        facts["executors"] = None
    return facts


def _connect_url(spark) -> str:
    """``sc://host:port`` of a Connect session (its parameters, a token among them, left
    out)."""
    try:
        return f"sc://{spark.client._builder.url.netloc}"
    except Exception:  # pragma: no cover - a client without the attribute
        return "sc://"


def _connect_properties(spark) -> dict[str, str]:
    try:
        return {str(k): str(v) for k, v in spark.conf.getAll.items()}
    except Exception as e:
        log.info("the Connect session's properties could not be read: %s", e)
        return {}


def _redact(props: dict[str, str]) -> dict[str, str]:
    pattern = re.compile(props.get("spark.redaction.regex", REDACTION_REGEX))
    return {
        k: (REDACTED if pattern.search(k) or pattern.search(v) else v)
        for k, v in sorted(props.items())
    }


def effective_properties(spark) -> dict[str, str]:
    """The Spark properties the session really runs with (``sc.getConf()``), values of
    secret-looking keys or values (Spark's ``spark.redaction.regex``) redacted."""
    return _redact(dict(spark.sparkContext.getConf().getAll()))


def executor_summary(spark) -> list[dict]:
    """Every executor of the application so far (and the driver), with the number of tasks
    it ran, from Spark's status store (kept whether or not the UI is enabled)."""
    from py4j.protocol import Py4JError

    jsc = spark.sparkContext._jsc.sc()
    try:
        jsc.listenerBus().waitUntilEmpty()
    except Py4JError as e:  # an internal API: counts may then lag by the last few events
        log.debug("could not wait for Spark's listener bus: %s", e)
    executors = jsc.statusStore().executorList(False)
    out = []
    for i in range(executors.size()):
        e = executors.apply(i)
        out.append(
            {
                "id": e.id(),
                "host_port": e.hostPort(),
                "active": e.isActive(),
                "total_tasks": e.totalTasks(),
                "completed_tasks": e.completedTasks(),
                "failed_tasks": e.failedTasks(),
            }
        )
    return out


_ZIPPED: dict[str, str] = {}


def ship_package(spark) -> str | None:
    """On a cluster, send the sparklda package to the executors (``addPyFile`` of a zip of
    its Python files, as ``--py-files`` would); returns the zip's path. Nothing to do in
    local mode, or when sparklda was itself imported from a zip (``--py-files``). Under
    Spark Connect the zip is added to the session's artifacts (``addArtifacts(...,
    pyfile=True)``), which puts it on the server's Python path for this session."""
    from ..execution import backend_for

    connect = not backend_for(spark).has_rdds
    if not connect and spark.sparkContext.master.startswith("local"):
        return None
    import sparklda

    pkg = os.path.dirname(os.path.abspath(sparklda.__file__))
    if not os.path.isdir(pkg):
        log.info("sparklda is imported from %s; not shipping it again", pkg)
        return None
    path = _ZIPPED.get(pkg)
    if path is None or not os.path.exists(path):
        path = os.path.join(tempfile.mkdtemp(prefix="sparklda-"), "sparklda.zip")
        with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
            for root, dirs, names in os.walk(pkg):
                dirs[:] = sorted(d for d in dirs if d != "__pycache__")
                for name in sorted(names):
                    if name.endswith(".py"):
                        full = os.path.join(root, name)
                        z.write(full, os.path.relpath(full, os.path.dirname(pkg)))
        _ZIPPED[pkg] = path
    if connect:
        try:
            spark.addArtifacts(path, pyfile=True)
        except Exception as e:
            log.warning("could not add %s to the Connect session: %s", path, str(e)[:200])
            return None
    else:
        spark.sparkContext.addPyFile(path)
    log.info("shipped %s to the executors as %s", pkg, path)
    return path
