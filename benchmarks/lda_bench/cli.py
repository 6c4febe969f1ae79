"""Command line of the benchmark: ``spark-submit benchmarks/run.py [options]``.

One run, one SparkSession, one cached training DataFrame per corpus shared by
MLlib and gensim, one held-out set per corpus shared by every system (each
sparklda algorithm holds out the same documents in its own ``fit``,
``pyspark.ml.clustering.LDA`` online at Spark's defaults and at tuned
settings, gensim's ``LdaMulticore`` when installed), all scored by the same
held-out document-completion code; then the stages on generated corpora
(tasks per round, throughput, startup) and Spark Connect against classic
(``--only`` picks stages). Writes ``results.json`` and CSVs of every
measurement plus ``curves.png`` to ``--out`` and regenerates the page
``--report`` (default ``docs/benchmarks.md``), judging the targets of
``--targets`` (default ``benchmarks/targets.toml``).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import shutil
import sys
import tempfile
import time
import tomllib
import zipfile

from pyspark import SparkConf
from pyspark.sql import SparkSession

import sparklda

from . import connect, map_em, priors, report, scale, suite
from .suite import (
    DEFAULT_HELDOUT,
    DEFAULT_HELDOUT_OTHER,
    CorpusSpec,
    Options,
    check_overrides,
    default_systems,
)

log = logging.getLogger("benchmarks")

BENCH_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # benchmarks/
ROOT = os.path.dirname(BENCH_DIR)  # the checkout
DEFAULT_DATA = os.path.join(ROOT, "..", "shared", "data")
DEFAULT_CORPORA = "uci_kos:50,lda_newsgroups:100"
DEFAULT_VARIANTS = "scvb0[tau_phi=100],scvb0[minibatch_size=500]"
DEFAULT_NOTES = os.path.join(ROOT, "docs", "benchmarks", "notes.toml")
COMMAND = "spark-submit benchmarks/run.py"
DEFAULT_CONNECT = "lda_newsgroups:100"
#: The stages of a run, in order (--only picks some).
STAGES = (
    "kernel",
    "quality",
    "sweep",
    "scaling",
    "floor",
    "tasks",
    "throughput",
    "startup",
    "connect",
    "priors",
    "map",
)
DEFAULT_PRIORS = "uci_kos:20,lda_newsgroups:20"


#: The keys of results.json each stage writes (an ``--only`` run replaces these and
#: keeps every other key of the results it merges into: see :func:`merge_stages`).
STAGE_KEYS = {
    "kernel": ("kernel",),
    "quality": ("corpora", "systems", "points", "overhead_corpus"),
    "sweep": ("sweep",),
    "scaling": ("scaling",),
    "floor": ("floor",),
    "tasks": ("tasks",),
    "throughput": ("throughput",),
    "startup": ("startup",),
    "connect": ("connect",),
    "priors": ("priors",),
    "map": ("map",),
}


def only_stages(text) -> list:
    """The stages an ``--only`` value names, in run order."""
    named = {x.strip() for x in str(text or "").split(",") if x.strip()}
    return [s for s in STAGES if s in named]


def stage_run(results: dict, stage: str) -> dict:
    """The run a stage's figures in ``results`` come from: its own ``stage_runs`` entry
    when the results were merged, else the run's command, date, machine and time."""
    return (results.get("stage_runs") or {}).get(stage) or {
        k: results["meta"].get(k) for k in ("command", "date", "machine", "run_seconds")
    }


