"""Faults during training: a Python worker killed mid-task costs a retry, not a different model.

The test session's own SparkSession (local[2], no task retries) cannot be
replaced, so the fault runs in a separate driver with master ``local[2,4]``
(four attempts per task).
"""

from __future__ import annotations

import json
import os
import sys

import numpy as np
import pytest

from tests.conftest import DAEMON_OPT
from tests.helpers import ROOT, job_env, run

#: A driver that trains SCVB0 on the shipped KOS sample twice, the second time while a thread
#: SIGKILLs a pyspark.daemon worker that is running a round's task, and prints a RESULT line.
FAULT_SCRIPT = r"""
import json, os, signal, sys, threading, time

import numpy as np
from pyspark.sql import SparkSession

from sparklda.api import fit
from sparklda.corpus import read_uci
from sparklda.params import TrainParams
from sparklda.training import Callback


def processes():
    # pid -> (parent pid, state, CPU ticks, runs pyspark.daemon)
    out = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            with open(f"/proc/{name}/cmdline", "rb") as f:
                daemon = b"pyspark.daemon" in f.read()
        except OSError:
            continue
        out[int(name)] = (int(fields[1]), fields[0], int(fields[11]) + int(fields[12]), daemon)
    return out


def workers():
    # pid -> (state, CPU ticks) of this driver's Python workers: children of the
    # pyspark.daemon process that descends from this process (not the test session's)
    procs, me = processes(), os.getpid()

    def mine(pid):
        seen = set()
        while pid in procs and pid not in seen:
            if pid == me:
                return True
            seen.add(pid)
            pid = procs[pid][0]
        return False

    daemons = {
        p for p, (pp, _, _, d) in procs.items()
        if d and mine(p) and not procs.get(pp, (0, "", 0, False))[3]
    }
    return {p: (s, t) for p, (pp, s, t, d) in procs.items() if d and pp in daemons}


def failed_tasks(sc):
    tracker, total = sc.statusTracker(), 0
    for job in tracker.getJobIdsForGroup(None):
        info = tracker.getJobInfo(job)
        for stage_id in info.stageIds if info else ():
            stage = tracker.getStageInfo(stage_id)
            total += stage.numFailedTasks if stage else 0
    return total


class Killer(Callback):
    # once round 1 is done, SIGKILL a worker that has been running on the CPU for the last
    # few polls (inside a round's task) and has lived a while (not a fresh worker importing
    # its modules), until Spark counts a failed task; at most 5 kills
    def __init__(self, sc):
        self.sc, self.armed, self.done = sc, threading.Event(), threading.Event()
        self.killed, self.failed_before = [], failed_tasks(sc)
        self.thread = threading.Thread(target=self.hunt, daemon=True)
        self.thread.start()

    def on_round(self, record):
        self.armed.set()

    def hunt(self):
        self.armed.wait()
        born, history = {}, {}
        while not self.done.is_set() and len(self.killed) < 5:
            time.sleep(0.005)
            now, at = workers(), time.time()
            for p, (state, ticks) in now.items():
                born.setdefault(p, at)
                history[p] = (history.get(p, []) + [(state, ticks)])[-4:]
            busy = [
                p for p, h in history.items()
                if p in now and at - born[p] > 0.5 and len(h) == 4
                and all(s == "R" for s, _ in h) and h[-1][1] > h[0][1]
            ]
            if not busy:
                continue
            os.kill(busy[0], signal.SIGKILL)
            self.killed.append(busy[0])
            history.clear()
            time.sleep(0.3)  # Spark records the failure once the task's reader notices
            if failed_tasks(self.sc) > self.failed_before:
                return


spark = (
    SparkSession.builder.master("local[2,4]")
    .config("spark.ui.enabled", "false")
    .config("spark.ui.showConsoleProgress", "false")
    .config("spark.python.worker.reuse", "true")
    .getOrCreate()
)
spark.sparkContext.setLogLevel("OFF")
# tasks long enough (K=100, 30 burn-in passes: about 0.1 s each) for the killer's polls to
# find one running on a quiet machine; the rounds of a few ms each it polled for before
# ended between polls
params = TrainParams(
    k=100, passes=2, minibatch_size=1000, parts_per_slice=2, seed=0, burnin=30
)


def train(callbacks=()):
    source = read_uci(spark, "sample:kos/docword.txt.gz", "sample:kos/vocab.txt")
    return fit(source, params, callbacks=callbacks)


plain = train()
killer = Killer(spark.sparkContext)
disturbed = train([killer])
killer.done.set()
print("RESULT " + json.dumps({
    "killed": killer.killed,
    "failed_tasks": failed_tasks(spark.sparkContext) - killer.failed_before,
    "rounds": [len(plain.rounds), len(disturbed.rounds)],
    "equal": bool(np.array_equal(plain.model.topic_word, disturbed.model.topic_word)),
    "max_abs_diff": float(np.max(np.abs(plain.model.topic_word - disturbed.model.topic_word))),
}))
spark.stop()
"""


