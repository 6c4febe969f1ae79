"""Sizes that cannot work, refused before anything is allocated (pure: no Spark, no numpy
arrays of the size in question).

The driver holds the model: a (V, K) float64 matrix of topic-word statistics and
the mode's (V, K) state in the training dtype, at least. :func:`check_model_memory`
refuses a ``k`` and vocabulary size whose model cannot fit in the driver
machine's memory, naming what it needs, before a corpus is built or an array is
allocated (``k = 10**12`` would otherwise end in numpy's ``MemoryError`` after
the corpus was read).
"""

from __future__ import annotations

import os

import numpy as np

from .errors import ParamError

#: The largest count of one term in one document a reader accepts (2^31 - 1): larger
#: counts (1e40 in a UCI file) overflow the blocks' float32 counts and their sums.
MAX_COUNT = 2**31 - 1


def model_bytes(vocab_size: int, k: int, dtype: str = "float64") -> int:
    """The least memory the driver needs for a model of ``k`` topics over ``vocab_size``
    terms: V*K*(8 + the dtype's bytes)."""
    return int(vocab_size) * int(k) * (8 + np.dtype(dtype).itemsize)


def driver_memory() -> int | None:
    """The physical memory of this machine in bytes (None where the OS does not say)."""
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (AttributeError, ValueError, OSError):  # pragma: no cover - not POSIX
        return None


def format_bytes(n: float) -> str:
    for unit in ("bytes", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"):
        if n < 1024 or unit == "EiB":
            return f"{n:.0f} {unit}" if unit == "bytes" else f"{n:.1f} {unit}"
        n /= 1024
    raise AssertionError  # pragma: no cover


def check_model_memory(
    vocab_size: int, k: int, dtype: str = "float64", available: int | None = None
) -> None:
    """Refuse (:class:`ParamError`) a model of ``k`` topics over ``vocab_size`` terms that
    needs more than ``available`` bytes (default: this machine's physical memory)."""
    need = model_bytes(vocab_size, k, dtype)
    have = driver_memory() if available is None else available
    if have is None or need <= have:
        return
    raise ParamError(
        f"The 'k' parameter ({k}) with a vocabulary of {vocab_size} terms needs at least "
        f"{format_bytes(need)} on the driver for the model (V*K*(8 + "
        f"{np.dtype(dtype).itemsize}) bytes: the float64 topic-word statistics and the "
        f"{np.dtype(dtype).name} state), more than the {format_bytes(have)} of memory this "
        f"machine has; lower k or the vocabulary size."
    )
