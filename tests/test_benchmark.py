"""The benchmark (``benchmarks/``, outside the package): a smoke test of the
--quick path on a tiny corpus, the report writer and the targets file, and
checks that the benchmark stays out of the library and uses only its public API.

No timing assertions: the figures of a benchmark run are judged in
docs/benchmarks.md, not here.
"""

from __future__ import annotations

import ast
import gzip
import json
import os
import re
import tomllib

import numpy as np
import pytest

from benchmarks.lda_bench import cli, report
from tests.helpers import ROOT, planted_docs


def write_uci(folder, docs, v):
    """A planted corpus as UCI files (docword.txt.gz, vocab.txt); empty documents
    appear only in the header's D, as in real UCI files."""
    os.makedirs(folder, exist_ok=True)
    lines = []
    for d, terms, counts in docs:
        for t, c in zip(terms, counts, strict=False):
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


@pytest.mark.slow
def test_quick_benchmark_end_to_end(spark, tiny_corpus, tmp_path):
    out = tmp_path / "out"
    page = tmp_path / "benchmarks.md"
    args = cli.parser().parse_args(
        [
            "--quick",
            "--corpora",
            f"{tiny_corpus}:4",
            "--heldout",
            "planted=20",
            "--systems",
            "scvb0,mllib-online-tuned",
            "--passes",
            "2",
            "--mllib-passes",
            "0.2",
            "--sweep-minibatch",
            "0",
            "--scaling",
            "1,2",
            "--param",
            "minibatch_size=70",
            "--out",
            str(out),
            "--report",
            str(page),
            "--notes",
            "",
        ]
    )
    results = cli.run(spark, args, command="benchmarks/run.py --quick (test)")

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
    assert "error" not in results["systems"]["planted"]["scvb0"]  # same held-out documents
    coh = results["systems"]["planted"]["scvb0"]["coherence"]  # of the final topics
    assert coh["u_mass"] < 0 and -1 <= coh["c_npmi"] <= 1
    assert "coherence of the final topics" in page.read_text()
    floor = results["floor"]  # rounds of the same shape without the kernel
    assert floor["minibatch_size"] == 70 and floor["slices"] == 2  # ceil(130 / 70)
    assert floor["rounds_measured"] == 2  # 2 passes of 2 rounds, the first pass left out
    assert 0 < floor["job_s"] <= floor["round_s"]
    assert floor["broadcast_bytes"] > 0

    for name in (
        "results.json",
        "points.csv",
        "rounds.csv",
        "sweep.csv",
        "scaling.csv",
        "kernel.csv",
        "curves.png",
    ):
        assert (out / name).stat().st_size > 0, name
    saved = json.loads((out / "results.json").read_text())
    assert {t["id"] for t in saved["targets"]} >= {1, 5, 6, 7}
    assert all(t["status"] in ("PASS", "MISS") for t in saved["targets"])
    text = page.read_text()
    for needle in (
        "## Targets",
        "curves.png",
        "benchmarks/run.py --quick (test)",
        "Spark 4",
        "## Closing note",
        "## Minibatch size",
        "## Round cost against corpus size",
        "## A round without the kernel",
    ):
        assert needle in text, needle


def _fake_results():
    pts = []
    for s, series in {
        "scvb0": [(1, 2.0, -7.9), (5, 4.0, -7.4)],
        "mllib-online-default": [(1, 10.0, -8.1), (5, 50.0, -7.7)],
    }.items():
        for passes, t, ll in series:
            pts.append(
                {
                    "corpus": "uci_kos",
                    "system": s,
                    "k": 50,
                    "passes": float(passes),
                    "round": passes,
                    "elapsed_s": t,
                    "heldout_loglik": ll,
                    "perplexity": float(np.exp(-ll)),
                    "eval_s": 0.1,
                }
            )
    return {
        "meta": {
            "command": "x",
            "date": "today",
            "alpha": 0.1,
            "run_seconds": 60.0,
            "machine": {
                "cores": 2,
                "memory_bytes": 2**34,
                "spark": "4.3.0",
                "java": "openjdk 17",
                "master": "local[2]",
            },
        },
        "corpora": {
            "uci_kos": {
                "k": 50,
                "training_documents": 3000,
                "heldout_documents": 430,
                "training_tokens": 4e5,
                "training_pairs": 3e5,
                "vocab_size": 6906,
            }
        },
        "systems": {
            "uci_kos": {"scvb0": {"points": pts[:2]}, "mllib-online-default": {"points": pts[2:]}}
        },
        "points": pts,
        "kernel": [
            {
                "k": 100,
                "dtype": "float32",
                "kernel_updates_per_s": 4e8,
                "ceiling_updates_per_s": 2e9,
                "kernel_over_ceiling": 0.2,
                "docs": 10,
                "pairs": 100,
                "distinct_terms": 50,
                "sweeps": 2,
            }
        ],
        "scaling": [
            {"corpus": "c", "replicas": 1, "median_round_s": 1.0},
            {"corpus": "c", "replicas": 2, "median_round_s": 1.05},
        ],
        "notes": {"4": "a note on the kernel"},
    }


def test_targets_and_report_from_known_figures(tmp_path):
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


