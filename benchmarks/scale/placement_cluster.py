"""Issue 33, point 6(a): V×K = 5×10^8 on a standalone cluster with a 2 GiB driver.

A master and two workers on 127.0.0.1 (the pyspark package's ``bin/spark-class``, one
core each), a corpus drawn by ``sparklda generate`` with V=1,000,000 (the vocabulary of
the Parquet vectors), and three drivers, each a fresh process with
``spark.driver.memory=2g`` and ``spark.sparklda.driver.pythonMemory=1g``:

- ``executors``: one pass of SCVB0 at K=500 with ``model_placement="executors"``; the
  driver's Python peak resident memory (``VmHWM``; also its JVM's, sampled) and the round
  records (``driver_bytes``, ``shipped_bytes``, ``merged_bytes``), plus the held-out
  score of the sharded model;
- ``driver``: the same fit with ``model_placement="driver"``: refused before the first
  round (the error is recorded with the seconds it took);
- ``mllib``: ``pyspark.ml.clustering.LDA`` (online, K=500, one iteration over a
  ``subsamplingRate`` of one minibatch) on the same Parquet vectors: what happens.

    PYTHONPATH=$PWD python benchmarks/scale/placement_cluster.py \
        --corpus /tmp/sparklda-pc-corpus --json docs/benchmarks/placement_cluster.json

The workers and their executors are stopped by their process groups at the end (also on
failure). Not a test: figures for docs/benchmarks/findings.md.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _spark_class() -> str:
    import pyspark

    return os.path.join(os.path.dirname(pyspark.__file__), "bin", "spark-class")


def _status(key: str) -> float:
    """A ``/proc/self/status`` figure in MiB."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(key):
                return int(line.split()[1]) / 1024
    raise KeyError(key)


def _load() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


