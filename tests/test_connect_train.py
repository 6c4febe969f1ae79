"""Training without RDDs: the DataFrame-only path (``execution = "dataframe"``, what
Spark Connect needs) builds the same corpus and, from the same seed, the same model as
the classic path, for every mode, in a classic session and in a Spark Connect session.

The kernels run in float64 here and both paths hand the same blocks, in the same
partition order, to the same per-partition functions and the same merge, so the
topics agree to the last bits; the tolerance (rtol 1e-6) only allows for a float64
sum taken in another order."""

from __future__ import annotations

import gzip
import os

import numpy as np
import pytest

from sparklda.api import fit
from sparklda.block import block_from_bytes
from sparklda.corpus import FrameLayout, build_corpus, from_vectors, read_uci
from sparklda.errors import CorpusError, ParamError
from sparklda.execution import DataFrameExecutor, backend_for
from sparklda.params import TrainParams
from sparklda.training import train
from tests.conftest import CONNECT_MODE
from tests.helpers import KOS_DOCWORD, Crash, CrashAt

N_DOCS = 160
MODES = ("scvb0", "svb", "cvb0", "cvb")


def build_frame_corpus(source, **kwargs):
    """The corpus of ``source`` laid out by the DataFrame layout (what the DataFrame
    backend builds)."""
    return build_corpus(source, layout=FrameLayout(), **kwargs)


def params(algorithm: str, **kw) -> TrainParams:
    base = {
        "algorithm": algorithm,
        "k": 4,
        "passes": 2 if algorithm in ("scvb0", "svb") else 3,
        "minibatch_size": 60,
        "heldout_count": 16,
        "seed": 7,
        "parts_per_slice": 2,
        "dtype": "float64",
    }
    return TrainParams(**{**base, **kw})


@pytest.fixture(scope="module")
def docword(tmp_path_factory) -> str:
    """The first N_DOCS documents of the shipped KOS corpus as a UCI docword file."""
    with gzip.open(KOS_DOCWORD, "rt") as f:
        _, n_words, _ = (int(f.readline()) for _ in range(3))
        body = [line for line in f if int(line.split()[0]) <= N_DOCS]
    path = tmp_path_factory.mktemp("uci") / "docword.txt"
    path.write_text(f"{N_DOCS}\n{n_words}\n{len(body)}\n" + "".join(body))
    return str(path)


@pytest.fixture(scope="module")
def classic_fits(spark, docword):
    """Fits in the classic session on either path, made once when first asked for:
    ``classic_fits(algorithm, execution)``."""
    done: dict = {}

    def get(alg: str, execution: str):
        if (alg, execution) not in done:
            # pyspark.sql.functions build Connect columns while the process-wide Connect
            # switch is on (the connect fixture): fit in the classic session with it off
            had = os.environ.pop(CONNECT_MODE, None)
            try:
                done[alg, execution] = fit(
                    read_uci(spark, docword), params(alg, execution=execution)
                )
            finally:
                if had is not None:
                    os.environ[CONNECT_MODE] = had
        return done[alg, execution]

    return get


def _blocks(corpus) -> dict:
    if corpus.kind == "dataframe":
        return {r["part"]: block_from_bytes(r["block"]) for r in corpus.train.collect()}
    return {i: b for i, b in enumerate(corpus.train.collect()) if b.n_docs}


def _heldout_ids(corpus) -> list:
    if corpus.kind == "dataframe":
        blocks = [block_from_bytes(r["observed"]) for r in corpus.heldout.collect()]
    else:
        blocks = [h.observed for h in corpus.heldout.collect()]
    return sorted(int(i) for b in blocks for i in b.doc_ids)


def _assert_same_corpus(a, b):
    # the same corpus, whoever laid it out (a classic session's small corpus: its driver)
    assert b.report["laid_out_on"] == "executors"
    assert {**a.report, "laid_out_on": None} == {**b.report, "laid_out_on": None}
    blocks_a, blocks_b = _blocks(a), _blocks(b)
    assert sorted(blocks_a) == sorted(blocks_b)
    for part, block in blocks_a.items():
        for name in ("doc_ids", "indptr", "terms", "local", "counts"):
            x, y = getattr(block, name), getattr(blocks_b[part], name)
            assert x.dtype == y.dtype and np.array_equal(x, y), (part, name)
    assert _heldout_ids(a) == _heldout_ids(b)
    assert np.array_equal(a.slice_bitmaps, b.slice_bitmaps)


