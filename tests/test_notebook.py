"""The quickstart notebook: generated files are current, and it runs end to end."""

from __future__ import annotations

import importlib.util
import os

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


@pytest.mark.slow
@pytest.mark.notebook
def test_quickstart_notebook_runs(tmp_path):
    import nbformat
    from nbclient import NotebookClient

    nb = nbformat.read(os.path.join(NOTEBOOKS, "quickstart.ipynb"), as_version=4)
    nbformat.validate(nb)
    env_before = os.environ.get("PYSPARK_PYTHON")
    client = NotebookClient(
        nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}
    )
    client.execute()  # raises CellExecutionError, naming the cell, if any cell fails
    assert os.environ.get("PYSPARK_PYTHON") == env_before

    def outputs(marker):
        cell = next(c for c in nb.cells if c.cell_type == "code" and marker in c.source)
        return cell.outputs

    topics = [o for o in outputs("describeTopics(8)") if o.output_type == "execute_result"]
    html = topics[0].data["text/html"]
    assert html.count("</tr>") == 1 + 10  # header + one row per topic
    plot = outputs("plt.show()")
    assert any("image/png" in o.get("data", {}) for o in plot)
    history = next(o for o in plot if o.output_type == "execute_result").data["text/plain"]
    assert "heldout_loglik" in history
    scored = outputs("model.transform(new)")
    text = "".join(o.get("text", "") for o in scored if o.output_type == "stream")
    assert "log-perplexity of the new documents:" in text
    assert float(text.split(":")[-1]) == pytest.approx(7.5, abs=1.5)
    assert os.path.isdir(tmp_path / "kos-lda-pipeline" / "stages")
    # a progress widget while training (tqdm's notebook bar)
    training = outputs("pipeline.fit(train)")
    assert any("application/vnd.jupyter.widget-view+json" in o.get("data", {}) for o in training), (
        training
    )
    # pyLDAvis draws the topics (it is in the dev extras)
    vis = outputs("toPyLDAvis")
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
