"""sparklda.cli: configuration files and overrides, shipped examples, the session's
precedence (spark-submit > configuration > defaults), subcommands, compare."""

from __future__ import annotations

import os
import sys

import pytest

import sparklda.cli
from sparklda.cli import compare, infer, train
from sparklda.cli.config import (
    ConfigError,
    check_config,
    flatten_spark_conf,
    load_config,
    shipped_config,
    shipped_configs,
)
from sparklda.cli.session import REDACTED, effective_properties, plan_properties
from sparklda.io import resolve_sample
from tests.helpers import KOS_DOCWORD, ROOT, job_env, probe_session, run, spark_bin

# --------------------------------------------------------------------------
# Shipped configurations


def test_the_top_level_conf_is_the_shipped_configs_one_source():
    """The example configurations exist once, in the package (``sparklda/conf``, what the
    console scripts print); the checkout's ``conf/`` is a link to it, so the two cannot
    drift."""
    top_dir = os.path.join(ROOT, "conf")
    assert os.path.islink(top_dir), "conf/ must be the link to sparklda/conf, not a copy"
    assert os.path.realpath(top_dir) == os.path.realpath(os.path.join(ROOT, "sparklda", "conf"))
    top = sorted(n for n in os.listdir(os.path.join(ROOT, "conf")) if n.endswith(".toml"))
    assert [f"{n}.toml" for n in shipped_configs()] == top
    assert set(shipped_configs()) >= {"local", "cluster", "modes", "warmstart"}
    for name in top:
        with open(os.path.join(ROOT, "conf", name), "rb") as f:
            assert shipped_config(name) == f.read(), name


def test_print_config_writes_the_shipped_file_and_it_is_a_valid_configuration(
    tmp_path, capsysbinary
):
    assert train.main(["--print-config", "local"]) == 0
    text = capsysbinary.readouterr().out
    assert text == shipped_config("local")
    (tmp_path / "my.toml").write_bytes(text)
    s = train.check(load_config(str(tmp_path / "my.toml")))
    assert s.input["docword"] == "sample:kos/docword.txt.gz"
    assert resolve_sample(s.input["docword"]) == KOS_DOCWORD
    assert os.path.exists(resolve_sample(s.input["vocab"]))
    assert s.params.k == 50 and s.overwrite is True

    assert train.main(["--print-config", "nope"]) == 2
    assert b"No shipped configuration named 'nope'; choose from ['cluster', 'local'" in (
        capsysbinary.readouterr().err
    )


@pytest.mark.parametrize("name", ["local", "cluster", "modes", "warmstart"])
def test_every_shipped_config_passes_the_checks(name, tmp_path):
    (tmp_path / "c.toml").write_bytes(shipped_config(name))
    cfg = load_config(str(tmp_path / "c.toml"))
    s = train.check(cfg)
    assert s.params.k >= 2
    if name == "warmstart":
        assert infer.settings_from_config(cfg)["model"] == "out/kos-scvb0-retrained"


# --------------------------------------------------------------------------
# Overrides


def test_set_parses_toml_literals_and_dotted_keys(tmp_path):
    cfg = load_config(
        None,
        [
            "training.k=12",
            "training.alpha=0.5",
            "training.algorithm=cvb0",
            "output.overwrite=true",
            "output.model=out/x",
            'spark.conf."spark.executor.memory"=512m',
            "spark.conf.spark.executor.cores=2",
            'spark.conf."spark.ui.enabled"=false',
            "infer.input.format=uci",
            "infer.input.docword=d",
        ],
        ["spark.driver.memory=3g", "spark.hadoop.fs.x = a=b"],
    )
    assert cfg["training"] == {"k": 12, "alpha": 0.5, "algorithm": "cvb0"}
    assert cfg["output"] == {"overwrite": True, "model": "out/x"}
    # keys under spark.conf are Spark properties by their full name, never nested tables
    assert cfg["spark"]["conf"] == {
        "spark.executor.memory": "512m",
        "spark.executor.cores": 2,
        "spark.ui.enabled": False,
        "spark.driver.memory": "3g",
        "spark.hadoop.fs.x": "a=b",
    }
    assert cfg["infer"] == {"input": {"format": "uci", "docword": "d"}}
    assert flatten_spark_conf(cfg["spark"]["conf"])["spark.ui.enabled"] == "false"
    check_config(cfg)

    with pytest.raises(ConfigError, match="--conf-set expects PROPERTY=VALUE"):
        load_config(None, [], ["spark.executor.memory"])
    with pytest.raises(ConfigError, match="is not a TOML key"):
        load_config(None, ["training..k=3"])
    with pytest.raises(
        ConfigError,
        match=r"infer.input is a table; set one of its keys "
        r"\(\['format'\]\)",
    ):
        load_config(None, ["infer.input.format=uci", "infer.input=docs.txt"])