def _stage_results():
    """_fake_results plus the connect, tasks, throughput and startup stages' results."""
    results = _fake_results()

    def path(name, round_s, hit):
        return {
            "path": name,
            "rounds": 18,
            "rounds_per_pass": 9,
            "median_round_s": round_s,
            "first_round_s": 2 * round_s,
            "median_job_s": round_s / 2,
            "median_kernel_s": 0.05,
            "build_s": 3.0,
            "train_s": 20.0,
            "heldout_documents": 1000,
            "final_heldout_loglik": -7.1,
            "time_to_reference_s": hit,
            "passes_to_reference": None if hit is None else 1.5,
            "evaluations": [],
        }

    results["connect"] = {
        "corpus": "lda_newsgroups",
        "k": 100,
        "minibatch_size": 2000,
        "passes": 2,
        "reference": {
            "system": "mllib-online-tuned",
            "passes": 5.0,
            "elapsed_s": 158.3,
            "heldout_loglik": -7.25,
            "source": "quality stage",
        },
        "server": {"master": "local[2]", "url": "sc://127.0.0.1:15002"},
        "paths": [
            path("classic", 0.5, 7.0),
            path("dataframe", 1.8, 25.0),
            path("connect", 1.5, None),
        ],
    }

    def tasks_row(parts, combine, round_s, merge_s, driver, merged):
        return {
            "parts_per_slice": parts,
            "combine": combine,
            "rounds": 7,
            "rounds_measured": 6,
            "median_round_s": round_s,
            "median_merge_s": merge_s,
            "median_job_s": round_s - merge_s,
            "median_kernel_s": 1.0,
            "median_shipped_bytes": 2e7,
            "median_driver_bytes": driver,
            "median_merged_bytes": merged,
            "cached_bytes": 1.5e8,
            "driver_python_peak_rss_bytes": 7e8,
            "driver_jvm_peak_rss_bytes": 2e9,
        }

    results["tasks"] = {
        "corpus": {
            "n_docs": 100000,
            "vocab_size": 50000,
            "k_true": 100,
            "mean_length": 150.0,
            "seed": 0,
            "reused": True,
            "generate_s": None,
            "path": "/x",
        },
        "k": 100,
        "minibatch_size": 16000,
        "passes": 1,
        "rows": [
            tasks_row(2, "executors", 4.0, 0.10, 3.9e7, 3.7e7),
            tasks_row(64, "executors", 9.0, 0.12, 4.9e7, 3.7e7),  # round ×2.25: MISS
            tasks_row(2, "driver", 3.0, 0.20, 3.2e7, 3.7e7),
            tasks_row(64, "driver", 12.0, 2.00, 9e8, 3.7e7),
        ],
    }
    results["throughput"] = {
        "corpus": {
            "n_docs": 700000,
            "vocab_size": 100000,
            "k_true": 100,
            "mean_length": 150.0,
            "seed": 0,
            "reused": False,
            "generate_s": 300.0,
            "path": "/y",
        },
        "k": 100,
        "max_default_rounds": 100,
        "sparklda": {
            "minibatch_size": 7000,
            "default": True,
            "rounds": 100,
            "build_s": 60.0,
            "pass_s": 100.0,
            "median_round_s": 0.28,
            "heldout_documents": 2000,
            "heldout_loglik": -8.41,
            "training_documents": 700000,
            "training_tokens": 1.05e8,
            "training_pairs": 8e7,
        },
        "reference": {
            "minibatch_size": 2000,
            "default": False,
            "rounds": 350,
            "build_s": 90.0,
            "pass_s": 250.0,
            "median_round_s": 0.2,
            "heldout_documents": 2000,
            "heldout_loglik": -8.40,
        },
        "mllib": {
            "settings": {"optimizer": "online", "subsamplingRate": 0.05},
            "documents": 700000,
            "max_iter": [1, 3],
            "fit_s": [90.0, 290.0],
            "iteration_s": 100.0,
            "iterations_per_pass": 20.0,
            "passes_timed": 0.1,
            "pass_s": 2000.0,
        },
        "speedup": 20.0,
        "build_over_pass": 0.6,
    }
    results["startup"] = [
        {
            "cache": "warm",
            "corpus": "sample:kos",
            "k": 50,
            "minibatch_size": 1000,
            "rounds": 8,
            "first_round_s": 0.9,
            "first_kernel_s": 0.3,
            "steady_round_s": 0.5,
            "steady_kernel_s": 0.1,
            "build_s": 2.0,
            "process_s": 30.0,
        },
        {
            "cache": "cold",
            "corpus": "sample:kos",
            "k": 50,
            "minibatch_size": 1000,
            "rounds": 8,
            "first_round_s": 12.0,
            "first_kernel_s": 11.0,
            "steady_round_s": 0.5,
            "steady_kernel_s": 0.1,
            "build_s": 2.0,
            "process_s": 60.0,
        },
    ]
    return results


