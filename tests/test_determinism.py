"""Every kernel is bit-deterministic (docs/architecture.md, "Determinism").

The same inputs must give the same bytes whatever the addresses of the arrays:
the inputs are copied into buffers at different element offsets (so the
distances between them change), chunks the size of the kernels' own
temporaries are freed in a random order before each call (so the temporaries
land in another order, at other distances), and every result must equal the
first one byte for byte. This fails for kernels compiled with fast-math
"reassoc" (SCVB0 and CVB0 at K = 8, 10, 16): LLVM vectorised their sums over
topics behind run-time alias checks and summed in another order on the scalar
fallback. A last test compares results across two Python processes.

The order of :mod:`sparklda.kernels.lanes`' sums is checked against a numpy
model of the order its docstring documents.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

import numba
import numpy as np
import pytest

from sparklda import kernels
from sparklda.kernels.lanes import lane_counts, lane_dot, lane_gamma, lane_sum, prefetch_row
from sparklda.kernels.scvb0 import add_scaled_rows, scatter_add_rows

KS = [1, 3, 8, 10, 16, 50, 100]
OFFSETS = range(16)
DTYPES = [np.float32, np.float64]


def random_block(rng, n_docs=30, vocab=40, max_terms=15, fractional=False):
    """A clumped CSR block (every fifth document empty)."""
    indptr, local, counts = [0], [], []
    for j in range(n_docs):
        n = 0 if j % 5 == 2 else int(rng.integers(1, max_terms))
        local.extend(np.sort(rng.choice(vocab, size=n, replace=False)))
        c = rng.integers(1, 6, size=n).astype(np.float64)
        counts.extend(c * rng.uniform(0.3, 1.0, size=n) if fractional else c)
        indptr.append(indptr[-1] + n)
    return (
        np.array(indptr, dtype=np.int64),
        np.array(local, dtype=np.int32),
        np.array(counts, dtype=np.float64),
    )


def placed(a, offset):
    """A copy of ``a`` in a fresh buffer, starting ``offset`` elements into it."""
    buf = np.empty(a.size + offset + 3, dtype=a.dtype)
    out = buf[offset : offset + a.size].reshape(a.shape)
    out[...] = a
    return out


def as_bytes(result):
    """The bytes (and dtypes) of a kernel's result: arrays, scalars, or tuples of them."""
    parts = result if isinstance(result, tuple) else (result,)
    return b"".join(np.asarray(p).dtype.str.encode() + np.asarray(p).tobytes() for p in parts)


@numba.njit(cache=False)
def _malloc_float32(n):
    return np.empty(n, np.float32)


@numba.njit(cache=False)
def _malloc_float64(n):
    return np.empty(n, np.float64)


def shuffle_small_chunks(rng, k):
    """Allocate chunks the size of a kernel's own K-element temporaries through
    numba's allocator (malloc, not numpy's cache) and free them in a random
    order: malloc hands such chunks out again last freed first, so the
    temporaries of the next kernel call land in a random order and at random
    distances from one another."""
    chunks = [f(k) for f in (_malloc_float32, _malloc_float64) for _ in range(6)]
    for i in rng.permutation(len(chunks)):
        chunks[i] = None


def assert_same_bytes_everywhere(call, inputs, k, calls=48):
    """``call(*inputs)`` gives identical bytes ``calls`` times over, with its array
    inputs copied at offsets 0 … 15 (a different offset for each argument) and
    the kernel's temporaries placed differently on each call. ``call`` returns
    what to compare (including the arrays it updated in place)."""
    rng = np.random.default_rng(k)
    first = as_bytes(call(*[placed(a, 0) if isinstance(a, np.ndarray) else a for a in inputs]))
    for rep in range(calls):
        args = [
            placed(a, (rep + 5 * i) % 16) if isinstance(a, np.ndarray) else a
            for i, a in enumerate(inputs)
        ]
        shuffle_small_chunks(rng, k)
        got = as_bytes(call(*args))
        assert got == first, f"result changed on call {rep}"


# --------------------------------------------------------------------------- inputs per kernel


