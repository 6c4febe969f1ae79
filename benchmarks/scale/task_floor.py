"""The launch floor of a round's tasks: the wall time of a Spark job of N trivial
Python tasks over N cached partitions (no data, no kernel), for N = 2 and 64, the
fewest and most tasks per round of the tasks stage (docs/benchmarks.md, target 11).
On ``local[2]`` the 64 tasks' fixed costs add up on two cores, where on a cluster of
64 executors they would be paid in parallel.

    PYTHONPATH=$PWD python benchmarks/scale/task_floor.py
"""

import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def main() -> None:
    from benchmarks.lda_bench.cli import build_session

    spark = build_session(None, "2g")
    sc = spark.sparkContext
    for n in (2, 64):
        rdd = sc.parallelize(range(n), n).cache()
        rdd.count()
        times = []
        for _ in range(4):
            t = time.perf_counter()
            sc.runJob(rdd, lambda it: [sum(it)], list(range(n)))
            times.append(time.perf_counter() - t)
        print(f"{n} trivial tasks: " + ", ".join(f"{x:.2f}" for x in times) + " s", flush=True)
        rdd.unpersist()
    print("load average:", " ".join(f"{x:.1f}" for x in os.getloadavg()))
    spark.stop()


if __name__ == "__main__":
    main()
