"""Benchmark sparklda against Spark MLlib's LDA: ``spark-submit jobs/benchmark.py``.

One run, one SparkSession, one cached training DataFrame per corpus shared by
every system (each registered sparklda mode, ``pyspark.ml.clustering.LDA``
online at Spark's defaults and at tuned settings, gensim's ``LdaMulticore``
when installed), all scored by the same held-out document-completion code on
the same held-out documents. Writes ``results.json`` and CSVs of every
measurement plus ``curves.png`` to ``--out`` and regenerates
``docs/benchmarks.md``.

The committed command (about 25-30 minutes on 2 cores), after
``pip install -e ".[bench]"`` (psutil for the driver's peak memory, matplotlib
for the plot)::

    spark-submit --driver-memory 8g jobs/benchmark.py

A smoke run in about a minute: ``spark-submit jobs/benchmark.py --quick --out /tmp/b
--report /tmp/b/benchmarks.md``.
"""

from __future__ import annotations

import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _common  # noqa: E402

log = _common.logging.getLogger("sparklda.bench")

ROOT = os.path.dirname(_common.HERE)
DEFAULT_DATA = os.path.join(ROOT, "..", "shared", "data")
DEFAULT_CORPORA = "uci_kos:50,lda_newsgroups:100"
DEFAULT_VARIANTS = "scvb0[tau_phi=100],scvb0[minibatch_size=500]"
DEFAULT_NOTES = os.path.join(ROOT, "docs", "benchmarks", "notes.toml")


def parser():
    p = _common.base_parser(__doc__.splitlines()[0])
    p.set_defaults(master=None)
    p.add_argument("--corpora", default=DEFAULT_CORPORA,
                   help="comma-separated NAME[:K] (a folder under --data-dir) or PATH[:K] "
                        f"(a UCI folder); default {DEFAULT_CORPORA}")
    p.add_argument("--data-dir", default=DEFAULT_DATA, help="folder of the shared corpora")
    p.add_argument("--systems", default=None,
                   help="comma-separated systems (default: every registered sparklda mode, "
                        "mllib-online-default, mllib-online-tuned, gensim-ldamulticore if "
                        "gensim is installed)")
    p.add_argument("--variants", default=DEFAULT_VARIANTS,
                   help="sparklda runs with TrainParams overrides, shown beside the defaults "
                        "(';'-separated NAME[KEY=VALUE;...] items joined by ','; '' for none); "
                        f"default {DEFAULT_VARIANTS!r}: the paper's topic step schedule with a "
                        "10× shorter offset τ, and 4× smaller minibatches (more rounds per "
                        "pass: better per pass, slower per second)")
    p.add_argument("--passes", type=int, default=10, help="passes of the sparklda modes "
                                                          "(and gensim)")
    p.add_argument("--mllib-passes", default="0.5,1,2,5",
                   help="MLlib is fitted once per value (passes over the corpus)")
    p.add_argument("--heldout", action="append", default=[], metavar="NAME=COUNT",
                   help="held-out documents of a corpus (default: 430 on uci_kos, 1000 "
                        "otherwise)")
    p.add_argument("--alpha", type=float, default=0.1,
                   help="α of every sparklda mode and of folding in for every system's score")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--param", action="append", default=[], metavar="KEY=VALUE",
                   help="override a sparklda TrainParams value for every mode, e.g. "
                        "--param minibatch_size=2000")
    p.add_argument("--sweep-minibatch", default="500,1000,2000,4000,8000,0",
                   help="minibatch sizes of the SCVB0 sweep (0: the whole corpus; '' to skip)")
    p.add_argument("--sweep-corpus", default=None,
                   help="corpus of the sweep, the replication and the overhead target "
                        "(default: the last one of --corpora)")
    p.add_argument("--scaling", default="1,2,4", help="replication factors ('' to skip)")
    p.add_argument("--scaling-repeats", type=int, default=3,
                   help="passes of each replica, interleaved, for the round-time medians")
    p.add_argument("--kernel-ks", default="20,100,1000",
                   help="K of the kernel microbenchmark ('' to skip)")
    p.add_argument("--out", default=os.path.join(ROOT, "docs", "benchmarks"),
                   help="folder of results.json, the CSVs and curves.png")
    p.add_argument("--report", default=os.path.join(ROOT, "docs", "benchmarks.md"),
                   help="the Markdown page to (re)generate")
    p.add_argument("--notes", default=DEFAULT_NOTES,
                   help="TOML of notes per missed target (table [notes], keys '1'..'7')")
    p.add_argument("--report-only", metavar="RESULTS_JSON",
                   help="regenerate the page from a results.json without running anything")
    p.add_argument("--quick", action="store_true",
                   help="smoke run: KOS only at K=10 unless --corpora is given, 1 sparklda "
                        "pass, MLlib at 0.25 passes, small kernel benchmark, no sweep or "
                        "replication unless asked")
    p.add_argument("--no-floor", action="store_true",
                   help="skip the round floor (an SCVB0 round's Spark work without the kernel)")
    p.add_argument("--no-warm-up", action="store_true",
                   help="skip the untimed warm-up fits (a --quick run skips them anyway)")
    p.add_argument("--driver-memory", default="8g")
    return p


