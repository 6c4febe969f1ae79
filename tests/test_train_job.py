"""The training job (sparklda.cli.train, jobs/train_lda.py, sparklda-train): from a TOML
file to a model directory and metrics.json."""

from __future__ import annotations

import json
import os
import re
import stat
import sys

import numpy as np
import pytest

from sparklda.cli import train
from sparklda.cli.config import ConfigError, load_config
from sparklda.errors import ModelPathError
from sparklda.model import TopicModel
from tests.helpers import TRAIN_JOB, job_env, run, write_config


@pytest.mark.slow
def test_job_trains_from_toml_in_process(spark, tmp_path, capsys):
    cfg = load_config(write_config(tmp_path), ["training.passes=2"])
    metrics = train.run(spark, cfg)
    out = capsys.readouterr().out
    assert "Top words of the 8 topics:" in out
    assert "held-out log-likelihood per token:" in out
    model = TopicModel.load(str(tmp_path / "model"))
    assert model.k == 8 and model.vocab_size == 6906 and model.vocab[0] == "aarp"
    assert model.metadata["mode"] == "scvb0" and model.metadata["passes"] == 2.0
    saved = json.loads((tmp_path / "metrics.json").read_text())
    assert saved["params"]["passes"] == 2
    assert saved["report"]["corpus"]["heldout_documents"] == 100
    # progress per round: round, passes, tokens/s, step size, held-out when evaluated
    rounds = saved["rounds"]
    assert len(rounds) == 6  # 3,330 training documents in minibatches of 1,500: 3 per pass
    assert {"round", "passes", "tokens_per_s", "rho"} <= set(rounds[0])
    assert "heldout_loglik" in rounds[0]
    assert saved["final"]["heldout_loglik"] == metrics["final"]["heldout_loglik"] < -7.0
    # u_mass of the top 10 terms on the training documents
    coherence = saved["coherence"]
    assert coherence["measure"] == "u_mass" and len(coherence["per_topic"]) == 8
    assert coherence["mean"] == pytest.approx(np.mean(coherence["per_topic"]))
    assert coherence["mean"] < 0
    # where it ran: the real master, the effective properties, who ran the tasks
    assert saved["spark"]["master"] == spark.sparkContext.master == "local[2]"
    assert saved["spark"]["properties"]["spark.master"] == "local[2]"
    assert saved["spark"]["properties"]["spark.app.id"] == spark.sparkContext.applicationId
    assert sum(e["completed_tasks"] for e in saved["spark"]["executors"]) > 0
    # a second run refuses to clobber the model unless told to
    with pytest.raises(ModelPathError, match="already exists; set output.overwrite = true"):
        train.run(spark, cfg)


def _fake_interpreters(directory):
    """`python3` and `python` that only leave a mark: the job must not run them."""
    directory.mkdir()
    for name in ("python3", "python"):
        path = directory / name
        path.write_text(f'#!/bin/sh\necho "$@" >> {directory / "ran"}\nexit 1\n')
        path.chmod(path.stat().st_mode | stat.S_IEXEC)


