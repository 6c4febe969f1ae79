"""Hostile storage (issue 35): writers racing on one path, paths whose names Hadoop would
read as globs, unknown schemes, and damaged or foreign saved models. Each case gives one
library error naming the path and what is wrong, and what is at a path always loads."""

from __future__ import annotations

import glob
import json
import os
import pickle
import threading

import numpy as np
import pytest

from sparklda.errors import ConcurrentWriteError, ModelFormatError, ModelPathError
from sparklda.model import TopicModel


def small_model(value: float, v: int = 7, k: int = 3) -> TopicModel:
    return TopicModel(np.full((v, k), value), 0.1, 0.01, [f"t{i}" for i in range(v)])


# --------------------------------------------------------------------------
# Concurrent writers


def _race(n, save, hook_target, hook_name, monkeypatch):
    """Run ``save(i)`` in ``n`` threads, each stopping at a barrier inside
    ``hook_target.hook_name`` (after its payload is written, before its commit): the
    interleaving in which every writer has taken the same sequence number. Returns the
    outcome of each (None or the exception)."""
    barrier = threading.Barrier(n, timeout=120)
    real = getattr(hook_target, hook_name)

    def hooked(*a, **kw):
        out = real(*a, **kw)
        barrier.wait()
        return out

    monkeypatch.setattr(hook_target, hook_name, hooked)
    results: list = [None] * n

    def run(i):
        try:
            save(i)
        except Exception as e:
            results[i] = e

    threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(300)
    monkeypatch.undo()
    return results


@pytest.mark.slow
@pytest.mark.parametrize("overwrite", [False, True])
def test_two_topic_model_saves_to_one_new_path_one_wins(spark, tmp_path, monkeypatch, overwrite):
    """Before: both saves took sequence 0, both committed, each deleted the other's version,
    and the path did not load. Now one commits, the other raises ConcurrentWriteError, and
    the path loads as the winner's model; round after round."""
    for rnd in range(4):
        path = str(tmp_path / f"model{rnd}")
        models = [small_model(1.0), small_model(2.0)]
        results = _race(
            2,
            lambda i, path=path, models=models: models[i].save(path, overwrite=overwrite),
            TopicModel,
            "write_payload",
            monkeypatch,
        )
        winners = [i for i, r in enumerate(results) if r is None]
        losers = [r for r in results if r is not None]
        assert len(winners) == 1, results
        assert len(losers) == 1 and isinstance(losers[0], ConcurrentWriteError), losers
        assert path in str(losers[0]) and "was not saved" in str(losers[0])
        back = TopicModel.load(path)
        assert float(back.topic_word[0, 0]) == float(models[winners[0]].topic_word[0, 0])
        assert len([n for n in os.listdir(path) if n.startswith("v")]) == 1
        assert os.listdir(os.path.join(path, "commits")) == ["000000"]


def test_two_lda_model_saves_to_one_new_path_one_wins(spark, tmp_path, monkeypatch):
    from sparklda import LDAModel

    for rnd in range(2):
        path = str(tmp_path / f"lda{rnd}")
        models = [LDAModel(small_model(1.0)), LDAModel(small_model(2.0))]
        results = _race(
            2,
            lambda i, path=path, models=models: models[i].write().save(path),
            TopicModel,
            "write_payload",
            monkeypatch,
        )
        assert sum(r is None for r in results) == 1, results
        assert all(isinstance(r, ConcurrentWriteError) for r in results if r is not None)
        winner = results.index(None)
        back = LDAModel.load(path)
        assert back.uid == models[winner].uid
        assert float(back.topicModel.topic_word[0, 0]) == float(winner + 1)


def test_two_checkpoint_writers_on_one_directory_one_wins(spark, tmp_path, monkeypatch):
    """Two runs checkpointing into one directory, each having read it once: the one that
    commits second at the same sequence number fails clearly; the directory keeps one
    readable checkpoint."""
    from sparklda.storage import CommittedDir, SparkFiles

    path = str(tmp_path / "ck")
    dirs = [CommittedDir(path, "sparklda.Checkpoint", spark) for _ in range(2)]
    for d in dirs:
        d.check_target(True, "checkpoint")

    def save(i):
        with dirs[i].write({"round": i}, overwrite=True, what="checkpoint", check=False) as st:
            dirs[i].files.write_arrays(f"{st.path}/arrays", {"a": np.full(3, float(i))})

    results = _race(2, save, SparkFiles, "write_arrays", monkeypatch)
    assert sum(r is None for r in results) == 1, results
    assert "checkpoint was not saved" in str(next(r for r in results if r is not None))
    fresh = CommittedDir(path, "sparklda.Checkpoint", spark)
    latest = fresh.latest()
    assert latest is not None and latest.info["round"] == results.index(None)
    arrays = fresh.files.read_arrays(f"{latest.path(fresh.root)}/arrays")
    np.testing.assert_array_equal(arrays["a"], np.full(3, float(results.index(None))))


