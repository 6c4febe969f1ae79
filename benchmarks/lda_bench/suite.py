"""The benchmark's measurements, in the order one run takes them.

1. Kernel microbenchmark (single core, before any Spark work).
2. Per corpus: one cached training DataFrame and one held-out set; every
   system trains on the first and is scored on the second; quality against
   time from the start of each ``fit``.
3. Minibatch sweep (one corpus): round-time decomposition and quality after
   one pass for several minibatch sizes, the evidence for the default.
4. Round cost against corpus size: the same corpus replicated ×1, ×2, ×4
   at one minibatch size; median round time.

5. The round floor: rounds of an SCVB0 round's shape without the kernel.
6. Tasks per round, throughput against MLlib and startup on generated
   corpora (:mod:`benchmarks.lda_bench.scale`), then Spark Connect against
   classic (:mod:`benchmarks.lda_bench.connect`).

Everything returns plain dicts (JSON-ready); :mod:`benchmarks.lda_bench.report`
turns them into files, a plot and ``docs/benchmarks.md``. Only sparklda's
public API is used: every sparklda measurement is a :func:`sparklda.api.fit`.
"""

from __future__ import annotations

import logging
import math
import time
import tomllib
from dataclasses import dataclass, field

import numpy as np
from pyspark import StorageLevel

from sparklda.api import fit
from sparklda.block import DocBlock
from sparklda.kernels import uniform_per_doc
from sparklda.params import ALGORITHMS, TrainParams, default_minibatch_size
from sparklda.training import Callback

from . import kernel, systems
from .data import BenchCorpus, heldout_ids, prepare
from .memory import PeakRSS, rdd_storage

log = logging.getLogger("benchmarks")

#: TrainParams every system of a corpus must share: they choose the held-out
#: documents (set with --seed and --heldout, never per system).
SHARED_PARAMS = ("seed", "heldout_count", "heldout_fraction")

#: Held-out documents per corpus unless told otherwise (KOS: the README's quickstart setting).
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
    default_parallelism: int = 2
    # Spark Connect against classic (benchmarks/lda_bench/connect.py)
    connect_corpus: CorpusSpec | None = None
    connect_passes: int = 2
    connect_reference: str = "mllib-online-tuned"
    connect_ref_passes: float = 5.0
    work_dir: str = ""
    # generated corpora (benchmarks/lda_bench/scale.py)
    generated_dir: str = ""
    tasks_parts: list = field(default_factory=list)
    tasks_combine: list = field(default_factory=lambda: ["executors", "driver"])
    tasks_docs: int = 100_000
    tasks_vocab: int = 50_000
    tasks_true_topics: int = 100
    tasks_mean_length: float = 150.0
    tasks_k: int = 100
    tasks_minibatch: int = 16_000
    throughput_docs: int = 0
    throughput_vocab: int = 100_000
    throughput_true_topics: int = 100
    throughput_mean_length: float = 150.0
    throughput_k: int = 100
    throughput_mllib_iters: tuple = (1, 3)
    throughput_mllib_rate: float = 0.05
    throughput_reference_minibatch: int = 2000
    startup: list = field(default_factory=list)
    startup_k: int = 50
    startup_passes: int = 2
    # learned priors (benchmarks/lda_bench/priors.py)
    priors_corpora: list = field(default_factory=list)
    priors_modes: dict = field(default_factory=dict)
    priors_variants: list = field(default_factory=list)
    priors_coherence: bool = True
    # MAP-EM against MLlib's EM (benchmarks/lda_bench/map_em.py)
    map_corpora: list = field(default_factory=list)
    map_mllib_iters: tuple = (2, 10)
    map_alpha: float = 0.0
    map_eta: float = 0.0
    map_warm_up: bool = True