def merge_stages(base: dict, new: dict, stages) -> dict:
    """``base`` results with the keys of ``stages`` taken from ``new``: an ``--only``
    run adds to the results already in its ``--out`` folder instead of replacing
    them, one stage at a time. Each merged stage's command, date, machine and run
    time go to ``stage_runs[stage]``; ``base``'s own ``meta`` stays (it describes
    the run of the other stages)."""
    merged = dict(base)
    runs = dict(base.get("stage_runs") or {})
    for stage in stages:
        for key in STAGE_KEYS[stage]:
            if key in new:
                merged[key] = new[key]
            else:
                merged.pop(key, None)
        # a merged results file (--report-only --only) carries its stages' own runs
        runs[stage] = stage_run(new, stage)
    merged["stage_runs"] = runs
    merged.setdefault("corpora", {})
    merged.setdefault("systems", {})
    merged.setdefault("points", [])
    if "notes" in new:
        merged["notes"] = new["notes"]
    return merged


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="benchmarks/run.py", description="Benchmark sparklda against Spark MLlib's LDA."
    )
    p.add_argument(
        "--master",
        default=None,
        help="Spark master (default: what spark-submit set, else local[2])",
    )
    p.add_argument("--log-level", default="INFO")
    p.add_argument(
        "--corpora",
        default=DEFAULT_CORPORA,
        help="comma-separated NAME[:K] (a folder under --data-dir) or PATH[:K] "
        f"(a UCI folder); default {DEFAULT_CORPORA}",
    )
    p.add_argument("--data-dir", default=DEFAULT_DATA, help="folder of the shared corpora")
    p.add_argument(
        "--systems",
        default=None,
        help="comma-separated systems (default: every sparklda algorithm, "
        "mllib-online-default, mllib-online-tuned, gensim-ldamulticore if "
        "gensim is installed)",
    )
    p.add_argument(
        "--variants",
        default=DEFAULT_VARIANTS,
        help="sparklda runs with TrainParams overrides, shown beside the defaults "
        "(';'-separated NAME[KEY=VALUE;...] items joined by ','; '' for none); "
        f"default {DEFAULT_VARIANTS!r}: the paper's topic step schedule with a "
        "10× shorter offset τ, and 4× smaller minibatches (more rounds per "
        "pass: better per pass, slower per second)",
    )
    p.add_argument(
        "--passes", type=int, default=10, help="passes of the sparklda modes (and gensim)"
    )
    p.add_argument(
        "--mllib-passes",
        default="0.5,1,2,5",
        help="MLlib is fitted once per value (passes over the corpus)",
    )
    p.add_argument(
        "--heldout",
        action="append",
        default=[],
        metavar="NAME=COUNT",
        help="held-out documents of a corpus (default: 430 on uci_kos, 1000 otherwise)",
    )
    p.add_argument(
        "--alpha",
        type=float,
        default=0.1,
        help="α of every sparklda mode and of folding in for every system's score",
    )
    p.add_argument(
        "--seed",
        type=int,
        default=0,
        help="seed of every system; it also picks the held-out documents",
    )
    p.add_argument(
        "--param",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a sparklda TrainParams value for every mode, e.g. "
        "--param minibatch_size=2000",
    )
    p.add_argument(
        "--sweep-minibatch",
        default="500,1000,2000,4000,8000,0",
        help="minibatch sizes of the SCVB0 sweep (0: the whole corpus; '' to skip)",
    )
    p.add_argument(
        "--sweep-corpus",
        default=None,
        help="corpus of the sweep, the replication and the overhead target "
        "(default: the last one of --corpora)",
    )
    p.add_argument("--scaling", default="1,2,4", help="replication factors ('' to skip)")
    p.add_argument(
        "--scaling-repeats",
        type=int,
        default=3,
        help="passes of each replica, interleaved, for the round-time medians",
    )
    p.add_argument(
        "--kernel-ks", default="20,100,1000", help="K of the kernel microbenchmark ('' to skip)"
    )
    p.add_argument(
        "--out",
        default=os.path.join(ROOT, "docs", "benchmarks"),
        help="folder of results.json, the CSVs and curves.png",
    )
    p.add_argument(
        "--report",
        default=os.path.join(ROOT, "docs", "benchmarks.md"),
        help="the Markdown page to (re)generate",
    )
    p.add_argument(
        "--targets", default=None, help="TOML of the targets (default benchmarks/targets.toml)"
    )
    p.add_argument(
        "--notes",
        default=DEFAULT_NOTES,
        help="TOML of notes per missed target (table [notes], keys: target ids)",
    )
    p.add_argument(
        "--report-only",
        metavar="RESULTS_JSON",
        help="regenerate the page from a results.json without running anything; with "
        "--only, merge those stages of it into the results.json of --out first",
    )
    p.add_argument(
        "--quick",
        action="store_true",
        help="smoke run: KOS only at K=10 unless --corpora is given, 1 sparklda "
        "pass, MLlib at 0.25 passes, small kernel benchmark, no sweep or "
        "replication unless asked",
    )
    p.add_argument(
        "--no-floor",
        action="store_true",
        help="skip the round floor (rounds of an SCVB0 round's shape without the kernel)",
    )
    p.add_argument(
        "--no-warm-up",
        action="store_true",
        help="skip the untimed warm-up fits (a --quick run skips them anyway)",
    )
    p.add_argument(
        "--only",
        default=None,
        help="comma-separated stages to run, the others skipped: " + ", ".join(STAGES),
    )
    g = p.add_argument_group("learned priors (the priors stage)")
    g.add_argument(
        "--priors",
        default=DEFAULT_PRIORS,
        help="NAME:K corpora of the priors stage (held-out quality and coherence with and "
        "without learned priors)",
    )
    g.add_argument(
        "--priors-modes",
        default="scvb0=5,cvb0=20,cvb=20,svb=5",
        help="MODE=PASSES items: the modes the priors stage fits and their passes",
    )
    g.add_argument(
        "--priors-variants",
        default=priors.DEFAULT_VARIANTS,
        help="the variants of each mode's fit: " + ", ".join(priors.VARIANTS),
    )
    g.add_argument(
        "--priors-no-coherence",
        action="store_true",
        help="leave the topics' coherence out of the priors stage's rows (faster)",
    )
    g.add_argument(
        "--merge-into",
        default="",
        help="a results.json to add this run's stages to (its other figures are kept); "
        "the page is made from the merged results",
    )
    g = p.add_argument_group("MAP-EM against MLlib's EM (the map stage)")
    g.add_argument(
        "--map",
        default=map_em.DEFAULT_MAP,
        help="NAME:K corpora of the map stage (it runs only when --only names it)",
    )
    g.add_argument(
        "--map-mllib-iters",
        default="2,10",
        help="I1,I2: MLlib's EM is fitted with maxIter I1 and I2 (its time per iteration is "
        "the difference over I2 − I1); sparklda's MAP-EM runs I2 iterations",
    )
    g.add_argument("--map-alpha", type=float, default=0.0, help="α (default: 50/K + 1)")
    g.add_argument("--map-eta", type=float, default=0.0, help="η (default: 1.1)")
    g.add_argument(
        "--map-no-warm-up",
        action="store_true",
        help="no untimed first fits (sparklda 2 iterations, MLlib 1) on the first corpus; "
        "MLlib's first fit (I1) then pays for the JVM's warm-up, which lowers its time per "
        "iteration (I2 − I1 fits)",
    )
    g = p.add_argument_group("Spark Connect against classic (the connect stage)")
    g.add_argument(
        "--connect",
        default=DEFAULT_CONNECT,
        help="NAME[:K] or PATH[:K] of the corpus fitted classic, on the DataFrame path and "
        f"through a Spark Connect server this run starts ('' to skip); default {DEFAULT_CONNECT}",
    )
    g.add_argument("--connect-passes", type=int, default=2, help="SCVB0 passes of each fit")
    g.add_argument(
        "--connect-reference",
        default="mllib-online-tuned",
        help="the MLlib variant whose 5-pass held-out quality the fits are timed to",
    )
    g = p.add_argument_group("generated corpora (the tasks and throughput stages)")
    g.add_argument(
        "--generated-dir",
        default=None,
        help="cache folder of the generated corpora, one folder per parameter set, "
        "reused when present (default: DATA_DIR/generated)",
    )
    g.add_argument(
        "--tasks",
        default="2,16,64",
        help="parts_per_slice (tasks per round) of the tasks stage ('' to skip)",
    )
    g.add_argument("--tasks-combine", default="executors,driver", help="combine values compared")
    g.add_argument("--tasks-docs", type=int, default=100_000, help="documents generated")
    g.add_argument("--tasks-vocab", type=int, default=50_000, help="vocabulary generated")
    g.add_argument("--tasks-true-topics", type=int, default=100, help="topics generated")
    g.add_argument("--tasks-mean-length", type=float, default=150.0, help="mean document length")
    g.add_argument("--tasks-k", type=int, default=100, help="K of the fits")
    g.add_argument("--tasks-minibatch", type=int, default=16_000, help="minibatch of the fits")
    g.add_argument(
        "--throughput-docs",
        type=int,
        default=700_000,
        help="documents of the throughput stage's generated corpus (0 to skip)",
    )
    g.add_argument("--throughput-vocab", type=int, default=100_000)
    g.add_argument("--throughput-true-topics", type=int, default=100)
    g.add_argument("--throughput-mean-length", type=float, default=150.0)
    g.add_argument("--throughput-k", type=int, default=100)
    g.add_argument(
        "--throughput-mllib-iters",
        default="1,3",
        help="M1,M2: MLlib is fitted with maxIter M1 and M2; its time per iteration is "
        "the difference over M2 − M1",
    )
    g.add_argument(
        "--throughput-mllib-rate",
        type=float,
        default=0.05,
        help="MLlib's subsamplingRate (a pass is 1/rate iterations)",
    )
    g.add_argument(
        "--throughput-reference-minibatch",
        type=int,
        default=2000,
        help="a second SCVB0 pass at this minibatch size, for quality per pass against the "
        "default's (0 to skip)",
    )
    g = p.add_argument_group("startup in a fresh process (the startup stage)")
    g.add_argument(
        "--startup",
        default="warm,cold",
        help="numba cache states: warm (the machine's), cold (an empty NUMBA_CACHE_DIR); "
        "'' to skip",
    )
    g.add_argument("--startup-k", type=int, default=50)
    g.add_argument("--startup-passes", type=int, default=2)
    p.add_argument(
        "--driver-memory",
        default="8g",
        help="spark.driver.memory when this script starts the JVM itself (under "
        "spark-submit, pass spark-submit's --driver-memory instead)",
    )
    return p


