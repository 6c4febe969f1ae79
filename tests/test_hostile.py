"""Hostile input and faults at the edges (issue 35): each case a clear error of the library's
own types (the jobs: ``error: ...`` on stderr, exit 2, no Python or Java stack), raised
before training where the mistake is knowable then. docs/reliability.md lists them."""

from __future__ import annotations

import os
import sys

import pytest

from sparklda.api import fit
from sparklda.cli import train
from sparklda.errors import CorpusError, ModelPathError, ParamError
from sparklda.limits import check_model_memory, model_bytes
from sparklda.params import TrainParams
from tests.helpers import TRAIN_JOB, planted_docs, run, write_config

# --------------------------------------------------------------------------
# Running the train job in this process


class _Session:
    """The tests' shared session, handed to a job that must not stop it."""

    def __init__(self, spark):
        self._spark = spark

    def stop(self) -> None:
        pass

    def __getattr__(self, name):
        return getattr(self._spark, name)


def job(monkeypatch, capsys, spark, tmp_path, *args, extra: str = "") -> tuple[int, str]:
    """Run ``sparklda-train`` in this process on the small KOS configuration plus ``args``
    (with ``spark``, the shared session; without, Spark must not start); returns (exit
    status, what the console shows: stdout and stderr)."""

    def session(*a, **k):
        if spark is None:
            raise AssertionError("Spark was started")
        return _Session(spark)

    monkeypatch.setattr("sparklda.cli.job.build_session", session)
    code = train.main(["--config", write_config(tmp_path, extra), *args])
    out = capsys.readouterr()
    return code, out.out + out.err


def assert_clean_error(code: int, console: str, *needles: str) -> str:
    """Exit 2, one ``error:`` line holding every needle, no Python or Java stack."""
    assert code == 2, console[-3000:]
    lines = [x for x in console.splitlines() if x.startswith("error: ")]
    assert len(lines) == 1, console[-3000:]
    for needle in needles:
        assert needle in lines[0], lines[0]
    assert "Traceback" not in console and "\tat org.apache" not in console, console[-3000:]
    return lines[0]


# --------------------------------------------------------------------------
# Paths that do not exist


@pytest.mark.parametrize(
    "sets,path",
    [
        (["input.docword=/nonexistent/docword.txt"], "/nonexistent/docword.txt"),
        (["input.vocab=/nonexistent/vocab.txt"], "/nonexistent/vocab.txt"),
        (
            ["input.format=parquet", "input.path=/nonexistent/docs.parquet", "input.text_col=t"],
            "/nonexistent/docs.parquet",
        ),
        (["input.format=text", "input.path=/nonexistent/docs.txt"], "/nonexistent/docs.txt"),
        (["input.format=json", "input.path=/nonexistent/docs.json"], "/nonexistent/docs.json"),
    ],
    ids=["docword", "vocab", "parquet", "text", "json"],
)
def test_missing_input_path_is_an_error_naming_it(spark, tmp_path, monkeypatch, capsys, sets, path):
    args = [a for s in sets for a in ("--set", s)]
    if "input.format" in sets[0]:
        args += ["--set", "input.docword=", "--set", "input.vocab="]
    code, console = job(monkeypatch, capsys, spark, tmp_path, *args)
    assert_clean_error(code, console, f"Input path 'file:{path}' does not exist (reading ")
    assert not (tmp_path / "model").exists()


def test_missing_path_through_the_library_is_a_corpus_error(spark):
    from sparklda.api import source_from_config

    with pytest.raises(CorpusError, match=r"Input path 'file:/nonexistent/x\.parquet' does not"):
        source_from_config(spark, {"format": "parquet", "path": "/nonexistent/x.parquet"})


# --------------------------------------------------------------------------
# Spark that cannot start


def test_bogus_master_is_refused_before_spark_starts(tmp_path, monkeypatch, capsys):
    code, console = job(monkeypatch, capsys, None, tmp_path, "--master", "yarnn")
    assert_clean_error(code, console, "--master 'yarnn' is not a Spark master URL", "local[N]")
    code, console = job(monkeypatch, capsys, None, tmp_path, "--set", "spark.master=yarnn")
    assert_clean_error(code, console, "spark.master 'yarnn' is not a Spark master URL")