def default_systems() -> list[str]:
    """Every sparklda algorithm, both MLlib variants, gensim if importable."""
    names = sorted(ALGORITHMS, key=lambda m: (m != "scvb0", m))
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
        for item in rest.rstrip("]").split(";"):
            if item.strip():
                key, _, value = item.partition("=")
                try:
                    overrides[key.strip()] = tomllib.loads(f"v = {value.strip()}")["v"]
                except tomllib.TOMLDecodeError:
                    overrides[key.strip()] = value.strip()
    check_overrides(overrides, f"system {name!r}")
    return base.strip(), overrides


def check_overrides(overrides: dict, where: str):
    """Refuse a per-system (or --param) value of a parameter that picks the held-out
    documents: every system is scored on the same ones."""
    bad = sorted(set(overrides) & set(SHARED_PARAMS))
    if bad:
        raise ValueError(
            f"{where} sets {', '.join(bad)}; these choose the held-out documents "
            "every system is scored on, so they are set once for the run "
            "(--seed, --heldout NAME=COUNT)"
        )


#: Untimed fits of the run's first sparklda system before the timed ones, each of the
#: timed fits' passes. In a fresh KOS session after the one-pass warm-up alone, six
#: identical 10-pass scvb0 fits in a row reached 3 passes at 0.60, 0.53, 0.48, 0.44,
#: 0.41 and 0.47 s (2026-11-27: ``--only quality --corpora uci_kos:50`` with six copies of
#: the default scvb0 as ``--systems``): the first timed fit paid about 40% for
#: a JVM that had run a few dozen jobs, where MLlib's timed 5-pass fit follows its own
#: fits of 0.4, 1 and 2 passes. Three fits of the timed length bring sparklda's rounds
#: to the same steady state; the report lists each warm-up fit's seconds, so a run shows
#: whether they had settled.
WARM_UP_FITS = 3


def warm_up(spark, bc, spec: CorpusSpec, opts: Options) -> dict:
    """Untimed fits before the timed ones, so that every system is timed in a warm JVM.

    MLlib is fitted once per number of passes, so its timed fits of more passes come
    after its own fits of fewer, on the same DataFrame; each sparklda mode is timed in
    one fit, evaluated as it goes. So the warm-up is :data:`WARM_UP_FITS` untimed fits
    of the run's first sparklda system on this corpus, each of the timed fits' passes,
    evaluated only at its end (the same building, rounds and sizes as the timed fit; the Spark
    Connect stage warms its paths itself), and a two-iteration MLlib fit on 500
    documents (the JVM's first compilation of MLlib's code). Returns the seconds of
    each: ``{"<mode>_s": [fit seconds, ...], "mllib_s": seconds}``."""
    from pyspark.ml.clustering import LDA

    out: dict = {}
    modes = [m for m in map(parse_system, opts.systems) if m[0] in ALGORITHMS]
    if modes:
        base, overrides = modes[0]
        params = mode_params(bc, spec, opts, base, overrides, eval_every=0)
        took = []
        for _ in range(WARM_UP_FITS):
            t = time.perf_counter()
            fit(bc.sparklda_source(), params)
            took.append(time.perf_counter() - t)
        out[f"{base}_s"] = took
        out["passes"] = params.passes
    t = time.perf_counter()
    small = bc.train_df.limit(500)
    LDA(k=5, maxIter=2, seed=opts.seed, optimizer="online").fit(small)
    out["mllib_s"] = time.perf_counter() - t
    log.info("warm-up on %s: %s", bc.name, out)
    return out