def scvb0_case(k, dtype, fractional=False):
    rng = np.random.default_rng(k)
    indptr, local, counts = random_block(rng, fractional=fractional)
    phi_norm = (rng.random((40, k)) + 0.01) / 40
    lengths = np.diff(np.concatenate([[0], np.cumsum(counts)])[indptr])
    theta0 = kernels.init_doc_stats(rng.random((len(indptr) - 1, k)), lengths)
    inputs = [indptr, local, counts.astype(dtype), phi_norm.astype(dtype), theta0.astype(dtype)]
    return (lambda *a: kernels.scvb0_block(*a, 0.1, 1)), inputs


def cvb_case(k, dtype, second_order):
    rng = np.random.default_rng(k)
    indptr, local, counts = random_block(rng)
    gamma = kernels.cvb0_init_gamma(rng.random((len(local), k)) + 0.01).astype(dtype)
    nphi = np.zeros((40, k))
    np.add.at(nphi, local, counts[:, None] * gamma)
    nphi += 3 * rng.random((40, k))
    nz = nphi.sum(0) + 5 * rng.random(k)
    var_phi = nphi * 0.3 + rng.random((40, k))
    var_z = var_phi.sum(0) + rng.random(k)

    def call(indptr, local, counts, gamma, nphi, nz, var_phi, var_z):
        deltas = kernels.cvb0_block(
            indptr,
            local,
            counts,
            gamma,
            nphi,
            nz,
            0.1,
            0.01,
            0.4,
            second_order=second_order,
            var_phi=var_phi,
            var_z=var_z,
        )
        return (*deltas, gamma)  # gamma is updated in place

    stats = [a.astype(dtype) for a in (counts, gamma, nphi, nz, var_phi, var_z)]
    return call, [indptr, local, *stats]


def svb_case(k, dtype):
    rng = np.random.default_rng(k)
    indptr, local, counts = random_block(rng)
    lam = rng.gamma(100.0, 0.01, size=(k, 40)) + 0.5
    exp_elogbeta = np.exp(kernels.dirichlet_expectation_2d(lam)).T
    gamma0 = rng.gamma(100.0, 0.01, size=(len(indptr) - 1, k))
    inputs = [indptr, local, counts.astype(dtype), exp_elogbeta.astype(dtype), gamma0]
    return (lambda ip, lo, c, e, g: kernels.svb_estep_block(ip, lo, c, e, 0.1, g)), inputs


def foldin_case(k, dtype):
    rng = np.random.default_rng(k)
    indptr, local, counts = random_block(rng)
    phi = rng.random((40, k)) + 0.01
    phi /= phi.sum(0)
    inputs = [indptr, local, counts.astype(dtype), phi.astype(dtype)]
    return (lambda *a: kernels.foldin_block(*a, 0.1, max_iter=50, tol=0.0)), inputs


def loglik_case(k, dtype):
    call, (indptr, local, counts, phi) = foldin_case(k, dtype)
    theta = call(indptr, local, counts, phi)
    return kernels.loglik_block, [indptr, local, counts, phi, theta]


def left_to_right_case(k, dtype):
    from sparklda.kernels.left_to_right import left_to_right_block

    rng = np.random.default_rng(k)
    indptr, local, counts = random_block(rng, n_docs=10)
    phi = rng.random((40, k)) + 0.01
    phi /= phi.sum(0)
    ids = np.arange(10, dtype=np.int64) * 7 + 3
    inputs = [ids, indptr, local, counts.astype(dtype), phi.astype(dtype)]
    return (lambda *a: left_to_right_block(*a, 0.1, 3, 5)), inputs


def add_scaled_rows_case(k, dtype):
    rng = np.random.default_rng(k)
    base = rng.random((40, k))
    terms = np.sort(rng.choice(40, size=25, replace=False))

    def call(base, mirror, terms, rows):
        totals = add_scaled_rows(base, mirror, terms, rows, 0.37)
        return totals, base, mirror

    return call, [base, base.astype(dtype), terms, rng.random((25, k)).astype(dtype)]


def scatter_add_rows_case(k, dtype):
    rng = np.random.default_rng(k)
    idx = rng.integers(0, 20, size=60)  # repeats on purpose
    inputs = [rng.random((20, k)), idx, rng.random((60, k)).astype(dtype)]
    return scatter_add_rows, inputs