def _floats(text):
    return [float(x) for x in str(text).split(",") if x.strip()]


def _ints(text):
    return [int(float(x)) for x in str(text).split(",") if x.strip()]


def resolve_options(args):
    from sparklda.bench.suite import (DEFAULT_HELDOUT, DEFAULT_HELDOUT_OTHER, CorpusSpec,
                                      Options, default_systems)

    if args.quick:
        if args.corpora == DEFAULT_CORPORA:
            args.corpora = "uci_kos:10"
        if args.mllib_passes == "0.5,1,2,5":
            args.mllib_passes = "0.25"
        if args.passes == 10:
            args.passes = 1
        if args.sweep_minibatch == "500,1000,2000,4000,8000,0":
            args.sweep_minibatch = ""
        if args.scaling == "1,2,4":
            args.scaling = ""
        if args.kernel_ks == "20,100,1000":
            args.kernel_ks = "20"
        if args.variants == DEFAULT_VARIANTS:
            args.variants = ""
    held = {}
    for item in args.heldout:
        name, _, n = item.partition("=")
        held[name] = int(n)
    specs = []
    for item in [x.strip() for x in args.corpora.split(",") if x.strip()]:
        name, _, k = item.rpartition(":") if ":" in item else (item, "", "")
        k = int(k) if k else 50
        path = name if os.sep in name or os.path.isdir(name) else os.path.join(args.data_dir, name)
        if not os.path.isdir(path):
            raise SystemExit(f"error: corpus folder {path!r} does not exist")
        short = os.path.basename(os.path.normpath(path))
        specs.append(CorpusSpec(short, os.path.abspath(path), k,
                                held.get(short, DEFAULT_HELDOUT.get(short, DEFAULT_HELDOUT_OTHER))))
    systems = ([s.strip() for s in args.systems.split(",") if s.strip()] if args.systems
               else default_systems())
    systems += [v.strip() for v in args.variants.split(",") if v.strip() and v.strip() not in systems]
    params = {}
    for item in args.param:
        key, _, value = item.partition("=")
        params[key.strip()] = _common.parse_value(value.strip())
    sweep = args.sweep_corpus or (specs[-1].name if specs else None)
    opts = Options(corpora=specs, systems=systems, mllib_passes=_floats(args.mllib_passes),
                   passes=args.passes, alpha=args.alpha, seed=args.seed, params=params,
                   kernel_ks=tuple(_ints(args.kernel_ks)),
                   kernel_repeats=2 if args.quick else 5,
                   kernel_docs=200 if args.quick else 1000,
                   sweep_corpus=sweep, sweep_minibatch=_ints(args.sweep_minibatch),
                   scaling_corpus=sweep, scaling_replicas=_ints(args.scaling),
                   scaling_repeats=1 if args.quick else args.scaling_repeats,
                   warm_up=not (args.quick or args.no_warm_up))
    return opts