def test_unquoted_property_names_in_a_file_are_joined_back(tmp_path):
    path = tmp_path / "c.toml"
    path.write_text(
        '[spark.conf]\nspark.executor.memory = "2g"\n"spark.ui.enabled" = true\n'
        "spark.sql.shuffle.partitions = 8\n"
    )
    cfg = check_config(load_config(str(path)))
    assert flatten_spark_conf(cfg["spark"]["conf"]) == {
        "spark.executor.memory": "2g",
        "spark.ui.enabled": "true",
        "spark.sql.shuffle.partitions": "8",
    }
    path.write_text('[spark.conf]\n"spark.jars" = ["a.jar"]\n')
    with pytest.raises(ConfigError, match='spark.conf."spark.jars" must be a string, number'):
        check_config(load_config(str(path)))


# --------------------------------------------------------------------------
# Session precedence


def test_plan_under_spark_submit_keeps_what_spark_submit_set():
    cfg = {
        "spark": {
            "master": "local[2]",
            "app_name": "lda",
            "conf": {
                "spark.executor.memory": "8g",
                "spark.driver.memory": "16g",
                "spark.sql.shuffle.partitions": 4,
                "spark.network.timeout": "301s",
            },
        }
    }
    given = {
        "spark.master": "yarn",
        "spark.executor.memory": "2g",
        "spark.app.name": "job.py",
        "spark.submit.deployMode": "cluster",
    }
    apply, lost = plan_properties(cfg, "local[4]", "x", given, True, "job.py")
    assert "spark.master" not in apply and "spark.executor.memory" not in apply
    assert apply == {
        "spark.app.name": "lda",
        "spark.sql.shuffle.partitions": "4",
        "spark.network.timeout": "301s",
        "spark.ui.showConsoleProgress": "false",
        "spark.task.maxDirectResultSize": "64m",
    }
    # the driver JVM is already running: its memory is spark-submit's business
    assert lost == {"spark.executor.memory": "8g", "spark.driver.memory": "16g"}
    # an application name given to spark-submit (--name) is kept
    apply, _ = plan_properties(
        cfg, None, "x", {**given, "spark.app.name": "nightly"}, True, "job.py"
    )
    assert "spark.app.name" not in apply


def test_plan_with_plain_python_uses_master_option_then_config_then_local2():
    cfg = {"spark": {"master": "local[3]", "conf": {"spark.executor.memory": "1g"}}}
    assert plan_properties(cfg, "local[1]", "a", None, False)[0]["spark.master"] == "local[1]"
    wanted, lost = plan_properties(cfg, None, "a", None, False)
    assert wanted["spark.master"] == "local[3]" and wanted["spark.app.name"] == "a"
    assert wanted["spark.executor.memory"] == "1g" and lost == {}
    assert plan_properties({}, None, "a", None, False)[0]["spark.master"] == "local[2]"


def test_effective_properties_redact_secrets():
    class Conf:
        def getAll(self):
            return [
                ("spark.master", "local[2]"),
                ("spark.authenticate.secret", "s3"),
                ("spark.hadoop.fs.s3a.access.key", "AKIA"),
                ("spark.x", "password=1"),
                ("spark.executor.memory", "1g"),
            ]

    class Context:
        def getConf(self):
            return Conf()

    class Session:
        sparkContext = Context()

    props = effective_properties(Session())
    assert props["spark.master"] == "local[2]" and props["spark.executor.memory"] == "1g"
    assert props["spark.authenticate.secret"] == REDACTED
    assert props["spark.hadoop.fs.s3a.access.key"] == REDACTED == props["spark.x"]


PRECEDENCE_CONFIG = """
[spark]
master = "local[2]"
app_name = "from-toml"

[spark.conf]
"spark.ui.enabled" = false
"spark.sql.shuffle.partitions" = 4
"spark.executor.memory" = "2g"
"spark.driver.memory" = "1g"
"spark.network.timeout" = "301s"
"""


@pytest.mark.slow
def test_plain_python_master_and_properties(tmp_path):
    cfg = tmp_path / "c.toml"
    cfg.write_text(PRECEDENCE_CONFIG)
    py = [sys.executable]
    plain = probe_session(tmp_path, py, str(cfg))
    assert plain["master"] == "local[2]"
    props = plain["properties"]
    assert props["spark.sql.shuffle.partitions"] == "4" and props["spark.driver.memory"] == "1g"
    assert props["spark.app.name"] == "from-toml"
    assert props["spark.ui.showConsoleProgress"] == "false"  # the jobs' default
    assert props["spark.task.maxDirectResultSize"] == "64m"

    assert probe_session(tmp_path, py, str(cfg), master="local[1]")["master"] == "local[1]"

    # PYSPARK_SUBMIT_ARGS is pyspark's spark-submit command line: it wins
    env = job_env(
        PYSPARK_SUBMIT_ARGS="--master local[3] --conf spark.sql.shuffle.partitions=9 pyspark-shell"
    )
    submitted = probe_session(tmp_path, py, str(cfg), env=env)
    assert submitted["master"] == "local[3]"
    assert submitted["properties"]["spark.sql.shuffle.partitions"] == "9"
    assert submitted["properties"]["spark.network.timeout"] == "301s"