def dirichlet_case(k, dtype):
    rng = np.random.default_rng(k)
    return kernels.dirichlet_expectation_2d, [(rng.random((30, k)) * 5 + 0.05).astype(dtype)]


def init_case(k, dtype):
    rng = np.random.default_rng(k)
    u = rng.random((30, k)).astype(dtype)

    def call(u, lengths):
        return kernels.init_doc_stats(u, lengths), kernels.cvb0_init_gamma(u)

    return call, [u, rng.integers(1, 50, size=30).astype(np.float64)]


CASES = {
    "scvb0_block": scvb0_case,
    "scvb0_block_fractional_counts": lambda k, d: scvb0_case(k, d, fractional=True),
    "cvb0_block": lambda k, d: cvb_case(k, d, second_order=False),
    "cvb_block_second_order": lambda k, d: cvb_case(k, d, second_order=True),
    "svb_estep_block": svb_case,
    "foldin_block": foldin_case,
    "loglik_block": loglik_case,
    "left_to_right_block": left_to_right_case,
    "add_scaled_rows": add_scaled_rows_case,
    "scatter_add_rows": scatter_add_rows_case,
    "dirichlet_expectation_2d": dirichlet_case,
    "init_doc_stats_and_cvb0_init_gamma": init_case,
}


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.__name__)
@pytest.mark.parametrize("k", KS)
@pytest.mark.parametrize("kernel", list(CASES))
def test_kernel_is_bit_deterministic_whatever_the_addresses(kernel, k, dtype):
    call, inputs = CASES[kernel](k, dtype)
    assert_same_bytes_everywhere(call, inputs, k)


def test_digamma_is_bit_deterministic():
    xs = np.geomspace(1e-6, 1e6, 997)
    first = [kernels.digamma(x) for x in xs]
    shuffle_small_chunks(np.random.default_rng(0), 8)
    assert [kernels.digamma(x) for x in placed(xs, 3)] == first


# --------------------------------------------------------------------------- across processes

_DIGEST_KS = (8, 10, 50)


def digest_all():
    """sha256 over the results of every case at a few K (float32 and float64)."""
    h = hashlib.sha256()
    for name, case in CASES.items():
        for k in _DIGEST_KS:
            for dtype in DTYPES:
                call, inputs = case(k, dtype)
                h.update(name.encode())
                h.update(
                    as_bytes(call(*[a.copy() if isinstance(a, np.ndarray) else a for a in inputs]))
                )
    return h.hexdigest()


_CHILD = """
import sys
import numpy as np
from tests.test_determinism import _malloc_float32, digest_all, shuffle_small_chunks
# a different heap per process
rng = np.random.default_rng(int(sys.argv[1]))
kept = [_malloc_float32(n) for n in rng.integers(1, 200, size=int(sys.argv[1]))]
for k in (8, 10, 50):
    shuffle_small_chunks(rng, k)
print(digest_all())
"""


@pytest.mark.slow
def test_results_are_identical_across_processes():
    root = Path(__file__).resolve().parents[1]
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(root), os.environ.get("PYTHONPATH", "")]),
    }
    digests = [
        subprocess.run(
            [sys.executable, "-c", _CHILD, str(junk)],
            capture_output=True,
            text=True,
            check=True,
            cwd=root,
            env=env,
        ).stdout.strip()
        for junk in (2, 77)
    ]
    assert digests[0] == digests[1] == digest_all()


# --------------------------------------------------------------------------- the lanes' order


