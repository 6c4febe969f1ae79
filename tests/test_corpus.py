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
    load_text_dataframe,
    read_uci,
    read_vocab,
    split_documents,
)
from sparklda.errors import ParamError
from tests.helpers import KOS_DOCWORD, planted_source


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


@pytest.mark.slow
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


def _blocks(corpus):
    return sorted(
        (
            (i, b.doc_ids.tolist(), b.indptr.tolist(), b.global_pairs().tolist(), b.counts.tolist())
            for i, b in enumerate(corpus.train.collect())
        ),
    )


@pytest.mark.parametrize(
    "arrow_export",
    [True, pytest.param(False, marks=pytest.mark.slow)],
    ids=["arrow-export", "mapInArrow"],
)
@pytest.mark.slow
@pytest.mark.parametrize("id_col", ["id", None])
def test_from_vectors_reads_packs_the_same_documents_as_row_by_row(
    spark, id_col, arrow_export, monkeypatch
):
    """A classic session reads a vector column in packs (Arrow batches, no Python step
    per row): from Spark's Arrow export of the DataFrame, or through mapInArrow where
    this Spark has none. Its documents and blocks are those of the row-by-row reading."""
    from pyspark.ml.linalg import Vectors

    import sparklda.corpus.readers.vectors
    from sparklda.corpus import source_packs
    from sparklda.packs import docs_of_pack

    exported = []
    real = sparklda.corpus.readers.vectors.arrow_batch_rdd

    def export(df):
        exported.append(df)
        return real(df) if arrow_export else None

    monkeypatch.setattr(sparklda.corpus.readers.vectors, "arrow_batch_rdd", export)

    rng = np.random.default_rng(0)
    rows = []
    for i in range(300):
        if i % 37 == 0:
            vec = Vectors.dense(rng.integers(0, 2, 12).astype(float))
        elif i % 53 == 0:
            vec = Vectors.sparse(12, {})
        else:
            terms = np.sort(rng.choice(12, int(rng.integers(1, 6)), replace=False))
            vec = Vectors.sparse(
                12, dict(zip(terms.tolist(), rng.integers(0, 4, len(terms)), strict=True))
            )
        rows.append((int(1000 - 3 * i), vec))
    df = spark.createDataFrame(rows, ["id", "features"]).repartition(3)
    src = from_vectors(df, "features", id_col=id_col)
    assert src.packs is not None
    packs = source_packs(src).collect()
    assert len(exported) == 1
    # exact counts and term ids travel in 4 bytes (sparklda.packs.narrow_pack)
    assert {(q[1].dtype, q[2].dtype, q[3].dtype) for q in packs} == {
        (np.dtype(np.int32), np.dtype(np.int32), np.dtype(np.float32))
    }
    packed = [(d, t.tolist(), c.tolist()) for q in packs for d, t, c in docs_of_pack(q)]
    packed.sort()
    by_row = sorted((d, list(t), list(c)) for d, t, c in src.rdd.collect())
    assert packed == by_row and len(packed) == 300
    args = dict(minibatch_size=40, heldout_count=20, seed=3)
    fast = build_corpus(src, **args)
    slow = build_corpus(DocSource(src.rdd, src.vocab_size, None, src.what), **args)
    try:
        assert fast.report == slow.report
        assert _blocks(fast) == _blocks(slow)

        def held_ids(corpus):
            return sorted(i for h in corpus.heldout.collect() for i in h.observed.doc_ids.tolist())

        assert held_ids(fast) == held_ids(slow) and len(held_ids(fast)) == 20
    finally:
        fast.unpersist()
        slow.unpersist()


def test_from_vectors_null_id_is_a_corpus_error(spark):
    from pyspark.ml.linalg import Vectors, VectorUDT
    from pyspark.sql.types import LongType, StructField, StructType

    schema = StructType([StructField("id", LongType()), StructField("features", VectorUDT())])
    df = spark.createDataFrame(
        [(1, Vectors.sparse(3, {0: 1.0})), (None, Vectors.sparse(3, {1: 1.0}))], schema
    )
    with pytest.raises(CorpusError, match="id column of column 'features' \\(idCol\\) has a null"):
        build_corpus(from_vectors(df, "features", id_col="id"))


@pytest.mark.slow
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
    # the vocabulary gives the size; the vectors are checked against it when validated
    with pytest.raises(CorpusError, match="must all have the vocabulary size 2; document 0 has"):
        build_corpus(from_vectors(vector_df(spark, [[(0, 1.0)]]), "features", vocab=["a", "b"]))
    # a size the column declares (CountVectorizer's metadata) is checked against it at once
    declared = vector_df(spark, [[(0, 1.0)]]).withMetadata(
        "features", {"ml_attr": {"num_attrs": 5}}
    )
    with pytest.raises(CorpusError, match="vocabulary has 2 terms but vectors"):
        from_vectors(declared, "features", vocab=["a", "b"])
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


