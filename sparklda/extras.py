"""Optional packages (the extras of ``pip install sparklda[...]``): import one by name only when
a setting or call needs it, with an error that names the extra when it is missing.

``mlflow`` (extra ``mlflow``: tracking and the model flavor, :mod:`sparklda.mlflow`) and
``matplotlib`` (extra ``plots``: :mod:`sparklda.plots`) are imported nowhere else at module
import time, so ``import sparklda`` and the jobs work without them.
"""

from __future__ import annotations

import importlib
from types import ModuleType

from .errors import MissingExtraError

#: module -> the extra of sparklda that installs it
EXTRAS = {"mlflow": "mlflow", "matplotlib": "plots"}


def install_hint(module: str) -> str:
    """``pip install 'sparklda[EXTRA]'`` for the extra that brings ``module``."""
    return f"pip install 'sparklda[{EXTRAS[module]}]'"


def require(module: str, what: str) -> ModuleType:
    """The module ``module`` (top level: ``mlflow``, ``matplotlib``), imported; ``what`` names
    the setting or call that needs it in the :class:`MissingExtraError` raised without it."""
    try:
        return importlib.import_module(module)
    except ImportError as e:
        raise MissingExtraError(
            f"{what} needs the optional package {module!r}, which is not installed "
            f"({e}); install it with: {install_hint(module)}"
        ) from None


def available(module: str) -> bool:
    """Whether ``module`` can be imported (imports it)."""
    try:
        importlib.import_module(module)
    except ImportError:
        return False
    return True
