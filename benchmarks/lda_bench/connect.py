"""Spark Connect against the classic session: the same SCVB0 fit three ways.

On one corpus (by default 20 Newsgroups, K=100, the default minibatch):

* ``classic``: the input read with :func:`sparklda.corpus.read_uci` in the
  benchmark's classic session, ``execution="classic"`` (RDDs, broadcasts);
* ``dataframe``: the same input in the same session, ``execution="dataframe"``
  (the DataFrame-only path, in a classic session);
* ``connect``: the same files read by a real Spark Connect session
  (``read_uci(spark=connect_session, ...)``: the server reads them by path,
  nothing of the driver's is special) on a Spark Connect server this stage
  starts itself (:func:`connect_server`) and stops by its pid at the end,
  also on failure.

Each fit holds out the same documents (``heldout_count`` and ``seed``) and is
scored on them every few rounds; the figures are the median round time (the
first round left out) and the time from the start of ``fit`` to the quality
of MLlib's ``reference_passes``-pass fit on the same corpus and held-out
documents (taken from the quality stage when it ran on this corpus, else
fitted here). See docs/architecture.md, "Spark Connect path".
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import signal
import socket
import subprocess
import sys
import time

import numpy as np

from sparklda import SESSION_PROPERTIES
from sparklda.api import fit
from sparklda.corpus import read_uci
from sparklda.params import TrainParams, default_minibatch_size

from . import systems
from .data import prepare
from .suite import HeldoutMismatch

log = logging.getLogger("benchmarks")

#: pyspark sets this process-wide when a Connect session is created; classic
#: pyspark.ml (MLlib) breaks while it is set, so it is set around the Connect
#: measurements only.
CONNECT_MODE = "SPARK_CONNECT_MODE_ENABLED"

#: The three ways the stage runs the same fit.
PATHS = ("classic", "dataframe", "connect")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def connect_server(base: str, cores: int = 2, driver_memory: str = "4g", timeout: float = 300):
    """A Spark Connect server for the duration of the block; yields its ``sc://`` URL.

    Started as the pyspark package's own ``bin/spark-submit --class
    org.apache.spark.sql.connect.service.SparkConnectServer spark-internal``
    (``local[cores]``), bound to 127.0.0.1 on a free port, with this Python as
    its workers' Python and this checkout on their ``PYTHONPATH``; its log goes
    to ``base/connect-server.log``. Stopped by the pid of the process group it
    was started in when the block ends, also on failure.
    """
    from pyspark.find_spark_home import _find_spark_home

    # under spark-submit, pyspark itself is imported from a zip: SPARK_HOME says where
    # bin/spark-submit is
    spark_home = _find_spark_home()
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    os.makedirs(base, exist_ok=True)
    log_path = os.path.join(base, "connect-server.log")
    port = free_port()
    env = dict(os.environ)
    env.pop(CONNECT_MODE, None)
    env.update(
        PYSPARK_PYTHON=sys.executable,
        PYTHONPATH=os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p),
        SPARK_HOME=spark_home,
        SPARK_LOCAL_IP="127.0.0.1",
    )
    cmd = [
        os.path.join(spark_home, "bin", "spark-submit"),
        "--master",
        f"local[{cores}]",
        "--driver-memory",
        driver_memory,
        "--conf",
        "spark.ui.enabled=false",
        "--conf",
        "spark.ui.showConsoleProgress=false",
        # as the classic session (cli.build_session) and the jobs
        *(a for k, v in SESSION_PROPERTIES.items() for a in ("--conf", f"{k}={v}")),
        "--conf",
        "spark.sql.shuffle.partitions=4",
        "--conf",
        f"spark.default.parallelism={cores}",
        "--conf",
        "spark.python.worker.reuse=true",
        "--conf",
        "spark.connect.grpc.binding.address=127.0.0.1",
        "--conf",
        f"spark.connect.grpc.binding.port={port}",
        "--class",
        "org.apache.spark.sql.connect.service.SparkConnectServer",
        "spark-internal",
    ]
    with open(log_path, "w") as out:
        proc = subprocess.Popen(
            cmd,
            env=env,
            cwd=base,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
    try:
        deadline = time.time() + timeout
        while True:
            with open(log_path) as f:
                text = f.read()
            if "Spark Connect server started" in text:
                break
            if proc.poll() is not None:
                raise RuntimeError(
                    f"the Spark Connect server exited ({proc.returncode}); its log "
                    f"{log_path} ends:\n{text[-4000:]}"
                )
            if time.time() > deadline:
                raise RuntimeError(
                    f"the Spark Connect server did not start within {timeout:.0f} s; its log "
                    f"{log_path} ends:\n{text[-4000:]}"
                )
            time.sleep(0.5)
        yield f"sc://127.0.0.1:{port}"
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)


@contextlib.contextmanager
def connect_mode(on: bool):
    """pyspark's process-wide "this is Spark Connect" switch, set (or cleared) for the
    block. Switched on, the block also runs without ``MASTER``: spark-submit sets it for
    the classic session, and pyspark's builder refuses a remote session beside it."""
    had = os.environ.get(CONNECT_MODE)
    master = os.environ.pop("MASTER", None) if on else None
    if on:
        os.environ[CONNECT_MODE] = "1"
    else:
        os.environ.pop(CONNECT_MODE, None)
    try:
        yield
    finally:
        if had is None:
            os.environ.pop(CONNECT_MODE, None)
        else:
            os.environ[CONNECT_MODE] = had
        if master is not None:
            os.environ["MASTER"] = master