@pytest.mark.slow
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
        "an int in the range \\[0, inf\\). Got -1 instead.$",
    ):
        build_corpus(src, minibatch_size=-1)
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


# --------------------------------------------------------------------------
# UCI files whose header disagrees with the body: errors name the file and the line,
# found in the job that reads the file (build_corpus's validation), before training


def uci_body(n_docs=40, per_doc=4):
    """160 entry lines: every document has terms 1..per_doc once."""
    return [f"{d} {w} 1" for d in range(1, n_docs + 1) for w in range(1, per_doc + 1)]


BODY = uci_body()
UCI_CASES = [
    # (header (D, W, NNZ), body, message); header lines are lines 1-3, so entry i is line i + 4
    ((5, 50, 160), BODY, "line 24: '6 1 1' has document id 6, outside 1..D=5 (D is declared"),
    ((40, 3, 160), BODY, "line 7: '1 4 1' has term id 4, outside the vocabulary 1..W=3 (W is"),
    (
        (40, 50, 9999),
        BODY,
        ": the header declares NNZ=9999 entries (line 3) but the body has 160 entry lines "
        "(163 lines in all); the file is cut short or its header is wrong.",
    ),
    (
        (40, 50, 160),
        BODY[:80],
        ": the header declares NNZ=160 entries (line 3) but the body has 80 entry lines",
    ),
    (
        (40, 50, 160),
        BODY[:-1] + ["40 4"],
        "line 163: '40 4' has 2 field(s); expected 'docID wordID count' (three numbers, "
        "ids from 1).",
    ),
    ((40, 50, 160), BODY[:50] + ["0 3 1"] + BODY[51:], "line 54: '0 3 1' has document id 0"),
    ((40, 50, 160), BODY[:50] + ["13 0 1"] + BODY[51:], "line 54: '13 0 1' has term id 0"),
    ((40, 50, 160), BODY[:50] + ["13 x 1"] + BODY[51:], "line 54: '13 x 1' is not 'docID"),
    (
        (40, 50, 160),
        BODY[:100] + ["26 1 -2"] + BODY[101:],
        "line 104: '26 1 -2' has a negative term count; counts must be finite non-negative "
        "integers.",
    ),
]


# the gzip variants in the full suite only: the fast subset reads gzip files in
# test_truncated_or_corrupt_gzip_names_the_file and wherever KOS is read
@pytest.mark.parametrize(
    "gz", [False, pytest.param(True, marks=pytest.mark.slow)], ids=["text", "gzip"]
)
@pytest.mark.parametrize(
    "header,body,message",
    UCI_CASES,
    ids=["D", "W", "NNZ", "cut-in-half", "two-fields", "doc-0", "term-0", "not-a-number", "neg"],
)
def test_uci_header_and_body_must_agree(spark, tmp_path, gz, header, body, message):
    # several partitions for the plain file: line numbers count across Hadoop splits
    docword, _ = write_uci(tmp_path, body, header=header, gz=gz)
    source = read_uci(spark, docword, min_partitions=1 if gz else 4)
    if not gz:
        assert source.rdd.context.textFile(docword, 4).getNumPartitions() >= 4
    with pytest.raises(CorpusError) as e:
        build_corpus(source)
    assert str(e.value).startswith(f"UCI docword file {docword!r}")
    assert message in str(e.value)


@pytest.mark.parametrize("local_layout", [None, 0], ids=["driver-layout", "executors-layout"])
def test_uci_body_checks_run_in_the_validation_job(spark, tmp_path, local_layout):
    """The header is read with one small job; the body's checks need no job of their own."""
    docword, vocab = write_uci(
        tmp_path, BODY, header=(40, 50, 160), vocab=[f"w{i}" for i in range(50)]
    )
    sc = spark.sparkContext
    group = f"uci-jobs-{local_layout}"
    sc.setJobGroup(group, "count the jobs that read the file")
    try:
        corpus = build_corpus(
            read_uci(spark, docword, vocab), minibatch_size=20, local_layout=local_layout
        )
    finally:
        sc.setLocalProperty("spark.jobGroup.id", None)
    corpus.unpersist()
    jobs = [sc.statusTracker().getJobInfo(j) for j in sc.statusTracker().getJobIdsForGroup(group)]
    # the header (take), the vocabulary, validation (which brings this small corpus to the
    # driver for its layout), and the executors' block layout: the body is read once
    reads = [j for j in jobs if j is not None]
    assert len(reads) == (3 if local_layout is None else 4), [j.jobId for j in reads]