@pytest.mark.parametrize("value", ["lots", "1.5g", "-2g", "4 gigs"])
def test_malformed_driver_memory_is_refused_before_spark_starts(
    tmp_path, monkeypatch, capsys, value
):
    code, console = job(
        monkeypatch, capsys, None, tmp_path, "--conf-set", f"spark.driver.memory={value}"
    )
    assert_clean_error(code, console, '"spark.driver.memory"', "is not a memory size", "4g")


def test_good_masters_and_sizes_pass_the_check():
    from sparklda.cli.session import check_spark_settings

    for master in ("local", "local[2]", "local[*]", "local[2,4]", "yarn", "spark://h:7077"):
        check_spark_settings({"spark": {"conf": {"spark.driver.memory": "4g"}}}, master)
    check_spark_settings({"spark": {"conf": {"spark.executor.memory": "512M"}}}, None)


def test_spark_failing_to_start_is_one_error_line(tmp_path, monkeypatch, capsys):
    from pyspark.errors import PySparkRuntimeError

    def fails(*a, **k):
        raise PySparkRuntimeError(errorClass="JAVA_GATEWAY_EXITED", messageParameters={})

    monkeypatch.setattr("sparklda.cli.job.build_session", fails)
    code = train.main(["--config", write_config(tmp_path)])
    out = capsys.readouterr()
    assert code == 2
    assert out.err.startswith("error: Spark could not start (master local[2]): [JAVA_GATEWAY")
    assert "Traceback" not in out.err + out.out


# --------------------------------------------------------------------------
# Sizes that cannot work


def test_huge_k_is_refused_naming_the_memory_the_model_needs(spark, tmp_path, monkeypatch, capsys):
    code, console = job(monkeypatch, capsys, spark, tmp_path, "--set", "training.k=1000000000000")
    assert_clean_error(
        code, console, "The 'k' parameter (1000000000000)", "6906 terms", "73.6 PiB on the driver"
    )
    assert not (tmp_path / "model").exists()


def test_model_memory_check_before_any_allocation():
    assert model_bytes(6906, 10**12, "float32") == 6906 * 10**12 * 12
    check_model_memory(1000, 10, "float64", available=160_000)
    with pytest.raises(ParamError, match=r"needs at least 156.2 KiB .* more than the 1000 bytes"):
        check_model_memory(1000, 10, "float64", available=1000)


def test_fit_refuses_a_model_too_big_before_building_the_corpus(spark):
    from tests.helpers import no_spark_job, planted_source

    source = planted_source(spark)
    with no_spark_job(spark), pytest.raises(ParamError, match="on the driver for the model"):
        fit(source, TrainParams(k=10**13, passes=1))


def _poisoned_features(spark):
    """A ``features`` DataFrame whose one row raises when any Spark job reads it."""
    from pyspark.ml.linalg import Vectors, VectorUDT
    from pyspark.sql.types import StructField, StructType

    def poison(_):
        raise RuntimeError("the DataFrame was read")

    schema = StructType([StructField("features", VectorUDT())])
    rows = spark.sparkContext.parallelize([0], 1).map(poison)
    return spark.createDataFrame(rows, schema), Vectors


@pytest.mark.parametrize(
    "value,needle",
    [
        ([-1.0, 0.5, 0.5], r"Got \[-1\.0, 0\.5, 0\.5\] instead"),
        ([0.5, 0.5], r"Got \[0\.5, 0\.5\] instead"),
    ],
    ids=["negative-entry", "wrong-length"],
)
def test_docConcentration_is_refused_at_fit_before_any_spark_job(spark, value, needle):
    """``LDA(docConcentration=...)`` is accepted at construction (fit(df, params) copies
    the estimator, so Params are checked at fit) and refused at the top of ``fit``, with
    the parameter, its range and the value, before a Spark job reads the DataFrame."""
    from sparklda import LDA
    from tests.helpers import no_spark_job

    df, _ = _poisoned_features(spark)
    lda = LDA(k=3, maxIter=1, docConcentration=value)  # construction accepts it
    message = r"'docConcentration' parameter of LDA must be a float in the range \(0, 10000\]"
    message += r", or a list of 1 or k=3 such floats.*" + needle
    with no_spark_job(spark), pytest.raises(ParamError, match=message):
        lda.fit(df)
    plain = LDA(k=3, maxIter=1)
    with no_spark_job(spark), pytest.raises(ParamError, match=message):
        plain.fit(df, {plain.docConcentration: value})
    with pytest.raises(Exception, match="the DataFrame was read"):
        df.count()  # the poison works: a job that read the DataFrame would have failed