def uci_paths(folder: str) -> tuple[str, str | None]:
    docword = os.path.join(folder, "docword.txt.gz")
    if not os.path.exists(docword):
        docword = os.path.join(folder, "docword.txt")
    vocab = os.path.join(folder, "vocab.txt")
    return os.path.abspath(docword), (os.path.abspath(vocab) if os.path.exists(vocab) else None)


def mllib_reference(spark, spec, opts, results: dict, variant: str, passes: float) -> dict:
    """MLlib's ``passes``-pass point on ``spec``: the quality stage's when it ran there at
    the same K, else one MLlib fit here on the benchmark's training documents."""
    for p in results.get("points", []):
        if (
            p["corpus"] == spec.name
            and p["system"] == variant
            and p.get("k") == spec.k
            and abs(p["passes"] - passes) < 1e-6
        ):
            return {**p, "source": "quality stage"}
    bc = prepare(spark, spec.name, spec.path, spec.heldout_count, seed=opts.seed)
    try:
        out = systems.run_mllib(bc, variant, spec.k, [passes], opts.alpha, opts.seed)
    finally:
        bc.unpersist()
    return {**out["points"][-1], "source": "fitted by this stage"}


def _params(spec, opts, execution: str, passes: int, rounds_per_pass: int | None) -> TrainParams:
    values = {
        "algorithm": "scvb0",
        "k": spec.k,
        "alpha": opts.alpha,
        **opts.params,
        "passes": passes,
        "seed": opts.seed,
        "heldout_count": spec.heldout_count,
        "heldout_fraction": 0.0,
        "execution": execution,
    }
    if not values.get("minibatch_size"):  # the library's default rule, made explicit
        values["minibatch_size"] = default_minibatch_size(
            values.get("parts_per_slice") or opts.default_parallelism
        )
    params = TrainParams(**values)
    if rounds_per_pass:
        params.eval_every = systems.eval_interval(rounds_per_pass)
    return params


def _summary(path: str, result, reference: dict) -> dict:
    rounds = result.rounds
    steady = rounds[1:] if len(rounds) > 1 else rounds
    hits = [e for e in result.evaluations if e["heldout_loglik"] >= reference["heldout_loglik"]]
    hit = hits[0] if hits else None
    return {
        "path": path,
        "rounds": len(rounds),
        "rounds_per_pass": result.report["corpus"]["slices"],
        "median_round_s": float(np.median([r["round_s"] for r in steady])),
        "first_round_s": float(rounds[0]["round_s"]),
        "median_job_s": float(np.median([r.get("job_s") or 0.0 for r in steady])),
        "median_kernel_s": float(np.median([r.get("task_kernel_max_s") or 0.0 for r in steady])),
        "build_s": result.report["corpus_build_seconds"],
        "train_s": result.report["train_seconds"],
        "heldout_documents": result.report["corpus"].get("heldout_documents"),
        "final_heldout_loglik": result.evaluations[-1]["heldout_loglik"]
        if result.evaluations
        else None,
        "time_to_reference_s": hit["elapsed_s"] if hit else None,
        "passes_to_reference": hit["passes"] if hit else None,
        "evaluations": [
            {k: e[k] for k in ("round", "passes", "elapsed_s", "heldout_loglik")}
            for e in result.evaluations
        ],
    }