def test_uci_header_values(spark, tmp_path):
    docword, _ = write_uci(tmp_path, ["1 1 1"], header=(1, 0, 1), gz=False)
    with pytest.raises(CorpusError, match="line 2 declares W=0; it must be ≥ 1"):
        read_uci(spark, docword)
    short = tmp_path / "short.txt"
    short.write_text("3\n5\n")
    with pytest.raises(CorpusError, match="first three lines must be the integers D, W and NNZ"):
        read_uci(spark, str(short))


# --------------------------------------------------------------------------
# Compressed files cut short or corrupt


def cut_gzip(path, out, keep=0.5):
    data = open(path, "rb").read()
    with open(out, "wb") as f:
        f.write(data[: int(len(data) * keep)])
    return str(out)


def test_truncated_or_corrupt_gzip_names_the_file(spark, tmp_path):
    cut = cut_gzip(KOS_DOCWORD, tmp_path / "cut.txt.gz")
    with pytest.raises(CorpusError) as e:
        # reading the header may stream far enough to meet the end, else validation does
        build_corpus(read_uci(spark, cut))
    assert str(e.value) == (
        f"UCI docword file {cut!r} is not a valid, complete gzip file (java.io.EOFException: "
        "Unexpected end of input stream): it is cut short (an interrupted copy or download?) "
        "or corrupt."
    )
    garbage = tmp_path / "garbage.txt.gz"
    garbage.write_bytes(b"this is not gzip data at all\n" * 10)
    with pytest.raises(CorpusError) as e:
        read_uci(spark, str(garbage))  # found reading the header
    assert str(e.value).startswith(
        f"UCI docword file '{garbage}' is not a valid, complete gzip file "
        "(java.io.IOException: not a gzip file)"
    )
    # the vocabulary, through Spark and from the driver's disk
    vocab = tmp_path / "vocab.txt.gz"
    with gzip.open(vocab, "wt") as f:
        f.write("".join(f"term{i}\n" for i in range(5000)))
    vcut = cut_gzip(vocab, tmp_path / "vcut.txt.gz")
    for reader in (lambda: read_vocab(vcut, spark), lambda: read_vocab(vcut)):
        with pytest.raises(
            CorpusError, match=f"^Vocabulary file '{vcut}' is not a valid, complete gzip file"
        ):
            reader()
    # raw text read by Spark SQL's reader: the message names the file Spark names
    text = tmp_path / "docs.txt.gz"
    with gzip.open(text, "wt") as f:
        f.write("".join(f"document number {i} about cats\n" for i in range(20000)))
    tcut = cut_gzip(text, tmp_path / "tcut.txt.gz")
    with pytest.raises(CorpusError) as e:
        from_text(load_text_dataframe(spark, tcut))
    assert str(e.value).startswith(f"File 'file://{tcut}' is not a valid, complete gzip file")


# --------------------------------------------------------------------------
# Errors raised on the executors reach the user as the library's own


@pytest.mark.slow
def test_one_vector_of_another_size_fails_fit_with_a_corpus_error(spark):
    from pyspark.ml.linalg import Vectors

    from sparklda import LDA
    from sparklda.api import fit
    from sparklda.params import TrainParams
    from tests.helpers import Recorder

    rows = [(i, Vectors.sparse(5, {i % 5: 2.0})) for i in range(30)]
    rows.append((30, Vectors.sparse(7, {6: 1.0})))
    df = spark.createDataFrame(rows, ["id", "features"]).repartition(3)
    message = "Vectors in column 'features' must all have the vocabulary size 5; document"
    with pytest.raises(CorpusError) as e:
        LDA(k=2, maxIter=1).fit(df)
    assert type(e.value) is CorpusError and message in str(e.value)
    assert "has size 7." in str(e.value) and "Traceback" not in str(e.value)
    recorder = Recorder()
    with pytest.raises(CorpusError, match=message):
        fit(from_vectors(df, "features", id_col="id"), TrainParams(k=2), callbacks=[recorder])
    assert recorder.corpus is None and recorder.rounds == []  # before training
    with pytest.raises(CorpusError, match=f"{message} 30 has size 7."):
        build_corpus(from_vectors(df, "features", id_col="id"))