def _floats(text):
    return [float(x) for x in str(text).split(",") if x.strip()]


def _ints(text):
    return [int(float(x)) for x in str(text).split(",") if x.strip()]


def parse_value(text: str):
    """A TOML literal (numbers, booleans, quoted strings); a bare word is a string."""
    try:
        return tomllib.loads(f"v = {text}")["v"]
    except tomllib.TOMLDecodeError:
        return text


def _corpus_spec(item: str, args, held: dict, default_k: int = 50) -> CorpusSpec:
    name, _, k = item.rpartition(":") if ":" in item else (item, "", "")
    path = name if os.sep in name or os.path.isdir(name) else os.path.join(args.data_dir, name)
    if not os.path.isdir(path):
        raise SystemExit(f"error: corpus folder {path!r} does not exist")
    short = os.path.basename(os.path.normpath(path))
    return CorpusSpec(
        short,
        os.path.abspath(path),
        int(k) if k else default_k,
        held.get(short, DEFAULT_HELDOUT.get(short, DEFAULT_HELDOUT_OTHER)),
    )


def apply_only(args):
    """--only: every stage not named is skipped."""
    if not args.only:
        return
    only = {x.strip() for x in args.only.split(",") if x.strip()}
    unknown = sorted(only - set(STAGES))
    if unknown:
        raise SystemExit(f"error: --only: unknown stage(s) {unknown}; known: {', '.join(STAGES)}")
    if "kernel" not in only:
        args.kernel_ks = ""
    if "quality" not in only:
        args.systems = "none"
        args.variants = ""
    if not only & {"quality", "sweep", "scaling", "floor"}:
        args.corpora = ""
    elif "quality" not in only:  # only the corpus of the sweep, the scaling and the floor
        items = [x.strip() for x in args.corpora.split(",") if x.strip()]
        keep = [
            x
            for x in items
            if args.sweep_corpus is None
            or os.path.basename(os.path.normpath(x.rpartition(":")[0] or x)) == args.sweep_corpus
        ]
        args.corpora = (keep or items)[-1] if items else ""
    if "sweep" not in only:
        args.sweep_minibatch = ""
    if "scaling" not in only:
        args.scaling = ""
    if "floor" not in only:
        args.no_floor = True
    if "tasks" not in only:
        args.tasks = ""
    if "throughput" not in only:
        args.throughput_docs = 0
    if "startup" not in only:
        args.startup = ""
    if "connect" not in only:
        args.connect = ""
    if "priors" not in only:
        args.priors = ""
    if "map" not in only:
        args.map = ""


