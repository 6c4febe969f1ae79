"""Live progress of corpus building and training: a training Callback.

:class:`Progress` shows one updating line (``rich``) when its stream is a
terminal, and plain lines (one when corpus building starts and ends, one per
round, one at the end) when it is not, for example in a log file or under a
scheduler. In a Jupyter notebook with ipywidgets it shows a ``tqdm`` widget. The jobs use
it by default (on stderr); library users pass it to
:func:`sparklda.api.fit` (``callbacks=[Progress()]``).

What it shows: while the corpus is built, its phases (documents read and
validated, held-out documents chosen, training blocks cached, each with its
counts as they become known: :data:`sparklda.corpus.BUILD_PHASES`) and the
Spark tasks done in the running stages (classic sessions; Spark Connect has no
status tracker), then the documents read, kept for training, held out and
cached; while training, the
rounds and passes done, tokens per second, the latest held-out
log-likelihood per token and the estimated time left.
"""

from __future__ import annotations

import sys
import threading
import time
from typing import TextIO

from .training import Callback, TrainResult

#: Seconds between two looks at Spark's status tracker while the corpus is built.
POLL_SECONDS = 0.5


def _seconds(s: float) -> str:
    s = max(0, round(s))
    if s >= 3600:
        return f"{s // 3600}h{s % 3600 // 60:02d}m"
    if s >= 60:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s}s"


def in_notebook() -> bool:
    """Whether this runs in a Jupyter kernel (IPython's ZMQ shell) that can show widgets
    (ipywidgets installed: tqdm's notebook bar needs it)."""
    shell = sys.modules.get("IPython")
    if shell is None:
        return False
    ip = shell.get_ipython() if hasattr(shell, "get_ipython") else None
    if ip is None or type(ip).__name__ != "ZMQInteractiveShell":
        return False
    try:
        import ipywidgets  # noqa: F401
    except ImportError:
        return False
    return True


def _phase_text(phase: str, c: dict) -> str | None:
    """What the progress shows of a corpus-building phase (None: nothing)."""
    if phase == "reading":
        return "reading and validating the documents"
    if phase == "validated":
        return (
            f"{c['documents']} documents read and validated "
            f"({c['tokens']:.0f} tokens, {c['empty_documents']} empty)"
        )
    if phase == "splitting":
        return "choosing the held-out documents"
    if phase == "caching":
        return f"caching the blocks of {c['training_documents']} training documents"
    if phase == "cached":
        return (
            f"{c['training_documents']} training documents cached "
            f"({c['cached_bytes'] / 2**20:.1f} MiB), {c['heldout_documents']} held out"
        )
    return None


