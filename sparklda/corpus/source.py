"""The documents of an input (:class:`DocSource`), as every reader returns them."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..errors import CorpusError
from ..packs import packs_of_docs
from ..params import BY_NAME, check_param
from ..storage import release_frame

__all__ = ["DocSource", "check_params", "source_packs"]


def check_params(owner: str, **values) -> None:
    """Check training parameters passed to a corpus function directly (the same table and
    messages as :class:`~sparklda.params.TrainParams`; None means "not given")."""
    for name, value in values.items():
        if value is not None:
            check_param(BY_NAME[name], value, owner)


@dataclass
class DocSource:
    """Documents as an RDD of ``(doc_id: int, term_ids: int64[], counts: float64[])``.

    ``what`` names the input in error messages (a column or a file);
    ``declared_docs`` is the document count a file header declares (UCI), so
    documents with no entries are still counted as empty.
    """

    rdd: object
    vocab_size: int
    vocab: list | None
    what: str
    declared_docs: int | None = None
    #: Builds the same documents as a DataFrame (:data:`DOCS_SCHEMA`), with no RDD, for
    #: the DataFrame-only path (Spark Connect); None when the input has no such form.
    #: Under Spark Connect ``rdd`` is None and only this is set. It returns the DataFrame
    #: and the intermediate DataFrames it cached (unpersisted by :meth:`release_frame`).
    frame: Callable[[], tuple[Any, list]] | None = None
    #: Builds an RDD of the same documents in packs (:mod:`sparklda.packs`), read without
    #: a Python step per document (classic sessions); None: :func:`source_packs` packs
    #: ``rdd``'s documents.
    packs: Callable[[], Any] | None = None

    def documents_frame(self):
        """The documents as a DataFrame of :data:`DOCS_SCHEMA` (built once)."""
        if self.frame is None:
            raise CorpusError(
                f"{self.what} has no DataFrame form (it was built from an RDD); the "
                f"DataFrame-only path ('execution' = 'dataframe') needs an input read by "
                f"read_uci, from_vectors or from_text."
            )
        cached = getattr(self, "_frame", None)
        if cached is None:
            cached = self.frame()
            self._frame = cached
        return cached[0]

    def release_frame(self) -> None:
        """Unpersist what building :meth:`documents_frame` cached (called once the
        corpus's blocks are cached); it is built again if asked for later."""
        cached = getattr(self, "_frame", None)
        self._frame = None
        for frame in cached[1] if cached else ():
            release_frame(frame)


def source_packs(source: DocSource):
    """The source's documents as an RDD of packs (:mod:`sparklda.packs`): its own
    (:attr:`DocSource.packs`) or its documents packed per partition."""
    from pyspark.sql.utils import is_remote

    # pyspark builds a mapInArrow's function for Spark Connect whenever the process is in
    # Connect mode (a process-wide switch), also for a classic session's DataFrame: a
    # classic session in such a process reads row by row
    if source.packs is not None and not is_remote():
        return source.packs()
    return source.rdd.mapPartitions(packs_of_docs)
