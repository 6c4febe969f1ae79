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
from dataclasses import dataclass

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
    vocab_size: int,
    k: int,
    dtype: str = "float64",
    available: int | None = None,
    placement: str = "driver",
) -> None:
    """Refuse (:class:`ParamError`) a model of ``k`` topics over ``vocab_size`` terms that
    needs more than ``available`` bytes (default: this machine's physical memory); only
    for ``placement`` "driver" (the executors hold the model under the others, and "auto"
    decides from :func:`driver_need` once the corpus is read)."""
    if placement != "driver":
        return
    need = model_bytes(vocab_size, k, dtype)
    have = driver_memory() if available is None else available
    if have is None or need <= have:
        return
    raise ParamError(
        f"The 'k' parameter ({k}) with a vocabulary of {vocab_size} terms needs at least "
        f"{format_bytes(need)} on the driver for the model (V*K*(8 + "
        f"{np.dtype(dtype).itemsize}) bytes: the float64 topic-word statistics and the "
        f"{np.dtype(dtype).name} state), more than the {format_bytes(have)} of memory this "
        f"machine has; lower k or the vocabulary size, or set 'model_placement' to "
        f"'executors' or 'auto'."
    )


# --------------------------------------------------------------------------
# The driver placement's memory (docs/architecture.md, "Memory model")

#: A Spark property (a size: "8g", bytes unit-less) giving the driver's Python process
#: the memory it may use for the model; unset: the memory available on the driver
#: machine (:func:`available_memory`).
PYTHON_MEMORY_CONF = "spark.sparklda.driver.pythonMemory"


@dataclass(frozen=True)
class DriverNeed:
    """The least memory the driver placement needs for a run, by part (bytes): what the
    driver's Python process holds (``python``) and what passes through its JVM
    (``jvm``). Lower bounds from the memory model: a run that needs more than the driver
    has cannot succeed, one that needs less may still need more than this."""

    python: dict[str, int]
    jvm: dict[str, int]

    @property
    def python_total(self) -> int:
        return sum(self.python.values())

    @property
    def jvm_total(self) -> int:
        return sum(self.jvm.values())

    def describe(self) -> str:
        """The figures, e.g. for the log: each part and the totals."""
        py = ", ".join(f"{n} {format_bytes(b)}" for n, b in self.python.items())
        jvm = ", ".join(f"{n} {format_bytes(b)}" for n, b in self.jvm.items())
        return (
            f"Python {format_bytes(self.python_total)} ({py}); "
            f"JVM {format_bytes(self.jvm_total)} ({jvm})"
        )


def driver_need(
    vocab_size: int,
    k: int,
    dtype: str = "float32",
    algorithm: str = "scvb0",
    round_rows: int | None = None,
) -> DriverNeed:
    """What the driver placement holds for ``k`` topics over ``vocab_size`` terms
    (docs/architecture.md, "Memory model"), ``round_rows`` the distinct terms of a round
    (U_r; None: every term, as a round that touches the whole vocabulary does).

    Python: the model (8VK float64; CVB also its variances, 16VK), SCVB0's and SVB's
    mirror in the kernels' dtype (bVK), the round value (SCVB0: b·U_r·K; SVB: bVK;
    CVB0 and MAP: 8VK; CVB: 16VK) and its serialized copy while it is broadcast (the
    same again), and the merged statistics (8·U_r·K; CVB0, CVB and MAP make them dense:
    8VK, CVB twice). JVM: the broadcast's serialized round value and the merged
    statistics coming back from the tasks (8·U_r·K)."""
    v, kk = int(vocab_size), int(k)
    b = np.dtype(dtype).itemsize
    rows = v if round_rows is None else max(0, min(int(round_rows), v))
    vk, rk = v * kk, rows * kk
    twice = 2 if algorithm == "cvb" else 1
    if algorithm == "scvb0":
        model, mirror, value, merged = 8 * vk, b * vk, b * rk, 8 * rk
    elif algorithm == "svb":
        model, mirror, value, merged = 8 * vk, b * vk, b * vk, 8 * rk
    else:  # cvb0, cvb, map: float64 statistics shipped whole and merged dense
        model, mirror, value, merged = 8 * vk * twice, 0, 8 * vk * twice, 8 * vk * twice
    python = {"model": model, "mirror": mirror, "round value": value}
    python.update({"its serialized copy": value, "merged statistics": merged})
    jvm = {"broadcast": value, "results": 8 * rk}
    return DriverNeed({n: x for n, x in python.items() if x}, jvm)


def available_memory() -> int | None:
    """Memory available to a new process on this machine (Linux's MemAvailable; else
    the physical memory; None where the OS says neither)."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return driver_memory()


def placement_for(
    requested: str,
    need: DriverNeed,
    python_memory: int | None,
    jvm_heap: int | None,
    executors_ok: bool = True,
    why_not: str = "",
) -> str:
    """The model placement of a run: ``requested`` ("driver", "executors" or "auto"),
    decided for "auto" from ``need`` (:func:`driver_need`) against the driver's Python
    memory and JVM heap (None: unknown, not checked): the driver when it holds the
    model, else the executors. The driver placement that cannot fit is refused
    (:class:`ParamError` naming the bytes and the settings to change), as is "auto" when
    the executors cannot hold it either (``executors_ok`` false, ``why_not`` says why)."""
    if requested == "executors":
        return "executors"
    short = []
    if python_memory is not None and need.python_total > python_memory:
        short.append(
            f"{format_bytes(need.python_total)} in the driver's Python process, which has "
            f"{format_bytes(python_memory)} (the memory available, or {PYTHON_MEMORY_CONF})"
        )
    if jvm_heap is not None and need.jvm_total > jvm_heap:
        short.append(
            f"{format_bytes(need.jvm_total)} in the driver's JVM, whose heap is "
            f"{format_bytes(jvm_heap)} (spark.driver.memory)"
        )
    if not short:
        return "driver"
    if requested == "auto" and executors_ok:
        return "executors"
    fix = (
        "set 'model_placement' to 'executors' (the model sharded on the executors)"
        if executors_ok
        else f"the executors cannot hold it instead ({why_not})"
    )
    raise ParamError(
        f"The model cannot live on the driver: it needs at least {' and '.join(short)} "
        f"({need.describe()}). Raise spark.driver.memory or {PYTHON_MEMORY_CONF}, lower k "
        f"or the vocabulary size, or {fix}."
    )
