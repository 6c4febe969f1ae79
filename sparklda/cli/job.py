"""What every job shares: the command line, logging, the Java check, output checks, main.

A job is ``check(cfg)`` (pure: runs before Spark starts) and ``run(spark, cfg)``.
:func:`job_main` parses the command line, loads and checks the configuration,
checks Java, builds the session (:mod:`sparklda.cli.session`), runs and stops
the session. Bad settings or input print ``error: ...`` on stderr and return 2.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import tempfile

from .._java import java_problem
from ..errors import ModelPathError, translate_spark_error
from ..execution import backend_for
from ..storage import SparkFiles, unknown_scheme_error
from .config import load_config, shipped_config, shipped_configs
from .session import VERBOSE_LEVELS, build_session, check_spark_settings

log = logging.getLogger("sparklda.job")


def base_parser(
    description: str, prog: str | None = None, resume: bool = False
) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=prog, description=description)
    if resume:
        p.add_argument(
            "--resume",
            action="store_true",
            help="continue a killed run from the newest checkpoint in [checkpoint] dir "
            "(the same configuration; a fresh start when there is none)",
        )
    p.add_argument(
        "--config", help="TOML configuration file (--print-config NAME prints a shipped example)"
    )
    p.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="SECTION.KEY=VALUE",
        help="override one configuration value, a TOML literal (a bare word is a "
        "string; booleans are true/false), e.g. --set training.k=50 "
        "--set output.overwrite=true",
    )
    p.add_argument(
        "--conf-set",
        action="append",
        default=[],
        metavar="PROPERTY=VALUE",
        help="set a Spark property by its full name, as [spark.conf] does, e.g. "
        "--conf-set spark.executor.memory=2g (spark-submit's own settings "
        "still win)",
    )
    p.add_argument(
        "--master",
        help="Spark master when run with plain python (default: the "
        "config's [spark] master, else local[2]); under "
        "spark-submit its --master decides",
    )
    p.add_argument(
        "--remote",
        metavar="sc://HOST:PORT",
        help="run against a Spark Connect server (default: the SPARK_REMOTE environment "
        "variable; without either, a classic session)",
    )
    p.add_argument(
        "--print-config",
        metavar="NAME",
        help=f"print the shipped example configuration NAME (one of "
        f"{shipped_configs()}) and exit, e.g. --print-config local > my.toml",
    )
    p.add_argument(
        "--log-level",
        type=str.upper,
        choices=LOG_LEVELS,
        help="log level of sparklda's messages and of Spark's (default: sparklda INFO, "
        "Spark the config's [spark] log_level, else WARN with its startup noise hidden)",
    )
    return p


#: --log-level choices, and the Spark (log4j) level of each.
SPARK_LEVELS = {"DEBUG": "DEBUG", "INFO": "INFO", "WARNING": "WARN", "WARN": "WARN",
                "ERROR": "ERROR"}  # fmt: skip
LOG_LEVELS = tuple(SPARK_LEVELS)


def apply_log_level(cfg: dict, level: str | None) -> None:
    """``--log-level`` given: Spark logs at that level too ([spark] log_level)."""
    if level:
        cfg.setdefault("spark", {})["log_level"] = SPARK_LEVELS[level]


class _Stdout:
    """sys.stdout as it is when a record is written (a live progress line may redirect it
    for a while, so that log lines print above the line)."""

    def write(self, text: str) -> int:
        return sys.stdout.write(text)

    def flush(self) -> None:
        sys.stdout.flush()


def setup_logging(level: str | None) -> None:
    level = "WARNING" if level == "WARN" else (level or "INFO")
    logging.basicConfig(
        level=getattr(logging, level.upper(), logging.INFO),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=_Stdout(),  # type: ignore[arg-type]
    )
    logging.getLogger("py4j").setLevel(logging.WARNING)


def error(message) -> int:
    print(f"error: {message}", file=sys.stderr)
    return 2


def print_config(name: str) -> int:
    try:
        text = shipped_config(name)
    except ValueError as e:
        return error(e)
    sys.stdout.flush()
    sys.stdout.buffer.write(text)
    sys.stdout.buffer.flush()
    return 0


# --------------------------------------------------------------------------
# Outputs: checked once Spark is up (paths resolve against its default file
# system) and before the corpus is read


def _location(spark, path: str, key: str) -> tuple[str, str, object]:
    """(scheme, path, Hadoop file system) of ``path`` as Spark resolves it: ``file`` and a
    local path, or the scheme and the qualified URI."""
    from py4j.protocol import Py4JError

    sc = spark.sparkContext
    jvm = sc._jvm
    try:
        jpath = jvm.org.apache.hadoop.fs.Path(path)
        fs = jpath.getFileSystem(sc._jsc.hadoopConfiguration())
        qualified = fs.makeQualified(jpath)
    except Py4JError as e:  # no file system for the scheme, a bad URI
        known = unknown_scheme_error(path, e)
        if known is not None:
            raise ModelPathError(f"{key}: {known}") from None
        text = str(e).strip().splitlines()
        raise ModelPathError(
            f"{key} {path!r} cannot be used: {text[-1] if text else type(e).__name__}"
        ) from None
    uri = qualified.toUri()
    scheme = uri.getScheme() or "file"
    return scheme, (uri.getPath() if scheme == "file" else qualified.toString()), fs


def _nearest_existing(path: str) -> str:
    parent = os.path.dirname(os.path.abspath(path).rstrip("/")) or "/"
    while not os.path.exists(parent):
        parent = os.path.dirname(parent)
    return parent


def check_local_output(path: str, key: str, overwrite: bool | None) -> None:
    """Refuse a local output path that exists (unless ``overwrite``; None: a file written
    in place), whose parent is a file, or whose directory cannot be written."""
    if os.path.exists(path):
        if overwrite is False:
            table = key.split(".")[0]
            raise ModelPathError(
                f"{key} {path!r} already exists; set {table}.overwrite = true to replace it."
            )
        if overwrite is None and os.path.isdir(path):
            raise ModelPathError(f"{key} {path!r} is a directory; it must name a file.")
    parent = _nearest_existing(path)
    if not os.path.isdir(parent):
        raise ModelPathError(
            f"{key} {path!r} cannot be written: {parent!r} is a file, not a directory."
        )
    try:  # as the writer will: os.access says yes to root even on a read-only file system
        os.rmdir(tempfile.mkdtemp(prefix=".sparklda-write-check-", dir=parent))
    except OSError as e:
        raise ModelPathError(
            f"{key} {path!r} cannot be written: directory {parent!r} is not "
            f"writable ({e.strerror})."
        ) from None


def check_output(spark, path: str, key: str, overwrite: bool) -> str:
    """Check an output directory before any work (see :func:`check_local_output`; on other
    file systems: exists, parent is a file; under Spark Connect, which has no file system
    API, only whether it exists). Returns the path as Spark resolves it."""
    if not backend_for(spark).has_rdds:
        if not overwrite and SparkFiles(spark).exists(path):
            table = key.split(".")[0]
            raise ModelPathError(
                f"{key} {path!r} already exists; set {table}.overwrite = true to replace it."
            )
        return path
    scheme, where, fs = _location(spark, path, key)
    if scheme == "file":
        check_local_output(where, key, overwrite)
        return where
    jvm = spark.sparkContext._jvm
    jpath = jvm.org.apache.hadoop.fs.Path(where)
    if fs.exists(jpath) and not overwrite:
        table = key.split(".")[0]
        raise ModelPathError(
            f"{key} {path!r} already exists; set {table}.overwrite = true to replace it."
        )
    parent = jpath.getParent()
    while parent is not None and not fs.exists(parent):
        parent = parent.getParent()
    if parent is not None and fs.getFileStatus(parent).isFile():
        raise ModelPathError(
            f"{key} {path!r} cannot be written: {parent.toString()!r} is a file, not a directory."
        )
    return where


# --------------------------------------------------------------------------
# main


def _first_line(exc: BaseException) -> str:
    """The first non-blank line of ``exc``'s message (no stack), or its type's name."""
    lines = [x.strip() for x in str(exc).splitlines() if x.strip()]
    first = lines[0] if lines else type(exc).__name__
    return first.removeprefix(": ")


def _is_spark_error(exc: BaseException) -> bool:
    return (type(exc).__module__ or "").startswith(("pyspark.", "py4j."))


def _spark_failure(exc: BaseException, verbose: bool) -> int | None:
    """``error: ...`` for an exception out of Spark (pyspark's or py4j's): the library's
    error it carries (exit 2), else its first line (exit 1); None for other exceptions.
    The stack goes to the log at DEBUG."""
    if not _is_spark_error(exc):
        return None
    translated = translate_spark_error(exc)
    if verbose:
        log.debug("the Spark error in full", exc_info=exc)
    if translated is not None:
        return error(translated)
    error(f"Spark failed: {_first_line(exc)}")
    if not verbose:
        print("(run with --log-level DEBUG to see Spark's stack)", file=sys.stderr)
    return 1


def job_main(
    argv,
    description: str,
    check,
    run,
    app_name: str,
    prog: str | None = None,
    resume: bool = False,
) -> int:
    """A job's ``main``: parse the command line, load the configuration, check it with
    ``check(cfg)`` (``check(cfg, resume=...)`` for a job that takes ``--resume``) and the
    Spark settings (master, memory sizes) before Spark starts, then ``run(spark, cfg)``
    (``run(spark, cfg, resume=...)``). Bad settings or input print ``error: ...`` and
    return 2; so does an error Spark carries from the executors, without Spark's stack
    (shown with ``--log-level DEBUG``). The session is always stopped."""
    args = base_parser(description, prog, resume).parse_args(argv)
    if args.print_config:
        return print_config(args.print_config)
    setup_logging(args.log_level)
    remote = args.remote or os.environ.get("SPARK_REMOTE") or None
    try:
        cfg = load_config(args.config, args.set, args.conf_set)
        apply_log_level(cfg, args.log_level)
        if resume:
            check(cfg, resume=args.resume)
        else:
            check(cfg)
        if not remote:
            check_spark_settings(cfg, args.master)
    except ValueError as e:
        return error(e)
    verbose = cfg.get("spark", {}).get("log_level", "WARN").upper() in VERBOSE_LEVELS
    problem = None if remote else java_problem()  # a Connect client runs no JVM
    if problem:
        return error(problem)
    try:
        spark = build_session(cfg, args.master, app_name, remote=remote)
    except Exception as e:  # a master or property Spark refuses, a JVM that cannot start
        if not _is_spark_error(e):
            raise
        log.debug("starting Spark failed", exc_info=True)
        where = f" (master {args.master or cfg.get('spark', {}).get('master')})"
        return error(f"Spark could not start{where if not remote else ''}: {_first_line(e)}")
    try:
        if resume:
            run(spark, cfg, resume=args.resume)
        else:
            run(spark, cfg)
    except (ValueError, FileExistsError, FileNotFoundError) as e:
        return error(e)
    except Exception as e:
        code = _spark_failure(e, verbose)
        if code is None:
            raise
        return code
    finally:
        spark.stop()
    return 0