# --------------------------------------------------------------------------
# Outputs and checkpoints that would overwrite each other


@pytest.mark.parametrize(
    "sets,needle",
    [
        (["output.metrics={model}"], "output.metrics '{model}' is the same path as output.model"),
        (["checkpoint.dir={model}"], "checkpoint.dir '{model}' is the same path as output.model"),
        (["checkpoint.dir={model}/ck"], "checkpoint.dir '{model}/ck' is inside output.model"),
        (["output.metrics={model}/m.json"], "output.metrics '{model}/m.json' is inside"),
    ],
    ids=["metrics=model", "checkpoint=model", "checkpoint-in-model", "metrics-in-model"],
)
def test_outputs_that_overlap_are_refused_before_spark_starts(
    tmp_path, monkeypatch, capsys, sets, needle
):
    model = str(tmp_path / "model")
    args = [a for s in sets for a in ("--set", s.format(model=model))]
    code, console = job(monkeypatch, capsys, None, tmp_path, *args)
    assert_clean_error(code, console, needle.format(model=model))


def test_default_metrics_path_equal_to_the_model_is_refused(spark, tmp_path):
    from sparklda.cli.config import ConfigError, load_config

    cfg = load_config(write_config(tmp_path), [f"output.model={tmp_path / 'metrics.json'}"])
    with pytest.raises(ConfigError, match="output.metrics .* is the same path as output.model"):
        train.run(spark, cfg)


def test_resume_without_checkpoint_dir_is_refused_before_spark_starts(
    tmp_path, monkeypatch, capsys
):
    code, console = job(monkeypatch, capsys, None, tmp_path, "--resume")
    assert_clean_error(code, console, "--resume needs checkpoint.dir")


@pytest.mark.parametrize(
    "key,value", [("every_rounds", "-1"), ("every_seconds", "-5.0")], ids=["rounds", "seconds"]
)
def test_checkpoint_errors_name_the_keys_the_user_wrote(tmp_path, monkeypatch, capsys, key, value):
    code, console = job(monkeypatch, capsys, None, tmp_path, "--set", f"checkpoint.{key}={value}")
    line = assert_clean_error(code, console, f"'checkpoint.{key}'")
    assert "checkpoint_interval" not in line and "checkpoint_seconds" not in line


# --------------------------------------------------------------------------
# Checkpoints of other data, damaged checkpoints


def _source(spark, docs, v):
    from sparklda.corpus import DocSource

    return DocSource(
        spark.sparkContext.parallelize(docs, 3), v, [f"w{i}" for i in range(v)], "test corpus"
    )


def _params(ck, **kw):
    base = dict(k=4, seed=3, heldout_count=16, parts_per_slice=2, checkpoint_interval=1)
    return TrainParams(**{**base, "minibatch_size": 40, "passes": 1, "checkpoint_dir": ck, **kw})


@pytest.mark.slow
def test_resume_refuses_another_corpus_of_the_same_shape(spark, tmp_path):
    docs, v = planted_docs()
    ck = str(tmp_path / "ck")
    fit(_source(spark, docs, v), _params(ck))
    # the same documents, terms and totals: two counts of one training document swapped
    other = list(docs)
    i = next(i for i, (_, t, c) in enumerate(docs[40:], 40) if len(c) > 1 and c[0] != c[1])
    d, terms, counts = other[i]
    counts = counts.copy()
    counts[[0, 1]] = counts[[1, 0]]
    other[i] = (d, terms, counts)
    with pytest.raises(ParamError, match="another run .*corpus content: the .*counts differ"):
        fit(_source(spark, other, v), _params(ck, passes=2), resume=True)
    # the same corpus resumes
    more = fit(_source(spark, docs, v), _params(ck, passes=2), resume=True)
    assert more.report["resumed_after_round"] == more.report["rounds"] // 2


