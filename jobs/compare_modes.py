"""Train every inference mode on one corpus and print held-out quality and time.

``spark-submit jobs/compare_modes.py`` (or ``python jobs/compare_modes.py``)
trains SCVB0, CVB0, CVB and SVB (and batch VB) on the UCI KOS corpus with
K=50, α=0.1, η=0.01, the same 430 held-out documents (seed 0), minibatches
of 1,000 documents and 20 passes (SCVB0, SVB) or iterations (CVB0, CVB,
batch VB), each mode otherwise at its defaults,
in one Spark session (``local[2]`` unless ``--master`` says otherwise), and
prints a table of the final held-out per-token log-likelihood (document
completion, :mod:`sparklda.evaluation`) and the times. ``--out`` writes the
rows as JSON together with the command line.

Times: ``train s`` is :func:`sparklda.api.fit`'s training clock (corpus
building, i.e. validation, split, block layout and caching, included;
held-out evaluation excluded), ``corpus s`` the corpus-building part of it,
``wall s`` the whole call including the final evaluation.
"""

from __future__ import annotations

import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _common  # noqa: E402

log = _common.logging.getLogger("sparklda.compare")

ROOT = os.path.dirname(_common.HERE)
DEFAULT_DATA = os.path.join(ROOT, "..", "shared", "data", "uci_kos")
#: name shown -> TrainParams overrides; every other parameter at its default
MODES = {
    "scvb0": {"algorithm": "scvb0"},
    "cvb0": {"algorithm": "cvb0"},
    "cvb": {"algorithm": "cvb"},
    "svb": {"algorithm": "svb"},
    "svb-batch": {"algorithm": "svb", "batch": True},
}


def parser():
    p = _common.base_parser(__doc__.splitlines()[0])
    p.set_defaults(master="local[2]")
    p.add_argument("--data", default=DEFAULT_DATA,
                   help="folder with docword.txt[.gz] and vocab.txt (UCI bag of words)")
    p.add_argument("--modes", default=",".join(MODES),
                   help=f"comma-separated, from {list(MODES)}")
    p.add_argument("--k", type=int, default=50)
    p.add_argument("--alpha", type=float, default=0.1)
    p.add_argument("--eta", type=float, default=0.01)
    p.add_argument("--passes", type=int, default=20,
                   help="passes (SCVB0, SVB) or iterations (CVB0, CVB, batch VB)")
    p.add_argument("--minibatch-size", type=int, default=1000,
                   help="documents per round of SCVB0 and SVB (the corpus's slice size; CVB0 "
                        "and CVB sweep every slice each iteration)")
    p.add_argument("--heldout-count", type=int, default=430)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--param", action="append", default=[], metavar="KEY=VALUE",
                   help="override a TrainParams value for every mode (a TOML literal)")
    p.add_argument("--out", help="write the rows and the command line as JSON here")
    return p


def _docword(folder):
    for name in ("docword.txt.gz", "docword.txt"):
        path = os.path.join(folder, name)
        if os.path.exists(path):
            return path
    raise SystemExit(f"error: no docword.txt[.gz] in {folder!r}")


def run(spark, args) -> list[dict]:
    from sparklda.api import fit
    from sparklda.corpus import read_uci
    from sparklda.params import TrainParams

    names = [m.strip() for m in args.modes.split(",") if m.strip()]
    unknown = [m for m in names if m not in MODES]
    if unknown:
        raise SystemExit(f"error: unknown mode(s) {unknown}; choose from {list(MODES)}")
    extra = {}
    for item in args.param:
        key, _, value = item.partition("=")
        extra[key.strip()] = _common.parse_value(value.strip())
    docword = _docword(args.data)
    vocab = os.path.join(args.data, "vocab.txt")
    rows = []
    for name in names:
        params = TrainParams(k=args.k, alpha=args.alpha, eta=args.eta, passes=args.passes,
                             minibatch_size=args.minibatch_size,
                             heldout_count=args.heldout_count, seed=args.seed,
                             **{**MODES[name], **extra}).validate()
        source = read_uci(spark, docword, vocab if os.path.exists(vocab) else None)
        log.info("training %s: %s", name, params.to_dict())
        t0 = time.perf_counter()
        result = fit(source, params)
        wall = time.perf_counter() - t0
        final = result.evaluations[-1]
        rows.append({
            "mode": name, "rounds": result.report["rounds"],
            "passes": result.rounds[-1]["passes"] if result.rounds else 0,
            "heldout_loglik": final["heldout_loglik"], "perplexity": final["perplexity"],
            "heldout_documents": final["heldout_documents"],
            "train_seconds": result.report["train_seconds"],
            "corpus_seconds": result.report["corpus_build_seconds"], "wall_seconds": wall,
            "params": params.to_dict(), "mode_report": result.report["mode"],
        })
        log.info("%s: held-out %.4f nats/token, %.1f s", name, final["heldout_loglik"],
                 result.report["train_seconds"])
    return rows


def format_table(rows) -> str:
    lines = ["| mode | passes / iterations | held-out log-lik. per token | perplexity | "
             "train s | corpus s | wall s |",
             "|---|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        lines.append(f"| {r['mode']} | {r['passes']:g} | {r['heldout_loglik']:.4f} | "
                     f"{r['perplexity']:.1f} | {r['train_seconds']:.1f} | "
                     f"{r['corpus_seconds']:.1f} | {r['wall_seconds']:.1f} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    args = parser().parse_args(argv)
    _common.setup_logging(args.log_level)
    cfg = _common.load_config(args.config, args.set)
    _common.require_java()
    spark = _common.build_session(cfg, args.master, "sparklda-compare-modes")
    try:
        rows = run(spark, args)
    finally:
        spark.stop()
    command = " ".join([os.path.basename(sys.argv[0])] + list(sys.argv[1:] if argv is None
                                                                 else argv))
    print(f"\n{command}\nK={args.k}, alpha={args.alpha}, eta={args.eta}, "
          f"minibatch {args.minibatch_size}, "
          f"{rows[0]['heldout_documents'] if rows else 0} held-out documents, seed {args.seed}, "
          f"master {args.master}\n")
    print(format_table(rows))
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"command": command, "rows": rows}, f, indent=1, default=str)
    return 0


if __name__ == "__main__":
    sys.exit(main())
