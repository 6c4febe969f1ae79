"""Live progress (sparklda.progress.Progress) and the jobs' --log-level."""

from __future__ import annotations

import io
import re
from typing import ClassVar

import pytest

from sparklda.progress import Progress
from sparklda.training import TrainResult


class FakeCorpus:
    report: ClassVar[dict] = {
        "documents_read": 120,
        "training_documents": 100,
        "heldout_documents": 20,
        "empty_documents_skipped": 0,
        "cached_bytes": 3 * 2**20,
    }


PLAN = {
    "algorithm": "scvb0",
    "k": 4,
    "total_rounds": 3,
    "rounds_per_pass": 3,
    "first_round": 0,
    "time_budget": 0.0,
    "training_documents": 100,
    "training_tokens": 4000.0,
}


def drive(p: Progress) -> None:
    p.on_build_start("test corpus")
    p.on_corpus(FakeCorpus())
    p.on_train_start(PLAN)
    for t in range(1, 4):
        if t == 2:
            p.on_evaluation({"round": 2, "passes": 2 / 3, "heldout_loglik": -7.5})
        p.on_round({"round": t, "passes": t / 3, "tokens_per_s": 1000.0 * t, "rho": 0.1})
    report = {"rounds": 3, "train_seconds": 1.5, "stopped_by": None}
    p.on_train_end(TrainResult(None, [], [{"heldout_loglik": -7.4}], report))


def test_plain_lines_when_the_stream_is_not_a_terminal():
    out = io.StringIO()
    p = Progress(out)
    assert p.mode == "plain"
    drive(p)
    lines = out.getvalue().splitlines()
    assert lines[0] == "building the corpus from test corpus"
    assert lines[1].startswith("corpus: 120 documents read, 100 to train on, 20 held out")
    assert "3.0 MiB cached" in lines[1]
    assert lines[2] == "training scvb0 K=4: 3 rounds (3 per pass)"
    rounds = [line for line in lines if line.startswith("round ")]
    assert len(rounds) == 3  # one line per round
    assert re.match(r"round 1/3, 0.33 passes, 1000 tokens/s, step 0.1, ETA \d+s$", rounds[0])
    assert "held-out -7.5000" in rounds[1] and "held-out" not in rounds[0]
    assert lines[-1].startswith("trained 3 rounds in 2s, held-out log-likelihood -7.4000")
    assert "\x1b[" not in out.getvalue() and "\r" not in out.getvalue()


PHASES = [
    ("reading", {}),
    ("validated", {"documents": 120, "empty_documents": 0, "tokens": 5000.0}),
    ("splitting", {}),
    ("caching", {"training_documents": 100}),
    (
        "cached",
        {
            "training_documents": 100,
            "heldout_documents": 20,
            "training_tokens": 4000.0,
            "cached_bytes": 3 * 2**20,
        },
    ),
]


def test_plain_lines_show_the_corpus_building_phases():
    out = io.StringIO()
    p = Progress(out)
    p.on_build_start("test corpus")
    for phase, counts in PHASES:
        p.on_build_phase(phase, counts)
    p.on_corpus(FakeCorpus())
    lines = out.getvalue().splitlines()
    assert lines[0] == "building the corpus from test corpus"
    assert [re.sub(r" \(\d+s\)$", "", line) for line in lines[1:6]] == [
        "reading and validating the documents",
        "120 documents read and validated (5000 tokens, 0 empty)",
        "choosing the held-out documents",
        "caching the blocks of 100 training documents",
        "100 training documents cached (3.0 MiB), 20 held out",
    ]
    assert lines[6].startswith("corpus: 120 documents read")


def test_the_live_line_shows_the_phase_being_built():
    from rich.console import Console

    buf = io.StringIO()
    console = Console(file=buf, force_terminal=True, width=150, color_system=None)
    p = Progress(console=console)
    p.on_build_start("test corpus")
    p.on_build_phase(*PHASES[1])
    p._bar.refresh()  # draw now (rich redraws on its own every 0.1 s)
    assert "120 documents read and validated" in buf.getvalue()
    p.on_corpus(FakeCorpus())


def test_one_updating_line_on_a_terminal():
    from rich.console import Console

    buf = io.StringIO()
    console = Console(file=buf, force_terminal=True, width=150, color_system=None)
    p = Progress(console=console)
    assert p.mode == "live"
    drive(p)
    text = buf.getvalue()
    # the line is redrawn in place (cursor controls), not printed once per round
    assert "\r" in text or "\x1b[" in text
    assert "training scvb0 K=4" in text and "3/3" in text
    assert "held-out -7.5000" in text
    assert text.count("\n") < 8
    assert "trained 3 rounds" in text


