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

#: Fast-math flags for the hot loops: reassociation lets LLVM vectorise the
#: sums over topics. No flag that assumes away NaN or infinity is used, so a
#: bad value still shows as NaN instead of being silently miscomputed.
FASTMATH: Final[set[str]] = {"reassoc", "contract", "nsz", "arcp"}
