"""Helpers shared by the tests: paths of the shipped and shared corpora, a planted
corpus and its recovery check, a callback that records rounds, and the job tests' configurations
and subprocesses."""

from __future__ import annotations

import gzip
import json
import os
import socket
import subprocess
import uuid
from contextlib import contextmanager

import numpy as np
import pandas as pd

from sparklda.cli.session import DEFAULT_PROPERTIES
from sparklda.training import Callback

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHARED_DATA = os.environ.get("SPARKLDA_SHARED_DATA", os.path.join(ROOT, "..", "shared", "data"))
KOS_DOCWORD = os.path.join(ROOT, "sparklda", "data", "kos", "docword.txt.gz")
KOS_VOCAB = os.path.join(ROOT, "sparklda", "data", "kos", "vocab.txt")

TRAIN_JOB = os.path.join(ROOT, "jobs", "train_lda.py")
INFER_JOB = os.path.join(ROOT, "jobs", "infer_topics.py")


class Crash(Exception):
    """What :class:`CrashAt` raises."""


class CrashAt(Callback):
    """Raises :class:`Crash` (a stand-in for a dying driver) after round ``n``'s record,
    before its checkpoint is written."""

    def __init__(self, n):
        self.n = n

    def on_round(self, record):
        if record["round"] == self.n:
            raise Crash(f"killed after round {self.n}")


class Recorder(Callback):
    """Keeps every round record (``rounds``) and evaluation record (``evaluations``)."""

    def __init__(self):
        self.rounds: list = []
        self.evaluations: list = []
        self.corpus = None

    def on_corpus(self, corpus):
        self.corpus = corpus

    def on_round(self, record):
        self.rounds.append(record)

    def on_evaluation(self, record):
        self.evaluations.append(record)


def planted_docs(n_topics=4, words_per_topic=6, n_docs=160, doc_len=40, n_empty=3, seed=0):
    """A planted corpus: topic t owns words [t*w, (t+1)*w); each document draws
    its tokens from one or two topics. Returns (docs, vocab_size) with docs a
    list of (doc_id, term_ids, counts) including ``n_empty`` empty documents."""
    rng = np.random.default_rng(seed)
    v = n_topics * words_per_topic
    docs = []
    for d in range(n_docs):
        topics = rng.choice(n_topics, size=rng.integers(1, 3), replace=False)
        mix = rng.dirichlet(np.ones(len(topics)))
        z = rng.choice(topics, size=doc_len, p=mix)
        words = z * words_per_topic + rng.integers(0, words_per_topic, size=doc_len)
        terms, counts = np.unique(words, return_counts=True)
        docs.append((d, terms.astype(np.int64), counts.astype(np.float64)))
    for e in range(n_empty):
        docs.append((n_docs + e, np.zeros(0, np.int64), np.zeros(0)))
    return docs, v


def planted_source(spark, **kw):
    from sparklda.corpus import DocSource

    docs, v = planted_docs(**kw)
    rdd = spark.sparkContext.parallelize(docs, 3)
    return DocSource(rdd, v, [f"w{i}" for i in range(v)], "planted corpus")


def assert_recovers_planted(topic_word, n_topics=4, words_per_topic=6):
    """Each planted block of words is the top of exactly one learned topic."""
    phi = np.asarray(topic_word, dtype=np.float64)
    phi = phi / phi.sum(0, keepdims=True)
    owners = set()
    for t in range(n_topics):
        block = phi[t * words_per_topic : (t + 1) * words_per_topic]  # (w, K)
        k = int(block.sum(0).argmax())
        assert block[:, k].sum() > 0.9, f"block {t} holds only {block[:, k].sum():.2f} of topic {k}"
        owners.add(k)
    assert len(owners) == n_topics, "two planted blocks were merged into one topic"


def kos_word_docs(first: int, last: int):
    """[(doc id, [word, ...])] of KOS documents with ids in [first, last), each word repeated
    by its count, read on the driver."""
    with gzip.open(KOS_DOCWORD, "rt") as f:
        for _ in range(3):
            f.readline()
        t = pd.read_csv(f, sep=" ", header=None, names=["d", "w", "c"])
    with open(KOS_VOCAB) as f:
        vocab = [line.strip() for line in f]
    t = t[(t.d - 1 >= first) & (t.d - 1 < last)]
    out = []
    for d, g in t.groupby("d", sort=True):
        words = [vocab[w - 1] for w, c in zip(g.w, g.c, strict=False) for _ in range(int(c))]
        out.append((int(d) - 1, words))
    return out


def spark_home() -> str:
    """The pyspark package's own Spark distribution."""
    import pyspark

    return os.path.dirname(pyspark.__file__)


