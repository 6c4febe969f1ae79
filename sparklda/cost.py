"""The per-round cost model of the two model placements on paper (docs/architecture.md,
"Cost model: where each placement wins"): pure arithmetic, no Spark, no arrays of the
model's size.

A round of SCVB0 with ``tasks`` tasks (one block each, one task slot per executor, so
``tasks = executors`` in the table) costs, in seconds:

driver placement (the executors' combine)::

    broadcast  b·U_r·K·(σ_b + σ_net) + ⌈log2 E⌉·block·σ_net  (torrent)
               b·U_r·K·σ_b + E·b·U_r·K·σ_net     (every executor fetches from the driver)
    stages     2 · (t_stage + t_task) + 2·P·t_launch          (kernel, combine)
    kernel     n_t·K / r_k                                    (n_t tokens a task)
    combine    b·U_t·K·σ_sh                      (each task's partial rows, shuffled)
    collect    8·U_r·K·σ_c                       (the merged float64 rows to the driver)
    update     U_r·K·u                           (the touched rows, on the driver)

executors placement::

    stages     2 · (t_stage + t_task) + 2·P·t_launch          (kernel, update)
    serve      b·U_t·K·σ_sh               (the block's rows, shuffled by the update before)
    kernel     n_t·K / r_k
    combine    b·U_t·K·σ_sh                                   (partials by shard)
    update     V·K/E·u + 2·8·V·K/E·σ_sd                       (the shard read and written)

(the update stage of round t serves round t+1's rows; the summaries' one-task stage,
which reads no Python, is left out).

The constants are symbols with the values measured on the project's machine
(:data:`MEASURED`); the dated evidence is in docs/benchmarks/findings.md ("The cost
model's constants"). The network terms use an assumed link (``net_bytes_per_s``), since
every measurement here ran on one machine.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

from .errors import ParamError

PLACEMENTS = ("driver", "executors")
BROADCASTS = ("torrent", "fetch")


@dataclass(frozen=True)
class Constants:
    """The model's constants (seconds, bytes); see docs/architecture.md for each one's
    source."""

    t_stage: float  # a stage's fixed cost (a trivial job of 2 tasks)
    t_task: float  # a task's fixed cost on its slot (launch, Python worker round trip)
    t_launch: float  # the driver's serial cost per task launched
    sigma_b: float  # s per byte broadcast (pickle, store, every task's read), one machine
    sigma_sh: float  # s per byte shuffled, per task (write and read, pickled)
    sigma_c: float  # s per byte collected to the driver
    sigma_sd: float  # s per byte of a shard generation read or written (pickled)
    r_k: float  # kernel: token·topics per second per task, in a round
    u: float  # s per value updated (float64 rows times ρ, plus the mirror's cast)
    net_bytes_per_s: float  # one executor's link (assumed, not measured here)
    block: int = 4 << 20  # the torrent broadcast's block size (spark.broadcast.blockSize)

    @property
    def sigma_net(self) -> float:
        return 1.0 / self.net_bytes_per_s


#: Measured on the project's machine (docs/benchmarks/findings.md, "The cost model's
#: constants", which names each figure's file and row); the link is an assumption
#: (10 Gbit/s).
MEASURED = Constants(
    t_stage=0.10,
    t_task=0.05,
    t_launch=1e-3,
    sigma_b=8e-9,
    sigma_sh=2.2e-8,
    sigma_c=8e-9,
    sigma_sd=5e-8,
    r_k=3.3e8,
    u=1.2e-9,
    net_bytes_per_s=1.25e9,
)


@dataclass(frozen=True)
class Workload:
    """One round: ``vocab_size`` V, ``k`` K, ``executors`` E (one task each),
    ``round_tokens`` the minibatch's tokens, ``round_terms`` U_r the distinct terms of
    the round, ``block_terms`` U_t those of one task's block, ``itemsize`` b."""

    vocab_size: int
    k: int
    executors: int
    round_tokens: float
    round_terms: float
    block_terms: float
    itemsize: int = 4


def _check(w: Workload) -> None:
    for name in ("vocab_size", "k", "executors", "itemsize"):
        if int(getattr(w, name)) < 1:
            raise ParamError(f"{name} must be a positive integer, got {getattr(w, name)!r}")
    for name in ("round_tokens", "round_terms", "block_terms"):
        if not float(getattr(w, name)) >= 0:
            raise ParamError(f"{name} must be a number >= 0, got {getattr(w, name)!r}")


