"""Directories written through Spark, committed atomically: models, checkpoints, output.

Everything goes through the session's own readers and writers, so any URI
Spark can open works (``file:``, ``hdfs:``, ``s3a:``, ``abfss:``, ``gs:``,
``dbfs:``), and nothing needs a JVM gateway: the same code runs under Spark
Connect. A classic session also uses Hadoop's ``FileSystem`` to delete
superseded versions, to rename, to tell files from directories and to write
and read the small JSON records (metadata, commit records) without a Spark job.

Layout of a committed directory ``P`` (docs/architecture.md, "Saved
directories")::

    P/<version>/...            the payload of one save (any files)
    P/commits/<version>/       its commit record: one JSON line, written last

A save writes a new ``<version>`` and then its commit record; a reader
takes the committed version with the highest sequence number. A crash at
any moment therefore leaves ``P`` holding either the previous complete
version or the new complete one. After the commit, older versions, their
records and versions that were never committed (a crashed save's) are
deleted (under Spark Connect through the server's ML helper; a server
without it leaves them in place, and readers ignore them).
"""

from __future__ import annotations

import datetime as _dt
import io
import json
import logging
import re
import uuid
from dataclasses import dataclass
from typing import Any

import numpy as np

from .errors import ModelExistsError, ModelPathError

log = logging.getLogger("sparklda.storage")

COMMITS = "commits"


def active_session(spark=None):
    """``spark``, or the active session (classic or Connect); an error names what is missing."""
    if spark is not None:
        return spark
    from pyspark.sql import SparkSession

    try:
        return SparkSession.active()
    except Exception as e:
        raise ModelPathError(
            "Saving and loading go through Spark: start a SparkSession first "
            f"(no active session: {e})."
        ) from None


def is_connect(spark) -> bool:
    """Whether ``spark`` is a Spark Connect session (no JVM gateway, no RDDs)."""
    try:
        from pyspark.sql.connect.session import SparkSession as ConnectSession
    except ImportError:  # pragma: no cover - pyspark without the connect extra
        return False
    return isinstance(spark, ConnectSession)


def _strip_scheme(path: str) -> str:
    """``file:/a/b``, ``file:///a/b`` and ``/a/b`` all become ``/a/b``; ``hdfs://h/a``
    becomes ``/a`` (listing results and given paths compare equal)."""
    m = re.match(r"^[A-Za-z][A-Za-z0-9+.-]*:(//[^/]*)?", path)
    rest = path[m.end() :] if m else path
    return "/" + rest.lstrip("/")


def _is_path_not_found(e: Exception) -> bool:
    text = str(e)
    return "PATH_NOT_FOUND" in text or "Path does not exist" in text


