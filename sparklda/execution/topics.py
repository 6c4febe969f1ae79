"""Topic-word statistics held on the executors, sharded by term (a trained model that
never reaches the driver; docs/architecture.md, "The model on the executors").

:class:`ShardedTopics` is an RDD with one partition per term shard
(:func:`~sparklda.stats.shard_bounds`), each holding one ``(shard, first term, rows)``
with ``rows`` the shard's (terms, K) float64 statistics, plus the O(K) column sums on
the driver. What reads the model runs where the rows live:

* the rows of φ̂ (:meth:`ShardedTopics.phi`: (N^Φ + η) / Σ_w (N^Φ_w + η), the sums
  taken shard by shard);
* the top terms of each topic (:meth:`ShardedTopics.top_terms`: each shard's top N,
  merged on the driver in the order a stable sort of the whole column gives);
* the held-out score and fold-in (:meth:`ShardedTopics.serve`): each partition of the
  data asks the shards for the rows of its terms, as a round's tasks do
  (:mod:`sparklda.execution.sharded`), and the tasks read them through
  :class:`SparseRows`;
* saving and checkpoints: the rows written shard by shard, in chunks
  (:meth:`ShardedTopics.write_chunks`, :func:`read_chunks`).

Collecting the V×K array (:meth:`ShardedTopics.collect`) is refused above
:data:`MAX_DRIVER_MODEL_CONF` (:func:`driver_model_limit`).
"""

from __future__ import annotations

import io
from collections.abc import Callable, Iterable, Iterator

import numpy as np

from ..errors import ModelFormatError, SparkLDAError
from ..limits import format_bytes
from ..stats import shard_bounds
from .scoring import HeldoutScore, LeftToRight, alpha_arg, score_blocks

__all__ = [
    "DEFAULT_MAX_DRIVER_MODEL_BYTES",
    "MAX_DRIVER_MODEL_CONF",
    "ShardedTopics",
    "SparseRows",
    "driver_model_limit",
    "read_chunks",
]

#: A Spark property (a size: "2g", or bytes) giving the largest topic-word matrix (8·V·K
#: bytes) sparklda brings to the driver: a model loaded above it stays sharded on the
#: executors, and collecting a sharded model above it (``topic_word``,
#: ``topics_matrix``/``topicsMatrix``, ``toPyLDAvis``) is refused.
MAX_DRIVER_MODEL_CONF = "spark.sparklda.driver.maxModelBytes"
#: Its value when the session does not set it: 1 GiB (V×K up to 134 million).
DEFAULT_MAX_DRIVER_MODEL_BYTES = 1 << 30
#: The largest piece of a shard written as one Parquet cell (checkpoints).
CHUNK_BYTES = 32 << 20


def driver_model_limit(spark=None) -> int:
    """:data:`MAX_DRIVER_MODEL_CONF` of ``spark`` (default: the active session), in bytes;
    :data:`DEFAULT_MAX_DRIVER_MODEL_BYTES` when it is not set."""
    from pyspark.sql import SparkSession

    from .classic import size_bytes

    spark = spark or SparkSession.getActiveSession()
    value = None
    if spark is not None:
        try:
            value = spark.conf.get(MAX_DRIVER_MODEL_CONF, None)
        except Exception:  # a session that cannot say
            value = None
    return size_bytes(value) if value else DEFAULT_MAX_DRIVER_MODEL_BYTES


class SparseRows:
    """The rows of some terms of a (V, K) matrix, indexed by global term ids like the
    whole array (``rows[terms]``) for the terms it holds (sorted ``terms``)."""

    def __init__(self, terms: np.ndarray, rows: np.ndarray):
        self.terms = np.asarray(terms, dtype=np.int64)
        self.rows = rows

    def __getitem__(self, terms) -> np.ndarray:
        return self.rows[np.searchsorted(self.terms, np.asarray(terms, dtype=np.int64))]