def test_auto_mode_follows_isatty():
    class Tty(io.StringIO):
        def isatty(self):
            return True

    assert Progress(Tty()).mode == "live"
    assert Progress(io.StringIO()).mode == "plain"
    with pytest.raises(ValueError, match="Progress mode must be"):
        Progress(mode="loud")


def test_progress_of_a_real_fit(spark):
    from sparklda.api import fit
    from sparklda.params import TrainParams
    from tests.helpers import planted_source

    out = io.StringIO()
    params = TrainParams(k=4, passes=1, minibatch_size=50, heldout_count=16, eval_every=2)
    res = fit(planted_source(spark), params, callbacks=[Progress(out)])
    lines = out.getvalue().splitlines()
    rounds = [line for line in lines if line.startswith("round ")]
    assert len(rounds) == len(res.rounds) == res.report["rounds"]
    assert lines[0] == "building the corpus from planted corpus"
    # the corpus-building phases, in order, with the corpus's own counts
    rep = res.report["corpus"]
    assert lines[1].startswith("reading and validating the documents (")
    assert lines[2].startswith(f"{rep['documents_read']} documents read and validated (")
    assert lines[3].startswith("choosing the held-out documents (")
    assert lines[4].startswith(f"caching the blocks of {rep['training_documents']} training")
    assert lines[5].startswith(f"{rep['training_documents']} training documents cached (")
    assert lines[5].split(" (")[1].startswith(f"{rep['cached_bytes'] / 2**20:.1f} MiB), 16 held")
    assert lines[6].startswith("corpus: ")
    assert "held-out" in rounds[-1] and "tokens/s" in rounds[0]
    assert lines[-1].startswith(f"trained {res.report['rounds']} rounds")


@pytest.mark.slow
def test_the_dataframe_path_tells_the_same_phases(spark):
    from pyspark.ml.linalg import Vectors

    from sparklda.corpus import FrameLayout, build_corpus, from_vectors
    from tests.helpers import planted_docs

    docs, v = planted_docs()
    rows = [
        (int(d), Vectors.sparse(v, terms.tolist(), counts.tolist())) for d, terms, counts in docs
    ]
    source = from_vectors(spark.createDataFrame(rows, ["doc", "features"]), "features", "doc")
    events = []
    corpus = build_corpus(
        source,
        layout=FrameLayout(),
        minibatch_size=50,
        heldout_count=16,
        on_phase=lambda *e: events.append(e),
    )
    try:
        assert [e[0] for e in events] == ["reading", "validated", "splitting", "caching", "cached"]
        rep = corpus.report
        assert events[1][1]["documents"] == rep["documents_read"]
        assert events[4][1]["training_documents"] == rep["training_documents"]
        assert events[4][1]["heldout_documents"] == rep["heldout_documents"] == 16
        assert events[4][1]["cached_bytes"] == rep["cached_bytes"]
    finally:
        corpus.unpersist()


# --------------------------------------------------------------------------
# the jobs' --log-level


def test_log_level_option(tmp_path, monkeypatch):
    from sparklda.cli import train
    from sparklda.cli.session import _startup_logging, log4j2_config
    from tests.helpers import write_config

    seen = {}

    class Started(Exception):
        pass

    def fake_session(cfg, master, app_name, remote=None):
        seen["cfg"] = cfg
        raise Started

    monkeypatch.setattr("sparklda.cli.job.build_session", fake_session)
    monkeypatch.setattr("sparklda.cli.job.java_problem", lambda: None)
    cfg = write_config(tmp_path)
    with pytest.raises(Started):
        train.main(["--config", cfg, "--log-level", "error"])
    assert seen["cfg"]["spark"]["log_level"] == "ERROR"
    with pytest.raises(Started):
        train.main(["--config", cfg, "--log-level", "WARNING"])
    assert seen["cfg"]["spark"]["log_level"] == "WARN"
    with pytest.raises(Started):
        train.main(["--config", cfg])
    assert "log_level" not in seen["cfg"].get("spark", {})  # the config's (default WARN)
    with pytest.raises(SystemExit):
        train.main(["--config", cfg, "--log-level", "LOUD"])
    # the default: Spark at WARN from its first line, the startup warnings quiet
    text = log4j2_config("WARN")
    assert "rootLogger.level = warn" in text and "NativeCodeLoader" in text
    assert "NativeCodeLoader" not in log4j2_config("INFO")
    props = _startup_logging({"spark.master": "local[2]"}, "WARN")
    assert props["spark.driver.extraJavaOptions"].startswith("-Dlog4j2.configurationFile=")
    mine = {"spark.driver.extraJavaOptions": "-Dx=1"}
    assert _startup_logging(mine, "WARN") == mine  # the user's own options are left alone