def test_stage_targets_and_sections_from_known_figures(tmp_path):
    """The connect, tasks, throughput and startup stages: their targets and their
    sections of the page, from figures given here."""
    results = _stage_results()
    rows = report.evaluate_targets(results)
    by_id = {}
    for r in rows:
        by_id.setdefault(r["id"], []).append(r)
    assert by_id[9][0]["value"] == pytest.approx(3.0) and by_id[9][0]["status"] == "MISS"
    assert by_id[10][0]["value"] == pytest.approx(1.2) and by_id[10][0]["status"] == "PASS"
    assert by_id[11][0]["value"] == pytest.approx(2.25) and by_id[11][0]["status"] == "MISS"
    # the largest driver-inbound / merged ratio of the executors' combine: 49/37
    assert by_id[12][0]["value"] == pytest.approx(4.9 / 3.7) and by_id[12][0]["status"] == "MISS"
    assert "with the driver merge: 2 tasks 0.86, 64 tasks 24.32" in by_id[12][0]["measured"]
    assert by_id[13][0]["value"] == pytest.approx(20.0) and by_id[13][0]["status"] == "MISS"
    assert by_id[14][0]["value"] == pytest.approx(0.6) and by_id[14][0]["status"] == "PASS"
    assert [r["value"] for r in by_id[15]] == [pytest.approx(1.8)]  # warm only
    assert by_id[15][0]["status"] == "PASS"

    paths = report.write_files(results, str(tmp_path / "out"))
    for name in ("tasks.csv", "connect.csv", "startup.csv"):
        assert (tmp_path / "out" / name).stat().st_size > 0, name
    text = report.render_markdown(results, rows, paths, str(tmp_path))
    for needle in (
        "## Tasks per round (generated corpus)",
        "| 64 | executors | 7 | 9.000 | 8.880 | 1.000 | 0.1200 |",
        "## Throughput on a generated corpus",
        "**MLlib is timed on a fraction of a pass and scaled:**",
        "(100 rounds; `sparklda.params.default_minibatch_size`: at most 100 rounds a pass)",
        "| scvb0 (default) | 7,000 (100) | 100.0 | 60.0 | 0.280 | -8.4100 |",
        "| scvb0 | 2,000 (350) | 250.0 | 90.0 | 0.200 | -8.4000 |",
        "the default minibatch (7,000 documents, 100 rounds) scores -8.4100 nats per held-out "
        "token, the 2,000-document minibatch (350 rounds) -8.4000 (-0.0100; 2,000 held-out "
        "documents, document completion), at 2.5× the time per pass.",
        "## Startup in a fresh process",
        "| cold | 8 | 12.00 |",
        "## Spark Connect against classic",
        "| connect | 18 | 1.500 | 3.000 |",
        "| never |",
        "mllib-online-tuned's 5-pass held-out log-likelihood (-7.2500",
    ):
        assert needle in text, needle
    # the throughput section names the cap of the run's default, not today's; results
    # from before the cap was recorded ran with 100
    results["throughput"]["max_default_rounds"] = 50
    assert "at most 50 rounds a pass" in "\n".join(report._throughput_section(results))
    del results["throughput"]["max_default_rounds"]
    assert "at most 100 rounds a pass" in "\n".join(report._throughput_section(results))
    # without the stages' results, none of their sections appears
    plain = report.render_markdown(_fake_results(), [], paths, str(tmp_path))
    for title in ("## Tasks per round", "## Throughput", "## Startup", "## Spark Connect"):
        assert title not in plain


@pytest.mark.slow
def test_fit_holds_out_the_benchmark_documents(spark, tiny_corpus):
    """sparklda's fit, given the run's heldout_count and seed, holds out exactly the
    documents MLlib is scored on; another seed is caught."""
    from benchmarks.lda_bench.data import prepare
    from benchmarks.lda_bench.suite import CorpusProbe, HeldoutMismatch, check_same_heldout
    from sparklda.api import fit
    from sparklda.params import TrainParams

    bc = prepare(spark, "planted", tiny_corpus, heldout_count=20, seed=0)
    try:
        assert len(bc.heldout_ids) == 20 and bc.n_train_docs == 130
        assert set(bc.heldout_ids).isdisjoint(
            r.doc_id for r in bc.train_df.select("doc_id").collect()
        )
        probe = CorpusProbe(spark.sparkContext)
        fit(
            bc.sparklda_source(),
            TrainParams(k=4, passes=1, **bc.holdout_params()),
            callbacks=[probe],
        )
        check_same_heldout(bc, probe, "scvb0", check_ids=True)
        # Spark's storage figures of the training blocks, read once the rounds cached
        # them (this small corpus is laid out on the driver: nothing is cached before)
        assert probe.cached["laid_out_on"] == "driver"
        storage = probe.cached["spark"]
        assert storage["cached_partitions"] == storage["partitions"] > 0
        assert storage["mem_bytes"] > 0

        other = CorpusProbe(spark.sparkContext)
        fit(
            bc.sparklda_source(),
            TrainParams(k=4, passes=1, **{**bc.holdout_params(), "seed": 1}),
            callbacks=[other],
        )
        with pytest.raises(HeldoutMismatch, match="other documents"):
            check_same_heldout(bc, other, "scvb0", check_ids=True)
    finally:
        bc.unpersist()


