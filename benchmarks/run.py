"""Benchmark sparklda against Spark MLlib's LDA (see benchmarks/README.md).

    pip install -e ".[bench]"
    spark-submit --driver-memory 8g benchmarks/run.py            # the full run (README: time)
    spark-submit benchmarks/run.py --only connect                # one stage (--only ...)
    spark-submit benchmarks/run.py --quick --out /tmp/b --report /tmp/b/benchmarks.md

``python benchmarks/run.py ...`` works too (pyspark starts its own JVM).
"""

import os
import sys

# The benchmark is not part of the installed package: import it from this checkout.
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks.lda_bench.cli import main

if __name__ == "__main__":
    sys.exit(main())
