"""Plumbing of jobs/benchmark.py, now in the package (:mod:`sparklda.cli`)."""

from __future__ import annotations

import logging
import os

from sparklda._java import java_problem
from sparklda.cli.config import load_config, parse_value
from sparklda.cli.job import base_parser, setup_logging
from sparklda.cli.session import build_session, ship_package
from sparklda.io import resolve_sample

HERE = os.path.dirname(os.path.abspath(__file__))


def require_java():
    problem = java_problem()
    if problem:
        raise SystemExit(f"error: {problem}")


__all__ = ["HERE", "base_parser", "build_session", "java_problem", "load_config", "logging",
           "parse_value", "require_java", "resolve_sample", "setup_logging", "ship_package"]
