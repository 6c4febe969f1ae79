"""Checkpoints and resume: a killed run continues from its last checkpoint and ends
with the model of a run that was never interrupted (every mode)."""

from __future__ import annotations

import gzip
import logging
import os
import random
import signal
import subprocess
import sys

import numpy as np
import pytest

from sparklda.api import fit
from sparklda.errors import ParamError
from sparklda.model import TopicModel
from sparklda.params import TrainParams
from sparklda.storage import SparkFiles
from tests.helpers import (
    KOS_DOCWORD,
    KOS_VOCAB,
    TRAIN_JOB,
    Crash,
    CrashAt,
    job_env,
    planted_source,
    write_config,
)

#: 144 training documents: SCVB0 and SVB 3 rounds a pass (minibatches of 60), the others
#: one round a pass; each run is killed mid-run (for SCVB0 and SVB, mid-pass)
SETTINGS = {
    "scvb0": {"algorithm": "scvb0", "minibatch_size": 60, "passes": 2},
    "svb": {"algorithm": "svb", "minibatch_size": 60, "passes": 2, "learning_offset": 10.0},
    "cvb0": {"algorithm": "cvb0", "minibatch_size": 1000, "passes": 4},
    "cvb": {"algorithm": "cvb", "minibatch_size": 1000, "passes": 4},
    "map": {"algorithm": "map", "minibatch_size": 1000, "passes": 4},  # α = 50/k + 1, η = 1.1
    # the average of the last 3 sweeps (2 to 4) spans the crash after round 3
    "gibbs": {"algorithm": "gibbs", "minibatch_size": 1000, "passes": 4, "gibbs_average": 3},
}


def params(name, **kw):
    base = {"k": 4, "seed": 3, "heldout_count": 16, "parts_per_slice": 2, "checkpoint_interval": 1}
    return TrainParams(**{**base, **SETTINGS[name], **kw})


@pytest.fixture(scope="module")
def source(spark):
    return planted_source(spark)


@pytest.fixture(scope="module")
def uninterrupted(source):
    """``uninterrupted(name)``: the fit of ``params(name)`` never interrupted (one per mode
    for the module)."""
    fits: dict = {}

    def get(name):
        if name not in fits:
            fits[name] = fit(source, params(name))
        return fits[name]

    return get


