"""Scale measurements on generated corpora, and startup in a fresh process.

* **Tasks per round** (:func:`run_tasks`): one SCVB0 pass over a generated
  corpus (by default 100,000 documents of mean length 150, V=50,000 Zipf,
  100 true topics: about 15M tokens), K=100, large minibatches, with
  ``parts_per_slice`` tasks per round for each value asked, with the
  executors' combine and the driver merge. Per setting, medians over the
  rounds after the first of the round time, the driver's merge
  (``merge_s``), the bytes shipped, received by the driver and merged
  (``shipped_bytes``, ``driver_bytes``, ``merged_bytes`` of the round
  records), the cached training blocks and the driver's peak resident memory
  (the figures of ``benchmarks/scale/memory.py``, docs/architecture.md,
  "Memory model").
* **Throughput** (:func:`run_throughput`): a generated corpus of about 100M
  tokens (700,000 documents, V=100,000), K=100: the time of one SCVB0 pass
  (the fit's training time minus its corpus building) against MLlib's online
  LDA on the same DataFrame. MLlib is timed on a fraction of a pass: after
  an untimed warm-up fit, two fits of ``maxIter`` m1 < m2 iterations at
  ``subsamplingRate`` r, its time per iteration (t2 − t1) / (m2 − m1) (its
  set-up, paid once per fit, left out; t2 / m2 if noise makes t2 ≤ t1), and
  a pass is 1/r iterations. Also sparklda's corpus building time
  against its training pass.
* **Startup** (:func:`run_startup`): ``benchmarks/scale/startup.py`` in a
  fresh Python process (its own JVM): SCVB0's first round against its later
  rounds, with the machine's numba cache ("warm") and with an empty one
  ("cold", ``NUMBA_CACHE_DIR`` pointed at a new folder; the checkout's cache
  is not touched). See docs/architecture.md, "Startup".

Generated corpora are drawn on the executors by
:func:`sparklda.cli.generate.generate` (``sparklda generate``) into a folder
named by their parameters under the cache folder, and reused when a folder
with the same parameters exists (docs/architecture.md, "Synthetic corpora").
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

from sparklda.api import fit
from sparklda.cli.generate import generate, read_generated
from sparklda.corpus import from_vectors
from sparklda.params import MAX_DEFAULT_ROUNDS_PER_PASS, TrainParams
from sparklda.synthetic import CorpusSpec

from .memory import PeakRSS

log = logging.getLogger("benchmarks")

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
STARTUP_SCRIPT = os.path.join(ROOT, "benchmarks", "scale", "startup.py")
#: held-out documents of the throughput stage's fits (scored once, after the pass)
THROUGHPUT_HELDOUT = 2000


def corpus_folder(spec: CorpusSpec) -> str:
    """The cache folder's name for a generated corpus: its parameters."""
    d = spec.to_dict()
    return (
        f"docs{d['n_docs']}-v{d['vocab_size']}-k{d['k_true']}-len{d['mean_length']:g}"
        f"-zipf{d['zipf_exponent']:g}-a{d['alpha']:g}-seed{d['seed']}"
    )


def generated_corpus(spark, spec: CorpusSpec, cache_dir: str) -> tuple[str, dict]:
    """The folder of the corpus of ``spec`` under ``cache_dir``, drawn now unless a
    folder with the same parameters exists. Returns (folder, info): info says
    whether it was reused and how long drawing it took."""
    path = os.path.join(os.path.abspath(cache_dir), corpus_folder(spec))
    if os.path.exists(os.path.join(path, "params")):
        try:
            found, _ = read_generated(spark, path)
        except Exception as e:  # an unreadable folder is drawn again
            log.warning("generated corpus %s unreadable (%s); drawing it again", path, e)
        else:
            if found == spec:
                log.info("reusing the generated corpus %s", path)
                return path, {"path": path, "reused": True, "generate_s": None}
            log.warning("generated corpus %s has other parameters; drawing it again", path)
    os.makedirs(os.path.abspath(cache_dir), exist_ok=True)
    t = time.perf_counter()
    generate(spark, spec, path, overwrite=True)
    return path, {"path": path, "reused": False, "generate_s": time.perf_counter() - t}


def _source(spark, path: str):
    return from_vectors(spark.read.parquet(os.path.join(path, "corpus")), "features", "id")


def _med(rows, key):
    vals = [r.get(key) for r in rows if r.get(key) is not None]
    return float(np.median(vals)) if vals else None


