"""Kernels compile once per machine: every numba kernel caches its machine code on disk,
and a second process loads it from there (docs/architecture.md, "Startup")."""

from __future__ import annotations

import importlib
import os
import subprocess
import sys

from numba.core.registry import CPUDispatcher

from sparklda.kernels.config import ensure_cache_dir
from tests.helpers import ROOT

MODULES = ["cvb0", "inference", "lanes", "random", "scvb0", "special", "svb"]

PROBE = """
import numpy as np
from sparklda.kernels import scvb0
acc = np.zeros((4, 3))
scvb0.scatter_add_rows(acc, np.array([0, 2]), np.ones((2, 3)))
d = scvb0._scatter_add_rows
print(sum(d.stats.cache_hits.values()), sum(d.stats.cache_misses.values()))
"""


def test_every_kernel_declares_an_on_disk_cache():
    found = 0
    for name in MODULES:
        mod = importlib.import_module(f"sparklda.kernels.{name}")
        for obj in vars(mod).values():
            if isinstance(obj, CPUDispatcher) and obj.__module__ == mod.__name__:
                found += 1
                assert type(obj._cache).__name__ == "FunctionCache", obj
    assert found >= 10


def test_a_second_process_loads_the_kernels_from_the_cache(tmp_path):
    cache = tmp_path / "numba-cache"
    env = {**os.environ, "NUMBA_CACHE_DIR": str(cache), "PYTHONPATH": ROOT}

    def probe():
        out = subprocess.run(
            [sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, check=True
        )
        hits, misses = out.stdout.split()
        return int(hits), int(misses)

    assert probe() == (0, 1)  # compiled, and written to the cache
    assert any(p.name.endswith(".nbi") for p in cache.rglob("*scatter_add_rows*"))
    assert probe() == (1, 0)  # loaded, not compiled


def test_cache_dir_falls_back_to_a_per_user_temporary_directory(monkeypatch):
    import numba

    from sparklda.kernels import config

    monkeypatch.delenv("NUMBA_CACHE_DIR", raising=False)
    monkeypatch.setattr(numba.config, "CACHE_DIR", numba.config.CACHE_DIR)
    monkeypatch.setattr(config, "_writable", lambda path: True)
    assert ensure_cache_dir("/any") is None  # the sources' or numba's own directory
    monkeypatch.setattr(config, "_writable", lambda path: False)  # read-only install and home
    set_to = ensure_cache_dir("/any")
    assert set_to is not None and os.environ["NUMBA_CACHE_DIR"] == set_to
    assert str(os.getuid()) in set_to
    assert numba.config.CACHE_DIR == set_to
    monkeypatch.setenv("NUMBA_CACHE_DIR", "/somewhere")
    assert ensure_cache_dir("/any") is None  # a user's setting wins


def test_writable_looks_at_the_nearest_existing_parent(tmp_path):
    from sparklda.kernels.config import _writable

    assert _writable(str(tmp_path / "not" / "yet"))
