"""The benchmark's measurements, in the order one run takes them.

1. Kernel microbenchmark (single core, before any Spark work).
2. Per corpus: one cached training DataFrame and one held-out set; every
   system trains on the first and is scored on the second; quality against
   time from the start of each ``fit``.
3. Minibatch sweep (one corpus): round-time decomposition and quality after
   one pass for several minibatch sizes, the evidence for the default.
4. Round cost against corpus size: the same corpus replicated ×1, ×2, ×4
   at one minibatch size; median round time.

Everything returns plain dicts (JSON-ready); :mod:`sparklda.bench.report`
turns them into files, a plot and ``docs/benchmarks.md``.
"""

from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass, field

import numpy as np

from . import systems
from .data import prepare
from .memory import PeakRSS, rdd_storage

log = logging.getLogger("sparklda.bench")

#: Held-out documents per corpus unless told otherwise (KOS: the issue-2 setting).
DEFAULT_HELDOUT = {"uci_kos": 430}
DEFAULT_HELDOUT_OTHER = 1000


@dataclass
class CorpusSpec:
    name: str
    path: str
    k: int
    heldout_count: int


@dataclass
class Options:
    corpora: list
    systems: list
    mllib_passes: list = field(default_factory=lambda: [0.5, 1.0, 2.0, 5.0])
    passes: int = 10
    alpha: float = 0.1
    seed: int = 0
    params: dict = field(default_factory=dict)
    kernel_ks: tuple = (20, 100, 1000)
    kernel_repeats: int = 5
    kernel_docs: int = 1000
    sweep_corpus: str | None = None
    sweep_minibatch: list = field(default_factory=list)
    sweep_passes: int = 1
    scaling_corpus: str | None = None
    scaling_replicas: list = field(default_factory=lambda: [1, 2, 4])
    scaling_repeats: int = 3
    gensim_workers: int = 1
    warm_up: bool = True


def default_systems() -> list[str]:
    """Every registered sparklda mode, both MLlib variants, gensim if importable."""
    from .. import modes  # noqa: F401  (registers the modes)
    from ..training import MODES

    names = sorted(MODES, key=lambda m: (m != "scvb0", m))
    names += list(systems.MLLIB_VARIANTS)
    if systems.gensim_available():
        names.append("gensim-ldamulticore")
    return names


def parse_system(name: str):
    """``"scvb0[tau_phi=100;s_phi=10]"`` → ("scvb0", {"tau_phi": 100, "s_phi": 10}): a
    sparklda mode with TrainParams overrides (shown under its full name)."""
    base, _, rest = name.partition("[")
    overrides = {}
    if rest:
        import tomllib

        for item in rest.rstrip("]").split(";"):
            if item.strip():
                key, _, value = item.partition("=")
                try:
                    overrides[key.strip()] = tomllib.loads(f"v = {value.strip()}")["v"]
                except tomllib.TOMLDecodeError:
                    overrides[key.strip()] = value.strip()
    return base.strip(), overrides


def warm_up(spark, bc, opts: Options):
    """One untimed sparklda pass and one MLlib iteration, so that no system pays
    for starting the Python workers (numba kernels loaded from the cache) or
    for the JVM's first compilation of MLlib's code."""
    from pyspark.ml.clustering import LDA

    from ..api import fit
    from ..corpus import from_vectors
    from ..params import TrainParams

    t = time.perf_counter()
    small = bc.train_df.limit(500)
    source = from_vectors(small, "features", id_col="doc_id", vocab=bc.vocab)
    fit(source, TrainParams(k=5, passes=1, minibatch_size=200, seed=opts.seed))
    LDA(k=5, maxIter=2, seed=opts.seed, optimizer="online").fit(small)
    log.info("warm-up done in %.1f s", time.perf_counter() - t)