def test_a_later_save_with_overwrite_after_a_race_replaces_the_winner(spark, tmp_path):
    """Saves in turn with overwrite both succeed; the last is what loads."""
    path = str(tmp_path / "model")
    small_model(1.0).save(path)
    small_model(2.0).save(path, overwrite=True)
    small_model(3.0).save(path, overwrite=True)
    assert float(TopicModel.load(path).topic_word[0, 0]) == 3.0
    assert os.listdir(os.path.join(path, "commits")) == ["000002"]


# --------------------------------------------------------------------------
# Literal paths and unknown schemes

ODD_NAMES = ["models [v2]", "docword,v2", "corpus {2024}", "a*b?c", "back\\slash"]


def test_literal_path_escapes_what_hadoop_globs():
    from sparklda.storage import literal_path

    assert literal_path("/data/plain-name_1.txt") == "/data/plain-name_1.txt"
    assert literal_path("/m [v2]/x") == "/m \\[v2\\]/x"
    assert literal_path("a,b") == "a{\\,}b"
    assert literal_path("{x}*?") == "\\{x\\}\\*\\?"


@pytest.mark.parametrize("name", ODD_NAMES)
def test_models_save_and_load_at_paths_with_glob_characters(spark, tmp_path, name):
    """Before: ``models [v2]/lda`` saved, reported success, and did not load."""
    path = str(tmp_path / name / "lda")
    m = small_model(5.0)
    m.save(path)
    back = TopicModel.load(path)
    np.testing.assert_array_equal(back.topic_word, m.topic_word)
    small_model(6.0).save(path, overwrite=True)
    assert float(TopicModel.load(path).topic_word[0, 0]) == 6.0


@pytest.mark.parametrize("name", ["ck [1]", "ck,2"])
def test_checkpoint_arrays_at_paths_with_glob_characters(spark, tmp_path, name):
    from sparklda.storage import CommittedDir

    target = CommittedDir(str(tmp_path / name), "sparklda.Checkpoint", spark)
    with target.write({"round": 1}, overwrite=True, what="checkpoint") as staged:
        target.files.write_arrays(f"{staged.path}/arrays", {"a": np.arange(4.0)})
    fresh = CommittedDir(str(tmp_path / name), "sparklda.Checkpoint", spark)
    latest = fresh.latest()
    assert latest is not None
    got = fresh.files.read_arrays(f"{latest.path(fresh.root)}/arrays")
    np.testing.assert_array_equal(got["a"], np.arange(4.0))


def test_scored_output_at_a_path_with_glob_characters(spark, tmp_path):
    from sparklda.storage import literal_path, write_output

    out = str(tmp_path / "scores [2024]" / "run,1")
    df = spark.range(5).selectExpr("id", "1.0 as v")
    write_output(spark, out, lambda p: df.write.mode("error").parquet(p), False)
    assert spark.read.parquet(literal_path(out)).count() == 5


def test_spark_readers_read_a_literal_file_through_literal_path(spark, tmp_path):
    """What the corpus readers must do with a user's path: ``sc.textFile`` and
    ``spark.read.text`` of ``literal_path(p)`` read exactly the file ``p``."""
    from sparklda.storage import literal_path

    d = tmp_path / "corpus [2024]"
    d.mkdir()
    (d / "docword,v2.txt").write_text("a\nb\n")
    (tmp_path / "corpus 2").mkdir()  # what the glob [2024] would match instead
    (tmp_path / "corpus 2" / "docword,v2.txt").write_text("wrong\n")
    p = str(d / "docword,v2.txt")
    assert spark.sparkContext.textFile(literal_path(p)).collect() == ["a", "b"]
    assert [r.value for r in spark.read.text(literal_path(p)).collect()] == ["a", "b"]


