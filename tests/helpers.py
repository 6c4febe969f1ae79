"""Helpers shared by the tests: paths of the shipped and shared corpora, a planted
corpus and its recovery check, a callback that records rounds."""

from __future__ import annotations

import os

import numpy as np

from sparklda.training import Callback

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHARED_DATA = os.environ.get("SPARKLDA_SHARED_DATA", os.path.join(ROOT, "..", "shared", "data"))
KOS_DOCWORD = os.path.join(ROOT, "sparklda", "data", "kos", "docword.txt.gz")
KOS_VOCAB = os.path.join(ROOT, "sparklda", "data", "kos", "vocab.txt")


class Recorder(Callback):
    """Keeps every round record (``rounds``) and evaluation record (``evaluations``)."""

    def __init__(self):
        self.rounds: list = []
        self.evaluations: list = []
        self.corpus = None

    def on_corpus(self, corpus):
        self.corpus = corpus

    def on_round(self, record):
        self.rounds.append(record)

    def on_evaluation(self, record):
        self.evaluations.append(record)


def planted_docs(n_topics=4, words_per_topic=6, n_docs=160, doc_len=40, n_empty=3, seed=0):
    """A planted corpus: topic t owns words [t*w, (t+1)*w); each document draws
    its tokens from one or two topics. Returns (docs, vocab_size) with docs a
    list of (doc_id, term_ids, counts) including ``n_empty`` empty documents."""
    rng = np.random.default_rng(seed)
    v = n_topics * words_per_topic
    docs = []
    for d in range(n_docs):
        topics = rng.choice(n_topics, size=rng.integers(1, 3), replace=False)
        mix = rng.dirichlet(np.ones(len(topics)))
        z = rng.choice(topics, size=doc_len, p=mix)
        words = z * words_per_topic + rng.integers(0, words_per_topic, size=doc_len)
        terms, counts = np.unique(words, return_counts=True)
        docs.append((d, terms.astype(np.int64), counts.astype(np.float64)))
    for e in range(n_empty):
        docs.append((n_docs + e, np.zeros(0, np.int64), np.zeros(0)))
    return docs, v


def planted_source(spark, **kw):
    from sparklda.corpus import DocSource

    docs, v = planted_docs(**kw)
    rdd = spark.sparkContext.parallelize(docs, 3)
    return DocSource(rdd, v, [f"w{i}" for i in range(v)], "planted corpus")


def assert_recovers_planted(topic_word, n_topics=4, words_per_topic=6):
    """Each planted block of words is the top of exactly one learned topic."""
    phi = np.asarray(topic_word, dtype=np.float64)
    phi = phi / phi.sum(0, keepdims=True)
    owners = set()
    for t in range(n_topics):
        block = phi[t * words_per_topic:(t + 1) * words_per_topic]  # (w, K)
        k = int(block.sum(0).argmax())
        assert block[:, k].sum() > 0.9, f"block {t} holds only {block[:, k].sum():.2f} of topic {k}"
        owners.add(k)
    assert len(owners) == n_topics, "two planted blocks were merged into one topic"
