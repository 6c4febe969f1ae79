"""Benchmark inputs: cached DataFrames per corpus, one shared held-out set.

A UCI bag-of-words corpus is read on the driver (pandas) into a DataFrame of
``doc_id`` (long) and ``features`` (a SparseVector of term counts, what
``CountVectorizer`` produces and ``pyspark.ml.clustering.LDA`` takes):

* ``full_df``: every document. sparklda's :func:`~sparklda.api.fit` trains
  from it with ``TrainParams(heldout_count=..., seed=...)`` and holds the
  documents out itself.
* ``heldout``: the document-completion blocks every other system is scored
  on, built by :func:`sparklda.corpus.split_documents` and
  :func:`sparklda.corpus.heldout_blocks` from the very source ``fit`` gets,
  with the same count and seed: the same documents, split in the same halves.
* ``train_df``: ``full_df`` without the held-out documents, the one cached
  DataFrame MLlib and gensim train from.

``heldout_ids`` (the held-out document ids) lets a run check that ``fit``
held out exactly these documents (:func:`heldout_ids`).
"""

from __future__ import annotations

import gzip
import itertools
import os
from dataclasses import dataclass

import numpy as np

from sparklda.corpus import from_vectors, heldout_blocks, read_vocab, split_documents, validate


@dataclass
class BenchCorpus:
    """What every system of one benchmark corpus shares."""

    name: str
    full_df: object | None  # cached DataFrame of every document (None when replicated)
    train_df: object  # cached DataFrame (doc_id: long, features: SparseVector)
    heldout: object | None  # cached RDD of HeldoutBlock (None when replicated)
    heldout_ids: tuple
    heldout_count: int
    seed: int
    vocab: list | None
    vocab_size: int
    n_train_docs: int
    n_train_tokens: float
    n_train_pairs: int
    n_heldout_docs: int
    replicate: int = 1

    def sparklda_source(self):
        """The DocSource sparklda trains and is scored from: every document;
        ``fit`` holds out :attr:`heldout_ids` given :meth:`holdout_params`."""
        if self.full_df is None:
            raise ValueError(f"{self.name}: a replicated corpus has no held-out documents")
        return from_vectors(self.full_df, "features", id_col="doc_id", vocab=self.vocab)

    def training_source(self):
        """The training documents only (nothing to hold out: no evaluation)."""
        return from_vectors(self.train_df, "features", id_col="doc_id", vocab=self.vocab)

    def holdout_params(self) -> dict:
        """The TrainParams values that make ``fit`` hold out :attr:`heldout_ids`."""
        return {"heldout_count": self.heldout_count, "heldout_fraction": 0.0, "seed": self.seed}

    def unpersist(self):
        for x in (self.full_df, self.train_df, self.heldout):
            if x is not None:
                x.unpersist()


def read_uci_arrays(docword_path: str):
    """(doc ids, term ids, counts, D, V) of a UCI docword file, 0-based, read on the driver."""
    import pandas as pd

    opener = gzip.open if str(docword_path).endswith(".gz") else open
    with opener(docword_path, "rt") as f:
        n_docs = int(f.readline())
        n_words = int(f.readline())
        f.readline()
        table = pd.read_csv(
            f,
            sep=" ",
            header=None,
            names=["d", "w", "c"],
            dtype={"d": np.int64, "w": np.int64, "c": np.float64},
            engine="c",
        )
    return (
        table["d"].to_numpy() - 1,
        table["w"].to_numpy() - 1,
        table["c"].to_numpy(),
        n_docs,
        n_words,
    )


def uci_documents(path: str):
    """(documents as (doc_id, term ids int64, counts float64), vocabulary or None, D, V)
    of a UCI corpus folder, read on the driver."""
    docword = os.path.join(path, "docword.txt.gz")
    if not os.path.exists(docword):
        docword = os.path.join(path, "docword.txt")
    vocab_path = os.path.join(path, "vocab.txt")
    vocab = read_vocab(vocab_path) if os.path.exists(vocab_path) else None
    d, w, c, n_docs, v = read_uci_arrays(docword)
    bounds = np.flatnonzero(np.r_[True, d[1:] != d[:-1], True])
    docs = [(int(d[s]), w[s:e], c[s:e]) for s, e in itertools.pairwise(bounds)]
    return docs, vocab, n_docs, v


