"""Collapsed Gibbs sampling against tomotopy and the ``lda`` package (issue 34, point 3).

    python -m benchmarks.lda_bench.gibbs --corpora uci_kos:50,lda_newsgroups:100 \\
        --sweeps 100 --out docs/benchmarks/gibbs.json

Per corpus, in one SparkSession (``local[2]``), the same held-out documents split in
the same halves for every system (:func:`benchmarks.lda_bench.data.prepare`), α = 0.1,
η = 0.01 fixed, the same number of sweeps from a random start:

* sparklda ``algorithm="gibbs"`` (AD-LDA over the partitions of ``local[2]``),
  ``gibbs_average=1`` (the last sample, as the others give), timed per round
  (``round_s``: the whole Spark round, shipping and merging included) after a warm-up
  fit of 2 sweeps;
* tomotopy's ``LDAModel`` (C++, 2 worker threads, its default parallel scheme,
  ``optim_interval=0`` so α stays fixed, term weight ONE);
* the ``lda`` package (Cython, one thread, a dense sampler).

Each system's last word-topic counts N^Φ give φ̂ = (N^Φ + η)/(N^Z + Wη) over the
corpus's whole vocabulary, scored by :func:`sparklda.evaluation.completion_loglik`.

Cost per token against K: the sparse kernel alone (one core, no Spark) sweeps KOS
as one block at K = 100 and K = 1000; the seconds per sweep of sweeps 16-20 (the
topics have become sparse by then) are compared, beside tomotopy's on 1 thread.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from datetime import UTC, datetime

import numpy as np

from sparklda.api import fit
from sparklda.block import DocBlock
from sparklda.evaluation import normalize_topics
from sparklda.kernels import doc_keys, gibbs_init, gibbs_sweep, topic_counts
from sparklda.params import TrainParams

from .data import prepare, uci_documents
from .map_em import RoundCpu, session_cpu
from .systems import _score

ALPHA, ETA = 0.1, 0.01
DATA = "/work/shared/data"


def training_docs(bc):
    """[(doc_id, term ids, counts)] of the training documents, on the driver."""
    rows = bc.train_df.select("doc_id", "features").collect()
    return [(int(r[0]), r[1].indices.astype(np.int64), r[1].values) for r in rows]


def run_sparklda(bc, k, sweeps, seed=0):
    source = bc.sparklda_source()
    base = dict(algorithm="gibbs", k=k, alpha=ALPHA, eta=ETA, gibbs_average=1)
    fit(source, TrainParams(passes=2, **base, **bc.holdout_params()))  # warm-up
    cpu = RoundCpu()
    t0 = time.perf_counter()
    res = fit(source, TrainParams(passes=sweeps, **base, **bc.holdout_params()), callbacks=[cpu])
    wall = time.perf_counter() - t0
    rounds = [r["round_s"] for r in res.rounds]
    kernels = [r.get("task_kernel_max_s") or 0.0 for r in res.rounds]
    jobs = [r.get("job_s") or 0.0 for r in res.rounds]
    return {
        "system": "sparklda-gibbs",
        "heldout_loglik": res.evaluations[-1]["heldout_loglik"],
        "sweep_s_median": float(np.median(rounds[1:])),
        "sweep_s_mean": float(np.mean(rounds[1:])),
        "task_kernel_max_s_median": float(np.median(kernels[1:])),
        "job_s_median": float(np.median(jobs[1:])),
        # the driver's side of a round: the round value shipped, the counts updated
        "ship_s_median": float(np.median([r.get("ship_s") or 0.0 for r in res.rounds[1:]])),
        "update_s_median": float(np.median([r.get("update_s") or 0.0 for r in res.rounds[1:]])),
        "shipped_bytes": res.rounds[-1].get("shipped_bytes"),
        "tasks": res.rounds[-1].get("tasks"),
        "fit_wall_s": wall,
        "partitions": res.report["mode"].get("partitions") or res.rounds[-1].get("partitions"),
        # CPU seconds a sweep of the session's processes (driver, JVM, Python workers),
        # sweeps 2..n as the wall times
        **cpu.per_iter(),
    }


def run_tomotopy(bc, docs, k, sweeps, workers=2, seed=0):
    import tomotopy as tp

    mdl = tp.LDAModel(tw=tp.TermWeight.ONE, k=k, alpha=ALPHA, eta=ETA, seed=seed + 1)
    for _, terms, counts in docs:
        words = [str(int(t)) for t, c in zip(terms, counts, strict=True) for _ in range(int(c))]
        if words:
            mdl.add_doc(words)
    mdl.optim_interval = 0
    mdl.burn_in = 0
    mdl.train(0, workers=workers)  # initialise (not timed)
    c0 = session_cpu()
    t0 = time.perf_counter()
    mdl.train(sweeps, workers=workers)
    elapsed = time.perf_counter() - t0
    c1 = session_cpu()
    nphi = tomotopy_counts(mdl, bc.vocab_size, k)
    score = _score(bc, normalize_topics(nphi, ETA), ALPHA)
    return {
        "system": f"tomotopy-{workers}-threads",
        "version": tp.__version__,
        "heldout_loglik": score["heldout_loglik"],
        "sweep_s_mean": elapsed / sweeps,
        # its threads run in this process (the driver's CPU in session_cpu)
        "cpu_sweep_s": (c1["driver"] - c0["driver"]) / sweeps if c0 and c1 else None,
        "parallel_scheme": str(mdl.parallel if hasattr(mdl, "parallel") else "default"),
        "counts_total": float(nphi.sum()),
    }


def tomotopy_counts(mdl, v, k):
    """N^Φ (V, K) of a tomotopy model in the corpus's term ids: its φ̂ rows times
    (n_k + V' η) minus η, V' its own vocabulary, rounded to the counts they are."""
    nk = np.asarray(mdl.get_count_by_topics(), dtype=np.float64)
    vocab = [int(w) for w in mdl.used_vocabs]
    out = np.zeros((v, k))
    vp = len(vocab)
    for t in range(k):
        dist = np.asarray(mdl.get_topic_word_dist(t), dtype=np.float64)
        out[vocab, t] = np.rint(dist * (nk[t] + vp * mdl.eta) - mdl.eta)
    return out


def run_lda_package(bc, docs, k, sweeps, seed=0):
    import lda
    import scipy.sparse

    rows = [np.full(len(t), i) for i, (_, t, _) in enumerate(docs)]
    x = scipy.sparse.csr_matrix(
        (
            np.concatenate([c for _, _, c in docs]).astype(np.int64),
            (np.concatenate(rows), np.concatenate([t for _, t, _ in docs])),
        ),
        shape=(len(docs), bc.vocab_size),
    )
    model = lda.LDA(n_topics=k, n_iter=sweeps, alpha=ALPHA, eta=ETA, random_state=seed + 1)
    t0 = time.perf_counter()
    model.fit(x)
    elapsed = time.perf_counter() - t0
    nphi = np.asarray(model.nzw_, dtype=np.float64).T
    score = _score(bc, normalize_topics(nphi, ETA), ALPHA)
    return {
        "system": "lda-package",
        "version": getattr(lda, "__version__", "?"),
        "heldout_loglik": score["heldout_loglik"],
        "sweep_s_mean": elapsed / sweeps,
        "counts_total": float(nphi.sum()),
    }


def kernel_cost(path, ks=(100, 1000), sweeps=20, measured=5):
    """Seconds per sweep of the sparse kernel over one block of the corpus (one core),
    mean of the last ``measured`` of ``sweeps`` sweeps, per K; and tomotopy's on 1 thread."""
    docs, _, _, v = uci_documents(path)
    block = DocBlock.from_docs(docs, dtype=np.float32)
    out = {"tokens": block.n_tokens}
    for k in ks:
        keys = doc_keys(0, 41, block.doc_ids)
        z = gibbs_init(block.indptr, block.local, block.counts, k, keys)
        nphi = topic_counts(block.local, len(block.terms), block.counts, z, k)
        nz = nphi.sum(0)
        times = []
        for s in range(sweeps):
            keys = doc_keys(0, 1000 + s, block.doc_ids)
            t0 = time.perf_counter()
            gibbs_sweep(
                block.indptr, block.local, block.counts, z, nphi, nz, ALPHA, ETA, v * ETA, keys
            )
            times.append(time.perf_counter() - t0)
        out[f"sparklda_kernel_k{k}_sweep_s"] = float(np.mean(times[-measured:]))
        out[f"sparklda_kernel_k{k}_ns_per_token"] = (
            1e9 * out[f"sparklda_kernel_k{k}_sweep_s"] / block.n_tokens
        )
        try:
            import tomotopy as tp

            mdl = tp.LDAModel(tw=tp.TermWeight.ONE, k=k, alpha=ALPHA, eta=ETA, seed=1)
            for _, terms, counts in docs:
                words = [
                    str(int(t)) for t, c in zip(terms, counts, strict=True) for _ in range(int(c))
                ]
                if words:
                    mdl.add_doc(words)
            mdl.optim_interval = 0
            mdl.train(sweeps - measured, workers=1)
            t0 = time.perf_counter()
            mdl.train(measured, workers=1)
            out[f"tomotopy_1thread_k{k}_sweep_s"] = (time.perf_counter() - t0) / measured
        except ImportError:
            pass
    a, b = ks
    out["sparklda_kernel_ratio"] = (
        out[f"sparklda_kernel_k{b}_sweep_s"] / out[f"sparklda_kernel_k{a}_sweep_s"]
    )
    if f"tomotopy_1thread_k{b}_sweep_s" in out:
        out["tomotopy_ratio"] = (
            out[f"tomotopy_1thread_k{b}_sweep_s"] / out[f"tomotopy_1thread_k{a}_sweep_s"]
        )
    return out


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--corpora", default="uci_kos:50,lda_newsgroups:100")
    p.add_argument("--sweeps", type=int, default=100)
    p.add_argument("--heldout", type=int, default=430)
    p.add_argument("--data-dir", default=DATA)
    p.add_argument("--skip", default="", help="comma-separated: sparklda,tomotopy,lda,kernel")
    p.add_argument("--out", default="")
    args = p.parse_args(argv)
    skip = set(filter(None, args.skip.split(",")))
    from pyspark.sql import SparkSession

    from sparklda import SESSION_PROPERTIES

    spark = (
        SparkSession.builder.master("local[2]")
        .config(map=SESSION_PROPERTIES)  # as the jobs (round results straight to the driver)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.memory", "6g")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    result = {
        "command": " ".join(
            [sys.executable, "-m", "benchmarks.lda_bench.gibbs", *(argv or sys.argv[1:])]
        ),
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores",
        "load_average_at_start": list(os.getloadavg()),
        "sweeps": args.sweeps,
        "alpha": ALPHA,
        "eta": ETA,
        "corpora": {},
    }
    for item in args.corpora.split(","):
        name, _, k = item.partition(":")
        k = int(k or 50)
        path = os.path.join(args.data_dir, name)
        bc = prepare(spark, name, path, args.heldout, seed=0)
        docs = training_docs(bc)
        rows = []
        if "sparklda" not in skip:
            rows.append(run_sparklda(bc, k, args.sweeps))
            print(rows[-1], flush=True)
        if "tomotopy" not in skip:
            rows.append(run_tomotopy(bc, docs, k, args.sweeps))
            print(rows[-1], flush=True)
        if "lda" not in skip:
            rows.append(run_lda_package(bc, docs, k, args.sweeps))
            print(rows[-1], flush=True)
        result["corpora"][f"{name}:K={k}"] = {
            "training_tokens": bc.n_train_tokens,
            "training_documents": bc.n_train_docs,
            "heldout_documents": bc.n_heldout_docs,
            "systems": rows,
        }
        bc.unpersist()
    if "kernel" not in skip:
        result["kernel_cost"] = kernel_cost(os.path.join(args.data_dir, "uci_kos"))
        print(result["kernel_cost"], flush=True)
    text = json.dumps(result, indent=1)
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text + "\n")


if __name__ == "__main__":
    main()