def model_lane_sum(terms):
    """The order documented in sparklda/kernels/lanes.py, written with numpy vectors."""
    n = len(terms)
    wide, narrow = lane_counts(terms.dtype.itemsize)
    end_wide, end_narrow = n - n % wide, n - n % narrow
    acc = np.zeros(wide, dtype=terms.dtype)
    for i in range(0, end_wide, wide):
        acc = acc + terms[i : i + wide]
    while len(acc) > narrow:
        acc = acc[: len(acc) // 2] + acc[len(acc) // 2 :]
    for i in range(end_wide, end_narrow, narrow):
        acc = acc + terms[i : i + narrow]
    if n >= narrow and n > end_narrow:
        tail = terms[n - narrow :].copy()
        tail[: narrow - (n - end_narrow)] = 0
        acc = acc + tail
    while len(acc) > 1:
        acc = acc[: len(acc) // 2] + acc[len(acc) // 2 :]
    total = acc[0]
    if n < narrow:
        for t in terms:
            total = total + t
    return total


@numba.njit(cache=False)
def _sum(x, n):
    return lane_sum(x, n)


@numba.njit(cache=False)
def _dot(a, b, n):
    return lane_dot(a, b, n)


@numba.njit(cache=False)
def _gamma(out, phi, ntheta, alpha, n):
    return lane_gamma(out, phi, ntheta, alpha, n)


@numba.njit(cache=False)
def _prefetch_all(arr, rows):
    total = 0.0
    for r in rows:
        prefetch_row(arr, r)
        total += arr[r, 0]
    return total


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.__name__)
@pytest.mark.parametrize("k", [1, 7, 16, 100, 333])
def test_prefetch_row_is_a_hint_that_changes_nothing(dtype, k):
    arr = np.random.default_rng(k).random((50, k)).astype(dtype)
    before = arr.copy()
    rows = np.array([0, 49, 3, 49, 0, 17], dtype=np.int64)
    assert _prefetch_all(arr, rows) == pytest.approx(float(before[rows, 0].sum()))
    assert _prefetch_all(arr, rows.astype(np.int32)) == pytest.approx(float(before[rows, 0].sum()))
    np.testing.assert_array_equal(arr, before)


def test_scvb0_kernel_prefetches_the_rows_of_pairs_ahead():
    """The kernel asks for the rows of later pairs while it computes the current one
    (on a large vocabulary its time is mostly waiting for rare terms' rows)."""
    from sparklda.kernels import scvb0

    assert scvb0.PREFETCH_PAIRS >= 1
    # a fresh compilation of the kernel's code (cached code cannot be inspected)
    fresh = numba.njit(cache=False)(scvb0._scvb0_block.py_func)
    f32 = np.float32
    empty = np.zeros((0, 8), f32)
    fresh(
        np.array([0, 3]),
        np.array([1, 5, 9], np.int32),
        np.ones(3, f32),
        np.random.default_rng(0).random((20, 8)).astype(f32),
        np.ones((1, 8), f32),
        np.full(8, 0.1, f32),
        1,
        f32(1),
        f32(10),
        f32(0.9),
        np.zeros(0, f32),
        np.zeros(0, f32),
        np.zeros((20, 8), f32),
        empty,
        empty,
        True,
    )
    (ir,) = [fresh.inspect_llvm(sig) for sig in fresh.signatures]
    assert "llvm.prefetch" in ir


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.__name__)
def test_lane_sums_follow_the_documented_order(dtype):
    rng = np.random.default_rng(5)
    for n in [*range(0, 110), 1000, 1001, 1023]:
        a = rng.random(n + 4).astype(dtype)  # longer than n: only n elements count
        b = rng.random(n + 4).astype(dtype)
        alpha = dtype(0.1)
        want = model_lane_sum(a[:n])
        assert _sum(a, n) == want
        assert _dot(a, b, n) == model_lane_sum(a[:n] * b[:n])
        out = np.full(n + 4, -1.0, dtype=dtype)
        gamma = a[:n] * (b[:n] + alpha)
        assert _gamma(out, a, b, alpha, n) == model_lane_sum(gamma)
        np.testing.assert_array_equal(out[:n], gamma)
        assert np.all(out[n:] == -1.0)  # nothing written past n
        # a blocked sum: close to the exact sum
        assert abs(float(want) - float(np.sum(a[:n], dtype=np.float64))) <= 1e-6 * max(n, 1)


def test_random_streams_are_distinct():
    """Two streams with one value would draw the same numbers for two purposes (an IntEnum
    makes the second an alias silently; ``@unique`` refuses it at import)."""
    from sparklda.kernels.random import Stream

    values = [m.value for m in Stream.__members__.values()]
    assert len(values) == len(set(values)), Stream.__members__
