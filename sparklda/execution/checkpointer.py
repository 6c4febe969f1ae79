"""The lineage of a stateful mode's block states on a classic session
(:class:`PeriodicCheckpointer`)."""

from __future__ import annotations

import logging
import os
import shutil
import tempfile

__all__ = ["PeriodicCheckpointer"]

log = logging.getLogger("sparklda.execution")


class PeriodicCheckpointer:
    """Persist each new generation of a stateful RDD and checkpoint every
    ``interval``-th one, in the manner of MLlib's ``PeriodicRDDCheckpointer``.

    Once a checkpoint has cut the lineage, the previous checkpoint's files are
    deleted and the broadcast variables the older generations referred to
    (:meth:`hold`) are destroyed; until then they are only unpersisted, so a
    lost partition can still be recomputed. Where checkpoints go: the
    context's checkpoint directory; in local mode without one, a temporary
    directory (removed by :meth:`close`); on a cluster without one,
    ``localCheckpoint()`` with a warning (executor storage only).
    """

    def __init__(self, sc, interval: int, name: str = "state"):
        self.sc = sc
        self.interval = int(interval)
        self.name = name
        self.generation = -1  # the initial states are generation 0, round t's are t + 1
        self.checkpoints = 0
        self.current = None  # the newest persisted generation
        self.checkpointed = None  # the newest checkpointed generation (files to delete later)
        self.held: list = []  # broadcasts the uncut lineage still refers to
        self.created_root: str | None = None
        self.kind, self.directory = self._policy()
        self.last_cut = False
        self.previous = None

    def _policy(self) -> tuple[str, str | None]:
        if not self.interval:
            return "none", None
        directory = self.sc.getCheckpointDir()
        if directory:
            return "reliable", directory
        if self.sc.master.startswith("local"):
            self.created_root = tempfile.mkdtemp(prefix="sparklda-checkpoints-")
            self.sc.setCheckpointDir(self.created_root)
            directory = self.sc.getCheckpointDir()
            log.info(
                "no Spark checkpoint directory was set: %s is checkpointed every %d rounds "
                "to %s (set one with spark.sparkContext.setCheckpointDir)",
                self.name,
                self.interval,
                directory,
            )
            return "reliable", directory
        log.warning(
            "no Spark checkpoint directory is set on this cluster: the lineage of %s is "
            "cut with localCheckpoint() (kept on the executors only, lost with them); "
            "set a reliable one with spark.sparkContext.setCheckpointDir('hdfs://...')",
            self.name,
        )
        return "local", None

    def update(self, rdd, persist: bool = True) -> bool:
        """Persist the new generation ``rdd`` (unless ``persist`` is false: a shuffle's
        output, kept in its files) and mark it for checkpointing when its turn has come
        (before any job computes it). Returns whether it was marked."""
        from pyspark import StorageLevel

        if persist:
            rdd.persist(StorageLevel.MEMORY_AND_DISK)
        self.generation += 1
        mark = bool(self.interval) and self.generation > 0 and self.generation % self.interval == 0
        if mark:
            if self.kind == "reliable":
                rdd.checkpoint()
            else:
                rdd.localCheckpoint()
        self.previous, self.current = self.current, rdd
        return mark

    def hold(self, broadcast) -> None:
        """A broadcast the current generation's lineage refers to."""
        broadcast.unpersist()
        self.held.append(broadcast)

    def materialized(self) -> None:
        """Call once the current generation has been computed: unpersist the
        previous one and, if a checkpoint now cuts the lineage, free what only
        the old lineage needed."""
        if self.previous is not None:
            self.previous.unpersist()
            self.previous = None
        rdd = self.current
        self.last_cut = bool(rdd is not None and rdd.isCheckpointed())
        if self.last_cut and rdd is not self.checkpointed:
            self.checkpoints += 1
            self._delete_files(self.checkpointed)
            self.checkpointed = rdd
            # every broadcast held so far belongs to the cut lineage (the one of the round
            # that produced this generation is held after this call)
            for bc in self.held:
                bc.destroy()
            self.held = []

    def lineage_depth(self) -> int:
        debug = self.current.toDebugString() if self.current is not None else b""
        return len((debug or b"").decode("utf-8", "replace").splitlines())

    def _delete_files(self, rdd) -> None:
        path = rdd.getCheckpointFile() if rdd is not None else None
        if not path:
            return
        try:
            jvm_path = self.sc._jvm.org.apache.hadoop.fs.Path(path)
            jvm_path.getFileSystem(self.sc._jsc.hadoopConfiguration()).delete(jvm_path, True)
        except Exception as e:  # pragma: no cover - best effort clean-up
            log.warning("could not delete checkpoint files %s: %s", path, e)

    def close(self) -> None:
        """Unpersist everything, destroy held broadcasts, delete checkpoint files."""
        for bc in self.held:
            bc.destroy()
        self.held = []
        for rdd in (self.previous, self.current):
            if rdd is not None:
                rdd.unpersist()
        self.current = self.previous = None
        self._delete_files(self.checkpointed)
        self.checkpointed = None
        root = self.created_root
        if root and not any(files for _, _, files in os.walk(root)):
            # nothing left in the temporary directory: remove it (the context keeps it as its
            # checkpoint directory; Spark recreates the folders if it writes there again)
            shutil.rmtree(root, ignore_errors=True)

    def report(self) -> dict:
        return {
            "checkpoints": self.checkpoints,
            "checkpoint_kind": self.kind,
            "checkpoint_dir": self.directory,
            "checkpoint_interval": self.interval,
        }
