"""Compiler settings shared by every numba kernel (one place to change them).

Kernels are single-threaded on purpose: Spark already runs one task per core,
so a kernel that spawned threads of its own would oversubscribe the executor.
"""

from __future__ import annotations

import os
import sys
import tempfile
from typing import Final, Literal, TypedDict


class JitOptions(TypedDict):
    """The keyword options of ``numba.njit`` that :data:`JIT_OPTIONS` sets
    (typed so that ``numba.njit(**JIT_OPTIONS)`` type-checks against numba's
    own signature)."""

    cache: bool
    nogil: bool
    error_model: Literal["python", "numpy"]


#: Options passed to every ``numba.njit`` in :mod:`sparklda.kernels`.
#: ``cache=True`` keeps compiled code on disk, so a machine compiles each kernel
#: once and every later Python worker (and driver) loads it: next to the sources
#: (``__pycache__``) when that is writable, else in numba's per-user cache
#: directory, else in the one :func:`ensure_cache_dir` sets. ``nogil`` lets a
#: driver-side caller use threads.
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


def _writable(path: str) -> bool:
    probe = path
    while probe and not os.path.exists(probe):
        parent = os.path.dirname(probe)
        if parent == probe:
            break
        probe = parent
    return bool(probe) and os.access(probe, os.W_OK)


def ensure_cache_dir(kernels_dir: str) -> str | None:
    """Make sure numba has somewhere to write its cache (docs/architecture.md,
    "Startup"): with ``NUMBA_CACHE_DIR`` unset and neither the kernels' own
    directory nor the per-user cache directory writable (a read-only install
    on a worker whose home is not writable), numba would refuse ``cache=True``
    at import. Then set ``NUMBA_CACHE_DIR`` to a per-user directory under the
    system's temporary directory (and numba's config, if numba is imported
    already). Runs when this module is imported, before any kernel is
    compiled. Returns the directory it set, or None."""
    if os.environ.get("NUMBA_CACHE_DIR"):
        return None
    user_cache = os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"),
        "numba",
    )
    if _writable(kernels_dir) or _writable(user_cache):
        return None
    path = os.path.join(tempfile.gettempdir(), f"sparklda-numba-cache-{os.getuid()}")
    os.environ["NUMBA_CACHE_DIR"] = path
    numba = sys.modules.get("numba")
    if numba is not None:
        numba.config.CACHE_DIR = path
    return path


#: The cache directory set at import (None: the sources' or numba's own one).
CACHE_DIR_SET: Final[str | None] = ensure_cache_dir(os.path.dirname(os.path.abspath(__file__)))