def _round_summary(rounds: list, skip_first: int = 1) -> dict:
    """Median per-round decomposition of a sparklda run (first rounds skipped:
    they carry one-off costs such as the first broadcast to fresh workers)."""
    rr = rounds[skip_first:] if len(rounds) > skip_first + 2 else rounds
    if not rr:
        return {}
    # the report's column names for the round record's ship_s / release_s / shipped_bytes
    rr = [
        {
            **r,
            "broadcast_s": r.get("ship_s", r.get("broadcast_s")),
            "destroy_s": r.get("release_s", r.get("destroy_s")),
            "broadcast_bytes": r.get("shipped_bytes", r.get("broadcast_bytes")),
        }
        for r in rr
    ]

    def med(key):
        return float(np.median([r.get(key, 0.0) or 0.0 for r in rr]))

    round_s = med("round_s")
    kernel = med("task_kernel_max_s")
    merge = float(
        np.median([(r.get("merge_s") or 0.0) + (r.get("mode_merge_s") or 0.0) for r in rr])
    )
    tasks = float(
        np.median(
            [
                (r.get("job_s") or 0.0)
                - (r.get("task_kernel_max_s") or 0.0)
                - (r.get("mode_merge_s") or 0.0)
                for r in rr
            ]
        )
    )
    update = float(
        np.median([(r.get("update_s") or 0.0) + (r.get("destroy_s") or 0.0) for r in rr])
    )
    shares = [(r.get("task_kernel_max_s") or 0.0) / r["round_s"] for r in rr if r.get("round_s")]
    return {
        "rounds": len(rr),
        "round_s": round_s,
        "broadcast_s": med("broadcast_s"),
        "tasks_s": tasks,
        "kernel_s": kernel,
        "aggregation_s": merge,
        "update_s": update,
        "kernel_share": float(np.median(shares)) if shares else None,
        "tokens_per_s": med("tokens_per_s"),
        "broadcast_bytes": med("broadcast_bytes")
        if any("broadcast_bytes" in r for r in rr)
        else None,
    }


def run_corpus(spark, spec: CorpusSpec, opts: Options, results: dict, keep: bool = False):
    """Prepare one corpus and run every system on it; returns the prepared
    corpus when ``keep`` (the caller unpersists it), else None."""
    sc = spark.sparkContext
    t0 = time.perf_counter()
    bc = prepare(spark, spec.name, spec.path, spec.heldout_count, seed=opts.seed)
    info = {
        "name": spec.name,
        "path": spec.path,
        "k": spec.k,
        "heldout_count": spec.heldout_count,
        "training_documents": bc.n_train_docs,
        "heldout_documents": bc.n_heldout_docs,
        "training_tokens": bc.n_train_tokens,
        "training_pairs": bc.n_train_pairs,
        "vocab_size": bc.vocab_size,
        "prepare_s": time.perf_counter() - t0,
    }
    results["corpora"][spec.name] = info
    log.info("corpus %s ready: %s", spec.name, info)
    ids_checked = False
    try:
        if opts.warm_up:
            info["warm_up_s"] = warm_up(spark, bc, spec, opts)
        for name in opts.systems:
            base, overrides = parse_system(name)
            rss = PeakRSS().start()
            t = time.perf_counter()
            try:
                if base in ALGORITHMS:
                    probe = CorpusProbe(sc)
                    out = run_mode(bc, name, spec, opts, probe, base, overrides)
                    check_same_heldout(bc, probe, name, check_ids=not ids_checked)
                    ids_checked = True
                    out["cached_corpus"] = probe.cached
                    out["round_summary"] = _round_summary(out["rounds"])
                elif name in systems.MLLIB_VARIANTS:
                    out = systems.run_mllib(
                        bc, name, spec.k, opts.mllib_passes, opts.alpha, opts.seed
                    )
                elif name == "gensim-ldamulticore":
                    if not systems.gensim_available():
                        log.warning("gensim is not installed; skipping %s", name)
                        continue
                    out = systems.run_gensim(
                        bc, spec.k, opts.passes, opts.alpha, opts.seed, opts.gensim_workers
                    )
                else:
                    raise UnknownSystem(f"Unknown system {name!r}; known: {default_systems()}")
            except (UnknownSystem, HeldoutMismatch):
                raise
            except Exception as e:  # one failing system must not lose the others' figures
                log.exception("system %s failed on %s", name, spec.name)
                out = {"points": [], "error": f"{type(e).__name__}: {e}"}
            out["memory"] = rss.stop()
            out["run_s"] = time.perf_counter() - t
            results["systems"].setdefault(spec.name, {})[name] = out
            results["points"].extend(out["points"])
            if out["points"]:
                last = out["points"][-1]
                log.info(
                    "%s on %s: %.2f passes, %.1f s, held-out %.4f",
                    name,
                    spec.name,
                    last["passes"],
                    last["elapsed_s"],
                    last["heldout_loglik"],
                )
    except BaseException:
        bc.unpersist()
        raise
    if keep:
        return bc
    bc.unpersist()
    return None