@pytest.mark.parametrize("part", ["state", pytest.param("arrays", marks=pytest.mark.slow)])
def test_corrupt_checkpoint_is_a_clear_error(spark, tmp_path, part):
    """A checkpoint file cut in half (the state's JSON; the arrays' Parquet, a Java
    stack on main): a ModelPathError naming the directory."""
    from sparklda.storage import CommittedDir

    docs, v = planted_docs()
    ck = str(tmp_path / "ck")
    fit(_source(spark, docs, v), _params(ck))
    latest = CommittedDir(ck, "sparklda.Checkpoint", spark).latest()
    damaged = 0
    for root, _, names in os.walk(os.path.join(latest.path(ck), part)):
        for name in names:
            if not name.startswith((".", "_")):
                path = os.path.join(root, name)
                with open(path, "r+b") as f:
                    f.truncate(max(1, os.path.getsize(path) // 2))
                damaged += 1
    assert damaged
    with pytest.raises(ModelPathError, match=rf"The checkpoint in '{ck}' cannot be read"):
        fit(_source(spark, docs, v), _params(ck, passes=2), resume=True)


# --------------------------------------------------------------------------
# What the console shows (the job in its own process)


@pytest.mark.slow
def test_bad_corpus_body_shows_one_error_line_and_no_java_stack(tmp_path):
    """A body error found on the executors: Spark's ERROR Executor / WARN TaskSetManager
    lines with their Java stacks are quiet; the console has the library's error."""
    docword = tmp_path / "docword.txt"
    docword.write_text("3\n4\n4\n1 1 2\n2 0 1\n3 2 1\n3 4 1\n")
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("a\nb\nc\nd\n")
    cfg = write_config(tmp_path)
    out = run(
        [
            sys.executable,
            TRAIN_JOB,
            "--config",
            cfg,
            "--set",
            f"input.docword={docword}",
            "--set",
            f"input.vocab={vocab}",
            "--set",
            "evaluation.heldout_count=0",
        ],
        timeout=400,
    )
    console = out.stdout + out.stderr
    assert out.returncode == 2, console[-3000:]
    assert "Exception in task" not in console and "\tat org.apache" not in console, console[-3000:]
    assert "Traceback" not in console
    errors = [x for x in console.splitlines() if x.startswith("error: ")]
    assert len(errors) == 1 and "term id 0" in errors[0], console[-3000:]
    assert not (tmp_path / "model").exists()


# --------------------------------------------------------------------------
# Readers


def _uci(tmp_path, body, vocab="a\nb\nc\nd\n", header=(3, 4, None)):
    d, w, nnz = header
    docword = tmp_path / "docword.txt"
    docword.write_text(f"{d}\n{w}\n{nnz if nnz is not None else len(body)}\n" + "\n".join(body))
    vocab_path = tmp_path / "vocab.txt"
    vocab_path.write_text(vocab)
    return str(docword), str(vocab_path)


@pytest.mark.parametrize(
    "vocab,needle",
    [
        ("a\n\nb\nc\nd\n", "line 2 is blank"),
        ("a\nb\na\nc\n", "line 3: the term 'a' is also on line 1"),
    ],
    ids=["blank", "duplicate"],
)
def test_vocabulary_with_blank_or_duplicate_lines_is_refused(spark, tmp_path, vocab, needle):
    from sparklda.corpus import read_uci, read_vocab

    docword, path = _uci(tmp_path, ["1 1 2", "2 3 1", "3 4 1"], vocab=vocab)
    with pytest.raises(CorpusError, match=rf"Vocabulary file '.*vocab.txt', {needle}"):
        read_vocab(path, spark)
    with pytest.raises(CorpusError, match=needle):
        read_vocab(path)  # from the driver's disk
    with pytest.raises(CorpusError, match=needle):
        read_uci(spark, docword, path)


def test_vocabulary_trailing_blank_lines_are_fine(tmp_path):
    from sparklda.corpus import read_vocab

    path = tmp_path / "vocab.txt"
    path.write_text("a\nb\n\n\n")
    assert read_vocab(str(path)) == ["a", "b"]


def test_uci_count_too_large_is_a_corpus_error(spark, tmp_path):
    from sparklda.corpus import build_corpus, read_uci

    docword, vocab = _uci(tmp_path, ["1 1 2", "2 3 1e40", "3 4 1"])
    with pytest.raises(CorpusError, match=r"line 5: '2 3 1e40' has a term count above 2147483647"):
        build_corpus(read_uci(spark, docword, vocab))


def test_uci_count_too_large_in_the_job(spark, tmp_path, monkeypatch, capsys):
    docword, vocab = _uci(tmp_path, ["1 1 2", "2 3 1e40", "3 4 1"])
    code, console = job(
        monkeypatch,
        capsys,
        spark,
        tmp_path,
        *("--set", f"input.docword={docword}", "--set", f"input.vocab={vocab}"),
        *("--set", "evaluation.heldout_count=0", "--set", "training.k=2"),
    )
    assert_clean_error(code, console, "term count above 2147483647")
