"""Compiler settings shared by every numba kernel (one place to change them).

Kernels are single-threaded on purpose: Spark already runs one task per core,
so a kernel that spawned threads of its own would oversubscribe the executor.
"""

from __future__ import annotations

#: Options passed to every ``numba.njit`` in :mod:`sparklda.kernels`.
#: ``cache=True`` keeps compiled code on disk so executors do not recompile it
#: in every Python worker; ``nogil`` lets a driver-side caller use threads.
JIT_OPTIONS = dict(cache=True, nogil=True, error_model="numpy")

#: Fast-math flags for the hot loops: reassociation lets LLVM vectorise the
#: sums over topics. No flag that assumes away NaN or infinity is used, so a
#: bad value still shows as NaN instead of being silently miscomputed.
FASTMATH = {"reassoc", "contract", "nsz", "arcp"}