def run_tasks(spark, opts, results: dict):
    """Tasks per round (see the module docstring); sets ``results["tasks"]``."""
    spec = CorpusSpec(
        n_docs=opts.tasks_docs,
        vocab_size=opts.tasks_vocab,
        k_true=opts.tasks_true_topics,
        mean_length=opts.tasks_mean_length,
        seed=opts.seed,
    )
    path, gen = generated_corpus(spark, spec, opts.generated_dir)
    rows = []
    for parts in opts.tasks_parts:
        for combine in opts.tasks_combine:
            params = TrainParams(
                algorithm="scvb0",
                k=opts.tasks_k,
                alpha=opts.alpha,
                passes=1,
                minibatch_size=opts.tasks_minibatch,
                parts_per_slice=int(parts),
                combine=combine,
                seed=opts.seed,
            )
            rss = PeakRSS().start()
            result = fit(_source(spark, path), params)
            mem = rss.stop()
            rr = result.rounds[1:] if len(result.rounds) > 1 else result.rounds
            corpus = result.report["corpus"]
            row = {
                "parts_per_slice": int(parts),
                "combine": combine,
                "rounds": len(result.rounds),
                "rounds_measured": len(rr),
                "tasks": _med(rr, "tasks"),
                "median_round_s": _med(rr, "round_s"),
                "median_merge_s": _med(rr, "merge_s"),
                "median_job_s": _med(rr, "job_s"),
                "median_kernel_s": _med(rr, "task_kernel_max_s"),
                "median_shipped_bytes": _med(rr, "shipped_bytes"),
                "median_driver_bytes": _med(rr, "driver_bytes"),
                "median_merged_bytes": _med(rr, "merged_bytes"),
                "cached_bytes": corpus.get("cached_bytes"),
                "build_s": result.report["corpus_build_seconds"],
                "train_s": result.report["train_seconds"],
                **mem,
            }
            rows.append(row)
            log.info("tasks per round: %s", row)
    results["tasks"] = {
        "corpus": {**spec.to_dict(), **gen},
        "k": opts.tasks_k,
        "minibatch_size": opts.tasks_minibatch,
        "passes": 1,
        "rows": rows,
    }
    return results["tasks"]


def _mllib_fit_seconds(df, k: int, max_iter: int, rate: float, seed: int) -> float:
    from pyspark.ml.clustering import LDA

    lda = LDA(
        k=k,
        maxIter=max_iter,
        seed=seed,
        optimizer="online",
        subsamplingRate=rate,
        featuresCol="features",
    )
    t = time.perf_counter()
    lda.fit(df)
    return time.perf_counter() - t