CORPUS_ARGS = {"minibatch_size": 60, "heldout_count": 16, "seed": 7, "parts_per_slice": 2}


@pytest.fixture(scope="module")
def classic_corpus(spark, docword):
    corpus = build_corpus(read_uci(spark, docword), **CORPUS_ARGS)
    yield corpus
    corpus.unpersist()


@pytest.mark.slow
def test_corpus_knows_each_slices_terms(classic_corpus):
    """Corpus building reports each slice's distinct terms: the union of its blocks'."""
    blocks = _blocks(classic_corpus)
    p = classic_corpus.parts_per_slice
    sizes = []
    for s in range(classic_corpus.n_slices):
        parts = [blocks[i].terms for i in range(s * p, (s + 1) * p) if i in blocks]
        expected = np.unique(np.concatenate(parts))
        got = classic_corpus.slice_terms(s)
        assert got.dtype == np.int32 and np.array_equal(got, expected), s
        sizes.append(len(got))
    assert max(sizes) < classic_corpus.vocab_size


@pytest.mark.slow
@pytest.mark.parametrize("execution", ["classic", "dataframe"])
def test_scvb0_rounds_ship_only_their_slice_rows(classic_fits, classic_corpus, execution):
    """Every SCVB0 round, the first pass's included, ships N^Φ's rows of its slice's
    terms (with those terms' int32 ids, and 1/N^Z), not the whole vocabulary's."""
    result = classic_fits("scvb0", execution)
    k, item = 4, 8  # K, float64
    assert len(result.rounds) == 2 * classic_corpus.n_slices
    for rec in result.rounds:
        n_terms = len(classic_corpus.slice_terms(rec["slice"]))
        assert rec["shipped_bytes"] == 4 * n_terms + (n_terms + 1) * k * item, rec["round"]


@pytest.mark.slow
def test_dataframe_corpus_has_the_classic_blocks_and_split(spark, docword, classic_corpus):
    from pyspark.sql import functions as F

    frame = build_frame_corpus(read_uci(spark, docword), **CORPUS_ARGS)
    try:
        assert frame.kind == "dataframe"
        _assert_same_corpus(classic_corpus, frame)
        # block s * p + i in partition i: a round on slice s runs p tasks, one block each
        p = frame.parts_per_slice
        assert frame.train.rdd.getNumPartitions() == p
        where = frame.train.select("part", F.spark_partition_id().alias("at")).collect()
        assert sorted(r.part for r in where) == list(range(frame.n_slices * p))
        assert all(r.at == r.part % p for r in where)
    finally:
        frame.unpersist()


@pytest.mark.slow
def test_dataframe_corpus_is_a_checkpoint_that_unpersist_frees(spark, docword):
    """The DataFrame path's blocks are checkpointed: a round's plan starts from a scan of
    them, not from the building pipeline (docs/architecture.md, "Spark Connect path"),
    and ``Corpus.unpersist`` frees the checkpoint's blocks."""
    frame = build_frame_corpus(read_uci(spark, docword), **CORPUS_ARGS)
    plan = frame.train._jdf.queryExecution().analyzed()
    assert plan.getClass().getSimpleName() == "LogicalRDD"
    rdd_id = plan.rdd().id()
    persisted = spark.sparkContext._jsc.getPersistentRDDs()
    assert persisted.containsKey(rdd_id)
    frame.unpersist()
    assert not spark.sparkContext._jsc.getPersistentRDDs().containsKey(rdd_id)


class Refused(Exception):
    """What Databricks serverless raises for the caching APIs."""