def _shard_partition(s: int) -> int:
    return s


def _cut(terms: np.ndarray, bounds: np.ndarray) -> Iterator[tuple[int, np.ndarray]]:
    """``terms`` (sorted) cut by shard: ``(shard, its terms)`` for the non-empty pieces."""
    cuts = np.searchsorted(terms, bounds, side="left")
    for s in range(len(bounds) - 1):
        lo, hi = int(cuts[s]), int(cuts[s + 1])
        if hi > lo:
            yield s, terms[lo:hi]


class ShardedTopics:
    """A (V, K) float64 matrix held on the executors: ``rdd`` of ``(shard, first term,
    rows)``, one per partition, shard ``s`` in partition ``s`` covering the terms
    ``bounds[s] <= w < bounds[s + 1]`` (module docstring)."""

    def __init__(self, rdd, vocab_size: int, k: int, bounds: np.ndarray):
        self.rdd = rdd
        self.vocab_size = int(vocab_size)
        self.k = int(k)
        self.bounds = np.asarray(bounds, dtype=np.int64)
        self._sums: np.ndarray | None = None

    @property
    def shape(self) -> tuple[int, int]:
        return self.vocab_size, self.k

    @property
    def n_shards(self) -> int:
        return len(self.bounds) - 1

    @property
    def nbytes(self) -> int:
        """The bytes of the whole matrix in float64 (8·V·K)."""
        return 8 * self.vocab_size * self.k

    def map_rows(self, fn: Callable[[int, np.ndarray], np.ndarray]) -> ShardedTopics:
        """The matrix whose shard is ``fn(first term, rows)`` (lazy)."""
        rdd = self.rdd.map(lambda e: (e[0], e[1], fn(e[1], e[2])), preservesPartitioning=True)
        return ShardedTopics(rdd, self.vocab_size, self.k, self.bounds)

    def recut(self, n_shards: int) -> ShardedTopics:
        """The same matrix in ``n_shards`` shards (itself when it has that many; lazy)."""
        bounds = shard_bounds(self.vocab_size, n_shards)
        if np.array_equal(bounds, self.bounds):
            return self
        rdd = _recut(self.rdd.map(lambda e: (e[1], e[2])), bounds, self.k)
        return ShardedTopics(rdd, self.vocab_size, self.k, bounds)

    def extended(self, vocab_size: int) -> ShardedTopics:
        """The matrix with zero rows appended up to ``vocab_size`` terms (a warm start's
        new terms), in as many shards (lazy)."""
        v, k = self.vocab_size, self.k
        if vocab_size == v:
            return self
        sc = self.rdd.context
        zeros = sc.parallelize([(v, vocab_size - v)], 1).map(lambda e: (e[0], np.zeros((e[1], k))))
        chunks = self.rdd.map(lambda e: (e[1], e[2])).union(zeros)
        bounds = shard_bounds(vocab_size, self.n_shards)
        return ShardedTopics(_recut(chunks, bounds, k), vocab_size, k, bounds)

    def persist(self, name: str) -> ShardedTopics:
        """Persist the shards (memory and disk) and compute them once (their column sums)."""
        from pyspark import StorageLevel

        self.rdd = self.rdd.setName(name).persist(StorageLevel.MEMORY_AND_DISK)
        self.column_sums()
        return self

    def unpersist(self) -> None:
        self.rdd.unpersist()

    def _per_shard(self, fn: Callable[[int, np.ndarray], object]) -> list:
        """``fn(first term, rows)`` of every shard, in shard order (one job)."""
        out = self.rdd.map(lambda e: (e[0], fn(e[1], e[2]))).collect()
        return [v for _, v in sorted(out, key=lambda e: e[0])]

    def column_sums(self) -> np.ndarray:
        """Σ_w of the rows per topic (K,), summed shard by shard in shard order (per
        column of the rows: a stateful mode's checkpointed rows may be wider than K)."""
        if self._sums is None:
            sums = self._per_shard(lambda lo, rows: rows.sum(axis=0))
            total = np.zeros(sums[0].shape if sums else self.k)
            for col in sums:
                total = total + col
            self._sums = total
        return self._sums

    def collect(self, limit: int | None = None, what: str = "The topic-word matrix") -> np.ndarray:
        """The (V, K) matrix on the driver; refused (:class:`SparkLDAError`) when it is
        larger than ``limit`` bytes (default: :func:`driver_model_limit`)."""
        self.check_collect(limit, what)
        pieces = self._per_shard(lambda lo, rows: rows)
        return np.concatenate(pieces) if pieces else np.zeros((0, self.k))

    def check_collect(self, limit: int | None = None, what: str = "The topic-word matrix") -> None:
        """Refuse (:class:`SparkLDAError`, naming the bytes and the setting) to collect
        more than ``limit`` bytes (default: :func:`driver_model_limit`)."""
        limit = driver_model_limit() if limit is None else int(limit)
        if self.nbytes > limit:
            raise SparkLDAError(
                f"{what} is held on the executors and has {self.nbytes} bytes "
                f"({format_bytes(self.nbytes)}: V={self.vocab_size} x K={self.k} float64), "
                f"more than the {limit} bytes the driver may collect; raise the Spark "
                f"property {MAX_DRIVER_MODEL_CONF} (e.g. spark.conf.set("
                f"{MAX_DRIVER_MODEL_CONF!r}, '{_ceil_gib(self.nbytes)}g')) to collect it, or "
                f"use what runs on the executors (describe_topics, transform, evaluate, "
                f"save)."
            )

    def phi(self, eta: float) -> ShardedTopics:
        """φ̂ = (N^Φ + η) normalised per topic (:func:`~sparklda.stats.normalize_topics`),
        the denominators summed shard by shard (one small job)."""
        eta = float(eta)
        totals = np.zeros(self.k)
        for col in self._per_shard(lambda lo, rows: (rows + eta).sum(axis=0)):
            totals = totals + col

        def norm(lo, rows):
            return (rows + eta) / totals

        return self.map_rows(norm)

    def top_terms(self, n: int) -> tuple[np.ndarray, np.ndarray]:
        """(indices, weights), each (K, n'), n' = min(n, V): each column's ``n`` largest
        values, best first, ties in term order (a stable sort of the whole column)."""
        n = min(int(n), self.vocab_size)
        k = self.k

        def best(lo, rows):
            m = min(n, len(rows))
            idx = np.stack([np.argsort(-rows[:, j], kind="stable")[:m] for j in range(k)])
            return idx + lo, np.take_along_axis(rows.T, idx, axis=1)

        pieces = self._per_shard(best)
        cand = np.concatenate([p[0] for p in pieces], axis=1)
        weights = np.concatenate([p[1] for p in pieces], axis=1)
        out_idx = np.empty((k, n), np.int64)
        out_w = np.empty((k, n))
        for j in range(k):
            order = np.lexsort((cand[j], -weights[j]))[:n]
            out_idx[j], out_w[j] = cand[j][order], weights[j][order]
        return out_idx, out_w

    def count_nonfinite(self) -> tuple[int, tuple[int, int] | None]:
        """(non-finite values, (term, topic) of the first or None)."""

        def bad(lo, rows):
            where = np.argwhere(~np.isfinite(rows))
            return len(where), (
                None if not len(where) else (int(where[0][0]) + lo, int(where[0][1]))
            )

        found = self._per_shard(bad)
        total = sum(c for c, _ in found)
        first = next((f for c, f in found if c), None)
        return total, first

    # -- rows served to the partitions of other data ------------------------------
    def serve(self, data, terms_of: Callable[[list], np.ndarray]):
        """``data`` (an RDD) zipped with the rows each of its partitions needs:
        ``(items of the partition, SparseRows of the terms terms_of(items) gives)`` per
        partition. Each partition's term list, cut by shard, is a request; each shard
        answers its requests; a shuffle brings each partition its rows (no broadcast)."""
        bounds, n, k = self.bounds, self.n_shards, self.k
        parts = data.getNumPartitions()

        def requests(index, items):
            terms = np.unique(np.asarray(terms_of(list(items)), dtype=np.int64))
            for s, piece in _cut(terms, bounds):
                yield s, (index, piece)

        def answer(pair):
            asked, shards = pair
            for _, lo, rows in shards:
                for _, (p, terms) in asked:
                    yield p, (int(terms[0]), terms, rows[terms - lo])

        def join(pair):
            items, got = pair
            got = sorted((g for _, g in got), key=lambda g: g[0])
            if got:
                terms = np.concatenate([g[1] for g in got])
                rows = np.concatenate([g[2] for g in got])
            else:
                terms, rows = np.zeros(0, np.int64), np.zeros((0, k))
            return items, SparseRows(terms, rows)

        served = (
            data.mapPartitionsWithIndex(requests)
            .partitionBy(n, _shard_partition)
            .glom()
            .zip(self.rdd.glom())
            .flatMap(answer)
            .partitionBy(parts, _shard_partition)
        )
        return data.glom().zip(served.glom()).map(join)

    def score(
        self, heldout, alpha, max_iter: int = 100, tol: float = 1e-4, ltr: LeftToRight | None = None
    ) -> HeldoutScore:
        """The held-out score of an RDD of :class:`~sparklda.block.HeldoutBlock` s against
        these rows taken as φ̂ (:meth:`phi`): :func:`~sparklda.execution.scoring.score_blocks`
        on each partition with the rows of its blocks' terms."""
        alpha = alpha_arg(alpha)

        def terms_of(blocks):
            parts = [b.observed.terms for b in blocks] + [b.target.terms for b in blocks]
            return np.concatenate(parts) if parts else np.zeros(0, np.int64)

        def run(pair):
            blocks, rows = pair
            return score_blocks(rows, blocks, alpha, max_iter, tol, ltr)

        return HeldoutScore.from_parts(self.serve(heldout, terms_of).map(run).collect())

    # -- persistence -------------------------------------------------------------
    def table(self, spark, vocab: list | None):
        """A DataFrame of ``term_index`` (int), ``term`` (string, null without a
        vocabulary) and ``topic_word`` (array<double>): the model's ``topics`` table,
        built on the executors shard by shard."""
        sc = self.rdd.context
        b = self.bounds
        names = sc.parallelize(
            [None if vocab is None else vocab[b[s] : b[s + 1]] for s in range(self.n_shards)],
            self.n_shards,
        )

        def rows(pair):
            (_, lo, block), terms = pair
            for i, row in enumerate(block.tolist()):  # Python floats, the same values
                yield lo + i, None if terms is None else terms[i], row

        data = self.rdd.zip(names).flatMap(rows)
        return spark.createDataFrame(data, "term_index int, term string, topic_word array<double>")

    @classmethod
    def from_table(cls, frame, vocab_size: int, k: int, n_shards: int, where: str):
        """The shards of a ``topics`` table (:meth:`table`) of ``vocab_size`` terms and
        ``k`` values each; :class:`ModelFormatError` naming ``where`` when its terms are
        not numbered 0..V-1 or a row lacks its k values."""
        bounds = shard_bounds(vocab_size, n_shards)
        n = len(bounds) - 1

        def key(r):
            w = int(r[0])
            return int(np.searchsorted(bounds, w, side="right")) - 1, (w, r[1])

        def build(index, pairs):
            got = sorted(p for _, p in pairs)
            lo, hi = int(bounds[index]), int(bounds[index + 1])
            ok = [w for w, _ in got] == list(range(lo, hi)) and all(
                row is not None and len(row) == k for _, row in got
            )
            rows = np.array([row for _, row in got], np.float64) if ok else np.zeros((0, k))
            yield index, lo, rows.reshape(-1, k), ok

        raw = (
            frame.select("term_index", "topic_word")
            .rdd.filter(lambda r: r[0] is not None and 0 <= r[0] < vocab_size)
            .map(key)
            .partitionBy(n, _shard_partition)
            .mapPartitionsWithIndex(build)
        )
        from pyspark import StorageLevel

        raw.persist(StorageLevel.MEMORY_AND_DISK)
        checks = raw.map(lambda e: (e[0], e[3], e[2].sum(axis=0))).collect()
        if not all(ok for _, ok, _ in checks):
            raw.unpersist()
            raise ModelFormatError(
                f"{where!r} does not hold k={k} weights for each of the terms 0..{vocab_size - 1}."
            )
        out = cls(raw.map(lambda e: e[:3], preservesPartitioning=True), vocab_size, k, bounds)
        total = np.zeros(k)
        for _, _, col in sorted(checks, key=lambda e: e[0]):
            total = total + col
        out._sums = total
        out.persist("sparklda model shards (loaded)")
        raw.unpersist()
        return out

    def write_chunks(self, spark, path: str) -> None:
        """The rows, bit for bit, as Parquet at ``path``: ``(first term, rows of at most
        :data:`CHUNK_BYTES` as np.save bytes)`` written by the executors."""

        def chunks(e):
            _, lo, rows = e
            step = max(1, CHUNK_BYTES // (8 * max(rows.shape[1], 1)))  # wider rows: CVB's
            for i in range(0, len(rows), step):
                buf = io.BytesIO()
                np.save(buf, np.ascontiguousarray(rows[i : i + step]), allow_pickle=False)
                yield lo + i, bytearray(buf.getvalue())

        data = self.rdd.flatMap(chunks)
        spark.createDataFrame(data, "first long, rows binary").write.mode("error").parquet(path)


def read_chunks(spark, path: str, vocab_size: int, k: int, n_shards: int | None) -> ShardedTopics:
    """The rows :meth:`ShardedTopics.write_chunks` wrote at ``path``, cut into ``n_shards``
    shards (:func:`~sparklda.stats.shard_bounds`; any number: the rows are re-cut),
    persisted."""
    bounds = shard_bounds(vocab_size, n_shards or spark.sparkContext.defaultParallelism)

    def load(r):
        return int(r[0]), np.load(io.BytesIO(bytes(r[1])), allow_pickle=False)

    rdd = _recut(spark.read.parquet(path).rdd.map(load), bounds, k)
    return ShardedTopics(rdd, vocab_size, k, bounds).persist("sparklda model shards (restored)")


def _recut(chunks, bounds: np.ndarray, k: int):
    """An RDD of ``(first term, rows)`` covering 0..V-1 cut into the shards of
    ``bounds``: ``(shard, first term, rows)`` in partition ``shard``."""
    n = len(bounds) - 1

    def pieces(chunk):
        first, rows = chunk
        last = first + len(rows)
        s = int(np.searchsorted(bounds, first, side="right")) - 1
        while s < n and int(bounds[s]) < last:
            lo, hi = max(first, int(bounds[s])), min(last, int(bounds[s + 1]))
            yield s, (lo, rows[lo - first : hi - first])
            s += 1

    def build(index, items: Iterable):
        got = sorted((p for _, p in items), key=lambda p: p[0])
        lo = int(bounds[index])
        rows = np.concatenate([r for _, r in got]) if got else np.zeros((0, k))
        if len(rows) != int(bounds[index + 1]) - lo:
            raise ValueError(f"the rows of terms {lo}.. are incomplete")
        yield index, lo, rows

    return (
        chunks.flatMap(pieces)
        .partitionBy(n, _shard_partition)
        .mapPartitionsWithIndex(build, preservesPartitioning=True)
    )


def _ceil_gib(n: int) -> int:
    return -(-int(n) // (1 << 30))
