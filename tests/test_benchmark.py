"""Smoke test of the benchmark's --quick path on a tiny corpus, and of the report writer.

No timing assertions: the figures of a benchmark run are judged in
docs/benchmarks.md, not here.
"""

from __future__ import annotations

import gzip
import json
import os
import sys

import numpy as np
import pytest

from tests.helpers import ROOT, planted_docs

sys.path.insert(0, os.path.join(ROOT, "jobs"))


def write_uci(folder, docs, v):
    """A planted corpus as UCI files (docword.txt.gz, vocab.txt); empty documents
    appear only in the header's D, as in real UCI files."""
    os.makedirs(folder, exist_ok=True)
    lines = []
    for d, terms, counts in docs:
        for t, c in zip(terms, counts):
            lines.append(f"{d + 1} {t + 1} {int(c)}")
    with gzip.open(os.path.join(folder, "docword.txt.gz"), "wt") as f:
        f.write(f"{len(docs)}\n{v}\n{len(lines)}\n")
        f.write("\n".join(lines) + "\n")
    with open(os.path.join(folder, "vocab.txt"), "w") as f:
        f.write("\n".join(f"w{i}" for i in range(v)) + "\n")


@pytest.fixture(scope="module")
def tiny_corpus(tmp_path_factory):
    docs, v = planted_docs(n_docs=150, doc_len=30, n_empty=2, seed=3)
    folder = str(tmp_path_factory.mktemp("bench") / "planted")
    write_uci(folder, docs, v)
    return folder


def test_quick_benchmark_end_to_end(spark, tiny_corpus, tmp_path):
    import benchmark

    out = tmp_path / "out"
    page = tmp_path / "benchmarks.md"
    args = benchmark.parser().parse_args([
        "--quick", "--corpora", f"{tiny_corpus}:4", "--heldout", "planted=20",
        "--systems", "scvb0,mllib-online-tuned", "--passes", "2", "--mllib-passes", "0.2",
        "--sweep-minibatch", "0", "--scaling", "1,2", "--param", "minibatch_size=70",
        "--out", str(out), "--report", str(page), "--notes", ""])
    results = benchmark.run(spark, args, command="jobs/benchmark.py --quick (test)")

    assert results["corpora"]["planted"]["heldout_documents"] == 20
    assert results["corpora"]["planted"]["training_documents"] == 130  # 150 − 20 held out
    by_system = {}
    for p in results["points"]:
        by_system.setdefault(p["system"], []).append(p)
        assert np.isfinite(p["heldout_loglik"]) and p["heldout_loglik"] < 0
        assert p["elapsed_s"] > 0
    assert set(by_system) == {"scvb0", "mllib-online-tuned"}
    # sparklda: an evaluation on every pass boundary; MLlib: one fit per pass point
    assert {p["passes"] for p in by_system["scvb0"]} >= {1.0, 2.0}
    assert [p["passes"] for p in by_system["mllib-online-tuned"]] == [0.2]
    assert by_system["scvb0"][-1]["heldout_loglik"] > by_system["scvb0"][0]["heldout_loglik"]

    summ = results["systems"]["planted"]["scvb0"]["round_summary"]
    assert 0 < summ["kernel_share"] <= 1
    assert results["systems"]["planted"]["scvb0"]["cached_corpus"]["cached_bytes_per_pair"] > 0
    assert [r["minibatch_size"] for r in results["sweep"]] == [130]  # 0: the whole corpus
    assert [r["replicas"] for r in results["scaling"]] == [1, 2]
    assert results["scaling"][1]["training_documents"] == 2 * 130
    assert {(r["k"], r["dtype"]) for r in results["kernel"]} == {(20, "float32"), (20, "float64")}
    floor = results["floor"]  # the same rounds without the kernel
    assert floor["minibatch_size"] == 70 and floor["rounds_measured"] >= 2
    assert 0 < floor["job_s"] <= floor["round_s"]

    for name in ("results.json", "points.csv", "rounds.csv", "sweep.csv", "scaling.csv",
                 "kernel.csv", "curves.png"):
        assert (out / name).stat().st_size > 0, name
    saved = json.loads((out / "results.json").read_text())
    assert {t["id"] for t in saved["targets"]} >= {1, 5, 6, 7}
    assert all(t["status"] in ("PASS", "MISS") for t in saved["targets"])
    text = page.read_text()
    for needle in ("## Targets", "curves.png", "jobs/benchmark.py --quick (test)", "Spark 4",
                   "## Closing note", "## Minibatch size", "## Round cost against corpus size",
                   "## A round without the kernel"):
        assert needle in text, needle


def _fake_results():
    pts = []
    for s, series in {"scvb0": [(1, 2.0, -7.9), (5, 4.0, -7.4)],
                      "mllib-online-default": [(1, 10.0, -8.1), (5, 50.0, -7.7)]}.items():
        for passes, t, ll in series:
            pts.append({"corpus": "uci_kos", "system": s, "k": 50, "passes": float(passes),
                        "round": passes, "elapsed_s": t, "heldout_loglik": ll,
                        "perplexity": float(np.exp(-ll)), "eval_s": 0.1})
    return {
        "meta": {"command": "x", "date": "today", "alpha": 0.1, "run_seconds": 60.0,
                 "machine": {"cores": 2, "memory_bytes": 2 ** 34, "spark": "4.3.0",
                             "java": "openjdk 17", "master": "local[2]"}},
        "corpora": {"uci_kos": {"k": 50, "training_documents": 3000, "heldout_documents": 430,
                                "training_tokens": 4e5, "training_pairs": 3e5,
                                "vocab_size": 6906}},
        "systems": {"uci_kos": {"scvb0": {"points": pts[:2]},
                                "mllib-online-default": {"points": pts[2:]}}},
        "points": pts,
        "kernel": [{"k": 100, "dtype": "float32", "kernel_updates_per_s": 4e8,
                    "ceiling_updates_per_s": 2e9, "kernel_over_ceiling": 0.2, "docs": 10,
                    "pairs": 100, "distinct_terms": 50, "sweeps": 2}],
        "scaling": [{"corpus": "c", "replicas": 1, "median_round_s": 1.0},
                    {"corpus": "c", "replicas": 2, "median_round_s": 1.05}],
        "notes": {"4": "a note on the kernel"},
    }


def test_targets_and_report_from_known_figures(tmp_path):
    from sparklda.bench import report

    results = _fake_results()
    targets = {(t["id"], t.get("vs")): t for t in report.evaluate_targets(results)}
    t1 = targets[(1, "mllib-online-default")]
    assert t1["status"] == "PASS" and t1["value"] == 4.0  # −7.7 first reached at 4 s ≤ 50/10
    t2 = targets[(2, "mllib-online-default")]
    assert t2["status"] == "PASS" and t2["value"] == pytest.approx(0.3)
    assert targets[(3, "")]["status"] == "PASS"  # −7.4 at 4 s
    assert targets[(4, "")]["status"] == "MISS"  # 4e8 < 5e8
    assert targets[(5, "")]["status"] == "PASS"  # 5 % spread

    paths = report.write_files(results, str(tmp_path / "out"))
    text = report.render_markdown(results, list(targets.values()), paths, str(tmp_path))
    assert "a note on the kernel" in text  # a missed target carries its note
    assert "| 4 |" in text and "**MISS**" in text
    assert "out/curves.png" in text