def test_transform_checks_the_size_up_front_and_errors_at_the_action(spark):
    from pyspark.ml.linalg import Vectors

    from sparklda.errors import executor_errors
    from sparklda.model import TopicModel

    model = TopicModel(np.ones((5, 2)), 0.1, 0.01)
    wrong = spark.createDataFrame([(0, Vectors.sparse(6, {0: 1.0}))], ["id", "features"])
    with pytest.raises(CorpusError, match="have size 6 but the model's vocabulary has 5 terms"):
        model.transform(wrong)  # the first vector's size, before the action
    mixed = spark.createDataFrame(
        [(0, Vectors.sparse(5, {0: 1.0})), (1, Vectors.sparse(6, {5: 1.0}))], ["id", "features"]
    ).coalesce(1)
    out = model.transform(mixed)  # lazy: the second vector is seen at the action
    with (
        pytest.raises(
            CorpusError, match="must all have the model's vocabulary size 5; document 1 has size 6"
        ),
        executor_errors(),
    ):
        out.collect()


def test_executor_errors_keeps_the_class_and_message_only(spark):
    from sparklda.errors import ModelPathError, ParamError, executor_errors

    def fail(x):
        if x == 3:
            raise ParamError("The 'k' parameter of test must be an int. Got 'x' instead.")
        return x

    with pytest.raises(ParamError) as e, executor_errors():
        spark.sparkContext.parallelize(range(5), 2).map(fail).collect()
    assert str(e.value) == "The 'k' parameter of test must be an int. Got 'x' instead."
    assert e.value.__cause__ is None and e.value.__suppress_context__
    assert type(e.value.spark_exception).__name__ in ("PythonException", "Py4JJavaError")

    def fail_other(x):
        raise KeyError("not ours")

    with pytest.raises(Exception) as e, executor_errors():  # other errors pass unchanged
        spark.sparkContext.parallelize([1]).map(fail_other).collect()
    assert not isinstance(e.value, ModelPathError | CorpusError | ParamError)
    assert "KeyError" in str(e.value)


# --------------------------------------------------------------------------
# Text encodings


def test_latin1_vocabulary_names_the_file_and_byte_or_reads_with_encoding(spark, tmp_path):
    vocab = tmp_path / "latin1-vocab.txt"
    vocab.write_bytes("abc\ncafé\nnaïve\n".encode("latin-1"))
    expected = (
        f"Vocabulary file '{vocab}' is not valid utf-8 text: byte offset 7 (line 2) holds "
        "byte 0xe9 (invalid continuation byte). Pass its encoding"
    )
    for reader in (lambda: read_vocab(str(vocab)), lambda: read_vocab(str(vocab), spark)):
        with pytest.raises(CorpusError) as e:
            reader()
        assert str(e.value).startswith(expected)
    assert read_vocab(str(vocab), spark, encoding="latin-1") == ["abc", "café", "naïve"]
    assert read_vocab(str(vocab), encoding="cp1252") == ["abc", "café", "naïve"]
    bom = tmp_path / "bom.txt"
    bom.write_bytes("\ufeffcafé\r\nthé\r\n".encode())  # Windows: BOM and CRLF
    assert read_vocab(str(bom), spark) == ["café", "thé"]
    docword, _ = write_uci(tmp_path, ["1 1 1", "2 3 1"], header=(2, 3, 2))
    with pytest.raises(CorpusError, match="is not valid utf-8 text"):
        read_uci(spark, docword, str(vocab))
    assert read_uci(spark, docword, str(vocab), encoding="latin-1").vocab == [
        "abc",
        "café",
        "naïve",
    ]


@pytest.mark.slow
def test_latin1_text_names_the_file_or_reads_with_encoding(spark, tmp_path):
    path = tmp_path / "docs.txt"
    path.write_bytes("the cat sat\ncafé au lait\n\nplain café\n".encode("latin-1"))
    with pytest.raises(CorpusError) as e:
        from_text(load_text_dataframe(spark, str(path)), min_token_length=1)
    assert str(e.value) == (
        f"File 'file:{path}' is not valid utf-8 text: the line starting 'caf\ufffd au lait' "
        "holds an invalid byte at byte offset 3 of the line. Pass its encoding (for example "
        "encoding='latin-1'; in a job's [input] table, encoding = \"latin-1\")."
    )
    for encoding in ("latin-1", "cp1252"):  # Spark decodes Latin-1, Python the others
        src = from_text(
            load_text_dataframe(spark, str(path), encoding=encoding), min_token_length=1
        )
        assert "café" in src.vocab and "caf" not in src.vocab
        docs = collect_docs(src)
        assert len(docs) == 4 and docs[2] == ([], [])  # the empty line is still a document
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"fine line\nbad \x81 byte\n")  # 0x81 is not a cp1252 character
    with pytest.raises(CorpusError) as e:
        from_text(load_text_dataframe(spark, str(bad), encoding="cp1252"))
    assert str(e.value).startswith(
        f"File 'file:{bad}' is not valid cp1252 text: the line starting 'bad \ufffd byte' "
        "holds byte 0x81 at byte offset 4 of the line"
    )
    jsonl = tmp_path / "docs.jsonl"
    jsonl.write_bytes('{"text": "café au lait"}\n{"text": "plain"}\n'.encode("latin-1"))
    with pytest.raises(CorpusError) as e:
        load_text_dataframe(spark, str(jsonl))  # Spark reads every line to infer the schema
    assert str(e.value).startswith(
        f"JSON lines file(s) '{jsonl}' hold a line that is not a JSON object in utf-8 "
        "(JsonParseException: Invalid UTF-8"
    )
    src = from_text(load_text_dataframe(spark, str(jsonl), encoding="latin-1"))
    assert "café" in src.vocab