def _round_summary(rounds: list, skip_first: int = 1) -> dict:
    """Median per-round decomposition of a sparklda run (first rounds skipped:
    they carry one-off costs such as the first broadcast to fresh workers)."""
    rr = rounds[skip_first:] if len(rounds) > skip_first + 2 else rounds
    if not rr:
        return {}

    def med(key):
        return float(np.median([r.get(key, 0.0) or 0.0 for r in rr]))

    round_s = med("round_s")
    kernel = med("task_kernel_max_s")
    merge = float(np.median([(r.get("merge_s") or 0.0) + (r.get("mode_merge_s") or 0.0)
                             for r in rr]))
    tasks = float(np.median([(r.get("job_s") or 0.0) - (r.get("task_kernel_max_s") or 0.0)
                             - (r.get("mode_merge_s") or 0.0) for r in rr]))
    update = float(np.median([(r.get("update_s") or 0.0) + (r.get("destroy_s") or 0.0)
                              for r in rr]))
    shares = [(r.get("task_kernel_max_s") or 0.0) / r["round_s"] for r in rr if r.get("round_s")]
    return {"rounds": len(rr), "round_s": round_s, "broadcast_s": med("broadcast_s"),
            "tasks_s": tasks, "kernel_s": kernel, "aggregation_s": merge, "update_s": update,
            "kernel_share": float(np.median(shares)) if shares else None,
            "tokens_per_s": med("tokens_per_s"),
            "broadcast_bytes": med("broadcast_bytes") if any("broadcast_bytes" in r for r in rr)
            else None}


def run_corpus(spark, spec: CorpusSpec, opts: Options, results: dict, keep: bool = False):
    """Prepare one corpus and run every system on it; returns the prepared
    corpus when ``keep`` (the caller unpersists it), else None."""
    sc = spark.sparkContext
    t0 = time.perf_counter()
    bc = prepare(spark, spec.name, spec.path, spec.heldout_count, seed=opts.seed)
    info = {"name": spec.name, "path": spec.path, "k": spec.k, "heldout_count": spec.heldout_count,
            "training_documents": bc.n_train_docs, "heldout_documents": bc.n_heldout_docs,
            "training_tokens": bc.n_train_tokens, "training_pairs": bc.n_train_pairs,
            "vocab_size": bc.vocab_size, "prepare_s": time.perf_counter() - t0}
    results["corpora"][spec.name] = info
    log.info("corpus %s ready: %s", spec.name, info)
    from .. import modes  # noqa: F401
    from ..training import MODES

    try:
        if opts.warm_up:
            warm_up(spark, bc, opts)
        for name in opts.systems:
            base, overrides = parse_system(name)
            rss = PeakRSS().start()
            t = time.perf_counter()
            try:
                if base in MODES:
                    storage = {}

                    def grab(corpus, storage=storage):
                        storage.update(corpus.report)
                        s = rdd_storage(sc, corpus.train)
                        if s:
                            storage["spark"] = s

                    out = _run_mode(bc, name, spec, opts, grab, base, overrides)
                    out["cached_corpus"] = storage
                    out["round_summary"] = _round_summary(out["rounds"])
                elif name in systems.MLLIB_VARIANTS:
                    out = systems.run_mllib(bc, name, spec.k, opts.mllib_passes, opts.alpha,
                                            opts.seed)
                elif name == "gensim-ldamulticore":
                    if not systems.gensim_available():
                        log.warning("gensim is not installed; skipping %s", name)
                        continue
                    out = systems.run_gensim(bc, spec.k, opts.passes, opts.alpha, opts.seed,
                                             opts.gensim_workers)
                else:
                    raise ValueError(f"Unknown system {name!r}; known: {default_systems()}")
            except Exception as e:  # one failing system must not lose the others' figures
                if isinstance(e, ValueError) and "Unknown system" in str(e):
                    raise
                log.exception("system %s failed on %s", name, spec.name)
                out = {"points": [], "error": f"{type(e).__name__}: {e}"}
            out["memory"] = rss.stop()
            out["run_s"] = time.perf_counter() - t
            results["systems"].setdefault(spec.name, {})[name] = out
            results["points"].extend(out["points"])
            if out["points"]:
                last = out["points"][-1]
                log.info("%s on %s: %.2f passes, %.1f s, held-out %.4f", name, spec.name,
                         last["passes"], last["elapsed_s"], last["heldout_loglik"])
    except BaseException:
        bc.unpersist()
        raise
    if keep:
        return bc
    bc.unpersist()
    return None


