"""Java check: Spark 4 needs Java 17 or newer; say so plainly when it is missing."""

from __future__ import annotations

import os
import re
import shutil
import subprocess

MESSAGE = (
    "sparklda needs Java 17 or newer to run Apache Spark, and {problem}. Install a JDK or "
    "JRE 17+ (for example `apt-get install openjdk-17-jre-headless` on Debian/Ubuntu, or "
    "`brew install openjdk@17` on macOS) and make sure `java` is on PATH or JAVA_HOME "
    "points at it."
)


def java_executable() -> str | None:
    """The ``java`` Spark's launcher runs: ``$JAVA_HOME/bin/java``, else the one on PATH
    (None: no ``java`` on PATH; the JAVA_HOME path is returned even when it is missing)."""
    home = os.environ.get("JAVA_HOME")
    return os.path.join(home, "bin", "java") if home else shutil.which("java")


def java_problem() -> str | None:
    """None when a usable Java (17+) is found, else a sentence saying what is wrong."""
    home = os.environ.get("JAVA_HOME")
    java = java_executable()
    if not java or not os.path.exists(java):
        return MESSAGE.format(
            problem="no `java` was found"
            + (f" (JAVA_HOME={home} has no bin/java)" if home else " on PATH")
        )
    try:
        out = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as e:
        return MESSAGE.format(problem=f"running `{java} -version` failed ({e})")
    m = re.search(r'version "(\d+)(?:\.(\d+))?', out.stderr + out.stdout)
    if not m:
        return MESSAGE.format(problem=f"`{java} -version` printed no version")
    major = int(m.group(1))
    if major == 1 and m.group(2):
        major = int(m.group(2))
    if major < 17:
        return MESSAGE.format(problem=f"the Java found ({java}) is version {major}")
    return None