def test_encoding_values_are_checked_before_any_job(spark, tmp_path):
    from sparklda.cli.config import ConfigError, check_config

    for fmt, encoding, needle in (
        (
            "text",
            "klingon",
            "must name a text encoding, such as 'utf-8' or 'latin-1'. Got 'klingon' instead.",
        ),
        ("text", "utf-16", "must be an encoding that writes ASCII as ASCII"),
        ("json", "cp1252", "must be one of the encodings Spark's JSON reader decodes"),
        ("parquet", "latin-1", "does not apply to format 'parquet'"),
    ):
        with pytest.raises(ParamError) as e:
            load_text_dataframe(spark, str(tmp_path / "x"), fmt, encoding=encoding)
        assert str(e.value).startswith("The 'encoding' parameter of load_text_dataframe ")
        assert needle in str(e.value)
        with pytest.raises(ConfigError) as e:
            check_config({"input": {"format": fmt, "path": "x", "encoding": encoding}})
        assert str(e.value).startswith("The 'input.encoding' parameter of the job configuration")
    with pytest.raises(ParamError, match="The 'encoding' parameter of read_vocab must name"):
        read_vocab(str(tmp_path / "v.txt"), encoding="base64")
    check_config({"input": {"format": "uci", "docword": "d", "encoding": "latin-1"}})


def test_source_from_config_passes_the_encoding(spark, tmp_path):
    from sparklda.api import source_from_config

    path = tmp_path / "docs.txt"
    path.write_bytes("café crème\ncafé noir\n".encode("latin-1"))
    src = source_from_config(spark, {"format": "text", "path": str(path), "encoding": "latin-1"})
    assert sorted(src.vocab) == ["café", "crème", "noir"]


# --------------------------------------------------------------------------
# heldout_count too large for the corpus


def test_heldout_count_at_least_the_documents_fails_before_training(spark):
    from sparklda.api import fit
    from sparklda.params import TrainParams
    from tests.helpers import Recorder

    src = planted_source(spark, n_docs=20, n_empty=2)
    recorder = Recorder()
    with pytest.raises(CorpusError) as e:
        fit(src, TrainParams(k=2, heldout_count=20), callbacks=[recorder])
    assert str(e.value) == (
        "The 'heldout_count' parameter (20) must be smaller than the number of non-empty "
        "documents (20 of the 22 documents of planted corpus) to leave documents to train on."
    )
    assert recorder.corpus is None and recorder.rounds == []


@pytest.mark.parametrize("path", ["rdd", pytest.param("dataframe", marks=pytest.mark.slow)])
def test_default_minibatch_follows_the_training_documents(spark, monkeypatch, path):
    """With ``minibatch_size`` 0 the corpus is cut for at most MAX_DEFAULT_ROUNDS_PER_PASS
    rounds a pass, counted on the training documents (held-out ones excluded), on both
    ways of building (the floors lowered so a small corpus shows it)."""
    import sparklda.params.defaults as params
    from sparklda.corpus import FrameLayout

    monkeypatch.setattr(params, "MIN_DEFAULT_MINIBATCH", 1)
    monkeypatch.setattr(params, "DEFAULT_DOCS_PER_TASK", 1)
    monkeypatch.setattr(params, "MAX_DEFAULT_ROUNDS_PER_PASS", 4)
    from pyspark.ml.linalg import Vectors

    src = planted_source(spark, n_docs=90)
    build = build_corpus
    if path == "dataframe":

        def build(source, **kwargs):
            return build_corpus(source, layout=FrameLayout(), **kwargs)

        rows = [
            (int(d), Vectors.sparse(src.vocab_size, list(t), list(c)))
            for d, t, c in src.rdd.collect()
        ]
        src = from_vectors(spark.createDataFrame(rows, ["id", "features"]), "features", "id")
    corpus = build(src, minibatch_size=0, heldout_count=20, seed=2)
    try:
        assert corpus.n_train_docs == 70
        assert corpus.report["minibatch_size"] == 18  # ceil(70 / 4)
        assert corpus.n_slices == 4
    finally:
        corpus.unpersist()