@pytest.mark.slow  # three warm-up fits on a whole corpus (about 40 s)
def test_warm_up_fits_the_first_sparklda_system_on_the_whole_corpus(
    spark, tiny_corpus, monkeypatch
):
    """Before the timed fits, WARM_UP_FITS untimed fits of the run's first sparklda
    system (with its overrides) on every training document, each of the timed fits'
    passes, evaluated only at its end, so that a mode timed in one fit is as warm as MLlib's
    fits of more passes; the report lists each warm-up fit's seconds per corpus."""
    from benchmarks.lda_bench import suite
    from benchmarks.lda_bench.data import prepare
    from benchmarks.lda_bench.report import _warm_up_lines

    seen = []
    real_fit = suite.fit

    def recording_fit(source, params, *a, **k):
        result = real_fit(source, params, *a, **k)
        seen.append((params, result))
        return result

    monkeypatch.setattr(suite, "fit", recording_fit)
    bc = prepare(spark, "planted", tiny_corpus, heldout_count=20, seed=0)
    try:
        spec = suite.CorpusSpec("planted", tiny_corpus, 4, 20)
        opts = suite.Options(
            corpora=[spec], systems=["mllib-online-default", "cvb0[burnin=1]", "scvb0"], passes=2
        )
        took = suite.warm_up(spark, bc, spec, opts)
    finally:
        bc.unpersist()
    assert sorted(took) == ["cvb0_s", "mllib_s", "passes"] and took["passes"] == 2
    assert len(took["cvb0_s"]) == suite.WARM_UP_FITS >= 2
    assert all(v > 0 for v in took["cvb0_s"]) and took["mllib_s"] > 0
    assert len(seen) == suite.WARM_UP_FITS
    for params, result in seen:
        assert params.algorithm == "cvb0" and params.burnin == 1 and params.passes == 2
        assert params.k == 4 and params.eval_every == 0 and len(result.evaluations) == 1  # the end
        assert result.model.metadata["documents_seen"] == 2 * bc.n_train_docs == 260
    lines = _warm_up_lines({"planted": {"warm_up_s": took}, "older": {}})
    text = " ".join(lines)
    assert f"planted: {suite.WARM_UP_FITS} untimed 2-pass cvb0 fits of the whole corpus" in text
    assert ", ".join(f"{x:.1f}" for x in took["cvb0_s"]) + " s)" in text
    assert "On older (an earlier run)" in text
    # results of before the repeated warm-up: one one-pass fit's seconds
    old = " ".join(_warm_up_lines({"kos": {"warm_up_s": {"scvb0_s": 1.3, "mllib_s": 2.1}}}))
    assert "kos: an untimed one-pass scvb0 fit of the whole corpus (1.3 s)" in old


@pytest.mark.slow
def test_gensim_system_trains_pass_by_pass(spark, tiny_corpus):
    """gensim's LdaMulticore, the benchmark's third system, trains one pass per update on
    the same training documents and is scored after each (its update() takes no passes
    argument: the benchmark's gensim rows once all read "failed: TypeError")."""
    from benchmarks.lda_bench.data import prepare
    from benchmarks.lda_bench.systems import run_gensim

    bc = prepare(spark, "planted", tiny_corpus, heldout_count=20, seed=0)
    try:
        out = run_gensim(bc, k=4, passes=2, seed=0)
    finally:
        bc.unpersist()
    points = out["points"]
    assert [p["passes"] for p in points] == [1.0, 2.0]
    assert all(np.isfinite(p["heldout_loglik"]) and p["heldout_loglik"] < 0 for p in points)
    assert points[1]["elapsed_s"] > points[0]["elapsed_s"] > 0


def test_only_runs_merge_their_stages_into_the_existing_results(tmp_path):
    """An --only run replaces the keys of its stages and keeps the rest, so stages run
    separately (tasks here, connect elsewhere) add up on one page; each merged stage
    keeps its own command, machine and date."""
    base = _stage_results()
    base_meta = dict(base["meta"])
    new = {
        "meta": {**base_meta, "command": "run.py --only tasks", "date": "2026-11-23 22:00 UTC"},
        "corpora": {},
        "systems": {},
        "points": [],
        "tasks": {**base["tasks"], "k": 7},
    }
    merged = cli.merge_stages(base, new, cli.only_stages("tasks"))
    assert merged["tasks"]["k"] == 7
    for key in ("connect", "throughput", "startup", "points", "systems", "corpora"):
        assert merged[key] == base[key], key
    assert merged["meta"] == base_meta
    assert merged["stage_runs"]["tasks"]["command"] == "run.py --only tasks"
    # a second stage adds to the first
    again = cli.merge_stages(merged, {**new, "startup": []}, ["startup"])
    assert again["tasks"]["k"] == 7 and again["startup"] == []
    assert set(again["stage_runs"]) == {"tasks", "startup"}
    # merging a merged file's stage keeps the run it came from, not that file's meta
    assert cli.merge_stages(base, again, ["tasks"])["stage_runs"]["tasks"]["command"] == (
        "run.py --only tasks"
    )
    paths = report.write_files(again, str(tmp_path))
    text = report.render_markdown(again, report.evaluate_targets(again), paths, str(tmp_path))
    assert "Measured 2026-11-23 22:00 UTC with `run.py --only tasks`" in text


def test_stage_options(tiny_corpus):
    """--only runs the stages named and nothing else; --quick leaves the tasks,
    throughput, startup and Connect stages out unless their options ask for them."""
    base = ["--corpora", f"{tiny_corpus}:4", "--connect", f"{tiny_corpus}:4"]
    opts = cli.resolve_options(cli.parser().parse_args([*base, "--only", "connect,startup"]))
    assert opts.connect_corpus.name == "planted" and opts.connect_corpus.k == 4
    assert opts.startup == ["warm", "cold"]
    assert (opts.corpora, opts.systems, opts.kernel_ks) == ([], [], ())
    assert (opts.tasks_parts, opts.throughput_docs, opts.sweep_minibatch) == ([], 0, [])

    opts = cli.resolve_options(
        cli.parser().parse_args(["--quick", "--corpora", f"{tiny_corpus}:4"])
    )
    assert opts.connect_corpus is None and opts.startup == [] and opts.tasks_parts == []
    assert opts.throughput_docs == 0
    opts = cli.resolve_options(
        cli.parser().parse_args(
            ["--quick", "--corpora", f"{tiny_corpus}:4", "--tasks", "2,4", "--tasks-docs", "500"]
        )
    )
    assert opts.tasks_parts == [2, 4] and opts.tasks_docs == 500
    assert opts.tasks_combine == ["executors", "driver"]
    with pytest.raises(SystemExit):
        cli.resolve_options(cli.parser().parse_args([*base, "--only", "everything"]))
    with pytest.raises(SystemExit):
        cli.resolve_options(cli.parser().parse_args([*base, "--throughput-mllib-iters", "3,1"]))


