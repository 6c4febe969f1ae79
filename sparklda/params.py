"""Training parameters: one table of names, defaults, types and ranges.

Validation happens once, at the start of training (not when the object is
built), from :data:`CONSTRAINTS`, with messages that name the parameter, the
accepted range and the bad value, e.g. ``The 'k' parameter of LDA must be an
int in the range [2, inf). Got 1 instead.``
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, fields

ALGORITHMS = ("scvb0", "cvb0", "cvb", "svb")


@dataclass
class TrainParams:
    """Parameters of a training run (all modes).

    Symbols are those of Foulds et al. (2013) unless stated.
    """

    algorithm: str = "scvb0"
    #: K, the number of topics.
    k: int = 10
    #: α, the document-topic Dirichlet prior (pyspark: docConcentration).
    alpha: float = 0.1
    #: η, the topic-word Dirichlet prior (pyspark: topicConcentration).
    eta: float = 0.01
    #: Passes over the training corpus (SCVB0/SVB) or iterations (CVB0/CVB).
    passes: int = 20
    #: Stop after this many seconds from the start of fit (checked between rounds, at
    #: least one round runs; evaluation time excluded); 0 = no limit.
    time_budget: float = 0.0
    #: Documents per round (|M|); the corpus is cut into minibatch slices of this size.
    #: 2000: see docs/benchmarks.md ("Minibatch size") for the measurements behind it.
    minibatch_size: int = 2000
    #: SCVB0 burn-in passes over each document before the accumulating pass.
    burnin: int = 1
    #: ρ^Φ = s/(τ+t)^κ per minibatch of ``schedule_minibatch`` documents (paper: 10, 1000, 0.9, 100).
    s_phi: float = 10.0
    tau_phi: float = 1000.0
    kappa_phi: float = 0.9
    schedule_minibatch: int = 100
    #: ρ^Θ = s/(τ+t)^κ over a document's tokens (paper: 1, 10, 0.9).
    s_theta: float = 1.0
    tau_theta: float = 10.0
    kappa_theta: float = 0.9
    #: SVB: ρ = (τ0 + t)^-κ (Hoffman et al.; pyspark learningOffset, learningDecay).
    learning_offset: float = 1024.0
    learning_decay: float = 0.7
    #: SVB: batch VB when true (minibatch = corpus and ρ = 1).
    batch: bool = False
    #: SVB E-step: mean |Δγ| threshold and iteration cap.
    estep_tol: float = 1e-3
    estep_max_iter: int = 100
    #: Seed of every random choice (initialisation, splits, order).
    seed: int = 0
    #: Floating point type of the kernels and broadcasts: float32 or float64.
    dtype: str = "float32"
    #: Evaluate held-out quality every n rounds (0: only at the end).
    eval_every: int = 0
    #: Held-out documents: a seeded fraction, or a count (count wins when > 0).
    heldout_fraction: float = 0.0
    heldout_count: int = 0
    #: Partitions (tasks) per round; 0 = the cluster's default parallelism.
    parts_per_slice: int = 0
    #: Fold-in iterations for evaluation and transform.
    foldin_max_iter: int = 100
    #: CVB0/CVB: checkpoint the γ blocks every n iterations (0: never).
    checkpoint_interval: int = 10

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> "TrainParams":
        names = {f.name for f in fields(cls)}
        unknown = sorted(set(d) - names)
        if unknown:
            raise ValueError(f"Unknown LDA parameter(s) {unknown}; known parameters: {sorted(names)}.")
        return cls(**d)

    def validate(self) -> "TrainParams":
        """Check every parameter against :data:`CONSTRAINTS`; raise ValueError."""
        for name, (kind, low, high, low_open) in CONSTRAINTS.items():
            check(name, getattr(self, name), kind, low, high, low_open)
        if self.algorithm not in ALGORITHMS:
            raise ValueError(f"The 'algorithm' parameter of LDA must be one of "
                             f"{list(ALGORITHMS)}. Got {self.algorithm!r} instead.")
        if self.dtype not in ("float32", "float64"):
            raise ValueError(f"The 'dtype' parameter of LDA must be one of ['float32', 'float64']. "
                             f"Got {self.dtype!r} instead.")
        first = self.s_phi / self.tau_phi ** self.kappa_phi
        if first > 1:
            raise ValueError(f"The step schedule s_phi/(tau_phi)^kappa_phi must start at most 1; "
                             f"got {first:.4g} from s_phi={self.s_phi}, tau_phi={self.tau_phi}, "
                             f"kappa_phi={self.kappa_phi}.")
        first = self.s_theta / self.tau_theta ** self.kappa_theta
        if first > 1:
            raise ValueError(f"The step schedule s_theta/(tau_theta)^kappa_theta must start at most "
                             f"1; got {first:.4g}.")
        return self


INF = math.inf
#: name -> (type, low, high, low bound open)
CONSTRAINTS = {
    "k": ("int", 2, INF, False),
    "alpha": ("float", 0, INF, True),
    "eta": ("float", 0, INF, True),
    "passes": ("int", 1, INF, False),
    "time_budget": ("float", 0, INF, False),
    "minibatch_size": ("int", 1, INF, False),
    "burnin": ("int", 0, INF, False),
    "s_phi": ("float", 0, INF, True),
    "tau_phi": ("float", 0, INF, False),
    "kappa_phi": ("float", 0.5, 1, False),
    "schedule_minibatch": ("int", 1, INF, False),
    "s_theta": ("float", 0, INF, True),
    "tau_theta": ("float", 0, INF, False),
    "kappa_theta": ("float", 0, 1, False),
    "learning_offset": ("float", 0, INF, False),
    "learning_decay": ("float", 0.5, 1, True),
    "estep_tol": ("float", 0, INF, True),
    "estep_max_iter": ("int", 1, INF, False),
    "seed": ("int", 0, 2 ** 63 - 1, False),
    "eval_every": ("int", 0, INF, False),
    "heldout_fraction": ("float", 0, 1, False),
    "heldout_count": ("int", 0, INF, False),
    "parts_per_slice": ("int", 0, INF, False),
    "foldin_max_iter": ("int", 1, INF, False),
    "checkpoint_interval": ("int", 0, INF, False),
}


def check(name, value, kind, low, high, low_open=False, owner="LDA"):
    """Raise ValueError unless ``value`` is of ``kind`` within [low, high]."""
    lo = "(" if low_open else "["
    hi = "inf)" if high == INF else f"{high}]"
    msg = (f"The {name!r} parameter of {owner} must be {'an int' if kind == 'int' else 'a float'} "
           f"in the range {lo}{low}, {hi}. Got {value!r} instead.")
    if isinstance(value, bool):
        raise ValueError(msg)
    if kind == "int":
        if not isinstance(value, int):
            if not (isinstance(value, float) and value.is_integer()):
                raise ValueError(msg)
    elif not isinstance(value, (int, float)):
        raise ValueError(msg)
    if not math.isfinite(float(value)) and not (high == INF and value == INF):
        raise ValueError(msg)
    if value < low or (low_open and value == low) or value > high:
        raise ValueError(msg)
