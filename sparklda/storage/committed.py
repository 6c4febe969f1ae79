"""Committed directories: models, checkpoints and pipelines saved so that a reader always
finds one complete save, whatever crashed and whoever else wrote at the same time.

Layout of a committed directory ``P`` (docs/architecture.md, "Saved directories")::

    P/v<seq>-<id>/...      the payload of one save (any files); seq six digits
    P/commits/<seq>/       the commit record of sequence number seq: one JSON line
                           naming its version, written last

(Directories saved by earlier sparklda name the record ``P/commits/v<seq>-<id>/``;
both are read, and the next save replaces them.)

One operation writes it, :meth:`CommittedDir.write`::

    with CommittedDir(path, kind, spark).write(info, overwrite=False) as staged:
        write the payload below staged.path

It checks the target, takes the next sequence number, lets the caller write
the new version, and then publishes the commit record with one exclusive step
(:meth:`SparkFiles.publish_json`: a rename onto ``commits/<seq>``) and reads
it back: the writer whose record is there won. A writer that lost (another
save took the same sequence number, or a newer one is committed) removes its
version and raises :class:`~sparklda.errors.ConcurrentWriteError`; one whose
payload failed removes its version and re-raises. The winner then deletes
older records and versions, versions that can no longer be committed (a
crashed or losing save's at its sequence number or below) and the write
probes a killed save left; never a version with a higher sequence number,
which another writer may be writing. A reader takes the committed record with
the highest sequence number (of its kind), so a crash or a race at any moment
leaves ``P`` holding the previous complete save or a new complete one.
"""

from __future__ import annotations

import datetime as _dt
import json
import logging
import re
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import ConcurrentWriteError, ModelExistsError, ModelFormatError, ModelPathError
from .files import PROBE_PREFIX, SparkFiles

log = logging.getLogger("sparklda.storage")

COMMITS = "commits"
_VERSION = re.compile(r"^v(\d{6})-[0-9a-f]{8}$")
_SLOT = re.compile(r"^(\d{6,})$")
_STAGING = re.compile(r"^_staging-(\d{6,})-")


def _seq_of(name: str) -> int | None:
    """The sequence number a version, a commit slot or a staged record is named with."""
    m = _VERSION.match(name) or _SLOT.match(name) or _STAGING.match(name)
    return int(m.group(1)) if m else None


@dataclass
class Commit:
    version: str
    seq: int
    kind: str
    created: str
    info: dict

    def path(self, root: str) -> str:
        return f"{root.rstrip('/')}/{self.version}"


@dataclass
class Staged:
    """What :meth:`CommittedDir.write` yields: the new version's directory ``path`` (write
    the payload below it), its name and sequence number, the commit it replaces, and,
    once the block has ended, its own :class:`Commit`."""

    path: str
    version: str
    seq: int
    previous: Commit | None
    commit: Commit | None = None


def _commit_from(record: Any, where: str) -> Commit:
    """A :class:`Commit` from a record read at ``where``; :class:`ModelFormatError` for
    anything that is not one (a version name must be sparklda's: it becomes a path)."""
    ok = (
        isinstance(record, dict)
        and isinstance(record.get("version"), str)
        and _VERSION.match(record["version"]) is not None
        and isinstance(record.get("seq"), int)
        and not isinstance(record.get("seq"), bool)
        and isinstance(record.get("kind", ""), str)
        and isinstance(record.get("info", {}), dict)
    )
    if not ok:
        shown = json.dumps(record)[:120]
        raise ModelFormatError(
            f"The commit record {where} is damaged: expected a JSON object with 'version' "
            f"(v<6 digits>-<8 hex digits>), 'seq' (an integer) and 'kind', got {shown}."
        )
    return Commit(
        record["version"],
        record["seq"],
        record.get("kind", ""),
        str(record.get("created", "")),
        record.get("info", {}),
    )


