"""Benchmark outputs: JSON + CSV of every measurement, a plot, docs/benchmarks.md.

:func:`evaluate_targets` judges the targets of ``benchmarks/targets.toml``
(:func:`load_targets`) from one run's results (ratios within that run);
:func:`render_markdown` writes the page with the table, the plot, the
command, the machine and the date, and a closing note that quotes every
figure. ``NOTES`` holds the explanation printed beside a target that is
missed (why, and what it would take); a run's notes file adds to it. The
hand-written measurements behind the design and the defaults (``FINDINGS``,
beside the page: ``docs/benchmarks/findings.md``) close the page, so that
regenerating it keeps them.
"""

from __future__ import annotations

import csv
import datetime as _dt
import json
import os
import platform
import subprocess
import tomllib

import numpy as np

from . import figures

#: The targets of a run, as data (see the file's header for each field).
DEFAULT_TARGETS = os.path.join(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "targets.toml"
)

# --------------------------------------------------------------------------
# machine


def _java_version() -> str | None:
    try:
        out = subprocess.run(["java", "-version"], capture_output=True, text=True, timeout=30)
        line = (out.stderr or out.stdout).splitlines()[0]
        return line.strip()
    except Exception:
        return None


def _cpu_model() -> str | None:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or None


def _memory_bytes() -> int | None:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return None


def machine_info(spark=None) -> dict:
    import numba
    import numpy

    info = {
        "cores": os.cpu_count(),
        "memory_bytes": _memory_bytes(),
        "cpu": _cpu_model(),
        "os": platform.platform(),
        "python": platform.python_version(),
        "numpy": numpy.__version__,
        "numba": numba.__version__,
        "java": _java_version(),
    }
    if spark is not None:
        sc = spark.sparkContext
        info.update(
            {
                "spark": spark.version,
                "master": sc.master,
                "default_parallelism": sc.defaultParallelism,
                "driver_memory": _driver_memory(sc),
            }
        )
    try:
        with open("/proc/loadavg") as f:
            info["load_average_at_start"] = f.read().split()[:3]
    except OSError:
        pass
    return info


def _driver_memory(sc) -> str:
    """The driver's memory as the JVM has it: ``spark.driver.memory`` is read when the JVM
    starts, so a value set after ``spark-submit`` started it (with its own
    ``--driver-memory`` or without one) is in the conf but not in the heap: the JVM's
    maximum heap is given beside it when the two differ, either way."""
    conf = sc.getConf().get("spark.driver.memory", "1g")
    try:
        heap = int(sc._jvm.java.lang.Runtime.getRuntime().maxMemory())
        # Spark's own reading of the property (unit-less: MiB)
        wanted = int(sc._jvm.org.apache.spark.network.util.JavaUtils.byteStringAsMb(conf)) << 20
    except Exception:  # no gateway, or a value Spark does not read: the conf is all there is
        return conf
    if 0.8 * wanted <= heap <= 1.1 * wanted:  # the JVM keeps a little of -Xmx from it
        return conf
    return f"{conf} set, but the JVM's heap is {heap / 2**30:.1f} GiB"


# --------------------------------------------------------------------------
# targets


def _points(results, corpus, system):
    return [p for p in results["points"] if p["corpus"] == corpus and p["system"] == system]


def _at_passes(points, passes):
    """The point at exactly ``passes`` (within 1e-6), else None."""
    for p in points:
        if abs(p["passes"] - passes) < 1e-6:
            return p
    return None


def _first_reaching(points, loglik):
    hits = [
        p for p in sorted(points, key=lambda p: p["elapsed_s"]) if p["heldout_loglik"] >= loglik
    ]
    return hits[0] if hits else None


def _reference(results, corpus, variant="mllib-online-default", passes=5.0):
    """MLlib's point at ``passes`` passes, else its point with the most passes."""
    pts = _points(results, corpus, variant)
    if not pts:
        return None
    ref = _at_passes(pts, passes)
    return ref or max(pts, key=lambda p: p["passes"])


def _status(ok):
    return "n/a" if ok is None else ("PASS" if ok else "MISS")


def variant_systems(results: dict) -> list[str]:
    """sparklda runs with parameter overrides (``scvb0[...]``), in order of appearance."""
    out = []
    for p in results.get("points", []):
        if p["system"].startswith("scvb0[") and p["system"] not in out:
            out.append(p["system"])
    return out


def _against_mllib(results, corpora, main, passes):
    """(corpus, MLlib variant, its ``passes``-pass reference point, ``main``'s points)
    for every corpus where both were measured."""
    for c in corpora:
        for variant in ("mllib-online-default", "mllib-online-tuned"):
            ref = _reference(results, c, variant, passes)
            sc = _points(results, c, main)
            if ref is not None and sc:
                yield c, variant, ref, sc


# --------------------------------------------------------------------------
# targets

COMPARISONS = {">=": lambda a, b: a >= b, "<=": lambda a, b: a <= b}

#: measure -> the extra fields its targets need (beyond id, measure,
#: comparison, threshold, description).
MEASURES = {
    "mllib_speedup": ("reference_passes",),
    "mllib_gain": ("reference_passes",),
    "quality_in_seconds": ("within_seconds", "corpus_contains"),
    "kernel_throughput": ("k", "dtype"),
    "round_time_spread": (),
    "kernel_share": (),
    "cached_bytes_per_pair": (),
    "connect_round_ratio": (),
    "tasks_merge_growth": (),
    "tasks_round_growth": (),
    "tasks_driver_bytes": (),
    "pass_speedup": (),
    "build_over_pass": (),
    "startup_ratio": ("cache",),
}