def test_systems_cannot_change_the_heldout_documents():
    from benchmarks.lda_bench.suite import parse_system

    assert parse_system("scvb0[tau_phi=100;s_phi=10]") == ("scvb0", {"tau_phi": 100, "s_phi": 10})
    with pytest.raises(ValueError, match="seed"):
        parse_system("scvb0[seed=3]")
    args = cli.parser().parse_args(["--param", "heldout_count=5", "--corpora", ROOT])
    with pytest.raises(ValueError, match="heldout_count"):
        cli.resolve_options(args)


def test_targets_file_is_the_judge(tmp_path):
    spec = report.load_targets()
    assert spec["system"] == "scvb0"
    by_id = {t["id"]: t for t in spec["targets"]}
    assert sorted(by_id) == list(range(1, 16))
    assert (by_id[4]["comparison"], by_id[4]["threshold"]) == (">=", 5e8)
    # the verdict follows the file: a lower kernel threshold passes the same figures
    by_id[4]["threshold"] = 3e8
    rows = {r["id"]: r for r in report.evaluate_targets(_fake_results(), spec=spec)}
    assert rows[4]["status"] == "PASS" and rows[4]["target"].startswith("K=100 float32 ≥ 3e+08")

    bad = tmp_path / "targets.toml"
    bad.write_text(
        '[[target]]\nid = 1\nmeasure = "kernel_share"\ncomparison = "=="\n'
        'threshold = 0.6\ndescription = "x"\n'
    )
    with pytest.raises(ValueError, match=r"targets.toml: target 1: 'comparison'"):
        report.load_targets(str(bad))
    bad.write_text(
        '[[target]]\nid = 4\nmeasure = "kernel_throughput"\ncomparison = ">="\n'
        'threshold = 5e8\ndescription = "x"\n'
    )
    with pytest.raises(ValueError, match="needs k, dtype"):
        report.load_targets(str(bad))


def test_committed_page_regenerates_from_its_results():
    """docs/benchmarks.md is what the report writer and targets.toml make of the
    committed results.json (the recorded command line aside)."""
    docs = os.path.join(ROOT, "docs")
    with open(os.path.join(docs, "benchmarks", "results.json")) as f:
        results = json.load(f)
    results["notes"] = cli.load_notes(cli.DEFAULT_NOTES) or results.get("notes", {})
    spec = report.load_targets()
    targets = report.evaluate_targets(results, spec=spec)
    paths = {
        "json": os.path.join(docs, "benchmarks", "results.json"),
        "plot": os.path.join(docs, "benchmarks", "curves.png"),
        "breakdown_plot": os.path.join(docs, "benchmarks", "round_breakdown.png"),
        "tasks_plot": os.path.join(docs, "benchmarks", "round_tasks.png"),
    }
    for path in paths.values():  # the figures the page shows are committed beside it
        assert os.path.getsize(path) > 0, path
    text = report.render_markdown(results, targets, paths, docs, spec)
    with open(os.path.join(docs, "benchmarks.md")) as f:
        committed = f.read()

    def lines(page):
        return [x for x in page.splitlines() if not x.startswith("- **Command:**")]

    assert lines(text) == lines(committed)
    assert "| 6 | lda_newsgroups | kernel ≥ 60% of a round at default settings |" in text


def test_report_draws_the_round_figures_from_results_alone(tmp_path):
    """The round-time breakdown and round time against tasks are drawn from a results.json
    (the committed one) into PNGs that the page shows."""
    with open(os.path.join(ROOT, "docs", "benchmarks", "results.json")) as f:
        results = json.load(f)
    paths = report.write_files(results, str(tmp_path))
    for key, name in (("breakdown_plot", "round_breakdown.png"), ("tasks_plot", "round_tasks.png")):
        assert paths[key] == str(tmp_path / name)
        with open(paths[key], "rb") as f:
            assert f.read(8) == b"\x89PNG\r\n\x1a\n"
    text = report.render_markdown(results, [], paths, str(tmp_path))
    assert "![where a round's time goes](round_breakdown.png)" in text
    assert "![round time against tasks per round](round_tasks.png)" in text
    del results["tasks"]
    for by_sys in results["systems"].values():
        for out in by_sys.values():
            out.pop("round_summary", None)
    paths = report.write_files(results, str(tmp_path / "bare"))
    assert "breakdown_plot" not in paths and "tasks_plot" not in paths


# --------------------------------------------------------------------------
# the benchmark stays outside the library and uses its public API only


def _python_files(folder):
    for root, dirs, files in os.walk(folder):
        dirs[:] = [d for d in dirs if d != "__pycache__"]
        for name in files:
            if name.endswith(".py"):
                yield os.path.join(root, name)


def _imports(path):
    """(module, imported names) of every import statement of a file."""
    with open(path) as f:
        tree = ast.parse(f.read(), path)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                yield a.name, ()
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            yield node.module or "", tuple(a.name for a in node.names)


def test_library_never_imports_the_benchmark():
    for path in _python_files(os.path.join(ROOT, "sparklda")):
        for module, _ in _imports(path):
            assert module.split(".")[0] != "benchmarks", f"{path} imports {module}"
    assert not os.path.exists(os.path.join(ROOT, "sparklda", "bench"))


