"""Numeric kernels: pure functions over numpy arrays (numba-compiled).

This package never imports pyspark; the distributed layer calls into it.
Every kernel, the driver-side ones included, is tested against a plainly
written reference: ``tests/reference.py`` (SCVB0, N^Θ initialisation, fold-in
and log-likelihood, the driver's row updates and merge, the random streams)
or ``tests/reference_modes.py`` (CVB0, CVB, MAP-EM, SVB, Gibbs, the initial γ,
E[log θ]);
:func:`digamma` is tested against ``scipy.special.digamma``.
"""

from .cvb0 import cvb0_block, cvb0_init_gamma
from .gibbs import gibbs_init, gibbs_sweep, topic_counts
from .inference import foldin_block, loglik_block
from .map_em import map_block
from .random import doc_keys, uniform_matrix, uniform_per_doc
from .scvb0 import init_doc_stats, scvb0_block
from .special import digamma, dirichlet_expectation_2d, dirichlet_expectation_given
from .svb import svb_estep_block

__all__ = [
    "cvb0_block",
    "cvb0_init_gamma",
    "digamma",
    "dirichlet_expectation_2d",
    "dirichlet_expectation_given",
    "doc_keys",
    "foldin_block",
    "gibbs_init",
    "gibbs_sweep",
    "init_doc_stats",
    "loglik_block",
    "map_block",
    "scvb0_block",
    "svb_estep_block",
    "topic_counts",
    "uniform_matrix",
    "uniform_per_doc",
]