def resolve_options(args):
    apply_only(args)
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
        # the new stages run in a quick run only when asked for with their own option
        if args.connect == DEFAULT_CONNECT:
            args.connect = ""
        if args.tasks == "2,16,64":
            args.tasks = ""
        if args.throughput_docs == 700_000:
            args.throughput_docs = 0
        if args.startup == "warm,cold":
            args.startup = ""
        if args.priors == DEFAULT_PRIORS:
            args.priors = ""
    held = {}
    for item in args.heldout:
        name, _, n = item.partition("=")
        held[name] = int(n)
    items = [x.strip() for x in args.corpora.split(",")]
    specs = [_corpus_spec(item, args, held) for item in items if item]
    systems = (
        [s.strip() for s in args.systems.split(",") if s.strip() and s.strip() != "none"]
        if args.systems
        else default_systems()
    )
    systems += [
        v.strip() for v in args.variants.split(",") if v.strip() and v.strip() not in systems
    ]
    params = {}
    for item in args.param:
        key, _, value = item.partition("=")
        params[key.strip()] = parse_value(value.strip())
    check_overrides(params, "--param")
    sweep = args.sweep_corpus or (specs[-1].name if specs else None)
    return Options(
        corpora=specs,
        systems=systems,
        mllib_passes=_floats(args.mllib_passes),
        passes=args.passes,
        alpha=args.alpha,
        seed=args.seed,
        params=params,
        kernel_ks=tuple(_ints(args.kernel_ks)),
        kernel_repeats=2 if args.quick else 5,
        kernel_docs=200 if args.quick else 1000,
        sweep_corpus=sweep,
        sweep_minibatch=_ints(args.sweep_minibatch),
        scaling_corpus=sweep,
        scaling_replicas=_ints(args.scaling),
        scaling_repeats=1 if args.quick else args.scaling_repeats,
        warm_up=not (args.quick or args.no_warm_up) and bool(systems),
        connect_corpus=_corpus_spec(args.connect, args, held, 100) if args.connect else None,
        connect_passes=args.connect_passes,
        connect_reference=args.connect_reference,
        generated_dir=args.generated_dir or os.path.join(args.data_dir, "generated"),
        tasks_parts=_ints(args.tasks),
        tasks_combine=[x.strip() for x in args.tasks_combine.split(",") if x.strip()],
        tasks_docs=args.tasks_docs,
        tasks_vocab=args.tasks_vocab,
        tasks_true_topics=args.tasks_true_topics,
        tasks_mean_length=args.tasks_mean_length,
        tasks_k=args.tasks_k,
        tasks_minibatch=args.tasks_minibatch,
        throughput_docs=args.throughput_docs,
        throughput_vocab=args.throughput_vocab,
        throughput_true_topics=args.throughput_true_topics,
        throughput_mean_length=args.throughput_mean_length,
        throughput_k=args.throughput_k,
        throughput_mllib_iters=_mllib_iters(args.throughput_mllib_iters),
        throughput_mllib_rate=args.throughput_mllib_rate,
        throughput_reference_minibatch=args.throughput_reference_minibatch,
        startup=_startup_states(args.startup),
        startup_k=args.startup_k,
        startup_passes=args.startup_passes,
        priors_corpora=[
            _corpus_spec(x.strip(), args, held, 20) for x in args.priors.split(",") if x.strip()
        ],
        priors_modes=priors.parse_passes(args.priors_modes),
        priors_variants=priors.parse_variants(args.priors_variants),
        priors_coherence=not args.priors_no_coherence,
        map_corpora=[
            _corpus_spec(x.strip(), args, held, 50)
            for x in (args.map if args.only else "").split(",")
            if x.strip()
        ],
        map_mllib_iters=_mllib_iters(args.map_mllib_iters, "--map-mllib-iters"),
        map_alpha=args.map_alpha,
        map_eta=args.map_eta,
        map_warm_up=not args.map_no_warm_up,
    )


