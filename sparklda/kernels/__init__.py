"""Numeric kernels: pure functions over numpy arrays (numba-compiled).

This package never imports pyspark; the distributed layer calls into it.
Every kernel has a plain reference in ``tests/reference.py``.
"""

from .inference import foldin_block, loglik_block
from .random import uniform_matrix, uniform_per_doc
from .scvb0 import init_doc_stats, scvb0_block

__all__ = [
    "foldin_block",
    "init_doc_stats",
    "loglik_block",
    "scvb0_block",
    "uniform_matrix",
    "uniform_per_doc",
]
