"""Shared plumbing of the spark-submit jobs: config, overrides, session, logging.

Jobs are thin: parse ``--config`` (TOML) and ``--set section.key=value``
overrides, build the session, call the library, stop.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import tempfile
import tomllib
import zipfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))  # run from a checkout without installing

from sparklda._java import java_problem  # noqa: E402

log = logging.getLogger("sparklda.job")


def base_parser(description: str) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--config", help="TOML configuration file (see conf/)")
    p.add_argument("--set", action="append", default=[], metavar="SECTION.KEY=VALUE",
                   help="override one configuration value (a TOML literal; bare words are "
                        "strings), e.g. --set training.k=50 --set output.model=/tmp/m")
    p.add_argument("--master", help="Spark master (default: the config's spark.master, or "
                                    "what spark-submit set)")
    p.add_argument("--log-level", default="INFO")
    return p


def parse_value(text: str):
    try:
        return tomllib.loads(f"v = {text}")["v"]
    except tomllib.TOMLDecodeError:
        return text


def load_config(path: str | None, overrides: list[str]) -> dict:
    cfg: dict = {}
    if path:
        if not os.path.exists(path):
            raise SystemExit(f"error: configuration file {path!r} does not exist")
        with open(path, "rb") as f:
            try:
                cfg = tomllib.load(f)
            except tomllib.TOMLDecodeError as e:
                raise SystemExit(f"error: {path}: {e}") from None
    for item in overrides:
        if "=" not in item or "." not in item.split("=", 1)[0]:
            raise SystemExit(f"error: --set expects SECTION.KEY=VALUE, got {item!r}")
        key, value = item.split("=", 1)
        *sections, last = key.strip().split(".")
        node = cfg
        for s in sections:
            node = node.setdefault(s, {})
        node[last] = parse_value(value.strip())
    return cfg


def setup_logging(level: str):
    logging.basicConfig(level=getattr(logging, level.upper(), logging.INFO),
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s", stream=sys.stdout)
    logging.getLogger("py4j").setLevel(logging.WARNING)


def require_java():
    problem = java_problem()
    if problem:
        print(f"error: {problem}", file=sys.stderr)
        raise SystemExit(2)


def build_session(cfg: dict, master: str | None, app_name: str):
    from pyspark import SparkConf
    from pyspark.sql import SparkSession

    spark_cfg = cfg.get("spark", {})
    conf = SparkConf()
    builder = SparkSession.builder.appName(spark_cfg.get("app_name", app_name))
    master = master or (None if conf.contains("spark.master") else spark_cfg.get("master", "local[2]"))
    if master:
        builder = builder.master(master)
    # Round results (sparse N̂^Φ rows, a few MB per task) go straight back to the driver
    # instead of through the block manager (Spark's default cut-off is 1 MB).
    settings = {"spark.ui.showConsoleProgress": "false", "spark.task.maxDirectResultSize": "64m"}
    settings.update({k: str(v) for k, v in spark_cfg.get("conf", {}).items()})
    for k, v in settings.items():
        builder = builder.config(k, v)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel(spark_cfg.get("log_level", "WARN"))
    ship_package(spark)
    return spark


def ship_package(spark):
    """On a cluster, send the sparklda package to the executors (--py-files style)."""
    if spark.sparkContext.master.startswith("local"):
        return
    import sparklda

    pkg = os.path.dirname(sparklda.__file__)
    path = os.path.join(tempfile.mkdtemp(prefix="sparklda-"), "sparklda.zip")
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        for root, _, files in os.walk(pkg):
            for name in files:
                if name.endswith((".py", ".txt", ".gz")):
                    full = os.path.join(root, name)
                    z.write(full, os.path.relpath(full, os.path.dirname(pkg)))
    spark.sparkContext.addPyFile(path)


def resolve_sample(path: str | None) -> str | None:
    """``sample:kos/docword.txt.gz`` names a file of the corpus shipped in the package."""
    if path and path.startswith("sample:"):
        from importlib.resources import files

        return str(files("sparklda").joinpath("data", path[len("sample:"):]))
    return path


def job_main(argv, doc: str, check_config, run, app_name: str) -> int:
    """A job's ``main``: parse the command line, load the configuration, check it
    with ``check_config`` before Spark starts, then ``run(spark, cfg)``. Bad
    settings or input print ``error: ...`` and return 2; the session is always
    stopped."""
    args = base_parser(doc.splitlines()[0]).parse_args(argv)
    setup_logging(args.log_level)
    cfg = load_config(args.config, args.set)
    try:
        check_config(cfg)
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    require_java()
    spark = build_session(cfg, args.master, app_name)
    try:
        run(spark, cfg)
    except (ValueError, FileExistsError, FileNotFoundError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    finally:
        spark.stop()
    return 0
