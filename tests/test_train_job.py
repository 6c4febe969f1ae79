"""jobs/train_lda.py: from a TOML file to a model directory and metrics.json."""

from __future__ import annotations

import json
import re
import os
import subprocess
import sys

import numpy as np
import pytest

from sparklda.model import TopicModel
from tests.helpers import KOS_DOCWORD, KOS_VOCAB, ROOT

sys.path.insert(0, os.path.join(ROOT, "jobs"))
import _common  # noqa: E402
import train_lda  # noqa: E402

JOB = os.path.join(ROOT, "jobs", "train_lda.py")


def write_config(tmp_path, extra=""):
    cfg = tmp_path / "job.toml"
    cfg.write_text(f"""
[spark]
master = "local[2]"

[spark.conf]
"spark.ui.enabled" = "false"

[input]
format = "uci"
docword = "{KOS_DOCWORD}"
vocab = "{KOS_VOCAB}"

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


def test_job_trains_from_toml_in_process(spark, tmp_path, capsys):
    cfg = _common.load_config(write_config(tmp_path), ["training.passes=2"])
    metrics = train_lda.run(spark, cfg)
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
    # a second run refuses to clobber the model unless told to
    with pytest.raises(FileExistsError):
        train_lda.run(spark, cfg)


def test_job_command_line_end_to_end(tmp_path):
    """The real entry point in its own process (own SparkSession), as spark-submit runs it."""
    cfg = write_config(tmp_path)
    out = subprocess.run([sys.executable, JOB, "--config", cfg, "--set", "training.k=5",
                          "--set", f"output.metrics={tmp_path / 'm.json'}"],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "Top words of the 5 topics:" in out.stdout
    assert re.search(r"round 1/3, 0.33 passes, \d+ tokens/s, step", out.stdout)  # progress per round
    assert TopicModel.load(str(tmp_path / "model")).k == 5
    assert json.loads((tmp_path / "m.json").read_text())["final"]["heldout_documents"] == 100


@pytest.mark.parametrize("override,message", [
    ("training.k=1", "The 'k' parameter of LDA must be an int in the range [2, inf). Got 1"),
    ("training.topics=5", "Unknown LDA parameter(s) ['topics']"),
    ("output.model=''", None),
])
def test_job_rejects_bad_configuration_before_starting_spark(tmp_path, override, message):
    cfg = write_config(tmp_path)
    if message is None:
        text = open(cfg).read().replace(f'model = "{tmp_path / "model"}"', "")
        open(cfg, "w").write(text)
        override, message = "training.k=3", "output.model (the model directory to write) is required"
    out = subprocess.run([sys.executable, JOB, "--config", cfg, "--set", override],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 2
    assert message in out.stderr
    assert "SparkContext" not in out.stderr + out.stdout
    assert not (tmp_path / "model").exists()


def test_config_overrides_parse_toml_literals(tmp_path):
    cfg = _common.load_config(write_config(tmp_path), [
        "training.k=12", "training.alpha=0.5", "training.algorithm=cvb0", "spark.conf.x=\"y\""])
    assert cfg["training"]["k"] == 12 and cfg["training"]["alpha"] == 0.5
    assert cfg["training"]["algorithm"] == "cvb0" and cfg["spark"]["conf"]["x"] == "y"
    with pytest.raises(SystemExit, match="--set expects SECTION.KEY=VALUE"):
        _common.load_config(None, ["k=3"])
    with pytest.raises(SystemExit, match="does not exist"):
        _common.load_config(str(tmp_path / "nope.toml"), [])


def test_java_check_says_so_plainly(monkeypatch, tmp_path):
    from sparklda import _java

    monkeypatch.setenv("JAVA_HOME", str(tmp_path))
    problem = _java.java_problem()
    assert "sparklda needs Java 17 or newer" in problem and "has no bin/java" in problem
    monkeypatch.delenv("JAVA_HOME")
    monkeypatch.setenv("PATH", str(tmp_path))
    assert "no `java` was found on PATH" in _java.java_problem()


def test_job_trains_from_json_lines_text(spark, tmp_path):
    """Raw text in JSON lines: Spark ML tokenizer, stop words, vocabulary limits."""
    rng = np.random.default_rng(0)
    groups = [["galaxy", "orbit", "telescope", "planet", "comet"],
              ["goalie", "hockey", "puck", "season", "playoff"]]
    lines = []
    for i in range(60):
        words = rng.choice(groups[i % 2], size=30)
        lines.append(json.dumps({"id": i, "text": "The " + " and ".join(words) + "!"}))
    lines.append(json.dumps({"id": 60, "text": ""}))
    path = tmp_path / "docs.jsonl"
    path.write_text("\n".join(lines) + "\n")
    cfg = _common.load_config(write_config(tmp_path), [
        "input.format=json", f"input.path={path}", "input.id_col=id", "input.min_df=2",
        "training.k=2", "training.passes=30", "training.minibatch_size=20",
        "training.s_phi=5.0", "training.tau_phi=10.0", "evaluation.heldout_count=6",
        "evaluation.eval_every=0"])
    metrics = train_lda.run(spark, cfg)
    model = TopicModel.load(str(tmp_path / "model"))
    assert sorted(model.vocab) == sorted(groups[0] + groups[1])  # stop words removed
    assert metrics["report"]["corpus"]["empty_documents_skipped"] == 1
    tops = [set(t["terms"]) for t in model.describe_topics(5)]
    assert sorted(map(sorted, tops)) == sorted(map(sorted, map(set, groups)))