class CommittedDir:
    """A directory of versions with commit records (see the module docstring)."""

    def __init__(self, path: str, kind: str, spark=None):
        self.files = SparkFiles(spark)
        self.root = self.files.qualify(str(path)).rstrip("/")
        self.kind = kind
        self.given = str(path)
        # the commits as this object last read or wrote them: one writer (a save, a
        # training run's checkpoints) reads the directory once, not at every save
        self._known: list[Commit] | None = None
        self._top = -1  # the highest sequence number of any kind seen with _known

    # -- reading --------------------------------------------------------
    def _read(self, directory: str) -> list[Commit]:
        return [
            _commit_from(r, repr(f"{directory}/{rel}"))
            for rel, r in self.files.read_json_records(directory)
        ]

    def commits(self) -> list[Commit]:
        """The committed saves of this kind, oldest first (one per sequence number: where
        a file system without an exclusive rename let two records in, the smaller version
        name, which every reader picks alike)."""
        if self._known is not None:
            return list(self._known)
        records = self._read(f"{self.root}/{COMMITS}")
        self._top = max((c.seq for c in records), default=-1)
        by_seq: dict[int, Commit] = {}
        for c in records:
            if c.kind == self.kind and (c.seq not in by_seq or c.version < by_seq[c.seq].version):
                by_seq[c.seq] = c
        self._known = [by_seq[s] for s in sorted(by_seq)]
        return list(self._known)

    def latest(self) -> Commit | None:
        commits = self.commits()
        return commits[-1] if commits else None

    # -- writing --------------------------------------------------------
    def check_target(
        self,
        overwrite: bool,
        what: str = "model",
        legacy: tuple[str, ...] = (),
        is_ours=None,
        hint: str = "; pass overwrite=True to replace it.",
    ) -> Commit | None:
        """Before any work: refuse an existing ``what`` without ``overwrite``, a
        directory that is not a sparklda one (even with ``overwrite``), a path under a
        file or one that cannot be written. ``legacy`` names entries that mark an older
        layout of the same kind; ``is_ours(names)`` may recognise the directory too.
        Returns the latest commit, if any."""
        files = self.files
        if not files.exists(self.root):
            files.check_writable(self.root)
            self._known, self._top = [], -1  # nothing committed yet
            return None
        latest = self.latest()
        names = set(files.children(self.root))
        ours = (
            latest is not None
            or any(n in names for n in legacy)
            or (is_ours is not None and bool(is_ours(names)))
        )
        if not files.is_dir(self.root):
            raise ModelPathError(f"Cannot write the {what} at {self.given!r}: it is a file.")
        if ours and not overwrite:
            raise ModelExistsError(f"The {what} path {self.given!r} already exists{hint}")
        visible = {n for n in names if not n.startswith((".", "_"))}
        if not ours and visible:
            raise ModelPathError(
                f"{self.given!r} exists and is not a sparklda {what} (it holds "
                f"{sorted(visible)[:5]}); refusing to write into it. Choose "
                f"another path or remove it yourself."
            )
        files.check_writable(self.root)
        return latest

    @contextmanager
    def write(
        self,
        info: dict | None = None,
        *,
        overwrite: bool = False,
        what: str = "model",
        check: bool = True,
        extra: tuple[str, ...] = (),
        legacy: tuple[str, ...] = (),
        is_ours=None,
        hint: str = "; pass overwrite=True to replace it.",
    ) -> Iterator[Staged]:
        """Save one new version: check the target (:meth:`check_target` with ``overwrite``,
        ``what``, ``legacy``, ``is_ours``, ``hint``; ``check=False`` skips it for a writer
        that checked once before, like a run's checkpoints), yield a :class:`Staged`
        whose ``path`` the block writes the payload below, then commit it with ``info``
        in its record and delete what it supersedes (and the ``extra`` entries of the
        directory). The block raising removes the new version; losing to another writer
        removes it and raises :class:`~sparklda.errors.ConcurrentWriteError`."""
        if check:
            previous = self.check_target(overwrite, what, legacy, is_ours, hint)
        else:
            previous = self.latest()
        self.commits()
        seq = self._top + 1
        version = f"v{seq:06d}-{uuid.uuid4().hex[:8]}"
        staged = Staged(f"{self.root}/{version}", version, seq, previous)
        try:
            yield staged
        except BaseException as e:
            self._discard(version)
            if isinstance(e, Exception) and not isinstance(e, ConcurrentWriteError):
                if self._taken(seq):  # it failed because another writer won
                    raise self._lost(seq, what, overwrite) from e
            raise
        staged.commit = self._commit(staged, info or {}, what, overwrite)
        self.cleanup(staged.commit, extra)

    def _commit(self, staged: Staged, info: dict, what: str, overwrite: bool) -> Commit:
        created = _dt.datetime.now(_dt.UTC).isoformat()
        record = {
            "version": staged.version,
            "seq": staged.seq,
            "kind": self.kind,
            "created": created,
            "info": info,
        }
        slot = f"{self.root}/{COMMITS}/{staged.seq:06d}"
        staging = f"{self.root}/{COMMITS}/_staging-{staged.seq:06d}-{uuid.uuid4().hex[:8]}"
        try:
            self.files.publish_json(slot, record, staging)
            held = self._read(slot)
        except BaseException:
            self._discard(staged.version)
            raise
        if not held:
            self._discard(staged.version)
            raise ModelPathError(f"Could not write the commit record {slot!r}.")
        winner = min(held, key=lambda c: c.version)
        newer = [s for s in self._slot_seqs() if s > staged.seq]
        if winner.version != staged.version or newer:
            if winner.version == staged.version:  # committed, but a newer save is: withdraw
                self.files.delete(slot)
            self._discard(staged.version)
            self._known = None
            raise self._lost(staged.seq, what, overwrite)
        done = Commit(staged.version, staged.seq, self.kind, created, info)
        self._known, self._top = [done], staged.seq
        return done

    def _slot_seqs(self) -> list[int]:
        """The sequence numbers of the commit records present (of any kind)."""
        names = self.files.children(f"{self.root}/{COMMITS}")
        return [int(m.group(1)) for n in names if (m := _VERSION.match(n) or _SLOT.match(n))]

    def _taken(self, seq: int) -> bool:
        """Whether another writer committed at sequence number ``seq`` or later."""
        try:
            return any(s >= seq for s in self._slot_seqs())
        except Exception:  # pragma: no cover - the directory is gone: not a race we can see
            return False

    def _lost(self, seq: int, what: str, overwrite: bool) -> ConcurrentWriteError:
        again = "Save again to replace it" if overwrite else "Pass overwrite=True to replace it"
        return ConcurrentWriteError(
            f"Another save to {self.given!r} committed while this one was writing (commit "
            f"{seq} or later is another writer's): this {what} was not saved and its files "
            f"were removed; {self.given!r} holds the other save. {again}."
        )

    def _discard(self, version: str) -> None:
        """Remove this writer's own uncommitted version (best effort)."""
        try:
            self.files.delete(f"{self.root}/{version}")
        except Exception as e:  # pragma: no cover - the next save's cleanup removes it
            log.warning("could not remove %s/%s: %s", self.root, version, str(e)[:200])

    def write_pointer(self, name: str, record: dict) -> None:
        """Write the JSON record ``root/name`` unless it exists (pointers written once; two
        writers writing the same pointer at once both succeed)."""
        path = f"{self.root}/{name}"
        if self.files.exists(path):
            return
        try:
            self.files.write_json(path, record)
        except ModelPathError:
            if not self.files.exists(path):
                raise

    def cleanup(self, keep: Commit, extra: tuple[str, ...] = ()) -> None:
        """Delete what ``keep`` (this writer's commit) supersedes: commit records with a
        lower sequence number, versions with a lower one (committed, crashed or losing),
        other versions with the same one (their writers lost the commit: only where the
        commit step is exclusive, in a classic session, and ``keep`` still holds it), the
        write probes a killed save left (:meth:`SparkFiles.check_writable`) and the
        ``extra`` entries. Never anything with a higher sequence number."""
        files = self.files
        seq = keep.seq
        for name in files.children(f"{self.root}/{COMMITS}"):
            s = _seq_of(name)
            if s is not None and s < seq:
                files.delete(f"{self.root}/{COMMITS}/{name}")
        same = False
        if not files.connect:
            try:
                held = self._read(f"{self.root}/{COMMITS}/{seq:06d}")
                same = [c.version for c in held] == [keep.version]
            except ModelFormatError:
                same = False
        for name in files.children(self.root):
            s = _seq_of(name) if _VERSION.match(name) else None
            stale = s is not None and (s < seq or (s == seq and same and name != keep.version))
            if stale or name.startswith(PROBE_PREFIX) or name in extra:
                files.delete(f"{self.root}/{name}")
        self._known, self._top = [keep], max(self._top, seq)

    def remove(self) -> None:
        """Delete the whole directory."""
        self.files.delete(self.root)
        self._known, self._top = None, -1


def split_state(state: dict[str, Any], prefix: str = "") -> tuple[dict, dict[str, np.ndarray]]:
    """(JSON part, arrays by slash-joined key) of a nested dict of arrays and scalars."""
    scalars: dict[str, Any] = {}
    arrays: dict[str, np.ndarray] = {}
    for key, value in state.items():
        name = f"{prefix}{key}"
        if isinstance(value, np.ndarray):
            arrays[name] = value
        elif isinstance(value, dict):
            sub_scalars, sub_arrays = split_state(value, f"{name}/")
            scalars[key] = sub_scalars
            arrays.update(sub_arrays)
        else:
            scalars[key] = value.item() if isinstance(value, np.generic) else value
    return scalars, arrays


def join_state(scalars: dict[str, Any], arrays: dict[str, np.ndarray]) -> dict[str, Any]:
    """The inverse of :func:`split_state`."""
    out: dict[str, Any] = json.loads(json.dumps(scalars))
    for name, arr in arrays.items():
        *path, last = name.split("/")
        node = out
        for p in path:
            node = node.setdefault(p, {})
        node[last] = arr
    return out