def heldout_ids(heldout_rdd) -> tuple:
    """The sorted document ids of an RDD of HeldoutBlock."""
    return tuple(sorted(heldout_rdd.flatMap(lambda h: h.observed.doc_ids.tolist()).collect()))


def prepare(
    spark,
    name: str,
    path: str,
    heldout_count: int,
    seed: int = 0,
    replicate: int = 1,
    dtype=np.float32,
    n_parts: int | None = None,
) -> BenchCorpus:
    """Load a corpus, hold out ``heldout_count`` documents, cache every side.

    With ``replicate`` > 1 the training documents are copied under new ids
    (id + r·D) for the round-cost-versus-corpus-size measurement; then only
    the replicated training DataFrame is kept (nothing is held out of it).
    """
    from pyspark import StorageLevel
    from pyspark.ml.linalg import SparseVector, VectorUDT
    from pyspark.sql.types import LongType, StructField, StructType

    if int(heldout_count) < 1:
        raise ValueError(
            f"{name}: every system is scored on held-out documents; the held-out "
            f"count (--heldout {name}=COUNT) must be at least 1, got {heldout_count}"
        )
    sc = spark.sparkContext
    docs, vocab, n_docs, v = uci_documents(path)
    n_parts = n_parts or sc.defaultParallelism
    schema = StructType(
        [StructField("doc_id", LongType(), False), StructField("features", VectorUDT(), False)]
    )

    def to_row(doc, r=0):
        i, t, c = doc
        return (
            int(i) + r * n_docs,
            SparseVector(v, np.asarray(t, np.int32), np.asarray(c, np.float64)),
        )

    # The repartition (a shuffle) cuts the lineage back to the driver's list: without it
    # every later stage (each MLlib iteration, each corpus-building job) would ship the
    # whole corpus inside its task.
    full_df = spark.createDataFrame(sc.parallelize(docs, n_parts).map(to_row), schema)
    full_df = full_df.repartition(n_parts).persist(StorageLevel.MEMORY_AND_DISK)
    full_df.count()
    # the source fit gets, split the way fit splits it
    source = from_vectors(full_df, "features", id_col="doc_id", vocab=vocab)
    stats = validate(source)
    train_docs, held_docs = split_documents(
        source, stats, heldout_count=int(heldout_count), seed=seed
    )
    heldout = heldout_blocks(held_docs, seed, dtype)
    held = heldout_ids(heldout)

    rdd = train_docs.map(to_row)
    for r in range(1, replicate):
        rdd = rdd.union(train_docs.map(lambda doc, r=r: to_row(doc, r)))
    train_df = spark.createDataFrame(rdd.coalesce(n_parts * max(1, replicate)), schema)
    train_df = train_df.persist(StorageLevel.MEMORY_AND_DISK)
    n_docs_t, n_tokens, n_pairs = train_docs.map(
        lambda doc: (1, float(np.sum(doc[2])), len(doc[1]))
    ).reduce(lambda a, b: (a[0] + b[0], a[1] + b[1], a[2] + b[2]))
    n_rows = train_df.count()
    if n_rows != n_docs_t * replicate:
        raise RuntimeError(
            f"{name}: the training DataFrame has {n_rows} rows; expected {n_docs_t * replicate}"
        )
    if replicate > 1:  # only the replicated training documents are used
        full_df.unpersist()
        heldout.unpersist()
        full_df = heldout = None
    return BenchCorpus(
        name,
        full_df,
        train_df,
        heldout,
        held,
        int(heldout_count),
        seed,
        vocab,
        v,
        n_rows,
        n_tokens * replicate,
        n_pairs * replicate,
        len(held),
        replicate,
    )
