"""MAP-EM against Spark MLlib's EM (the map stage; issue 34, point 3).

sparklda's ``algorithm="map"`` (batch MAP-EM, Asuncion et al. 2009) and
``pyspark.ml.clustering.LDA(optimizer="em")`` (the same algorithm on GraphX) fitted
on the same training documents with the same α and η (MLlib's EM defaults,
α = 50/K + 1 and η = 1.1, unless ``--map-alpha`` / ``--map-eta`` say otherwise)
and the same number of iterations, then scored by the same code
(:func:`sparklda.evaluation.completion_loglik`) on the benchmark's held-out
documents (the quality stage's split, :func:`benchmarks.lda_bench.data.prepare`).

Both are scored with MAP's estimates: φ̂_kw = (N_wk + η − 1) / (N_k + W(η − 1))
from each system's topic-word counts (sparklda's model stores the pseudo-count
η − 1, MLlib's ``topicsMatrix()`` of a distributed EM model is the raw counts
N_wk) and folding in with the pseudo-count α − 1, so the scores differ only by
the fits.

Time per iteration. sparklda: the median ``round_s`` of the fit's rounds (one
iteration a round), the first round left out (it builds the corpus's blocks);
also the fit's wall time over the iterations. MLlib: fitted twice, with
``maxIter`` I1 and I2 (``--map-mllib-iters``), its time per iteration is the
difference of the two wall times over I2 − I1 (the graph's construction and the
model's collection cancel out); the held-out score is the I2 fit's. MLlib's EM
checkpoints its graph every ``checkpointInterval`` iterations (10) into the
SparkContext's checkpoint folder: set to a temporary folder when none is.
Both are timed after a warm-up (unless ``--map-no-warm-up``): an untimed sparklda
fit of 2 iterations (numba's compilation, the Python workers' start) and an untimed
MLlib fit of 1 iteration (the JVM's compilation of GraphX's EM) come first, so
neither system's figure counts compiling its code.

CPU per iteration (the machine is shared, so wall-time ratios move with other work):
the CPU seconds of this process and every process under it (the session's JVM and its
Python workers), read from ``/proc`` (:func:`session_cpu`). sparklda: from the end of
the first round to the end of the last, over the rounds between; MLlib: the two fits'
difference over I2 − I1, as for its wall time. Both include the checkpoints that fall
in the counted iterations.
"""

from __future__ import annotations

import logging
import os
import statistics
import tempfile
import time

from sparklda.api import fit
from sparklda.evaluation import completion_loglik, normalize_topics
from sparklda.params import TrainParams
from sparklda.training import Callback

from .data import prepare

log = logging.getLogger("benchmarks")

DEFAULT_MAP = "uci_kos:50,lda_newsgroups:100"


#: Every process :func:`session_cpu` has seen: (pid, start time) -> (kind, CPU seconds).
_SEEN: dict[tuple[int, int], tuple[str, float]] = {}


def session_cpu(root: int | None = None) -> dict:
    """CPU seconds (user + system) of process ``root`` (default: this one) as
    ``driver``, and of the processes under it: ``jvm`` (named java) and ``python`` (the
    rest: the Python workers and their daemon), from ``/proc``; an empty dict where there
    is no ``/proc``. Each process counts its own time only, and one that has ended counts
    what it had at the last reading that saw it (a Python worker the JVM stops, or whose
    daemon ends first, leaves no trace in its parent's time then)."""
    root = os.getpid() if root is None else root
    tick = os.sysconf("SC_CLK_TCK")
    parent, info = {}, {}
    try:
        pids = [int(d) for d in os.listdir("/proc") if d.isdigit()]
    except OSError:
        return {}
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as f:
                text = f.read()
        except OSError:  # gone since the listing
            continue
        close = text.rfind(")")
        fields = text[close + 2 :].split()
        parent[pid] = int(fields[1])
        name = text[text.find("(") + 1 : close]
        info[pid] = (int(fields[19]), name, (int(fields[11]) + int(fields[12])) / tick)
    for pid, (started, name, seconds) in info.items():
        p = pid
        while p in parent and p not in (root, 0, 1):
            p = parent[p]
        if p == root:
            kind = "driver" if pid == root else "jvm" if name == "java" else "python"
            _SEEN[(pid, started)] = (kind, seconds)
    out = {"driver": 0.0, "jvm": 0.0, "python": 0.0}
    for kind, seconds in _SEEN.values():
        out[kind] += seconds
    return out


