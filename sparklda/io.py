"""Paths: ``sample:`` names of the corpus shipped inside the package."""

from __future__ import annotations

from importlib.resources import files


def resolve_sample(path: str | None) -> str | None:
    """``sample:kos/docword.txt.gz`` names a file of the corpus shipped in the package
    (``sparklda/data/kos/docword.txt.gz``); any other path is returned unchanged."""
    if path and path.startswith("sample:"):
        return str(files("sparklda").joinpath("data", path[len("sample:"):]))
    return path
