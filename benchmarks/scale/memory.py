"""Figures for the memory model (docs/architecture.md, "Memory model"): bytes shipped to,
received by and merged on the driver per SCVB0 round at V=50,000, K=100, on a generated
corpus, with the driver merge and the executors' combine.

    PYTHONPATH=$PWD python benchmarks/scale/memory.py --out /tmp/mem_corpus
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
    args = ap.parse_args()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    from sparklda.api import fit
    from sparklda.cli.generate import generate
    from sparklda.corpus import from_vectors
    from sparklda.params import TrainParams
    from sparklda.synthetic import CorpusSpec

    spark = (
        SparkSession.builder.master("local[2]")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.default.parallelism", "2")
        .config("spark.driver.memory", "4g")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    spec = CorpusSpec(
        n_docs=args.docs, vocab_size=args.vocab, k_true=args.k, mean_length=200, seed=0
    )
    if not os.path.exists(args.out):
        generate(spark, spec, args.out, partitions=4)
    source = from_vectors(spark.read.parquet(args.out + "/corpus"), "features", "id")
    for combine, tasks in (("driver", 2), ("executors", 2), ("driver", 8), ("executors", 8)):
        params = TrainParams(
            k=args.k,
            passes=1,
            minibatch_size=5000,
            parts_per_slice=tasks,
            combine=combine,
            seed=0,
        )
        result = fit(source, params)
        rows = result.rounds

        def med(key, rows=rows):
            return float(np.median([r[key] for r in rows]))

        print(
            f"combine={combine} tasks={tasks} rounds={len(rows)} "
            f"shipped_bytes={med('shipped_bytes'):.3e} driver_bytes={med('driver_bytes'):.3e} "
            f"merged_bytes={med('merged_bytes'):.3e} round_s={med('round_s'):.2f} "
            f"merge_s={med('merge_s'):.3f} "
            f"cached_bytes={result.report['corpus']['cached_bytes']:.3e}",
            flush=True,
        )
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"driver Python peak RSS {peak:.0f} MB")
    spark.stop()


if __name__ == "__main__":
    main()
