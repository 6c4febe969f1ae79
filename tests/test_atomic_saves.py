"""Crash-safe saves of pipelines with sparklda stages and of the infer job's scored output:
a save that crashes (or is SIGKILLed) at any moment leaves the previous complete result or
the new complete one, and the next save removes what the crashed one left."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from tests.helpers import ROOT, job_env


def _values(spark, path):
    return sorted({r.v for r in spark.read.parquet(path).select("v").distinct().collect()})


@pytest.mark.slow
def test_scored_output_survives_a_crash_at_every_step(spark, tmp_path, monkeypatch):
    """``write_output`` crashing while writing, between its two renames, and after them:
    the output is the old or the new one (or, between the renames only, restored by the
    next call), and the next call leaves no staging directory."""
    from sparklda.errors import ModelExistsError
    from sparklda.storage import SparkFiles, recover_output, staging_path, write_output

    out = str(tmp_path / "topics")
    dfs = [spark.range(50).selectExpr("id", f"{i}.0 as v").coalesce(2) for i in (1, 2)]

    def writer(df):
        return lambda p: df.write.mode("error").parquet(p)

    write_output(spark, out, writer(dfs[0]), False)
    assert _values(spark, out) == [1.0] and not os.path.exists(staging_path(out))
    with pytest.raises(ModelExistsError, match="already exists"):
        write_output(spark, out, writer(dfs[1]), False)

    # 1. the new output's write fails half-way: the old one is untouched
    def half(p):
        dfs[1].limit(10).write.parquet(p)
        raise OSError("killed while writing")

    with pytest.raises(OSError, match="killed while writing"):
        write_output(spark, out, half, True)
    assert _values(spark, out) == [1.0] and spark.read.parquet(out).count() == 50
    assert os.path.exists(staging_path(out))

    # 2. killed between the two renames: out is missing, the old output is in staging/old
    real = SparkFiles.rename
    calls = []

    def second_rename_dies(self, src, dst):
        calls.append(dst)
        if len(calls) == 2:
            raise OSError("killed between the renames")
        return real(self, src, dst)

    monkeypatch.setattr(SparkFiles, "rename", second_rename_dies)
    with pytest.raises(OSError, match="between the renames"):
        write_output(spark, out, writer(dfs[1]), True)
    monkeypatch.undo()
    assert not os.path.exists(out)
    assert os.path.isdir(os.path.join(staging_path(out), "old"))
    recover_output(spark, out)  # what the next write does first
    assert _values(spark, out) == [1.0] and not os.path.exists(staging_path(out))

    # 3. killed after the renames, before the staging directory is removed
    def delete_dies(self, path):
        raise OSError("killed before cleaning up")

    monkeypatch.setattr(SparkFiles, "delete", delete_dies)
    with pytest.raises(OSError, match="before cleaning up"):
        write_output(spark, out, writer(dfs[1]), True)
    monkeypatch.undo()
    assert _values(spark, out) == [2.0] and spark.read.parquet(out).count() == 50
    write_output(spark, out, writer(dfs[0]), True)
    assert _values(spark, out) == [1.0]
    assert sorted(os.listdir(tmp_path)) == ["topics"]
    # a directory that is not a dataset Spark wrote is never replaced
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("keep")
    with pytest.raises(ValueError, match="is not a dataset Spark wrote"):
        write_output(spark, str(tmp_path / "mine"), writer(dfs[0]), True)
    assert (tmp_path / "mine" / "notes.txt").read_text() == "keep"


@pytest.mark.slow
def test_pipeline_save_crashing_keeps_the_previous_pipeline(spark, tmp_path, monkeypatch):
    """``PipelineModel.write().overwrite().save`` with a sparklda stage: a crash while the
    new version is written keeps the old pipeline; pyspark's layout is replaced; a directory
    that is no model or pipeline is refused."""
    from pyspark.ml import PipelineModel

    from sparklda import LDAModel
    from sparklda.storage import SparkFiles

    pms = _pipelines(2, 30)
    path = str(tmp_path / "pipeline")
    pms[0].write().save(path)
    with pytest.raises(FileExistsError, match="To overwrite it, use write"):
        pms[1].write().save(path)

    def boom(self, *a, **k):
        raise OSError("killed mid-save")

    monkeypatch.setattr(SparkFiles, "write_table", boom)
    with pytest.raises(OSError, match="killed mid-save"):
        pms[1].write().overwrite().save(path)
    monkeypatch.undo()
    back = PipelineModel.load(path)
    assert isinstance(back.stages[-1], LDAModel) and back.uid == pms[0].uid
    assert float(back.stages[-1].topicModel.topic_word[0, 0]) == 1.0
    pms[1].write().overwrite().save(path)
    assert float(PipelineModel.load(path).stages[-1].topicModel.topic_word[0, 0]) == 2.0
    assert len([n for n in os.listdir(path) if n.startswith("v")]) == 1
    # pyspark's own reader (a process that never imported sparklda) reads the pointers:
    # one stage, the saved pipeline
    from pyspark.ml.pipeline import PipelineModelReader

    nested = PipelineModelReader(PipelineModel).load(path)
    assert len(nested.stages) == 1 and isinstance(nested.stages[0], PipelineModel)
    assert [type(s).__name__ for s in nested.stages[0].stages] == [
        "CountVectorizerModel",
        "LDAModel",
    ]
    # a directory pyspark's own writer made is replaced (after the new version is committed)
    from pyspark.ml.pipeline import PipelineModelWriter

    legacy = str(tmp_path / "legacy")
    PipelineModelWriter(pms[0]).save(legacy)
    pms[1].write().overwrite().save(legacy)
    assert os.listdir(os.path.join(legacy, "stages")) == ["0_sparklda_committed"]
    assert float(PipelineModel.load(legacy).stages[-1].topicModel.topic_word[0, 0]) == 2.0
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("keep")
    with pytest.raises(ValueError, match="is not a sparklda pipeline"):
        pms[0].write().overwrite().save(str(tmp_path / "mine"))
    assert (tmp_path / "mine" / "notes.txt").read_text() == "keep"


def _pipelines(n, terms):
    from pyspark.ml import PipelineModel
    from pyspark.ml.feature import CountVectorizerModel

    from sparklda import LDAModel
    from sparklda.model import TopicModel

    vocab = [f"w{i}" for i in range(terms)]
    cv = CountVectorizerModel.from_vocabulary(vocab, inputCol="words", outputCol="features")
    return [
        PipelineModel([cv, LDAModel(TopicModel(np.full((terms, 20), float(i + 1)), 0.1, 0.01))])
        for i in range(n)
    ]


KILLED_SAVER = r"""
import os, sys
os.environ["PYSPARK_PYTHON"] = sys.executable
from pyspark.sql import SparkSession
spark = (SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
         .config("spark.ui.showConsoleProgress", "false").getOrCreate())