def test_the_validation_pass_tells_how_many_documents_are_held_out():
    from sparklda.corpus import (
        Holdout,
        heldout_keys,
        holdout_keys_summary,
        known_heldout_docs,
        merge_holdout_keys,
    )
    from sparklda.packs import make_pack

    ids = np.arange(100, 160, dtype=np.int64)
    lengths = np.ones(60, np.int64)
    lengths[::7] = 0  # empty documents: never held out
    pack = make_pack(ids, lengths, np.arange(lengths.sum()), np.ones(lengths.sum()))
    nonempty = ids[lengths > 0]
    keys = np.sort(heldout_keys(nonempty, 3))
    by_count = Holdout.of(0.5, 10, 3)  # a count takes precedence over a fraction
    assert by_count == Holdout(0.0, 10, 3) and Holdout.of(0.0, 0, 3) is None
    whole = holdout_keys_summary(pack, by_count)
    np.testing.assert_array_equal(whole, keys[:11])
    assert known_heldout_docs({"holdout": (by_count, whole)}, by_count) == 10
    # a tie with the 10th smallest key: not known without counting
    tied = whole.copy()
    tied[10] = tied[9]
    assert known_heldout_docs({"holdout": (by_count, tied)}, by_count) is None
    # gathered for another choice (or not at all): not known
    assert known_heldout_docs({"holdout": (Holdout(0.0, 10, 4), whole)}, by_count) is None
    assert known_heldout_docs({}, by_count) is None
    frac = Holdout.of(0.25, None, 3)
    n_below = int(np.count_nonzero(keys < 0.25))
    assert holdout_keys_summary(pack, frac) == n_below
    assert merge_holdout_keys(n_below, 2, frac) == n_below + 2
    assert known_heldout_docs({"holdout": (frac, n_below)}, frac) == n_below
    assert known_heldout_docs({}, None) == 0
    merged = merge_holdout_keys(whole[:5], whole[3:], by_count)
    np.testing.assert_array_equal(merged, np.sort(np.concatenate([whole[:5], whole[3:]]))[:11])
    assert merge_holdout_keys(None, whole, by_count) is whole


