"""Compiler settings shared by every numba kernel (one place to change them).

Kernels are single-threaded on purpose: Spark already runs one task per core,
so a kernel that spawned threads of its own would oversubscribe the executor.
"""

from __future__ import annotations

from typing import Final, Literal, TypedDict


class JitOptions(TypedDict):
    """The keyword options of ``numba.njit`` that :data:`JIT_OPTIONS` sets
    (typed so that ``numba.njit(**JIT_OPTIONS)`` type-checks against numba's
    own signature)."""

    cache: bool
    nogil: bool
    error_model: Literal["python", "numpy"]


#: Options passed to every ``numba.njit`` in :mod:`sparklda.kernels`.
#: ``cache=True`` keeps compiled code on disk so executors do not recompile it
#: in every Python worker; ``nogil`` lets a driver-side caller use threads.
JIT_OPTIONS: Final[JitOptions] = {"cache": True, "nogil": True, "error_model": "numpy"}

#: Fast-math flags of the kernels: none, on purpose. Without them LLVM must
#: evaluate every floating-point operation as written (no reassociation, no
#: fused multiply-add, no reciprocal for a division, signed zeros kept), so
#: an element-wise loop gives the same bits whether its vectorised body or its
#: scalar fallback runs. That choice is made at run time from how close the
#: arrays lie in memory, so with "reassoc" a vectorised sum over topics gave
#: different last bits from one call to the next. The sums over topics that
#: need vector speed use :mod:`sparklda.kernels.lanes`, which vectorises them
#: by hand in a fixed order (docs/architecture.md, "Determinism").
FASTMATH: Final[set[str]] = set()
