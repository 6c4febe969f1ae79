"""The job entry points: ``sparklda-train``, ``sparklda-infer``, ``sparklda-generate``,
``python -m sparklda``.

``main(argv)`` dispatches the subcommands ``train`` (:mod:`sparklda.cli.train`),
``infer`` (:mod:`sparklda.cli.infer`), ``compare`` (:mod:`sparklda.cli.compare`)
and ``generate`` (:mod:`sparklda.cli.generate`). Configuration files and overrides:
:mod:`sparklda.cli.config`; who decides the Spark master and properties:
:mod:`sparklda.cli.session`.
"""

from __future__ import annotations

import sys

from .. import __version__
from . import compare, generate, infer, train

COMMANDS = {
    "train": (train.main, "train a model as a TOML configuration says"),
    "infer": (infer.main, "score documents with a trained model, writing Parquet"),
    "compare": (compare.main, "train every mode on one corpus and compare them"),
    "generate": (generate.main, "draw a synthetic LDA corpus on the executors, writing Parquet"),
}

USAGE = (
    "usage: sparklda {train,infer,compare,generate} [options]  (sparklda COMMAND --help)\n\n"
    + "\n".join(f"  {name:<8} {text}" for name, (_, text) in COMMANDS.items())
)


def main(argv=None) -> int:
    """``python -m sparklda COMMAND ...``: run the subcommand, return its exit code."""
    argv = sys.argv[1:] if argv is None else list(argv)
    if not argv or argv[0] in ("-h", "--help"):
        print(USAGE, file=sys.stdout if argv else sys.stderr)
        return 0 if argv else 2
    if argv[0] == "--version":
        print(f"sparklda {__version__}")
        return 0
    command, rest = argv[0], argv[1:]
    if command not in COMMANDS:
        print(
            f"{USAGE}\n\nerror: unknown command {command!r}; choose from {list(COMMANDS)}",
            file=sys.stderr,
        )
        return 2
    return COMMANDS[command][0](rest, prog=f"sparklda {command}")


__all__ = ["COMMANDS", "main"]
