"""The constants of the cost model (docs/architecture.md, "Cost model: where each
placement wins") that earlier runs did not measure: seconds per byte broadcast (a
Python broadcast read by every task), collected (task results to the driver) and
shuffled (pickled pieces through a shuffle), each as the slope between two sizes
within one run, so the machine's load cancels as far as it can, and the fixed cost of
a trivial job of 2 tasks.

    PYTHONPATH=$PWD python benchmarks/scale/cost_constants.py [--small MB] [--large MB]
"""

import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

TASKS = 2
CHUNK = 1 << 20


def _timed(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--small", type=int, default=8, help="MB")
    ap.add_argument("--large", type=int, default=64, help="MB")
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    import numpy as np

    from benchmarks.lda_bench.cli import build_session

    spark = build_session(None, "2g")
    sc = spark.sparkContext
    rdd = sc.parallelize(range(TASKS), TASKS).cache()
    rdd.count()
    parts = list(range(TASKS))
    sc.runJob(rdd, lambda it: [sum(it)], parts)
    trivial = _timed(lambda: sc.runJob(rdd, lambda it: [sum(it)], parts), args.repeats)
    print(f"trivial job of {TASKS} tasks: {trivial:.3f} s", flush=True)
    sizes = (args.small << 20, args.large << 20)
    out = {}
    for name in ("broadcast", "collect", "shuffle"):
        row = []
        for size in sizes:
            if name == "broadcast":
                arr = np.random.default_rng(0).random(size // 8)

                def job(arr=arr):
                    bc = sc.broadcast(arr)
                    sc.runJob(rdd, lambda it, bc=bc: [bc.value.nbytes], parts)
                    bc.destroy()

            elif name == "collect":
                per = size // TASKS

                def job(per=per):
                    sc.runJob(rdd, lambda it, per=per: [np.ones(per // 8).tobytes()], parts)

            else:
                pieces = size // TASKS // CHUNK

                def gen(it, pieces=pieces):
                    for _x in it:
                        for i in range(pieces):
                            yield (i, os.urandom(CHUNK))

                def job(gen=gen):
                    rdd.mapPartitions(gen).partitionBy(TASKS).map(lambda kv: len(kv[1])).sum()

            job()
            row.append(_timed(job, args.repeats))
        slope = (row[1] - row[0]) / (sizes[1] - sizes[0])
        out[name] = slope
        print(
            f"{name}: {row[0]:.3f} s at {args.small} MB, {row[1]:.3f} s at {args.large} MB:"
            f" {slope:.2e} s per byte ({1 / slope / 1e6:.0f} MB/s)",
            flush=True,
        )
    print("load average:", " ".join(f"{x:.1f}" for x in os.getloadavg()))
    spark.stop()


if __name__ == "__main__":
    main()
