"""Both held-out evaluators for every sparklda mode (issue 34, point 5).

For each corpus (by default KOS at K=50 and 20 Newsgroups at K=100) the run holds out
the same documents for every mode (``heldout_count`` and ``seed``, as ``fit`` does,
checked against the fit's own count), fits each mode of ``sparklda.modes.MODES`` (so a
mode added to the registry joins), and scores the model on those documents twice, on
the executors:

* ``completion``: document completion (the second half of each document given the
  first; ``TopicModel.evaluate``), which is also what the fit's own evaluation gives;
* ``left_to_right``: the left-to-right particle estimate of log p(w_d | Φ̂, α) of each
  whole document (``evaluator="left_to_right"``), with ``--particles`` particles.

Both are per token (of the second halves, or of the whole documents) and not
comparable to each other; what matters is how they rank the modes. Each score's
wall-clock seconds are recorded. Optionally (``--particle-sweep``) one mode's model on
the first corpus is scored with other particle counts and seeds, to show the
estimate's spread.

    PYTHONPATH=$PWD python benchmarks/evaluators.py --out docs/benchmarks/evaluators.json
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from benchmarks.lda_bench.cli import DEFAULT_DATA, build_session  # noqa: E402
from benchmarks.lda_bench.connect import uci_paths  # noqa: E402
from benchmarks.lda_bench.report import machine_info  # noqa: E402
from sparklda.api import fit  # noqa: E402
from sparklda.corpus import heldout_blocks, read_uci, split_documents, validate  # noqa: E402
from sparklda.modes import MODES  # noqa: E402
from sparklda.params import TrainParams  # noqa: E402

log = logging.getLogger("benchmarks.evaluators")

#: Passes (SCVB0, SVB) or iterations (the batch modes) of each mode's fit; a mode not
#: listed gets DEFAULT_PASSES.
PASSES = {"scvb0": 5, "svb": 5, "cvb0": 20, "cvb": 20, "map": 20, "gibbs": 50}
DEFAULT_PASSES = 20


def parse_items(text: str, cast=str) -> list[tuple[str, object]]:
    out = []
    for item in text.split(","):
        if item.strip():
            name, _, value = item.strip().partition(":" if ":" in item else "=")
            out.append((name, cast(value)))
    return out


def score(model, heldout, evaluator: str, particles: int, seed: int) -> dict:
    t0 = time.perf_counter()
    s = model.evaluate(heldout, evaluator=evaluator, particles=particles, seed=seed)
    return {
        "heldout_loglik": s.loglik_per_token,
        "perplexity": s.perplexity,
        "tokens": s.tokens,
        "documents": s.documents,
        "seconds": time.perf_counter() - t0,
    }


def run_corpus(spark, name: str, k: int, args, held: int, out: dict) -> None:
    docword, vocab = uci_paths(os.path.join(args.data_dir, name))
    source = read_uci(spark, docword, vocab)
    stats = validate(source)
    _, held_rdd = split_documents(source, stats, heldout_count=held, seed=args.seed)
    heldout = heldout_blocks(held_rdd, seed=args.seed)
    heldout.cache()
    rows = out.setdefault("rows", [])
    first_model = None
    try:
        for mode in args.modes:
            passes = args.passes.get(mode, PASSES.get(mode, DEFAULT_PASSES))
            params = TrainParams(
                algorithm=mode, k=k, passes=passes, heldout_count=held, seed=args.seed
            )
            t0 = time.perf_counter()
            res = fit(source, params)
            fit_s = time.perf_counter() - t0
            own = res.evaluations[-1]
            row = {
                "corpus": name,
                "k": k,
                "mode": mode,
                "passes": passes,
                "fit_s": fit_s,
                "fit_completion": own["heldout_loglik"],
                "completion": score(res.model, heldout, "completion", 0, args.seed),
                "left_to_right": score(
                    res.model, heldout, "left_to_right", args.particles, args.seed
                ),
            }
            if row["completion"]["documents"] != own["heldout_documents"]:
                raise SystemExit(f"{name} {mode}: fit held out other documents")
            rows.append(row)
            log.info(
                "%s K=%d %s: completion %.4f (%.1f s), left-to-right %.4f (%.1f s)",
                name,
                k,
                mode,
                row["completion"]["heldout_loglik"],
                row["completion"]["seconds"],
                row["left_to_right"]["heldout_loglik"],
                row["left_to_right"]["seconds"],
            )
            first_model = first_model or (mode, res.model)
            _save(args.out, out)
        if args.particle_sweep and not out.get("particle_sweep") and first_model:
            mode, model = first_model
            sweep = []
            for particles in (1, 3, 10, 30):
                for seed in (args.seed, args.seed + 1):
                    s = score(model, heldout, "left_to_right", particles, seed)
                    sweep.append({"particles": particles, "seed": seed, **s})
                    log.info(
                        "%s %s R=%d seed %d: %.4f", name, mode, particles, seed, s["heldout_loglik"]
                    )
            out["particle_sweep"] = {"corpus": name, "k": k, "mode": mode, "rows": sweep}
            _save(args.out, out)
    finally:
        heldout.unpersist()


def markdown(out: dict) -> str:
    """The results as the tables of docs/benchmarks/findings.md."""
    lines = [
        "| corpus | K | mode | passes | completion | rank | left-to-right | rank "
        "| completion s | left-to-right s |",
        "|---|---:|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    rows = out.get("rows", [])
    for corpus in dict.fromkeys(r["corpus"] for r in rows):
        mine = [r for r in rows if r["corpus"] == corpus]
        rank = {}
        for ev in ("completion", "left_to_right"):
            order = sorted(mine, key=lambda r: -r[ev]["heldout_loglik"])
            rank[ev] = {r["mode"]: i + 1 for i, r in enumerate(order)}
        for r in mine:
            c, lr = r["completion"], r["left_to_right"]
            lines.append(
                f"| {corpus} | {r['k']} | {r['mode']} | {r['passes']} "
                f"| {c['heldout_loglik']:.4f} | {rank['completion'][r['mode']]} "
                f"| {lr['heldout_loglik']:.4f} | {rank['left_to_right'][r['mode']]} "
                f"| {c['seconds']:.1f} | {lr['seconds']:.1f} |"
            )
    sweep = out.get("particle_sweep")
    if sweep:
        lines += [
            "",
            f"Particles ({sweep['corpus']}, K={sweep['k']}, {sweep['mode']}):",
            "",
            "| particles | seed | left-to-right | s |",
            "|---:|---:|---:|---:|",
        ]
        for r in sweep["rows"]:
            lines.append(
                f"| {r['particles']} | {r['seed']} | {r['heldout_loglik']:.4f} "
                f"| {r['seconds']:.1f} |"
            )
    return "\n".join(lines)


def _save(path: str, out: dict) -> None:
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(out, f, indent=1)
    os.replace(tmp, path)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--corpora", default="uci_kos:50,lda_newsgroups:100")
    p.add_argument("--heldout", default="uci_kos:430,lda_newsgroups:300")
    p.add_argument("--passes", default="", help="MODE=N items overriding PASSES")
    p.add_argument("--modes", default="", help="the modes to fit (default: every mode)")
    p.add_argument("--particles", type=int, default=10)
    p.add_argument("--particle-sweep", action="store_true")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--data-dir", default=DEFAULT_DATA)
    p.add_argument("--master", default=None)
    p.add_argument("--driver-memory", default="6g")
    p.add_argument("--out", default="evaluators.json")
    p.add_argument("--table", metavar="JSON", help="print a results file's tables; run nothing")
    args = p.parse_args(argv)
    if args.table:
        with open(args.table) as f:
            print(markdown(json.load(f)))
        return 0
    args.passes = dict(parse_items(args.passes, int))
    args.modes = [m.strip() for m in args.modes.split(",") if m.strip()] or list(MODES)
    held = dict(parse_items(args.heldout, int))
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    spark = build_session(args.master, args.driver_memory)
    out = {
        "command": " ".join(["python", "benchmarks/evaluators.py", *(argv or sys.argv[1:])]),
        "started": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
        "machine": machine_info(spark),
        "particles": args.particles,
        "seed": args.seed,
        "modes": args.modes,
    }
    for name, k in parse_items(args.corpora, int):
        run_corpus(spark, name, int(k), args, int(held.get(name, 1000)), out)
    out["finished"] = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
    _save(args.out, out)
    print(markdown(out))
    spark.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
