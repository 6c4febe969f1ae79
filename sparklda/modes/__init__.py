"""Inference modes: each is a round state, a per-block kernel call and an update
rule on the shared round skeleton (:mod:`sparklda.modes.base`, the contract).

:data:`MODES` is the explicit registry the skeleton, the jobs and the ``pyspark.ml``
layer look modes up in: ``scvb0`` (:mod:`.scvb0`), ``cvb0`` and ``cvb`` (:mod:`.cvb0`),
``svb`` (:mod:`.svb`, batch VB with ``batch=True``), ``map`` (:mod:`.map_em`, MAP-EM),
``gibbs`` (:mod:`.gibbs`, collapsed Gibbs sampling as AD-LDA).
A new mode is its module, its kernel and one entry here (see :mod:`sparklda.modes.base`).
"""

from __future__ import annotations

from .base import Mode, StatefulMode
from .cvb0 import CVB, CVB0
from .gibbs import Gibbs
from .map_em import MAP
from .scvb0 import SCVB0
from .svb import SVB

#: name -> mode class; ``sparklda.params.ALGORITHMS`` lists the same names in the same
#: order (tests/test_registry.py).
MODES: dict[str, type[Mode]] = {m.name: m for m in (SCVB0, CVB0, CVB, SVB, MAP, Gibbs)}

__all__ = ["CVB", "CVB0", "MAP", "MODES", "SCVB0", "SVB", "Gibbs", "Mode", "StatefulMode"]
