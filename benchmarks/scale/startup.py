"""First-round against steady-round time of SCVB0 on KOS, in a fresh process.

    PYTHONPATH=$PWD python benchmarks/scale/startup.py            # from a checkout's root
    PYTHONPATH=$PWD python benchmarks/scale/startup.py --cold     # numba cache emptied first

``--json`` prints the figures as one ``STARTUP {...}`` line (the benchmark's
startup stage, ``benchmarks/run.py --startup``, runs this script that way; for
a cold cache it points ``NUMBA_CACHE_DIR`` at an empty folder instead of
moving the checkout's cache files).
``--cold`` moves the kernels' numba cache files (``sparklda/kernels/__pycache__``)
aside first, as on a machine that never ran sparklda. See docs/architecture.md,
"Startup".
"""

import argparse
import json
import os
import shutil
import sys
import tempfile

import numpy as np


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--cold", action="store_true")
    ap.add_argument("--k", type=int, default=50)
    ap.add_argument("--passes", type=int, default=1)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", action="store_true", help="print one STARTUP {...} line")
    args = ap.parse_args()
    import sparklda.kernels as kernels

    cache = os.path.join(os.path.dirname(kernels.__file__), "__pycache__")
    if args.cold and os.path.isdir(cache):
        aside = tempfile.mkdtemp(prefix="numba-cache-aside-")
        for name in os.listdir(cache):
            if name.endswith((".nbi", ".nbc")):
                shutil.move(os.path.join(cache, name), aside)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    from sparklda import SESSION_PROPERTIES
    from sparklda.api import fit
    from sparklda.corpus import read_uci
    from sparklda.params import TrainParams

    spark = (
        SparkSession.builder.master("local[2]")
        .config(map=SESSION_PROPERTIES)  # as the jobs (round results straight to the driver)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.default.parallelism", "2")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    source = read_uci(spark, "sample:kos/docword.txt.gz", "sample:kos/vocab.txt")
    params = TrainParams(
        k=args.k, passes=args.passes, minibatch_size=1000, seed=args.seed, combine="driver"
    )
    result = fit(source, params)
    rounds = result.rounds
    rs = [r["round_s"] for r in rounds]
    ks = [r["task_kernel_max_s"] for r in rounds]
    if args.json:
        figures = {
            "corpus": "sample:kos",
            "k": args.k,
            "minibatch_size": 1000,
            "rounds": len(rs),
            "first_round_s": rs[0],
            "first_kernel_s": ks[0],
            "steady_round_s": float(np.median(rs[1:])) if len(rs) > 1 else None,
            "steady_kernel_s": float(np.median(ks[1:])) if len(ks) > 1 else None,
            "build_s": result.report["corpus_build_seconds"],
        }
        print("STARTUP " + json.dumps(figures), flush=True)
    print(
        f"{'cold' if args.cold else 'warm'} cache: first round {rs[0]:.2f} s (slowest task's "
        f"kernel {ks[0]:.2f} s); later rounds, median {np.median(rs[1:]):.2f} s "
        f"(kernel {np.median(ks[1:]):.2f} s)"
    )
    spark.stop()


if __name__ == "__main__":
    main()