class UnknownSystem(ValueError):
    """A --systems or --variants name the benchmark does not know."""


class HeldoutMismatch(RuntimeError):
    """sparklda's fit held out other documents than the ones the other systems are scored on."""


class CorpusProbe(Callback):
    """What ``fit`` reports about the corpus it built: its report, Spark's storage
    figures of the cached training blocks (read when training ends: blocks the driver
    laid out are cached as the rounds first read them), and its held-out blocks."""

    def __init__(self, sc):
        self.sc = sc
        self.cached: dict = {}
        self.heldout = None
        self._train = None

    def on_corpus(self, corpus):
        self.cached.update(corpus.report)
        self._train = getattr(corpus, "train", None)
        self.heldout = corpus.heldout

    def on_train_end(self, result):
        train, self._train = self._train, None  # a figure we cannot read is left out
        storage = rdd_storage(self.sc, train) if train is not None else None
        if storage:
            self.cached["spark"] = storage


def check_same_heldout(bc: BenchCorpus, probe: CorpusProbe, name: str, check_ids: bool):
    """Raise :class:`HeldoutMismatch` unless ``fit`` held out the benchmark's documents.

    The count is checked on every fit; the document ids (one Spark job, after
    the fit, off its clock) when ``check_ids``.
    """
    n = probe.cached.get("heldout_documents")
    if n != bc.n_heldout_docs:
        raise HeldoutMismatch(
            f"{name} on {bc.name}: fit held out {n} documents, the other "
            f"systems are scored on {bc.n_heldout_docs}"
        )
    if check_ids:
        if probe.heldout is None:
            raise HeldoutMismatch(f"{name} on {bc.name}: fit reported no held-out blocks")
        if heldout_ids(probe.heldout) != bc.heldout_ids:
            raise HeldoutMismatch(
                f"{name} on {bc.name}: fit held out other documents than "
                "the ones the other systems are scored on"
            )


def mode_params(
    bc: BenchCorpus,
    spec: CorpusSpec,
    opts: Options,
    algorithm: str,
    overrides: dict | None = None,
    **fixed,
) -> TrainParams:
    """TrainParams of a sparklda fit on ``bc``: the run's settings, the system's
    overrides, ``fixed`` values, and the held-out documents of the benchmark."""
    check_overrides(opts.params, "--param")
    values = {
        "algorithm": algorithm,
        "k": spec.k,
        "alpha": opts.alpha,
        "passes": opts.passes,
        **opts.params,
        **(overrides or {}),
        **fixed,
        **bc.holdout_params(),
    }
    if not values.get("minibatch_size"):  # the library's default rule, made explicit here
        sc = bc.train_df.sparkSession.sparkContext
        tasks = values.get("parts_per_slice") or sc.defaultParallelism
        values["minibatch_size"] = default_minibatch_size(tasks)
    return TrainParams(**values)


def coherence_means(model, source) -> dict:
    """Mean u_mass and c_npmi of the topics' top 10 terms over ``source``'s documents."""
    out = {}
    for measure in ("u_mass", "c_npmi"):
        values = model.coherence(source, measure=measure, top_n=10)
        out[measure] = float(np.mean(values))
    return out


