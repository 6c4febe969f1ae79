"""Writes tests/data/golden_models.npz: the topics of small fits made with the code as
it was before the package restructuring (issue 32), one per mode and path; the test
``tests/test_golden.py`` trains the same fits and compares. Re-run only when a change
is meant to change the models, naming the fits it changes (the others keep their saved
topics):

    python tests/make_golden.py            # every fit
    python tests/make_golden.py scvb0_priors
"""

from __future__ import annotations

import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))

#: name -> TrainParams fields; small KOS fits that cover every mode, learned priors,
#: seeded topics and held-out documents
FITS = {
    "scvb0": dict(algorithm="scvb0", k=8, passes=2, minibatch_size=700, heldout_count=200),
    "scvb0_priors": dict(
        algorithm="scvb0",
        k=8,
        passes=2,
        minibatch_size=700,
        optimize_alpha=True,
        optimize_eta=True,
    ),
    "cvb0": dict(algorithm="cvb0", k=8, passes=3, heldout_count=200),
    "cvb0_seeded": dict(
        algorithm="cvb0",
        k=8,
        passes=2,
        seed_topics={"0": ["bush", "kerry"]},
    ),
    "cvb": dict(algorithm="cvb", k=8, passes=2),
    "svb": dict(algorithm="svb", k=8, passes=2, minibatch_size=700),
    "vb": dict(algorithm="svb", k=8, passes=2, batch=True),
    # MAP-EM with Jacobi updates as MLlib's EM (saved when MAP moved to them from CVB0's
    # in-document sequential update), with held-out documents
    "map": dict(algorithm="map", k=8, passes=3, heldout_count=200),
}


def fit_all(spark, fits=FITS) -> dict[str, np.ndarray]:
    from sparklda.api import fit
    from sparklda.corpus import read_uci
    from sparklda.params import TrainParams

    kos = os.path.join(os.path.dirname(HERE), "sparklda", "data", "kos")
    out = {}
    for name, fields in fits.items():
        source = read_uci(
            spark, os.path.join(kos, "docword.txt.gz"), os.path.join(kos, "vocab.txt")
        )
        params = TrainParams(seed=7, parts_per_slice=2, **fields)
        result = fit(source, params)
        out[name] = np.asarray(result.model.topics_matrix(), dtype=np.float64)
        out[name + "__alpha"] = np.atleast_1d(np.asarray(result.model.alpha, dtype=np.float64))
    return out


if __name__ == "__main__":
    from pyspark.sql import SparkSession

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    spark = (
        SparkSession.builder.master("local[2]")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.default.parallelism", "2")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    path = os.path.join(HERE, "data", "golden_models.npz")
    names = sys.argv[1:]
    unknown = sorted(set(names) - set(FITS))
    if unknown:
        raise SystemExit(f"unknown fits {unknown}; known: {sorted(FITS)}")
    models = dict(np.load(path)) if names else {}
    models.update(fit_all(spark, {n: FITS[n] for n in names} if names else FITS))
    np.savez_compressed(path, **models)
    print({k: v.shape for k, v in models.items()})
    spark.stop()