def _mllib_iters(text, option: str = "--throughput-mllib-iters") -> tuple:
    iters = _ints(text)
    if len(iters) != 2 or not 1 <= iters[0] < iters[1]:
        raise SystemExit(f"error: {option} must be M1,M2 with 1 <= M1 < M2; got {text!r}")
    return tuple(iters)


def _startup_states(text) -> list:
    states = [x.strip() for x in str(text).split(",") if x.strip()]
    bad = [x for x in states if x not in ("warm", "cold")]
    if bad:
        raise SystemExit(f"error: --startup takes warm and/or cold; got {bad}")
    return states


def load_notes(path):
    if not path or not os.path.exists(path):
        return {}
    with open(path, "rb") as f:
        return {str(k): str(v) for k, v in tomllib.load(f).get("notes", {}).items()}


def run(spark, args, command: str | None = None) -> dict:
    """Every measurement of one benchmark run; writes the files and the page."""
    started = time.perf_counter()
    spec = report.load_targets(args.targets)  # a bad targets file fails before any work
    opts = resolve_options(args)
    results = {
        "meta": {
            "command": command or " ".join(["spark-submit"] + sys.argv),
            "date": report.now_iso(),
            "machine": report.machine_info(spark),
            "alpha": opts.alpha,
            "seed": opts.seed,
            "systems": opts.systems,
            "mllib_passes": opts.mllib_passes,
            "passes": opts.passes,
            "params": opts.params,
            "quick": bool(args.quick),
            # sparklda's fit holds out the shared documents itself, on its clock
            "heldout_split_in_fit": True,
        },
        "corpora": {},
        "systems": {},
        "points": [],
        "notes": load_notes(args.notes),
    }
    if opts.kernel_ks:
        suite.run_kernel(opts, results)
    kept = None
    for cspec in opts.corpora:
        bc = suite.run_corpus(spark, cspec, opts, results, keep=cspec.name == opts.sweep_corpus)
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
    opts.default_parallelism = spark.sparkContext.defaultParallelism
    if opts.tasks_parts:
        scale.run_tasks(spark, opts, results)
    if opts.throughput_docs:
        scale.run_throughput(spark, opts, results)
    if opts.startup:
        scale.run_startup(opts, results)
    if opts.connect_corpus is not None:  # last: it leaves a Connect session's traces in pyspark
        work = tempfile.mkdtemp(prefix="sparklda-bench-connect-")
        connect.run_connect(spark, opts.connect_corpus, opts, results, work)
    if opts.priors_corpora:
        priors.run_priors(spark, opts.priors_corpora, opts, results)
    if opts.map_corpora:
        map_em.run_map(spark, opts.map_corpora, opts, results)
    results["meta"]["run_seconds"] = time.perf_counter() - started
    if args.merge_into:
        results = merge_into(args.merge_into, results)
    stages = [] if args.merge_into else only_stages(args.only)
    existing = os.path.join(args.out, "results.json")
    if stages and os.path.exists(existing):  # additive: only the stages that ran change
        with open(existing) as f:
            results = merge_stages(json.load(f), results, stages)
    write_report(results, args.out, args.report, spec)
    return results


