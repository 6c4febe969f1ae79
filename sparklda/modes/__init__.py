"""Inference modes: each is a kernel plus an update rule on the shared round
skeleton of :mod:`sparklda.training`. Importing this package registers them:
``scvb0`` (:mod:`.scvb0`), ``cvb0`` and ``cvb`` (:mod:`.cvb0`), ``svb``
(:mod:`.svb`, batch VB with ``batch=True``)."""

from . import cvb0, scvb0, svb  # noqa: F401
