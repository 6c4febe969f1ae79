"""Every input form, the layout, and every bad input's error."""

from __future__ import annotations

import gzip

import numpy as np
import pytest

from sparklda.block import DocBlock, split_halves
from sparklda.corpus import (
    CorpusError,
    DocSource,
    build_corpus,
    from_text,
    from_vectors,
    read_uci,
    split_documents,
)
from sparklda.errors import ParamError
from tests.helpers import planted_source


def write_uci(tmp_path, lines, header=(4, 5, None), vocab=("a", "b", "c", "d", "e"), gz=True):
    d, w, nnz = header
    body = "\n".join(lines)
    text = f"{d}\n{w}\n{nnz if nnz is not None else len(lines)}\n{body}\n"
    path = tmp_path / ("docword.txt.gz" if gz else "docword.txt")
    if gz:
        with gzip.open(path, "wt") as f:
            f.write(text)
    else:
        path.write_text(text)
    vpath = tmp_path / "vocab.txt"
    vpath.write_text("\n".join(vocab) + "\n")
    return str(path), str(vpath)


def collect_docs(source):
    return {d: (list(t), list(c)) for d, t, c in source.rdd.collect()}


def test_read_uci_counts_missing_documents_as_empty(spark, tmp_path):
    # document 2 has no lines: it is empty and must be counted, not lost
    docword, vocab = write_uci(tmp_path, ["1 1 2", "1 3 1", "3 2 4", "4 5 1", "4 1 1"])
    src = read_uci(spark, docword, vocab)
    docs = collect_docs(src)
    assert docs[0] == ([0, 2], [2.0, 1.0])
    assert docs[2] == ([1], [4.0])
    assert src.vocab == ["a", "b", "c", "d", "e"] and src.vocab_size == 5
    corpus = build_corpus(src, minibatch_size=2, seed=1)
    try:
        assert corpus.report["empty_documents_skipped"] == 1
        assert corpus.n_train_docs == 3
        assert corpus.n_train_tokens == 9
        assert corpus.n_slices == 2
        blocks = corpus.train.collect()
        assert sum(b.n_docs for b in blocks) == 3
        # each slice's partitions hold exactly that slice's documents
        assert [
            sum(
                b.n_docs
                for b in blocks[s * corpus.parts_per_slice : (s + 1) * corpus.parts_per_slice]
            )
            for s in range(corpus.n_slices)
        ] == list(corpus.slice_docs)
    finally:
        corpus.unpersist()


@pytest.mark.parametrize(
    "line,needle",
    [
        ("1 2 -1", "negative term count"),
        ("1 2 1.5", "non-integer term count"),
        ("1 2 nan", "non-finite term count"),
        ("1 9 1", "term id 9"),
        ("1 0 1", "term id 0"),
    ],
)
def test_read_uci_bad_counts_and_term_ids(spark, tmp_path, line, needle):
    docword, vocab = write_uci(tmp_path, ["1 1 2", line, "2 3 1"], gz=False)
    with pytest.raises(CorpusError, match=needle) as e:
        build_corpus(read_uci(spark, docword, vocab))
    assert "UCI docword file" in str(e.value)


def test_read_uci_vocabulary_mismatch_and_bad_header(spark, tmp_path):
    docword, _ = write_uci(tmp_path, ["1 1 2"])
    short = tmp_path / "short.txt"
    short.write_text("a\nb\n")
    with pytest.raises(CorpusError, match="declares W=5 terms but vocabulary file"):
        read_uci(spark, docword, str(short))
    bad = tmp_path / "bad.txt"
    bad.write_text("x\ny\nz\n1 1 1\n")
    with pytest.raises(CorpusError, match="first three lines must be the integers D, W and NNZ"):
        read_uci(spark, str(bad))


def test_empty_corpus_is_an_error(spark, tmp_path):
    docword, vocab = write_uci(tmp_path, ["1 1 0", "2 3 0"], gz=False)
    with pytest.raises(CorpusError, match="The corpus is empty"):
        build_corpus(read_uci(spark, docword, vocab))