@pytest.mark.slow
def test_job_runs_by_interpreter_path_without_activated_environment(spark, tmp_path):
    """The real entry point in its own process, started as `/path/to/python jobs/...` with
    no PYSPARK_PYTHON and another `python3` first on PATH: the local Python workers must
    run the job's own interpreter."""
    fake = tmp_path / "bin"
    _fake_interpreters(fake)
    env = job_env(
        PYSPARK_PYTHON=None,
        PYSPARK_DRIVER_PYTHON=None,
        SPARK_HOME=None,
        PATH=f"{fake}{os.pathsep}{os.environ['PATH']}",
    )
    cfg = write_config(tmp_path)
    out = run(
        [
            sys.executable,
            TRAIN_JOB,
            "--config",
            cfg,
            "--set",
            "training.k=5",
            "--set",
            f"output.metrics={tmp_path / 'm.json'}",
        ],
        env=env,
        cwd=tmp_path,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    assert not (fake / "ran").exists(), (fake / "ran").read_text()
    assert "Top words of the 5 topics:" in out.stdout
    assert f"Python workers run {sys.executable}" in out.stdout
    # progress on stderr (not a terminal here: plain lines, one per round)
    assert re.search(r"round 1/3, 0.33 passes, \d+ tokens/s, step", out.stderr)
    assert "corpus: 3430 documents read, 3330 to train on, 100 held out" in out.stderr
    # Spark's startup noise is hidden by default
    assert "default log4j profile" not in out.stderr and "NativeCodeLoader" not in out.stderr
    # nor does saving print Java stack traces (Spark warns on every glob path it reads)
    assert "Exception" not in out.stderr + out.stdout, out.stderr[-3000:]
    assert TopicModel.load(str(tmp_path / "model")).k == 5
    metrics = json.loads((tmp_path / "m.json").read_text())
    assert metrics["final"]["heldout_documents"] == 100
    assert metrics["spark"]["master"] == "local[2]"


BAD_SETTINGS = [
    ("training.k=1", "The 'k' parameter of LDA must be an int in the range [2, inf). Got 1"),
    ("training.topics=5", "Unknown key(s) ['training.topics'] in [training]; known keys: ["),
    (
        "output.overwrite=False",
        "output.overwrite must be a TOML boolean (true or false); got 'False' (a string)",
    ),
    ("training.batch=yes", "training.batch must be a TOML boolean (true or false); got 'yes'"),
    (
        "training.k.x=3",
        "--set 'training.k.x=3': training.k is a value (8), not a table, so it has no key 'x'",
    ),
    ("input.fromat=uci", "Unknown key(s) ['input.fromat'] in [input]; known keys: ['docword',"),
    ("spark.mastr=yarn", "Unknown key(s) ['spark.mastr'] in [spark]; known keys: ['app_name',"),
    ("evaluation.passes=3", "Unknown key(s) ['evaluation.passes'] in [evaluation]"),
    ("infer.outptu=x", "Unknown key(s) ['infer.outptu'] in [infer]"),
    ("output.model=3", "output.model must be a string; got 3 (an integer)"),
    ("scoring.x=1", "Unknown configuration table(s) ['scoring']"),
    ("output.model=''", "output.model (the model directory to write) is required"),
    ("training.eval_every=2", "['training.eval_every'] and ['evaluation.eval_every'] are both"),
    ("input.format=csv", "The 'input.format' parameter must be one of ['uci', 'text', 'json', "),
    ("input.format=json", "input.format = 'json' needs input.path."),
    ("spark.log_level=LOUD", "The 'spark.log_level' parameter must be one of ['ALL', "),
]


@pytest.mark.parametrize("override,message", BAD_SETTINGS)
def test_bad_settings_fail_before_spark_starts(tmp_path, override, message, capsys, monkeypatch):
    def no_spark(*a, **k):
        raise AssertionError("Spark was started")

    monkeypatch.setattr("sparklda.cli.job.build_session", no_spark)
    assert train.main(["--config", write_config(tmp_path), "--set", override]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and message in err
    assert not (tmp_path / "model").exists()


def test_bad_settings_exit_2_from_the_command_line(tmp_path):
    out = run(
        [
            sys.executable,
            TRAIN_JOB,
            "--config",
            write_config(tmp_path),
            "--set",
            "output.overwrite=False",
        ],
        timeout=120,
    )
    assert out.returncode == 2
    assert (
        out.stderr.strip()
        .splitlines()[-1]
        .startswith("error: output.overwrite must be a TOML boolean")
    )
    assert "SparkContext" not in out.stderr + out.stdout


def _unwritable(tmp_path) -> str:
    """A directory this process cannot create anything in (root ignores permissions)."""
    if os.geteuid() == 0:
        return "/proc"
    d = tmp_path / "readonly"
    d.mkdir()
    d.chmod(0o500)
    return str(d)


def test_outputs_are_checked_before_the_corpus_is_read(spark, tmp_path):
    """Unusable outputs fail before any work: the corpus here does not even exist."""
    base = ["input.docword=/nonexistent/docword.txt.gz", "input.vocab=/nonexistent/vocab.txt"]
    cfg_path = write_config(tmp_path)

    (tmp_path / "model").mkdir()
    with pytest.raises(
        ModelPathError,
        match=r"output.model '.*model' already exists; set "
        r"output.overwrite = true",
    ):
        train.run(spark, load_config(cfg_path, base))

    (tmp_path / "a-file").write_text("x")
    with pytest.raises(ModelPathError, match=r"a-file' is a file, not a directory"):
        train.run(
            spark,
            load_config(cfg_path, base + [f"output.model={tmp_path / 'a-file' / 'sub' / 'model'}"]),
        )

    locked = _unwritable(tmp_path)
    with pytest.raises(ModelPathError, match=rf"directory '{locked}' is not writable"):
        train.run(spark, load_config(cfg_path, base + [f"output.model={locked}/x/model"]))

    (tmp_path / "metrics-dir").mkdir()
    with pytest.raises(ModelPathError, match=r"output.metrics '.*metrics-dir' is a directory"):
        train.run(
            spark,
            load_config(
                cfg_path,
                base + ["output.overwrite=true", f"output.metrics={tmp_path / 'metrics-dir'}"],
            ),
        )

    # with the outputs fine, the job gets as far as the (missing) corpus
    with pytest.raises(Exception, match="nonexistent"):
        train.run(spark, load_config(cfg_path, base + ["output.overwrite=true"]))


def test_config_file_errors(tmp_path):
    with pytest.raises(ConfigError, match="--set expects SECTION.KEY=VALUE"):
        load_config(None, ["k=3"])
    with pytest.raises(ConfigError, match="does not exist"):
        load_config(str(tmp_path / "nope.toml"), [])
    bad = tmp_path / "bad.toml"
    bad.write_text("[training\nk = 3\n")
    with pytest.raises(ConfigError, match="bad.toml"):
        load_config(str(bad), [])


def test_java_check_says_so_plainly(monkeypatch, tmp_path):
    from sparklda import _java

    monkeypatch.setenv("JAVA_HOME", str(tmp_path))
    problem = _java.java_problem()
    assert "sparklda needs Java 17 or newer" in problem and "has no bin/java" in problem
    monkeypatch.delenv("JAVA_HOME")
    monkeypatch.setenv("PATH", str(tmp_path))
    assert "no `java` was found on PATH" in _java.java_problem()


@pytest.mark.slow
def test_job_trains_from_json_lines_text(spark, tmp_path):
    """Raw text in JSON lines: Spark ML tokenizer, stop words, vocabulary limits."""
    rng = np.random.default_rng(0)
    groups = [
        ["galaxy", "orbit", "telescope", "planet", "comet"],
        ["goalie", "hockey", "puck", "season", "playoff"],
    ]
    lines = []
    for i in range(60):
        words = rng.choice(groups[i % 2], size=30)
        lines.append(json.dumps({"id": i, "text": "The " + " and ".join(words) + "!"}))
    lines.append(json.dumps({"id": 60, "text": ""}))
    path = tmp_path / "docs.jsonl"
    path.write_text("\n".join(lines) + "\n")
    cfg = load_config(
        write_config(tmp_path),
        [
            "input.format=json",
            f"input.path={path}",
            "input.id_col=id",
            "input.min_df=2",
            "training.k=2",
            "training.passes=30",
            "training.minibatch_size=20",
            "training.s_phi=5.0",
            "training.tau_phi=10.0",
            "evaluation.heldout_count=6",
            "evaluation.eval_every=0",
        ],
    )
    metrics = train.run(spark, cfg)
    model = TopicModel.load(str(tmp_path / "model"))
    assert sorted(model.vocab) == sorted(groups[0] + groups[1])  # stop words removed
    assert metrics["report"]["corpus"]["empty_documents_skipped"] == 1
    tops = [set(t["terms"]) for t in model.describe_topics(5)]
    assert sorted(map(sorted, tops)) == sorted(map(sorted, map(set, groups)))
