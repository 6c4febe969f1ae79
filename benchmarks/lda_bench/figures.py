"""The benchmark page's figures beyond ``curves.png`` (held-out quality against time, in
:func:`lda_bench.report.plot_curves`): where a round's time goes, and round time against
the tasks of a round. PNG files next to ``docs/benchmarks.md``, drawn from a results.json
alone (``benchmarks/run.py --report-only``), with matplotlib's Agg canvas (no display, no
pyplot state).
"""

from __future__ import annotations

#: The parts of a round in the page's round table (results' ``round_summary``), with the
#: name the figure gives each: shipping the state (driver builds and broadcasts it), the
#: Spark job around the tasks' kernels, the slowest task's kernel, merging the tasks'
#: statistics, the driver's update.
ROUND_PARTS = (
    ("broadcast_s", "shipping (broadcast)"),
    ("tasks_s", "job (tasks less kernel)"),
    ("kernel_s", "kernel (slowest task)"),
    ("aggregation_s", "merge"),
    ("update_s", "update"),
)
BREAKDOWN_PNG = "round_breakdown.png"
TASKS_PNG = "round_tasks.png"


def _figure(width: float, height: float):
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def plot_round_breakdown(results: dict, path: str) -> bool:
    """Stacked bars of the median round's parts, one bar per sparklda system, one panel per
    corpus (``round_summary`` of each system). Returns False (no file) without any."""
    corpora = []
    for c, by_sys in results.get("systems", {}).items():
        rows = [(s, out["round_summary"]) for s, out in by_sys.items() if out.get("round_summary")]
        if rows:
            corpora.append((c, rows))
    if not corpora:
        return False
    height = max(2.6, 0.45 * max(len(rows) for _, rows in corpora) + 1.4)
    fig = _figure(6.5 * len(corpora), height)
    axes = fig.subplots(1, len(corpora), squeeze=False)[0]
    colors = ["#4C72B0", "#DD8452", "#55A868", "#C44E52", "#8172B3"]
    for ax, (c, rows) in zip(axes, corpora, strict=False):
        names = [s for s, _ in rows][::-1]
        left = [0.0] * len(names)
        for (key, label), color in zip(ROUND_PARTS, colors, strict=False):
            widths = [float(summ.get(key) or 0.0) for _, summ in rows][::-1]
            ax.barh(names, widths, left=left, label=label, color=color)
            left = [a + b for a, b in zip(left, widths, strict=False)]
        k = results.get("corpora", {}).get(c, {}).get("k")
        ax.set_title(f"{c}, K={k}: median round" if k else f"{c}: median round")
        ax.set_xlabel("seconds")
        ax.grid(True, axis="x", alpha=0.3)
    axes[0].legend(fontsize=7, loc="lower right")
    fig.savefig(path, dpi=110)
    return True


def plot_round_tasks(results: dict, path: str) -> bool:
    """Median round, job, kernel and merge seconds against the tasks of a round (results'
    ``tasks`` stage, one line per combine setting). Returns False (no file) without it."""
    tasks = results.get("tasks") or {}
    rows = [r for r in tasks.get("rows") or [] if r.get("median_round_s") is not None]
    if not rows:
        return False
    fig = _figure(6.5, 4.2)
    ax = fig.subplots()
    combines = []
    for r in rows:
        if r.get("combine") not in combines:
            combines.append(r.get("combine"))
    series = (
        ("median_round_s", "round", "-o"),
        ("median_job_s", "job", "--s"),
        ("median_kernel_s", "kernel", ":^"),
        ("median_merge_s", "merge", "-.v"),
    )
    for combine in combines:
        mine = sorted(
            (r for r in rows if r.get("combine") == combine), key=lambda r: r["parts_per_slice"]
        )
        x = [r["parts_per_slice"] for r in mine]
        for key, label, style in series:
            y = [r.get(key) for r in mine]
            if any(v is None for v in y):
                continue
            name = label if len(combines) == 1 else f"{label} (combine: {combine})"
            ax.plot(x, y, style, label=name, markersize=4)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("tasks per round")
    ax.set_ylabel("median seconds")
    k = tasks.get("k")
    ax.set_title(f"round time against tasks (SCVB0 K={k}, generated corpus)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.savefig(path, dpi=110)
    return True