@pytest.mark.parametrize(
    "holdout",
    [{"heldout_count": 7}, pytest.param({"heldout_fraction": 0.2}, marks=pytest.mark.slow)],
)
def test_corpus_building_runs_two_jobs_whatever_is_held_out(spark, holdout):
    """Laid out by the executors (a corpus above ``local_layout``): validation (which
    also chooses the held-out documents) and one job that caches the training and the
    held-out blocks, no job to count either."""
    from pyspark.ml.linalg import Vectors

    rng = np.random.default_rng(0)
    rows = [
        (i, Vectors.sparse(30, {int(t): 1.0 + (i % 3) for t in rng.choice(30, 4, replace=False)}))
        for i in range(120)
    ]
    df = spark.createDataFrame(rows, ["id", "features"]).repartition(3).cache()
    df.count()
    source = from_vectors(df, "features", id_col="id", vocab=[f"w{i}" for i in range(30)])
    sc = spark.sparkContext
    group = f"sparklda-build-jobs-{sorted(holdout)[0]}"
    sc.setJobGroup(group, "corpus building")
    try:
        corpus = build_corpus(source, minibatch_size=40, seed=5, local_layout=0, **holdout)
    finally:
        sc.setLocalProperty("spark.jobGroup.id", None)
    try:
        jobs = sc.statusTracker().getJobIdsForGroup(group)
        assert len(jobs) == 2, jobs
        # one shuffle carries the training and the held-out documents: the caching job
        # runs its map stage and the stage that builds and caches the blocks
        caching = sc.statusTracker().getJobInfo(max(jobs))
        # (a stage of the source's own lineage shows up skipped: no task ran)
        ran = [
            info.name
            for info in map(sc.statusTracker().getStageInfo, caching.stageIds)
            if info is not None and info.numCompletedTasks > 0
        ]
        assert len(ran) == 2, ran
        # the counts are the documents really cached
        train_docs = sum(b.n_docs for b in corpus.train.collect())
        held_docs = sum(h.n_docs for h in corpus.heldout.collect())
        assert train_docs + held_docs == 120
        if "heldout_count" in holdout:
            assert held_docs == 7
        assert int(corpus.slice_docs.sum()) == train_docs
        assert len(corpus.slice_docs) == -(-train_docs // 40)
    finally:
        corpus.unpersist()
        df.unpersist()


def test_arrow_batch_rdd_holds_the_rows_of_the_dataframe(spark):
    """Spark's Arrow export of a DataFrame (the classic reading of a vector column):
    one RecordBatch per record, every row once, in the schema pyspark gives it."""
    from pyspark.ml.linalg import Vectors

    from sparklda.corpus import arrow_batch_rdd

    rows = [(i, Vectors.sparse(7, {i % 7: float(i + 1)})) for i in range(50)]
    df = spark.createDataFrame(rows, ["id", "features"]).repartition(3)
    batches = arrow_batch_rdd(df)
    assert batches is not None and batches.getNumPartitions() == 3
    got = sorted(
        (i, v["indices"], v["values"])
        for b in batches.collect()
        for i, v in zip(b.column("id").to_pylist(), b.column("features").to_pylist(), strict=True)
    )
    assert got == [(i, [i % 7], [float(i + 1)]) for i in range(50)]


def _held(corpus):
    return [
        [a.tolist() for h in (blk.observed, blk.target) for a in (h.doc_ids, h.terms, h.counts)]
        + [blk.observed.indptr.tolist(), blk.target.indptr.tolist()]
        for blk in corpus.heldout.collect()
    ]


def _jobs_of(sc, group, build):
    import uuid

    group = f"{group}-{uuid.uuid4().hex}"
    sc.setJobGroup(group, group)
    try:
        corpus = build()
    finally:
        sc.setLocalProperty("spark.jobGroup.id", None)
    return corpus, len(sc.statusTracker().getJobIdsForGroup(group))


@pytest.mark.parametrize(
    "split",
    [
        pytest.param(dict(heldout_count=17), marks=pytest.mark.slow),
        pytest.param(dict(heldout_fraction=0.2), marks=pytest.mark.slow),
        dict(),
    ],
    ids=["count", "fraction", "none"],
)
def test_a_small_corpus_is_laid_out_on_the_driver_with_the_executors_blocks(spark, split):
    """A corpus of at most ``local_layout`` pairs comes back with the validation pass and
    is laid out on the driver: one Spark job instead of a job and a shuffle, and the same
    blocks, partition by partition, training and held-out, as the executors lay out."""
    src = planted_source(spark, n_docs=300, n_empty=3)
    args = dict(minibatch_size=40, seed=5, **split)
    sc = spark.sparkContext
    local, local_jobs = _jobs_of(sc, "layout-driver", lambda: build_corpus(src, **args))
    shuffled, shuffled_jobs = _jobs_of(
        sc, "layout-executors", lambda: build_corpus(src, local_layout=0, **args)
    )
    try:
        assert local.report.pop("laid_out_on") == "driver"
        assert shuffled.report.pop("laid_out_on") == "executors"
        assert local.report == shuffled.report
        assert local_jobs == 1 and shuffled_jobs == 2
        n_parts = local.n_slices * local.parts_per_slice
        assert local.train.getNumPartitions() == shuffled.train.getNumPartitions() == n_parts
        assert _blocks(local) == _blocks(shuffled)
        assert np.array_equal(local.slice_bitmaps, shuffled.slice_bitmaps)
        assert np.array_equal(local.slice_docs, shuffled.slice_docs)
        if split:
            assert local.heldout.getNumPartitions() == shuffled.heldout.getNumPartitions()
            assert _held(local) == _held(shuffled)
            assert local.n_heldout_docs == shuffled.n_heldout_docs > 0
        else:
            assert local.heldout is None and shuffled.heldout is None
        # above the limit, or above a partition's share of it, the executors lay it out
        pairs = sum(len(t) for _, t, _ in src.rdd.collect())
        for limit in (pairs // 2, pairs - 1):
            bigger = build_corpus(src, local_layout=limit, **args)
            try:
                assert bigger.report["laid_out_on"] == "executors"
            finally:
                bigger.unpersist()
    finally:
        local.unpersist()
        shuffled.unpersist()


def test_the_driver_layout_tasks_do_not_carry_the_blocks(spark, monkeypatch):
    """The driver's layout serves each block from a broadcast variable of its own (blocks
    of at least ``SERVED_BLOCK_BYTES`` on average), so a partition of the training (or
    held-out) blocks, which every task of every round on them carries, is a few hundred
    bytes, not its block (``sc.parallelize`` puts the block in the partition);
    releasing the corpus destroys the broadcasts."""
    import sparklda.corpus.layout

    monkeypatch.setattr(sparklda.corpus.layout, "SERVED_BLOCK_BYTES", 1000)
    src = planted_source(spark, n_docs=600)
    corpus = build_corpus(src, minibatch_size=600, seed=5, heldout_count=30)
    jvm = spark.sparkContext._jvm
    try:
        assert corpus.report["laid_out_on"] == "driver"
        n_parts = corpus.train.getNumPartitions()
        assert corpus.train.count() == n_parts > 1
        shares = corpus.train.served_by + corpus.heldout.served_by
        assert len(shares) == n_parts + corpus.heldout.getNumPartitions()
        block_bytes = min(b.counts.nbytes + b.local.nbytes for b in corpus.train.collect())
        assert block_bytes > 8000
        for rdd in (corpus.train, corpus.heldout):
            for part in rdd._jrdd.rdd().partitions():
                assert len(jvm.org.apache.spark.util.Utils.serialize(part)) < block_bytes / 8
        assert all(share._jbroadcast.isValid() for share in shares)
    finally:
        corpus.unpersist()
    assert not any(share._jbroadcast.isValid() for share in shares)


@pytest.mark.parametrize("algorithm", ["scvb0", pytest.param("cvb0", marks=pytest.mark.slow)])
def test_the_model_is_the_same_whoever_lays_out_the_corpus(spark, algorithm, monkeypatch):
    """Training on blocks laid out on the driver gives the model of the executors' layout
    to the last bit, also for a mode whose block states live on the executors."""
    import sparklda.corpus.layout
    from sparklda.api import fit
    from sparklda.params import TrainParams

    params = TrainParams(
        algorithm=algorithm, k=4, passes=2, minibatch_size=60, seed=2, heldout_count=20
    )
    src = planted_source(spark, n_docs=200)
    on_driver = fit(src, params)
    monkeypatch.setattr(sparklda.corpus.layout, "LOCAL_LAYOUT_MAX_PAIRS", 0)
    on_executors = fit(src, params)
    assert on_driver.report["corpus_build_seconds"] > 0
    assert np.array_equal(on_driver.model.topic_word, on_executors.model.topic_word)
    assert [e["heldout_loglik"] for e in on_driver.evaluations] == [
        e["heldout_loglik"] for e in on_executors.evaluations
    ]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_heldout_block_is_the_per_document_reference(dtype):
    """heldout_block draws the documents' keys at once and builds each half in packs:
    the blocks of the per-document reference, to the bit, whatever the documents'
    order, with unsorted or repeated terms, one-token documents and no documents."""
    from sparklda.corpus import heldout_block
    from tests import reference

    rng = np.random.default_rng(3)
    docs = []
    for i in rng.permutation(60):
        n = int(rng.integers(1, 9))
        terms = rng.integers(0, 40, n)
        if i % 3:
            terms = np.unique(terms)
        counts = rng.integers(1, 5, len(terms)).astype(float)
        if i % 11 == 0:
            terms, counts = terms[:1], np.ones(1)
        docs.append((int(i) * 7 + 1, terms, counts))
    fields = ("doc_ids", "indptr", "terms", "local", "counts")
    for batch in (docs, docs[:1], []):
        got = heldout_block(iter(batch), seed=5, dtype=dtype)
        want = reference.heldout_block(batch, seed=5, dtype=dtype)
        for half, ref in zip((got.observed, got.target), want, strict=True):
            for name in fields:
                a, b = getattr(half, name), getattr(ref, name)
                assert a.dtype == b.dtype and np.array_equal(a, b), (len(batch), name)


def test_the_driver_counts_the_training_documents_when_held_out_keys_tie(spark):
    """Documents that share an id share a held-out key: a tie at the count's boundary
    leaves the number held out unknown to the validation pass, and the driver's layout
    counts it itself, as the executors' layout does with a job."""
    from tests.helpers import planted_docs

    docs, v = planted_docs(n_docs=60)
    twice = [(d[0] // 2, d[1], d[2]) for d in docs]  # ids 0, 0, 1, 1, ...
    src = DocSource(spark.sparkContext.parallelize(twice, 3), v, None, "tied ids")
    args = dict(minibatch_size=20, seed=4, heldout_count=7)
    local = build_corpus(src, **args)
    shuffled = build_corpus(src, local_layout=0, **args)
    try:
        assert local.report.pop("laid_out_on") == "driver"
        assert shuffled.report.pop("laid_out_on") == "executors"
        assert local.report == shuffled.report
        assert local.n_heldout_docs == 8  # the 7th smallest key's twin is held out too
        assert local.n_train_docs == 52
        assert _blocks(local) == _blocks(shuffled)
        assert _held(local) == _held(shuffled)
    finally:
        local.unpersist()
        shuffled.unpersist()
