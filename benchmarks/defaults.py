"""Defaults on small and mid-sized corpora (docs/defaults.md; docs/architecture.md,
"Step schedules" and "CVB0 and CVB: the start").

    PYTHONPATH=$PWD python -m benchmarks.defaults                 # every corpus
    PYTHONPATH=$PWD python -m benchmarks.defaults --only uci_kos  # one corpus

For each shared corpus of 200 to 20,000 documents (``../shared/data`` or
``$SPARKLDA_SHARED_DATA``), K = 20 and one seeded split (10% of the documents
held out, at least 20), every system is scored by sparklda's document-completion
evaluation on the same held-out documents:

* ``scvb0``: SCVB0 at its defaults (20 passes);
* ``scvb0-paper``: SCVB0 with the paper's schedule as it was the default before
  (``schedule_minibatch`` = 100);
* ``cvb0``: CVB0 at its defaults but 50 iterations;
* ``svb``: SVB at its defaults (20 passes), ``svb-hoffman``: SVB with the earlier
  defaults (τ0 = 1024, one step per round);
* ``sklearn-online``: scikit-learn's ``LatentDirichletAllocation(learning_method=
  "online")`` at scikit-learn's defaults (α = η = 1/K, minibatches of 128, τ0 = 10)
  with ``max_iter`` = 20 passes, scored with its own α = 1/K.

Results go to ``docs/benchmarks/defaults.json`` (entries already there are kept
unless ``--redo``) and the page ``docs/defaults.md`` is written from them.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RESULTS = os.path.join(ROOT, "docs", "benchmarks", "defaults.json")
PAGE = os.path.join(ROOT, "docs", "defaults.md")
K = 20
PASSES = 20
CVB0_ITERATIONS = 50
SEED = 0
#: (name, kind) in order of size
CORPORA = [
    ("gensim_mini_newsgroup", "text"),
    ("gensim_lee_background", "text"),
    ("lda_reuters", "uci"),
    ("lda_cora", "uci"),
    ("uci_kos", "uci"),
    ("octis_m10", "uci"),
    ("lda_newsgroups", "uci"),
]
SYSTEMS = ["scvb0", "scvb0-paper", "cvb0", "svb", "svb-hoffman", "sklearn-online"]
#: how close SCVB0 at its defaults must come to CVB0's 50-iteration score (nats/token)
SCVB0_TOLERANCE = 0.03


def shared_data() -> str:
    return os.environ.get("SPARKLDA_SHARED_DATA", os.path.join(ROOT, "..", "shared", "data"))


def load(spark, name: str, kind: str):
    from sparklda.corpus import from_text, load_text_dataframe, read_uci

    path = os.path.join(shared_data(), name)
    if kind == "uci":
        return read_uci(
            spark, os.path.join(path, "docword.txt.gz"), os.path.join(path, "vocab.txt")
        )
    return from_text(load_text_dataframe(spark, os.path.join(path, "texts.jsonl.gz")))


def params_for(system: str):
    from sparklda.params import TrainParams

    common = {"k": K, "seed": SEED}
    if system == "scvb0":
        return TrainParams(algorithm="scvb0", passes=PASSES, **common)
    if system == "scvb0-paper":
        return TrainParams(algorithm="scvb0", passes=PASSES, schedule_minibatch=100, **common)
    if system == "cvb0":
        return TrainParams(algorithm="cvb0", passes=CVB0_ITERATIONS, **common)
    if system == "svb":
        return TrainParams(algorithm="svb", passes=PASSES, **common)
    if system == "svb-hoffman":
        return TrainParams(
            algorithm="svb",
            passes=PASSES,
            learning_offset=1024.0,
            learning_minibatch=0,
            **common,
        )
    raise ValueError(system)


def sklearn_score(docs, vocab_size, heldout) -> float:
    import scipy.sparse
    from sklearn.decomposition import LatentDirichletAllocation

    from sparklda.evaluation import completion_loglik, normalize_topics

    rows = np.concatenate([np.full(len(t), i) for i, (_, t, _) in enumerate(docs)])
    x = scipy.sparse.csr_matrix(
        (
            np.concatenate([c for _, _, c in docs]).astype(np.float64),
            (rows, np.concatenate([t for _, t, _ in docs])),
        ),
        shape=(len(docs), vocab_size),
    )
    lda = LatentDirichletAllocation(
        n_components=K, learning_method="online", max_iter=PASSES, random_state=SEED
    ).fit(x)
    phi = normalize_topics(lda.components_, 0.0, topic_axis=0)
    return completion_loglik(heldout, phi, 1.0 / K).loglik_per_token


def run_corpus(spark, name: str, kind: str, results: dict, redo: bool, systems) -> None:
    from sparklda.api import fit
    from sparklda.corpus import DocSource, heldout_blocks, split_documents, validate

    src = load(spark, name, kind)
    stats = validate(src)
    n_docs = int(stats["docs"] - stats["empty"])
    n_held = max(20, n_docs // 10)
    train_rdd, held_rdd = split_documents(src, stats, heldout_count=n_held, seed=SEED)
    docs = sorted(train_rdd.collect(), key=lambda d: d[0])
    heldout = heldout_blocks(held_rdd, seed=SEED)
    entry = results.setdefault(name, {})
    entry.update({"documents": n_docs, "training_documents": len(docs), "heldout": n_held})
    try:
        for system in systems:
            if system in entry.get("systems", {}) and not redo:
                continue
            t0 = time.perf_counter()
            if system == "sklearn-online":
                score, report = sklearn_score(docs, src.vocab_size, heldout), {}
            else:
                train = DocSource(
                    spark.sparkContext.parallelize(docs, 4), src.vocab_size, src.vocab, name
                )
                params = params_for(system)
                res = fit(train, params)
                score = res.model.evaluate(heldout).loglik_per_token
                report = {
                    k: v
                    for k, v in res.report.get("mode", {}).items()
                    if k in ("schedule_minibatch", "learning_offset", "learning_minibatch")
                }
            seconds = time.perf_counter() - t0
            entry.setdefault("systems", {})[system] = {
                "heldout_loglik": round(float(score), 4),
                "seconds": round(seconds, 1),
                **report,
            }
            print(f"{name} {system}: {score:.4f} ({seconds:.0f} s)", flush=True)
            save(results)
    finally:
        heldout.unpersist()


def save(results: dict) -> None:
    os.makedirs(os.path.dirname(RESULTS), exist_ok=True)
    with open(RESULTS, "w") as f:
        json.dump(results, f, indent=1, sort_keys=True)
        f.write("\n")
    with open(PAGE, "w") as f:
        f.write(render(results))


def _cell(entry, system):
    s = entry.get("systems", {}).get(system)
    return f"{s['heldout_loglik']:.4f}" if s else "–"


def render(results: dict) -> str:
    lines = [
        "# Defaults on small corpora",
        "",
        "Generated by `PYTHONPATH=$PWD python -m benchmarks.defaults` from",
        "`docs/benchmarks/defaults.json`; the systems and the split are described in",
        '`benchmarks/defaults.py`, the rules in docs/architecture.md ("Step schedules",',
        '"CVB0 and CVB: the start"). K = 20, held-out document-completion',
        "log-likelihood per token (higher is better), 20 passes unless stated,",
        "CVB0 50 iterations; `local[2]` on a shared 2-core machine.",
        "",
        "| corpus | docs | scvb0 | scvb0-paper | cvb0 (50 it.) | scvb0 − cvb0 | svb | "
        "svb-hoffman | sklearn-online | svb − sklearn |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, _ in CORPORA:
        e = results.get(name)
        if not e:
            continue
        s = e.get("systems", {})

        def diff(a, b, s=s):
            if a in s and b in s:
                return f"{s[a]['heldout_loglik'] - s[b]['heldout_loglik']:+.4f}"
            return "–"

        lines.append(
            f"| {name} | {e['documents']:,} | {_cell(e, 'scvb0')} | {_cell(e, 'scvb0-paper')} "
            f"| {_cell(e, 'cvb0')} | {diff('scvb0', 'cvb0')} | {_cell(e, 'svb')} "
            f"| {_cell(e, 'svb-hoffman')} | {_cell(e, 'sklearn-online')} "
            f"| {diff('svb', 'sklearn-online')} |"
        )
    lines += [
        "",
        f"Targets: SCVB0 at its defaults within {SCVB0_TOLERANCE} nats/token of CVB0's "
        "50-iteration score (or above it), and SVB at its defaults at least as good as "
        "scikit-learn's online LDA at its defaults after the same passes:",
        "",
        "| corpus | scvb0 ≥ cvb0 − 0.03 | svb ≥ sklearn-online |",
        "|---|---|---|",
    ]
    for name, _ in CORPORA:
        s = results.get(name, {}).get("systems", {})
        if not s:
            continue

        def verdict(ok):
            return "–" if ok is None else ("PASS" if ok else "**MISS**")

        a = b = None
        if "scvb0" in s and "cvb0" in s:
            a = s["scvb0"]["heldout_loglik"] >= s["cvb0"]["heldout_loglik"] - SCVB0_TOLERANCE
        if "svb" in s and "sklearn-online" in s:
            b = s["svb"]["heldout_loglik"] >= s["sklearn-online"]["heldout_loglik"]
        lines.append(f"| {name} | {verdict(a)} | {verdict(b)} |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", nargs="*", help="corpora to run (default: all)")
    ap.add_argument("--systems", nargs="*", default=SYSTEMS)
    ap.add_argument("--redo", action="store_true", help="rerun entries already recorded")
    args = ap.parse_args(argv)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    from sparklda import SESSION_PROPERTIES

    spark = (
        SparkSession.builder.master("local[2]")
        .config(map=SESSION_PROPERTIES)  # as the jobs (round results straight to the driver)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.memory", "3g")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    results = {}
    if os.path.exists(RESULTS):
        with open(RESULTS) as f:
            results = json.load(f)
    for name, kind in CORPORA:
        if args.only and name not in args.only:
            continue
        run_corpus(spark, name, kind, results, args.redo, args.systems)
    save(results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