def run_mode(bc: BenchCorpus, name, spec, opts, probe: CorpusProbe, base=None, overrides=None):
    """One ``fit`` of a sparklda mode on every document of ``bc`` (holding out the
    benchmark's documents), evaluated every few rounds."""
    params = mode_params(bc, spec, opts, base or name, overrides)
    rpp = math.ceil(bc.n_train_docs / params.minibatch_size)
    params.eval_every = systems.eval_interval(rpp)
    t0 = time.perf_counter()
    result = fit(bc.sparklda_source(), params, callbacks=[probe])
    wall = time.perf_counter() - t0
    points = [
        {
            "system": name,
            "corpus": bc.name,
            "k": spec.k,
            "passes": e["passes"],
            "round": e["round"],
            "elapsed_s": e["elapsed_s"],
            "heldout_loglik": e["heldout_loglik"],
            "perplexity": e["perplexity"],
            "eval_s": e["eval_s"],
        }
        for e in result.evaluations
    ]
    return {
        "points": points,
        "rounds": result.rounds,
        "report": result.report,
        "params": params.to_dict(),
        "wall_s": wall,
        "broadcast_bytes": systems.broadcast_bytes(bc, params, result),
        # the final topics' mean u_mass and c_npmi over the corpus (off the clock)
        "coherence": coherence_means(result.model, bc.sparklda_source()),
    }


def _pass_points(result):
    return [
        {"passes": e["passes"], "elapsed_s": e["elapsed_s"], "heldout_loglik": e["heldout_loglik"]}
        for e in result.evaluations
    ]


