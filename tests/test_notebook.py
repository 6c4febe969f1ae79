"""The quickstart notebook: generated files are current, and it runs end to end."""

from __future__ import annotations

import importlib.util
import os

import numpy as np
import pytest

from tests.helpers import ROOT

NOTEBOOKS = os.path.join(ROOT, "notebooks")


def load_builder():
    spec = importlib.util.spec_from_file_location(
        "build_notebooks", os.path.join(NOTEBOOKS, "build_notebooks.py")
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_committed_notebooks_are_what_the_generator_writes():
    builder = load_builder()
    for name, text in builder.render().items():
        with open(os.path.join(NOTEBOOKS, name), encoding="utf-8") as f:
            assert f.read() == text, f"notebooks/{name} is stale: run notebooks/build_notebooks.py"
    src = builder.render()["quickstart.py"]
    assert src.startswith("# Databricks notebook source\n")
    n_cells = len(builder.CELLS)
    assert src.count("\n# COMMAND ----------\n") == n_cells - 1
    assert src.count("# MAGIC %md\n") == sum(k == "markdown" for k, _ in builder.CELLS)
    compile(src, "quickstart.py", "exec")


@pytest.fixture(scope="module")
def executed(tmp_path_factory):
    """``executed(kind)``: the quickstart notebook run once per module in a fresh kernel,
    ``"classic"`` (a local[2] session) or ``"connect"`` (``SPARK_REMOTE=local[2]``: the
    kernel's pyspark starts a local Spark Connect server), and the folder it ran in."""
    done: dict = {}

    def run(kind: str):
        if kind not in done:
            import nbformat
            from nbclient import NotebookClient

            nb = nbformat.read(os.path.join(NOTEBOOKS, "quickstart.ipynb"), as_version=4)
            nbformat.validate(nb)
            path = tmp_path_factory.mktemp(f"notebook-{kind}")
            env = {k: v for k, v in os.environ.items() if not k.startswith("SPARK_CONNECT")}
            env.pop("SPARK_REMOTE", None)
            if kind == "connect":
                env["SPARK_REMOTE"] = "local[2]"
            env_before = os.environ.get("PYSPARK_PYTHON")
            client = NotebookClient(
                nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(path)}}
            )
            client.execute(env=env)  # raises CellExecutionError, naming the cell, if one fails
            assert os.environ.get("PYSPARK_PYTHON") == env_before
            done[kind] = nb, path
        return done[kind]

    return run


def _outputs(nb, marker):
    cell = next(c for c in nb.cells if c.cell_type == "code" and marker in c.source)
    return cell.outputs


def _stream(nb, marker) -> str:
    return "".join(o.get("text", "") for o in _outputs(nb, marker) if o.output_type == "stream")


def _assert_runs_clean(nb, path):
    topics = [o for o in _outputs(nb, "describeTopics(8)") if o.output_type == "execute_result"]
    html = topics[0].data["text/html"]
    assert html.count("</tr>") == 1 + 10  # header + one row per topic
    plot = _outputs(nb, "convergence_figure(")  # held-out quality and the top terms
    assert sum("image/png" in o.get("data", {}) for o in plot) == 2
    history = next(o for o in plot if o.output_type == "execute_result").data["text/plain"]
    assert "heldout_loglik" in history
    text = _stream(nb, "model.transform(new)")
    assert "log-perplexity of the new documents:" in text
    assert float(text.split(":")[-1]) == pytest.approx(7.5, abs=1.5)
    assert os.path.isdir(path / "kos-lda-pipeline" / "stages")
    # pyLDAvis draws the topics (it is in the dev extras)
    vis = _outputs(nb, "toPyLDAvis")
    assert "pyLDAvis: 10 topics over" in "".join(o.get("text", "") for o in vis)
    assert any("text/html" in o.get("data", {}) for o in vis)
    # no cell shows a traceback or an error, not even on stderr (PySpark's worker daemon
    # prints there when a task's output is not read to the end)
    for cell in nb.cells:
        for o in cell.get("outputs", []):
            text = o.get("text", "") + "".join(
                str(v) for k, v in o.get("data", {}).items() if k.startswith("text/plain")
            )
            text += "".join(o.get("traceback", []))
            assert "Traceback" not in text and "Error" not in text, (cell.source, text)


@pytest.mark.slow
@pytest.mark.notebook
def test_quickstart_notebook_runs(executed):
    nb, path = executed("classic")
    assert "(classic)" in _stream(nb, "SparkSession.getActiveSession()")
    _assert_runs_clean(nb, path)
    # a progress widget while training (tqdm's notebook bar)
    training = _outputs(nb, "pipeline.fit(train)")
    assert any("application/vnd.jupyter.widget-view+json" in o.get("data", {}) for o in training), (
        training
    )


@pytest.mark.slow
@pytest.mark.notebook
def test_quickstart_notebook_runs_unchanged_under_spark_connect(spark, executed):
    """The same notebook with ``SPARK_REMOTE=local[2]`` (what Databricks serverless and
    standard access compute give a notebook: a Spark Connect session) runs every cell
    without an error, and trains the classic run's model: the same documents, split and
    partitioned alike, the same seed (docs/architecture.md, "Spark Connect")."""
    from sparklda.ml import load_topic_model

    nb, path = executed("connect")
    assert "(Spark Connect)" in _stream(nb, "SparkSession.getActiveSession()")
    _assert_runs_clean(nb, path)
    classic_nb, classic_path = executed("classic")
    remote = load_topic_model(str(path / "kos-lda-pipeline"), spark)
    classic = load_topic_model(str(classic_path / "kos-lda-pipeline"), spark)
    assert remote.vocab == classic.vocab
    np.testing.assert_allclose(remote.topic_word, classic.topic_word, rtol=1e-5, atol=1e-6)
    assert _stream(nb, "model.transform(new)") == _stream(classic_nb, "model.transform(new)")