def _run_mode(bc, name, spec, opts, on_corpus, base=None, overrides=None):
    from ..api import fit
    from ..corpus import from_vectors
    from ..params import TrainParams

    params = TrainParams(algorithm=base or name, k=spec.k, alpha=opts.alpha, passes=opts.passes,
                         seed=opts.seed, **{**opts.params, **(overrides or {})})
    rpp = math.ceil(bc.n_train_docs / params.minibatch_size)
    params.eval_every = systems.eval_interval(rpp)
    source = from_vectors(bc.train_df, "features", id_col="doc_id", vocab=bc.vocab)
    t0 = time.perf_counter()
    result = fit(source, params, heldout=bc.heldout, on_corpus=on_corpus)
    wall = time.perf_counter() - t0
    points = [{"system": name, "corpus": bc.name, "k": spec.k, "passes": e["passes"],
               "round": e["round"], "elapsed_s": e["elapsed_s"],
               "heldout_loglik": e["heldout_loglik"], "perplexity": e["perplexity"],
               "eval_s": e["eval_s"]} for e in result.evaluations]
    return {"points": points, "rounds": result.rounds, "report": result.report,
            "params": params.to_dict(), "wall_s": wall,
            "broadcast_bytes": systems._broadcast_bytes(name, bc, params, result)}


def _pass_points(result):
    return [{"passes": e["passes"], "elapsed_s": e["elapsed_s"],
             "heldout_loglik": e["heldout_loglik"]} for e in result.evaluations]


def run_sweep(spark, spec: CorpusSpec, opts: Options, results: dict, bc=None):
    """SCVB0 with each minibatch size of ``opts.sweep_minibatch`` (0: the whole
    corpus) for ``opts.sweep_passes`` passes: round decomposition, time and quality."""
    from ..api import fit
    from ..corpus import from_vectors
    from ..params import TrainParams

    own = bc is None
    if own:
        bc = prepare(spark, spec.name, spec.path, spec.heldout_count, seed=opts.seed)
    rows = []
    try:
        for mb in opts.sweep_minibatch:
            mb = int(mb) or bc.n_train_docs
            params = TrainParams(algorithm="scvb0", k=spec.k, alpha=opts.alpha,
                                 passes=opts.sweep_passes, seed=opts.seed,
                                 **{**opts.params, "minibatch_size": int(mb)})
            params.eval_every = math.ceil(bc.n_train_docs / int(mb))  # every pass boundary
            source = from_vectors(bc.train_df, "features", id_col="doc_id", vocab=bc.vocab)
            result = fit(source, params, heldout=bc.heldout)
            final = result.evaluations[-1]
            row = {"corpus": spec.name, "k": spec.k, "minibatch_size": int(mb),
                   "parts_per_slice": result.report["corpus"]["parts_per_slice"],
                   "rounds_per_pass": result.report["corpus"]["slices"],
                   "passes": final["passes"], "train_s": result.report["train_seconds"],
                   "build_s": result.report["corpus_build_seconds"],
                   "heldout_loglik": final["heldout_loglik"],
                   "per_pass": _pass_points(result),
                   **_round_summary(result.rounds)}
            rows.append(row)
            log.info("sweep %s: %s", mb, row)
    finally:
        if own:
            bc.unpersist()
    results["sweep"] = rows


def run_scaling(spark, spec: CorpusSpec, opts: Options, results: dict, base=None):
    """Median SCVB0 round time with the corpus replicated ×r at one minibatch size
    (``base``: the prepared ×1 corpus, reused).

    Each replica trains one pass, ``opts.scaling_repeats`` times, the replicas
    interleaved (×1, ×2, ×4, ×1, ...) so that a slow spell of a shared machine
    does not land on one replica only; the median is over every round but the
    first of each fit.
    """
    from ..api import fit
    from ..corpus import from_vectors
    from ..params import TrainParams

    prepared = {}
    runs = {int(r): [] for r in opts.scaling_replicas}
    try:
        for r in opts.scaling_replicas:
            r = int(r)
            reuse = base is not None and r == 1
            prepared[r] = (base if reuse else
                           prepare(spark, spec.name, spec.path, spec.heldout_count,
                                   seed=opts.seed, replicate=r), reuse)
        params = TrainParams(algorithm="scvb0", k=spec.k, alpha=opts.alpha, passes=1,
                             seed=opts.seed, **opts.params)
        for _ in range(max(1, opts.scaling_repeats)):
            for r, (bc, _reuse) in prepared.items():
                source = from_vectors(bc.train_df, "features", id_col="doc_id", vocab=bc.vocab)
                result = fit(source, params, heldout=None)
                runs[r].append(result)
        rows = []
        for r, results_r in runs.items():
            bc = prepared[r][0]
            rounds = [x for res in results_r for x in res.rounds[1:]]
            summ = _round_summary(rounds, skip_first=0)
            rows.append({"corpus": spec.name, "k": spec.k, "replicas": r,
                         "training_documents": bc.n_train_docs,
                         "minibatch_size": params.minibatch_size,
                         "rounds_per_pass": results_r[0].report["corpus"]["slices"],
                         "repeats": len(results_r), "rounds_measured": len(rounds),
                         "median_round_s": summ.get("round_s"),
                         "median_job_s": float(np.median([x["job_s"] for x in rounds])),
                         "median_kernel_s": summ.get("kernel_s"),
                         "build_s": float(np.median([x.report["corpus_build_seconds"]
                                                     for x in results_r]))})
            log.info("scaling ×%s: %s", r, rows[-1])
    finally:
        for bc, reuse in prepared.values():
            if not reuse:
                bc.unpersist()
    results["scaling"] = rows