def vector_df(spark, rows, size=5):
    from pyspark.ml.linalg import Vectors

    data = [
        (i, Vectors.sparse(size, dict(r)) if isinstance(r, list) else r) for i, r in enumerate(rows)
    ]
    return spark.createDataFrame(data, ["id", "features"])


def test_from_vectors_reads_sparse_and_dense(spark):
    from pyspark.ml.linalg import Vectors

    df = vector_df(spark, [[(0, 2.0), (3, 1.0)], [], Vectors.dense([0, 1, 0, 0, 3])])
    src = from_vectors(df, "features", id_col="id", vocab=list("abcde"))
    docs = collect_docs(src)
    assert docs[0] == ([0, 3], [2.0, 1.0])
    assert docs[1] == ([], [])
    assert docs[2] == ([1, 4], [1.0, 3.0])
    corpus = build_corpus(src, minibatch_size=10)
    try:
        assert corpus.report["empty_documents_skipped"] == 1
        assert corpus.n_train_tokens == 7
    finally:
        corpus.unpersist()


def test_from_vectors_bad_input(spark):
    df = vector_df(spark, [[(0, 2.0), (3, -1.0)]])
    with pytest.raises(CorpusError, match="column 'features' has a negative term count"):
        build_corpus(from_vectors(df, "features"))
    df = vector_df(spark, [[(0, 0.5)]])
    with pytest.raises(CorpusError, match="non-integer term count"):
        build_corpus(from_vectors(df, "features"))
    df = vector_df(spark, [[(0, float("inf"))]])
    with pytest.raises(CorpusError, match="non-finite term count"):
        build_corpus(from_vectors(df, "features"))
    with pytest.raises(CorpusError, match="Column 'nope' \\(featuresCol\\) does not exist"):
        from_vectors(df, "nope")
    with pytest.raises(CorpusError, match="must be of type pyspark.ml.linalg.VectorUDT"):
        from_vectors(df, "id")
    with pytest.raises(CorpusError, match="idCol\\) must be an integer column"):
        from_vectors(df.selectExpr("cast(id as string) as sid", "features"), "features", "sid")
    with pytest.raises(CorpusError, match="vocabulary has 2 terms but vectors"):
        from_vectors(vector_df(spark, [[(0, 1.0)]]), "features", vocab=["a", "b"])
    with pytest.raises(CorpusError, match="The corpus is empty"):
        build_corpus(from_vectors(vector_df(spark, [[], []]), "features"))


@pytest.mark.slow
def test_from_text_uses_spark_ml_tokenizer_stopwords_and_vocabulary_limits(spark):
    texts = [
        ("the cat sat on the mat",),
        ("The Cat ate the rat!",),
        ("",),
        ("dogs and cats and rats",),
        ("a mat for a cat",),
    ]
    df = spark.createDataFrame(texts, ["text"])
    src = from_text(df, "text", min_df=2)
    # stop words removed, lower-cased, terms in fewer than 2 documents dropped
    assert sorted(src.vocab) == ["cat", "mat"]
    docs = collect_docs(src)
    cat = src.vocab.index("cat")
    assert docs[1] == ([cat], [1.0])
    corpus = build_corpus(src, minibatch_size=10)
    try:
        assert corpus.report["empty_documents_skipped"] == 2  # "" and "dogs and cats and rats"
    finally:
        corpus.unpersist()
    with pytest.raises(CorpusError, match="Column 'body' \\(textCol\\) does not exist"):
        from_text(df, "body")
    with pytest.raises(CorpusError, match="must be a string column"):
        from_text(spark.createDataFrame([(1,)], ["text"]), "text")