def test_corpus_readers_read_paths_with_glob_characters_literally(spark, tmp_path):
    """read_uci (docword and vocabulary) and the text/JSON readers read the file or
    directory a path with ``[ ] { } ,`` names (before: a Java traceback, or the files
    the pattern matched); a pattern that names no file still globs."""
    from sparklda.corpus import load_text_dataframe, read_uci

    good, wrong = tmp_path / "corpus [2024]", tmp_path / "corpus 2"
    for d, body, words in ((good, "1 1 2\n1 2 1\n2 3 4\n", "a\nb\nc\n"), (wrong, "", "")):
        d.mkdir()
        (d / "docword,v2.txt").write_text(f"2\n3\n3\n{body}" if body else "junk\n")
        (d / "vocab{1}.txt").write_text(words or "junk\n")
        (d / "texts").mkdir()
        (d / "texts" / "part-0.json").write_text(
            '{"text": "hello world"}\n' if body else '{"text": "wrong"}\n'
        )
    src = read_uci(spark, str(good / "docword,v2.txt"), str(good / "vocab{1}.txt"))
    assert src.vocab == ["a", "b", "c"]
    assert sorted((int(d), list(t), list(c)) for d, t, c in src.rdd.collect()) == [
        (0, [0, 1], [2.0, 1.0]),
        (1, [2], [4.0]),
    ]
    df = load_text_dataframe(spark, str(good / "texts"), "json")
    assert [r.text for r in df.collect()] == ["hello world"]
    # a pattern (no file has its name) still matches the files it names
    pattern = str(tmp_path / "corpus *" / "texts")
    assert df.count() == 1 and load_text_dataframe(spark, pattern, "json").count() == 2


GLOB_DIRS = ["models [v2]", "runs {2024},v2"]


def _fitted_pipeline(value: float):
    from pyspark.ml import PipelineModel
    from pyspark.ml.feature import CountVectorizerModel

    from sparklda import LDAModel

    vocab = [f"w{i}" for i in range(7)]
    cv = CountVectorizerModel.from_vocabulary(vocab, inputCol="words", outputCol="features")
    return PipelineModel([cv, LDAModel(small_model(value))])


@pytest.mark.slow
@pytest.mark.parametrize(
    "name",
    # braces and commas: the same code path as brackets, escaped by literal_path (above)
    GLOB_DIRS[:2],
)
def test_pipeline_model_saves_and_loads_at_a_path_with_glob_characters(spark, tmp_path, name):
    """Before: the save reported success and ``PipelineModel.load`` raised Spark's
    ``PATH_NOT_FOUND`` for ``<version>/metadata`` (pyspark's reader globs)."""
    from pyspark.ml import PipelineModel

    from sparklda import LDAModel
    from sparklda.ml import load_topic_model

    (tmp_path / "models v").mkdir()  # what the pattern [v2] would match instead
    path = str(tmp_path / name / "pipe")
    pm = _fitted_pipeline(1.0)
    pm.write().save(path)
    back = PipelineModel.load(path)
    assert back.uid == pm.uid
    assert [type(s).__name__ for s in back.stages] == ["CountVectorizerModel", "LDAModel"]
    assert back.stages[0].vocabulary == pm.stages[0].vocabulary
    assert isinstance(back.stages[1], LDAModel)
    assert float(back.stages[1].topicModel.topic_word[0, 0]) == 1.0
    assert float(load_topic_model(path).topic_word[0, 0]) == 1.0
    _fitted_pipeline(2.0).write().overwrite().save(path)
    assert float(PipelineModel.load(path).stages[1].topicModel.topic_word[0, 0]) == 2.0


@pytest.mark.slow
def test_unfitted_pipeline_saves_and_loads_at_a_path_with_glob_characters(spark, tmp_path):
    """Before: ``Pipeline.load`` raised Spark's ``PATH_NOT_FOUND`` (as above)."""
    from pyspark.ml import Pipeline
    from pyspark.ml.feature import CountVectorizer

    from sparklda import LDA

    path = str(tmp_path / "pipes [v2]" / "a,b" / "pipe")
    lda = LDA(k=3, maxIter=4, initialModel=_fitted_pipeline(3.0).stages[1])
    pipe = Pipeline(stages=[CountVectorizer(inputCol="words", outputCol="features"), lda])
    pipe.save(path)
    stages = Pipeline.load(path).getStages()
    assert [type(s).__name__ for s in stages] == ["CountVectorizer", "LDA"]
    assert stages[0].getInputCol() == "words"
    assert (stages[1].uid, stages[1].getK(), stages[1].getMaxIter()) == (lda.uid, 3, 4)
    assert float(stages[1].getInitialModel().topicModel.topic_word[0, 0]) == 3.0