def round_parts(
    placement: str,
    w: Workload,
    c: Constants = MEASURED,
    broadcast: str = "torrent",
) -> dict[str, float]:
    """The seconds of each part of one round (the module's docstring's formulas)."""
    if placement not in PLACEMENTS:
        raise ParamError(f"placement must be one of {PLACEMENTS}, got {placement!r}")
    if broadcast not in BROADCASTS:
        raise ParamError(f"broadcast must be one of {BROADCASTS}, got {broadcast!r}")
    _check(w)
    e, k, b = int(w.executors), int(w.k), int(w.itemsize)
    vk = float(w.vocab_size) * k
    kernel = w.round_tokens / e * k / c.r_k
    partials = b * w.block_terms * k * c.sigma_sh
    if placement == "driver":
        value = b * float(w.round_terms) * k
        if broadcast == "torrent":
            bcast = value * (c.sigma_b + c.sigma_net)
            bcast += math.ceil(math.log2(e)) * min(c.block, value) * c.sigma_net
        else:
            bcast = value * c.sigma_b + e * value * c.sigma_net
        return {
            "stages": 2 * (c.t_stage + c.t_task) + 2 * e * c.t_launch,
            "broadcast": bcast,
            "kernel": kernel,
            "combine": partials,
            "collect": 8 * w.round_terms * k * c.sigma_c,
            "update": w.round_terms * k * c.u,
        }
    shard = 8 * vk / e
    return {
        "stages": 2 * (c.t_stage + c.t_task) + 2 * e * c.t_launch,
        "serve": partials,
        "kernel": kernel,
        "combine": partials,
        "update": vk / e * c.u + 2 * shard * c.sigma_sd,
    }


def round_cost(
    placement: str,
    w: Workload,
    c: Constants = MEASURED,
    broadcast: str = "torrent",
) -> float:
    """Seconds per round of ``placement`` ("driver" or "executors") for the workload."""
    return sum(round_parts(placement, w, c, broadcast).values())


def holds(placement: str, w: Workload) -> dict[str, float]:
    """Bytes the driver's Python process and each executor hold in a round (lower
    bounds, docs/architecture.md "Memory model"): the driver placement's model (8VK),
    mirror (bVK), round value and its pickled copy (2·b·U_r·K) and merged rows
    (8·U_r·K); an executor's round value (b·U_r·K) or shard (8VK/E, twice while the
    next generation is written), its block's rows and its partial rows (2·b·U_t·K)."""
    if placement not in PLACEMENTS:
        raise ParamError(f"placement must be one of {PLACEMENTS}, got {placement!r}")
    _check(w)
    vk, k, b = float(w.vocab_size) * w.k, w.k, w.itemsize
    rows = 2 * b * w.block_terms * k
    if placement == "driver":
        driver = (8 + b) * vk + 2 * b * w.round_terms * k + 8 * w.round_terms * k
        return {"driver": driver, "executor": b * w.round_terms * k + rows}
    return {"driver": 16.0 * k * w.executors, "executor": 2 * 8 * vk / w.executors + rows}


def distinct_terms(tokens: float, vocab_size: int, exponent: float = 1.0) -> float:
    """The expected distinct terms among ``tokens`` tokens drawn from a Zipf law of
    ``exponent`` over ``vocab_size`` terms: Σ_w 1 − (1 − p_w)^n, summed exactly over the
    first 10^5 ranks and by an integral over the rest."""
    v, n = int(vocab_size), float(tokens)
    if v < 1 or n < 0:
        raise ParamError(f"vocab_size must be >= 1 and tokens >= 0, got {v!r}, {n!r}")
    head = min(v, 100_000)
    norm = sum(r**-exponent for r in range(1, head + 1))
    if v > head:  # the tail of the harmonic sum by its integral
        a, z = head + 0.5, v + 0.5
        norm += (
            math.log(z / a)
            if exponent == 1.0
            else (z ** (1 - exponent) - a ** (1 - exponent)) / (1 - exponent)
        )
    total = 0.0
    for r in range(1, head + 1):
        total -= math.expm1(n * math.log1p(-(r**-exponent) / norm))
    if v > head:  # the tail's ranks, in 1,000 strata
        edges = [head + (v - head) * i / 1000 for i in range(1001)]
        for lo, hi in itertools.pairwise(edges):
            p = ((lo + hi) / 2) ** -exponent / norm
            total -= (hi - lo) * math.expm1(n * math.log1p(-p))
    return min(total, float(v), n)
