"""Charts (sparklda.plots): PNGs written from a run's records; the clear error without
matplotlib (the ``plots`` extra); the train job's ``[output] plots`` checks."""

from __future__ import annotations

import sys

import pytest

from sparklda import plots
from sparklda.cli import train
from sparklda.cli.config import ConfigError, load_config
from sparklda.errors import MissingExtraError, SparkLDAError
from tests.helpers import write_config

PNG = b"\x89PNG\r\n\x1a\n"
EVALS = [
    {
        "round": r,
        "passes": r / 3,
        "elapsed_s": 0.4 * r,
        "heldout_loglik": -9 + 1 / r,
        "perplexity": 2000.0 / r,
    }
    for r in range(1, 7)
]


def _is_png(path) -> bool:
    with open(path, "rb") as f:
        return f.read(8) == PNG


def test_convergence_plot_is_written(tmp_path):
    path = plots.save_convergence_plot(EVALS, str(tmp_path / "sub" / "convergence.png"), "scvb0")
    assert _is_png(path)
    fig = plots.convergence_figure(EVALS, "scvb0 K=8")
    by_time, by_pass = fig.axes[:2]
    assert list(by_time.lines[0].get_xdata()) == pytest.approx([e["elapsed_s"] for e in EVALS])
    assert list(by_pass.lines[0].get_ydata()) == pytest.approx([e["heldout_loglik"] for e in EVALS])
    assert "final -8.8333" in fig._suptitle.get_text()


def test_convergence_plot_needs_evaluations():
    with pytest.raises(SparkLDAError, match="No held-out evaluation to plot"):
        plots.convergence_figure([])


def test_topic_terms_figure(tmp_path):
    topics = [
        {
            "topic": t,
            "termIndices": [0, 1, 2],
            "termWeights": [0.5, 0.3, 0.2],
            "terms": [f"w{t}a", f"w{t}b", f"w{t}c"],
        }
        for t in range(5)
    ]
    fig = plots.topic_terms_figure(topics, n_topics=3, n_terms=3)
    shown = [ax for ax in fig.axes if ax.get_visible()]
    assert [ax.get_title() for ax in shown] == ["topic 0", "topic 1", "topic 2"]
    # the top term on top
    labels = {t.get_position()[1]: t.get_text() for t in shown[1].get_yticklabels()}
    assert [labels[y] for y in sorted(labels, reverse=True)] == ["w1a", "w1b", "w1c"]
    assert _is_png(plots.save_figure(fig, str(tmp_path / "topics.png")))
    assert plots.png_bytes(fig).startswith(PNG)


def test_plots_without_matplotlib_say_which_extra(tmp_path, monkeypatch):
    for name in list(sys.modules):
        if name == "matplotlib" or name.startswith("matplotlib."):
            monkeypatch.setitem(sys.modules, name, None)
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    with pytest.raises(MissingExtraError, match=r"pip install 'sparklda\[plots\]'"):
        plots.convergence_figure(EVALS)
    cfg = load_config(write_config(tmp_path, extra="plots = true"))
    with pytest.raises(MissingExtraError, match=r"output.plots = true.*sparklda\[plots\]"):
        train.check(cfg)


def test_job_plots_need_heldout_documents(tmp_path):
    cfg = load_config(write_config(tmp_path, extra="plots = true"), ["evaluation.heldout_count=0"])
    with pytest.raises(ConfigError, match="output.plots = true draws held-out quality"):
        train.check(cfg)
    assert train.check(load_config(write_config(tmp_path, extra="plots = true"))).plots