spark.sparkContext.setLogLevel("ERROR")
from sparklda.storage import write_output
from tests.test_atomic_saves import _pipelines
pipeline, output = sys.argv[1], sys.argv[2]
pipelines = _pipelines(2, 3000)
outputs = [spark.range(20000).selectExpr("id", f"{i + 1}.0 as v").coalesce(2) for i in range(2)]
def save(i):  # the pipeline, then the scored output
    pipelines[i].write().overwrite().save(pipeline)
    write_output(spark, output, lambda p: outputs[i].write.mode("error").parquet(p), True)
save(0)
print("READY", flush=True)
i = 1
while True:  # save again and again until killed
    save(i % 2)
    i += 1
"""


@pytest.mark.slow
@pytest.mark.parametrize("delay", [0.3, 1.6])
def test_a_killed_save_leaves_the_old_or_the_new_result(spark, tmp_path, delay):
    """SIGKILL a process that keeps overwriting a PipelineModel (CountVectorizerModel and an
    LDAModel) and a scored output, in turn, at several delays after its first complete
    saves: each is the old or the new one."""
    from pyspark.ml import PipelineModel

    from sparklda.ml.pipeline import install

    install()  # what importing sparklda does: PipelineModel.load reads committed pipelines

    from sparklda.storage import recover_output, staging_path, write_output

    script = tmp_path / "saver.py"
    script.write_text(KILLED_SAVER)
    pipeline, path = str(tmp_path / "pipeline"), str(tmp_path / "output")
    proc = subprocess.Popen(
        [sys.executable, str(script), pipeline, path],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        start_new_session=True,
        env=job_env(PYTHONPATH=ROOT),
        cwd=ROOT,
    )
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            if line.startswith("READY"):
                break
        time.sleep(delay)
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    back = PipelineModel.load(pipeline)
    tw = back.stages[-1].topicModel.topic_word
    assert tw.shape == (3000, 20) and float(tw[0, 0]) in (1.0, 2.0)
    assert np.all(tw == tw[0, 0])
    assert back.stages[0].vocabulary[:2] == ["w0", "w1"]
    _pipelines(1, 5)[0].write().overwrite().save(pipeline)  # cleans up the killed save
    assert len([n for n in os.listdir(pipeline) if n.startswith("v")]) == 1

    if not os.path.exists(path):  # killed between the two renames: the old one is staged
        assert os.path.isdir(os.path.join(staging_path(path), "old"))
        recover_output(spark, path)
    assert spark.read.parquet(path).count() == 20000
    assert len(_values(spark, path)) == 1 and _values(spark, path)[0] in (1.0, 2.0)
    write_output(
        spark, path, lambda p: spark.range(3).selectExpr("id", "3.0 as v").write.parquet(p), True
    )
    assert not os.path.exists(staging_path(path)) and _values(spark, path) == [3.0]
