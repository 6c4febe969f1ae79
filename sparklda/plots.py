"""Charts of a training run: held-out quality per round and the top terms of topics.

Optional: needs ``matplotlib`` (``pip install 'sparklda[plots]'``), imported only when a chart
is drawn (:func:`sparklda.extras.require` names the extra when it is missing). The figures are
``matplotlib.figure.Figure`` objects drawn without ``pyplot``, so nothing here touches
matplotlib's global state or needs a display: the train job (``[output] plots = true``)
writes :func:`save_convergence_plot`'s PNG beside the model, a notebook shows the figures
inline. No Spark here: the inputs are the plain records of a
:class:`sparklda.training.TrainResult` (``evaluations``) and ``TopicModel.describe_topics``.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from .errors import SparkLDAError
from .extras import require

#: The file name of the train job's convergence plot, beside the model directory.
CONVERGENCE_PNG = "convergence.png"


def _figure(width: float, height: float, what: str):
    """A ``Figure`` with an Agg canvas attached (PNG output, no display needed)."""
    require("matplotlib", what)
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def convergence_figure(evaluations: Sequence[dict], title: str | None = None):
    """Held-out log-likelihood per token against training seconds and against passes, one
    point per evaluation (``TrainResult.evaluations``: ``elapsed_s``, ``passes``,
    ``heldout_loglik``). Raises :class:`SparkLDAError` when there is no evaluation."""
    rows = [e for e in evaluations if e.get("heldout_loglik") is not None]
    if not rows:
        raise SparkLDAError(
            "No held-out evaluation to plot: train with held-out documents "
            "(heldout_fraction or heldout_count > 0) to draw the convergence plot."
        )
    fig = _figure(9.0, 3.6, "the convergence plot ([output] plots)")
    by_time, by_pass = fig.subplots(1, 2, sharey=True)
    loglik = [float(e["heldout_loglik"]) for e in rows]
    by_time.plot([float(e.get("elapsed_s", 0.0)) for e in rows], loglik, marker="o")
    by_time.set_xlabel("seconds since fit started (evaluation excluded)")
    by_time.set_ylabel("held-out log-likelihood per token")
    by_pass.plot([float(e["passes"]) for e in rows], loglik, marker="o")
    by_pass.set_xlabel("passes over the training documents")
    for ax in (by_time, by_pass):
        ax.grid(True, alpha=0.3)
    last = rows[-1]
    note = f"final {loglik[-1]:.4f}"
    if last.get("perplexity") is not None:
        note += f" (perplexity {float(last['perplexity']):.1f})"
    fig.suptitle(f"{title}: {note}" if title else note)
    return fig


def topic_terms_figure(topics: Sequence[dict], n_topics: int = 4, n_terms: int = 8):
    """Bar charts of the top ``n_terms`` terms of the first ``n_topics`` topics, from
    ``TopicModel.describe_topics`` (``topic``, ``termIndices``, ``termWeights`` and, with a
    vocabulary, ``terms``)."""
    shown = list(topics)[:n_topics]
    if not shown:
        raise SparkLDAError("topic_terms_figure: no topics to draw (describe_topics was empty).")
    cols = min(len(shown), 4)
    rows = (len(shown) + cols - 1) // cols
    fig = _figure(3.0 * cols, 0.35 * n_terms * rows + 0.8, "topic_terms_figure")
    axes = fig.subplots(rows, cols, squeeze=False)
    for ax, t in zip(axes.ravel(), shown, strict=False):
        weights = [float(w) for w in t["termWeights"][:n_terms]]
        terms = t.get("terms") or [str(i) for i in t["termIndices"]]
        names = [str(s) for s in terms[:n_terms]]
        ax.barh(range(len(weights))[::-1], weights)
        ax.set_yticks(range(len(weights))[::-1], names)
        ax.set_title(f"topic {t['topic']}")
        ax.tick_params(axis="x", labelsize=7)
    for ax in axes.ravel()[len(shown) :]:
        ax.set_visible(False)
    return fig


def save_figure(fig, path: str, dpi: int = 110) -> str:
    """Write ``fig`` as a PNG at ``path`` (a local path; its folder is made); returns it."""
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    fig.savefig(path, dpi=dpi, format="png")
    return path


def png_bytes(fig, dpi: int = 110) -> bytes:
    """``fig`` as PNG bytes (e.g. ``IPython.display.Image(png_bytes(fig))`` in a notebook)."""
    import io

    out = io.BytesIO()
    fig.savefig(out, dpi=dpi, format="png")
    return out.getvalue()


def save_convergence_plot(evaluations: Sequence[dict], path: str, title: str | None = None) -> str:
    """:func:`convergence_figure` written as a PNG at ``path``; returns ``path``."""
    return save_figure(convergence_figure(evaluations, title), path)