def run_sweep(spark, spec: CorpusSpec, opts: Options, results: dict, bc=None):
    """SCVB0 with each minibatch size of ``opts.sweep_minibatch`` (0: the whole
    corpus) for ``opts.sweep_passes`` passes: round decomposition, time and quality."""
    own = bc is None
    if own:
        bc = prepare(spark, spec.name, spec.path, spec.heldout_count, seed=opts.seed)
    rows = []
    try:
        for mb in opts.sweep_minibatch:
            mb = int(mb) or bc.n_train_docs
            params = mode_params(
                bc, spec, opts, "scvb0", passes=opts.sweep_passes, minibatch_size=int(mb)
            )
            params.eval_every = math.ceil(bc.n_train_docs / int(mb))  # every pass boundary
            result = fit(bc.sparklda_source(), params)
            final = result.evaluations[-1]
            row = {
                "corpus": spec.name,
                "k": spec.k,
                "minibatch_size": int(mb),
                "parts_per_slice": result.report["corpus"]["parts_per_slice"],
                "rounds_per_pass": result.report["corpus"]["slices"],
                "passes": final["passes"],
                "train_s": result.report["train_seconds"],
                "build_s": result.report["corpus_build_seconds"],
                "heldout_loglik": final["heldout_loglik"],
                "per_pass": _pass_points(result),
                **_round_summary(result.rounds),
            }
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
    first of each fit. The replicas train on their training documents only
    (nothing held out, no evaluation).
    """
    check_overrides(opts.params, "--param")
    prepared = {}
    runs = {int(r): [] for r in opts.scaling_replicas}
    try:
        for r in opts.scaling_replicas:
            r = int(r)
            reuse = base is not None and r == 1
            prepared[r] = (
                base
                if reuse
                else prepare(
                    spark, spec.name, spec.path, spec.heldout_count, seed=opts.seed, replicate=r
                ),
                reuse,
            )
        params = TrainParams(
            **{
                "algorithm": "scvb0",
                "k": spec.k,
                "alpha": opts.alpha,
                **opts.params,
                "passes": 1,
                "seed": opts.seed,
            }
        )
        if not params.minibatch_size:
            params.minibatch_size = default_minibatch_size(
                params.parts_per_slice or spark.sparkContext.defaultParallelism
            )
        for _ in range(max(1, opts.scaling_repeats)):
            for r, (bc, _reuse) in prepared.items():
                result = fit(bc.training_source(), params)
                runs[r].append(result)
        rows = []
        for r, results_r in runs.items():
            bc = prepared[r][0]
            rounds = [x for res in results_r for x in res.rounds[1:]]
            summ = _round_summary(rounds, skip_first=0)
            rows.append(
                {
                    "corpus": spec.name,
                    "k": spec.k,
                    "replicas": r,
                    "training_documents": bc.n_train_docs,
                    "minibatch_size": params.minibatch_size,
                    "rounds_per_pass": results_r[0].report["corpus"]["slices"],
                    "repeats": len(results_r),
                    "rounds_measured": len(rounds),
                    "median_round_s": summ.get("round_s"),
                    "median_job_s": float(np.median([x["job_s"] for x in rounds])),
                    "median_kernel_s": summ.get("kernel_s"),
                    "build_s": float(
                        np.median([x.report["corpus_build_seconds"] for x in results_r])
                    ),
                }
            )
            log.info("scaling ×%s: %s", r, rows[-1])
    finally:
        for bc, reuse in prepared.values():
            if not reuse:
                bc.unpersist()
    results["scaling"] = rows


def run_kernel(opts: Options, results: dict):
    results["kernel"] = kernel.run(
        ks=opts.kernel_ks, repeats=opts.kernel_repeats, n_docs=opts.kernel_docs
    )
    for r in results["kernel"]:
        log.info(
            "kernel K=%d %s: %.3g topic-updates/s (ceiling %.3g)",
            r["k"],
            r["dtype"],
            r["kernel_updates_per_s"],
            r["ceiling_updates_per_s"],
        )


#: Random streams of the floor's block layout (its own; any seeded hash of the
#: document id gives slices of the same size distribution).
FLOOR_STREAM_SLICE = 101
FLOOR_STREAM_PART = 102


def floor_layout(
    docs_rdd, n_docs: int, minibatch_size: int, parts_per_slice: int, seed: int, dtype
):
    """Training documents as cached DocBlocks laid out the way sparklda lays out a
    corpus: ``ceil(n_docs / minibatch_size)`` slices of ``parts_per_slice``
    partitions, each document placed by a seeded hash of its id, one block per
    partition. Returns (blocks RDD, n_slices)."""
    n_slices = max(1, math.ceil(n_docs / minibatch_size))
    p = parts_per_slice

    def assign(it):
        batch = list(it)
        if not batch:
            return iter(())
        ids = np.fromiter((d[0] for d in batch), dtype=np.int64, count=len(batch))
        s = np.minimum(
            (uniform_per_doc(seed, FLOOR_STREAM_SLICE, ids) * n_slices).astype(np.int64),
            n_slices - 1,
        )
        i = np.minimum((uniform_per_doc(seed, FLOOR_STREAM_PART, ids) * p).astype(np.int64), p - 1)
        return ((int(s[j] * p + i[j]), d) for j, d in enumerate(batch))

    def make_block(it):
        yield DocBlock.from_docs((d for _, d in it), dtype=dtype)

    blocks = (
        docs_rdd.mapPartitions(assign)
        .partitionBy(n_slices * p, lambda x: x)
        .mapPartitions(make_block, preservesPartitioning=True)
        .setName("benchmark floor blocks")
        .persist(StorageLevel.MEMORY_ONLY)
    )
    return blocks, n_slices


def floor_task(bc, k: int, dtype):
    """A round's task without the arithmetic: read the broadcast and the block,
    return zero rows of K values for the block's terms (the real result's size)."""

    def run(blocks):
        _terms, _rows, _scale, _inv_nz = bc.value  # read, as the real task does
        for block in blocks:
            if block.n_docs == 0:
                continue
            yield block.terms, np.zeros((len(block.terms), k), dtype=dtype), block.n_tokens

    return run


def merge_rows(parts, k: int):
    """Float64 sum of the tasks' rows by term (what sparklda's merge computes)."""
    if not parts:
        return np.zeros(0, np.int64), np.zeros((0, k))
    terms = np.concatenate([p[0] for p in parts])
    rows = np.concatenate([p[1] for p in parts]).astype(np.float64)
    order = np.argsort(terms, kind="stable")
    terms, rows = terms[order], rows[order]
    starts = np.flatnonzero(np.r_[True, terms[1:] != terms[:-1]])
    return terms[starts], np.add.reduceat(rows, starts, axis=0)


def run_floor(
    spark, spec: CorpusSpec, opts: Options, results: dict, bc: BenchCorpus, passes: int = 2
):
    """Spark's share of an SCVB0 round at the default settings, without the kernel.

    Rounds of an SCVB0 round's shape, rebuilt from the public API rather than
    run inside a mode: the training documents laid out in
    ``n_slices × parts_per_slice`` cached blocks (``minibatch_size`` documents
    per slice, as :func:`sparklda.api.fit` lays them out); per round, the slices
    visited in a seeded random order each pass, a broadcast of one row of K
    values per distinct term of the slice (gathered from a V×K array on the
    driver: what SCVB0 broadcasts once it knows a slice's terms), one task per
    partition of the slice that reads the broadcast and its block and returns
    zero rows for the block's terms (the real result's size), the float64 sum
    of those rows by term on the driver, and the broadcast destroyed. No kernel
    and no update. The median over the rounds after the first pass is the floor
    under a round's time that the kernel cannot remove: with it, the best kernel
    share at these settings is kernel / (kernel + floor).
    """
    sc = spark.sparkContext
    check_overrides(opts.params, "--param")
    params = TrainParams(
        **{"algorithm": "scvb0", "k": spec.k, "alpha": opts.alpha, **opts.params, "seed": opts.seed}
    )
    k, dtype, seed = params.k, np.dtype(params.dtype), params.seed
    p = params.parts_per_slice or sc.defaultParallelism
    params.minibatch_size = params.minibatch_size or default_minibatch_size(p)
    blocks, n_slices = floor_layout(
        bc.training_source().rdd, bc.n_train_docs, params.minibatch_size, p, seed, dtype
    )
    rows = []
    try:
        part_terms = blocks.map(lambda b: b.terms).collect()  # one block per partition
        terms_of_slice = [
            np.unique(np.concatenate(part_terms[s * p : (s + 1) * p])) for s in range(n_slices)
        ]
        topic_word = np.ones((bc.vocab_size, k), dtype=dtype)
        inv_nz = np.ones(k, dtype=dtype)
        for t in range(passes * n_slices):
            order = np.random.default_rng([seed, 17, t // n_slices]).permutation(n_slices)
            s = int(order[t % n_slices])
            r0 = time.perf_counter()
            terms = terms_of_slice[s].astype(np.int32)
            value = (terms, topic_word[terms], 1.0, inv_nz)
            b = sc.broadcast(value)
            r1 = time.perf_counter()
            task = floor_task(b, k, dtype)
            parts = sc.runJob(blocks, task, list(range(s * p, (s + 1) * p)))
            r2 = time.perf_counter()
            merge_rows(parts, k)
            r3 = time.perf_counter()
            b.destroy()
            r4 = time.perf_counter()
            rows.append(
                {
                    "round": t + 1,
                    "broadcast_s": r1 - r0,
                    "job_s": r2 - r1,
                    "merge_s": r3 - r2,
                    "destroy_s": r4 - r3,
                    "round_s": r4 - r0,
                    "broadcast_bytes": int(terms.nbytes + value[1].nbytes + inv_nz.nbytes + 8),
                }
            )
    finally:
        blocks.unpersist()
    rr = rows[n_slices:] if len(rows) > n_slices else rows
    med = {
        key: float(np.median([r[key] for r in rr]))
        for key in ("round_s", "broadcast_s", "job_s", "merge_s", "destroy_s", "broadcast_bytes")
    }
    results["floor"] = {
        "method": "public-api",
        "corpus": spec.name,
        "k": spec.k,
        "minibatch_size": params.minibatch_size,
        "parts_per_slice": p,
        "slices": n_slices,
        "rounds_measured": len(rr),
        **med,
        "rounds": rows,
    }
    log.info("round floor on %s: %s", spec.name, med)