#: What the benchmark may import from sparklda: its public modules (the generator
#: behind ``sparklda generate`` draws the scale stages' corpora).
PUBLIC = {
    "sparklda.api",
    "sparklda.block",
    "sparklda.cli.generate",  # the corpus generator's Spark entry (`sparklda generate`)
    "sparklda.corpus",
    "sparklda.cost",  # the cost model the placement table is printed from
    "sparklda.errors",  # the error types a caller catches (a mode refusing a variant)
    "sparklda.evaluation",
    "sparklda.kernels",
    "sparklda.limits",  # the memory model (driver_need, format_bytes)
    "sparklda.modes",
    "sparklda.params",
    "sparklda.synthetic",
    "sparklda.training",
}


def test_benchmark_uses_the_public_api_only():
    seen = set()
    for path in _python_files(os.path.join(ROOT, "benchmarks")):
        for module, names in _imports(path):
            if module.split(".")[0] != "sparklda" or module == "sparklda":
                continue
            seen.add(module)
            assert module in PUBLIC, f"{path} imports {module}"
            private = [n for n in names if n.startswith("_")]
            assert not private, f"{path} imports private {private} from {module}"
        with open(path) as f:
            text = f.read()
        for internal in (".slice_terms", "kernels.config"):
            assert internal not in text, f"{path} uses {internal}"
        private = re.findall(r"\bsparklda(?:\.\w+)*\._(?!_)\w*", text)
        assert not private, f"{path} uses {private}"
    assert {"sparklda.api", "sparklda.corpus", "sparklda.evaluation"} <= seen


def test_wheel_leaves_the_benchmark_out_and_keeps_the_sample_data():
    from setuptools import find_packages

    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
        tool = tomllib.load(f)["tool"]["setuptools"]
    packages = find_packages(ROOT, **tool["packages"]["find"])
    assert "sparklda" in packages and "sparklda.kernels" in packages
    assert not [p for p in packages if p.startswith("benchmarks") or ".bench" in p], packages
    shipped = tool["package-data"]["sparklda"]
    assert "data/kos/*" in shipped
    for name in ("docword.txt.gz", "vocab.txt"):
        assert os.path.exists(os.path.join(ROOT, "sparklda", "data", "kos", name))


def test_ceiling_loop_is_compiled_like_the_kernels():
    from benchmarks.lda_bench.kernel import CEILING_JIT
    from sparklda.kernels.config import FASTMATH, JIT_OPTIONS

    assert CEILING_JIT == {**JIT_OPTIONS, "fastmath": FASTMATH}


def _priors_rows():
    base = {"corpus": "uci_kos", "k": 20, "mode": "cvb0", "passes": 20, "eta": 0.01}
    rows = []
    for variant, score, total in (("fixed", -7.4555, 2.0), ("alpha", -7.4540, 2.0)):
        rows.append(
            {
                **base,
                "variant": variant,
                "heldout_loglik": score,
                "gain": None if variant == "fixed" else score + 7.4555,
                "alpha_sum": total,
                "alpha_min": 0.0337 if variant == "alpha" else 0.1,
                "alpha_max": 0.1377 if variant == "alpha" else 0.1,
                "u_mass": -1.5,
                "c_npmi": 0.05,
                "fit_s": 80.0,
            }
        )
    return rows