#: The results keys a stage run on its own sets (``--merge-into`` copies them).
MERGE_KEYS = (
    "kernel",
    "sweep",
    "scaling",
    "tasks",
    "throughput",
    "startup",
    "connect",
    "priors",
    "map",
)


def merge_into(path: str, results: dict) -> dict:
    """The results of ``path`` with the stages this run measured added (replacing that
    stage's earlier figures); the run's command and date are listed under
    ``meta.merged``. The priors stage's rows of (corpus, mode) pairs this run did not
    measure are kept. The quality stage (its corpora, systems and points) replaces the
    earlier quality stage as a whole. Each merged stage's run (command, date, machine)
    goes to ``stage_runs``, which the page shows at the top of the stage's section;
    the priors stage lists every run whose rows it keeps. A run with none of these
    stages is an error: merging it would change nothing but the list of merged runs."""
    with open(path) as f:
        base = json.load(f)
    earlier_priors = base.get("priors")
    stages = [k for k in MERGE_KEYS if results.get(k)]
    quality = bool(results.get("systems"))
    if not stages and not quality:
        raise ValueError(
            f"--merge-into {path}: the results to merge hold no stage's figures "
            f"(none of quality, {', '.join(MERGE_KEYS)})"
        )
    if quality:  # as the other stages: the notes stay those of ``path``
        base = merge_stages(base, {k: v for k, v in results.items() if k != "notes"}, ["quality"])
    runs = base.setdefault("stage_runs", {})
    for key in stages:
        base[key] = results[key]
        run = stage_run(results, key)
        earlier = runs.get(key)
        if key == "priors" and earlier_priors and earlier:
            runs[key] = (earlier if isinstance(earlier, list) else [earlier]) + [run]
        else:
            runs[key] = run
    if "priors" in stages and earlier_priors:
        # the priors stage's rows of other corpora and modes stay (runs add up)
        new = results["priors"]
        measured = {(r["corpus"], r.get("k"), r["mode"]) for r in new["rows"]}
        kept = [
            r
            for r in earlier_priors["rows"]
            if (r["corpus"], r.get("k"), r["mode"]) not in measured
        ]
        variants = list(earlier_priors["variants"])
        variants += [v for v in new["variants"] if v not in variants]
        base["priors"] = {
            **new,
            "modes": {**earlier_priors["modes"], **new["modes"]},
            "variants": variants,
            "rows": kept + new["rows"],
        }
    base["meta"].setdefault("merged", []).append(
        {
            "stages": (["quality"] if quality else []) + stages,
            "command": results["meta"]["command"],
            "date": results["meta"]["date"],
        }
    )
    return base


