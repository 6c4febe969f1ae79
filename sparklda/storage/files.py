"""File-system access through Spark: one wrapper for classic and Spark Connect sessions.

Everything goes through the session's own readers and writers, so any URI
Spark can open works (``file:``, ``hdfs:``, ``s3a:``, ``abfss:``, ``gs:``,
``dbfs:``), and nothing needs a JVM gateway: the same code runs under Spark
Connect. A classic session also uses Hadoop's ``FileSystem`` to delete, to
rename, to tell files from directories and to write and read small files
without a Spark job.

Paths are literal. Hadoop's ``FileSystem`` calls take a path as it is, but
Spark's readers (``spark.read``, ``sc.textFile``) read ``[``, ``]``, ``{``,
``}``, ``*``, ``?`` and ``\\`` as a glob pattern and ``sc.textFile`` splits at
``,``: every path this module gives a Spark reader goes through
:func:`literal_path` first, and callers outside it that read a path the user
named with Spark's readers should do the same.
"""

from __future__ import annotations

import io
import json
import logging
import re
import uuid
from typing import Any

import numpy as np

from ..errors import ModelFormatError, ModelPathError

log = logging.getLogger("sparklda.storage")

#: Name prefix of the empty file :meth:`SparkFiles.check_writable` creates and deletes: a
#: process killed between the two leaves it, and the next save's cleanup deletes it.
PROBE_PREFIX = ".sparklda-probe-"

#: Characters Hadoop's glob (``GlobPattern``, used by Spark's readers) gives a meaning, and
#: the comma that ``sc.textFile`` (``FileInputFormat``) splits a list of paths at.
_GLOB_CHARS = re.compile(r"[\\\[\]{}*?,]")


def literal_path(path: str) -> str:
    """``path`` escaped so that Spark's readers read the one file or directory it names.

    ``spark.read.*(p)`` and ``sc.textFile(p)`` expand ``p`` as a Hadoop glob pattern
    when it holds one of ``[ ] { } * ? \\`` (``models [v2]/lda`` would match
    ``models v/lda`` or ``models 2/lda``, not itself), and ``sc.textFile`` reads
    ``a,b`` as two paths. The result escapes each of them with a backslash (``\\[``),
    and a comma as ``{\\,}`` (a one-way alternation, which ``textFile`` does not split);
    a path without them is returned unchanged. Use it only for what is handed to
    Spark's readers (``spark.read.text(literal_path(p))``,
    ``sc.textFile(literal_path(p))``); Hadoop's ``FileSystem`` calls and Spark's
    writers take paths literally already.
    """
    path = str(path)
    if not _GLOB_CHARS.search(path):
        return path
    return "".join("{\\,}" if c == "," else "\\" + c if c in "\\[]{}*?" else c for c in path)


def reader_path(spark, path: str) -> str:
    """What to hand Spark's readers for a user's input ``path``: the path read literally
    (:func:`literal_path`) when a file or directory of exactly that name exists, so
    ``corpus [2024]/`` or ``docword,v2.txt`` read what they name; otherwise ``path`` as
    given, so a glob pattern (``parts/*.json``) still matches its files. A path without
    glob characters is returned unchanged, with no file-system call."""
    path = str(path)
    if not _GLOB_CHARS.search(path):
        return path
    try:
        exists = SparkFiles(spark).exists(path)
    except Exception:  # a scheme Spark cannot reach: the reader names it
        exists = False
    return literal_path(path) if exists else path


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


_NO_FILESYSTEM = re.compile(r'No FileSystem for scheme "?([^"\s]*)"?')


def unknown_scheme_error(path: str, e: BaseException) -> ModelPathError | None:
    """A :class:`ModelPathError` naming ``path`` and its scheme if ``e`` says that Spark
    (Hadoop) has no file system for that scheme; None for any other error."""
    m = _NO_FILESYSTEM.search(str(e))
    if m is None and "UnsupportedFileSystemException" not in str(e):
        return None
    scheme = m.group(1) if m else str(path).split(":", 1)[0]
    return ModelPathError(
        f"Cannot use the path {str(path)!r}: Spark has no file system for its scheme "
        f"{scheme!r}. Use a scheme Spark is configured for (file:, hdfs:, s3a:, abfss:, "
        f"gs:, dbfs:, ...) or add the Hadoop connector for {scheme!r} to the session."
    )


