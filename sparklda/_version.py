"""The package version, in one place (``sparklda.__version__`` and saved models read it)."""

__version__ = "0.1.0"