@pytest.mark.slow
def test_spark_submit_settings_win_over_the_configuration(tmp_path):
    """The precedence bug: the config's master (local[2]) overrode spark-submit's."""
    cfg = tmp_path / "c.toml"
    cfg.write_text(PRECEDENCE_CONFIG)
    got = probe_session(
        tmp_path,
        [
            spark_bin("spark-submit"),
            "--master",
            "local[1]",
            "--driver-memory",
            "700m",
            "--conf",
            "spark.sql.shuffle.partitions=7",
            "--conf",
            "spark.executor.memory=600m",
            "--conf",
            "spark.ui.enabled=false",
        ],
        str(cfg),
        sets=['spark.conf."spark.network.timeout"=302s'],
    )
    assert got["master"] == "local[1]"
    props = got["properties"]
    assert props["spark.sql.shuffle.partitions"] == "7"
    assert props["spark.executor.memory"] == "600m"
    assert props["spark.driver.memory"] == "700m"
    # what spark-submit did not set comes from the configuration
    assert props["spark.network.timeout"] == "302s"
    assert props["spark.app.name"] == "from-toml"
    assert props["spark.task.maxDirectResultSize"] == "64m"


# --------------------------------------------------------------------------
# Subcommands


def test_main_dispatches_subcommands(capsysbinary):
    assert sparklda.cli.main([]) == 2
    assert sparklda.cli.main(["--help"]) == 0
    assert b"sparklda {train,infer,compare,generate}" in capsysbinary.readouterr().out
    assert sparklda.cli.main(["fit"]) == 2
    assert b"error: unknown command 'fit'" in capsysbinary.readouterr().err
    assert sparklda.cli.main(["infer", "--print-config", "warmstart"]) == 0
    assert capsysbinary.readouterr().out == shipped_config("warmstart")


@pytest.mark.slow
def test_python_dash_m_sparklda(tmp_path):
    out = run(
        [
            sys.executable,
            "-m",
            "sparklda",
            "train",
            "--config",
            os.path.join(ROOT, "conf", "local.toml"),
            "--set",
            "training.k.x=3",
        ],
        timeout=120,
        cwd=tmp_path,
    )
    assert out.returncode == 2
    assert "error: --set 'training.k.x=3': training.k is a value (50), not a table" in out.stderr
    out = run([sys.executable, "-m", "sparklda", "train", "--help"], timeout=120)
    assert out.returncode == 0 and "usage: sparklda train" in out.stdout
    assert "--conf-set PROPERTY=VALUE" in out.stdout


# --------------------------------------------------------------------------
# compare


@pytest.mark.slow
def test_compare_defaults_to_the_shipped_corpus_and_runs_without_heldout(spark):
    args = compare.parser().parse_args(
        [
            "--modes",
            "scvb0",
            "--k",
            "3",
            "--passes",
            "1",
            "--minibatch-size",
            "2000",
            "--heldout-count",
            "0",
        ]
    )
    assert compare.corpus_files(args.data) == (
        KOS_DOCWORD,
        KOS_DOCWORD.replace("docword.txt.gz", "vocab.txt"),
    )
    rows = compare.run(spark, args)
    assert len(rows) == 1 and rows[0]["mode"] == "scvb0" and rows[0]["rounds"] == 2
    assert rows[0]["heldout_loglik"] is None and rows[0]["heldout_documents"] == 0
    assert "| scvb0 | 1 | - | - |" in compare.format_table(rows)


def test_compare_checks_settings_before_spark_and_uses_the_jobs_session(
    tmp_path, capsys, monkeypatch
):
    calls = []

    def fake_session(cfg, master, app_name):
        calls.append((cfg, master))
        raise RuntimeError("stop here")

    monkeypatch.setattr(compare, "build_session", fake_session)
    assert compare.main(["--modes", "scvb0,lda"]) == 2
    assert "error: --modes: unknown or no mode(s) ['lda']" in capsys.readouterr().err
    assert compare.main(["--data", str(tmp_path)]) == 2
    assert "no docword.txt[.gz] in" in capsys.readouterr().err
    assert compare.main(["--param", "k=1"]) == 2
    assert "The 'k' parameter of LDA must be an int" in capsys.readouterr().err
    assert calls == []
    # no forced local[2]: spark-submit's master (or the config's) decides
    with pytest.raises(RuntimeError, match="stop here"):
        compare.main(["--modes", "scvb0", "--conf-set", "spark.x=1"])
    assert calls == [({"spark": {"conf": {"spark.x": "1"}}}, None)]


def test_ship_package_is_public_and_leaves_a_local_session_alone(spark):
    """``sparklda.ship_package`` is the jobs' shipping, for sessions built by hand (a
    cluster's executors then import this sparklda); a local master needs nothing."""
    import sparklda
    from sparklda.cli.session import ship_package

    assert "ship_package" in sparklda.__all__ and sparklda.ship_package is ship_package
    assert sparklda.ship_package(spark) is None
