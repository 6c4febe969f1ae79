"""Microbenchmark of the SCVB0 kernel beside a ceiling loop compiled the same way.

Throughput is counted in *topic-updates*: one (document, distinct term) pair
visited by one sweep touches K topics, so a block of ``nnz`` pairs run with
``burnin`` burn-in sweeps does ``nnz · (burnin + 1) · K`` topic-updates.

The ceiling runs the same memory pattern as the kernel (for every pair and
sweep, the pair's row of the U×K statistics is streamed in full) but does one
multiply-add per topic and nothing else, compiled by numba with the
options sparklda's kernels are compiled with (:data:`CEILING_JIT`: the same
fast-math flags, none, and error model). It is what the machine does for
the cheapest possible topic-update with this access pattern; the SCVB0
kernel does about four times that arithmetic (γ, its sum, the N^Θ update and
the N̂^Φ accumulation) plus a division and a step-size look-up per pair.

Everything runs single-threaded in the calling process, so the figures are
per core. No Spark.
"""

from __future__ import annotations

import gzip
import itertools
import time
from importlib.resources import files

import numba
import numpy as np

from sparklda.block import DocBlock
from sparklda.kernels import init_doc_stats, scvb0_block

#: numba options of the ceiling loop: those sparklda's hot kernels use (no
#: fast-math flags, which keeps the kernels bit-deterministic; numpy's error
#: model). tests/test_benchmark.py checks that they still match the library's.
CEILING_JIT = dict(cache=True, nogil=True, error_model="numpy", fastmath=set())


@numba.njit(**CEILING_JIT)
def ceiling_loop(indptr, local, rows, sweeps, acc):
    """For each document, ``sweeps`` times over its pairs: acc += row·x (one multiply-add
    per topic, the row of the pair's term streamed in full)."""
    n_docs = indptr.shape[0] - 1
    n_topics = rows.shape[1]
    x = acc.copy()
    for j in range(n_docs):
        for _ in range(sweeps):
            for p in range(indptr[j], indptr[j + 1]):
                row = rows[local[p]]
                for k in range(n_topics):
                    acc[k] += row[k] * x[k]
    return acc


def kos_block(n_docs: int | None = None) -> DocBlock:
    """The KOS corpus shipped in the package as one block (first ``n_docs`` documents)."""
    path = files("sparklda").joinpath("data", "kos", "docword.txt.gz")
    with gzip.open(str(path), "rt") as f:
        for _ in range(3):
            f.readline()
        a = np.loadtxt(f, dtype=np.int64, ndmin=2)
    d = a[:, 0] - 1
    bounds = np.flatnonzero(np.r_[True, d[1:] != d[:-1], True])
    docs = [
        (int(d[s]), a[s:e, 1] - 1, a[s:e, 2].astype(np.float64))
        for s, e in itertools.pairwise(bounds)
    ]
    if n_docs is not None:
        docs = docs[:n_docs]
    return DocBlock.from_docs(docs)


def best_of(fn, repeats: int, min_seconds: float) -> float:
    """Best per-call time over ``repeats`` measurements, each at least ``min_seconds`` long."""
    fn()  # compile / warm caches
    best = float("inf")
    for _ in range(repeats):
        n = 0
        t0 = time.perf_counter()
        while True:
            fn()
            n += 1
            el = time.perf_counter() - t0
            if el >= min_seconds:
                break
        best = min(best, el / n)
    return best


def run(
    ks=(20, 100, 1000),
    dtypes=("float32", "float64"),
    burnin: int = 1,
    n_docs: int = 1000,
    repeats: int = 5,
    min_seconds: float = 0.2,
    seed: int = 0,
) -> list[dict]:
    """Topic-updates per second per core of the SCVB0 kernel and of the ceiling loop.

    Returns one dict per (K, dtype): ``kernel_updates_per_s``,
    ``ceiling_updates_per_s``, their ratio, and the block's size.
    """
    block = kos_block(n_docs)
    rng = np.random.default_rng(seed)
    sweeps = burnin + 1
    out = []
    for k in ks:
        for dt in dtypes:
            dtype = np.dtype(dt)
            rows = (rng.random((len(block.terms), k)) + 0.01).astype(dtype)
            rows /= rows.sum(axis=0, keepdims=True)
            theta0 = init_doc_stats(rng.random((block.n_docs, k)), block.doc_lengths()).astype(
                dtype
            )
            counts = block.counts.astype(dtype)
            updates = block.nnz * sweeps * k
            t_kernel = best_of(
                lambda counts=counts, rows=rows, theta0=theta0: scvb0_block(
                    block.indptr, block.local, counts, rows, theta0, 0.1, burnin
                ),
                repeats,
                min_seconds,
            )
            acc = np.full(k, 1e-3, dtype=dtype)
            t_ceiling = best_of(
                lambda rows=rows, acc=acc: ceiling_loop(
                    block.indptr, block.local, rows, sweeps, acc.copy()
                ),
                repeats,
                min_seconds,
            )
            out.append(
                {
                    "k": k,
                    "dtype": dt,
                    "docs": block.n_docs,
                    "pairs": block.nnz,
                    "distinct_terms": len(block.terms),
                    "sweeps": sweeps,
                    "topic_updates": updates,
                    "kernel_s": t_kernel,
                    "ceiling_s": t_ceiling,
                    "kernel_updates_per_s": updates / t_kernel,
                    "ceiling_updates_per_s": updates / t_ceiling,
                    "kernel_over_ceiling": t_ceiling / t_kernel,
                }
            )
    return out