def write_report(results, out_dir, page, spec=None):
    """Files, targets and the page of one run's results."""
    spec = spec or report.load_targets()
    targets = report.evaluate_targets(results, spec=spec)
    results["targets"] = targets
    paths = report.write_files(results, out_dir)
    os.makedirs(os.path.dirname(os.path.abspath(page)), exist_ok=True)
    text = report.render_markdown(
        results, targets, paths, os.path.dirname(os.path.abspath(page)), spec
    )
    with open(page + ".tmp", "w") as f:
        f.write(text)
    os.replace(page + ".tmp", page)
    for t in targets:
        print(f"target {t['id']} {t['corpus']} {t.get('vs', '')}: {t['measured']} -> {t['status']}")
    print(f"results: {paths['json']}\nplot: {paths['plot']}\npage: {page}")
    return targets


def ship_packages(spark, packages) -> list[str]:
    """Send Python packages to the executors (``addPyFile`` of a zip per package).

    The benchmark is not installed, so its code reaches the executors this way;
    on a cluster (a non-local master) sparklda is shipped too unless installed
    there.
    """
    paths = []
    tmp = tempfile.mkdtemp(prefix="sparklda-bench-")
    for pkg in packages:
        pkg = os.path.abspath(pkg)
        path = os.path.join(tmp, os.path.basename(pkg) + ".zip")
        with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
            for root, dirs, files in os.walk(pkg):
                dirs[:] = [d for d in dirs if d != "__pycache__"]
                for name in files:
                    if name.endswith((".py", ".toml", ".txt", ".gz")):
                        full = os.path.join(root, name)
                        z.write(full, os.path.relpath(full, os.path.dirname(pkg)))
        spark.sparkContext.addPyFile(path)
        paths.append(path)
    return paths