def test_lda_model_and_lda_save_and_load_at_a_path_with_glob_characters(spark, tmp_path):
    """``LDAModel.load`` / ``LDA.load`` (sparklda's committed layout) at such paths."""
    from sparklda import LDA

    m = _fitted_pipeline(4.0).stages[1]
    path = str(tmp_path / "models [v2]" / "lda,{1}")
    m.save(path)
    assert float(type(m).load(path).topicModel.topic_word[0, 0]) == 4.0
    LDA(k=3, initialModel=m).save(path + "-est")
    init = LDA.load(path + "-est").getInitialModel()
    assert init.uid == m.uid and float(init.topicModel.topic_word[0, 0]) == 4.0


def test_pyspark_reader_without_sparklda_loads_the_pointer_at_a_literal_path(spark, tmp_path):
    """A process that never imported sparklda uses pyspark's own reader, which globs: given
    ``literal_path(path)`` it reaches the pointer stage with the escaped path, which loads
    the committed pipeline (before: ``ModelPathError ... metadata does not exist``)."""
    from pyspark.ml import PipelineModel
    from pyspark.ml.pipeline import PipelineModelReader

    from sparklda.storage import literal_path

    path = str(tmp_path / "models [v2]" / "pipe")
    _fitted_pipeline(5.0).write().save(path)
    nested = PipelineModelReader(PipelineModel).load(literal_path(path))
    assert len(nested.stages) == 1 and isinstance(nested.stages[0], PipelineModel)
    assert [type(s).__name__ for s in nested.stages[0].stages] == [
        "CountVectorizerModel",
        "LDAModel",
    ]
    assert float(nested.stages[0].stages[1].topicModel.topic_word[0, 0]) == 5.0


def test_an_unknown_scheme_names_the_path_and_the_scheme(spark):
    """Before: the last line of a Java stack (UnsupportedFileSystemException)."""
    with pytest.raises(ModelPathError, match=r"'foo://bucket/model'.*scheme 'foo'"):
        small_model(1.0).save("foo://bucket/model")
    with pytest.raises(ModelPathError, match=r"scheme 'foo'"):
        TopicModel.load("foo://bucket/model")
    from sparklda.cli.job import check_output

    with pytest.raises(ModelPathError, match=r"output.model: .*'foo://bucket/m'.*scheme 'foo'"):
        check_output(spark, "foo://bucket/m", "output.model", False)


# --------------------------------------------------------------------------
# Damaged or foreign models


@pytest.fixture
def saved(spark, tmp_path):
    path = str(tmp_path / "model")
    small_model(1.0).save(path)
    version = next(n for n in os.listdir(path) if n.startswith("v"))
    return path, os.path.join(path, version)


def _part(directory):
    return next(p for p in glob.glob(os.path.join(directory, "part-*")))


def _replace(file, data: bytes):
    """Write ``data`` over ``file`` as another program would: without Hadoop's checksum."""
    crc = os.path.join(os.path.dirname(file), f".{os.path.basename(file)}.crc")
    if os.path.exists(crc):
        os.remove(crc)
    with open(file, "wb") as f:
        f.write(data)


def _edit_metadata(version_dir, change):
    file = _part(os.path.join(version_dir, "metadata"))
    with open(file) as f:
        meta = json.loads(f.read())
    change(meta)
    _replace(file, json.dumps(meta).encode())


def _load_fails(path, *patterns):
    with pytest.raises(ModelFormatError) as err:
        TopicModel.load(path)
    text = str(err.value)
    assert path in text or os.path.basename(path) in text, text
    for p in patterns:
        assert p in text, text
    return text


