"""Batch CVB0 and CVB on Spark (DESIGN.md §4).

CVB0: Asuncion, Welling, Smyth & Teh (2009), Eq. 3 of Foulds et al. (2013).
CVB: Teh, Newman & Welling (2007), Eq. 16-18, the same sweep with the
Gaussian second-order correction and the variance statistics kept beside the
means.

State. γ is kept per (document, distinct term) pair in the cached partition
blocks (``DocBlock.state["gamma"]``, (nnz, K) in the run's dtype); the driver
keeps N^Φ (V×K, float64) and N^Z, plus Var N^Φ and Var N^Z for CVB.

A round is one iteration over every partition (``rounds_per_pass`` = 1, so
``passes`` counts iterations):

1. the driver broadcasts N^Φ and N^Z (and the variances) as they stood at
   the start of the iteration;
2. ``new = old.mapPartitions(sweep)`` copies each block's γ and sweeps its
   documents with :func:`sparklda.kernels.cvb0_block`: each pair's own
   contribution is removed (the "−ij"), γ recomputed and added back, against
   the broadcast statistics plus the partition's own changes (the
   approximate distributed scheme of Newman et al. 2009);
3. ``new`` is persisted, marked for checkpointing every
   ``checkpoint_interval`` iterations, and materialised by the statistics
   job, which returns each block's full Σ m·γ rows (not deltas: the totals
   are recomputed from the blocks every iteration in float64, so no rounding
   drift accumulates over iterations); the previous γ RDD is then
   unpersisted;
4. the driver scatters the partitions' rows into the new N^Φ; N^Z = Σ_w N^Φ_w.

Lineage. Every γ RDD is derived from the previous one, so without
checkpoints the lineage (and a recomputation after a lost partition) grows
with the iterations. Every ``checkpoint_interval`` iterations the new RDD is
checkpointed to ``SparkContext.getCheckpointDir()``; when none is set, a
temporary directory is set in local mode (and said in the log), and on a
cluster ``localCheckpoint()`` is used with a warning. The broadcasts the
uncut lineage refers to are unpersisted after their round but destroyed only
once a checkpoint cuts the lineage (:meth:`Mode.release`): the next
iteration's tasks serialize the RDDs back to the last checkpoint, and a lost
partition can still be recomputed. The driver therefore holds up to
``checkpoint_interval`` + 1 copies of N^Φ in the run's dtype (all of them with
``checkpoint_interval = 0``). Superseded checkpoint files are deleted.

Initialisation: γ of each pair is a normalised row of counter-based uniforms
keyed by (seed, document id, term) (so a function of the seed and the data
only); a warm start sets γ_p ∝ the initial model's φ̂ row of the pair's term.

Defaults: ``passes`` (iterations) = 20 and α, η as shared by every mode;
``checkpoint_interval`` = 10 (Spark's ``checkpointInterval`` default). The
partitions are the corpus's slices × ``parts_per_slice``; the approximate
distributed scheme needs more iterations the more partitions there are.

CVB and small η: the second-order expansion of E[log(η + n)] (Eq. 17) is
poor when E[n] is comparable to η, as it is for most (word, topic) cells at
η = 0.01, K = 50; there the correction over-penalises (for n ~ Bernoulli(0.05)
and η = 0.01 its −Var/(2(η + E n)²) is −6.6, where the exact
E[log(η + n)] − log(η + E n) is −1.6) and CVB settles at
a worse held-out likelihood than CVB0 (KOS, K = 50: −7.53 against −7.34 after
60 iterations; with η = 0.1 the gap after 20 iterations is 0.06). On data
with large counts per cell (the planted tests) the two agree closely.
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
import time

import numpy as np
import scipy.sparse
from pyspark import StorageLevel

from ..block import DocBlock
from ..kernels import cvb0_block, cvb0_init_gamma, uniform_matrix
from ..stats import TopicStats
from ..training import Mode, register

log = logging.getLogger("sparklda.modes.cvb0")

STREAM_GAMMA_INIT = 21


# --------------------------------------------------------------------------
# Per-partition functions (built from plain values, never from the mode)


def pair_ids(block: DocBlock, vocab_size: int) -> np.ndarray:
    """A distinct id per (document, term) pair: doc_id · V + term (int64)."""
    docs = np.repeat(block.doc_ids, np.diff(block.indptr))
    return docs * np.int64(vocab_size) + block.global_pairs().astype(np.int64)


def initial_gamma(block: DocBlock, seed: int, vocab_size: int, k: int, dtype,
                  phi=None) -> np.ndarray:
    """γ of every pair of ``block`` at the start of training, (nnz, K).

    Random: rows of :func:`sparklda.kernels.uniform_matrix` keyed by (seed,
    pair id), normalised, so γ is a function of the seed, the document id
    and the term only. Warm start: γ_p ∝ φ̂ row of the pair's term, with
    ``phi`` the (V, K) topics of the initial model.
    """
    if phi is not None:
        u = np.asarray(phi[block.global_pairs()], dtype=dtype)
    else:
        u = uniform_matrix(seed, STREAM_GAMMA_INIT, pair_ids(block, vocab_size), k, dtype)
    return cvb0_init_gamma(u)


def _with_state(block: DocBlock, gamma: np.ndarray, seconds: float) -> DocBlock:
    return DocBlock(block.doc_ids, block.indptr, block.terms, block.local, block.counts,
                    {"gamma": gamma, "sweep_seconds": np.array([seconds])})


def init_task(seed, vocab_size, k, dtype, phi_bc=None):
    def run(blocks):
        phi = phi_bc.value if phi_bc is not None else None
        for block in blocks:
            t0 = time.perf_counter()
            gamma = initial_gamma(block, seed, vocab_size, k, dtype, phi)
            yield _with_state(block, gamma, time.perf_counter() - t0)

    return run


def sweep_task(bc, alpha, eta, w_eta, second_order):
    """One CVB0/CVB iteration over a partition's blocks: a new block per block,
    γ updated on a copy (the cached input block is never modified)."""

    def run(blocks):
        nphi, nz, var_phi, var_z = bc.value
        for block in blocks:
            t0 = time.perf_counter()
            gamma = np.array(block.state["gamma"], order="C", copy=True)
            if block.nnz:
                rows = nphi[block.terms]
                var_rows = var_phi[block.terms] if second_order else None
                cvb0_block(block.indptr, block.local,
                           block.counts.astype(gamma.dtype, copy=False), gamma, rows, nz,
                           alpha, eta, w_eta, second_order, var_rows,
                           var_z if second_order else None)
            yield _with_state(block, gamma, time.perf_counter() - t0)

    return run


def pair_sums(block: DocBlock, values: np.ndarray) -> np.ndarray:
    """Σ_p m_p · values_p by the block's term rows, float64 (U, width)."""
    nnz = block.nnz
    m = scipy.sparse.csr_matrix(
        (block.counts.astype(np.float64), (block.local, np.arange(nnz))),
        shape=(len(block.terms), nnz))
    return np.asarray(m @ np.asarray(values, dtype=np.float64))