def _warm_up(session, docword: str, vocab: str | None, params: TrainParams) -> float:
    """An untimed one-pass fit of ``params`` in ``session`` before the timed one, so that
    each path is measured warm: a fresh Connect server's JVM interprets its plan handling
    and Arrow streaming until the JIT compiles them (a fresh server's first pass of
    rounds took 0.50 s a round against 0.31-0.37 s for the next ones), while the classic
    session has run the stage's earlier fits. The seconds it took."""
    t0 = time.perf_counter()
    params.eval_every = 0
    fit(read_uci(session, docword, vocab), params)
    return time.perf_counter() - t0


def run_connect(spark, spec, opts, results: dict, work_dir: str):
    """The Connect stage (see the module docstring); sets ``results["connect"]``."""
    variant = opts.connect_reference
    reference = mllib_reference(spark, spec, opts, results, variant, opts.connect_ref_passes)
    log.info(
        "connect stage: %s %g-pass reference %.4f (%s)",
        variant,
        opts.connect_ref_passes,
        reference["heldout_loglik"],
        reference["source"],
    )
    docword, vocab = uci_paths(spec.path)
    # evaluations every few rounds, the same for the three paths (on pass boundaries
    # when the header's document count is the training count's rounding)
    mb = _params(spec, opts, "classic", 1, None).minibatch_size
    rpp = math.ceil(max(1, uci_documents_in_header(docword) - spec.heldout_count) / mb)
    rows = []
    for execution in ("classic", "dataframe"):
        with connect_mode(False):
            warmup_s = _warm_up(spark, docword, vocab, _params(spec, opts, execution, 1, None))
            source = read_uci(spark, docword, vocab)
            result = fit(source, _params(spec, opts, execution, opts.connect_passes, rpp))
        rows.append({**_summary(execution, result, reference), "warmup_s": warmup_s})
        log.info("connect stage, %s: %s", execution, {k: rows[-1][k] for k in list(rows[-1])[:12]})
    from pyspark.sql import SparkSession

    server = {"master": "local[2]", "url": None}
    with connect_server(os.path.join(work_dir, "connect-server"), driver_memory="4g") as url:
        server["url"] = url
        with connect_mode(True):
            session = (
                SparkSession.Builder().remote(url).create()
            )  # not the shared builder: the classic session set its master there
        try:
            with connect_mode(True):
                warmup_s = _warm_up(session, docword, vocab, _params(spec, opts, "auto", 1, None))
                source = read_uci(session, docword, vocab)
                result = fit(source, _params(spec, opts, "auto", opts.connect_passes, rpp))
            rows.append({**_summary("connect", result, reference), "warmup_s": warmup_s})
            log.info("connect stage, connect: %s", {k: rows[-1][k] for k in list(rows[-1])[:12]})
        finally:
            with connect_mode(True):
                session.stop()
    held = {r["path"]: r["heldout_documents"] for r in rows}
    if set(held.values()) != {spec.heldout_count}:
        raise HeldoutMismatch(
            f"connect stage on {spec.name}: the fits held out {held} documents; "
            f"every path must hold out the run's {spec.heldout_count}"
        )
    results["connect"] = {
        "corpus": spec.name,
        "k": spec.k,
        "minibatch_size": mb,
        "passes": opts.connect_passes,
        "reference": {
            "system": variant,
            "passes": reference["passes"],
            "elapsed_s": reference["elapsed_s"],
            "heldout_loglik": reference["heldout_loglik"],
            "source": reference["source"],
        },
        "server": server,
        "paths": rows,
    }
    return results["connect"]


def uci_documents_in_header(docword: str) -> int:
    """D, the first header line of a UCI docword file."""
    import gzip

    opener = gzip.open if docword.endswith(".gz") else open
    with opener(docword, "rt") as f:
        return int(f.readline())