@pytest.mark.parametrize(
    "refused, alg",
    [
        pytest.param(("persist", "unpersist"), "scvb0", marks=pytest.mark.slow),
        pytest.param(("persist", "unpersist", "localCheckpoint"), "scvb0", marks=pytest.mark.slow),
        pytest.param(("persist", "unpersist", "localCheckpoint"), "cvb0", marks=pytest.mark.slow),
    ],
    ids=["no cache", "no cache or checkpoint", "no cache or checkpoint, block states"],
)
def test_dataframe_path_trains_where_the_session_refuses_caching(
    spark, docword, classic_fits, monkeypatch, refused, alg
):
    """Serverless compute raises on cache()/persist()/unpersist(): the DataFrame path
    then reads its inputs again (and without checkpoints its blocks too) and trains the
    same model."""
    from pyspark.sql.classic.dataframe import DataFrame

    def refuse(name):
        def call(self, *args, **kwargs):
            raise Refused(f"[NOT_SUPPORTED_WITH_SERVERLESS] {name} is not supported on serverless")

        return call

    for name in refused:
        monkeypatch.setattr(DataFrame, name, refuse(name))
    result = fit(read_uci(spark, docword), params(alg, execution="dataframe"))
    expected = classic_fits(alg, "classic")
    assert result.report["rounds"] == expected.report["rounds"]
    np.testing.assert_allclose(result.model.topic_word, expected.model.topic_word, rtol=1e-6)


def test_other_errors_of_the_caching_apis_are_not_swallowed(spark, monkeypatch):
    from pyspark.sql.classic.dataframe import DataFrame

    from sparklda.storage import checkpoint_frame, persist_frame

    def broken(self, *args, **kwargs):
        raise Refused("the executor ran out of disk")

    frame = spark.range(3)
    for name, call in (("persist", persist_frame), ("localCheckpoint", checkpoint_frame)):
        monkeypatch.setattr(DataFrame, name, broken)
        with pytest.raises(Refused, match="out of disk"):
            call(frame, "the numbers")


@pytest.mark.slow
def test_exact_partition_column_puts_each_value_in_its_own_partition(spark):
    """Spark's hash partitioning is pmod(murmur3(key), n): the keys chosen in Python give
    value i partition i, for any n."""
    from pyspark.sql import functions as F

    from sparklda.corpus.frame import exact_partition_column, murmur3_int

    rows = spark.range(-40, 2000).select("id", F.hash(F.col("id").cast("int")).alias("h"))
    assert all(murmur3_int(r.id) == r.h for r in rows.collect())
    for n in (2, 3, 20):
        df = spark.range(0, 3 * n).select((F.col("id") % n).cast("int").alias("x"))
        out = df.repartition(n, exact_partition_column(F.col("x"), n))
        got = out.select("x", F.spark_partition_id().alias("at")).collect()
        assert sorted(r.x for r in got) == sorted(list(range(n)) * 3)
        assert all(r.x == r.at for r in got), n


@pytest.mark.slow
def test_connect_corpus_has_the_classic_blocks_and_split(connect, docword, classic_corpus):
    source = read_uci(connect, docword)
    assert backend_for(source.spark).name == "dataframe"  # no RDDs: the DataFrame backend
    with pytest.raises(ParamError, match="'execution' parameter is 'classic'"):
        backend_for(source.spark, "classic", source.what)
    frame = build_frame_corpus(source, **CORPUS_ARGS)
    try:
        _assert_same_corpus(classic_corpus, frame)
    finally:
        frame.unpersist()


def _vectors(session, docword, ids: bool):
    from pyspark.ml.linalg import Vectors

    with open(docword) as f:
        _, n_words, _ = (int(f.readline()) for _ in range(3))
        entries = [tuple(int(x) for x in line.split()) for line in f]
    docs: dict = {}
    for d, w, c in entries:
        docs.setdefault(d - 1, {})[w - 1] = float(c)
    rows = [(d + 1000, Vectors.sparse(n_words, docs[d])) for d in sorted(docs)]
    df = session.createDataFrame(rows, ["doc", "features"])
    return from_vectors(df, "features", "doc" if ids else None)


@pytest.mark.slow
@pytest.mark.parametrize("ids", [True, False], ids=["id column", "row position"])
def test_vector_corpus_matches_between_sessions(spark, connect, docword, ids):
    """from_vectors: documents numbered by an id column or by their position (the
    classic path's zipWithIndex) give the same blocks in a Connect session."""
    classic = build_corpus(_vectors(spark, docword, ids), **CORPUS_ARGS)
    remote = build_frame_corpus(_vectors(connect, docword, ids), **CORPUS_ARGS)
    try:
        _assert_same_corpus(classic, remote)
    finally:
        classic.unpersist()
        remote.unpersist()


