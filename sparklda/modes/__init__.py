"""Inference modes: each is a kernel plus an update rule on the shared round
skeleton of :mod:`sparklda.training`. Importing this package registers them."""

from . import scvb0  # noqa: F401
