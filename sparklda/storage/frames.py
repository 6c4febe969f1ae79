"""DataFrames kept between jobs: persisted, checkpointed and released where the session
allows it (docs/architecture.md, "Spark Connect path").

Databricks serverless and some Connect servers refuse ``cache()``, ``persist()`` or
``localCheckpoint()``: each helper then falls back to what the session offers (the
same result, computed again when used).
"""

from __future__ import annotations

import logging
import re

log = logging.getLogger("sparklda.storage")
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
