"""A real Spark standalone cluster on 127.0.0.1: a master and two workers (1 core, 1 GiB
each) started with the pyspark package's own bin/spark-class.

(a) The training job under ``spark-submit --master spark://...``: spark-submit's master
and executor memory win over the configuration, both executors run tasks, the package
reaches the executors by ``ship_package`` (the workers have no PYTHONPATH).
(b) The library from a driver connected to the master (a subprocess: this test session's
own SparkContext is local[2]): the same topics as this session's local[2] with the same
seed and partitioning, tasks on both executors (the driver's REST API), and the executors import
sparklda from the shipped zip.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import urllib.request

import numpy as np
import pytest

from sparklda.model import TopicModel
from tests.conftest import DAEMON_OPT, JVM_OPTS
from tests.helpers import (
    ROOT,
    TRAIN_JOB,
    free_port,
    job_env,
    run,
    spark_bin,
    spark_home,
)

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

CONFIG = os.path.join(ROOT, "sparklda", "conf", "local.toml")
#: the run of every part: K=10, one pass (two rounds of two tasks)
SETTINGS = [
    "training.k=10",
    "training.passes=1",
    "training.parts_per_slice=2",
    "training.seed=3",
    "evaluation.heldout_count=100",
    "evaluation.eval_every=0",
]


def _master_state(ui_port: int) -> dict:
    with urllib.request.urlopen(f"http://127.0.0.1:{ui_port}/json", timeout=5) as r:
        return json.load(r)


def _tail(path, n=3000) -> str:
    try:
        with open(path, errors="replace") as f:
            return f.read()[-n:]
    except OSError:
        return ""


def _driver_opts() -> str:
    """The drivers' JVM options: the test run's, with PySpark's own worker daemon (the
    executors must import sparklda from the zip the driver ships, not have it loaded by
    sparklda.daemon from this machine's installation)."""
    return os.environ.get("SPARK_SUBMIT_OPTS", "").replace(DAEMON_OPT, "").strip()


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    base = tmp_path_factory.mktemp("cluster")
    port, ui_port = free_port(), free_port()
    # no PYTHONPATH: the executors get sparklda only from the driver (ship_package)
    env = job_env(
        PYTHONPATH=None,
        SPARK_HOME=spark_home(),
        SPARK_LOCAL_IP="127.0.0.1",
        SPARK_LOG_DIR=str(base / "logs"),
        SPARK_WORKER_DIR=str(base / "work"),
        # the master's and workers' JVMs: the test run's options (tests/jvm_share.py)
        SPARK_DAEMON_JAVA_OPTS=" ".join(
            filter(None, (os.environ.get("SPARK_DAEMON_JAVA_OPTS"), JVM_OPTS))
        ),
    )
    procs: list[subprocess.Popen] = []
    logs = []
    files = contextlib.ExitStack()

    def start(name, args):
        log = files.enter_context(open(base / f"{name}.log", "w"))
        logs.append((name, base / f"{name}.log"))
        procs.append(
            subprocess.Popen(
                [spark_bin("spark-class"), *args],
                env=env,
                cwd=base,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        )

    def wait_for_workers(n, timeout=180):
        deadline = time.time() + timeout
        state = {}
        while time.time() < deadline:
            for p in procs:
                if p.poll() is not None:
                    break
            else:
                try:
                    state = _master_state(ui_port)
                    alive = [w for w in state.get("workers", []) if w.get("state") == "ALIVE"]
                    if len(alive) >= n:
                        return state
                except OSError:
                    pass
                time.sleep(0.25)
                continue
            break
        raise RuntimeError(
            f"the cluster did not come up: {state}\n"
            + "\n".join(f"--- {name}\n{_tail(path)}" for name, path in logs)
        )

    try:
        start(
            "master",
            [
                "org.apache.spark.deploy.master.Master",
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
                "--webui-port",
                str(ui_port),
            ],
        )
        # workers started before the master listens fail their first registration and
        # retry only after Spark's initial back-off (5-15 s): wait for the master first
        wait_for_workers(0)
        for i in range(2):
            start(
                f"worker{i}",
                [
                    "org.apache.spark.deploy.worker.Worker",
                    "--host",
                    "127.0.0.1",
                    "--cores",
                    "1",
                    "--memory",
                    "1g",
                    "--webui-port",
                    str(free_port()),
                    "--work-dir",
                    str(base / f"work{i}"),
                    f"spark://127.0.0.1:{port}",
                ],
            )
        state = wait_for_workers(2)
        yield {
            "url": f"spark://127.0.0.1:{port}",
            "ui_port": ui_port,
            "dir": base,
            "workers": state["workers"],
        }
    finally:
        for p in procs:  # the process groups: the workers' executors die with them
            try:
                os.killpg(p.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        for p in procs:
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait(timeout=30)
        files.close()


def _executors_with_tasks(executors) -> set[str]:
    return {e["id"] for e in executors if e["id"] != "driver" and e["completed_tasks"] > 0}


DRIVER = r"""
import json, sys, urllib.request
import numpy as np
from pyspark.sql import SparkSession
from sparklda.api import fit
from sparklda.cli.config import load_config, train_params
from sparklda.cli.session import ship_package
from sparklda.corpus import read_uci
from sparklda.io import resolve_sample

master, config, out = sys.argv[1], sys.argv[2], sys.argv[3]
spark = (SparkSession.builder.master(master).appName("sparklda-cluster-test")
         .config("spark.executor.memory", "512m").config("spark.default.parallelism", "2")
         .config("spark.executor.extraJavaOptions", sys.argv[5])
         .config("spark.ui.enabled", "true").config("spark.ui.port", sys.argv[4])
         .config("spark.ui.showConsoleProgress", "false")
         .config("spark.task.maxDirectResultSize", "64m").getOrCreate())
sc = spark.sparkContext
shipped = ship_package(spark)
files = sc.parallelize(range(8), 8).mapPartitions(
    lambda _: [__import__("sparklda").__file__]).collect()
params = train_params(load_config(config, sys.argv[6:]))
source = read_uci(spark, resolve_sample("sample:kos/docword.txt.gz"),
                  resolve_sample("sample:kos/vocab.txt"))
result = fit(source, params)
np.save(out + ".npy", result.model.topic_word)
# the same fit with the blocks laid out by the executors (a shuffle) instead of the driver
import sparklda.corpus.layout
sparklda.corpus.layout.LOCAL_LAYOUT_MAX_PAIRS = 0
shuffled = fit(read_uci(spark, resolve_sample("sample:kos/docword.txt.gz"),
                        resolve_sample("sample:kos/vocab.txt")), params)
np.save(out + "-shuffled.npy", shuffled.model.topic_word)
# the model on the executors, sharded by term (model_placement = "executors")
import dataclasses
sharded = fit(read_uci(spark, resolve_sample("sample:kos/docword.txt.gz"),
                       resolve_sample("sample:kos/vocab.txt")),
              dataclasses.replace(params, model_placement="executors"))
np.save(out + "-sharded.npy", sharded.model.topic_word)
layouts = [r.report["corpus"]["laid_out_on"] for r in (result, shuffled)]
url = f"{sc.uiWebUrl}/api/v1/applications/{sc.applicationId}/executors"
with urllib.request.urlopen(url, timeout=30) as r:
    executors = json.load(r)
with open(out + ".json", "w") as f:
    json.dump({"master": sc.master, "shipped": shipped, "files": files, "url": url,
               "layouts": layouts,
               "executors": [{"id": e["id"], "hostPort": e["hostPort"],
                              "completedTasks": e["completedTasks"]} for e in executors]}, f)
spark.stop()
"""


def _drive(tmp_path, master: str, name: str) -> tuple[np.ndarray, dict]:
    """Fit with the library in a driver process of its own connected to ``master``."""
    script = tmp_path / "driver.py"
    script.write_text(DRIVER)
    out = run(
        [
            sys.executable,
            script,
            master,
            CONFIG,
            tmp_path / name,
            free_port(),
            JVM_OPTS,  # the executors' JVMs: the test run's options (tests/jvm_share.py)
            *SETTINGS,
        ],
        timeout=900,
        env=job_env(
            SPARK_LOCAL_IP="127.0.0.1",
            PYSPARK_PYTHON=sys.executable,
            SPARK_SUBMIT_OPTS=_driver_opts(),
        ),
        cwd=tmp_path,
    )
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-5000:]
    with open(tmp_path / f"{name}.json") as f:
        info = json.load(f)
    info["shuffled"] = np.load(tmp_path / f"{name}-shuffled.npy")
    info["sharded"] = np.load(tmp_path / f"{name}-sharded.npy")
    return np.load(tmp_path / f"{name}.npy"), info


@pytest.fixture(scope="module")
def local_model(spark):
    """The reference: the same fit in this test session's local[2] (what ``DRIVER`` does,
    in this process)."""
    from sparklda.api import fit
    from sparklda.cli.config import load_config, train_params
    from sparklda.cli.session import ship_package
    from sparklda.corpus import read_uci
    from sparklda.io import resolve_sample

    assert ship_package(spark) is None  # nothing to ship in local mode
    params = train_params(load_config(CONFIG, SETTINGS))
    source = read_uci(
        spark, resolve_sample("sample:kos/docword.txt.gz"), resolve_sample("sample:kos/vocab.txt")
    )
    return fit(source, params).model.topic_word


def test_spark_submit_job_runs_on_the_cluster_with_spark_submits_settings(
    cluster, local_model, tmp_path
):
    model_path = tmp_path / "model"
    cmd = [
        spark_bin("spark-submit"),
        "--master",
        cluster["url"],
        "--executor-memory",
        "512m",
        "--conf",
        f"spark.pyspark.python={sys.executable}",
        "--conf",
        "spark.default.parallelism=2",
        "--conf",  # the executors' JVMs: the test run's options (tests/jvm_share.py)
        f"spark.executor.extraJavaOptions={JVM_OPTS}",
        TRAIN_JOB,
        "--config",
        CONFIG,
        *[a for s in SETTINGS for a in ("--set", s)],
        "--set",
        f"output.model={model_path}",
    ]
    out = run(
        cmd,
        timeout=900,
        env=job_env(
            SPARK_LOCAL_IP="127.0.0.1", PYSPARK_PYTHON=None, SPARK_SUBMIT_OPTS=_driver_opts()
        ),
        cwd=tmp_path,
    )
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-5000:]
    print(" ".join(map(str, cmd)))
    metrics = json.loads((tmp_path / "metrics.json").read_text())
    spark = metrics["spark"]
    # the precedence bug made this the configuration's local[2]
    assert spark["master"] == cluster["url"]
    assert spark["properties"]["spark.master"] == cluster["url"]
    assert spark["properties"]["spark.executor.memory"] == "512m"
    assert spark["properties"]["spark.sql.shuffle.partitions"] == "4"  # from the config
    assert "spark.driver.memory = 4g from the configuration is not applied" in out.stdout
    assert "shipped " in out.stdout and "sparklda.zip" in out.stdout
    ran = _executors_with_tasks(spark["executors"])
    print("executors:", json.dumps(spark["executors"]))
    assert len(ran) == 2, spark["executors"]
    assert f"on {cluster['url']}" in out.stdout
    model = TopicModel.load(str(model_path))
    assert model.k == 10 and model.metadata["passes"] == 1.0
    # the same model as the library's in local[2] with the same seed and partitioning
    np.testing.assert_allclose(model.topic_word, local_model, rtol=1e-5)


def test_library_on_the_cluster_equals_local_mode(cluster, local_model, tmp_path):
    on_cluster, info = _drive(tmp_path, cluster["url"], "cluster")
    print("driver REST API", info["url"], json.dumps(info["executors"]))
    assert info["master"] == cluster["url"]
    ran = {e["id"] for e in info["executors"] if e["id"] != "driver" and e["completedTasks"] > 0}
    assert len(ran) == 2, info["executors"]
    # ship_package: the executors import sparklda from the zip the driver sent
    assert info["shipped"].endswith("sparklda.zip")
    assert all("sparklda.zip" in f for f in info["files"]), info["files"]
    assert on_cluster.shape == local_model.shape == (6906, 10)
    np.testing.assert_allclose(on_cluster, local_model, rtol=1e-5)
    # the sample is laid out on the driver, its blocks sent to the executors; laid out by
    # the executors (the shuffle of large corpora) the blocks, and the model, are the same
    assert info["layouts"] == ["driver", "executors"]
    np.testing.assert_array_equal(info["shuffled"], on_cluster)
    # with the model on the executors (sharded by term, each task served its block's
    # rows), the same model
    np.testing.assert_allclose(info["sharded"], on_cluster, rtol=1e-9)
