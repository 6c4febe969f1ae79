"""Resumable training: the driver's state, written atomically every few rounds.

A checkpoint is one committed version of the directory ``checkpoint_dir``
(:mod:`sparklda.storage`): ``state`` (JSON: the round reached, the run's
fingerprint, the mode's scalars, the training history), ``arrays`` (the
mode's arrays, bit for bit) and, for modes that keep a state per block
(CVB0, CVB), ``blocks`` (the executor's copy of those states). A killed run
resumes from the newest committed checkpoint and ends with the same model
as a run that was never interrupted (docs/architecture.md, "Checkpoints and
resume").
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import time
from typing import Any

from .errors import ModelFormatError, ModelPathError, ParamError, SparkLDAError
from .execution import backend_of
from .execution.topics import read_chunks
from .params import TrainParams
from .storage import CommittedDir, join_state, split_state

log = logging.getLogger("sparklda.checkpoint")

KIND = "sparklda.Checkpoint"
#: 2: the model's V×K state may be written by the executors holding it (``shards``,
#: named by ``sharded_state``); 1: every array in ``arrays``.
FORMAT_VERSION = 2

#: Parameters that may change between a run and its resumption: how long to train (and
#: when to stop early), how often to evaluate or checkpoint, where partials merge (the
#: same bits). Every other parameter must be the same.
RESUMABLE_CHANGES = frozenset(
    {
        "passes",
        "time_budget",
        "min_gain",
        "patience",
        "eval_every",
        "checkpoint_interval",
        "checkpoint_dir",
        "model_placement",  # the same model on the driver or the executors
        "checkpoint_seconds",
        "keep_checkpoint",
        "combine",
        "execution",
    }
)
#: The corpus facts a checkpoint is only valid for.
CORPUS_FACTS = (
    "documents_read",
    "training_documents",
    "training_tokens",
    "training_pairs",
    "heldout_documents",
    "vocab_size",
    "slices",
    "parts_per_slice",
)


#: Checksums of the corpus's content (the documents' ids, terms and counts) in a
#: fingerprint; a checkpoint written before they were recorded is compared without them.
CONTENT_FACTS = ("training_content", "heldout_content")


def _combine_digests(digests) -> str:
    """One checksum of a multiset of block digests (independent of partition order)."""
    h = hashlib.sha256()
    for d in sorted(digests):
        h.update(d.encode())
    return h.hexdigest()


def content_checksums(corpus) -> dict[str, str | None]:
    """Checksums of the training and held-out blocks' content (the backend's
    :meth:`~sparklda.execution.Backend.block_digests` of each block, combined), in one
    small job over the cached blocks each."""
    backend = backend_of(corpus)
    out: dict[str, str | None] = {}
    for key, blocks, heldout in (
        ("training_content", corpus.train, False),
        ("heldout_content", corpus.heldout, True),
    ):
        out[key] = (
            None if blocks is None else _combine_digests(backend.block_digests(blocks, heldout))
        )
    return out


def fingerprint(params: TrainParams, corpus) -> dict[str, Any]:
    """What a checkpoint must agree with to be resumed: the parameters (but those of
    :data:`RESUMABLE_CHANGES`), the corpus's counts and layout, and checksums of its
    content (:func:`content_checksums`: another corpus of the same shape differs there)."""
    p = {k: v for k, v in params.to_dict().items() if k not in RESUMABLE_CHANGES}
    c = {k: corpus.report.get(k) for k in CORPUS_FACTS}
    c.update(content_checksums(corpus))
    return {"params": p, "corpus": c}


#: Each parameter's default (those with a plain default), for checkpoints written before
#: a parameter existed (such as ``evaluator``).
_DEFAULTS = {
    f.name: f.default
    for f in dataclasses.fields(TrainParams)
    if f.default is not dataclasses.MISSING
}


def differences(saved: dict, current: dict) -> list[str]:
    out = []
    for part in ("params", "corpus"):
        a, b = saved.get(part, {}), current.get(part, {})
        for key in sorted(set(a) | set(b)):
            if part == "corpus" and key in CONTENT_FACTS and key not in a:
                continue  # a checkpoint from before content checksums were recorded
            if part == "params" and key not in a and _DEFAULTS.get(key, a) == b.get(key):
                continue  # a checkpoint from before the parameter, which ran as its default
            if a.get(key) != b.get(key):
                if key in CONTENT_FACTS:
                    what = "training" if key == "training_content" else "held-out"
                    out.append(
                        f"corpus content: the {what} documents' terms or counts differ "
                        f"(checksum {str(a.get(key))[:12]}, now {str(b.get(key))[:12]})"
                    )
                else:
                    out.append(f"{part} {key}: checkpoint {a.get(key)!r}, now {b.get(key)!r}")
    return out


class TrainingCheckpoints:
    """Writes and reads the checkpoints of one training run."""

    def __init__(self, params: TrainParams, corpus, spark=None):
        self.params = params
        self.fingerprint = fingerprint(params, corpus)
        self.dir = CommittedDir(params.checkpoint_dir, KIND, spark)
        self.last_time = time.perf_counter()
        self.saved = 0
        self.seconds = 0.0

    def check_target(self) -> None:
        """Before any work: the directory is usable (not a foreign directory)."""
        self.dir.check_target(True, "checkpoint", legacy=())

    def due(self, rounds_done: int, total_rounds: int) -> bool:
        p = self.params
        if rounds_done == total_rounds:
            return True
        if p.checkpoint_interval and rounds_done % p.checkpoint_interval == 0:
            return True
        return bool(
            p.checkpoint_seconds and time.perf_counter() - self.last_time >= p.checkpoint_seconds
        )

    def save(self, rounds_done: int, mode, executor, history: dict) -> None:
        t0 = time.perf_counter()
        files = self.dir.files
        info = {"round": rounds_done}
        with self.dir.write(info, overwrite=True, what="checkpoint", check=False) as staged:
            base = staged.path
            sharded = mode.sharded_key if mode.state_on_executors() else None
            scalars, arrays = split_state(mode.state())
            files.write_arrays(f"{base}/arrays", arrays)
            if sharded:  # the V×K state, written by the executors holding it
                executor.save_shards(f"{base}/shards")
            pass_sums = bool(sharded) and mode.priors.pass_sums_live  # a learned η's, mid-pass
            if pass_sums:
                executor.save_pass_sums(f"{base}/eta_pass")
            if mode.stateful:
                executor.save_states(f"{base}/blocks")
            files.write_json(
                f"{base}/state",
                {
                    "format_version": FORMAT_VERSION if sharded else 1,
                    "sharded_state": sharded,
                    "sharded_eta_pass": pass_sums,
                    "round": rounds_done,
                    "mode": mode.name,
                    "fingerprint": self.fingerprint,
                    "scalars": scalars,
                    "history": history,
                },
            )
        self.last_time = time.perf_counter()
        self.saved += 1
        self.seconds += self.last_time - t0
        log.info(
            "checkpoint after round %d written to %s (%.2f s)",
            rounds_done,
            base,
            self.last_time - t0,
        )

    def restore(self, mode, executor) -> tuple[int, dict] | None:
        """Load the newest checkpoint into ``mode`` (and the executor's block states);
        (rounds done, history), or None when there is none. A checkpoint of another
        run is refused with what differs; one that cannot be read (damaged, cut short,
        not a checkpoint) is a :class:`ModelPathError` naming the directory."""
        try:
            return self._restore(mode, executor)
        except ModelPathError as e:  # a file of it cannot be read, or is not what it should be
            raise type(e)(
                f"The checkpoint in {self.params.checkpoint_dir!r} cannot be read: {e} "
                f"Delete that directory to train from the start, or name another "
                f"checkpoint directory."
            ) from e
        except SparkLDAError:
            raise
        except Exception as e:
            lines = [x.strip() for x in str(e).splitlines() if x.strip()]
            why = f"{type(e).__name__}: {lines[0] if lines else ''}"[:300]
            raise ModelPathError(
                f"The checkpoint in {self.params.checkpoint_dir!r} cannot be read ({why}); "
                f"it is damaged or not a sparklda checkpoint. Delete that directory to "
                f"train from the start, or name another checkpoint directory."
            ) from e

    def _restore(self, mode, executor) -> tuple[int, dict] | None:
        latest = self.dir.latest()
        if latest is None:
            return None
        files = self.dir.files
        base = latest.path(self.dir.root)
        saved = files.read_json(f"{base}/state")
        fields = (("fingerprint", dict), ("round", int), ("scalars", dict))
        if not isinstance(saved, dict) or any(
            not isinstance(saved.get(key), kind) for key, kind in fields
        ):
            raise ModelFormatError(
                f"The checkpoint {base!r} in {self.params.checkpoint_dir!r} is damaged: its "
                f"state record lacks 'fingerprint', 'round' or 'scalars'. Remove the "
                f"directory (or use another checkpoint.dir) to train from the start."
            )
        if not isinstance(saved.get("format_version", 0), int):
            raise ModelFormatError(
                f"The checkpoint {base!r} is damaged: format_version "
                f"{saved.get('format_version')!r} is not an integer."
            )
        version = saved["format_version"] if "format_version" in saved else 0
        if version > FORMAT_VERSION:
            raise ParamError(
                f"The checkpoint in {self.params.checkpoint_dir!r} has format "
                f"version {version!r}; this sparklda reads up to "
                f"{FORMAT_VERSION}."
            )
        diff = differences(saved["fingerprint"], self.fingerprint)
        if diff:
            raise ParamError(
                f"Cannot resume from the checkpoint in "
                f"{self.params.checkpoint_dir!r}: it belongs to another run ("
                + "; ".join(diff)
                + ")."
            )
        state = join_state(saved["scalars"], files.read_arrays(f"{base}/arrays"))
        key = saved.get("sharded_state")
        if key is not None and key != mode.sharded_key:
            raise ModelFormatError(
                f"The checkpoint {base!r} is damaged: its state names {key!r} as the "
                f"sharded state; the {mode.name} mode's is {mode.sharded_key!r}."
            )
        if key:
            state[key] = self._read_shards(mode, executor, f"{base}/shards")
        if saved.get("sharded_eta_pass"):  # the pass's sums for a learned η, mid-pass
            state["eta_pass"] = self._read_shards(mode, executor, f"{base}/eta_pass")
        mode.restore(state)
        if mode.stateful:
            executor.load_states(mode, f"{base}/blocks")
        log.info("resuming %s after round %d from %s", mode.name, saved["round"], base)
        return int(saved["round"]), saved.get("history", {})

    def _read_shards(self, mode, executor, path: str):
        """A checkpoint's sharded state: cut into the executor's shards when the executors
        hold the model, else the array (the driver placement holds it anyway)."""
        v, k = int(mode.corpus.vocab_size), int(self.params.k)
        if getattr(mode, "sharded", False) and hasattr(executor, "load_shards"):
            return executor.load_shards(path, k)
        shards = read_chunks(self.dir.files.spark, path, v, k, 1)
        try:
            return shards.collect(shards.nbytes)
        finally:
            shards.unpersist()

    def remove(self) -> None:
        """Delete the checkpoints (``keep_checkpoint=False`` after success)."""
        self.dir.remove()

    def report(self) -> dict:
        return {
            "checkpoint_dir": self.params.checkpoint_dir,
            "checkpoints_written": self.saved,
            "checkpoint_seconds_total": self.seconds,
        }