class SparkFiles:
    """File operations on any Spark file system, for a classic or a Connect session."""

    def __init__(self, spark=None):
        self.spark = active_session(spark)
        self.connect = is_connect(self.spark)

    # -- Hadoop FileSystem (classic sessions) ----------------------------
    def _hadoop(self, path: str):
        jvm = self.spark._jvm
        jpath = jvm.org.apache.hadoop.fs.Path(path)
        conf = self.spark._jsc.hadoopConfiguration()
        return jpath.getFileSystem(conf), jpath

    def qualify(self, path: str) -> str:
        """The path as Spark resolves it (scheme and authority of the default file system
        added to a bare path); under Connect the path as given."""
        path = str(path)
        if self.connect:
            return path
        fs, jpath = self._hadoop(path)
        return str(fs.makeQualified(jpath).toString())

    def exists(self, path: str) -> bool:
        if not self.connect:
            fs, jpath = self._hadoop(path)
            return bool(fs.exists(jpath))
        try:
            self._listing(path).limit(1).collect()
            return True
        except Exception as e:
            if _is_path_not_found(e):
                return False
            raise

    def is_dir(self, path: str) -> bool:
        if not self.connect:
            fs, jpath = self._hadoop(path)
            return bool(fs.exists(jpath) and fs.getFileStatus(jpath).isDirectory())
        return self.exists(path)  # Connect: a path with files below it

    def children(self, path: str) -> list[str]:
        """Names of the entries directly in directory ``path`` (classic), or of the
        first path components below it that hold files (Connect)."""
        if not self.connect:
            fs, jpath = self._hadoop(path)
            if not fs.exists(jpath):
                return []
            return sorted(str(s.getPath().getName()) for s in fs.listStatus(jpath))
        root = _strip_scheme(self.qualify(path)).rstrip("/") + "/"
        try:
            rows = self._listing(path).collect()
        except Exception as e:
            if _is_path_not_found(e):
                return []
            raise
        names = set()
        for (p,) in rows:
            p = _strip_scheme(p)
            if p.startswith(root):
                names.add(p[len(root) :].split("/", 1)[0])
        return sorted(names)

    def _listing(self, path: str):
        return (
            self.spark.read.format("binaryFile")
            .option("recursiveFileLookup", "true")
            .load(path)
            .select("path")
        )

    def delete(self, path: str) -> bool:
        """Delete ``path`` recursively. Under Spark Connect through the server's ML helper
        (``handleOverwrite``, what pyspark's own ``write().overwrite()`` uses there); False
        if that server has no ML support."""
        if self.connect:
            return _connect_delete(self.spark, path)
        fs, jpath = self._hadoop(path)
        return bool(fs.delete(jpath, True))

    def rename(self, src: str, dst: str) -> bool:
        """Rename ``src`` to ``dst`` (which must not exist) with Hadoop's ``FileSystem``
        (classic sessions; one metadata operation on HDFS and local disks). False under
        Spark Connect, which cannot rename."""
        if self.connect:
            return False
        fs, jsrc = self._hadoop(src)
        _, jdst = self._hadoop(dst)
        if not fs.rename(jsrc, jdst):
            raise ModelPathError(f"Could not rename {src!r} to {dst!r}.")
        return True

    def mkdirs(self, path: str) -> None:
        if not self.connect:
            fs, jpath = self._hadoop(path)
            fs.mkdirs(jpath)

    def check_writable(self, path: str) -> None:
        """Fail now, naming the path, if ``path`` cannot be created: a parent is a file,
        or (classic) the directory cannot be written."""
        if self.connect:
            return
        fs, jpath = self._hadoop(path)
        parent = jpath.getParent()
        while parent is not None and not fs.exists(parent):
            parent = parent.getParent()
        if parent is not None and not fs.getFileStatus(parent).isDirectory():
            raise ModelPathError(
                f"Cannot write {path!r}: {parent.toString()} is a file, not a directory."
            )
        probe = jvm_path = None
        try:
            target = jpath if fs.exists(jpath) else parent
            if target is None:
                return
            jvm_path = self.spark._jvm.org.apache.hadoop.fs.Path(
                target, f"{PROBE_PREFIX}{uuid.uuid4().hex}"
            )
            probe = fs.create(jvm_path, False)
            probe.close()
        except Exception as e:
            raise ModelPathError(f"Cannot write {path!r}: {str(e).splitlines()[0]}") from None
        finally:
            if jvm_path is not None:
                try:
                    fs.delete(jvm_path, False)
                except Exception:  # pragma: no cover - best effort
                    pass

    # -- small JSON documents and tables ----------------------------------
    # Writers use the save mode "error" (fail if the path exists): the Spark Connect client
    # refuses its alias "errorifexists".
    def write_json(self, path: str, obj: Any) -> None:
        """One JSON line, as a one-file text dataset at ``path`` (must not exist).

        A classic session writes the file itself with Hadoop's ``FileSystem``: under a
        hidden name first, renamed into place when complete, so a reader never sees a
        partial line (Spark's writer would run a job and its commit protocol for these
        few hundred bytes, about a second per file). Under Spark Connect it goes through
        Spark's text writer."""
        text = json.dumps(obj, default=_json_default)
        if not self.connect:
            self._write_file(path, "part-00000.json", (text + "\n").encode("utf-8"))
            return
        (
            self.spark.createDataFrame([(text,)], "value string")
            .coalesce(1)
            .write.mode("error")
            .text(path)
        )

    def _write_file(self, path: str, name: str, data: bytes, piece: int = 16 << 20) -> None:
        """``data`` as the one file ``path/name``, ``path`` a new directory (classic
        sessions). Written under a hidden name (Spark's readers skip it) and renamed when
        complete, so a reader never sees part of it."""
        if self.exists(path):
            raise ModelPathError(f"Cannot write {path!r}: it already exists.")
        self.mkdirs(path)
        staging = f"{path.rstrip('/')}/_staging-{uuid.uuid4().hex}"
        fs, jstaging = self._hadoop(staging)
        out = fs.create(jstaging, False)
        try:
            view = memoryview(data)
            for i in range(0, len(data), piece):
                out.write(bytearray(view[i : i + piece]))
        finally:
            out.close()
        self.rename(staging, f"{path.rstrip('/')}/{name}")

    def _read_small_files(self, directory: str) -> list[str] | None:
        """The text of every file below ``directory`` that Spark's readers would read
        (none of the path's components below it hidden by a leading ``_`` or ``.``), in
        path order; None if ``directory`` does not exist. Classic sessions only: Hadoop's
        ``FileSystem`` reads these few hundred bytes without a Spark job."""
        fs, jdir = self._hadoop(directory)
        if not fs.exists(jdir):
            return None
        root = str(fs.makeQualified(jdir).toString()).rstrip("/") + "/"
        found = []
        files = fs.listFiles(jdir, True)
        while files.hasNext():
            name = str(files.next().getPath().toString())
            rel = name[len(root) :] if name.startswith(root) else name.rsplit("/", 1)[-1]
            if not any(part.startswith(("_", ".")) for part in rel.split("/")):
                found.append(name)
        jvm = self.spark._jvm
        texts = []
        for name in sorted(found):
            stream = fs.open(jvm.org.apache.hadoop.fs.Path(name))
            try:
                data = jvm.org.apache.commons.io.IOUtils.toByteArray(stream)
            finally:
                stream.close()
            texts.append(bytes(data).decode("utf-8"))
        return texts

    def read_json(self, path: str) -> Any:
        if not self.connect:
            texts = self._read_small_files(path)
            if texts is None:
                raise ModelPathError(f"{path!r} does not exist.")
            lines = [line for t in texts for line in t.splitlines() if line]
            if not lines:
                raise ModelPathError(f"{path!r} holds no JSON record.")
            return json.loads(lines[0])
        rows = self.spark.read.text(path).collect()
        if not rows:
            raise ModelPathError(f"{path!r} holds no JSON record.")
        return json.loads(rows[0][0])

    def read_json_lines(self, directory: str) -> list:
        """Every JSON line of the text files below ``directory``; [] if it does not exist.

        The directory is read recursively rather than through a glob: Spark logs a
        warning with a Java stack trace for every glob path it reads (and for a path
        that does not exist), which would reach the user's console at every save. A
        classic session reads the files with Hadoop's ``FileSystem``."""
        if not self.connect:
            texts = self._read_small_files(directory)
            lines = [line for t in texts or () for line in t.splitlines()]
            return [json.loads(line) for line in lines if line]
        try:
            rows = self.spark.read.option("recursiveFileLookup", "true").text(directory).collect()
        except Exception as e:
            if _is_path_not_found(e):
                return []
            raise
        return [json.loads(r[0]) for r in rows if r[0]]

    def write_arrays(
        self, path: str, arrays: dict[str, np.ndarray], chunk_bytes: int = 32 << 20
    ) -> None:
        """numpy arrays, bit for bit (``np.save`` bytes in chunks), as Parquet at ``path``.

        A classic session encodes the one Parquet file on the driver (pyarrow) and writes
        it with Hadoop's ``FileSystem`` (:meth:`_write_file`): a fifth of the time of
        Spark's writer for 80 MB, a tenth for a small model's few kilobytes. Under Spark
        Connect, Spark's writer. Either way Spark's Parquet reader reads it back."""
        rows = []
        for name, arr in arrays.items():
            buf = io.BytesIO()
            np.save(buf, np.ascontiguousarray(arr), allow_pickle=False)
            data = buf.getvalue()
            for i in range(0, max(len(data), 1), chunk_bytes):
                rows.append((name, i // chunk_bytes, bytearray(data[i : i + chunk_bytes])))
        if not self.connect:
            import pyarrow as pa
            import pyarrow.parquet as pq

            names, chunks, datas = zip(*rows, strict=True) if rows else ((), (), ())
            table = pa.table(
                {
                    "name": pa.array(names, pa.string()),
                    "chunk": pa.array(chunks, pa.int32()),
                    "data": pa.array(datas, pa.binary()),
                }
            )
            out = io.BytesIO()
            pq.write_table(table, out, compression="none")
            self._write_file(path, "part-00000.parquet", out.getvalue())
            return
        df = self.spark.createDataFrame(rows, "name string, chunk int, data binary")
        df.coalesce(1).write.mode("error").parquet(path)

    def read_arrays(self, path: str) -> dict[str, np.ndarray]:
        rows = self.spark.read.parquet(path).collect()
        parts: dict[str, list] = {}
        for name, chunk, data in rows:
            parts.setdefault(name, []).append((chunk, bytes(data)))
        return {
            name: np.load(io.BytesIO(b"".join(d for _, d in sorted(chunks))), allow_pickle=False)
            for name, chunks in parts.items()
        }

    def write_table(self, path: str, table, rows_per_file: int = 100_000) -> None:
        """A pyarrow Table as Parquet at ``path``: in a classic session one file encoded
        on the driver and written with Hadoop's ``FileSystem`` (:meth:`_write_file`),
        under Spark Connect through Spark's writer."""
        if not self.connect:
            import pyarrow.parquet as pq

            out = io.BytesIO()
            pq.write_table(table, out)
            self._write_file(path, "part-00000.parquet", out.getvalue())
            return
        df = self.spark.createDataFrame(table)
        n = max(1, -(-table.num_rows // rows_per_file))
        df.coalesce(n).write.mode("error").parquet(path)

    def read_table(self, path: str):
        """Parquet at ``path`` as a pyarrow Table."""
        return self.spark.read.parquet(path).toArrow()


def _connect_delete(spark, path: str) -> bool:
    """Delete ``path`` on a Spark Connect server (its ML helper's ``handleOverwrite``)."""
    try:
        import pyspark.sql.connect.proto as pb2
        from pyspark.ml.connect.serialize import serialize
        from pyspark.ml.util import ML_CONNECT_HELPER_ID

        method = pb2.Fetch.Method(
            method="handleOverwrite", args=serialize(spark.client, str(path), True)
        )
        command = pb2.Command()
        command.ml_command.fetch.CopyFrom(
            pb2.Fetch(obj_ref=pb2.ObjectRef(id=ML_CONNECT_HELPER_ID), methods=[method])
        )
        spark.client.execute_command(command)
        return True
    except Exception as e:  # a server without Spark ML: leave the files, readers ignore them
        log.warning("could not delete %s through Spark Connect: %s", path, str(e)[:200])
        return False


def _json_default(o):
    if isinstance(o, np.generic):
        return o.item()
    if isinstance(o, np.ndarray):
        return o.tolist()
    raise TypeError(f"not JSON serialisable: {type(o)}")


@dataclass
class Commit:
    version: str
    seq: int
    kind: str
    created: str
    info: dict

    def path(self, root: str) -> str:
        return f"{root.rstrip('/')}/{self.version}"


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

    def commits(self) -> list[Commit]:
        if self._known is not None:
            return list(self._known)
        records = self.files.read_json_lines(f"{self.root}/{COMMITS}")
        out = [
            Commit(
                r["version"],
                int(r["seq"]),
                r.get("kind", ""),
                r.get("created", ""),
                r.get("info", {}),
            )
            for r in records
            if "version" in r and r.get("kind") == self.kind
        ]
        self._known = sorted(out, key=lambda c: c.seq)
        return list(self._known)

    def latest(self) -> Commit | None:
        commits = self.commits()
        return commits[-1] if commits else None

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
            self._known = []  # nothing committed yet: the commit need not read it back
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

    def new_version(self, latest: Commit | None) -> tuple[str, int]:
        seq = (latest.seq + 1) if latest is not None else 0
        return f"v{seq:06d}-{uuid.uuid4().hex[:8]}", seq

    def commit(self, version: str, seq: int, info: dict | None = None) -> Commit:
        created = _dt.datetime.now(_dt.UTC).isoformat()
        record = {
            "version": version,
            "seq": seq,
            "kind": self.kind,
            "created": created,
            "info": info or {},
        }
        self.files.write_json(f"{self.root}/{COMMITS}/{version}", record)
        done = Commit(version, seq, self.kind, created, info or {})
        self._known = sorted([*self.commits(), done], key=lambda c: c.seq)
        return done

    def cleanup(self, keep: Commit, keep_last: int = 1, extra: tuple[str, ...] = ()) -> None:
        """Delete versions older than the ``keep_last`` newest committed ones, uncommitted
        versions (a crashed save's), their records, the write probes a killed save left
        (:meth:`SparkFiles.check_writable`) and the ``extra`` entries."""
        commits = self.commits()
        kept = {c.version for c in commits[-keep_last:]} | {keep.version}
        for c in commits:
            if c.version not in kept:
                self.files.delete(f"{self.root}/{COMMITS}/{c.version}")
        self._known = [c for c in commits if c.version in kept]
        for name in self.files.children(self.root):
            version = name.startswith("v") and len(name) == 16 and name[7] == "-"
            probe = name.startswith(PROBE_PREFIX)
            if (version and name not in kept) or probe or name in extra:
                self.files.delete(f"{self.root}/{name}")

    def remove(self) -> None:
        """Delete the whole directory."""
        self.files.delete(self.root)
        self._known = None


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


#: Name prefix of the empty file :meth:`SparkFiles.check_writable` creates and deletes: a
#: process killed between the two leaves it, and the next save's cleanup deletes it.
PROBE_PREFIX = ".sparklda-probe-"

#: Staging directory of :func:`write_output`: a hidden sibling of the output path.
STAGING_SUFFIX = ".sparklda-staging"


def staging_path(out: str) -> str:
    """Where :func:`write_output` stages the new output of ``out``: ``.<name>.sparklda-staging``
    beside it (hidden: Spark's readers skip names starting with a dot)."""
    out = str(out).rstrip("/")
    parent, _, name = out.rpartition("/")
    return (
        f"{parent}/.{name}{STAGING_SUFFIX}"
        if parent or out.startswith("/")
        else (f".{name}{STAGING_SUFFIX}")
    )


def write_output(spark, out: str, write, overwrite: bool, fmt: str = "parquet") -> None:
    """Write a dataset to ``out`` so that a crash never loses the previous one.

    ``write(path)`` writes the new dataset (with Spark's writer, in format ``fmt``) to
    a staging directory beside ``out`` (:func:`staging_path`); only then is ``out``
    replaced. In a classic session by two renames through Hadoop's ``FileSystem``
    (``out`` to ``staging/old``, ``staging/new-…`` to ``out``), then the staging
    directory is deleted. Under Spark Connect, which cannot rename, ``out`` is
    deleted and the staged dataset copied to it with Spark's writer; Spark writes
    ``out/_SUCCESS`` last, so readers should take ``out`` as complete only when it
    holds ``_SUCCESS`` (during the copy the complete new dataset is in the staging
    directory). The next call for the same ``out`` first repairs what a crash left:
    a classic crash between the two renames (``out`` missing, ``staging/old``
    present) gets the old dataset renamed back; then the staging directory is
    removed. With ``overwrite``, an existing ``out`` holding anything but Spark's own
    output files (``part-*``, ``_*``, ``.*``) is refused, not replaced.
    docs/architecture.md, "Scored output".
    """
    files = SparkFiles(spark)
    out = files.qualify(str(out)).rstrip("/")
    staging = staging_path(out)
    recover_output(spark, out)
    if files.exists(out):
        if not overwrite:
            raise ModelExistsError(
                f"The output path {out!r} already exists; set overwrite to replace it."
            )
        foreign = [n for n in files.children(out) if not n.startswith(("part-", "_", "."))]
        if foreign:
            raise ModelPathError(
                f"{out!r} exists and is not a dataset Spark wrote (it holds "
                f"{sorted(foreign)[:5]}); refusing to replace it. Choose another path or "
                f"remove it yourself."
            )
    new = f"{staging}/new-{uuid.uuid4().hex[:8]}"
    write(new)
    if files.connect:
        if files.exists(out) and not files.delete(out):
            raise ModelPathError(
                f"Cannot replace {out!r}: the Spark Connect server cannot delete it. The "
                f"new output is complete in {new!r}."
            )
        spark.read.format(fmt).load(new).write.mode("error").format(fmt).save(out)
    else:
        if files.exists(out):
            files.rename(out, f"{staging}/old")
        files.rename(new, out)
    files.delete(staging)


def recover_output(spark, out: str) -> None:
    """Repair what a crashed :func:`write_output` to ``out`` left (see there)."""
    files = SparkFiles(spark)
    out = files.qualify(str(out)).rstrip("/")
    staging = staging_path(out)
    if not files.exists(staging):
        return
    old = f"{staging}/old"
    if not files.connect and not files.exists(out) and files.exists(old):
        log.warning("a crashed write left %s missing; restoring the previous output", out)
        files.rename(old, out)
    files.delete(staging)


# --------------------------------------------------------------------------
# DataFrames kept between jobs (docs/architecture.md, "Spark Connect path")

#: What a session says when it does not offer caching or checkpoints (Databricks
#: serverless raises on ``cache()``/``persist()``/``unpersist()``).
_UNSUPPORTED = re.compile(r"not[ _]supported|not[ _]implemented|NOT_SUPPORTED", re.IGNORECASE)


def _unsupported(e: Exception) -> bool:
    return bool(_UNSUPPORTED.search(str(e)))


def persist_frame(frame, what: str):
    """``frame`` persisted (memory and disk), or ``frame`` itself where the session
    refuses caching: each action then computes it again (slower, same result)."""
    from pyspark import StorageLevel

    try:
        return frame.persist(StorageLevel.MEMORY_AND_DISK)
    except Exception as e:
        if not _unsupported(e):
            raise
        log.warning("the session does not cache %s (%s): it is read again when used", what, e)
        return frame


def checkpoint_frame(frame, what: str):
    """``frame`` computed once and kept: ``localCheckpoint(eager=True)``, whose plan is
    a scan of the kept rows; where the session offers no checkpoints,
    :func:`persist_frame` (materialized by a count); where it offers neither,
    ``frame`` itself."""
    try:
        return frame.localCheckpoint(eager=True)
    except Exception as e:
        if not _unsupported(e):
            raise
        log.warning("the session does not checkpoint %s (%s): it is cached instead", what, e)
    kept = persist_frame(frame, what)
    if kept is not frame:
        kept.count()
    return kept


def release_frame(frame) -> None:
    """Free what ``frame`` holds now: its cache, and the blocks of a
    ``localCheckpoint()`` behind it. A classic session frees the checkpointed RDD
    (best effort: otherwise the JVM's garbage collector frees it later); under Spark
    Connect the server frees a checkpointed relation when the client drops it. A
    session without caching has nothing to free."""
    try:
        frame.unpersist()
    except Exception as e:
        if not _unsupported(e):
            raise
        return
    jdf = getattr(frame, "_jdf", None)
    if jdf is None:
        return
    try:
        plan = jdf.queryExecution().analyzed()
        if plan.getClass().getSimpleName() == "LogicalRDD":
            plan.rdd().unpersist(False)
    except Exception as e:  # pragma: no cover - another plan or JVM: freed when collected
        log.debug("could not free the checkpoint behind a frame: %s", e)