def test_truncated_metadata(saved):
    path, version = saved
    file = _part(os.path.join(version, "metadata"))
    data = open(file, "rb").read()
    _replace(file, data[: len(data) // 2])
    _load_fails(path, "metadata", "not a valid JSON record")


def test_truncated_topics_file(saved):
    path, version = saved
    file = _part(os.path.join(version, "topics"))
    data = open(file, "rb").read()
    _replace(file, data[: len(data) // 2])
    _load_fails(path, "topics", "cannot be read as Parquet")


def test_format_version_written_as_a_string(saved):
    path, version = saved
    _edit_metadata(version, lambda m: m.update(format_version="3"))
    _load_fails(path, "format version '3'")


def test_missing_k(saved):
    path, version = saved
    _edit_metadata(version, lambda m: m.pop("k"))
    _load_fails(path, "k = None")


def test_k_that_disagrees_with_the_topics(saved):
    path, version = saved
    _edit_metadata(version, lambda m: m.update(k=4))
    _load_fails(path, "k=4", "topics")


def test_pickle_bytes_in_the_metadata(saved, tmp_path):
    path, version = saved
    marker = tmp_path / "pwned"

    class Evil:
        def __reduce__(self):
            return (os.system, (f"touch {marker}",))

    _replace(_part(os.path.join(version, "metadata")), pickle.dumps(Evil()))
    with pytest.raises(ModelFormatError, match="metadata"):
        TopicModel.load(path)
    assert not marker.exists()


def test_a_python_expression_in_the_metadata(saved, tmp_path):
    path, version = saved
    marker = tmp_path / "pwned"
    expr = f"__import__('os').system('touch {marker}')"
    _replace(_part(os.path.join(version, "metadata")), expr.encode())
    _load_fails(path, "not a valid JSON record")
    _edit_metadata_ok = {"alpha": expr}
    meta_file = _part(os.path.join(version, "metadata"))
    good = small_model(1.0).metadata_record()
    good.update(_edit_metadata_ok)
    _replace(meta_file, json.dumps(good).encode())
    _load_fails(path, "alpha")
    assert not marker.exists()


def test_a_garbage_commit_record(saved):
    path, _ = saved
    _replace(_part(os.path.join(path, "commits", "000000")), b"\x00garbage{")
    _load_fails(path, "commit", "000000")


def test_a_commit_record_naming_a_path_outside_the_model(saved):
    path, _ = saved
    record = {"version": "../../etc", "seq": 0, "kind": "sparklda.TopicModel"}
    _replace(_part(os.path.join(path, "commits", "000000")), json.dumps(record).encode())
    _load_fails(path, "commit record", "damaged")


def test_a_damaged_lda_model_params_record(spark, tmp_path):
    from sparklda import LDAModel

    path = str(tmp_path / "lda")
    LDAModel(small_model(1.0)).write().save(path)
    version = next(n for n in os.listdir(path) if n.startswith("v"))
    _replace(_part(os.path.join(path, version, "params")), b"[1, 2, 3]")
    with pytest.raises(ModelFormatError, match="Params record"):
        LDAModel.load(path)
    _replace(_part(os.path.join(path, version, "params")), b'{"class": "sparklda.ml.mod')
    with pytest.raises(ModelFormatError, match="not a valid JSON record"):
        LDAModel.load(path)


def test_a_damaged_model_in_the_infer_job(spark, tmp_path, saved):
    from sparklda.cli import infer as infer_topics

    path, version = saved
    _edit_metadata(version, lambda m: m.pop("k"))
    cfg = {
        "input": {"format": "uci", "docword": "sample:kos/docword.txt.gz"},
        "output": {"model": path},
        "infer": {"output": str(tmp_path / "scores")},
    }
    with pytest.raises(ModelFormatError, match="k = None"):
        infer_topics.run(spark, cfg)
    assert not (tmp_path / "scores").exists()


def test_a_model_in_the_earlier_commit_layout_loads_and_is_replaced(saved):
    """Directories saved before named each commit record by its version
    (``commits/v000000-…``): still read, and the next save leaves only the new layout."""
    path, version = saved
    os.rename(
        os.path.join(path, "commits", "000000"),
        os.path.join(path, "commits", os.path.basename(version)),
    )
    assert float(TopicModel.load(path).topic_word[0, 0]) == 1.0
    small_model(2.0).save(path, overwrite=True)
    assert float(TopicModel.load(path).topic_word[0, 0]) == 2.0
    assert os.listdir(os.path.join(path, "commits")) == ["000001"]
    assert len([n for n in os.listdir(path) if n.startswith("v")]) == 1
