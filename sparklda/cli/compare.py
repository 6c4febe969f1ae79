"""Train every inference mode on one corpus and print held-out quality and time.

``python -m sparklda compare`` (or ``spark-submit jobs/compare_modes.py``)
trains every mode of the registry (:data:`sparklda.modes.MODES`: SCVB0, CVB0, CVB,
SVB, MAP, Gibbs) and their variants (batch VB) on the UCI KOS corpus shipped
in the package (``--data`` names another UCI folder) with K=50, each mode's α and
η (0.1 and 0.01; MAP: 50/k + 1 and 1.1) unless ``--alpha``/``--eta`` set them,
the same 430 held-out documents (seed 0), minibatches of 1,000
documents and 20 passes (SCVB0, SVB), iterations (CVB0, CVB, MAP, batch VB) or
sweeps (Gibbs),
each mode otherwise at its defaults, in one Spark session (built as the other
jobs build theirs: spark-submit's master, else ``--master``, else the
config's ``[spark] master``, else ``local[2]``), and prints a table of the
final held-out per-token log-likelihood (document completion,
:mod:`sparklda.evaluation`) and the times. ``--heldout-count 0`` keeps no
documents out: the table then has no held-out scores. ``--out`` writes the
rows as JSON together with the command line.

Times: ``train s`` is :func:`sparklda.api.fit`'s training clock (corpus
building, i.e. validation, split, block layout and caching, included;
held-out evaluation excluded), ``corpus s`` the corpus-building part of it,
``wall s`` the whole call including the final evaluation.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import time

from .._java import java_problem
from ..api import fit
from ..corpus import read_uci
from ..io import resolve_sample
from ..modes import MODES as REGISTRY
from ..params import AUTO_PRIOR, TrainParams
from .config import ConfigError, check_config, load_config, parse_value
from .job import apply_log_level, base_parser, error, print_config, setup_logging
from .session import build_session

log = logging.getLogger("sparklda.compare")

DESCRIPTION = "Train every inference mode on one corpus and print held-out quality and time."
SAMPLE = "sample:kos"


def compared_modes() -> dict[str, dict]:
    """Name shown -> TrainParams overrides, every other parameter at its default: the
    modes of the registry (:data:`sparklda.modes.MODES`) in its order, then their
    variants."""
    out: dict[str, dict] = {name: {"algorithm": name} for name in REGISTRY}
    for name, mode in REGISTRY.items():
        for variant, overrides in mode.variants.items():
            out[variant] = {"algorithm": name, **overrides}
    return out


MODES = compared_modes()


def parser(prog: str | None = None):
    p = base_parser(DESCRIPTION, prog)
    p.add_argument(
        "--data",
        default=SAMPLE,
        help="folder with docword.txt[.gz] and vocab.txt (UCI bag of words); "
        "default: the KOS corpus shipped in the package",
    )
    p.add_argument("--modes", default=",".join(MODES), help=f"comma-separated, from {list(MODES)}")
    p.add_argument("--k", type=int, default=50)
    p.add_argument(
        "--alpha", type=float, default=None, help="default: each mode's (0.1; map: 50/k + 1)"
    )
    p.add_argument("--eta", type=float, default=None, help="default: each mode's (0.01; map: 1.1)")
    p.add_argument(
        "--passes",
        type=int,
        default=20,
        help="passes (SCVB0, SVB), iterations (CVB0, CVB, MAP, batch VB) or sweeps (Gibbs)",
    )
    p.add_argument(
        "--minibatch-size",
        type=int,
        default=1000,
        help="documents per round of SCVB0 and SVB (the corpus's slice size; CVB0 "
        "and CVB sweep every slice each iteration)",
    )
    p.add_argument(
        "--heldout-count",
        type=int,
        default=430,
        help="documents held out for evaluation (0: no evaluation)",
    )
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--param",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a TrainParams value for every mode (a TOML literal)",
    )
    p.add_argument("--out", help="write the rows and the command line as JSON here")
    return p


def corpus_files(folder: str) -> tuple[str, str | None]:
    """(docword file, vocab file or None) of a UCI folder (``sample:kos``: the shipped one)."""
    folder = resolve_sample(folder)
    for name in ("docword.txt.gz", "docword.txt"):
        path = os.path.join(folder, name)
        if os.path.exists(path):
            vocab = os.path.join(folder, "vocab.txt")
            return path, (vocab if os.path.exists(vocab) else None)
    raise ConfigError(f"--data: no docword.txt[.gz] in {folder!r}.")


def plan(args) -> list[tuple[str, TrainParams]]:
    """(mode name, validated TrainParams) of each mode to train; raises ValueError."""
    names = [m.strip() for m in args.modes.split(",") if m.strip()]
    unknown = [m for m in names if m not in MODES]
    if unknown or not names:
        raise ConfigError(f"--modes: unknown or no mode(s) {unknown}; choose from {list(MODES)}.")
    extra = {}
    for item in args.param:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"--param expects KEY=VALUE, got {item!r}.")
        extra[key.strip()] = parse_value(value.strip())
    base = {
        "k": args.k,
        "alpha": AUTO_PRIOR if args.alpha is None else args.alpha,
        "eta": AUTO_PRIOR if args.eta is None else args.eta,
        "passes": args.passes,
        "minibatch_size": args.minibatch_size,
        "heldout_count": args.heldout_count,
        "seed": args.seed,
    }
    return [
        (name, TrainParams.from_dict({**base, **MODES[name], **extra}).validate()) for name in names
    ]


def _prior(value: float | None) -> str:
    return "each mode's default" if value is None else str(value)


def run(spark, args, modes=None) -> list[dict]:
    modes = modes if modes is not None else plan(args)
    docword, vocab = corpus_files(args.data)
    rows = []
    for name, params in modes:
        source = read_uci(spark, docword, vocab)
        log.info("training %s: %s", name, params.to_dict())
        t0 = time.perf_counter()
        result = fit(source, params)
        wall = time.perf_counter() - t0
        final = result.evaluations[-1] if result.evaluations else {}
        rows.append(
            {
                "mode": name,
                "rounds": result.report["rounds"],
                "passes": result.rounds[-1]["passes"] if result.rounds else 0,
                "heldout_loglik": final.get("heldout_loglik"),
                "perplexity": final.get("perplexity"),
                "heldout_documents": final.get("heldout_documents", 0),
                "train_seconds": result.report["train_seconds"],
                "corpus_seconds": result.report["corpus_build_seconds"],
                "wall_seconds": wall,
                "params": params.to_dict(),
                "mode_report": result.report["mode"],
            }
        )
        if final:
            log.info(
                "%s: held-out %.4f nats/token, %.1f s",
                name,
                final["heldout_loglik"],
                result.report["train_seconds"],
            )
        else:
            log.info("%s: %.1f s (nothing held out)", name, result.report["train_seconds"])
    return rows


def _fmt(value, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def format_table(rows) -> str:
    lines = [
        (
            "| mode | passes / iterations | held-out log-lik. per token | perplexity | "
            "train s | corpus s | wall s |"
        ),
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r['mode']} | {r['passes']:g} | {_fmt(r['heldout_loglik'], '.4f')} | "
            f"{_fmt(r['perplexity'], '.1f')} | {r['train_seconds']:.1f} | "
            f"{r['corpus_seconds']:.1f} | {r['wall_seconds']:.1f} |"
        )
    return "\n".join(lines)


def main(argv=None, prog: str | None = None) -> int:
    args = parser(prog).parse_args(argv)
    if args.print_config:
        return print_config(args.print_config)
    setup_logging(args.log_level)
    try:  # everything is checked before Spark starts
        cfg = load_config(args.config, args.set, args.conf_set)
        apply_log_level(cfg, args.log_level)
        cfg = check_config(cfg)
        modes = plan(args)
        corpus_files(args.data)
    except ValueError as e:
        return error(e)
    problem = java_problem()
    if problem:
        return error(problem)
    spark = build_session(cfg, args.master, "sparklda-compare-modes")
    try:
        master = spark.sparkContext.master
        rows = run(spark, args, modes)
    except (ValueError, FileNotFoundError) as e:
        return error(e)
    finally:
        spark.stop()
    command = " ".join(
        [os.path.basename(sys.argv[0])] + list(sys.argv[1:] if argv is None else argv)
    )
    heldout = rows[0]["heldout_documents"] if rows else 0
    print(
        f"\n{command}\nK={args.k}, alpha={_prior(args.alpha)}, eta={_prior(args.eta)}, "
        f"minibatch {args.minibatch_size}, "
        f"{heldout or 'no'} held-out documents, seed {args.seed}, master {master}\n"
    )
    print(format_table(rows))
    if args.out:
        with open(args.out, "w") as f:
            json.dump(
                {"command": command, "master": master, "rows": rows}, f, indent=1, default=str
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