def launch_command() -> str:
    """How this run was started, for the report: under ``spark-submit`` (which sets
    ``PYSPARK_GATEWAY_PORT`` for its Python) or by this Python. The driver's memory is
    not part of it: the report gives the JVM's own (``report.machine_info``)."""
    return COMMAND if "PYSPARK_GATEWAY_PORT" in os.environ else "python benchmarks/run.py"


def session_settings(driver_memory: str) -> dict:
    """The benchmark session's properties. ``spark.driver.memory`` only where this process
    starts the JVM: under spark-submit the JVM's heap is spark-submit's
    ``--driver-memory``, which the conf then keeps for the report."""
    settings = {
        **sparklda.SESSION_PROPERTIES,  # as the jobs: round results straight to the driver
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.shuffle.partitions": "4",
        "spark.python.worker.reuse": "true",
    }
    if "PYSPARK_GATEWAY_PORT" not in os.environ:
        settings["spark.driver.memory"] = driver_memory
    return settings


def build_session(master: str | None, driver_memory: str):
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = SparkSession.builder.appName("sparklda-benchmark")
    master = master or (None if SparkConf().contains("spark.master") else "local[2]")
    if master:
        builder = builder.master(master)
    settings = session_settings(driver_memory)
    for k, v in settings.items():
        builder = builder.config(k, v)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    return spark


def main(argv=None) -> int:
    args = parser().parse_args(argv)
    logging.basicConfig(
        level=getattr(logging, args.log_level.upper(), logging.INFO),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stdout,
    )
    logging.getLogger("py4j").setLevel(logging.WARNING)
    if args.report_only:
        with open(args.report_only) as f:
            results = json.load(f)
        stages = only_stages(args.only)
        existing = os.path.join(args.out, "results.json")
        if (
            stages and os.path.exists(existing) and not os.path.samefile(existing, args.report_only)
        ):  # --only with --report-only: merge those stages of RESULTS_JSON into --out's
            with open(existing) as f:
                results = merge_stages(json.load(f), results, stages)
        notes = load_notes(args.notes)
        if notes:
            results["notes"] = notes
        if args.merge_into:
            results = merge_into(args.merge_into, results)
        write_report(results, args.out, args.report, report.load_targets(args.targets))
        return 0
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        print(
            "error: Spark needs Java 17 or later: no `java` on PATH and JAVA_HOME is not set",
            file=sys.stderr,
        )
        return 2
    command = launch_command()
    spark = build_session(args.master, args.driver_memory)
    try:
        packages = [BENCH_DIR]
        if not spark.sparkContext.master.startswith("local"):
            packages.append(os.path.dirname(sparklda.__file__))
        ship_packages(spark, packages)
        given = list(argv if argv is not None else sys.argv[1:])
        run(spark, args, " ".join([command] + given))
    finally:
        spark.stop()
    return 0