def test_heldout_split_is_seeded_exact_and_disjoint(spark):
    src = planted_source(spark, n_docs=100, n_empty=2)
    a = build_corpus(src, minibatch_size=30, heldout_count=17, seed=5)
    b = build_corpus(src, minibatch_size=30, heldout_count=17, seed=5)
    c = build_corpus(src, minibatch_size=30, heldout_fraction=0.25, seed=6)
    try:

        def ids(rdd):
            return sorted(int(i) for h in rdd.collect() for i in h.observed.doc_ids)

        held_a = ids(a.heldout)
        assert len(held_a) == 17 == a.n_heldout_docs
        assert held_a == ids(b.heldout)
        train_ids = sorted(int(i) for blk in a.train.collect() for i in blk.doc_ids)
        assert not set(train_ids) & set(held_a)
        assert len(train_ids) + len(held_a) == 100
        assert 10 <= c.n_heldout_docs <= 40
        # halves split each held-out document's tokens, nothing lost
        for h in a.heldout.collect():
            assert np.array_equal(h.observed.doc_ids, h.target.doc_ids)
            tot = h.observed.doc_lengths() + h.target.doc_lengths()
            assert (np.abs(h.observed.doc_lengths() - tot / 2) <= 0.5).all()
    finally:
        for x in (a, b, c):
            x.unpersist()
    with pytest.raises(CorpusError, match="'heldout_count' parameter \\(500\\) must be smaller"):
        build_corpus(src, heldout_count=500)
    # parameters are checked before any Spark job, with the messages of sparklda.params
    sc = spark.sparkContext
    before = sc.statusTracker().getJobIdsForGroup()
    with pytest.raises(
        ParamError,
        match="^The 'heldout_fraction' parameter of build_corpus must "
        "be a float in the range \\[0, 1\\). Got 1.0 instead.$",
    ):
        build_corpus(src, heldout_fraction=1.0)
    with pytest.raises(
        ParamError,
        match="^The 'minibatch_size' parameter of build_corpus must be "
        "an int in the range \\[1, inf\\). Got 0 instead.$",
    ):
        build_corpus(src, minibatch_size=0)
    with pytest.raises(
        ParamError,
        match="'heldout_count' parameter of split_documents must be an "
        "int in the range \\[0, inf\\). Got 2.0 instead.",
    ):
        split_documents(src, {"docs": 100, "empty": 2}, heldout_count=2.0)
    assert sc.statusTracker().getJobIdsForGroup() == before


def test_doc_block_layout_and_split_halves():
    b = DocBlock.from_docs([(7, [4, 1], [1.0, 2.0]), (3, [9], [5.0]), (5, [], [])])
    assert list(b.doc_ids) == [3, 5, 7]
    assert list(b.terms) == [1, 4, 9]
    assert [list(t) for _, t, _ in b.iter_docs()] == [[9], [], [1, 4]]
    assert b.local.dtype == np.int32 and b.counts.dtype == np.float32
    # 8 bytes per pair plus 16 per document plus 4 per distinct term
    assert b.nbytes() == 3 * 8 + 4 * 8 + 3 * 4 + 3 * 4 + 3 * 4  # ids, indptr, terms, local, counts
    (ta, ca), (_tb, cb) = split_halves(11, np.array([1, 2, 3]), np.array([3, 1, 4]), seed=0)
    (ta2, ca2), _ = split_halves(11, np.array([1, 2, 3]), np.array([3, 1, 4]), seed=0)
    assert ca.sum() == 4 and cb.sum() == 4
    assert np.array_equal(ta, ta2) and np.array_equal(ca, ca2)


def test_docsource_rdd_of_bad_term_ids(spark):
    rdd = spark.sparkContext.parallelize([(0, np.array([0, 7]), np.array([1.0, 1.0]))])
    with pytest.raises(CorpusError, match="term id 7 in document 0, outside the vocabulary of 5"):
        build_corpus(DocSource(rdd, 5, None, "test input"))


def test_shipped_sample_is_read_on_the_driver_and_distributed(spark):
    """``sample:`` files are read from the driver's installed package and sent to the
    executors with the tasks, so executors that share neither the driver's disk nor
    its package read them too (no Hadoop file read in the lineage)."""
    src = read_uci(spark, "sample:kos/docword.txt.gz", "sample:kos/vocab.txt")
    lineage = src.rdd.toDebugString().decode()
    assert "ParallelCollectionRDD" in lineage and "HadoopRDD" not in lineage
    assert src.vocab_size == 6906 and len(src.vocab) == 6906 and src.vocab[0] == "aarp"
    assert src.declared_docs == 3430
