"""Figures for the memory model (docs/architecture.md, "Memory model"): bytes shipped to,
received by and merged on the driver per SCVB0 round at V=50,000, K=100, on a generated
corpus, with the driver merge and the executors' combine; and the peak resident memory of
the driver's Python process and of its JVM during each fit (with psutil).

    PYTHONPATH=$PWD python benchmarks/scale/memory.py --out /tmp/mem_corpus
    # V x K = 10^8: V=500,000, K=200, one pass, in a 16 GiB driver
    PYTHONPATH=$PWD python benchmarks/scale/memory.py --out /tmp/mem_vk --docs 20000 \
        --vocab 500000 --k 200 --true-topics 50 --minibatch 10000 --runs driver:2 \
        --driver-memory 16g
    # the model on the driver and on the executors (model_placement), side by side
    PYTHONPATH=$PWD python benchmarks/scale/memory.py --out /tmp/mem_corpus \
        --runs driver:2,driver:2:executors,driver:2,driver:2:executors
    # a stateful mode (CVB0, CVB, MAP, Gibbs: every round sweeps every block), 3 passes
    PYTHONPATH=$PWD python benchmarks/scale/memory.py --out /tmp/mem_small --docs 5000 \
        --k 50 --algorithm cvb0 --passes 3 --minibatch 0 \
        --runs driver:2,driver:2:executors,driver:2,driver:2:executors
"""

import argparse
import os
import resource
import sys

import numpy as np


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="/tmp/sparklda-memory-corpus")
    ap.add_argument("--docs", type=int, default=20000)
    ap.add_argument("--vocab", type=int, default=50000)
    ap.add_argument("--k", type=int, default=100)
    ap.add_argument("--true-topics", type=int, default=None, help="default: --k")
    ap.add_argument("--minibatch", type=int, default=5000, help="0: the algorithm's default")
    ap.add_argument("--algorithm", default="scvb0")
    ap.add_argument("--passes", type=int, default=1)
    ap.add_argument("--runs", default="driver:2,executors:2,driver:8,executors:8")
    ap.add_argument("--driver-memory", default="4g")
    args = ap.parse_args()
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    from benchmarks.lda_bench.memory import PeakRSS

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    from sparklda import SESSION_PROPERTIES
    from sparklda.api import fit
    from sparklda.cli.generate import generate
    from sparklda.corpus import from_vectors
    from sparklda.params import TrainParams
    from sparklda.synthetic import CorpusSpec

    spark = (
        SparkSession.builder.master("local[2]")
        .config(map=SESSION_PROPERTIES)  # as the jobs (round results straight to the driver)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.default.parallelism", "2")
        .config("spark.driver.memory", args.driver_memory)
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    spec = CorpusSpec(
        n_docs=args.docs,
        vocab_size=args.vocab,
        k_true=args.true_topics or args.k,
        mean_length=200,
        seed=0,
    )
    if not os.path.exists(args.out):
        generate(spark, spec, args.out, partitions=4)
    source = from_vectors(spark.read.parquet(args.out + "/corpus"), "features", "id")
    # a run: combine:tasks, or combine:tasks:placement (model_placement, default driver)
    runs = [(x.split(":") + ["driver"])[:3] for x in args.runs.split(",")]
    for combine, tasks_text, placement in runs:
        tasks = int(tasks_text)
        params = TrainParams(
            algorithm=args.algorithm,
            k=args.k,
            passes=args.passes,
            minibatch_size=args.minibatch,
            parts_per_slice=tasks,
            combine=combine,
            seed=0,
            model_placement=placement,
        )
        rss = PeakRSS().start()
        result = fit(source, params)
        mem = rss.stop()
        rows = result.rounds

        def med(key, rows=rows):
            return float(np.median([r[key] for r in rows]))

        print(
            f"{args.algorithm} combine={combine} tasks={tasks} placement={placement} "
            f"rounds={len(rows)} "
            f"shipped_bytes={med('shipped_bytes'):.3e} driver_bytes={med('driver_bytes'):.3e} "
            f"merged_bytes={med('merged_bytes'):.3e} round_s={med('round_s'):.2f} "
            f"merge_s={med('merge_s'):.3f} "
            f"cached_bytes={result.report['corpus']['cached_bytes']:.3e} "
            f"first_round_s={rows[0]['round_s']:.2f} train_s={result.report['train_seconds']:.1f} "
            f"peak_rss_python={(mem['driver_python_peak_rss_bytes'] or 0) / 2**20:.0f}MiB "
            f"peak_rss_jvm={(mem['driver_jvm_peak_rss_bytes'] or 0) / 2**20:.0f}MiB",
            flush=True,
        )
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"driver Python peak RSS {peak:.0f} MB")
    spark.stop()


if __name__ == "__main__":
    main()
