"""Storage through Spark, in two rooms.

* :mod:`.files`: file-system access for classic and Spark Connect sessions
  (:class:`SparkFiles`, :func:`active_session`, :func:`is_connect`, the one
  primitive that tells the two apart, and :func:`literal_path`, which every
  path handed to Spark's readers goes through), and :mod:`.frames`, the
  DataFrames kept between jobs (persist, checkpoint, release);
* :mod:`.committed`: committed directories (:class:`CommittedDir` and its one
  save operation :meth:`CommittedDir.write`), used by models, checkpoints,
  ``LDA``/``LDAModel`` and pipelines, and :mod:`.output`, the infer job's
  scored output put in place when complete (:func:`write_output`).

Import from here: the names below are the package's interface.
"""

from __future__ import annotations

from .committed import COMMITS, Commit, CommittedDir, Staged, join_state, split_state
from .files import (
    PROBE_PREFIX,
    SparkFiles,
    active_session,
    is_connect,
    literal_path,
    parse_json,
    reader_path,
    unknown_scheme_error,
)
from .frames import checkpoint_frame, persist_frame, release_frame
from .output import STAGING_SUFFIX, recover_output, staging_path, write_output

__all__ = [
    "COMMITS",
    "PROBE_PREFIX",
    "STAGING_SUFFIX",
    "Commit",
    "CommittedDir",
    "SparkFiles",
    "Staged",
    "active_session",
    "checkpoint_frame",
    "is_connect",
    "join_state",
    "literal_path",
    "parse_json",
    "persist_frame",
    "reader_path",
    "recover_output",
    "release_frame",
    "split_state",
    "staging_path",
    "unknown_scheme_error",
    "write_output",
]
