"""Sums over topics in an order fixed by this code, vectorised by hand.

Why this module exists (docs/architecture.md, "Determinism"): the kernels are
compiled without fast-math flags (:data:`sparklda.kernels.config.FASTMATH` is
empty), so LLVM must evaluate every floating-point operation exactly as
written: it may not reassociate a sum, fuse a multiply and an add, or replace
a division by a reciprocal. An element-wise loop then gives the same bits
whether LLVM runs its vectorised body or its scalar fallback (the path taken
when a run-time check finds two arrays too close together in memory), since
each element goes through the same correctly rounded operations either way.
That is what makes the kernels bit-deterministic whatever the addresses of
their arrays. The cost is that a plainly written sum ``s += x[k]`` cannot be
vectorised any more (that would change its order), and numba does not run
LLVM's SLP vectoriser, which could have packed hand-written partial sums into
vector registers.

The intrinsics below therefore emit the vector code themselves: the partial
sums are explicit LLVM vectors, combined in a fixed order, and no operation
carries a fast-math flag, so LLVM may not reorder any of it. A result depends
only on the values, their dtype and ``n``: never on addresses, alignment,
the CPU's SIMD width or the code path taken. With W wide lanes and N narrow
ones (:func:`lane_counts`: 32 and 8 for float32, 16 and 4 for float64, i.e.
128 and 32 bytes), the order for terms t_0 … t_{n-1} is:

1. W lane sums: lane i adds t_i, t_{i+W}, t_{i+2W}, … in turn, over the
   first ``n - n % W`` terms (starting from +0);
2. the W lanes are folded to N by adding halves (lane i + lane i + W/2, …,
   until N lanes are left);
3. the following whole chunks of N terms are added lane by lane to those N;
4. if n ≥ N and r = n % N > 0, the last r terms are added in one step,
   t_{n-r+j} to lane N - r + j (the other lanes get +0 added);
5. the N lanes are folded to one by adding halves (lane i + lane i + N/2, …);
6. if n < N, the n terms are added one by one to that, in index order.

Arrays must be C-contiguous 1-d float32/float64 arrays of one dtype holding at
least ``n`` elements (not checked: these are internal building blocks of the
kernels). Their accuracy is that of a blocked summation; they differ from a
left-to-right sum in the last bits.

The code emitted here is compiled into the calling kernels, and numba's
on-disk cache (``cache=True``) only notices changes to a kernel's own file:
after editing this module, delete the kernels' ``__pycache__`` directories.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, cast

import numpy as np
from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic
from numpy.typing import NDArray

#: Bytes of the first-stage partial sums (four 256-bit registers).
WIDE_BYTES = 128
#: Bytes of the second-stage partial sums (one 256-bit register).
NARROW_BYTES = 32

_FLOATS = (types.float32, types.float64)

#: ``term(index, width)``: IR of the terms index … index+width-1 (a vector of
#: ``width`` lanes, or a scalar when ``width`` is 1).
_Term = Callable[[ir.Value, int], ir.Value]
_Codegen = Callable[[Any, ir.IRBuilder, Any, Sequence[ir.Value]], ir.Value]


def _halve(builder: ir.IRBuilder, vec: ir.Value, width: int) -> ir.Value:
    """Lane i of the result is lane i + lane (i + width/2) of ``vec``."""
    half = width // 2
    mask = ir.VectorType(ir.IntType(32), half)
    lo = builder.shuffle_vector(vec, vec, ir.Constant(mask, list(range(half))))
    hi = builder.shuffle_vector(vec, vec, ir.Constant(mask, list(range(half, width))))
    return builder.fadd(lo, hi)


def _local(builder: ir.IRBuilder, value: ir.Value) -> ir.Value:
    """A stack slot holding ``value`` (allocated in the entry block, so that LLVM
    promotes it to a register)."""
    with builder.goto_entry_block():
        slot = builder.alloca(value.type)
    builder.store(value, slot)
    return slot


def lane_counts(itemsize: int) -> tuple[int, int]:
    """(W, N): the wide and narrow lane counts for elements of ``itemsize`` bytes."""
    return WIDE_BYTES // itemsize, NARROW_BYTES // itemsize


def _lane_counts(context: Any, fty: ir.Type) -> tuple[int, int]:
    return lane_counts(int(context.get_abi_sizeof(fty)))


def _emit_lane_sum(
    context: Any, builder: ir.IRBuilder, fty: ir.Type, n: ir.Value, term: _Term
) -> ir.Value:
    """IR of Σ_{k<n} term(k) in the order of the module docstring."""
    wide_lanes, narrow_lanes = _lane_counts(context, fty)
    intp = n.type
    zero = ir.Constant(intp, 0)
    n = builder.select(builder.icmp_signed("<", n, zero), zero, n)

    def round_down(value: ir.Value, width: int) -> ir.Value:
        return builder.sub(value, builder.srem(value, ir.Constant(intp, width)))

    def accumulate(acc: ir.Value, start: ir.Value, stop: ir.Value, width: int) -> None:
        step = ir.Constant(intp, width)
        with cgutils.for_range_slice(builder, start, stop, step, intp) as (index, _):
            builder.store(builder.fadd(builder.load(acc), term(index, width)), acc)

    end_wide = round_down(n, wide_lanes)
    end_narrow = round_down(n, narrow_lanes)
    wide = _local(builder, ir.Constant(ir.VectorType(fty, wide_lanes), None))
    accumulate(wide, zero, end_wide, wide_lanes)
    vec = builder.load(wide)
    width = wide_lanes
    while width > narrow_lanes:
        vec = _halve(builder, vec, width)
        width //= 2
    narrow = _local(builder, vec)
    accumulate(narrow, end_wide, end_narrow, narrow_lanes)
    # the last r = n % N terms, in one vector step: the last N terms are loaded
    # and all but the last r lanes zeroed
    lanes = ir.Constant(intp, narrow_lanes)
    rest = builder.sub(n, end_narrow)
    has_chunk = builder.icmp_signed(">=", n, lanes)
    with builder.if_then(builder.and_(has_chunk, builder.icmp_signed(">", rest, zero))):
        first_kept = _splat(builder, builder.sub(lanes, rest), narrow_lanes)
        index = ir.Constant(ir.VectorType(intp, narrow_lanes), list(range(narrow_lanes)))
        keep = builder.icmp_signed(">=", index, first_kept)
        last = term(builder.sub(n, lanes), narrow_lanes)
        tail = builder.select(keep, last, ir.Constant(last.type, None))
        builder.store(builder.fadd(builder.load(narrow), tail), narrow)
    vec = builder.load(narrow)
    while width > 1:
        vec = _halve(builder, vec, width)
        width //= 2
    total = _local(builder, builder.extract_element(vec, zero))
    # fewer than N terms in all: added one by one
    accumulate(total, builder.select(has_chunk, n, zero), n, 1)
    return builder.load(total)


class _Elements:
    """Loads and stores of ``width`` consecutive elements of a C-contiguous array."""

    def __init__(self, context: Any, builder: ir.IRBuilder, ty: Any, value: ir.Value) -> None:
        self.builder = builder
        self.data = context.make_array(ty)(context, builder, value).data
        self.fty = context.get_value_type(ty.dtype)
        self.align = context.get_abi_sizeof(self.fty)

    def _ptr(self, index: ir.Value, width: int) -> ir.Value:
        ptr = self.builder.gep(self.data, [index], inbounds=True)
        if width > 1:
            ptr = self.builder.bitcast(ptr, ir.VectorType(self.fty, width).as_pointer())
        return ptr

    def load(self, index: ir.Value, width: int) -> ir.Value:
        return self.builder.load(self._ptr(index, width), align=self.align)

    def store(self, value: ir.Value, index: ir.Value, width: int) -> None:
        self.builder.store(value, self._ptr(index, width), align=self.align)


def _splat(builder: ir.IRBuilder, scalar: ir.Value, width: int) -> ir.Value:
    """``scalar`` in every lane of a ``width``-lane vector (itself when width is 1)."""
    if width == 1:
        return scalar
    vty = ir.VectorType(scalar.type, width)
    first = builder.insert_element(ir.Constant(vty, None), scalar, ir.Constant(ir.IntType(32), 0))
    return builder.shuffle_vector(
        first, first, ir.Constant(ir.VectorType(ir.IntType(32), width), None)
    )


def _float_vector(ty: Any) -> bool:
    return isinstance(ty, types.Array) and ty.ndim == 1 and ty.layout == "C" and ty.dtype in _FLOATS


def _lane_sum(typingctx: Any, x: Any, n: Any) -> tuple[Any, _Codegen] | None:
    """``x[0] + … + x[n-1]`` in the fixed order of the module docstring."""
    if not (_float_vector(x) and isinstance(n, types.Integer)):
        return None

    def codegen(
        context: Any, builder: ir.IRBuilder, sig: Any, args: Sequence[ir.Value]
    ) -> ir.Value:
        xs = _Elements(context, builder, sig.args[0], args[0])
        return _emit_lane_sum(context, builder, xs.fty, args[1], xs.load)

    return x.dtype(x, types.intp), codegen


def _lane_dot(typingctx: Any, a: Any, b: Any, n: Any) -> tuple[Any, _Codegen] | None:
    """``a[0]·b[0] + … + a[n-1]·b[n-1]``, each product rounded (no fused
    multiply-add), summed in the fixed order of the module docstring."""
    if not (_float_vector(a) and _float_vector(b) and a.dtype == b.dtype):
        return None
    if not isinstance(n, types.Integer):
        return None

    def codegen(
        context: Any, builder: ir.IRBuilder, sig: Any, args: Sequence[ir.Value]
    ) -> ir.Value:
        xa = _Elements(context, builder, sig.args[0], args[0])
        xb = _Elements(context, builder, sig.args[1], args[1])

        def term(index: ir.Value, width: int) -> ir.Value:
            return builder.fmul(xa.load(index, width), xb.load(index, width))

        return _emit_lane_sum(context, builder, xa.fty, args[2], term)

    return a.dtype(a, b, types.intp), codegen


def _lane_gamma(
    typingctx: Any, out: Any, phi: Any, ntheta: Any, alpha: Any, n: Any
) -> tuple[Any, _Codegen] | None:
    """``out[k] = phi[k] · (ntheta[k] + alpha[k])`` for k < n (each operation
    rounded), and returns Σ out[0:n] in the fixed order of the module
    docstring: the unnormalised γ of a (document, term) pair and its sum, in
    one pass. ``alpha`` is a scalar (the same for every k) or a vector of the
    same dtype (an asymmetric prior); a vector of equal values gives the bits
    of the scalar. ``out`` must not overlap ``phi``, ``ntheta`` or ``alpha``
    (step 4 of the order computes and stores the last N elements again, to
    the same bits)."""
    if not all(_float_vector(t) for t in (out, phi, ntheta)):
        return None
    if not (out.dtype == phi.dtype == ntheta.dtype and isinstance(n, types.Integer)):
        return None
    vector_alpha = _float_vector(alpha) and alpha.dtype == out.dtype
    if not (vector_alpha or isinstance(alpha, types.Float)):
        return None

    def codegen(
        context: Any, builder: ir.IRBuilder, sig: Any, args: Sequence[ir.Value]
    ) -> ir.Value:
        xo, xp, xn = (
            _Elements(context, builder, t, v) for t, v in zip(sig.args[:3], args[:3], strict=True)
        )
        if vector_alpha:
            xa = _Elements(context, builder, sig.args[3], args[3])
            alpha_at = xa.load
        else:
            # alpha broadcast once, before the loops
            alphas = {w: _splat(builder, args[3], w) for w in (*_lane_counts(context, xo.fty), 1)}

            def alpha_at(index: ir.Value, width: int) -> ir.Value:
                return alphas[width]

        def term(index: ir.Value, width: int) -> ir.Value:
            shifted = builder.fadd(xn.load(index, width), alpha_at(index, width))
            g = builder.fmul(xp.load(index, width), shifted)
            xo.store(g, index, width)
            return g

        return _emit_lane_sum(context, builder, xo.fty, args[4], term)

    alpha_type = alpha if vector_alpha else out.dtype
    return out.dtype(out, phi, ntheta, alpha_type, types.intp), codegen


def _prefetch_row(typingctx: Any, arr: Any, row: Any) -> tuple[Any, _Codegen] | None:
    """A hint to the CPU to start loading row ``row`` of the C-contiguous 2-d
    array ``arr`` into its caches (``llvm.prefetch``, one per 64-byte line of
    the row, for reading, kept in every cache level). It changes no value: a
    kernel that reads rows in an order known ahead (the next pairs' term rows)
    asks for them a few pairs early, so a row that is not in the caches (rare
    terms of a large vocabulary: docs/architecture.md, "Kernels and memory") arrives while
    the current pair is computed instead of stalling it. ``row`` must be a
    valid row index (not checked: an internal building block)."""
    if not (isinstance(arr, types.Array) and arr.ndim == 2 and arr.layout == "C"):
        return None
    if not isinstance(row, types.Integer):
        return None

    def codegen(
        context: Any, builder: ir.IRBuilder, sig: Any, args: Sequence[ir.Value]
    ) -> ir.Value:
        array = context.make_array(sig.args[0])(context, builder, args[0])
        fty = context.get_value_type(sig.args[0].dtype)
        ncols = builder.extract_value(array.shape, 1)
        start = builder.mul(context.cast(builder, args[1], sig.args[1], types.intp), ncols)
        i8p = ir.IntType(8).as_pointer()
        first = builder.bitcast(builder.gep(array.data, [start], inbounds=True), i8p)
        nbytes = builder.mul(ncols, ir.Constant(ncols.type, context.get_abi_sizeof(fty)))
        i32 = ir.IntType(32)
        fnty = ir.FunctionType(ir.VoidType(), [i8p, i32, i32, i32])
        prefetch = builder.module.globals.get("llvm.prefetch.p0")
        if prefetch is None:
            prefetch = ir.Function(builder.module, fnty, "llvm.prefetch.p0")
        line = ir.Constant(ncols.type, 64)
        with cgutils.for_range_slice(builder, ir.Constant(ncols.type, 0), nbytes, line) as (
            offset,
            _,
        ):
            # read (0), highest locality (3), data cache (1)
            flags = [ir.Constant(i32, 0), ir.Constant(i32, 3), ir.Constant(i32, 1)]
            builder.call(prefetch, [builder.gep(first, [offset]), *flags])
        return context.get_dummy_value()

    return types.none(arr, row), codegen


# The public names are the numba intrinsics, typed for the kernels that call
# them (numba's stubs type an intrinsic's call with its typing function's
# arguments). They can only be called from compiled code.
_Vector = NDArray[np.floating[Any]]
lane_sum = cast(
    "Callable[[_Vector, int], np.floating[Any]]",
    intrinsic(_lane_sum),
)
lane_dot = cast(
    "Callable[[_Vector, _Vector, int], np.floating[Any]]",
    intrinsic(_lane_dot),
)
lane_gamma = cast(
    "Callable[[_Vector, _Vector, _Vector, np.floating[Any] | _Vector, int], np.floating[Any]]",
    intrinsic(_lane_gamma),
)
prefetch_row = cast("Callable[[NDArray[np.floating[Any]], int], None]", intrinsic(_prefetch_row))
