"""Learned priors: α and η as they stand, and when learning moves them
(docs/architecture.md, "Learned priors"); and the extra columns that carry a block's
prior statistics beside its topic-word rows.

A mode keeps one :class:`Priors` (``mode.priors``; ``mode.alpha`` and ``mode.eta`` read
and set it). Its update asks :meth:`Priors.learns` whether the burn-in is over, takes
its own step on α (each mode has its own: Minka's fixed point, online or per iteration,
or Hoffman's Newton step) and calls :meth:`Priors.learn_eta` with its topic-word
statistics; :meth:`Priors.report` is what the round record shows.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..kernels.priors import minka_eta
from ..params import TrainParams


class Priors:
    """α (a K-vector, float64) and η: the given priors, or the learned ones with
    ``optimize_alpha`` / ``optimize_eta``.

    ``waits``: whether learning waits for the burn-in passes (:meth:`burnin`)."""

    def __init__(self, params: TrainParams, waits: bool = True):
        self.params = params
        self.waits = waits
        self.alpha = np.full(params.k, float(params.alpha))
        self.eta = float(params.eta)

    def burnin(self) -> int:
        """Passes before a learned prior moves: the first quarter of the run, at least
        one pass. Until then the topics are close to their random start, and the fixed
        point read on them takes the random start's spread-out assignments for a large
        α or η, which the next rounds' assignments then inherit. 0 when learning does
        not wait."""
        if not self.waits:
            return 0
        return max(1, int(self.params.passes) // 4)

    def learns(self, pass_no: int) -> bool:
        """Whether an update in pass ``pass_no`` (from 0) moves the learned priors."""
        return pass_no >= self.burnin()

    def learn_eta(self, topic_word: np.ndarray, pass_no: int) -> None:
        """With ``optimize_eta``, after the burn-in: η from Minka's fixed point on the
        statistics ``topic_word``."""
        if self.params.optimize_eta and self.learns(pass_no):
            self.eta = minka_eta(topic_word, self.eta)

    def report(self) -> dict[str, Any]:
        """What a round record shows of learned priors."""
        out: dict[str, Any] = {}
        if self.params.optimize_alpha:
            out["alpha_sum"] = float(self.alpha.sum())
        if self.params.optimize_eta:
            out["eta"] = self.eta
        return out

    def state(self) -> dict[str, Any]:
        return {"alpha": self.alpha, "eta": self.eta}

    def restore(self, state: dict[str, Any]) -> None:
        if "alpha" in state:  # checkpoints written before learned priors have none
            self.alpha = np.array(state["alpha"], dtype=np.float64).reshape(self.params.k)
            self.eta = float(state["eta"])


def with_extras(rows: np.ndarray, extras: np.ndarray) -> np.ndarray:
    """``rows`` (U, W) with ``len(extras)`` more columns, float64: ``extras`` in the first
    row, zeros below. A block's small additive statistics (a learned prior's) travel
    this way beside its topic-word rows, so every executor merges them with the rows
    (a float64 sum in partition order) and the column sums of the merged extra columns
    are their totals (:func:`split_extras`). A block with no terms has no row to carry
    them; its documents are empty and add nothing to those statistics."""
    out = np.zeros((rows.shape[0], rows.shape[1] + len(extras)), dtype=np.float64)
    out[:, : rows.shape[1]] = rows
    if rows.shape[0]:
        out[0, rows.shape[1] :] = extras
    return out


def split_extras(rows: np.ndarray, width: int) -> tuple[np.ndarray, np.ndarray]:
    """(the first ``width`` columns, the column sums of the others) of merged rows."""
    return np.ascontiguousarray(rows[:, :width]), rows[:, width:].sum(axis=0)