def stats_task(second_order):
    """Full Σ m·γ (and Σ m·γ(1−γ) for CVB, as extra columns) by term, per block."""

    def run(blocks):
        for block in blocks:
            t0 = time.perf_counter()
            gamma = block.state["gamma"]
            vals = np.hstack([gamma, gamma * (1 - gamma)]) if second_order else gamma
            rows = pair_sums(block, vals)
            yield TopicStats(block.terms, rows,
                             extra={"tokens": block.n_tokens, "docs": block.n_docs,
                                    "pairs": block.nnz},
                             timings={"sweep": float(block.state["sweep_seconds"][0]),
                                      "stats": time.perf_counter() - t0})

    return run


def _delete_checkpoint_files(sc, rdd) -> None:
    path = rdd.getCheckpointFile() if rdd is not None else None
    if not path:
        return
    try:
        jvm_path = sc._jvm.org.apache.hadoop.fs.Path(path)
        jvm_path.getFileSystem(sc._jsc.hadoopConfiguration()).delete(jvm_path, True)
    except Exception as e:  # pragma: no cover - best effort clean-up
        log.warning("could not delete checkpoint files %s: %s", path, e)


# --------------------------------------------------------------------------
# The modes


@register
class CVB0(Mode):
    """Batch CVB0 (Asuncion et al. 2009; Eq. 3 of Foulds et al. 2013)."""

    name = "cvb0"
    second_order = False

    def __init__(self, corpus, params, initial_topic_word=None):
        super().__init__(corpus, params, initial_topic_word)
        self.sc = corpus.train.context
        self.k = params.k
        self.v = corpus.vocab_size
        self.w_eta = self.v * params.eta
        self.n_parts = corpus.n_slices * corpus.parts_per_slice
        self.width = 2 * self.k if self.second_order else self.k
        self.held_broadcasts = []  # unpersisted, destroyed once a checkpoint cuts the lineage
        self.lineage_cut_at = None
        self.checkpoints = 0
        self.checkpointed_rdd = None  # whose files to delete once superseded
        self.lineage_depth = 0
        self.stats_seconds = 0.0
        self.created_checkpoint_root = None  # a temporary directory this mode set
        self.checkpoint_kind, self.checkpoint_dir = self._checkpoint_policy()
        itemsize = self.dtype.itemsize
        self.gamma_bytes = int(corpus.n_train_pairs) * self.k * itemsize
        log.info("%s keeps γ for %d (document, term) pairs × %d topics in %s: %.1f MB "
                 "(%d bytes) in the cached blocks", self.name.upper(), corpus.n_train_pairs,
                 self.k, self.dtype.name, self.gamma_bytes / 1e6, self.gamma_bytes)

        phi_bc = None
        if initial_topic_word is not None:
            from ..model import TopicModel

            phi_bc = self.sc.broadcast(
                TopicModel.topics_from_stats(initial_topic_word, params.eta).astype(self.dtype))
        self.rdd = (corpus.train
                    .mapPartitions(init_task(params.seed, self.v, self.k, self.dtype, phi_bc),
                                   preservesPartitioning=True)
                    .setName(f"sparklda {self.name} γ blocks (initial)")
                    .persist(StorageLevel.MEMORY_AND_DISK))
        if phi_bc is not None:  # the initial blocks' lineage names it: held like a round's
            self.held_broadcasts.append((-1, phi_bc))
        try:
            merged = self._collect_stats()
        except BaseException:
            self.finish()
            raise
        if phi_bc is not None:
            phi_bc.unpersist()
        self._set_stats(merged.rows)

    # -- checkpoints -----------------------------------------------------
    def _checkpoint_policy(self):
        if not self.params.checkpoint_interval:
            return "none", None
        directory = self.sc.getCheckpointDir()
        if directory:
            return "reliable", directory
        if self.sc.master.startswith("local"):
            self.created_checkpoint_root = tempfile.mkdtemp(prefix="sparklda-checkpoints-")
            self.sc.setCheckpointDir(self.created_checkpoint_root)
            directory = self.sc.getCheckpointDir()
            log.info("no Spark checkpoint directory was set: %s checkpoints its γ blocks every %d "
                     "iterations to %s (set one with spark.sparkContext.setCheckpointDir)",
                     self.name, self.params.checkpoint_interval, directory)
            return "reliable", directory
        log.warning("no Spark checkpoint directory is set on this cluster: %s cuts the lineage "
                    "of its γ blocks with localCheckpoint() (kept on the executors only, lost "
                    "with them); set a reliable one with spark.sparkContext.setCheckpointDir("
                    "'hdfs://...')", self.name)
        return "local", None

    # -- the round plan --------------------------------------------------
    @property
    def rounds_per_pass(self) -> int:
        return 1

    def round_partitions(self, t):
        return list(range(self.n_parts))

    # -- per round -------------------------------------------------------
    def _set_stats(self, rows):
        k = self.k
        self.nphi = np.ascontiguousarray(rows[:, :k])
        self.nz = self.nphi.sum(axis=0)
        if self.second_order:
            self.var_phi = np.ascontiguousarray(rows[:, k:])
            self.var_z = self.var_phi.sum(axis=0)

    def _collect_stats(self) -> TopicStats:
        """Materialise ``self.rdd`` and sum its blocks' statistics on the driver."""
        parts = self.sc.runJob(self.rdd, stats_task(self.second_order))
        s0 = time.perf_counter()
        merged = TopicStats.merge_all(parts).to_dense(self.v)
        self.stats_seconds = time.perf_counter() - s0
        return merged

    def broadcast_value(self, t):
        d = self.dtype
        if self.second_order:
            return (self.nphi.astype(d), self.nz.astype(d), self.var_phi.astype(d),
                    self.var_z.astype(d))
        return self.nphi.astype(d), self.nz.astype(d), None, None

    def make_task(self, bc, t):
        p = self.params
        return sweep_task(bc, p.alpha, p.eta, self.w_eta, self.second_order)

    def execute(self, sc, bc, t):
        old = self.rdd
        new = (old.mapPartitions(self.make_task(bc, t), preservesPartitioning=True)
               .setName(f"sparklda {self.name} γ blocks (iteration {t + 1})")
               .persist(StorageLevel.MEMORY_AND_DISK))
        interval = self.params.checkpoint_interval
        checkpoint = bool(interval) and (t + 1) % interval == 0
        if checkpoint:
            if self.checkpoint_kind == "reliable":
                new.checkpoint()
            else:
                new.localCheckpoint()
        self.rdd = new
        try:
            merged = self._collect_stats()  # computes `new` once, caches (and checkpoints) it
        finally:
            old.unpersist()
        if checkpoint and new.isCheckpointed():
            self.checkpoints += 1
            self.lineage_cut_at = t
            _delete_checkpoint_files(sc, self.checkpointed_rdd)
            self.checkpointed_rdd = new
        debug = new.toDebugString() or b""
        self.lineage_depth = len(debug.decode("utf-8", "replace").splitlines())
        return [merged]

    def update(self, stats, t):
        old = self.nphi
        self._set_stats(stats.rows)
        tokens = float(stats.extra.get("tokens", 0.0))
        self.tokens_seen += tokens
        self.docs_seen += int(stats.extra.get("docs", 0))
        return {
            # the fraction of the tokens' expected topic assignments that moved
            "nphi_change": float(np.abs(self.nphi - old).sum() / (2 * max(tokens, 1.0))),
            "partitions": self.n_parts, "checkpointed": self.lineage_cut_at == t,
            "lineage_depth": self.lineage_depth, "mode_merge_s": self.stats_seconds,
        }

    def release(self, bc, t):
        # Every γ RDD since the last checkpoint refers to its round's broadcast (the
        # checkpointed one too: its serialized PythonRDD still names it, though its data
        # now come from the checkpoint), so those broadcasts are only unpersisted; the
        # older ones are destroyed once a checkpoint has cut the lineage.
        bc.unpersist()
        if self.lineage_cut_at == t:
            for _, held in self.held_broadcasts:
                held.destroy()
            self.held_broadcasts = []
        self.held_broadcasts.append((t, bc))

    def topic_word(self):
        return self.nphi.copy()

    def report(self):
        return {"gamma_bytes": self.gamma_bytes, "gamma_dtype": self.dtype.name,
                "pairs": int(self.corpus.n_train_pairs), "checkpoints": self.checkpoints,
                "checkpoint_interval": self.params.checkpoint_interval,
                "checkpoint_kind": self.checkpoint_kind, "checkpoint_dir": self.checkpoint_dir}

    def finish(self):
        for _, held in self.held_broadcasts:
            held.destroy()
        self.held_broadcasts = []
        rdd = getattr(self, "rdd", None)
        if rdd is not None:
            rdd.unpersist()
        _delete_checkpoint_files(self.sc, self.checkpointed_rdd)
        self.checkpointed_rdd = None
        root = self.created_checkpoint_root
        if root and not any(files for _, _, files in os.walk(root)):
            # nothing left in the temporary directory: remove it (the context keeps it as
            # its checkpoint directory; Spark recreates the folders if it writes there again)
            shutil.rmtree(root, ignore_errors=True)


@register
class CVB(CVB0):
    """CVB with the Gaussian second-order correction (Teh, Newman & Welling
    2007, Eq. 16-18): CVB0 plus the variances Σ m γ(1 − γ) of N^Θ, N^Φ, N^Z."""

    name = "cvb"
    second_order = True
