"""Helpers of the job tests (paths, configurations, subprocesses)."""

from __future__ import annotations

import json
import os
import socket
import subprocess

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
KOS_DOCWORD = os.path.join(ROOT, "sparklda", "data", "kos", "docword.txt.gz")
KOS_VOCAB = os.path.join(ROOT, "sparklda", "data", "kos", "vocab.txt")
TRAIN_JOB = os.path.join(ROOT, "jobs", "train_lda.py")
INFER_JOB = os.path.join(ROOT, "jobs", "infer_topics.py")


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
model = "{tmp_path / 'model'}"
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
    return subprocess.run([str(c) for c in cmd], capture_output=True, text=True,
                          timeout=timeout, check=False, **kw)


PROBE = r'''
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
'''


def probe_session(tmp_path, launcher: list, config: str | None = None,
                  master: str | None = None, sets=(), env=None) -> dict:
    """Start a driver with ``launcher`` (``[python]`` or ``[spark-submit, options...]``) that
    builds the jobs' session from ``config``; returns its master and effective properties."""
    script = tmp_path / "probe.py"
    script.write_text(PROBE)
    out = run([*launcher, script, config or "-", master or "-", *sets], timeout=300,
              env=env or job_env())
    assert out.returncode == 0, out.stderr[-3000:]
    line = [x for x in out.stdout.splitlines() if x.startswith("PROBE ")]
    assert line, out.stdout[-2000:] + out.stderr[-2000:]
    return json.loads(line[-1][len("PROBE "):])
