"""Issue 33, point 6(b): a round with the model on the executors against one with it on
the driver, in ``local[2]``, and the held-out quality per pass of both.

SCVB0 at K=100 on 20 Newsgroups (``lda_newsgroups`` under ``--data-dir``, read with
``sparklda.corpus.read_uci``) and on the generated corpus of the ``tasks`` stage
(100,000 documents of mean length 150, about 15M tokens, V=50,000, 100 true topics;
drawn once into ``--generated-dir`` by ``benchmarks.lda_bench.scale.generated_corpus``).
Each corpus trains ``--passes`` passes with ``model_placement`` driver, then executors
(``--order`` repeats them, e.g. ``driver,executors,driver,executors``), one fit after the
other in one session, the same seed and held-out documents; evaluated once a pass. The
figures: the median round after the first (``round_s``), the held-out log-likelihood
per token after each pass, the load average before and after each fit.

    PYTHONPATH=$PWD python benchmarks/scale/placement_local.py \
        --json docs/benchmarks/placement_local.json

Not a test: figures for docs/benchmarks/findings.md.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _load() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data-dir", default="/work/shared/data")
    ap.add_argument("--generated-dir", default="/tmp/sparklda-generated")
    ap.add_argument("--corpora", default="newsgroups,generated")
    ap.add_argument("--k", type=int, default=100)
    ap.add_argument("--passes", type=int, default=2)
    ap.add_argument("--minibatch", default="newsgroups=4000,generated=16000")
    ap.add_argument("--heldout", type=int, default=1000)
    ap.add_argument("--order", default="driver,executors")
    ap.add_argument("--driver-memory", default="6g")
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    sys.path.insert(0, ROOT)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    from benchmarks.lda_bench.scale import generated_corpus
    from sparklda import SESSION_PROPERTIES
    from sparklda.api import fit
    from sparklda.corpus import from_vectors, read_uci
    from sparklda.params import TrainParams
    from sparklda.synthetic import CorpusSpec

    spark = (
        SparkSession.builder.master("local[2]")
        .config(map=SESSION_PROPERTIES)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.default.parallelism", "2")
        .config("spark.driver.memory", args.driver_memory)
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    minibatch = dict(x.split("=") for x in args.minibatch.split(","))
    results: dict = {
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "machine": f"{os.cpu_count()} cores, "
        f"{os.sysconf('SC_PAGE_SIZE') * os.sysconf('SC_PHYS_PAGES') / 2**30:.1f} GiB, local[2]",
        "settings": vars(args),
        "corpora": {},
    }
    for name in args.corpora.split(","):
        if name == "newsgroups":
            base = os.path.join(args.data_dir, "lda_newsgroups")
            source = read_uci(spark, f"{base}/docword.txt.gz", f"{base}/vocab.txt")
            docs = 18774
        else:
            spec = CorpusSpec(
                n_docs=100_000, vocab_size=50_000, k_true=100, mean_length=150, seed=0
            )
            t0 = time.perf_counter()
            path, _ = generated_corpus(spark, spec, args.generated_dir)
            print(f"generated corpus {path} ({time.perf_counter() - t0:.0f} s)", flush=True)
            source = from_vectors(spark.read.parquet(path + "/corpus"), "features", "id")
            docs = spec.n_docs
        mb = int(minibatch[name])
        per_pass = math.ceil((docs - args.heldout) / mb)
        fits = []
        for placement in args.order.split(","):
            params = TrainParams(
                k=args.k,
                passes=args.passes,
                minibatch_size=mb,
                parts_per_slice=2,
                seed=0,
                model_placement=placement,
                heldout_count=args.heldout,
                eval_every=per_pass,
            )
            before = _load()
            t0 = time.perf_counter()
            result = fit(source, params)
            wall = time.perf_counter() - t0
            rounds = result.rounds
            later = [r["round_s"] for r in rounds[1:]] or [rounds[0]["round_s"]]
            row = {
                "placement": placement,
                "load_before": before,
                "load_after": _load(),
                "wall_s": round(wall, 1),
                "train_s": result.report.get("train_seconds"),
                "rounds": len(rounds),
                "first_round_s": round(rounds[0]["round_s"], 3),
                "median_round_s": round(float(np.median(later)), 3),
                "round_s": [round(r["round_s"], 3) for r in rounds],
                "median_driver_bytes": float(np.median([r["driver_bytes"] for r in rounds])),
                "median_shipped_bytes": float(np.median([r["shipped_bytes"] for r in rounds])),
                "median": {  # every numeric field of the round records, rounds 2 on
                    key: round(float(np.median([r[key] for r in rounds[1:] or rounds])), 4)
                    for key, v in rounds[-1].items()
                    if isinstance(v, (int, float))
                    and not isinstance(v, bool)
                    and all(isinstance(r.get(key), (int, float)) for r in rounds)
                },
                "heldout_loglik": [
                    {k: e.get(k) for k in ("round", "passes", "heldout_loglik")}
                    for e in result.evaluations
                ],
            }
            print(json.dumps({"corpus": name, **row}), flush=True)
            fits.append(row)
        results["corpora"][name] = {"k": args.k, "minibatch": mb, "rounds_per_pass": per_pass}
        results["corpora"][name]["fits"] = fits
        if args.json:
            with open(args.json, "w") as f:
                json.dump(results, f, indent=1)
                f.write("\n")
    spark.stop()


if __name__ == "__main__":
    main()
