"""Benchmark inputs: one cached DataFrame per corpus, one shared held-out set.

A UCI bag-of-words corpus is read on the driver (pandas) into a DataFrame of
``doc_id`` (long) and ``features`` (a SparseVector of term counts, what
``CountVectorizer`` produces and ``pyspark.ml.clustering.LDA`` takes). The
held-out documents are chosen once with :func:`sparklda.corpus.split_documents`
(seeded hash of the document id) and turned into the document-completion
blocks every system is scored on; the training documents become the one
cached DataFrame every system trains from.
"""

from __future__ import annotations

import gzip
import os
from dataclasses import dataclass

import numpy as np

from ..corpus import heldout_blocks, read_vocab, split_documents, validate


@dataclass
class BenchCorpus:
    """What every system of one benchmark corpus shares."""

    name: str
    train_df: object  # cached DataFrame (doc_id: long, features: SparseVector)
    heldout: object  # cached RDD of HeldoutBlock
    vocab: list | None
    vocab_size: int
    n_train_docs: int
    n_train_tokens: float
    n_train_pairs: int
    n_heldout_docs: int
    replicate: int = 1

    def unpersist(self):
        self.train_df.unpersist()
        self.heldout.unpersist()


def read_uci_arrays(docword_path: str):
    """(doc ids, term ids, counts, D, V) of a UCI docword file, 0-based, read on the driver."""
    import pandas as pd

    opener = gzip.open if str(docword_path).endswith(".gz") else open
    with opener(docword_path, "rt") as f:
        n_docs = int(f.readline())
        n_words = int(f.readline())
        f.readline()
        table = pd.read_csv(f, sep=" ", header=None, names=["d", "w", "c"],
                            dtype={"d": np.int64, "w": np.int64, "c": np.float64},
                            engine="c")
    return (table["d"].to_numpy() - 1, table["w"].to_numpy() - 1, table["c"].to_numpy(),
            n_docs, n_words)


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
    docs = [(int(d[s]), w[s:e], c[s:e]) for s, e in zip(bounds[:-1], bounds[1:])]
    return docs, vocab, n_docs, v


def prepare(spark, name: str, path: str, heldout_count: int, seed: int = 0, replicate: int = 1,
            dtype=np.float32, n_parts: int | None = None) -> BenchCorpus:
    """Load a corpus, hold out ``heldout_count`` documents, cache both sides.

    The held-out documents are chosen by :func:`sparklda.corpus.split_documents`
    (a seeded hash of the document id, the choice ``fit`` itself makes) and
    split in halves by :func:`sparklda.corpus.heldout_blocks`. With
    ``replicate`` > 1 the training documents are copied under new ids
    (id + r·D) for the round-cost-versus-corpus-size measurement.
    """
    from pyspark import StorageLevel
    from pyspark.ml.linalg import SparseVector
    from pyspark.sql.types import LongType, StructField, StructType

    from ..corpus import DocSource
    from pyspark.ml.linalg import VectorUDT

    sc = spark.sparkContext
    docs, vocab, n_docs, v = uci_documents(path)
    n_parts = n_parts or sc.defaultParallelism
    source = DocSource(sc.parallelize(docs, n_parts), v, vocab, f"UCI corpus {path!r}",
                       declared_docs=n_docs)
    stats = validate(source)
    train_docs, held_docs = split_documents(source, stats, heldout_count=heldout_count,
                                            seed=seed)
    heldout = heldout_blocks(held_docs, seed, dtype)
    n_held = int(heldout.map(lambda h: h.n_docs).sum())

    def to_row(doc, r):
        i, t, c = doc
        return (int(i) + r * n_docs, SparseVector(v, np.asarray(t, np.int32),
                                                  np.asarray(c, np.float64)))

    rdd = train_docs.map(lambda doc: to_row(doc, 0))
    for r in range(1, replicate):
        rdd = rdd.union(train_docs.map(lambda doc, r=r: to_row(doc, r)))
    schema = StructType([StructField("doc_id", LongType(), False),
                         StructField("features", VectorUDT(), False)])
    train_df = spark.createDataFrame(rdd.coalesce(n_parts * max(1, replicate)), schema)
    train_df = train_df.persist(StorageLevel.MEMORY_AND_DISK)
    n_docs_t, n_tokens, n_pairs = train_docs.map(
        lambda doc: (1, float(np.sum(doc[2])), len(doc[1]))).reduce(
        lambda a, b: (a[0] + b[0], a[1] + b[1], a[2] + b[2]))
    n_rows = train_df.count()
    if n_rows != n_docs_t * replicate:
        raise RuntimeError(f"{name}: the training DataFrame has {n_rows} rows; expected "
                           f"{n_docs_t * replicate}")
    return BenchCorpus(name, train_df, heldout, vocab, v, n_rows, n_tokens * replicate,
                       n_pairs * replicate, n_held, replicate)
