"""The installed wheel: built from the repository, installed into a fresh venv, run by
its console scripts on the shipped corpus and configuration (no checkout, no PYTHONPATH)."""

from __future__ import annotations

import json
import os
import shutil
import site
import sys
import sysconfig
import zipfile

import pytest

from tests.helpers import ROOT, job_env, run

pytestmark = pytest.mark.slow

IGNORE = shutil.ignore_patterns(
    ".git",
    "build",
    "dist",
    "out",
    "*.egg-info",
    "__pycache__",
    ".pytest_cache",
    ".ruff_cache",
    "*.pyc",
)


@pytest.fixture(scope="module")
def venv(tmp_path_factory):
    """(venv directory, wheel path): the wheel built from a copy of the repository (the
    build writes build/ and *.egg-info beside the sources), installed without its
    dependencies into a fresh venv that sees the packages of the interpreter running the
    tests (pyspark, numpy, numba...): see :func:`_see_packages_of`."""
    base = tmp_path_factory.mktemp("wheel")
    src = base / "src"
    shutil.copytree(ROOT, src, ignore=IGNORE)
    env = job_env(PYTHONPATH=None)
    out = run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-w", base / "dist", src], env=env
    )
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    wheels = list((base / "dist").glob("sparklda-*.whl"))
    assert len(wheels) == 1, wheels
    venv = base / "venv"
    out = run([sys.executable, "-m", "venv", venv], env=env)
    assert out.returncode == 0, out.stderr[-3000:]
    _see_packages_of(venv, env)
    out = run(
        [venv / "bin" / "python", "-m", "pip", "install", "--no-deps", "--no-index", wheels[0]],
        env=env,
    )
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    # the installed package's kernels that the train job below runs (SCVB0 in float32,
    # held-out scoring) compiled into its cache once, in one process: else the job's
    # driver and its two Python workers each compile them at the same time (a cold cache
    # is tests/test_kernel_cache.py's case)
    warm = (
        "from sparklda.modes import MODES; from sparklda.kernels.warm import warm; "
        "m = MODES['scvb0']; "
        "warm(set(m.task_kernels + m.driver_kernels + ('inference',)), 'float32')"
    )
    out = run([venv / "bin" / "python", "-c", warm], env=env)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    return venv, wheels[0]


def _site_dirs() -> list[str]:
    """The site-packages directories of the interpreter running the tests: a virtualenv's
    own (and its base's when it was made with ``--system-site-packages``), a conda
    environment's, or a system install's, and the user's site directory when in use."""
    dirs = list(site.getsitepackages())
    if site.ENABLE_USER_SITE:
        dirs.append(site.getusersitepackages())
    dirs += [sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]]
    return list(dict.fromkeys(d for d in dirs if os.path.isdir(d)))


def _see_packages_of(venv, env) -> None:
    """Let ``venv`` import the running interpreter's packages (the wheel's dependencies).

    ``python -m venv --system-site-packages`` would not do: made from a virtualenv's
    interpreter, the new venv sees the *base* interpreter's packages, not the
    virtualenv's, where ``pip install -e ".[dev]"`` put pyspark. A ``.pth`` file in the
    venv's site-packages appends the running interpreter's site directories to its
    ``sys.path`` instead, after the venv's own (so the installed wheel comes first). They
    are plain directory lines: the ``.pth`` files inside those directories do not run,
    so an editable install of the checkout there stays off the venv's path."""
    code = "import sysconfig; print(sysconfig.get_paths()['purelib'])"
    purelib = run([venv / "bin" / "python", "-c", code], env=env)
    assert purelib.returncode == 0, purelib.stderr[-3000:]
    pth = os.path.join(purelib.stdout.strip(), "sparklda-tests-outer-site.pth")
    with open(pth, "w", encoding="utf-8") as f:
        f.write("".join(d + "\n" for d in _site_dirs()))


def test_wheel_contents(venv):
    _, wheel = venv
    with zipfile.ZipFile(wheel) as z:
        names = set(z.namelist())
        entry_points = next(n for n in names if n.endswith(".dist-info/entry_points.txt"))
        scripts = z.read(entry_points).decode()
    for conf in ("local", "cluster", "modes", "warmstart"):
        assert f"sparklda/conf/{conf}.toml" in names
    assert {"sparklda/data/kos/docword.txt.gz", "sparklda/data/kos/vocab.txt"} <= names
    for module in ("__init__", "config", "session", "job", "train", "infer", "compare", "generate"):
        assert f"sparklda/cli/{module}.py" in names
    assert {"sparklda/__main__.py", "sparklda/io.py", "sparklda/synthetic.py"} <= names
    assert "sparklda-train = sparklda.cli.train:main" in scripts
    assert "sparklda-infer = sparklda.cli.infer:main" in scripts
    assert "sparklda-generate = sparklda.cli.generate:main" in scripts
    assert not any(n.startswith(("tests/", "jobs/")) for n in names)


def test_installed_console_scripts_train_and_start(venv, tmp_path):
    venv_dir, _ = venv
    bin_dir = venv_dir / "bin"
    # no checkout on the path, no activated venv, no PYSPARK_PYTHON
    env = job_env(
        PYTHONPATH=None,
        PYSPARK_PYTHON=None,
        PYSPARK_DRIVER_PYTHON=None,
        SPARK_HOME=None,
        VIRTUAL_ENV=None,
    )
    where = run(
        [bin_dir / "python", "-c", "import sparklda.cli; print(sparklda.cli.__file__)"],
        env=env,
        cwd=tmp_path,
        timeout=120,
    )
    assert where.returncode == 0, where.stderr
    assert where.stdout.strip().startswith(str(venv_dir)), where.stdout

    printed = run(
        [bin_dir / "sparklda-train", "--print-config", "local"], env=env, cwd=tmp_path, timeout=120
    )
    assert printed.returncode == 0, printed.stderr
    with open(os.path.join(ROOT, "conf", "local.toml")) as f:
        assert printed.stdout == f.read()
    (tmp_path / "my.toml").write_text(printed.stdout)

    model = tmp_path / "model"
    out = run(
        [
            bin_dir / "sparklda-train",
            "--config",
            "my.toml",
            "--set",
            "training.passes=1",
            "--set",
            "training.k=5",
            "--set",
            f"output.model={model}",
        ],
        env=env,
        cwd=tmp_path,
    )
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-5000:]
    assert "Top words of the 5 topics:" in out.stdout
    assert f"Python workers run {bin_dir / 'python'}" in out.stdout
    metrics = json.loads((tmp_path / "metrics.json").read_text())
    assert metrics["params"]["k"] == 5 and metrics["spark"]["master"] == "local[2]"
    # the shipped corpus, read from the installed package (the venv's, checked above)
    assert metrics["input"]["docword"] == "sample:kos/docword.txt.gz"
    assert metrics["report"]["corpus"]["documents_read"] == 3430
    assert (model / "commits").is_dir()  # a committed model directory

    # the other console scripts start from the venv's package too (their jobs' runs are
    # tests/test_infer_job.py's and tests/test_generate.py's: a Spark run here would
    # re-check them at the cost of another driver JVM)
    for script, config in (("sparklda-infer", "warmstart"), ("sparklda-generate", None)):
        shown = run(
            [bin_dir / script, *(("--print-config", config) if config else ("--help",))],
            env=env,
            cwd=tmp_path,
            timeout=120,
        )
        assert shown.returncode == 0, shown.stderr[-3000:]
        if config:
            with open(os.path.join(ROOT, "conf", f"{config}.toml")) as f:
                assert shown.stdout == f.read()
        else:
            assert "usage: sparklda-generate" in shown.stdout