@pytest.mark.parametrize(
    "alg", ["scvb0", *(pytest.param(a, marks=pytest.mark.slow) for a in MODES[1:])]
)
def test_every_mode_gives_the_same_model_on_every_path(classic_fits, connect, docword, alg):
    classic = classic_fits(alg, "classic")
    frames = classic_fits(alg, "dataframe")
    remote = fit(read_uci(connect, docword), params(alg))  # "auto": DataFrames under Connect
    assert frames.report["mode"]["execution"] == "dataframe"
    assert remote.report["mode"]["execution"] == "dataframe"
    assert "execution" not in classic.report["mode"]
    # the classic session lays this small corpus out on its driver, the DataFrame path
    # on the executors: the same blocks
    assert classic.report["corpus"]["laid_out_on"] == "driver"
    for other in (frames, remote):
        assert other.report["corpus"] == {**classic.report["corpus"], "laid_out_on": "executors"}
        assert other.report["rounds"] == classic.report["rounds"]
        np.testing.assert_allclose(other.model.topic_word, classic.model.topic_word, rtol=1e-6)
        np.testing.assert_allclose(
            other.evaluations[-1]["heldout_loglik"],
            classic.evaluations[-1]["heldout_loglik"],
            rtol=1e-9,
        )
        assert other.evaluations[-1]["heldout_documents"] == 16


@pytest.mark.slow
@pytest.mark.parametrize("alg", ["scvb0", "cvb0"])
def test_a_large_round_value_is_broadcast_joined(spark, docword, classic_fits, alg):
    """Above the closure limit the round value (and φ̂ for scoring) travels as a
    broadcast-joined DataFrame of chunks, with the same result."""
    p = params(alg, execution="dataframe")
    corpus = build_frame_corpus(read_uci(spark, docword), **CORPUS_ARGS)
    executor = DataFrameExecutor(corpus, closure_limit=1024)
    try:
        result = train(corpus, p, executor=executor)
    finally:
        corpus.unpersist()
    routes = result.report["mode"]["value_routes"]
    assert routes["join"] > 0 and routes["closure"] == 0
    expected = classic_fits(alg, "classic")
    np.testing.assert_allclose(result.model.topic_word, expected.model.topic_word, rtol=1e-6)
    np.testing.assert_allclose(
        result.evaluations[-1]["heldout_loglik"],
        expected.evaluations[-1]["heldout_loglik"],
        rtol=1e-9,
    )


@pytest.mark.slow
@pytest.mark.parametrize("alg", ["scvb0", "cvb0", "map"])
def test_resume_on_the_dataframe_path(connect, docword, classic_fits, tmp_path, alg):
    """A run interrupted under Spark Connect resumes from its checkpoint (block states
    included: MAP's kept N^Θ, whose restore computes no statistics) and ends with the
    uninterrupted model."""
    ck = str(tmp_path / "ck")
    p = params(alg, checkpoint_dir=ck, checkpoint_interval=2)
    with pytest.raises(Crash):
        fit(read_uci(connect, docword), p, callbacks=[CrashAt(3)])
    resumed = fit(read_uci(connect, docword), p, resume=True)
    assert resumed.report["resumed_after_round"] == 2
    expected = classic_fits(alg, "classic")
    assert resumed.report["rounds"] == expected.report["rounds"]
    np.testing.assert_allclose(resumed.model.topic_word, expected.model.topic_word, rtol=1e-6)


def test_bad_uci_line_under_connect(connect, tmp_path):
    path = tmp_path / "docword.txt"
    path.write_text("3\n5\n3\n1 2 1\n2 9 1\n3 1 2\n")
    source = read_uci(connect, str(path))
    with pytest.raises(CorpusError, match=r"docword.txt', line 5: '2 9 1' has term id 9"):
        build_frame_corpus(source, minibatch_size=10)