def parse_json(text: str, where: str) -> Any:
    """``json.loads(text)``; a :class:`ModelFormatError` naming ``where`` if it is not JSON
    (nothing in it is ever executed: JSON only)."""
    try:
        return json.loads(text)
    except ValueError as e:
        snippet = text[:40] + ("..." if len(text) > 40 else "")
        raise ModelFormatError(
            f"{where} is not a valid JSON record ({e}; it starts with {snippet!r}): the file is "
            f"damaged (cut short?) or was not written by sparklda."
        ) from None


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
        try:
            return jpath.getFileSystem(conf), jpath
        except Exception as e:
            err = unknown_scheme_error(path, e)
            if err is None:
                raise
            raise err from None

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
            .load(literal_path(path))
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

    def publish_json(self, path: str, obj: Any, staging: str) -> None:
        """Try to create the one-record directory ``path`` in one step; the caller reads
        ``path`` back to learn whose record it holds (this never raises because ``path``
        exists).

        A classic session writes the record into the hidden directory ``staging`` (a
        sibling of ``path``) and renames that directory onto ``path``: an atomic create
        on HDFS and local disks, refused (local) or moved inside ``path`` under its hidden
        name (HDFS) when ``path`` already exists, so ``path/part-00000.json`` is the first
        writer's. Under Spark Connect, which cannot rename, Spark's writer with the save
        mode "error": two writers at once may both add a file (the reader decides)."""
        if self.connect:
            try:
                self.write_json(path, obj)
            except Exception as e:
                if "already exists" not in str(e) and "PATH_ALREADY_EXISTS" not in str(e):
                    raise
            return
        text = json.dumps(obj, default=_json_default) + "\n"
        self._write_file(staging, "part-00000.json", text.encode("utf-8"))
        fs, jsrc = self._hadoop(staging)
        _, jdst = self._hadoop(path)
        try:
            fs.rename(jsrc, jdst)  # False, or an exception, when path exists: read back
        except Exception as e:  # pragma: no cover - depends on the file system
            log.debug("publishing %s: %s", path, str(e).splitlines()[0] if str(e) else e)
        if fs.exists(jsrc):
            fs.delete(jsrc, True)

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

    def _read_small_files(self, directory: str) -> list[tuple[str, str]] | None:
        """(path relative to ``directory``, text) of every file below ``directory`` that
        Spark's readers would read (none of the path's components below it hidden by a
        leading ``_`` or ``.``), in path order; None if ``directory`` does not exist.
        Classic sessions only: Hadoop's ``FileSystem`` reads these few hundred bytes
        without a Spark job."""
        fs, jdir = self._hadoop(directory)
        if not fs.exists(jdir):
            return None
        root = str(fs.makeQualified(jdir).toString()).rstrip("/") + "/"
        found = []
        files = fs.listFiles(jdir, True)
        while files.hasNext():
            jfile = files.next().getPath()
            name = str(jfile.toString())
            rel = name[len(root) :] if name.startswith(root) else name.rsplit("/", 1)[-1]
            if not any(part.startswith(("_", ".")) for part in rel.split("/")):
                found.append((rel, jfile))
        jvm = self.spark._jvm
        texts = []
        for rel, jfile in sorted(found, key=lambda f: f[0]):
            try:
                stream = fs.open(jfile)
                try:
                    data = jvm.org.apache.commons.io.IOUtils.toByteArray(stream)
                finally:
                    stream.close()
            except Exception as e:  # a checksum error, a file that went away
                first = (str(e).strip().splitlines() or [type(e).__name__])[0][:200]
                raise ModelFormatError(
                    f"{directory.rstrip('/')}/{rel} cannot be read ({first})."
                ) from None
            try:
                texts.append((rel, bytes(data).decode("utf-8")))
            except UnicodeDecodeError as e:
                raise ModelFormatError(
                    f"{directory.rstrip('/')}/{rel!s} is not UTF-8 text ({e.reason} at byte "
                    f"{e.start}): the file is damaged or was not written by sparklda."
                ) from None
        return texts

    def read_json(self, path: str) -> Any:
        """The first JSON record of the one-record dataset ``path``.
        :class:`ModelPathError` if it does not exist, :class:`ModelFormatError` if it
        holds no record or one that is not JSON."""
        if not self.connect:
            texts = self._read_small_files(path)
            if texts is None:
                raise ModelPathError(f"{path!r} does not exist.")
            lines = [(rel, line) for rel, t in texts for line in t.splitlines() if line.strip()]
        else:
            try:
                rows = self.spark.read.text(literal_path(path)).collect()
            except Exception as e:
                if _is_path_not_found(e):
                    raise ModelPathError(f"{path!r} does not exist.") from None
                raise
            lines = [("", r[0]) for r in rows if r[0] and r[0].strip()]
        if not lines:
            raise ModelFormatError(f"{path!r} holds no JSON record (an empty file).")
        rel, line = lines[0]
        return parse_json(line, repr(f"{path.rstrip('/')}/{rel}" if rel else path))

    def read_json_records(self, directory: str) -> list[tuple[str, Any]]:
        """(path relative to ``directory``, record) of every JSON line of the text files
        below ``directory``; [] if it does not exist. A line that is not JSON raises
        :class:`ModelFormatError` naming its file.

        The directory is read recursively rather than through a glob: Spark logs a
        warning with a Java stack trace for every glob path it reads (and for a path
        that does not exist), which would reach the user's console at every save. A
        classic session reads the files with Hadoop's ``FileSystem``."""
        base = directory.rstrip("/")
        if not self.connect:
            texts = self._read_small_files(directory)
            return [
                (rel, parse_json(line, repr(f"{base}/{rel}")))
                for rel, t in texts or ()
                for line in t.splitlines()
                if line.strip()
            ]
        from pyspark.sql import functions as F

        try:
            rows = (
                self.spark.read.option("recursiveFileLookup", "true")
                .text(literal_path(directory))
                .select("value", F.input_file_name())
                .collect()
            )
        except Exception as e:
            if _is_path_not_found(e):
                return []
            raise
        root = _strip_scheme(base) + "/"
        out = []
        for value, name in rows:
            if not value or not value.strip():
                continue
            p = _strip_scheme(str(name))
            rel = p[len(root) :] if p.startswith(root) else p.rsplit("/", 1)[-1]
            out.append((rel, parse_json(value, repr(f"{base}/{rel}"))))
        return sorted(out, key=lambda r: r[0])

    def read_json_lines(self, directory: str) -> list:
        """Every JSON line of the text files below ``directory``; [] if it does not exist
        (:meth:`read_json_records` without the file names)."""
        return [record for _, record in self.read_json_records(directory)]

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
        """The arrays :meth:`write_arrays` wrote; :class:`ModelFormatError` naming ``path``
        if they cannot be read (never unpickled: ``allow_pickle=False``)."""
        rows = self._read_parquet(path).collect()
        parts: dict[str, list] = {}
        try:
            for name, chunk, data in rows:
                parts.setdefault(name, []).append((chunk, bytes(data)))
            return {
                name: np.load(
                    io.BytesIO(b"".join(d for _, d in sorted(chunks))), allow_pickle=False
                )
                for name, chunks in parts.items()
            }
        except (ValueError, TypeError, OSError, EOFError) as e:
            raise ModelFormatError(
                f"{path!r} does not hold the arrays sparklda writes ({e}): it is damaged."
            ) from None

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
        """Parquet at ``path`` as a pyarrow Table; :class:`ModelFormatError` naming
        ``path`` if it is missing or cannot be read."""
        frame = self._read_parquet(path)
        try:
            return frame.toArrow()
        except Exception as e:
            raise _unreadable(path, e) from None

    def _read_parquet(self, path: str):
        """``spark.read.parquet`` of the literal ``path``, its failure a
        :class:`ModelFormatError`."""
        try:
            return self.spark.read.parquet(literal_path(path))
        except Exception as e:
            raise _unreadable(path, e) from None


def _unreadable(path: str, e: Exception) -> ModelFormatError:
    if _is_path_not_found(e):
        return ModelFormatError(f"{path!r} does not exist: the saved directory is incomplete.")
    lines = [ln.strip() for ln in str(e).splitlines() if ln.strip()]
    first = lines[0][:300] if lines else type(e).__name__
    return ModelFormatError(
        f"{path!r} cannot be read as Parquet ({first}): the file is damaged (cut short?) "
        f"or was not written by sparklda."
    )


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