def run_throughput(spark, opts, results: dict):
    """Throughput (see the module docstring); sets ``results["throughput"]``."""
    from pyspark import StorageLevel

    spec = CorpusSpec(
        n_docs=opts.throughput_docs,
        vocab_size=opts.throughput_vocab,
        k_true=opts.throughput_true_topics,
        mean_length=opts.throughput_mean_length,
        seed=opts.seed,
    )
    path, gen = generated_corpus(spark, spec, opts.generated_dir)
    # untimed: Python workers started and the kernels loaded, as in a running session
    small = spark.read.parquet(os.path.join(path, "corpus")).limit(500)
    fit(from_vectors(small, "features", "id"), TrainParams(k=5, passes=1, seed=opts.seed))
    # the default minibatch (0: resolved from the cluster and the training documents when
    # the corpus is built), and, for quality per pass, the reference size (2,000, the
    # default on corpora of up to 200,000 documents); both fits score the same held-out
    # documents after their one pass
    reference_size = opts.throughput_reference_minibatch
    rows = []
    for minibatch in (0, reference_size) if reference_size else (0,):
        params = TrainParams(
            algorithm="scvb0",
            k=opts.throughput_k,
            alpha=opts.alpha,
            passes=1,
            seed=opts.seed,
            minibatch_size=minibatch,
            heldout_count=THROUGHPUT_HELDOUT,
        )
        result = fit(_source(spark, path), params)
        build_s = result.report["corpus_build_seconds"]
        pass_s = result.report["train_seconds"] - build_s
        corpus = result.report["corpus"]
        final = result.evaluations[-1] if result.evaluations else {}
        rows.append(
            {
                "minibatch_size": corpus.get("minibatch_size"),
                "default": minibatch == 0,
                "rounds": result.report["rounds"],
                "build_s": build_s,
                "pass_s": pass_s,
                "median_round_s": _med(result.rounds[1:] or result.rounds, "round_s"),
                "heldout_documents": THROUGHPUT_HELDOUT,
                "heldout_loglik": final.get("heldout_loglik"),
                "training_documents": corpus.get("training_documents"),
                "training_tokens": corpus.get("training_tokens"),
                "training_pairs": corpus.get("training_pairs"),
            }
        )
        log.info("throughput, sparklda: %s", rows[-1])
        if rows[-1]["minibatch_size"] == reference_size:
            break  # the default is the reference size: nothing to compare
    sparklda_row, reference = rows[0], rows[1:]
    pass_s = sparklda_row["pass_s"]
    # MLlib on the same documents, cached as its users would cache them (not timed)
    df = spark.read.parquet(os.path.join(path, "corpus"))
    df = df.repartition(spark.sparkContext.defaultParallelism * 2).persist(
        StorageLevel.MEMORY_AND_DISK
    )
    try:
        n_rows = df.count()
        m1, m2 = opts.throughput_mllib_iters
        rate = opts.throughput_mllib_rate
        # untimed: the JVM's first compilation of MLlib's code is not a cost per pass
        _mllib_fit_seconds(df.limit(2000), opts.throughput_k, 1, 0.5, opts.seed)
        t1 = _mllib_fit_seconds(df, opts.throughput_k, m1, rate, opts.seed)
        t2 = _mllib_fit_seconds(df, opts.throughput_k, m2, rate, opts.seed)
    finally:
        df.unpersist()
    if t2 > t1:  # the time of the extra iterations, MLlib's set-up per fit left out
        method, per_iter = "marginal", (t2 - t1) / (m2 - m1)
    else:  # noise larger than the extra iterations: the whole fit, set-up included
        method, per_iter = "whole fit", t2 / m2
    mllib_row = {
        "settings": {"optimizer": "online", "subsamplingRate": rate},
        "documents": n_rows,
        "max_iter": [m1, m2],
        "fit_s": [t1, t2],
        "method": method,
        "iteration_s": per_iter,
        "iterations_per_pass": 1.0 / rate,
        "passes_timed": (m2 - m1) * rate if method == "marginal" else m2 * rate,
        "pass_s": per_iter / rate,
    }
    log.info("throughput, MLlib: %s", mllib_row)
    results["throughput"] = {
        "corpus": {**spec.to_dict(), **gen},
        "k": opts.throughput_k,
        # the default's cap on the rounds of a pass when this ran
        "max_default_rounds": MAX_DEFAULT_ROUNDS_PER_PASS,
        "sparklda": sparklda_row,
        "reference": reference[0] if reference else None,
        "mllib": mllib_row,
        "speedup": mllib_row["pass_s"] / pass_s if pass_s > 0 else None,
        "build_over_pass": sparklda_row["build_s"] / pass_s if pass_s > 0 else None,
    }
    return results["throughput"]


def run_startup(opts, results: dict, timeout: float = 1800):
    """Startup (see the module docstring): one fresh process per cache state in
    ``opts.startup``; sets ``results["startup"]``."""
    rows = []
    for state in opts.startup:
        env = dict(os.environ)
        env.pop("SPARK_CONNECT_MODE_ENABLED", None)
        # under spark-submit this process talks to its JVM through a gateway; the child
        # must start its own JVM, not attach to this one (whose SparkContext is running)
        for key in ("PYSPARK_GATEWAY_PORT", "PYSPARK_GATEWAY_SECRET"):
            env.pop(key, None)
        env["PYSPARK_PYTHON"] = sys.executable
        env["PYTHONPATH"] = os.pathsep.join(p for p in (ROOT, os.environ.get("PYTHONPATH")) if p)
        cache = None
        if state == "cold":
            cache = tempfile.mkdtemp(prefix="sparklda-numba-cold-")
            env["NUMBA_CACHE_DIR"] = cache
        cmd = [
            sys.executable,
            STARTUP_SCRIPT,
            "--json",
            "--k",
            str(opts.startup_k),
            "--passes",
            str(opts.startup_passes),
            "--seed",
            str(opts.seed),
        ]
        t = time.perf_counter()
        out = subprocess.run(
            cmd, env=env, cwd=ROOT, capture_output=True, text=True, timeout=timeout, check=False
        )
        wall = time.perf_counter() - t
        line = [x for x in out.stdout.splitlines() if x.startswith("STARTUP ")]
        if out.returncode != 0 or not line:
            raise RuntimeError(
                f"benchmarks/scale/startup.py ({state}) failed ({out.returncode}):\n"
                + out.stderr[-3000:]
            )
        row = {"cache": state, **json.loads(line[-1][len("STARTUP ") :]), "process_s": wall}
        if cache:
            import shutil

            shutil.rmtree(cache, ignore_errors=True)
        rows.append(row)
        log.info("startup (%s cache): %s", state, row)
    results["startup"] = rows
    return rows
