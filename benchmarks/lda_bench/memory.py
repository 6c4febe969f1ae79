"""Memory figures of a benchmark run: cached corpus size and driver peak RSS.

* Cached corpus: what Spark's block manager reports for the cached training
  blocks (``getRDDStorageInfo``: the pickled blocks as stored), beside the
  numpy bytes of the blocks' arrays, both per distinct (document, term) pair.
* Driver peak resident memory: sampled in a background thread (psutil) for
  the Python driver and for the JVM it started; without psutil only the
  Python process's own peak (``resource.getrusage``) is known.
"""

from __future__ import annotations

import os
import resource
import threading
import time


def rdd_storage(sc, rdd) -> dict | None:
    """Spark's storage figures of a cached RDD (memory and disk bytes), or None.

    PySpark has no Python API for them; they are read from the JVM
    SparkContext through py4j (Spark's own handle, ``sc._jsc``). Nothing of
    sparklda's is involved.
    """
    try:
        infos = sc._jsc.sc().getRDDStorageInfo()
        for info in infos:
            if info.id() == rdd.id():
                return {
                    "mem_bytes": int(info.memSize()),
                    "disk_bytes": int(info.diskSize()),
                    "cached_partitions": int(info.numCachedPartitions()),
                    "partitions": int(info.numPartitions()),
                }
    except Exception:  # the storage API is internal; a figure we cannot read is left out
        return None
    return None


class PeakRSS:
    """Peak resident set size of this process and of its JVM child, sampled
    every ``interval`` seconds between :meth:`start` and :meth:`stop`."""

    def __init__(self, interval: float = 0.1):
        self.interval = interval
        self.peak_python = 0
        self.peak_jvm = 0
        self._stop = threading.Event()
        self._thread = None
        try:
            import psutil

            self._proc = psutil.Process(os.getpid())
            self._psutil = psutil
        except ImportError:
            self._proc = None
            self._psutil = None

    def _jvm(self):
        """The driver's JVM: a child of this process when Python started it (pyspark),
        the parent when ``spark-submit`` started Python."""
        if self._proc is None:
            return None
        candidates = list(self._proc.children(recursive=True))
        try:
            candidates += self._proc.parents()[:2]
        except self._psutil.Error:
            pass
        for proc in candidates:
            try:
                if "java" in proc.name():
                    return proc
            except self._psutil.Error:
                continue
        return None

    def _sample(self):
        jvm = self._jvm()
        while not self._stop.is_set():
            try:
                self.peak_python = max(self.peak_python, self._proc.memory_info().rss)
                if jvm is None:
                    jvm = self._jvm()
                if jvm is not None:
                    self.peak_jvm = max(self.peak_jvm, jvm.memory_info().rss)
            except self._psutil.Error:
                jvm = None
            time.sleep(self.interval)

    def start(self) -> PeakRSS:
        self.peak_python = self.peak_jvm = 0
        if self._proc is not None:
            self._stop.clear()
            self._thread = threading.Thread(target=self._sample, daemon=True)
            self._thread.start()
        return self

    def stop(self) -> dict:
        if self._thread is not None:
            self._stop.set()
            self._thread.join()
            self._thread = None
        if self._proc is None:  # lifetime peak only (kilobytes on Linux)
            self.peak_python = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
        return {
            "driver_python_peak_rss_bytes": int(self.peak_python),
            "driver_jvm_peak_rss_bytes": int(self.peak_jvm) or None,
            "sampled": self._proc is not None,
        }
