"""The model on the executors after training (docs/architecture.md, "The model on the
executors"): the driver's Python resident memory during a fit with ``model_placement``
"executors" (evaluation and the trained model included) and then during the model's save,
its load (kept sharded) and describe_topics, against a fit with the driver placement;
collecting is capped at 1 MiB (``spark.sparklda.driver.maxModelBytes``), so any V×K
collect would fail the run. Reads the corpus ``benchmarks/scale/memory.py`` generates.

    PYTHONPATH=$PWD python benchmarks/scale/memory.py --out /tmp/shard_corpus --docs 5000 \
        --vocab 200000 --k 100 --true-topics 20 --minibatch 2500 --runs driver:2
    PYTHONPATH=$PWD python benchmarks/scale/sharded_model.py /tmp/shard_corpus executors
    PYTHONPATH=$PWD python benchmarks/scale/sharded_model.py /tmp/shard_corpus driver

The peak is the kernel's high-water mark (``VmHWM``, Linux), reset before each step.
"""

import os
import sys
import time


def _status(key: str) -> float:
    """A ``/proc/self/status`` figure in MiB."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(key):
                return int(line.split()[1]) / 1024
    raise KeyError(key)


def _measure(name: str, fn):
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")  # the high-water mark back to the current resident memory
    before, t0 = _status("VmRSS:"), time.perf_counter()
    out = fn()
    print(
        f"{name}: {time.perf_counter() - t0:.1f} s, driver Python RSS before "
        f"{before:.0f} MiB, peak {_status('VmHWM:'):.0f} MiB",
        flush=True,
    )
    return out


def main() -> None:
    corpus, placement = sys.argv[1], sys.argv[2]
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    from sparklda import SESSION_PROPERTIES
    from sparklda.api import fit
    from sparklda.corpus import from_vectors
    from sparklda.params import TrainParams

    spark = (
        SparkSession.builder.master("local[2]")
        .config(map=SESSION_PROPERTIES)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.default.parallelism", "2")
        .config("spark.driver.memory", "2g")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    spark.conf.set("spark.sparklda.driver.maxModelBytes", "1m")  # no V×K collect
    source = from_vectors(spark.read.parquet(corpus + "/corpus"), "features", "id")
    k = 100
    print(f"V={source.vocab_size} K={k}: 8VK = {8 * source.vocab_size * k / 2**20:.0f} MiB")
    params = TrainParams(
        k=k,
        passes=1,
        minibatch_size=5000,
        parts_per_slice=2,
        seed=0,
        model_placement=placement,
        heldout_count=200,
    )
    result = _measure(f"fit ({placement})", lambda: fit(source, params))
    print(f"held-out log-likelihood {result.evaluations[-1]['heldout_loglik']:.5f}")
    if placement == "executors":
        model = result.model
        path = "/tmp/sparklda-sharded-model"
        _measure("save", lambda: model.save(path, overwrite=True))
        loaded = _measure("load", lambda: type(model).load(path))  # TopicModel.load
        print(f"loaded sharded: {loaded.sharded}")
        _measure("describe_topics", lambda: model.describe_topics(10))
    spark.stop()


if __name__ == "__main__":
    main()