@contextlib.contextmanager
def standalone(base: str, worker_memory: str):
    """A master and two one-core workers on 127.0.0.1; yields the master URL."""
    os.makedirs(base, exist_ok=True)
    port, ui = _free_port(), _free_port()
    env = dict(os.environ, SPARK_LOCAL_IP="127.0.0.1", SPARK_LOG_DIR=f"{base}/logs")
    env.pop("PYTHONPATH", None)  # the executors import sparklda from the driver's zip
    procs: list[subprocess.Popen] = []

    def start(name, args):
        log = open(f"{base}/{name}.log", "w")
        procs.append(
            subprocess.Popen(
                [_spark_class(), *args],
                env=env,
                cwd=base,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        )

    def workers_alive() -> int:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{ui}/json", timeout=5) as r:
                state = json.load(r)
        except OSError:
            return -1
        return sum(w.get("state") == "ALIVE" for w in state.get("workers", []))

    def wait(n, timeout=180):
        deadline = time.time() + timeout
        while time.time() < deadline:
            if workers_alive() >= n:
                return
            time.sleep(0.5)
        raise RuntimeError(f"the cluster did not come up; logs in {base}")

    try:
        master = "org.apache.spark.deploy.master.Master"
        start(
            "master", [master, "--host", "127.0.0.1", "--port", str(port), "--webui-port", str(ui)]
        )
        wait(0)
        for i in range(2):
            start(
                f"worker{i}",
                [
                    "org.apache.spark.deploy.worker.Worker",
                    "--host", "127.0.0.1", "--cores", "1", "--memory", worker_memory,
                    "--webui-port", str(_free_port()), "--work-dir", f"{base}/work{i}",
                    f"spark://127.0.0.1:{port}",
                ],
            )  # fmt: skip
        wait(2)
        print(f"cluster up: master spark://127.0.0.1:{port}, pids {[p.pid for p in procs]}")
        yield f"spark://127.0.0.1:{port}"
    finally:
        for p in procs:  # the process groups: the executors die with their workers
            with contextlib.suppress(ProcessLookupError):
                os.killpg(p.pid, signal.SIGTERM)
        for p in procs:
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait(timeout=30)


def _session(args, master: str):
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    from sparklda import SESSION_PROPERTIES

    spark = (
        SparkSession.builder.master(master)
        .appName(f"placement_cluster {args.child}")
        .config(map=SESSION_PROPERTIES)
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.memory", "2g")
        .config("spark.sparklda.driver.pythonMemory", "1g")
        .config("spark.executor.memory", args.executor_memory)
        .config("spark.memory.fraction", str(args.memory_fraction))
        .config("spark.default.parallelism", str(args.parallelism))
        .config("spark.sql.shuffle.partitions", str(args.parallelism))
        .config("spark.local.dir", args.local_dir)
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    from sparklda import ship_package

    # the executors import this checkout's sparklda from a zip, as the jobs ship it
    # (without it they would import whatever sparklda their Python finds installed)
    ship_package(spark)
    spark.sparkContext.setCheckpointDir(args.local_dir + "/checkpoints")
    spark.conf.set("spark.sparklda.driver.maxModelBytes", "1m")  # any V×K collect fails
    return spark


def child(args) -> dict:
    """One driver (a fresh process): its figures as a dict."""
    sys.path.insert(0, ROOT)
    from benchmarks.lda_bench.memory import PeakRSS

    out: dict = {"step": args.child, "load_before": _load()}
    t0 = time.perf_counter()
    spark = _session(args, args.master)
    out["session_s"] = round(time.perf_counter() - t0, 1)
    rss = PeakRSS().start()
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")
    out["python_rss_before_mib"] = round(_status("VmRSS:"))
    t0 = time.perf_counter()
    try:
        if args.child == "mllib":
            from pyspark.ml.clustering import LDA as MLlibLDA

            df = spark.read.parquet(args.corpus + "/corpus").select("features").cache()
            n = df.count()
            out["docs"] = n
            lda = MLlibLDA(
                k=args.k,
                maxIter=1,
                optimizer="online",
                subsamplingRate=min(1.0, args.minibatch / n),
                seed=0,
            )
            t1 = time.perf_counter()
            model = lda.fit(df)
            out["fit_s"] = round(time.perf_counter() - t1, 1)
            out["vocab_size"] = model.vocabSize()
        else:
            from sparklda.api import fit
            from sparklda.corpus import from_vectors
            from sparklda.params import TrainParams

            source = from_vectors(spark.read.parquet(args.corpus + "/corpus"), "features", "id")
            out["vocab_size"] = source.vocab_size
            params = TrainParams(
                k=args.k,
                passes=1,
                minibatch_size=args.minibatch,
                parts_per_slice=2,
                seed=0,
                model_placement=args.child,
                heldout_count=args.heldout,
            )
            result = fit(source, params)
            keys = ("round", "round_s", "shipped_bytes", "driver_bytes", "merged_bytes")
            out["rounds"] = [{k: r.get(k) for k in keys} for r in result.rounds]
            report = result.report
            out["train_s"] = report.get("train_seconds")
            out["corpus"] = {
                k: report.get("corpus", {}).get(k) for k in ("tokens", "docs", "cached_bytes")
            }
            out["heldout_loglik"] = result.evaluations[-1].get("heldout_loglik")
            out["model_sharded"] = bool(getattr(result.model, "sharded", False))
        out["outcome"] = "ok"
    except Exception as e:  # recorded: the refusal, MLlib's failure
        out["outcome"] = "error"
        out["error_type"] = type(e).__name__
        out["error"] = str(e)[:1500]
    out["seconds"] = round(time.perf_counter() - t0, 1)
    mem = rss.stop()
    out["python_peak_mib"] = round(_status("VmHWM:"))
    out["python_peak_sampled_mib"] = round((mem["driver_python_peak_rss_bytes"] or 0) / 2**20)
    out["jvm_peak_mib"] = round((mem["driver_jvm_peak_rss_bytes"] or 0) / 2**20)
    out["load_after"] = _load()
    try:
        spark.stop()
    except Exception as e:  # a JVM after an OutOfMemoryError
        out["stop_error"] = type(e).__name__
    return out


def generate(args) -> None:
    if os.path.exists(args.corpus + "/corpus"):
        print(f"reusing {args.corpus}")
        return
    cmd = [
        sys.executable, "-m", "sparklda", "generate", args.corpus,
        "--docs", str(args.docs), "--vocab", str(args.vocab), "--topics", str(args.true_topics),
        "--mean-length", str(args.mean_length), "--seed", "0", "--partitions", "4",
    ]  # fmt: skip
    print(" ".join(cmd), flush=True)
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, env=dict(os.environ, PYTHONPATH=ROOT))
    print(f"generated in {time.perf_counter() - t0:.0f} s", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--corpus", default="/tmp/sparklda-pc-corpus")
    ap.add_argument("--docs", type=int, default=10000)
    ap.add_argument("--vocab", type=int, default=1_000_000)
    ap.add_argument("--true-topics", type=int, default=20)
    ap.add_argument("--mean-length", type=int, default=100)
    ap.add_argument("--k", type=int, default=500)
    ap.add_argument("--minibatch", type=int, default=5000)
    ap.add_argument("--heldout", type=int, default=100)
    ap.add_argument("--steps", default="executors,driver,mllib")
    ap.add_argument("--worker-memory", default="5g")
    ap.add_argument("--executor-memory", default="4g")
    ap.add_argument(
        "--memory-fraction",
        type=float,
        default=0.3,
        help="spark.memory.fraction: the executors' storage spills the shards to disk "
        "before their heap fills (Spark's 0.6 ran out of heap at 3g)",
    )
    ap.add_argument("--parallelism", type=int, default=64, help="model shards and tasks")
    ap.add_argument("--local-dir", default="/tmp/sparklda-pc-local")
    ap.add_argument("--json", default=None)
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--master", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print("RESULT " + json.dumps(child(args)), flush=True)
        return
    os.makedirs(args.local_dir, exist_ok=True)
    generate(args)
    results = {
        "machine": f"{os.cpu_count()} cores, "
        f"{os.sysconf('SC_PAGE_SIZE') * os.sysconf('SC_PHYS_PAGES') / 2**30:.1f} GiB",
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "settings": {k: v for k, v in vars(args).items() if k not in ("child", "master")},
        "steps": [],
    }
    with standalone(args.local_dir + "/cluster", args.worker_memory) as master:
        for step in args.steps.split(","):
            cmd = [sys.executable, os.path.abspath(__file__), "--child", step, "--master", master]
            for key in (
                "corpus",
                "k",
                "minibatch",
                "heldout",
                "executor_memory",
                "memory_fraction",
            ):
                cmd += [f"--{key.replace('_', '-')}", str(getattr(args, key))]
            cmd += ["--parallelism", str(args.parallelism), "--local-dir", args.local_dir]
            print(f"--- {step} (load {_load()})", flush=True)
            with open(f"{args.local_dir}/{step}.stderr", "w") as err:
                proc = subprocess.run(
                    cmd, env=dict(os.environ, PYTHONPATH=ROOT), stdout=subprocess.PIPE,
                    stderr=err, text=True,
                )  # fmt: skip
            lines = [x for x in proc.stdout.splitlines() if x.startswith("RESULT ")]
            if lines:
                res = json.loads(lines[-1][len("RESULT ") :])
            else:
                res = {"step": step, "outcome": "crashed", "rc": proc.returncode}
                with open(f"{args.local_dir}/{step}.stderr") as err:
                    res["stderr"] = err.read()[-3000:]
            print(json.dumps(res, indent=1), flush=True)
            results["steps"].append(res)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
            f.write("\n")


if __name__ == "__main__":
    main()