def run_kernel(opts: Options, results: dict):
    from . import kernel

    results["kernel"] = kernel.run(ks=opts.kernel_ks, repeats=opts.kernel_repeats,
                                   n_docs=opts.kernel_docs)
    for r in results["kernel"]:
        log.info("kernel K=%d %s: %.3g topic-updates/s (ceiling %.3g)", r["k"], r["dtype"],
                 r["kernel_updates_per_s"], r["ceiling_updates_per_s"])


def _null_task(bc, k, dtype):
    """A round's task without the arithmetic: read the broadcast and the block,
    return zero N̂^Φ rows for the block's terms (the real task's result size)."""
    from ..stats import TopicStats

    def run(blocks):
        terms, rows, scale, inv_nz = bc.value
        for block in blocks:
            if block.n_docs == 0:
                continue
            yield TopicStats(block.terms, np.zeros((len(block.terms), k), dtype=dtype),
                             extra={"tokens": block.n_tokens, "docs": block.n_docs})

    return run


def run_floor(spark, spec: CorpusSpec, opts: Options, results: dict, bc, passes: int = 2):
    """Spark's share of an SCVB0 round at the default settings, without the kernel.

    The same corpus layout, the same broadcast (SCVB0's own ``broadcast_value``)
    and results of the real size (zero rows for each block's terms), merged by
    the real merge, for ``passes`` passes of rounds; no kernel and no update.
    The median is the floor under a round's time that the kernel cannot remove:
    with it, the best kernel share at these settings is kernel / (kernel + floor).
    """
    from ..corpus import build_corpus, from_vectors
    from ..modes.scvb0 import SCVB0
    from ..stats import TopicStats
    from ..params import TrainParams

    sc = spark.sparkContext
    params = TrainParams(algorithm="scvb0", k=spec.k, alpha=opts.alpha, seed=opts.seed,
                         **opts.params)
    source = from_vectors(bc.train_df, "features", id_col="doc_id", vocab=bc.vocab)
    corpus = build_corpus(source, minibatch_size=params.minibatch_size, seed=params.seed,
                          parts_per_slice=params.parts_per_slice or None,
                          dtype=np.dtype(params.dtype), heldout=bc.heldout)
    rows = []
    try:
        mode = SCVB0(corpus, params)
        for t in range(passes * mode.rounds_per_pass):
            r0 = time.perf_counter()
            b = sc.broadcast(mode.broadcast_value(t))
            r1 = time.perf_counter()
            parts = sc.runJob(corpus.train, _null_task(b, params.k, mode.dtype),
                              mode.round_partitions(t))
            r2 = time.perf_counter()
            merged = TopicStats.merge_all(parts) if parts else None
            if merged is not None:
                mode.slice_terms.setdefault(mode.slice_of_round(t), merged.terms)
            r3 = time.perf_counter()
            b.destroy()
            r4 = time.perf_counter()
            rows.append({"round": t + 1, "broadcast_s": r1 - r0, "job_s": r2 - r1,
                         "merge_s": r3 - r2, "destroy_s": r4 - r3, "round_s": r4 - r0,
                         "broadcast_bytes": mode.broadcast_nbytes})
    finally:
        corpus.train.unpersist()
    rr = rows[mode.rounds_per_pass:] if len(rows) > mode.rounds_per_pass else rows
    med = {key: float(np.median([r[key] for r in rr]))
           for key in ("round_s", "broadcast_s", "job_s", "merge_s", "destroy_s")}
    results["floor"] = {"corpus": spec.name, "k": spec.k,
                        "minibatch_size": params.minibatch_size,
                        "parts_per_slice": corpus.parts_per_slice,
                        "rounds_measured": len(rr), **med, "rounds": rows}
    log.info("round floor on %s: %s", spec.name, med)