def spark_bin(name: str) -> str:
    """A script of the pyspark package's Spark distribution (bin/spark-submit, ...)."""
    return os.path.join(spark_home(), "bin", name)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def write_config(tmp_path, extra: str = "", master: str = "local[2]") -> str:
    """A small training configuration on the shipped KOS corpus (K=8, one pass)."""
    cfg = tmp_path / "job.toml"
    cfg.write_text(f"""
[spark]
master = "{master}"

[spark.conf]
"spark.ui.enabled" = "false"

[input]
format = "uci"
docword = "sample:kos/docword.txt.gz"
vocab = "sample:kos/vocab.txt"

[training]
k = 8
passes = 1
minibatch_size = 1500
seed = 1

[evaluation]
heldout_count = 100
eval_every = 1

[output]
model = "{tmp_path / "model"}"
{extra}
""")
    return str(cfg)


def job_env(**changes) -> dict:
    """This process's environment with ``changes`` (None removes a variable)."""
    env = dict(os.environ)
    for key, value in changes.items():
        if value is None:
            env.pop(key, None)
        else:
            env[key] = value
    return env


def run(cmd, timeout=600, **kw) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(c) for c in cmd], capture_output=True, text=True, timeout=timeout, check=False, **kw
    )


PROBE = r"""
import json, sys
from sparklda.cli.config import load_config
from sparklda.cli.session import build_session, effective_properties
cfg = load_config(sys.argv[1] if len(sys.argv) > 1 and sys.argv[1] != "-" else None,
                  sys.argv[3:])
spark = build_session(cfg, sys.argv[2] if len(sys.argv) > 2 and sys.argv[2] != "-" else None,
                      "probe")
print("PROBE " + json.dumps({"master": spark.sparkContext.master,
                             "properties": effective_properties(spark)}))
spark.stop()
"""


def probe_session(
    tmp_path,
    launcher: list,
    config: str | None = None,
    master: str | None = None,
    sets=(),
    env=None,
) -> dict:
    """Start a driver with ``launcher`` (``[python]`` or ``[spark-submit, options...]``) that
    builds the jobs' session from ``config``; returns its master and effective properties."""
    script = tmp_path / "probe.py"
    script.write_text(PROBE)
    out = run(
        [*launcher, script, config or "-", master or "-", *sets], timeout=300, env=env or job_env()
    )
    assert out.returncode == 0, out.stderr[-3000:]
    line = [x for x in out.stdout.splitlines() if x.startswith("PROBE ")]
    assert line, out.stdout[-2000:] + out.stderr[-2000:]
    return json.loads(line[-1][len("PROBE ") :])


@contextmanager
def no_spark_job(spark):
    """Fail if the body runs a Spark job."""
    sc = spark.sparkContext
    group = f"no-job-{uuid.uuid4().hex}"
    sc.setJobGroup(group, "must not run jobs")
    try:
        yield
    finally:
        sc.setLocalProperty("spark.jobGroup.id", None)
        sc.setLocalProperty("spark.job.description", None)
    assert list(sc.statusTracker().getJobIdsForGroup(group)) == []


@contextmanager
def connect_server(base, cores: int = 2, timeout: float = 180):
    """A Spark Connect server (``SparkConnectServer`` through the pyspark package's own
    ``bin/spark-submit``, ``local[cores]``, bound to 127.0.0.1 on a free port) for the
    duration of the block; yields its ``sc://`` URL. The server is stopped by the pid of
    the process group it was started in, also when the block fails."""
    import signal
    import sys
    import time

    port = free_port()
    base = str(base)
    os.makedirs(base, exist_ok=True)
    log_path = os.path.join(base, "connect-server.log")
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = job_env(
        PYSPARK_PYTHON=sys.executable,
        PYTHONPATH=os.pathsep.join(p for p in (here, os.environ.get("PYTHONPATH")) if p),
        SPARK_HOME=spark_home(),
        SPARK_LOCAL_IP="127.0.0.1",
    )
    cmd = [
        spark_bin("spark-submit"),
        "--master",
        f"local[{cores}]",
        "--driver-memory",
        "4g",
        "--conf",
        "spark.ui.enabled=false",
        *(a for k, v in DEFAULT_PROPERTIES.items() for a in ("--conf", f"{k}={v}")),
        "--conf",
        "spark.sql.shuffle.partitions=2",
        "--conf",
        "spark.default.parallelism=2",
        "--conf",
        "spark.connect.grpc.binding.address=127.0.0.1",
        "--conf",
        f"spark.connect.grpc.binding.port={port}",
        "--class",
        "org.apache.spark.sql.connect.service.SparkConnectServer",
        "spark-internal",
    ]
    with open(log_path, "w") as log:
        proc = subprocess.Popen(
            cmd,
            env=env,
            cwd=base,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
    try:
        deadline = time.time() + timeout
        while True:
            if proc.poll() is not None:
                raise RuntimeError(
                    f"the Spark Connect server exited ({proc.returncode}):\n"
                    + open(log_path).read()[-4000:]
                )
            with open(log_path) as f:
                if "Spark Connect server started" in f.read():
                    break
            if time.time() > deadline:
                raise RuntimeError(
                    "the Spark Connect server did not start:\n" + open(log_path).read()[-4000:]
                )
            time.sleep(0.5)
        yield f"sc://127.0.0.1:{port}"
    finally:
        try:
            os.killpg(proc.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)
