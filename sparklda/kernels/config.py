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

#: Elements of padding around the scratch vectors a kernel allocates (one per topic row:
#: N^Θ_j, γ, ...). With ``reassoc``, a loop over topics sums in vector lanes when it is
#: vectorised and one by one when it is not; LLVM picks at run time, falling back to the
#: scalar loop when two arrays lie closer together than its vector stride (up to 16
#: float32 lanes x 4 unrolled = 256 bytes). Scratch vectors as rows 1, 2, ... of a
#: ``(n + 1, K + SCRATCH_PAD)`` array are that far from each other and from any other
#: array, so every call takes the same path and the same seed gives the same bits
#: whatever the heap looked like (a retried task reproduces its result exactly).
SCRATCH_PAD: Final[int] = 256