def load_notes(path):
    if not path or not os.path.exists(path):
        return {}
    import tomllib

    with open(path, "rb") as f:
        return {str(k): str(v) for k, v in tomllib.load(f).get("notes", {}).items()}


def run(spark, args, command: str | None = None) -> dict:
    """Every measurement of one benchmark run; writes the files and the page."""
    from sparklda.bench import report, suite

    started = time.perf_counter()
    opts = resolve_options(args)
    results = {"meta": {"command": command or " ".join(["spark-submit"] + sys.argv),
                        "date": report.now_iso(), "machine": report.machine_info(spark),
                        "alpha": opts.alpha, "seed": opts.seed, "systems": opts.systems,
                        "mllib_passes": opts.mllib_passes, "passes": opts.passes,
                        "params": opts.params, "quick": bool(args.quick)},
               "corpora": {}, "systems": {}, "points": [], "notes": load_notes(args.notes)}
    if opts.kernel_ks:
        suite.run_kernel(opts, results)
    kept = None
    for spec in opts.corpora:
        bc = suite.run_corpus(spark, spec, opts, results, keep=spec.name == opts.sweep_corpus)
        kept = bc or kept
    by_name = {s.name: s for s in opts.corpora}
    try:
        if opts.sweep_corpus in by_name:
            results["overhead_corpus"] = opts.sweep_corpus
            if opts.sweep_minibatch:
                suite.run_sweep(spark, by_name[opts.sweep_corpus], opts, results, kept)
            if opts.scaling_replicas:
                suite.run_scaling(spark, by_name[opts.sweep_corpus], opts, results, kept)
            if kept is not None and not args.no_floor:
                suite.run_floor(spark, by_name[opts.sweep_corpus], opts, results, kept)
    finally:
        if kept is not None:
            kept.unpersist()
    results["meta"]["run_seconds"] = time.perf_counter() - started
    write_report(results, args.out, args.report)
    return results


def write_report(results, out_dir, page):
    from sparklda.bench import report

    paths = report.write_files(results, out_dir)
    targets = report.evaluate_targets(results)
    results["targets"] = targets
    paths = report.write_files(results, out_dir)  # again, with the targets in the JSON
    os.makedirs(os.path.dirname(os.path.abspath(page)), exist_ok=True)
    text = report.render_markdown(results, targets, paths, os.path.dirname(os.path.abspath(page)))
    with open(page + ".tmp", "w") as f:
        f.write(text)
    os.replace(page + ".tmp", page)
    for t in targets:
        print(f"target {t['id']} {t['corpus']} {t.get('vs', '')}: {t['measured']} -> {t['status']}")
    print(f"results: {paths['json']}\nplot: {paths['plot']}\npage: {page}")
    return targets


def main(argv=None) -> int:
    args = parser().parse_args(argv)
    _common.setup_logging(args.log_level)
    if args.report_only:
        import json

        with open(args.report_only) as f:
            results = json.load(f)
        notes = load_notes(args.notes)
        if notes:
            results["notes"] = notes
        write_report(results, args.out, args.report)
        return 0
    _common.require_java()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    cfg = {"spark": {"master": "local[2]", "app_name": "sparklda-benchmark",
                     "conf": {"spark.ui.enabled": "false",
                              "spark.driver.memory": args.driver_memory,
                              "spark.sql.shuffle.partitions": "4",
                              "spark.python.worker.reuse": "true"}}}
    spark = _common.build_session(cfg, args.master, "sparklda-benchmark")
    try:
        run(spark, args, " ".join(["spark-submit", "jobs/benchmark.py"] + list(
            argv if argv is not None else sys.argv[1:])))
    finally:
        spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
