"""The SCVB0 kernel on one core against how far ahead it prefetches term rows
(docs/architecture.md, "Kernels and memory"): a block of documents drawn from a
Zipfian vocabulary, timed with the kernel compiled at several distances of
``sparklda.kernels.scvb0.PREFETCH_PAIRS`` (-1: no hint at all; 0: the current
pair's own rows), on a large vocabulary and on one whose rows fit in the caches.

    PYTHONPATH=$PWD python benchmarks/scale/prefetch.py
"""

import argparse
import time
import types

import numba
import numpy as np

from sparklda.kernels import scvb0


def zipf_block(n_docs: int, vocab: int, mean_len: float, seed: int):
    """CSR arrays of ``n_docs`` documents of Poisson lengths, terms drawn with
    probability ∝ 1/rank (term id = rank)."""
    rng = np.random.default_rng(seed)
    p = 1.0 / np.arange(1, vocab + 1)
    p /= p.sum()
    indptr, local, counts = [0], [], []
    for _ in range(n_docs):
        words = rng.choice(vocab, size=max(1, rng.poisson(mean_len)), p=p)
        u, c = np.unique(words, return_counts=True)
        local.extend(u)
        counts.extend(c)
        indptr.append(len(local))
    return (
        np.array(indptr, np.int64),
        np.array(local, np.int32),
        np.array(counts, np.float32),
    )


@numba.njit
def _no_prefetch(arr, row):
    return None


def kernel_at(distance: int):
    """The kernel's code compiled with ``PREFETCH_PAIRS = distance`` (not cached);
    a negative distance: without the hint at all."""
    py = scvb0._scvb0_block.py_func
    glob = dict(py.__globals__, PREFETCH_PAIRS=max(distance, 0))
    if distance < 0:
        glob["prefetch_row"] = _no_prefetch
    return numba.njit(cache=False)(types.FunctionType(py.__code__, glob, py.__name__))


def time_kernel(fn, indptr, local, counts, phi, theta, repeats: int) -> float:
    k = phi.shape[1]
    f32 = np.float32
    rho, log1m = scvb0._step_tables(indptr, counts, 2, 1.0, 10.0, 0.9, np.dtype(f32))
    empty = np.zeros((0, k), f32)
    best = float("inf")
    for _ in range(repeats + 1):  # the first call compiles
        nhat = np.zeros(phi.shape, f32)
        t0 = time.perf_counter()
        fn(
            indptr,
            local,
            counts,
            phi,
            theta,
            np.full(k, 0.1, f32),
            2,
            f32(1),
            f32(10),
            f32(0.9),
            rho,
            log1m,
            nhat,
            empty,
            empty,
            True,
        )
        best = min(best, time.perf_counter() - t0)
    return best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--docs", type=int, default=3500)
    ap.add_argument("--vocab", type=int, default=82000)
    ap.add_argument("--small-vocab", type=int, default=500)
    ap.add_argument("--mean-length", type=float, default=150.0)
    ap.add_argument("--k", type=int, default=100)
    ap.add_argument("--distances", default="-1,0,2,4,8,16")
    ap.add_argument("--repeats", type=int, default=5)
    a = ap.parse_args()
    indptr, local, counts = zipf_block(a.docs, a.vocab, a.mean_length, seed=0)
    rng = np.random.default_rng(1)
    theta = rng.random((a.docs, a.k), dtype=np.float32)
    phi_large = rng.random((a.vocab, a.k), dtype=np.float32) * np.float32(1e-4)
    phi_small = phi_large[: a.small_vocab].copy()
    local_small = (local % a.small_vocab).astype(np.int32)
    print(
        f"{a.docs:,} documents, {len(local):,} (document, term) pairs, K={a.k}, float32, "
        f"burn-in 2, best of {a.repeats}; default PREFETCH_PAIRS = {scvb0.PREFETCH_PAIRS}\n"
    )
    print(f"| pairs ahead (-1: none) | V={a.vocab:,} s | V={a.small_vocab:,} s |")
    print("|---|---|---|")
    for d in (int(x) for x in a.distances.split(",")):
        fn = kernel_at(d)
        large = time_kernel(fn, indptr, local, counts, phi_large, theta, a.repeats)
        small = time_kernel(fn, indptr, local_small, counts, phi_small, theta, a.repeats)
        print(f"| {d} | {large:.4f} | {small:.4f} |", flush=True)


if __name__ == "__main__":
    main()