def _is_number(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def load_targets(path: str | None = None) -> dict:
    """The targets file (default ``benchmarks/targets.toml``), checked:
    ``{"system": judged system, "targets": [target table, ...]}``."""
    path = path or DEFAULT_TARGETS
    try:
        with open(path, "rb") as f:
            data = tomllib.load(f)
    except FileNotFoundError:
        raise ValueError(f"targets file {path!r} does not exist") from None
    except tomllib.TOMLDecodeError as e:
        raise ValueError(f"targets file {path}: {e}") from None
    system = data.get("defaults", {}).get("system", "scvb0")
    targets = data.get("target")
    if not isinstance(targets, list) or not targets:
        raise ValueError(f"targets file {path}: no [[target]] tables")
    seen = set()
    for i, t in enumerate(targets):
        where = f"targets file {path}: target {t.get('id', f'#{i + 1}')}"
        if not isinstance(t.get("id"), int) or isinstance(t.get("id"), bool):
            raise ValueError(f"{where}: 'id' must be an integer")
        if t["id"] in seen:
            raise ValueError(f"{where}: id {t['id']} appears twice")
        seen.add(t["id"])
        if t.get("measure") not in MEASURES:
            raise ValueError(
                f"{where}: 'measure' must be one of {sorted(MEASURES)}; got {t.get('measure')!r}"
            )
        if t.get("comparison") not in COMPARISONS:
            raise ValueError(
                f"{where}: 'comparison' must be '>=' or '<='; got {t.get('comparison')!r}"
            )
        if not _is_number(t.get("threshold")):
            raise ValueError(f"{where}: 'threshold' must be a number; got {t.get('threshold')!r}")
        if not isinstance(t.get("description"), str):
            raise ValueError(f"{where}: 'description' (the target as printed) is missing")
        missing = [k for k in MEASURES[t["measure"]] if k not in t]
        if missing:
            raise ValueError(f"{where}: measure {t['measure']!r} needs {', '.join(missing)}")
    return {"system": system, "targets": targets}


def _row(t, corpus, vs, measured, value, compared, **extra):
    """One evaluated target: PASS when ``compared`` <comparison> threshold; MISS
    when ``compared`` is None (nothing reached the mark)."""
    ok = compared is not None and COMPARISONS[t["comparison"]](compared, t["threshold"])
    return {
        "id": t["id"],
        "measure": t["measure"],
        "corpus": corpus,
        "vs": vs,
        "target": t["description"].format(**{**t, **extra}),
        "measured": measured,
        "status": _status(ok),
        "value": value,
        "threshold": t["threshold"],
        "comparison": t["comparison"],
        **extra,
    }


def _mllib_speedup(t, results, corpora, main):
    for c, variant, ref, sc in _against_mllib(results, corpora, main, t["reference_passes"]):
        if t.get("variant", variant) != variant or t.get("corpus_contains", c) not in c:
            continue
        hit = _first_reaching(sc, ref["heldout_loglik"])
        budget = ref["elapsed_s"] / t["threshold"]
        speedup = ref["elapsed_s"] / hit["elapsed_s"] if hit else None
        measured = (
            f"MLlib ({variant}) {ref['passes']:g} passes: {ref['heldout_loglik']:.4f} "
            f"in {ref['elapsed_s']:.1f} s; {main} reaches it at "
            + (
                f"{hit['elapsed_s']:.2f} s ({speedup:.1f}× sooner, {hit['passes']:.2f} passes)"
                if hit
                else f"— (never, in {max(p['passes'] for p in sc):g} passes)"
            )
        )
        yield _row(
            t, c, variant, measured, hit["elapsed_s"] if hit else None, speedup, budget=budget
        )


def _mllib_gain(t, results, corpora, main):
    for c, variant, ref, sc in _against_mllib(results, corpora, main, t["reference_passes"]):
        mine = _at_passes(sc, ref["passes"])
        if mine is None:
            continue
        gain = mine["heldout_loglik"] - ref["heldout_loglik"]
        yield _row(
            t,
            c,
            variant,
            f"{main} {mine['heldout_loglik']:.4f} vs {variant} "
            f"{ref['heldout_loglik']:.4f}: {gain:+.3f}",
            gain,
            gain,
            passes=ref["passes"],
        )


def _quality_in_seconds(t, results, corpora, main):
    for c in corpora:
        if t["corpus_contains"] not in c:
            continue
        sc = _points(results, c, main)
        if not sc:
            continue
        t_lim = t["within_seconds"]
        within = [p for p in sc if p["elapsed_s"] <= t_lim]
        best = max(within, key=lambda p: p["heldout_loglik"]) if within else None
        measured = (
            (
                f"{best['heldout_loglik']:.4f} at {best['elapsed_s']:.2f} s "
                f"({best['passes']:.2f} passes)"
            )
            if best
            else f"no evaluation before {t_lim:g} s (first at "
            f"{min(p['elapsed_s'] for p in sc):.2f} s)"
        )
        value = best["heldout_loglik"] if best else None
        yield _row(t, c, "", measured, value, value)


def _kernel_throughput(t, results, corpora, main):
    rows = [r for r in results.get("kernel") or [] if r["k"] == t["k"] and r["dtype"] == t["dtype"]]
    if rows:
        r = rows[0]
        yield _row(
            t,
            "KOS block",
            "",
            f"{r['kernel_updates_per_s']:.3g} (ceiling {r['ceiling_updates_per_s']:.3g}, "
            f"{r['kernel_over_ceiling']:.0%} of it)",
            r["kernel_updates_per_s"],
            r["kernel_updates_per_s"],
        )


def _round_time_spread(t, results, corpora, main):
    scal = results.get("scaling") or []
    if len(scal) >= 2:
        times = [s["median_round_s"] for s in scal]
        spread = max(times) / min(times) - 1
        yield _row(
            t,
            scal[0]["corpus"],
            "",
            ", ".join(f"×{s['replicas']}: {s['median_round_s']:.3f} s" for s in scal)
            + f" (spread {spread:.1%})",
            spread,
            spread,
        )


def _kernel_share(t, results, corpora, main):
    share_corpus = results.get("overhead_corpus")
    if not share_corpus:
        return
    summ = (results["systems"].get(share_corpus, {}).get(main, {}) or {}).get("round_summary")
    if not summ or summ.get("kernel_share") is None:
        return
    measured = (
        f"{summ['kernel_share']:.0%} (median round {summ['round_s']:.3f} s: kernel "
        f"{summ['kernel_s']:.3f}, broadcast {summ['broadcast_s']:.3f}, tasks/scheduling "
        f"{summ['tasks_s']:.3f}, aggregation {summ['aggregation_s']:.3f}, update "
        f"{summ['update_s']:.3f})"
    )
    floor = results.get("floor")
    if floor and floor.get("corpus") == share_corpus:
        best = summ["kernel_s"] / (summ["kernel_s"] + floor["round_s"])
        measured += (
            f"; the same round without the kernel takes {floor['round_s']:.3f} s, "
            f"so at most {best:.0%} with this kernel time"
        )
    yield _row(t, share_corpus, "", measured, summ["kernel_share"], summ["kernel_share"])


def _cached_bytes_per_pair(t, results, corpora, main):
    for c in corpora:
        out = results["systems"].get(c, {}).get(main) or {}
        cc = out.get("cached_corpus") or {}
        if not cc:
            continue
        pairs = max(1, cc.get("training_pairs", 1))
        spark_bytes = (cc.get("spark") or {}).get("mem_bytes")
        per_pair = cc.get("cached_bytes_per_pair")
        mem = out.get("memory") or {}
        bb = out.get("broadcast_bytes") or {}
        measured = (
            f"{per_pair:.2f} B/pair (the blocks' arrays; Spark's block manager holds "
            + (f"{spark_bytes / pairs:.2f} B/pair as stored" if spark_bytes else "—")
            + f"); broadcast per round {_mb(bb.get('first_pass_median'))} in the first "
            f"pass, {_mb(bb.get('later_median'))} after; driver peak RSS Python "
            f"{_mb(mem.get('driver_python_peak_rss_bytes'))}, JVM "
            f"{_mb(mem.get('driver_jvm_peak_rss_bytes'))}"
        )
        yield _row(t, c, "", measured, per_pair, per_pair)


def _connect_round_ratio(t, results, corpora, main):
    con = results.get("connect")
    if not con:
        return
    by = {r["path"]: r for r in con["paths"]}
    if "classic" not in by or "connect" not in by:
        return
    ratio = by["connect"]["median_round_s"] / by["classic"]["median_round_s"]
    measured = (
        "median round "
        + ", ".join(f"{p} {r['median_round_s']:.3f} s" for p, r in by.items())
        + f": Connect / classic = {ratio:.2f}"
    )
    yield _row(t, con["corpus"], "", measured, ratio, ratio)


def _tasks_executors(results):
    """The executors-combine rows of the tasks stage, fewest tasks first (None if < 2)."""
    tasks = results.get("tasks")
    if not tasks:
        return None
    rows = sorted(
        (r for r in tasks["rows"] if r["combine"] == "executors"),
        key=lambda r: r["parts_per_slice"],
    )
    return (tasks, rows) if len(rows) >= 2 else None


def _tasks_corpus(tasks) -> str:
    c = tasks["corpus"]
    return f"generated {c['n_docs']:,} docs, V={c['vocab_size']:,}"


def _tasks_growth(key, what):
    def evaluate(t, results, corpora, main):
        found = _tasks_executors(results)
        if not found:
            return
        tasks, rows = found
        lo, hi = rows[0], rows[-1]
        if not lo.get(key) or hi.get(key) is None:
            return
        ratio = hi[key] / lo[key]
        measured = (
            f"median {what} with the executors' combine: "
            + ", ".join(f"{r['parts_per_slice']} tasks {r[key]:.4g} s" for r in rows)
            + f" ({hi['parts_per_slice']} / {lo['parts_per_slice']} = {ratio:.2f}×)"
        )
        yield _row(t, _tasks_corpus(tasks), "", measured, ratio, ratio)

    return evaluate


def _tasks_driver_bytes(t, results, corpora, main):
    found = _tasks_executors(results)
    if not found:
        return
    tasks, rows = found
    ratios = [
        (r, r["median_driver_bytes"] / r["median_merged_bytes"])
        for r in rows
        if r.get("median_merged_bytes")
    ]
    if not ratios:
        return
    worst = max(x[1] for x in ratios)
    measured = "driver-inbound / merged with the executors' combine: " + ", ".join(
        f"{r['parts_per_slice']} tasks {_mb(r['median_driver_bytes'])} / "
        f"{_mb(r['median_merged_bytes'])} = {x:.2f}"
        for r, x in ratios
    )
    drivers = [
        r for r in tasks["rows"] if r["combine"] == "driver" and r.get("median_merged_bytes")
    ]
    if drivers:
        measured += "; with the driver merge: " + ", ".join(
            f"{r['parts_per_slice']} tasks "
            f"{r['median_driver_bytes'] / r['median_merged_bytes']:.2f}"
            for r in drivers
        )
    yield _row(t, _tasks_corpus(tasks), "", measured, worst, worst)


def _throughput_corpus(th) -> str:
    c = th["corpus"]
    return f"generated {c['n_docs']:,} docs, V={c['vocab_size']:,}"


def _pass_speedup(t, results, corpora, main):
    th = results.get("throughput")
    if not th or th.get("speedup") is None:
        return
    m = th["mllib"]
    measured = (
        f"SCVB0 pass {th['sparklda']['pass_s']:.1f} s; MLlib pass {m['pass_s']:.1f} s "
        f"(timed on {m['passes_timed']:g} of a pass: {m['iteration_s']:.1f} s per "
        f"iteration × {m['iterations_per_pass']:g}): {th['speedup']:.1f}× faster"
    )
    yield _row(t, _throughput_corpus(th), "", measured, th["speedup"], th["speedup"])


def _build_over_pass(t, results, corpora, main):
    th = results.get("throughput")
    if not th or th.get("build_over_pass") is None:
        return
    sp = th["sparklda"]
    measured = (
        f"corpus building {sp['build_s']:.1f} s, one pass {sp['pass_s']:.1f} s "
        f"(ratio {th['build_over_pass']:.2f})"
    )
    ratio = th["build_over_pass"]
    yield _row(t, _throughput_corpus(th), "", measured, ratio, ratio)


def _startup_ratio(t, results, corpora, main):
    for r in results.get("startup") or []:
        if r["cache"] != t["cache"] or not r.get("steady_round_s"):
            continue
        ratio = r["first_round_s"] / r["steady_round_s"]
        measured = (
            f"first round {r['first_round_s']:.2f} s, steady rounds (median) "
            f"{r['steady_round_s']:.2f} s: {ratio:.2f}×"
        )
        yield _row(t, f"KOS sample, K={r['k']}", "", measured, ratio, ratio)


_EVALUATORS = {
    "mllib_speedup": _mllib_speedup,
    "mllib_gain": _mllib_gain,
    "quality_in_seconds": _quality_in_seconds,
    "kernel_throughput": _kernel_throughput,
    "round_time_spread": _round_time_spread,
    "kernel_share": _kernel_share,
    "cached_bytes_per_pair": _cached_bytes_per_pair,
    "connect_round_ratio": _connect_round_ratio,
    "tasks_merge_growth": _tasks_growth("median_merge_s", "driver merge"),
    "tasks_round_growth": _tasks_growth("median_round_s", "round"),
    "tasks_driver_bytes": _tasks_driver_bytes,
    "pass_speedup": _pass_speedup,
    "build_over_pass": _build_over_pass,
    "startup_ratio": _startup_ratio,
}


def evaluate_targets(
    results: dict, main: str | None = None, spec: dict | None = None
) -> list[dict]:
    """One row per (target, corpus): target, measured figure, PASS/MISS.

    ``spec`` is a :func:`load_targets` result (default: ``benchmarks/targets.toml``);
    ``main`` the sparklda system judged (default: the file's ``system``, the
    defaults). Targets comparing against MLlib or timing quality can be
    evaluated for a variant the same way (informational, see the page).
    """
    spec = spec or load_targets()
    main = main or spec["system"]
    corpora = list(results.get("corpora", {}))
    rows = []
    for t in sorted(spec["targets"], key=lambda t: t["id"]):
        rows.extend(_EVALUATORS[t["measure"]](t, results, corpora, main))
    return rows


#: Measures that compare the judged system's quality and time (shown for the
#: variants too).
VARIANT_MEASURES = ("mllib_speedup", "mllib_gain", "quality_in_seconds")


def _num(x, fmt="{:.3f}"):
    return "—" if x is None else fmt.format(x)


def _mb(n):
    if n is None:
        return "—"
    return f"{n / 2**20:.1f} MiB"


# --------------------------------------------------------------------------
# files


POINT_FIELDS = [
    "corpus",
    "system",
    "k",
    "passes",
    "round",
    "elapsed_s",
    "heldout_loglik",
    "perplexity",
    "eval_s",
]
ROUND_FIELDS = [
    "corpus",
    "system",
    "round",
    "passes",
    "elapsed_s",
    "round_s",
    "broadcast_s",
    "job_s",
    "merge_s",
    "mode_merge_s",
    "update_s",
    "destroy_s",
    "task_kernel_max_s",
    "task_kernel_sum_s",
    "tokens",
    "tokens_per_s",
    "rho",
    "docs",
    "broadcast_bytes",
    "heldout_loglik",
]


def _write_csv(path, rows, fields):
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=fields, extrasaction="ignore")
        w.writeheader()
        for r in rows:
            w.writerow(r)


