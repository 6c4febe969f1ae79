"""Topic coherence: the counting kernel against a plain reference, and u_mass / c_npmi on
Spark against gensim's CoherenceModel (the oracle) on a shared corpus."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from sparklda.coherence import count_dataframe, top_terms
from sparklda.corpus import DocSource
from sparklda.errors import CorpusError, ParamError
from sparklda.kernels.coherence import cooccurrence_counts, npmi_scores, umass_scores
from sparklda.model import TopicModel
from tests import reference as ref
from tests.helpers import kos_word_docs


def random_docs(rng, n_docs=40, n_terms=7):
    docs = []
    for _ in range(n_docs):
        length = int(rng.integers(0, 25))  # empty, shorter and longer than the windows
        docs.append(rng.integers(-1, n_terms, size=length))
    return docs


@pytest.mark.parametrize("window", [0, 1, 3, 10])
def test_counts_equal_the_reference(window):
    rng = np.random.default_rng(window)
    n_terms = 7
    docs = random_docs(rng, n_terms=n_terms)
    indptr = np.concatenate([[0], np.cumsum([len(d) for d in docs])]).astype(np.int64)
    flat = np.concatenate(docs).astype(np.int32)
    occ, co, n = cooccurrence_counts(indptr, flat, n_terms, window)
    r_occ, r_co, r_n = ref.coherence_counts(docs, n_terms, window)
    assert n == r_n and (occ == r_occ).all() and (co == r_co).all()
    top = np.array([[0, 1, 2, 3], [6, 5, 4, 0]])
    assert umass_scores(top, occ, co, n) == pytest.approx(ref.umass(top, occ, co, n), rel=1e-12)
    assert npmi_scores(top, occ, co, n) == pytest.approx(ref.npmi(top, occ, co, n), rel=1e-12)


def test_scores_of_a_hand_counted_corpus():
    # 4 documents over terms a=0, b=1: a in 3, b in 2, both in 1
    docs = [[0, 1], [0], [0, -1], [1]]
    indptr = np.array([0, 2, 3, 5, 6], np.int64)
    occ, co, n = cooccurrence_counts(indptr, np.concatenate(docs).astype(np.int32), 2)
    assert (occ == [3, 2]).all() and co[0, 1] == co[1, 0] == 1 and n == 4
    # u_mass of the topic (a, b): log((D(b, a)/4 + ε) / (D(a)/4)) = log(1/3)
    assert umass_scores(np.array([[0, 1]]), occ, co, n)[0] == pytest.approx(np.log(1 / 3))
    p_ab, p_a, p_b = 1 / 4, 3 / 4, 2 / 4
    npmi = np.log(p_ab / (p_a * p_b)) / -np.log(p_ab)
    assert npmi_scores(np.array([[0, 1]]), occ, co, n)[0] == pytest.approx(npmi)


# --------------------------------------------------------------------------
# Spark against gensim


@pytest.fixture(scope="module")
def shared(spark):
    """KOS documents as token lists (each distinct word once, in a seeded order: see
    the c_npmi test), their count vectors, and topics made of word counts of groups of
    documents, so that the top words do co-occur."""
    from pyspark.ml.linalg import SparseVector

    rng = np.random.default_rng(0)
    docs = []
    for d, words in kos_word_docs(0, 250):
        distinct = sorted(set(words))
        docs.append((d, [distinct[i] for i in rng.permutation(len(distinct))]))
    vocab = sorted({w for _, ws in docs for w in ws})
    index = {w: i for i, w in enumerate(vocab)}
    rows = []
    for d, ws in docs:
        ids, counts = np.unique([index[w] for w in ws], return_counts=True)
        rows.append((d, ws, SparseVector(len(vocab), ids.tolist(), counts.astype(float).tolist())))
    df = spark.createDataFrame(rows, ["id", "words", "features"]).repartition(3)
    k = 6
    tw = np.zeros((len(vocab), k))
    for d, ws in docs:
        for w in ws:
            tw[index[w], d % k] += 1.0
    model = TopicModel(tw, 0.1, 0.01, vocab)
    # for the Connect test, which cannot run classic jobs
    classic = {
        "npmi": model.coherence(df, "c_npmi", 10, tokens_col="words"),
        "umass": model.coherence(df, "u_mass", 10),
        "rows": rows,
    }
    return {"docs": docs, "vocab": vocab, "df": df, "model": model, "classic": classic}


def gensim_coherence(shared, measure, top_n, **kw):
    from gensim.corpora import Dictionary
    from gensim.models.coherencemodel import CoherenceModel

    texts = [ws for _, ws in shared["docs"]]
    dictionary = Dictionary(texts)
    topics = [t["terms"] for t in shared["model"].describe_topics(top_n)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if measure == "u_mass":
            kw["corpus"] = [dictionary.doc2bow(t) for t in texts]
        else:
            kw["texts"] = texts
        cm = CoherenceModel(
            topics=topics, dictionary=dictionary, coherence=measure, topn=top_n, processes=1, **kw
        )
        return cm.get_coherence_per_topic()


@pytest.mark.slow
def test_u_mass_equals_gensim(shared):
    from sparklda.ml import LDAModel

    ours = LDAModel(shared["model"]).topicCoherence(shared["df"], topN=10)
    expected = gensim_coherence(shared, "u_mass", 10)
    assert len(ours) == 6
    assert ours == pytest.approx(expected, rel=1e-6)
    assert max(ours) < 0  # a log of conditional probabilities
    # from the token arrays, the same documents give the same counts
    tokens = shared["model"].coherence(shared["df"], "u_mass", 10, tokens_col="words")
    assert tokens == pytest.approx(ours, rel=1e-12)


@pytest.mark.slow
def test_c_npmi_with_sliding_windows_equals_gensim(shared):
    ours = shared["model"].coherence(shared["df"], "c_npmi", 10, tokens_col="words", window=10)
    expected = gensim_coherence(shared, "c_npmi", 10, window_size=10)
    assert ours == pytest.approx(expected, abs=1e-3)
    assert all(-1 <= c <= 1 for c in ours)


@pytest.mark.slow
def test_c_npmi_over_whole_documents_from_vectors(shared):
    """Without tokens, every document is one window: gensim's sliding window as long as the
    longest document counts the same thing."""
    ours = shared["model"].coherence(shared["df"], "c_npmi", 8)
    longest = max(len(ws) for _, ws in shared["docs"])
    expected = gensim_coherence(shared, "c_npmi", 8, window_size=longest)
    assert ours == pytest.approx(expected, abs=1e-3)


@pytest.mark.slow
def test_a_doc_source_gives_the_dataframes_counts(spark, shared):
    model, vocab = shared["model"], shared["vocab"]
    index = {w: i for i, w in enumerate(vocab)}
    docs = []
    for d, ws in shared["docs"]:
        ids, counts = np.unique([index[w] for w in ws], return_counts=True)
        docs.append((d, ids.astype(np.int64), counts.astype(np.float64)))
    source = DocSource(spark.sparkContext.parallelize(docs, 2), len(vocab), vocab, "test docs")
    needed, _ = top_terms(model.topics_matrix(), 5)
    from sparklda.coherence import count_source

    a = count_source(source, needed)
    b = count_dataframe(shared["df"], needed, features_col="features")
    assert a[2] == b[2] == len(docs) and (a[0] == b[0]).all() and (a[1] == b[1]).all()
    assert model.coherence(source, top_n=5) == pytest.approx(model.coherence(shared["df"], top_n=5))


@pytest.mark.slow
def test_bad_arguments_are_refused(shared):
    model, df = shared["model"], shared["df"]
    with pytest.raises(ParamError, match="'measure' parameter of coherence must be one of"):
        model.coherence(df, measure="c_v")
    with pytest.raises(ParamError, match="'top_n' parameter of coherence must be an int"):
        model.coherence(df, top_n=1)
    with pytest.raises(CorpusError, match=r"Column 'id' \(tokensCol\) must be an array of str"):
        model.coherence(df, tokens_col="id")
    nameless = TopicModel(model.topic_word, 0.1, 0.01)
    with pytest.raises(CorpusError, match="has no vocabulary"):
        nameless.coherence(df, tokens_col="words")


@pytest.mark.slow
def test_coherence_under_spark_connect(shared, connect):
    """The counting ships the needed terms in its closure and uses mapInArrow: no
    broadcast, no RDD, so a Connect DataFrame works."""
    classic = shared["classic"]
    df = connect.createDataFrame(classic["rows"], ["id", "words", "features"]).repartition(2)
    ours = shared["model"].coherence(df, "c_npmi", 10, tokens_col="words")
    assert ours == pytest.approx(classic["npmi"], rel=1e-12)
    # the count vectors too (a VectorUDT column reaches mapInArrow as its struct)
    assert shared["model"].coherence(df, "u_mass", 10) == pytest.approx(classic["umass"])


@pytest.mark.slow
def test_corpus_coherence_scores_the_training_documents(spark):
    from sparklda.api import fit
    from sparklda.coherence import CorpusCoherence
    from sparklda.params import TrainParams
    from tests.helpers import planted_source

    source = planted_source(spark)
    cb = CorpusCoherence("u_mass", 5)
    res = fit(source, TrainParams(k=4, passes=2, minibatch_size=80, seed=0), callbacks=[cb])
    assert cb.result["measure"] == "u_mass" and len(cb.result["per_topic"]) == 4
    # nothing held out: the training documents are the source's non-empty ones (the 3 empty
    # documents only change ε's weight)
    expected = res.model.coherence(source, "u_mass", 5)
    assert cb.result["per_topic"] == pytest.approx(expected, rel=1e-9)
    assert cb.result["mean"] == pytest.approx(np.mean(expected))
    # planted topics own disjoint blocks of words that co-occur: u_mass near its maximum 0
    assert cb.result["mean"] > -1.0