class Progress(Callback):
    """Progress of :func:`sparklda.api.fit` on ``stream`` (default: stderr).

    ``mode``: ``"auto"`` (a live line when ``stream`` is a terminal, a widget in a
    Jupyter notebook, plain lines otherwise), ``"live"``, ``"plain"`` or
    ``"notebook"``. ``console``: a ``rich.console.Console`` to draw the live line
    on (tests pass one with ``force_terminal=True``).
    """

    def __init__(self, stream: TextIO | None = None, mode: str = "auto", console=None):
        if mode not in ("auto", "live", "plain", "notebook"):
            raise ValueError(
                f"Progress mode must be 'auto', 'live', 'plain' or 'notebook'; got {mode!r}."
            )
        self.stream = stream
        if mode == "auto":
            if console is not None:
                mode = "live"
            elif stream is None and in_notebook():
                mode = "notebook"
            else:
                target = stream if stream is not None else sys.stderr
                isatty = getattr(target, "isatty", None)
                mode = "live" if isatty is not None and isatty() else "plain"
        self.mode = mode
        self.console = console
        self._bar = None  # rich Progress or tqdm
        self._task = None
        self._plan: dict = {}
        self._start = time.perf_counter()
        self._train_start = self._start
        self._heldout: float | None = None
        self._rounds_done = 0
        self._poller: threading.Thread | None = None
        self._polling = threading.Event()

    # -- output ------------------------------------------------------------
    def _out(self) -> TextIO:
        return self.stream if self.stream is not None else sys.stderr

    def _line(self, text: str) -> None:
        out = self._out()
        out.write(text + "\n")
        out.flush()

    def _live_start(self, description: str, total: float | None) -> None:
        self._live_stop()
        if self.mode == "notebook":
            from tqdm.notebook import tqdm

            self._bar = tqdm(total=total, desc=description, leave=True)
            return
        from rich.console import Console
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            SpinnerColumn,
            TextColumn,
            TimeElapsedColumn,
        )
        from rich.progress import Progress as RichProgress

        if self.console is None:
            self.console = Console(file=self._out())
        console = self.console
        bar = RichProgress(
            SpinnerColumn(),
            TextColumn("{task.description}"),
            BarColumn(bar_width=20),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TextColumn("{task.fields[info]}"),
            console=console,
            transient=False,
        )
        bar.start()
        self._task = bar.add_task(description, total=total, info="")
        self._bar = bar

    def _live_update(self, description: str | None = None, completed=None, info=None) -> None:
        bar = self._bar
        if bar is None:
            return
        if self.mode == "notebook":
            if description is not None:
                bar.set_description_str(description, refresh=False)
            if info is not None:
                bar.set_postfix_str(info, refresh=False)
            if completed is not None:
                bar.n = completed
            bar.refresh()
            return
        kw = {}
        if description is not None:
            kw["description"] = description
        if completed is not None:
            kw["completed"] = completed
        if info is not None:
            kw["info"] = info
        bar.update(self._task, **kw)

    def _live_stop(self) -> None:
        if self._bar is not None:
            if self.mode == "notebook":
                self._bar.close()
            else:
                self._bar.stop()
            self._bar = None

    # -- corpus building ---------------------------------------------------
    def on_build_start(self, what: str) -> None:
        self._start = time.perf_counter()
        if self.mode == "plain":
            self._line(f"building the corpus from {what}")
            return
        self._live_start(f"reading and caching {what}", None)
        self._start_polling()

    def on_build_phase(self, phase: str, counts: dict) -> None:
        text = _phase_text(phase, counts)
        if text is None:
            return
        elapsed = _seconds(time.perf_counter() - self._start)
        if self.mode == "plain":
            self._line(f"{text} ({elapsed})")
        else:
            self._live_update(description=text)

    def _start_polling(self) -> None:
        try:
            from pyspark import SparkContext

            sc = SparkContext._active_spark_context
        except ImportError:  # pragma: no cover - pyspark is a dependency
            sc = None
        if sc is None:  # Spark Connect: no status tracker
            return
        tracker = sc.statusTracker()
        self._polling.set()

        def poll():
            while self._polling.is_set():
                done = total = 0
                for sid in tracker.getActiveStageIds():
                    info = tracker.getStageInfo(sid)
                    if info is not None:
                        done += info.numCompletedTasks
                        total += info.numTasks
                if total and self._polling.is_set():
                    self._live_update(info=f"Spark tasks {done}/{total}")
                time.sleep(POLL_SECONDS)

        self._poller = threading.Thread(target=poll, name="sparklda-progress", daemon=True)
        self._poller.start()

    def _stop_polling(self) -> None:
        self._polling.clear()
        if self._poller is not None:
            self._poller.join(timeout=2 * POLL_SECONDS)
            self._poller = None

    def on_corpus(self, corpus) -> None:
        self._stop_polling()
        r = corpus.report
        text = (
            f"corpus: {r['documents_read']} documents read, {r['training_documents']} to "
            f"train on, {r['heldout_documents']} held out, {r['empty_documents_skipped']} "
            f"empty skipped, {r['cached_bytes'] / 2**20:.1f} MiB cached in "
            f"{_seconds(time.perf_counter() - self._start)}"
        )
        self._live_stop()
        self._print(text)

    def _print(self, text: str) -> None:
        """A line that stays: printed plainly, or by the live line's console."""
        if self.mode == "live" and self.console is not None:
            self.console.print(text, highlight=False, soft_wrap=True)
        else:
            self._line(text)

    # -- training ----------------------------------------------------------
    def on_train_start(self, plan: dict) -> None:
        self._plan = dict(plan)
        self._train_start = time.perf_counter()
        self._rounds_done = 0
        if self.mode == "plain":
            self._line(
                f"training {plan['algorithm']} K={plan['k']}: {plan['total_rounds']} rounds "
                f"({plan['rounds_per_pass']} per pass)"
            )
            return
        self._live_start(f"training {plan['algorithm']} K={plan['k']}", plan["total_rounds"])
        self._live_update(completed=plan.get("first_round", 0))

    def eta(self, round_: int) -> float | None:
        """Seconds left at ``round_`` done: the mean round time so far times the rounds
        left (capped by the time budget)."""
        total = self._plan.get("total_rounds")
        if not total or self._rounds_done == 0:
            return None
        per_round = (time.perf_counter() - self._train_start) / self._rounds_done
        left = per_round * (total - round_)
        budget = self._plan.get("time_budget") or 0.0
        if 0 < budget < float("inf"):
            left = min(left, max(0.0, budget - (time.perf_counter() - self._start)))
        return left

    def _round_text(self, record: dict) -> str:
        total = self._plan.get("total_rounds", "?")
        parts = [
            f"round {record['round']}/{total}",
            f"{record['passes']:.2f} passes",
            f"{record.get('tokens_per_s', 0.0):.0f} tokens/s",
        ]
        if "rho" in record:
            parts.append(f"step {record['rho']:.4g}")
        if self._heldout is not None:
            parts.append(f"held-out {self._heldout:.4f}")
        eta = self.eta(record["round"])
        if eta is not None:
            parts.append(f"ETA {_seconds(eta)}")
        return ", ".join(parts)

    def on_evaluation(self, record: dict) -> None:
        self._heldout = float(record["heldout_loglik"])

    def on_round(self, record: dict) -> None:
        self._rounds_done += 1
        text = self._round_text(record)
        if self.mode == "plain":
            self._line(text)
        else:
            info = text.split(", ", 1)[1] if ", " in text else text
            self._live_update(completed=record["round"], info=info)

    def on_train_end(self, result: TrainResult | None) -> None:
        self._stop_polling()
        self._live_stop()
        if result is None:
            return
        rep = result.report
        text = f"trained {rep['rounds']} rounds in {_seconds(rep['train_seconds'])}"
        if rep.get("stopped_by"):
            text += f", stopped by {rep['stopped_by']}"
        if result.evaluations:
            text += f", held-out log-likelihood {result.evaluations[-1]['heldout_loglik']:.4f}"
        self._print(text)