@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.slow) for n in SETTINGS])
def test_resumed_run_equals_the_uninterrupted_one(source, uninterrupted, tmp_path, name):
    full = uninterrupted(name)
    total = full.report["rounds"]
    ck = str(tmp_path / "ck")
    crash_at = max(3, total // 2)
    every = 2  # checkpoints every other round: resumed from the last one before the crash
    with pytest.raises(Crash):
        fit(
            source,
            params(name, checkpoint_dir=ck, checkpoint_interval=every),
            callbacks=[CrashAt(crash_at)],
        )
    resumed = fit(source, params(name, checkpoint_dir=ck, checkpoint_interval=every), resume=True)
    assert resumed.report["resumed_after_round"] == (crash_at - 1) // every * every
    assert resumed.report["rounds"] == total
    np.testing.assert_array_equal(resumed.model.topic_word, full.model.topic_word)
    # the history of the rounds before the crash comes back with the checkpoint
    assert [r["round"] for r in resumed.rounds] == list(range(1, total + 1))
    assert resumed.evaluations[-1]["heldout_loglik"] == full.evaluations[-1]["heldout_loglik"]
    assert resumed.model.metadata["rounds"] == total


@pytest.mark.slow
def test_resuming_another_run_is_refused_with_what_differs(spark, source, tmp_path):
    ck = str(tmp_path / "ck")
    fit(source, params("scvb0", checkpoint_dir=ck, passes=1))
    with pytest.raises(ParamError, match=r"another run \(params k: checkpoint 4, now 5\)"):
        fit(source, params("scvb0", checkpoint_dir=ck, k=5), resume=True)
    other = planted_source(spark, n_docs=90)
    with pytest.raises(ParamError, match="corpus training_documents: checkpoint 144, now"):
        fit(other, params("scvb0", checkpoint_dir=ck), resume=True)
    # more passes are allowed: continue the finished run for one more pass
    more = fit(source, params("scvb0", checkpoint_dir=ck, passes=2), resume=True)
    assert more.report["resumed_after_round"] == more.report["rounds"] // 2
    with pytest.raises(ParamError, match="Resuming needs the 'checkpoint_dir' parameter"):
        fit(source, params("scvb0"), resume=True)


@pytest.mark.slow
def test_a_crash_while_writing_a_checkpoint_keeps_the_previous_one(
    source, uninterrupted, tmp_path, monkeypatch
):
    full = uninterrupted("svb")
    ck = str(tmp_path / "ck")
    real = SparkFiles.write_json
    calls = {"state": 0}

    def dies_in_third_state(self, path, obj):
        if path.endswith("/state"):
            calls["state"] += 1
            if calls["state"] == 3:
                raise Crash("killed while writing a checkpoint")
        return real(self, path, obj)

    monkeypatch.setattr(SparkFiles, "write_json", dies_in_third_state)
    with pytest.raises(Crash):
        fit(source, params("svb", checkpoint_dir=ck))
    monkeypatch.setattr(SparkFiles, "write_json", real)
    resumed = fit(source, params("svb", checkpoint_dir=ck), resume=True)
    assert resumed.report["resumed_after_round"] == 2
    np.testing.assert_array_equal(resumed.model.topic_word, full.model.topic_word)
    # one committed checkpoint is kept, the crashed one's leftovers are gone
    versions = [n for n in os.listdir(ck) if n.startswith("v")]
    seqs = [v[1:7] for v in versions]  # commit records are named by sequence number
    assert len(versions) == 1 and os.listdir(os.path.join(ck, "commits")) == seqs


@pytest.mark.slow
def test_keep_checkpoint_false_removes_them_after_success(source, tmp_path):
    ck = tmp_path / "ck"
    res = fit(source, params("scvb0", checkpoint_dir=str(ck), keep_checkpoint=False))
    assert res.report["checkpoints"]["checkpoints_written"] == res.report["rounds"]
    assert not ck.exists()
    kept = fit(source, params("scvb0", checkpoint_dir=str(ck), checkpoint_interval=4))
    assert sorted(os.listdir(ck))[0] == "commits"
    # every 4 rounds, and after the last one (6 rounds: after rounds 4 and 6)
    assert kept.report["rounds"] % 4 != 0
    assert kept.report["checkpoints"]["checkpoints_written"] == len(
        {r for r in range(1, kept.report["rounds"] + 1) if r % 4 == 0 or r == kept.report["rounds"]}
    )


@pytest.mark.slow
def test_lda_estimator_continues_from_its_checkpoint_dir(spark, tmp_path, monkeypatch):
    """``LDA(checkpointDir=...)``: a fit that died continues when fit again."""
    from sparklda import LDA
    from sparklda.checkpoint import TrainingCheckpoints
    from tests.helpers import planted_docs

    docs, v = planted_docs()
    from pyspark.ml.linalg import SparseVector

    df = spark.createDataFrame(
        [(int(d), SparseVector(v, t.tolist(), c.tolist())) for d, t, c in docs], ["id", "features"]
    )
    lda = dict(k=4, maxIter=2, seed=5, minibatchSize=60, checkpointInterval=1)
    full = LDA(**lda).fit(df)
    ck = str(tmp_path / "lda-ck")
    real = TrainingCheckpoints.save

    def dies_after_second(self, rounds_done, *a, **k):
        real(self, rounds_done, *a, **k)
        if rounds_done == 2:
            raise Crash("driver died")

    monkeypatch.setattr(TrainingCheckpoints, "save", dies_after_second)
    with pytest.raises(Crash):
        LDA(checkpointDir=ck, **lda).fit(df)
    monkeypatch.setattr(TrainingCheckpoints, "save", real)
    again = LDA(checkpointDir=ck, keepLastCheckpoint=False, **lda).fit(df)
    assert again.topicModel.metadata["rounds"] == full.topicModel.metadata["rounds"]
    np.testing.assert_array_equal(again.topicModel.topic_word, full.topicModel.topic_word)
    assert not os.path.exists(ck)


# --------------------------------------------------------------------------
# The train job, SIGKILLed: the driver (and its JVM) die without any clean-up


def _job(cfg, *extra):
    return [sys.executable, TRAIN_JOB, "--config", cfg, *extra]


def _run_until_killed(cmd, marker: str) -> list[str]:
    """Start ``cmd`` in its own process group and SIGKILL the group (the driver and its
    JVM) as soon as the job logs a line containing ``marker``; returns the lines logged."""
    proc = subprocess.Popen(
        cmd,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=job_env(PYTHONUNBUFFERED="1"),
        start_new_session=True,
    )
    seen = []
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            seen.append(line)
            if marker in line:
                os.killpg(proc.pid, signal.SIGKILL)
                break
        proc.wait(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == -signal.SIGKILL, "".join(seen[-40:])
    return seen


#: the jobs' corpus: the first documents of the shipped KOS corpus (every round of a job
#: and of its reference runs over them)
JOB_DOCS = 1000


def _small_kos(base) -> str:
    """A UCI docword file of KOS's first ``JOB_DOCS`` documents (written once under
    ``base``)."""
    path = base / "docword.txt.gz"
    if not path.exists():
        with gzip.open(KOS_DOCWORD, "rt") as f:
            _, w, _ = (f.readline() for _ in range(3))
            rows = [line for line in f if int(line.split()[0]) <= JOB_DOCS]
        with gzip.open(path, "wt") as f:
            f.write(f"{JOB_DOCS}\n{w}{len(rows)}\n{''.join(rows)}")
    return str(path)


def _config(tmp_path, name=None):
    """The job's configuration (``write_config``'s on ``_small_kos``), checkpoints in
    ``tmp_path / name`` every round."""
    extra = (
        f"""
[checkpoint]
dir = "{tmp_path / name}"
every_rounds = 1
"""
        if name
        else ""
    )
    cfg = write_config(tmp_path, extra=extra)
    with open(cfg) as f:
        text = f.read()
    text = text.replace("sample:kos/docword.txt.gz", _small_kos(tmp_path)).replace(
        "sample:kos/vocab.txt", KOS_VOCAB
    )
    assert _small_kos(tmp_path) in text and KOS_VOCAB in text
    with open(cfg, "w") as f:
        f.write(text)
    return cfg


def _sets(*items: str) -> list[str]:
    return [arg for item in items for arg in ("--set", item)]


def _resume_to_the_end(spark, cfg, sets, tmp_path, caplog):
    """Run the job with --resume to completion, by the job's ``run`` in this process (the
    kills are the subprocesses' part; a third job JVM would add nothing): (its log, the
    model it saved)."""
    from sparklda.cli import train
    from sparklda.cli.config import load_config

    with caplog.at_level(logging.INFO, logger="sparklda"):
        train.run(spark, load_config(cfg, [s for s in sets if s != "--set"]), resume=True)
    return caplog.text, TopicModel.load(str(tmp_path / "model"))


def _reference(spark, tmp_path, sets):
    """The same job, uninterrupted, in this process."""
    from sparklda.cli import train
    from sparklda.cli.config import load_config

    ref = tmp_path / "ref"
    ref.mkdir()
    train.run(spark, load_config(_config(ref), [s for s in sets if s != "--set"]))
    return TopicModel.load(str(ref / "model"))


@pytest.mark.slow
def test_sigkilled_job_resumes_twice_to_the_uninterrupted_model(spark, tmp_path, caplog):
    """The train job SIGKILLed twice: first while a random round is reported (the progress
    line: before or during its checkpoint), then, resumed, right after a checkpoint is
    written; resumed again, it ends with the model of a run never interrupted."""
    cfg = _config(tmp_path, "ck")
    sets = _sets(
        "training.algorithm='cvb0'",
        "training.passes=5",
        "training.parts_per_slice=2",
        "evaluation.eval_every=0",
    )
    rounds = 5  # CVB0: one round a pass
    kill_at = random.Random().randint(2, 3)
    _run_until_killed(_job(cfg, *sets), f"round {kill_at}/{rounds},")
    assert not os.path.exists(tmp_path / "model")
    seen = "".join(
        _run_until_killed(_job(cfg, *sets, "--resume"), "checkpoint after round 4 written")
    )
    assert (
        f"resuming cvb0 after round {kill_at - 1} " in seen
        or f"resuming cvb0 after round {kill_at} " in seen
    ), (kill_at, seen[-3000:])
    log, resumed = _resume_to_the_end(spark, cfg, sets, tmp_path, caplog)
    assert "resuming cvb0 after round 4 " in log
    assert resumed.metadata["rounds"] == rounds
    reference = _reference(spark, tmp_path, sets)
    np.testing.assert_allclose(resumed.topic_word, reference.topic_word, rtol=1e-9, atol=0)
