"""The test run's JVM options: C1-only compilation and a class-data sharing archive.

Every JVM the tests start (this run's Spark drivers, the jobs the tests run in their own
processes, the Spark Connect servers, the test cluster's daemons) lives a few seconds to
a few minutes, and the suite is CPU-bound on two cores:

- ``-XX:TieredStopAtLevel=1``: C1-only JIT compilation costs a small training job about
  30% less CPU than the default tiered compilation (22 against 30 CPU-seconds).
- ``-XX:SharedArchiveFile``: a dynamic class-data sharing archive of the classes a
  Spark driver loads (Java 13+). Starting a local session and running one job took 7.8
  CPU-seconds without it and 4.8 with it (about 7.2 and 4.5 s of wall time).

The archive is made once per machine, Java and pyspark (the file name carries a key of
all three), by one ``spark-submit`` of :data:`WORKLOAD` with ``-XX:ArchiveClassesAtExit``,
in the background while the tests start; it is renamed into place only once that JVM has
exited, so a JVM either finds a whole archive or none. A JVM given an archive that does
not exist, or that its Java does not accept, starts without one and says nothing.

Test-only: the library and its jobs leave the JVM's defaults.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import threading

C1_ONLY = "-XX:TieredStopAtLevel=1"

#: what the archive's JVM runs: a session as the tests make it, an RDD job with a
#: broadcast, and DataFrame jobs (Parquet, Arrow, a shuffle)
WORKLOAD = r"""
import sys
from pyspark.sql import SparkSession
spark = (SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
         .config("spark.sql.shuffle.partitions", "2").getOrCreate())
sc = spark.sparkContext
bc = sc.broadcast(list(range(10)))
pairs = sc.parallelize(range(100), 2).map(lambda x: (x % 3, x + bc.value[1]))
pairs.reduceByKey(lambda a, b: a + b).collect()
df = spark.createDataFrame([(i, [float(i)]) for i in range(100)], "id long, v array<double>")
df.write.mode("overwrite").parquet(sys.argv[1])
back = spark.read.parquet(sys.argv[1])
back.mapInArrow(lambda batches: batches, back.schema).groupBy("id").count().collect()
spark.stop()
"""


def _key() -> str | None:
    """A key of this machine's Java and pyspark (None: no usable java)."""
    import pyspark

    from sparklda._java import java_executable

    java = java_executable()
    if not java or not os.path.exists(java):
        return None
    try:
        version = subprocess.run(
            [java, "-version"], capture_output=True, text=True, timeout=60
        ).stderr
    except (OSError, subprocess.TimeoutExpired):
        return None
    jars = os.path.join(os.path.dirname(pyspark.__file__), "jars")
    listing = sorted(os.listdir(jars)) if os.path.isdir(jars) else []
    text = "\n".join([os.path.realpath(java), version, pyspark.__version__, *listing])
    return hashlib.sha256(text.encode()).hexdigest()[:16]


ARCHIVE_ENV = "SPARKLDA_TEST_CDS_ARCHIVE"


def archive_path() -> str | None:
    """Where this machine's archive is (or will be); the controller's answer is passed
    to the pytest-xdist workers in :data:`ARCHIVE_ENV`."""
    if ARCHIVE_ENV in os.environ:
        return os.environ[ARCHIVE_ENV] or None
    key = _key()
    path = os.path.join(tempfile.gettempdir(), f"sparklda-tests-{key}.jsa") if key else ""
    os.environ[ARCHIVE_ENV] = path
    return path or None


def jvm_options(archive: str | None) -> str:
    return f"{C1_ONLY} -XX:SharedArchiveFile={archive}" if archive else C1_ONLY


#: the making of an archive works in a directory of this prefix (removed when done)
WORK_PREFIX = "sparklda-cds-"


def _remove_stale_work(age_s: float = 3600.0) -> None:
    """Remove what makings killed with their test run left (a partial archive is about
    190 MB): work directories older than ``age_s``."""
    import time

    base = tempfile.gettempdir()
    for name in os.listdir(base):
        path = os.path.join(base, name)
        try:
            if name.startswith(WORK_PREFIX) and time.time() - os.path.getmtime(path) > age_s:
                shutil.rmtree(path, ignore_errors=True)
        except OSError:
            pass


def start_archive(archive: str) -> threading.Thread | None:
    """Make ``archive`` in the background unless it exists; returns the thread that
    renames it into place once its JVM has exited (None: nothing to do)."""
    if os.path.exists(archive):
        return None
    import pyspark

    _remove_stale_work()
    try:
        work = tempfile.mkdtemp(prefix=WORK_PREFIX)
    except OSError:  # no writable temporary directory: the JVMs run without an archive
        return None
    partial = os.path.join(work, "archive.jsa")
    script = os.path.join(work, "workload.py")
    with open(script, "w") as f:
        f.write(WORKLOAD)
    env = dict(os.environ)
    env["SPARK_SUBMIT_OPTS"] = f"{C1_ONLY} -XX:ArchiveClassesAtExit={partial}"
    env["PYSPARK_PYTHON"] = sys.executable
    env.pop("PYTHONPATH", None)
    submit = os.path.join(os.path.dirname(pyspark.__file__), "bin", "spark-submit")
    # spark-submit's process is the JVM itself: when it has exited, the archive is written
    proc = subprocess.Popen(
        [submit, "--conf", "spark.ui.showConsoleProgress=false", script, os.path.join(work, "pq")],
        env=env,
        cwd=work,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )

    def finish():
        try:
            if proc.wait(timeout=600) == 0 and os.path.exists(partial):
                os.replace(partial, archive)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        finally:
            shutil.rmtree(work, ignore_errors=True)

    thread = threading.Thread(target=finish, name="sparklda-cds-archive", daemon=True)
    thread.start()
    return thread
