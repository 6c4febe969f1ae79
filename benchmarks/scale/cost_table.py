"""Print the cost model's table (docs/architecture.md, "Cost model: where each placement
wins"): per-round seconds of both placements and the bytes the driver and each executor
hold, for E = 8, 64, 1000 executors (one task each) and V×K = 1e8, 1e9, 1e10 at K=1000,
a minibatch of ``--round-tokens`` tokens drawn from a Zipf law over V terms.

    PYTHONPATH=$PWD python benchmarks/scale/cost_table.py [--round-tokens 2e7] [--k 1000]
"""

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from sparklda.cost import MEASURED, Workload, distinct_terms, holds, round_cost, round_parts
from sparklda.limits import format_bytes


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--round-tokens", type=float, default=2e7)
    ap.add_argument("--k", type=int, default=1000)
    ap.add_argument("--itemsize", type=int, default=4)
    ap.add_argument("--executors", default="8,64,1000")
    ap.add_argument("--vk", default="1e8,1e9,1e10")
    ap.add_argument("--broadcast", default="torrent", choices=("torrent", "fetch"))
    ap.add_argument("--parts", action="store_true", help="also print each part's seconds")
    args = ap.parse_args()
    print(
        "| V×K | E | U_r | U_t | driver s | executors s | wins | driver placement: driver |"
        " executor | executors placement: driver | executor |"
    )
    print("|---|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|")
    rows = []
    for vk in (float(x) for x in args.vk.split(",")):
        v = int(vk / args.k)
        u_r = distinct_terms(args.round_tokens, v)
        for e in (int(x) for x in args.executors.split(",")):
            u_t = distinct_terms(args.round_tokens / e, v)
            w = Workload(v, args.k, e, args.round_tokens, u_r, u_t, args.itemsize)
            d = round_cost("driver", w, MEASURED, args.broadcast)
            x = round_cost("executors", w, MEASURED, args.broadcast)
            hd, hx = holds("driver", w), holds("executors", w)
            print(
                f"| {vk:.0e} | {e} | {u_r:,.0f} | {u_t:,.0f} | {d:.2f} | {x:.2f} |"
                f" {'driver' if d <= x else 'executors'} | {format_bytes(hd['driver'])} |"
                f" {format_bytes(hd['executor'])} | {format_bytes(hx['driver'])} |"
                f" {format_bytes(hx['executor'])} |"
            )
            rows.append((vk, e, w))
    if args.parts:
        for vk, e, w in rows:
            for placement in ("driver", "executors"):
                parts = round_parts(placement, w, MEASURED, args.broadcast)
                text = ", ".join(f"{k} {s:.2f}" for k, s in parts.items())
                print(f"V×K={vk:.0e} E={e} {placement}: {text}")


if __name__ == "__main__":
    main()
