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

from collections.abc import Callable
from typing import Any

import numpy as np

from ..execution.learned_eta import sharded_minka_eta
from ..execution.topics import ShardedTopics
from ..kernels.priors import keep_total, minka_alpha_step, minka_eta
from ..params import TrainParams

#: The online modes' η moves by at most this factor a pass (:meth:`Priors.learn_eta_pass`).
ETA_PASS_FACTOR = 2.0


class Priors:
    """α (a K-vector, float64) and η: the given priors, or the learned ones with
    ``optimize_alpha`` / ``optimize_eta``.

    ``waits``: whether learning waits for the burn-in passes (:meth:`burnin`)."""

    def __init__(self, params: TrainParams, waits: bool = True):
        self.params = params
        self.waits = waits
        self.alpha = np.full(params.k, float(params.alpha))
        self.eta = float(params.eta)
        #: the pass's expected topic-word counts for η (:meth:`learn_eta_pass`), (V, K);
        #: with the model on the executors they live in its shards
        #: (:meth:`learn_eta_pass_shards`) and this holds a restored sum until the
        #: executor shards it (an array, or a checkpoint's shards)
        self.eta_pass: np.ndarray | ShardedTopics | None = None
        #: the model's shards hold a pass's partial sum (a checkpoint writes it)
        self.pass_sums_live = False

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

    def minka_step(self, extras: np.ndarray | None, pass_no: int) -> None:
        """One fixed-point step of α from a batch iteration's summed document statistics
        (``extras``: the K numerators, then the denominator; :func:`split_extras`), once
        learning has started; α's total stays put unless ``optimize_alpha_sum``."""
        if extras is None or not self.learns(pass_no):
            return
        k = self.params.k
        self.alpha = minka_alpha_step(self.alpha, extras[:k], float(extras[k]))
        if not self.params.optimize_alpha_sum:
            self.alpha = keep_total(self.alpha, k * self.params.alpha)

    def learn_eta(
        self, topic_word: np.ndarray | ShardedTopics, pass_no: int, expected: bool = True
    ) -> None:
        """With ``optimize_eta``, after the burn-in: η from Minka's fixed point on the
        statistics ``topic_word``: expected counts (``expected``, the collapsed
        variational modes' sums of assignment probabilities) or whole counts (a Gibbs
        sample's, for which the fixed point was derived; :func:`minka_eta`), read where
        they live when the executors hold them (:func:`sharded_minka_eta`)."""
        if self.params.optimize_eta and self.learns(pass_no):
            if isinstance(topic_word, ShardedTopics):
                self.eta = sharded_minka_eta(topic_word, self.eta, expected=expected)
            else:
                self.eta = minka_eta(topic_word, self.eta, expected=expected)

    def learn_eta_pass(
        self, vocab_size: int, terms: np.ndarray, rows: np.ndarray, pass_no: int, pass_end: bool
    ) -> None:
        """With ``optimize_eta``, for the online modes (SCVB0, SVB): add a round's
        statistics (``rows`` of the terms ``terms``: the round's documents' expected counts
        Σ m·γ, unscaled) to pass ``pass_no``'s sum; at the pass's end, after the burn-in
        (:meth:`eta_pass_burnin`), move η towards Minka's fixed point on that sum by at
        most a factor :data:`ETA_PASS_FACTOR` (V·K digammas a pass), and start the next
        pass's sum.

        Not from the mode's topic-word estimate: SCVB0's N^Φ and SVB's λ − η are online
        averages that mix the passes' assignments (a word that moved between topics has
        mass in both) with the random start's mass spread over every (term, topic) cell,
        which the fixed point reads as words used by many topics, so η came out several
        times CVB0's on the same corpus and held-out quality fell. One pass's sum, each
        document counted once, is the statistic CVB0 reads (docs/architecture.md,
        "Learned priors")."""
        if not self.params.optimize_eta:
            return
        k = self.params.k
        if not isinstance(self.eta_pass, np.ndarray):
            self.eta_pass = np.zeros((vocab_size, k), dtype=np.float64)
        if len(terms):
            self.eta_pass[terms] += rows[:, :k]
        if pass_end:
            if pass_no >= self.eta_pass_burnin():
                self._damped(minka_eta(self.eta_pass, self.eta))
            self.eta_pass[:] = 0.0

    def learn_eta_pass_shards(
        self, sums: Callable[[], ShardedTopics] | None, pass_no: int, pass_end: bool
    ) -> None:
        """:meth:`learn_eta_pass` with the pass's sum held in the model's shards
        (``sums()``; the shards add each round's rows to it and zero it at a pass's
        first round, :func:`~sparklda.execution.learned_eta.pass_sums_step`): at the
        pass's end, after the burn-in, η moves towards Minka's fixed point on it, read
        where it lives (:func:`sharded_minka_eta`)."""
        if not self.params.optimize_eta:
            return
        self.pass_sums_live = not pass_end  # spent at the pass's end (zeroed next round)
        if pass_end and pass_no >= self.eta_pass_burnin():
            if sums is None:
                raise RuntimeError("η's pass sums are on the executors and none holds them")
            self._damped(sharded_minka_eta(sums(), self.eta))

    def _damped(self, target: float) -> None:
        """η moved towards ``target`` by at most a factor ETA_PASS_FACTOR, either way."""
        self.eta = float(np.clip(target, self.eta / ETA_PASS_FACTOR, self.eta * ETA_PASS_FACTOR))

    def eta_pass_burnin(self) -> int:
        """Passes before the online modes' η moves (:meth:`learn_eta_pass`): the first half
        of the run, at least one pass, whether or not α waits (SVB's α does not). A
        pass's counts are read from assignments made with the topics of the pass before,
        which in the first passes still hold much of the random start (SCVB0's N^Φ, SVB's
        λ), spread over every cell: the fixed point reads them as a larger η, and the
        larger η spreads the next pass's assignments further. For the same reason a
        pass moves η by at most a factor :data:`ETA_PASS_FACTOR`: the fixed point's η
        falls pass after pass as the topics sharpen, and an η that jumped to the first
        reading stays too large for the few passes these modes run."""
        return max(1, int(self.params.passes) // 2)

    def report(self) -> dict[str, Any]:
        """What a round record shows of learned priors."""
        out: dict[str, Any] = {}
        if self.params.optimize_alpha:
            out["alpha_sum"] = float(self.alpha.sum())
        if self.params.optimize_eta:
            out["eta"] = self.eta
        return out

    def summary(self) -> dict[str, Any]:
        """The priors at the end of training, for the fit's report: α per topic (a list of
        K values: the learned one with ``optimize_alpha``), η, and which were learned."""
        return {
            "alpha": [float(x) for x in self.alpha],
            "eta": float(self.eta),
            "learned_alpha": bool(self.params.optimize_alpha),
            "learned_eta": bool(self.params.optimize_eta),
        }

    def state(self) -> dict[str, Any]:
        out: dict[str, Any] = {"alpha": self.alpha, "eta": self.eta}
        if isinstance(self.eta_pass, np.ndarray):
            out["eta_pass"] = self.eta_pass
        return out

    def restore(self, state: dict[str, Any]) -> None:
        if "alpha" in state:  # checkpoints written before learned priors have none
            self.alpha = np.array(state["alpha"], dtype=np.float64).reshape(self.params.k)
            self.eta = float(state["eta"])
        held = state.get("eta_pass")
        if isinstance(held, ShardedTopics):  # a checkpoint's shards, for the executors
            self.eta_pass = held
        elif held is not None:  # a pass's sum mid-pass (optimize_eta)
            self.eta_pass = np.array(held, dtype=np.float64)


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