def test_priors_stage_options_section_and_merge(tmp_path, tiny_corpus):
    """--only priors runs that stage alone; its rows become a section of the page and
    --merge-into adds them to other results, keeping those results' figures."""
    args = ["--priors", f"{tiny_corpus}:4", "--priors-modes", "scvb0=2,svb=1"]
    others = ["--corpora", f"{tiny_corpus}:4", "--connect", f"{tiny_corpus}:4"]
    opts = cli.resolve_options(cli.parser().parse_args([*args, "--only", "priors"]))
    assert [s.name for s in opts.priors_corpora] == ["planted"]
    assert opts.priors_modes == {"scvb0": 2, "svb": 1}
    assert opts.priors_variants == ["fixed", "alpha", "alpha+sum", "eta"]
    assert (opts.corpora, opts.kernel_ks, opts.connect_corpus) == ([], (), None)
    everything = cli.resolve_options(cli.parser().parse_args([*others, *args[:2]]))
    assert [s.name for s in everything.priors_corpora] == ["planted"]
    quick = cli.resolve_options(cli.parser().parse_args([*others, "--quick"]))
    assert quick.priors_corpora == []
    with pytest.raises(SystemExit):
        cli.resolve_options(cli.parser().parse_args([*args, "--priors-variants", "beta"]))
    with pytest.raises(SystemExit):
        cli.resolve_options(cli.parser().parse_args([*args, "--priors-modes", "lda=3"]))

    base = _fake_results()
    base_path = tmp_path / "base.json"
    base_path.write_text(json.dumps(base))
    run = {
        "meta": {"command": "run.py --only priors", "date": "now"},
        "priors": {
            "alpha": 0.1,
            "seed": 0,
            "modes": {"cvb0": 20},
            "variants": ["fixed", "alpha"],
            "rows": _priors_rows(),
        },
    }
    merged = cli.merge_into(str(base_path), run)
    assert merged["priors"] == run["priors"] and merged["points"] == base["points"]
    assert merged["meta"]["merged"] == [
        {"stages": ["priors"], "command": "run.py --only priors", "date": "now"}
    ]
    # another corpus's run adds its rows; a corpus measured again replaces its own
    base_path.write_text(json.dumps(merged))
    other_rows = [{**r, "corpus": "lda_newsgroups"} for r in _priors_rows()]
    other = {"meta": run["meta"], "priors": {**run["priors"], "rows": other_rows}}
    both = cli.merge_into(str(base_path), other)
    assert both["priors"]["rows"] == run["priors"]["rows"] + other_rows
    # the page names the run of each merged stage: both runs whose rows it keeps
    assert merged["stage_runs"]["priors"]["command"] == "run.py --only priors"
    assert [r["command"] for r in both["stage_runs"]["priors"]] == ["run.py --only priors"] * 2
    assert report._stage_run(both, "priors")[1].startswith("Measured now with `run.py")
    base_path.write_text(json.dumps(both))
    again = cli.merge_into(str(base_path), run)
    assert again["priors"]["rows"] == other_rows + run["priors"]["rows"]
    # another mode on a corpus adds to that corpus's rows
    svb_rows = [{**r, "mode": "svb"} for r in _priors_rows()]
    base_path.write_text(json.dumps(again))
    svb = {"meta": run["meta"], "priors": {**run["priors"], "rows": svb_rows}}
    assert (
        cli.merge_into(str(base_path), svb)["priors"]["rows"] == again["priors"]["rows"] + svb_rows
    )
    paths = report.write_files(merged, str(tmp_path / "out"))
    assert (tmp_path / "out" / "priors.csv").stat().st_size > 0
    text = report.render_markdown(merged, [], paths, str(tmp_path))
    assert "## Learned priors" in text
    assert "| uci_kos | 20 | cvb0 | 20 | fixed | -7.4555 | — | 2.000 | 0.1000 |" in text
    assert (
        "| uci_kos | 20 | cvb0 | 20 | alpha | -7.4540 | +0.0015 | 2.000 | 0.0337 | 0.1377 |" in text
    )
    assert "| -1.500 | 0.0500 | 80 |" in text
    assert "## Learned priors" not in report.render_markdown(base, [], paths, str(tmp_path))
    # rows of a run with --priors-no-coherence have no coherence: a dash in its columns
    bare = [{k: v for k, v in r.items() if k not in ("u_mass", "c_npmi")} for r in _priors_rows()]
    plain = {**merged, "priors": {**merged["priors"], "rows": bare}}
    assert "| 0.01 | — | — | 80 |" in report.render_markdown(plain, [], paths, str(tmp_path))


class _FakeContext:
    """What ``report._driver_memory`` reads of a SparkContext: its conf, and a JVM whose
    maximum heap is ``heap`` (None: no JVM) and which reads sizes as ``jvm``'s Spark does."""

    def __init__(self, conf: str | None, heap: int | None, jvm=None):
        from types import SimpleNamespace as NS

        self._conf = {} if conf is None else {"spark.driver.memory": conf}
        if heap is not None:
            runtime = NS(maxMemory=lambda: heap)
            self._jvm = NS(java=NS(lang=NS(Runtime=NS(getRuntime=lambda: runtime))), org=jvm.org)

    def getConf(self):
        from types import SimpleNamespace as NS

        return NS(get=lambda key, default=None: self._conf.get(key, default))


@pytest.mark.slow
def test_driver_memory_is_the_jvms_not_only_the_confs(spark):
    """spark-submit without --driver-memory starts a 1 GiB JVM that a builder's
    spark.driver.memory no longer changes: the report says so instead of the conf."""
    gib, jvm = 2**30, spark.sparkContext._jvm

    def said(conf, heap):
        return report._driver_memory(_FakeContext(conf, heap, jvm))

    assert said("8g", int(7.1 * gib)) == "8g"
    assert said("8g", int(0.96 * gib)) == "8g set, but the JVM's heap is 1.0 GiB"
    # spark-submit --driver-memory 12g, then a builder's 8g
    assert said("8g", int(11.5 * gib)) == "8g set, but the JVM's heap is 11.5 GiB"
    assert said("4096", int(3.6 * gib)) == "4096"  # unit-less: MiB, as Spark reads it
    assert said("4096", int(0.9 * gib)) == "4096 set, but the JVM's heap is 0.9 GiB"
    assert said(None, int(0.9 * gib)) == "1g"
    assert said("8g", None) == "8g"  # no JVM to ask
    assert said("lots", int(gib)) == "lots"


def test_under_spark_submit_the_session_keeps_its_driver_memory(monkeypatch):
    """spark-submit --driver-memory sized the JVM already: the benchmark's own
    --driver-memory (default 8g) must not overwrite it in the conf the report reads."""
    monkeypatch.delenv("PYSPARK_GATEWAY_PORT", raising=False)
    assert cli.session_settings("8g")["spark.driver.memory"] == "8g"
    monkeypatch.setenv("PYSPARK_GATEWAY_PORT", "1")  # spark-submit's Python
    assert "spark.driver.memory" not in cli.session_settings("8g")


def test_the_report_names_how_the_run_was_started(monkeypatch):
    monkeypatch.delenv("PYSPARK_GATEWAY_PORT", raising=False)
    assert cli.launch_command() == "python benchmarks/run.py"
    monkeypatch.setenv("PYSPARK_GATEWAY_PORT", "1")  # spark-submit's Python
    assert cli.launch_command() == "spark-submit benchmarks/run.py"


