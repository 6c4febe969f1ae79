"""First-round against steady-round time of SCVB0 on KOS, in a fresh process.

    PYTHONPATH=$PWD python benchmarks/scale/startup.py            # from a checkout's root
    PYTHONPATH=$PWD python benchmarks/scale/startup.py --cold     # numba cache emptied first

``--cold`` moves the kernels' numba cache files (``sparklda/kernels/__pycache__``)
aside first, as on a machine that never ran sparklda. See docs/architecture.md,
"Startup".
"""

import argparse
import os
import shutil
import sys
import tempfile

import numpy as np


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--cold", action="store_true")
    ap.add_argument("--k", type=int, default=50)
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

    from sparklda.api import fit
    from sparklda.corpus import read_uci
    from sparklda.params import TrainParams

    spark = (
        SparkSession.builder.master("local[2]")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.default.parallelism", "2")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    source = read_uci(spark, "sample:kos/docword.txt.gz", "sample:kos/vocab.txt")
    params = TrainParams(k=args.k, passes=1, minibatch_size=1000, seed=0, combine="driver")
    rounds = fit(source, params).rounds
    rs = [r["round_s"] for r in rounds]
    ks = [r["task_kernel_max_s"] for r in rounds]
    print(
        f"{'cold' if args.cold else 'warm'} cache: first round {rs[0]:.2f} s (slowest task's "
        f"kernel {ks[0]:.2f} s); later rounds, median {np.median(rs[1:]):.2f} s "
        f"(kernel {np.median(ks[1:]):.2f} s)"
    )
    spark.stop()


if __name__ == "__main__":
    main()