def test_wrong_vector_size_under_connect(connect):
    from pyspark.ml.linalg import Vectors

    df = connect.createDataFrame(
        [
            (Vectors.sparse(4, {0: 1.0}),),
            (Vectors.sparse(4, {1: 2.0}),),
            (Vectors.dense([1.0, 2.0]),),
        ],
        ["features"],
    )
    with pytest.raises(
        CorpusError, match="must all have the vocabulary size 4; document 2 has size 2"
    ):
        fit(from_vectors(df), TrainParams(k=2, passes=1))


@pytest.mark.slow
def test_text_corpus_matches_between_sessions(spark, connect):
    """from_text (Spark ML's tokenizer and CountVectorizer, then row positions as ids)
    gives the same corpus under Spark Connect."""
    from sparklda.corpus import from_text

    rows = [(f"apple banana cherry w{i % 7} dog egg fig w{i % 5} grape",) for i in range(60)]
    args = {"minibatch_size": 30, "heldout_count": 6, "seed": 2, "parts_per_slice": 2}
    had = os.environ.pop(CONNECT_MODE, None)
    try:
        classic = build_corpus(from_text(spark.createDataFrame(rows, ["text"])), **args)
    finally:
        if had is not None:
            os.environ[CONNECT_MODE] = had
    remote = build_frame_corpus(from_text(connect.createDataFrame(rows, ["text"])), **args)
    try:
        assert classic.vocab == remote.vocab
        _assert_same_corpus(classic, remote)
    finally:
        classic.unpersist()
        remote.unpersist()


@pytest.mark.slow
def test_warm_start_under_connect_remaps_the_vocabulary_as_classic(spark, connect):
    """fit(..., initial_model=...) on a Connect DataFrame: the corpus's terms are remapped
    onto the model's vocabulary (new terms appended) on the DataFrame path, and the
    model equals the same warm start in the classic session."""
    from sparklda.corpus import from_text
    from sparklda.model import TopicModel

    rows = [(f"apple banana cherry w{i % 7} dog egg fig w{i % 5} grape",) for i in range(40)]
    old_vocab = ["grape", "zebra", "apple", "w3", "dog", "yak"]
    rng = np.random.default_rng(3)
    start = TopicModel(rng.gamma(1.0, 5.0, (len(old_vocab), 3)), 0.1, 0.01, old_vocab)
    p = TrainParams(
        k=3,
        passes=2,
        minibatch_size=20,
        heldout_count=4,
        seed=5,
        parts_per_slice=2,
        dtype="float64",
    )
    had = os.environ.pop(CONNECT_MODE, None)
    try:
        classic = fit(from_text(spark.createDataFrame(rows, ["text"])), p, initial_model=start)
    finally:
        if had is not None:
            os.environ[CONNECT_MODE] = had
    remote = fit(from_text(connect.createDataFrame(rows, ["text"])), p, initial_model=start)
    assert remote.report["mode"]["execution"] == "dataframe"
    assert remote.model.vocab[: len(old_vocab)] == old_vocab
    assert remote.model.vocab == classic.model.vocab
    assert len(remote.model.vocab) > len(old_vocab)
    assert remote.report["rounds"] == classic.report["rounds"]
    np.testing.assert_allclose(remote.model.topic_word, classic.model.topic_word, rtol=1e-6)


def test_rounds_do_not_ask_the_server_for_schemas(connect, docword, monkeypatch):
    """Under Connect, ``mapInArrow`` lists its input's columns, which costs a round trip
    to the server for a frame of unknown schema: the round frames are filtered from one
    whose schema was asked for once, so rounds ask for none (docs/architecture.md, "Spark
    Connect path")."""
    asked: list[int] = []
    client = connect.client
    schema = client.schema
    in_round = [False]

    def counting(*args, **kw):
        if in_round[0]:
            asked.append(1)
        return schema(*args, **kw)

    monkeypatch.setattr(client, "schema", counting)
    run_round = DataFrameExecutor.run_round
    blocks = DataFrameExecutor._blocks

    def timed_round(self, mode, t):
        if self._blocks_frame is None:  # the one lookup, outside the count
            blocks(self)
        in_round[0] = True
        try:
            return run_round(self, mode, t)
        finally:
            in_round[0] = False

    monkeypatch.setattr(DataFrameExecutor, "run_round", timed_round)
    result = fit(read_uci(connect, docword), params("scvb0", eval_every=0))
    assert len(result.rounds) >= 4
    assert asked == []