def test_connect_mode_hides_spark_submits_master(monkeypatch):
    """spark-submit sets MASTER for its Python; pyspark refuses a remote session beside
    it, so the Connect stage runs without it and gives it back."""
    from benchmarks.lda_bench import connect

    monkeypatch.setenv("MASTER", "local[*]")
    monkeypatch.delenv(connect.CONNECT_MODE, raising=False)
    with connect.connect_mode(True):
        assert "MASTER" not in os.environ and os.environ[connect.CONNECT_MODE] == "1"
    assert os.environ["MASTER"] == "local[*]" and connect.CONNECT_MODE not in os.environ
    with connect.connect_mode(False):
        assert os.environ["MASTER"] == "local[*]"


def test_merge_into_takes_a_quality_run_and_refuses_a_run_with_no_stage(tmp_path):
    """--merge-into of a quality-stage run replaces the quality figures (the page's
    targets are computed from them) and names that run; a run holding no stage's
    figures is refused instead of being listed as merged while changing nothing."""
    base = _fake_results()
    base["tasks"] = {"rows": [1]}
    base["notes"] = {"1": "kept"}
    base_path = tmp_path / "base.json"
    base_path.write_text(json.dumps(base))
    later = {k: v for k, v in _fake_results().items() if k not in cli.MERGE_KEYS}
    for p in later["points"]:
        p["elapsed_s"] /= 2
    later["meta"] = {**later["meta"], "command": "run.py --only quality", "date": "later"}
    later["notes"] = {"1": "the run's own"}
    merged = cli.merge_into(str(base_path), later)
    assert merged["points"] == later["points"] != base["points"]
    assert merged["systems"] == later["systems"] and merged["corpora"] == later["corpora"]
    assert merged["tasks"] == base["tasks"] and merged["notes"] == {"1": "kept"}
    assert merged["stage_runs"]["quality"]["command"] == "run.py --only quality"
    assert merged["meta"]["merged"] == [
        {"stages": ["quality"], "command": "run.py --only quality", "date": "later"}
    ]
    assert merged["meta"]["command"] == "x"  # the page's head still names the full run
    empty = {"meta": later["meta"], "corpora": {}, "systems": {}, "points": []}
    with pytest.raises(ValueError, match="no stage's figures"):
        cli.merge_into(str(base_path), empty)


def test_map_stage_runs_only_when_named_and_priors_skip_what_a_mode_refuses(tiny_corpus):
    """--only map fits MAP-EM and MLlib's EM on the --map corpora, MLlib at two
    iteration counts; without --only map (even in a full run) the stage is off. The
    priors stage takes any registered mode and leaves out the variants a mode refuses
    (MAP-EM learns no prior)."""
    from benchmarks.lda_bench import map_em, priors

    args = ["--map", f"{tiny_corpus}:4", "--map-mllib-iters", "1,3"]
    opts = cli.resolve_options(cli.parser().parse_args([*args, "--only", "map"]))
    assert [(s.name, s.k) for s in opts.map_corpora] == [("planted", 4)]
    assert opts.map_mllib_iters == (1, 3) and opts.corpora == [] and opts.priors_corpora == []
    others = ["--corpora", f"{tiny_corpus}:4", "--connect", f"{tiny_corpus}:4"]
    full = cli.resolve_options(
        cli.parser().parse_args([*args, *others, "--priors", f"{tiny_corpus}:4"])
    )
    assert full.map_corpora == [] and full.priors_corpora
    with pytest.raises(SystemExit, match="--map-mllib-iters"):
        cli.resolve_options(
            cli.parser().parse_args([*args[:2], "--only", "map", "--map-mllib-iters", "3"])
        )
    assert "map" in cli.STAGES and cli.STAGE_KEYS["map"] == ("map",) and "map" in cli.MERGE_KEYS
    assert map_em.default_priors(50) == (2.0, 1.1)
    assert priors.parse_passes("map=3,cvb0=2") == {"map": 3, "cvb0": 2}
    assert priors.supports("cvb0", "alpha") and priors.supports("map", "fixed")
    assert not priors.supports("map", "alpha") and not priors.supports("map", "eta")


def test_map_stage_counts_the_cpu_of_the_session_processes_even_ended_ones():
    """The map stage's CPU seconds: this process as the driver, the processes under it
    by kind, per iteration between two readings; a child that has ended keeps the time
    its last reading saw (its parent's children's time need not include it)."""
    import subprocess
    import sys
    import time

    from benchmarks.lda_bench import map_em

    before = map_em.session_cpu()
    assert set(before) == {"driver", "jvm", "python"} and before["driver"] > 0
    spin = "import time\nt = time.process_time()\nwhile time.process_time() - t < 0.3: pass\n"
    child = subprocess.Popen([sys.executable, "-c", spin + "time.sleep(30)"])
    try:
        deadline = time.time() + 20
        seen = map_em.session_cpu()
        while seen["python"] - before["python"] < 0.25 and time.time() < deadline:
            time.sleep(0.1)
            seen = map_em.session_cpu()
    finally:
        child.kill()
        child.wait()
    after = map_em.session_cpu()
    assert after["python"] - before["python"] >= 0.25  # the ended child still counts
    assert after["python"] >= seen["python"] and after["jvm"] >= before["jvm"]
    per = map_em.cpu_per_iter(before, after, 2)
    assert per["cpu_python_iter_s"] == pytest.approx((after["python"] - before["python"]) / 2)
    assert per["cpu_iter_s"] == pytest.approx(sum(after[k] - before[k] for k in after) / 2)
    assert map_em.cpu_per_iter({}, after, 2) == {}