def cpu_per_iter(before: dict, after: dict, iterations: int) -> dict:
    """``cpu_iter_s`` (all processes) and its ``jvm``/``python``/``driver`` shares
    between two :func:`session_cpu` readings, per iteration (empty without readings)."""
    if not before or not after or iterations < 1:
        return {}
    parts = {k: (after[k] - before[k]) / iterations for k in ("jvm", "python", "driver")}
    return {"cpu_iter_s": sum(parts.values()), **{f"cpu_{k}_iter_s": v for k, v in parts.items()}}


class RoundCpu(Callback):
    """:func:`session_cpu` at the end of the first round and of the last (not of every
    round: a reading costs the driver about 2 ms of CPU, which would count)."""

    def __init__(self):
        self.readings: dict[int, dict] = {}
        self.total = 0

    def on_train_start(self, plan: dict) -> None:
        self.total = int(plan["total_rounds"])

    def on_round(self, record: dict) -> None:
        if record["round"] in (1, self.total):
            self.readings[int(record["round"])] = session_cpu()

    def per_iter(self) -> dict:
        """:func:`cpu_per_iter` over rounds 2..n (empty before two readings)."""
        if len(self.readings) < 2:
            return {}
        first, last = min(self.readings), max(self.readings)
        return cpu_per_iter(self.readings[first], self.readings[last], last - first)


def default_priors(k: int) -> tuple[float, float]:
    """MLlib EM's defaults: α = 50/K + 1, η = 1.1."""
    return 50.0 / k + 1.0, 1.1


def _score(bc, phi, alpha_pseudo: float) -> dict:
    t = time.perf_counter()
    s = completion_loglik(bc.heldout, phi, alpha_pseudo, 100)
    return {**s.as_dict(), "eval_s": time.perf_counter() - t}


def run_sparklda_map(bc, k: int, iters: int, alpha: float, eta: float, seed: int) -> dict:
    params = TrainParams(
        algorithm="map",
        k=k,
        alpha=alpha,
        eta=eta,
        passes=iters,
        eval_every=0,
        **bc.holdout_params(),
    )
    if params.seed != seed:
        raise ValueError(f"map stage: the corpus was split with seed {params.seed}, not {seed}")
    cpu = RoundCpu()
    t0 = time.perf_counter()
    res = fit(bc.sparklda_source(), params, callbacks=[cpu])
    wall = time.perf_counter() - t0
    if res.report["corpus"]["heldout_documents"] != bc.n_heldout_docs:
        raise RuntimeError(f"map on {bc.name}: fit held out other documents")
    rounds = [float(r["round_s"]) for r in res.rounds]
    phi = res.model.topics_matrix()  # (N + η − 1) normalised: the model keeps η − 1
    score = _score(bc, phi, alpha - 1.0)
    own = float(res.evaluations[-1]["heldout_loglik"]) if res.evaluations else None
    return {
        "system": "sparklda-map",
        "iterations": len(rounds),
        "iter_s": statistics.median(rounds[1:] if len(rounds) > 1 else rounds),
        "first_iter_s": rounds[0],
        "wall_s": wall,
        "wall_per_iter_s": wall / max(1, len(rounds)),
        "heldout_loglik": score["heldout_loglik"],
        "perplexity": score["perplexity"],
        "own_eval_heldout_loglik": own,
        # rounds 2..n: the first builds nothing, but it is not timed either
        **cpu.per_iter(),
    }