def write_files(results: dict, out_dir: str) -> dict:
    """results.json, points.csv, rounds.csv, sweep.csv, kernel.csv, curves.png, and the
    figures of :mod:`lda_bench.figures` (round_breakdown.png, round_tasks.png) when the
    results hold their data."""
    os.makedirs(out_dir, exist_ok=True)
    paths = {}
    p = os.path.join(out_dir, "results.json")
    with open(p + ".tmp", "w") as f:
        json.dump(results, f, indent=1, default=_json_default)
    os.replace(p + ".tmp", p)
    paths["json"] = p
    paths["points"] = os.path.join(out_dir, "points.csv")
    _write_csv(paths["points"], results["points"], POINT_FIELDS)
    rounds = []
    for c, by_sys in results["systems"].items():
        for s, out in by_sys.items():
            for r in out.get("rounds", []) or []:
                rounds.append({"corpus": c, "system": s, **r})
    paths["rounds"] = os.path.join(out_dir, "rounds.csv")
    _write_csv(paths["rounds"], rounds, ROUND_FIELDS)
    for name, rows in (
        ("sweep", results.get("sweep")),
        ("scaling", results.get("scaling")),
        ("kernel", results.get("kernel")),
        ("tasks", (results.get("tasks") or {}).get("rows")),
        ("connect", (results.get("connect") or {}).get("paths")),
        ("startup", results.get("startup")),
        ("priors", (results.get("priors") or {}).get("rows")),
        ("map", (results.get("map") or {}).get("rows")),
    ):
        if rows:
            paths[name] = os.path.join(out_dir, f"{name}.csv")
            _write_csv(paths[name], rows, list(rows[0].keys()))
    paths["plot"] = os.path.join(out_dir, "curves.png")
    plot_curves(results, paths["plot"])
    for name, file, draw in (
        ("breakdown_plot", figures.BREAKDOWN_PNG, figures.plot_round_breakdown),
        ("tasks_plot", figures.TASKS_PNG, figures.plot_round_tasks),
    ):
        if draw(results, os.path.join(out_dir, file)):
            paths[name] = os.path.join(out_dir, file)
    return paths