def _env() -> dict:
    """The fault scripts' environment: PySpark's own worker daemon (the one users run,
    whose workers the killer looks for), not the test run's sparklda.daemon."""
    opts = os.environ.get("SPARK_SUBMIT_OPTS", "").replace(DAEMON_OPT, "").strip()
    return job_env(PYSPARK_PYTHON=sys.executable, PYTHONPATH=ROOT, SPARK_SUBMIT_OPTS=opts)


@pytest.mark.slow
def test_killed_python_worker_is_retried_and_the_model_is_unchanged(tmp_path):
    script = tmp_path / "fault.py"
    script.write_text(FAULT_SCRIPT)
    out = run(
        [sys.executable, script],
        timeout=900,
        env=_env(),
        cwd=tmp_path,
    )
    lines = [x for x in out.stdout.splitlines() if x.startswith("RESULT ")]
    assert out.returncode == 0 and lines, out.stdout[-3000:] + out.stderr[-5000:]
    result = json.loads(lines[-1][len("RESULT ") :])
    assert result["killed"], "no worker was seen running a task: nothing was killed"
    assert result["failed_tasks"] >= 1, f"the kill failed no task: {result}"
    assert result["rounds"] == [8, 8]  # 3430 documents / 1000 = 4 slices, 2 passes
    assert result["equal"], f"the retried round changed the model: {result}"


@pytest.mark.slow
def test_same_seed_gives_the_same_bits_whichever_worker_runs_a_task(spark):
    """Two fits of the shipped sample are equal to the last bit: each task's result depends
    on its input only, not on the worker process or its heap (a retried task, on whichever
    worker, computes the same floats; see sparklda/kernels/lanes.py)."""
    from sparklda.api import fit
    from sparklda.corpus import read_uci
    from sparklda.params import TrainParams

    params = TrainParams(k=10, passes=1, minibatch_size=1000, parts_per_slice=2, seed=0)
    models = [
        fit(read_uci(spark, "sample:kos/docword.txt.gz"), params).model.topic_word for _ in range(3)
    ]
    assert np.array_equal(models[0], models[1]) and np.array_equal(models[0], models[2])


@pytest.mark.slow
def test_killed_python_worker_in_a_gibbs_sweep_is_retried_and_the_model_is_unchanged(tmp_path):
    """Gibbs keeps a topic per token with the blocks and draws by (seed, round, document):
    a sweep's task killed and retried samples the same topics."""
    plain_params = (
        "params = TrainParams(\n"
        "    k=100, passes=2, minibatch_size=1000, parts_per_slice=2, seed=0, burnin=30\n)"
    )
    assert plain_params in FAULT_SCRIPT
    script = tmp_path / "fault_gibbs.py"
    script.write_text(
        FAULT_SCRIPT.replace(
            plain_params,
            # K=1,000: the first sweeps' tasks last long enough (a few tenths of a second)
            # for the killer's polls to find one running; at K=100 a task of the blocks
            # served from broadcasts could end between the polls on a quiet machine
            'params = TrainParams(algorithm="gibbs", k=1000, passes=4, parts_per_slice=2, seed=0)',
        )
    )
    out = run(
        [sys.executable, script],
        timeout=900,
        env=_env(),
        cwd=tmp_path,
    )
    lines = [x for x in out.stdout.splitlines() if x.startswith("RESULT ")]
    assert out.returncode == 0 and lines, out.stdout[-3000:] + out.stderr[-5000:]
    result = json.loads(lines[-1][len("RESULT ") :])
    assert result["killed"], "no worker was seen running a task: nothing was killed"
    assert result["failed_tasks"] >= 1, f"the kill failed no task: {result}"
    assert result["rounds"] == [4, 4]  # one sweep a round
    assert result["equal"], f"the retried sweep changed the model: {result}"