def run_mllib_em(
    bc, k: int, iters: tuple, alpha: float, eta: float, seed: int, warm_up: bool = False
) -> dict:
    """MLlib's EM fitted with ``maxIter`` I1 and I2 (``iters``); with ``warm_up`` a first,
    untimed fit of one iteration (the JVM's code for GraphX's EM is compiled then)."""
    from pyspark.ml.clustering import LDA

    sc = bc.train_df.sparkSession.sparkContext
    if not sc.getCheckpointDir():
        sc.setCheckpointDir(tempfile.mkdtemp(prefix="sparklda-bench-em-ckpt-"))
    times, cpus, model = {}, {}, None
    for n in ((1,) if warm_up else ()) + tuple(iters):
        lda = LDA(
            k=k,
            maxIter=n,
            seed=seed,
            optimizer="em",
            docConcentration=[float(alpha)],
            topicConcentration=float(eta),
            featuresCol="features",
        )
        c0 = session_cpu()
        t0 = time.perf_counter()
        model = lda.fit(bc.train_df)
        counts = model.topicsMatrix().toArray()  # the raw counts N_wk (V, K)
        c1 = session_cpu()
        if warm_up:
            warm_up = False
            log.info("mllib-em warm-up on %s: %.1f s", bc.name, time.perf_counter() - t0)
            continue
        times[n] = time.perf_counter() - t0
        cpus[n] = {k: c1[k] - c0[k] for k in c1}
        log.info("mllib-em on %s: %d iterations in %.1f s", bc.name, n, times[n])
    i1, i2 = iters
    phi = normalize_topics(counts, eta - 1.0)
    score = _score(bc, phi, alpha - 1.0)
    return {
        "system": "mllib-em",
        "iterations": i2,
        "iter_s": (times[i2] - times[i1]) / (i2 - i1),
        "first_iter_s": None,
        "wall_s": times[i2],
        "wall_per_iter_s": times[i2] / i2,
        "heldout_loglik": score["heldout_loglik"],
        "perplexity": score["perplexity"],
        "own_eval_heldout_loglik": None,
        "mllib_short_fit_s": times[i1],
        "mllib_short_fit_iters": i1,
        **cpu_per_iter(cpus[i1], cpus[i2], i2 - i1),
    }


def run_map(spark, specs, opts, results: dict) -> list:
    """The map stage; sets ``results["map"]`` (its rows and settings)."""
    rows = []
    iters = tuple(opts.map_mllib_iters)
    for i, spec in enumerate(specs):
        bc = prepare(spark, spec.name, spec.path, spec.heldout_count, seed=opts.seed)
        try:
            d_alpha, d_eta = default_priors(spec.k)
            alpha = opts.map_alpha or d_alpha
            eta = opts.map_eta or d_eta
            warm = opts.map_warm_up and i == 0
            if warm:  # a first, untimed sparklda fit: numba's compile and the workers' start
                run_sparklda_map(bc, spec.k, 2, alpha, eta, opts.seed)
            ours = run_sparklda_map(bc, spec.k, iters[1], alpha, eta, opts.seed)
            theirs = run_mllib_em(bc, spec.k, iters, alpha, eta, opts.seed, warm_up=warm)
            common = {"corpus": spec.name, "k": spec.k, "alpha": alpha, "eta": eta}
            for r in (ours, theirs):
                rows.append({**common, **r})
                log.info("map stage: %s", rows[-1])
            rows[-2]["gain_vs_mllib"] = ours["heldout_loglik"] - theirs["heldout_loglik"]
            rows[-2]["speedup_vs_mllib"] = theirs["iter_s"] / ours["iter_s"]
            if ours.get("cpu_iter_s") and theirs.get("cpu_iter_s"):
                rows[-2]["cpu_speedup_vs_mllib"] = theirs["cpu_iter_s"] / ours["cpu_iter_s"]
        finally:
            bc.unpersist()
    fields = list(dict.fromkeys(key for r in rows for key in r))
    for r in rows:
        for key in fields:
            r.setdefault(key, None)
    results["map"] = {
        "seed": opts.seed,
        "mllib_iters": list(iters),
        "rows": [{key: r[key] for key in fields} for r in rows],
    }
    return rows


def summary(rows) -> str:
    """A plain-text table of the stage's rows."""
    out = []
    for r in rows:
        out.append(
            f"{r['corpus']} K={r['k']} {r['system']}: {r['iterations']} it, "
            f"{r['iter_s']:.3f} s/it, held-out {r['heldout_loglik']:.4f}"
        )
    return "\n".join(out)