def _json_default(o):
    if isinstance(o, (np.integer,)):
        return int(o)
    if isinstance(o, (np.floating,)):
        return float(o)
    if isinstance(o, np.ndarray):
        return o.tolist()
    return str(o)


def plot_curves(results: dict, path: str):
    """Held-out log-likelihood against wall time, one panel per corpus, one
    curve per system (log time axis: the systems differ by orders of magnitude)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    corpora = list(results["corpora"])
    n = max(1, len(corpora))
    fig, axes = plt.subplots(1, n, figsize=(6.5 * n, 4.6), squeeze=False)
    for ax, c in zip(axes[0], corpora, strict=False):
        systems = []
        for p in results["points"]:
            if p["corpus"] == c and p["system"] not in systems:
                systems.append(p["system"])
        for s in systems:
            pts = sorted(_points(results, c, s), key=lambda p: p["elapsed_s"])
            style = "-o" if not s.startswith("mllib") else "--s"
            ax.plot(
                [p["elapsed_s"] for p in pts],
                [p["heldout_loglik"] for p in pts],
                style,
                label=s,
                markersize=3.5,
                linewidth=1.4,
            )
        k = results["corpora"][c].get("k")
        ax.set_xscale("log")
        ax.set_xlabel("wall time from the start of fit (s, log scale)")
        ax.set_ylabel("held-out log-likelihood per token")
        ax.set_title(f"{c}, K={k}")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


# --------------------------------------------------------------------------
# markdown


#: The hand-written measurements (dated scratch runs behind the design, the defaults and
#: the README's guidance), relative to the page's directory; included verbatim at the end.
FINDINGS = os.path.join("benchmarks", "findings.md")


def _findings_section(page_dir: str) -> list[str]:
    path = os.path.join(page_dir, FINDINGS)
    if not os.path.isfile(path):
        return []
    with open(path, encoding="utf-8") as f:
        return ["", *f.read().rstrip("\n").splitlines()]


#: Printed beside a target that is missed (keyed by target id); a target met
#: needs no note. Written from this run's figures and the analysis in
#: docs/benchmarks.md; the numbers quoted in the note come from the results.
NOTES: dict = {}


def _fmt_bytes(n):
    return "—" if n is None else f"{n / 2**30:.1f} GiB"


def render_markdown(
    results: dict, targets: list, paths: dict, page_dir: str, spec: dict | None = None
) -> str:
    """The page: ``targets`` are :func:`evaluate_targets` rows, ``spec`` the targets
    file they came from (for the variants' rows)."""
    meta = results["meta"]
    mach = meta["machine"]

    def rel(p):
        return os.path.relpath(p, page_dir)

    lines = [
        "# Benchmarks: sparklda against Spark MLlib's LDA",
        "",
        "Generated by `benchmarks/run.py` from one run; every figure below comes from "
        f"[`{rel(paths['json'])}`]({rel(paths['json'])}) of that run. Times are wall-clock "
        "seconds from the start of each system's `fit` (sparklda: "
        + (
            "corpus building and the held-out split included"
            if meta.get("heldout_split_in_fit")
            else "corpus block building included"
        )
        + "; held-out evaluation excluded). Quality is held-out document completion "
        f"(`sparklda.evaluation.completion_loglik`, α = {meta['alpha']} for folding in, the same "
        "held-out documents and halves for every system); higher is better.",
        "",
        f"- **Date:** {meta['date']}",
        f"- **Command:** `{meta['command']}`",
        f"- **Machine:** {mach.get('cores')} cores ({mach.get('cpu')}), "
        f"{_fmt_bytes(mach.get('memory_bytes'))} memory; load average at start "
        f"{' '.join(mach.get('load_average_at_start', []) or ['?'])} (a shared machine: "
        "compare figures as ratios within this run)",
        f"- **Software:** Spark {mach.get('spark')} (master `{mach.get('master')}`, driver memory "
        f"{mach.get('driver_memory')}), {mach.get('java')}, Python {mach.get('python')}, "
        f"numpy {mach.get('numpy')}, numba {mach.get('numba')}",
        f"- **Run time:** {meta.get('run_seconds', 0) / 60:.1f} min",
        "",
        "## Targets",
        "",
        "| # | corpus | target | measured | result |",
        "|---|---|---|---|---|",
    ]
    for t in targets:
        vs = f" (vs {t['vs']})" if t.get("vs") else ""
        lines.append(
            f"| {t['id']} | {t['corpus']}{vs} | {t['target']} | {t['measured']} | "
            f"**{t['status']}** |"
        )
    lines += ["", f"![held-out log-likelihood against time]({rel(paths['plot'])})", ""]
    lines += [
        "## Corpora",
        "",
        "| corpus | K | training docs | held-out docs | tokens | (doc, term) pairs | vocabulary |",
        "|---|---|---|---|---|---|---|",
    ]
    for c, info in results["corpora"].items():
        lines.append(
            f"| {c} | {info['k']} | {info['training_documents']:,} | "
            f"{info['heldout_documents']:,} | {info['training_tokens']:,.0f} | "
            f"{info['training_pairs']:,} | {info['vocab_size']:,} |"
        )
    lines += ["", "## Quality against time", ""]
    lines += _stage_run(results, "quality")
    lines += _warm_up_lines(results["corpora"])
    for c in results["corpora"]:
        lines += [
            f"### {c}",
            "",
            "| system | passes | seconds | held-out log-lik. | perplexity |",
            "|---|---|---|---|---|",
        ]
        by_sys = results["systems"].get(c, {})
        for s, out in by_sys.items():
            if out.get("error"):
                lines.append(f"| {s} | failed: {out['error']} | | | |")
                continue
            for p in _table_points(out["points"]):
                lines.append(
                    f"| {s} | {p['passes']:.2f} | {p['elapsed_s']:.1f} | "
                    f"{p['heldout_loglik']:.4f} | {p['perplexity']:.0f} |"
                )
        lines.append("")
        coh = [(s, out["coherence"]) for s, out in by_sys.items() if out.get("coherence")]
        if coh:
            lines.append(
                "- coherence of the final topics (top 10 terms, mean over topics, over the "
                "corpus's documents): "
                + "; ".join(
                    f"`{s}` u_mass {v['u_mass']:.3f}, c_npmi {v['c_npmi']:.4f}" for s, v in coh
                )
            )
        settings = [(s, out.get("settings")) for s, out in by_sys.items() if out.get("settings")]
        for s, st in settings:
            lines.append(f"- `{s}` settings: " + ", ".join(f"{k}={v}" for k, v in st.items()))
        params = by_sys.get("scvb0", {}).get("params")
        if params:
            keys = [
                "minibatch_size",
                "parts_per_slice",
                "burnin",
                "s_phi",
                "tau_phi",
                "kappa_phi",
                "schedule_minibatch",
                "alpha",
                "eta",
                "dtype",
                "eval_every",
            ]
            lines.append("- `scvb0` settings: " + ", ".join(f"{k}={params[k]}" for k in keys))
        lines.append("")
    lines += _round_section(results)
    if paths.get("breakdown_plot"):
        lines += [f"![where a round's time goes]({rel(paths['breakdown_plot'])})", ""]
    lines += _sweep_section(results)
    lines += _floor_section(results)
    lines += _scaling_section(results)
    lines += _kernel_section(results)
    lines += _memory_section(results)
    lines += _tasks_section(results)
    if paths.get("tasks_plot"):
        lines += [f"![round time against tasks per round]({rel(paths['tasks_plot'])})", ""]
    lines += _throughput_section(results)
    lines += _startup_section(results)
    lines += _connect_section(results)
    lines += _priors_section(results)
    lines += _variant_section(results, spec)
    lines += _closing_note(results, targets)
    lines += _findings_section(page_dir)
    return "\n".join(lines) + "\n"


def _variant_section(results, spec=None):
    variants = variant_systems(results)
    if not variants:
        return []
    spec = spec or load_targets()
    ids = sorted(t["id"] for t in spec["targets"] if t["measure"] in VARIANT_MEASURES)
    if not ids:
        return []
    label = (
        f"{ids[0]}-{ids[-1]}"
        if ids == list(range(ids[0], ids[-1] + 1)) and len(ids) > 1
        else ", ".join(map(str, ids))
    )
    lines = [
        f"## Targets {label} for the variants (not the defaults; what a change of default "
        "would give)",
        "",
        "| # | corpus | system | measured | would be |",
        "|---|---|---|---|---|",
    ]
    for v in variants:
        for t in evaluate_targets(results, main=v, spec=spec):
            if t["measure"] in VARIANT_MEASURES:
                vs = f" (vs {t['vs']})" if t.get("vs") else ""
                lines.append(
                    f"| {t['id']} | {t['corpus']}{vs} | `{v}` | {t['measured']} | {t['status']} |"
                )
    return lines + [""]


def _table_points(points):
    """At most ~12 rows per system: every pass boundary plus the first points."""
    if len(points) <= 12:
        return points
    whole = [p for p in points if abs(p["passes"] - round(p["passes"])) < 1e-6]
    first = [p for p in points[:4] if p not in whole]
    keep = sorted(first + whole, key=lambda p: p["elapsed_s"])
    if len(keep) > 14:
        step = int(np.ceil(len(keep) / 12))
        keep = keep[:4] + keep[4:-1][::step] + keep[-1:]
    return keep


def _round_section(results):
    lines = [
        "## Where a round's time goes (sparklda modes)",
        "",
        "Median over rounds (the first round left out) of each part of a round: "
        "broadcast (driver builds and broadcasts the state), tasks (`runJob` minus the "
        "slowest task's kernel: scheduling, Python worker start-up, reading the cached "
        "block, results back to the driver), kernel (slowest task's kernel time), "
        "aggregation (summing the tasks' sparse rows), update (driver update and "
        "broadcast clean-up).",
        "",
        "| corpus | system | round s | broadcast | tasks | kernel | aggregation | update | "
        "kernel share | tokens/s | broadcast size |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    n = 0
    for c, by_sys in results["systems"].items():
        for s, out in by_sys.items():
            summ = out.get("round_summary")
            if not summ:
                continue
            n += 1
            share = summ.get("kernel_share")
            lines.append(
                f"| {c} | {s} | {summ['round_s']:.3f} | {summ['broadcast_s']:.3f} | "
                f"{summ['tasks_s']:.3f} | {summ['kernel_s']:.3f} | "
                f"{summ['aggregation_s']:.3f} | {summ['update_s']:.3f} | "
                f"{'—' if share is None else f'{share:.0%}'} | "
                f"{summ['tokens_per_s']:,.0f} | {_mb(summ.get('broadcast_bytes'))} |"
            )
    return lines + [""] if n else []


def _sweep_section(results):
    rows = results.get("sweep") or []
    if not rows:
        return []
    lines = [
        "## Minibatch size (the default's evidence)",
        "",
        f"SCVB0 on {rows[0]['corpus']} (K={rows[0]['k']}), {rows[0]['passes']:g} pass(es) "
        "per setting, one task per core per round.",
        "",
        "| minibatch | rounds/pass | round s | kernel share | broadcast | tasks | kernel | "
        "aggregation | update | train s | held-out after |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['minibatch_size']:,} | {r['rounds_per_pass']} | {r['round_s']:.3f} | "
            f"{r['kernel_share']:.0%} | {r['broadcast_s']:.3f} | {r['tasks_s']:.3f} | "
            f"{r['kernel_s']:.3f} | {r['aggregation_s']:.3f} | {r['update_s']:.3f} | "
            f"{r['train_s']:.1f} | {r['heldout_loglik']:.4f} |"
        )
    return lines + [""]


def _floor_section(results):
    f = results.get("floor")
    if not f:
        return []
    if f.get("method") == "public-api":
        how = (
            "Rounds of an SCVB0 round's shape on "
            f"{f['corpus']} (K={f['k']}, minibatch {f['minibatch_size']:,}, "
            f"{f['parts_per_slice']} tasks per round) with the kernel left out: the training "
            "documents cached as blocks in the same slice layout, a broadcast of one row of K "
            "values per distinct term of the round's slice "
            f"({_mb(f.get('broadcast_bytes'))}), the blocks read, zero rows of the real "
            "result size returned and summed by term on the driver, no driver update."
        )
    else:  # measured inside SCVB0 (runs before the benchmark left the package)
        how = (
            f"SCVB0's rounds on {f['corpus']} (K={f['k']}, minibatch "
            f"{f['minibatch_size']:,}, {f['parts_per_slice']} tasks per round) with the "
            "kernel left out: the same broadcast, the same blocks read, zero N̂^Φ rows of the "
            "real size returned and merged, no driver update."
        )
    return [
        "## A round without the kernel (the floor)",
        "",
        how + f" Median over {f['rounds_measured']} rounds (the first pass left out).",
        "",
        "| round s | broadcast | job (tasks) | merge | destroy |",
        "|---|---|---|---|---|",
        f"| {f['round_s']:.3f} | {f['broadcast_s']:.3f} | {f['job_s']:.3f} | "
        f"{f['merge_s']:.3f} | {f['destroy_s']:.3f} |",
        "",
    ]


def _scaling_section(results):
    rows = results.get("scaling") or []
    if not rows:
        return []
    lines = [
        "## Round cost against corpus size",
        "",
        f"{rows[0]['corpus']} replicated (copies under new document ids), minibatch "
        f"{rows[0].get('minibatch_size', 0):,} documents; each replica trains one pass "
        f"{rows[0].get('repeats', 1)} time(s), the replicas interleaved; medians over every "
        "round but the first of each pass.",
        "",
        "| copies | training docs | rounds/pass | rounds measured | median round s | "
        "median job s | median kernel s |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| ×{r['replicas']} | {r.get('training_documents', 0):,} | "
            f"{r.get('rounds_per_pass', '')} | {r.get('rounds_measured', '')} | "
            f"{_num(r.get('median_round_s'))} | "
            f"{_num(r.get('median_job_s'))} | {_num(r.get('median_kernel_s'))} |"
        )
    return lines + [""]


def _kernel_section(results):
    rows = results.get("kernel") or []
    if not rows:
        return []
    r0 = rows[0]
    lines = [
        "## SCVB0 kernel microbenchmark (one core)",
        "",
        f"{r0['docs']:,} KOS documents ({r0['pairs']:,} pairs, {r0['distinct_terms']:,} "
        f"distinct terms), {r0['sweeps']} sweeps (burn-in + final). A topic-update is one "
        "topic of one pair in one sweep. The ceiling streams the same rows with one multiply "
        "and one add per topic, compiled with the same numba options (no fast-math flags "
        "since the determinism fix, so no fused multiply-add; the figures above were "
        "measured before that change); the kernel does about four times that arithmetic "
        "per topic-update.",
        "",
        "| K | dtype | kernel topic-updates/s | ceiling | kernel/ceiling |",
        "|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['k']} | {r['dtype']} | {r['kernel_updates_per_s']:.3g} | "
            f"{r['ceiling_updates_per_s']:.3g} | {r['kernel_over_ceiling']:.0%} |"
        )
    return lines + [""]


def _memory_section(results):
    lines = [
        "## Memory",
        "",
        "| corpus | system | cached corpus (Spark) | B/pair (Spark) | "
        "B/pair (arrays) | broadcast/round | driver peak RSS (Python / JVM) |",
        "|---|---|---|---|---|---|---|",
    ]
    n = 0
    for c, by_sys in results["systems"].items():
        for s, out in by_sys.items():
            mem = out.get("memory") or {}
            cc = out.get("cached_corpus") or {}
            sp = (cc.get("spark") or {}).get("mem_bytes")
            pairs = cc.get("training_pairs")
            bb = out.get("broadcast_bytes") or {}
            n += 1
            lines.append(
                f"| {c} | {s} | {_mb(sp)} | "
                f"{(sp / pairs) if sp and pairs else float('nan'):.2f} | "
                f"{cc.get('cached_bytes_per_pair', float('nan')):.2f} | "
                f"{_mb(bb.get('first_pass_median'))} → {_mb(bb.get('later_median'))} | "
                f"{_mb(mem.get('driver_python_peak_rss_bytes'))} / "
                f"{_mb(mem.get('driver_jvm_peak_rss_bytes'))} |"
            )
    return lines + [""] if n else []


def _warm_up_lines(corpora: dict) -> list[str]:
    """How each corpus's systems were warmed before their timed fits."""
    full = {c: i["warm_up_s"] for c, i in corpora.items() if i.get("warm_up_s")}
    if not full:
        return []
    parts = []
    for c, w in full.items():
        mode = next((k[:-2] for k in w if k not in ("mllib_s", "passes")), None)
        if not mode:
            parts.append(f"{c}: no sparklda warm-up fit")
            continue
        took = w[f"{mode}_s"]
        if isinstance(took, list):  # WARM_UP_FITS fits of the timed fits' passes
            n = len(took)
            seconds = ", ".join(f"{x:.1f}" for x in took)
            parts.append(
                f"{c}: {n} untimed {w.get('passes', '?')}-pass {mode} fit{'s' * (n != 1)} "
                f"of the whole corpus ({seconds} s)"
            )
        else:  # results of before 2026-11-27 18:00: one one-pass fit
            parts.append(f"{c}: an untimed one-pass {mode} fit of the whole corpus ({took:.1f} s)")
    rest = [c for c in corpora if c not in full]
    text = (
        "Every system is timed warm. MLlib's timed fits of more passes follow its fits of "
        "fewer on the same DataFrame; a sparklda mode is timed in one fit, so before the "
        "timed fits on a corpus come " + "; ".join(parts) + ", and a two-iteration MLlib fit "
        "of 500 documents."
    )
    if rest:
        text += (
            f" On {', '.join(rest)} (an earlier run) the warm-up was only a one-pass sparklda "
            "fit and an MLlib fit of 500 documents."
        )
    return [text, ""]


def _stage_run(results, stage) -> list:
    """The command, machine and date of the ``--only`` run a stage's figures come from."""
    entry = (results.get("stage_runs") or {}).get(stage)
    if not entry:
        return []
    lines = []
    for run in entry if isinstance(entry, list) else [entry]:
        m = run.get("machine") or {}
        load = m.get("load_average_at_start")
        lines.append(
            f"Measured {run.get('date')} with `{run.get('command')}` on {m.get('cores')} "
            f"cores ({m.get('cpu')}, {m.get('master')}, driver memory {m.get('driver_memory')}"
            + (f", load average {' / '.join(load)} at the start" if load else "")
            + f"; the stage took {(run.get('run_seconds') or 0) / 60:.1f} min)."
        )
    return lines + [""]


def _tasks_section(results):
    tasks = results.get("tasks")
    if not tasks:
        return []
    c = tasks["corpus"]
    lines = [
        "## Tasks per round (generated corpus)",
        "",
        *_stage_run(results, "tasks"),
        f"A corpus drawn by `sparklda generate` ({c['n_docs']:,} documents of mean length "
        f"{c['mean_length']:g}, V={c['vocab_size']:,} Zipf, {c['k_true']} true topics, "
        f"seed {c['seed']}); SCVB0 K={tasks['k']}, minibatch {tasks['minibatch_size']:,}, "
        f"{tasks['passes']} pass per setting. Medians over the rounds after the first. "
        "Merge is the driver's `merge_s` (with the executors' combine: stacking the "
        "merged shards); shipped, driver-inbound and merged are the round records' "
        "`shipped_bytes`, `driver_bytes` and `merged_bytes` (docs/architecture.md, "
        '"Memory model").',
        "",
        "| tasks | combine | rounds | round s | job s | kernel s | merge s | shipped | "
        "driver-inbound | merged | cached blocks | driver peak RSS (Python / JVM) |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in tasks["rows"]:
        lines.append(
            f"| {r['parts_per_slice']} | {r['combine']} | {r['rounds']} | "
            f"{_num(r.get('median_round_s'))} | {_num(r.get('median_job_s'))} | "
            f"{_num(r.get('median_kernel_s'))} | {_num(r.get('median_merge_s'), '{:.4f}')} | "
            f"{_mb(r.get('median_shipped_bytes'))} | {_mb(r.get('median_driver_bytes'))} | "
            f"{_mb(r.get('median_merged_bytes'))} | {_mb(r.get('cached_bytes'))} | "
            f"{_mb(r.get('driver_python_peak_rss_bytes'))} / "
            f"{_mb(r.get('driver_jvm_peak_rss_bytes'))} |"
        )
    return lines + [""]


def _throughput_section(results):
    th = results.get("throughput")
    if not th:
        return []
    c, sp, m = th["corpus"], th["sparklda"], th["mllib"]
    tokens = sp.get("training_tokens")
    return [
        "## Throughput on a generated corpus",
        "",
        *_stage_run(results, "throughput"),
        f"A corpus drawn by `sparklda generate` ({c['n_docs']:,} documents of mean length "
        f"{c['mean_length']:g}, V={c['vocab_size']:,}, {c['k_true']} true topics"
        + (f"; {tokens:,.0f} training tokens" if tokens else "")
        + f"), K={th['k']}. SCVB0: one pass at the default minibatch, "
        f"{sp['minibatch_size']:,} documents ({sp['rounds']} round"
        f"{'s' if sp['rounds'] != 1 else ''}; `sparklda.params.default_minibatch_size`: "
        f"at most {th.get('max_default_rounds', 100)} rounds a pass), after an untimed small "
        "fit that starts the Python workers; its pass time is the fit's training time minus "
        "its corpus building. MLlib's online LDA runs on the same documents (the Parquet "
        "DataFrame, cached before timing) at "
        + ", ".join(f"{k}={v}" for k, v in m["settings"].items())
        + f". **MLlib is timed on a fraction of a pass and scaled:** after an untimed "
        f"warm-up fit, two fits of maxIter {m['max_iter'][0]} and {m['max_iter'][1]} "
        f"({m['fit_s'][0]:.1f} s and {m['fit_s'][1]:.1f} s); "
        + (
            f"the difference per iteration ({m['iteration_s']:.1f} s, MLlib's set-up per "
            "fit left out)"
            if m.get("method", "marginal") == "marginal"
            else f"the second fit's time per iteration ({m['iteration_s']:.1f} s, set-up "
            "included: the first fit took as long)"
        )
        + f" times the {m['iterations_per_pass']:g} iterations of a pass.",
        "",
        "| system | minibatch (rounds) | one pass s | corpus building s | median round s "
        "| held-out log-lik. after the pass |",
        "|---|---|---|---|---|---|",
        *(
            f"| scvb0{' (default)' if row.get('default', row is sp) else ''} "
            f"| {row['minibatch_size']:,} ({row['rounds']}) | {row['pass_s']:.1f} "
            f"| {row['build_s']:.1f} | {_num(row.get('median_round_s'))} "
            f"| {_loglik(row.get('heldout_loglik'))} |"
            for row in (sp, th.get("reference"))
            if row
        ),
        f"| mllib-online ({m['passes_timed']:g} of a pass timed) | — | {m['pass_s']:.1f} "
        "| — | — | — |",
        "",
        *_throughput_quality_note(th),
    ]


def _loglik(value) -> str:
    return "—" if value is None else f"{value:.4f}"


def _throughput_quality_note(th) -> list[str]:
    sp, ref = th["sparklda"], th.get("reference")
    if not ref or sp.get("heldout_loglik") is None or ref.get("heldout_loglik") is None:
        return []
    gap = sp["heldout_loglik"] - ref["heldout_loglik"]
    return [
        f"Quality per pass: after one pass the default minibatch "
        f"({sp['minibatch_size']:,} documents, {sp['rounds']} rounds) scores "
        f"{sp['heldout_loglik']:.4f} nats per held-out token, the {ref['minibatch_size']:,}-"
        f"document minibatch ({ref['rounds']} rounds) {ref['heldout_loglik']:.4f} "
        f"({gap:+.4f}; {sp.get('heldout_documents', 0):,} held-out documents, document "
        f"completion), at {ref['pass_s'] / sp['pass_s']:.1f}× the time per pass.",
        "",
    ]


def _startup_section(results):
    rows = results.get("startup") or []
    if not rows:
        return []
    lines = [
        "## Startup in a fresh process",
        "",
        *_stage_run(results, "startup"),
        "`benchmarks/scale/startup.py` in a new Python process with its own JVM: SCVB0 on "
        f"the shipped KOS sample (K={rows[0]['k']}, minibatch {rows[0]['minibatch_size']:,}, "
        "the driver merge), with the machine's numba cache (warm) and with an empty one "
        "(cold: `NUMBA_CACHE_DIR` pointed at a new folder), in a session with the jobs' "
        "properties (`spark.task.maxDirectResultSize=64m`: docs/architecture.md, "
        '"Startup"). Steady: the median of the later rounds.',
        "",
        "| numba cache | rounds | first round s | its slowest kernel s | steady round s | "
        "steady kernel s | corpus building s | process s |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['cache']} | {r['rounds']} | {r['first_round_s']:.2f} | "
            f"{r['first_kernel_s']:.2f} | {_num(r.get('steady_round_s'), '{:.2f}')} | "
            f"{_num(r.get('steady_kernel_s'), '{:.2f}')} | {r['build_s']:.1f} | "
            f"{r['process_s']:.0f} |"
        )
    return lines + [""]


def _connect_section(results):
    con = results.get("connect")
    if not con:
        return []
    ref = con["reference"]
    lines = [
        "## Spark Connect against classic",
        "",
        f"SCVB0 on {con['corpus']} (K={con['k']}, minibatch {con['minibatch_size']:,}, "
        f"{con['passes']} pass{'es' if con['passes'] != 1 else ''}), the UCI files read "
        "by `sparklda.corpus.read_uci` in each "
        'session: `execution="classic"` and `execution="dataframe"` in the benchmark\'s '
        "classic session, and a Spark Connect session on a local Connect server this run "
        f"started ({con['server']['master']}). Every fit holds out the same documents. "
        f"Time to reference: from the start of `fit` to the first evaluation at or above "
        f"{ref['system']}'s {ref['passes']:g}-pass held-out log-likelihood "
        f"({ref['heldout_loglik']:.4f}, reached by MLlib in {ref['elapsed_s']:.1f} s; "
        f"{ref['source']}). Round figures are medians over the rounds after the first. "
        "Each path is timed warm: an untimed one-pass fit in the same session comes first "
        "(a fresh Connect server's JVM handles its first pass of rounds about 1.5 times "
        "slower than the next, until the JIT has compiled its plan handling).",
        "",
        *_stage_run(results, "connect"),
        *_own_run(con),
        "| path | rounds | round s | first round s | job s | kernel s | corpus building s | "
        "time to reference s | passes | final held-out | warm-up fit s |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in con["paths"]:
        hit = r.get("time_to_reference_s")
        lines.append(
            f"| {r['path']} | {r['rounds']} | {r['median_round_s']:.3f} | "
            f"{r['first_round_s']:.3f} | {r['median_job_s']:.3f} | {r['median_kernel_s']:.3f} | "
            f"{r['build_s']:.1f} | {'never' if hit is None else f'{hit:.1f}'} | "
            f"{_num(r.get('passes_to_reference'), '{:.2f}')} | "
            f"{_num(r.get('final_heldout_loglik'), '{:.4f}')} | "
            f"{_num(r.get('warmup_s'), '{:.1f}')} |"
        )
    return lines + [""]


def _own_run(stage: dict) -> list[str]:
    """A line naming the run a stage's figures come from, when they were merged into these
    results from a run of that stage alone (its ``run``: date, command, load)."""
    run = stage.get("run")
    if not run:
        return []
    load = run.get("load_average_at_start")
    return [
        f"These figures come from a run of this stage alone on {run['date']} "
        f"(`{run['command']}`"
        + (f"; load average at its start {', '.join(map(str, load))}" if load else "")
        + "), merged into this page's results.",
        "",
    ]


def _priors_section(results):
    pri = results.get("priors")
    if not pri:
        return []
    lines = [
        "## Learned priors",
        "",
        *_stage_run(results, "priors"),
        "Each sparklda mode with α and η as given (`fixed`, α = "
        f"{pri['alpha']:g}, η the default), with `optimize_alpha` (`alpha`: an asymmetric "
        "α; every mode keeps its total at K·α), with "
        "`optimize_alpha` and `optimize_alpha_sum` (`alpha+sum`: the total learned too) and "
        "with `optimize_eta` (`eta`). Every fit of a corpus holds out the same documents; "
        "held-out is the final document-completion log-likelihood per token (folded in "
        "with the model's α), gain its difference from `fixed`. Coherence: the mean over "
        "topics of u_mass and c_npmi of the top 10 terms over the training corpus (whole "
        'documents). See docs/architecture.md, "Learned priors".',
        "",
        "| corpus | K | mode | passes | variant | held-out | gain | α total | α min | α max "
        "| η | u_mass | c_npmi | fit s |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in pri["rows"]:
        lines.append(
            f"| {r['corpus']} | {r['k']} | {r['mode']} | {r['passes']} | {r['variant']} | "
            f"{r['heldout_loglik']:.4f} | {_num(r.get('gain'), '{:+.4f}')} | "
            f"{r['alpha_sum']:.3f} | {r['alpha_min']:.4f} | {r['alpha_max']:.4f} | "
            f"{r['eta']:.4g} | {_num(r.get('u_mass'))} | {_num(r.get('c_npmi'), '{:.4f}')} | "
            f"{r['fit_s']:.0f} |"
        )
    return lines + [""]


def _closing_note(results, targets):
    lines = ["## Closing note", ""]
    met = [t for t in targets if t["status"] == "PASS"]
    missed = [t for t in targets if t["status"] == "MISS"]
    lines.append(f"{len(met)} of {len(targets)} target rows met in this run.")
    lines.append("")
    for t in targets:
        vs = f", vs {t['vs']}" if t.get("vs") else ""
        lines.append(
            f"- Target {t['id']} ({t['corpus']}{vs}): {t['measured']} — **{t['status']}**."
        )
    extra = results.get("notes") or {}
    if missed or extra:
        lines += ["", "### Why the misses, and what they would take", ""]
        done = set()
        for t in missed:
            note = extra.get(str(t["id"])) or NOTES.get(t["id"])
            if note and t["id"] not in done:
                lines.append(f"- **Target {t['id']}.** {note}")
                done.add(t["id"])
        for key, note in extra.items():
            if key.isdigit() and int(key) in done:
                continue
            if not key.isdigit():
                lines.append(f"- {note}")
    return lines


def now_iso() -> str:
    return _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
