"""The model on the executors for the stateful modes (CVB0, CVB, MAP: a state per block
between rounds, and each round's merged statistics *replace* N^Φ).

Two persisted RDDs live side by side: the block states (one partition per block of the
training corpus, as under the driver placement: ``(block, state, seconds[, carried
statistics])``) and the model's term shards (:mod:`sparklda.execution.sharded`:
``(shard, first term, rows in float64, None, summary)``). A round:

1. each shard answers the round's requests (the blocks' term lists cut by shard, built
   once and cached) with the mode's round value of its rows (:meth:`fetch_rows`: e.g.
   CVB0's N^Φ rows in the kernels' dtype, the seeded topics' pseudo-counts added), and a
   shuffle brings each block its rows; the O(K) rest of the round value (N^Z + seeds,
   CVB's Var N^Z) travels in the closure: no V-sized broadcast;
2. each block's state is advanced against its rows (``kernel((terms, rows, *small),
   block, state)``) and its statistics counted in the same pass (carried with the new
   state, as :func:`~sparklda.execution.tasks.advance_partition` does);
3. the statistics are combined by term shard (:func:`shard_pieces`,
   :func:`merge_pieces`: the driver placement's merge, the same bits) and each shard
   applies the mode's row update (:meth:`row_step`: CVB0's new rows are the merged
   statistics), giving the next generation of the shard RDD; only its O(K) summary
   (column sums, a learned α's statistics, the change) reaches the driver.

The initial block states are built as under the driver placement and their merged
statistics become the first generation of the shards. Both RDDs are persisted, and
their lineage cut every ``checkpoint_interval`` rounds (10 when 0). See
docs/architecture.md, "The model on the executors".
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator

import numpy as np

from ..kernels.warm import settle_heap
from ..stats import TopicStats, concat_shards
from .base import RoundOutput, value_nbytes
from .checkpointer import PeriodicCheckpointer
from .classic import merge_pieces, shard_pieces
from .sharded import ShardedExecutor, one_per_batch, request_pieces
from .tasks import _pack, _unpack

__all__ = [
    "StatefulShardedExecutor",
    "advance_served",
    "carried_statistics",
    "replace_shard",
    "serve_terms",
]


def _shard_partition(s: int) -> int:
    return s


def _identity(i: int) -> int:
    return i


def serve_terms(fetch: Callable) -> Callable[[tuple], Iterator]:
    """One shard's answer to every block's request (``(requests, shard)``: the shard's
    requests and its model entry): ``(partition, (shard, terms, rows))`` with ``rows =
    fetch(base, local rows, terms)`` (the mode's round value of those terms; ``terms``
    are the global ids)."""

    def run(pair):
        requests, (s, lo, base, _, _) = pair
        for _, (p, terms) in requests:
            t = np.asarray(terms, dtype=np.int64)
            yield p, (s, terms, fetch(base, t - lo, t))

    return run


def advance_served(kernel: Callable, small: tuple, statistics: Callable) -> Callable:
    """A partition's block advanced one round against the rows its shards served: ``(block,
    new state, seconds, (packed statistics, seconds, served bytes))`` for its ``((block,
    state, …), served)``, ``kernel((terms, rows, *small), block, state)``; an empty block
    keeps its state and carries no statistics. A partition holds one block
    (docs/architecture.md, "Corpus layout"; the states and the served rows are zipped
    one element a partition), whose terms the served rows are."""

    def run(pairs: Iterable) -> Iterator:
        settle_heap()
        for (block, state, *_), served in pairs:
            if block.n_docs == 0:
                yield block, state, 0.0, None
                continue
            pieces = sorted((piece for _, piece in served), key=lambda piece: piece[0])
            terms = np.concatenate([np.asarray(pc[1]) for pc in pieces])
            rows = np.concatenate([pc[2] for pc in pieces])
            t0 = time.perf_counter()
            new_state = kernel((terms, rows, *small), block, state)
            kernel_s = time.perf_counter() - t0
            t1 = time.perf_counter()
            packed = _pack(statistics(block, new_state))
            carried = packed, time.perf_counter() - t1, float(rows.nbytes + terms.nbytes)
            yield block, new_state, kernel_s, carried

    return run


def init_carrying(source, init_state: Callable, statistics: Callable) -> Callable:
    """``(block, state, seconds, (packed statistics, seconds))`` for each block, the
    state ``init_state(value, block)`` (``source.value``; None without a source)."""

    def run(blocks: Iterable) -> Iterator:
        settle_heap()
        value = source.value if source is not None else None
        for block in blocks:
            t0 = time.perf_counter()
            state = init_state(value, block)
            seconds = time.perf_counter() - t0
            packed = None
            if block.n_docs:
                t1 = time.perf_counter()
                packed = _pack(statistics(block, state)), time.perf_counter() - t1, 0.0
            yield block, state, seconds, packed

    return run


def carried_statistics(items: Iterable) -> Iterator[TopicStats]:
    """The statistics each non-empty ``(block, state, seconds, carried)`` carries, with
    the block's counts, its seconds and the bytes of rows it was served."""
    for block, _, kernel_s, *carried in items:
        if block.n_docs == 0 or not carried or carried[0] is None:
            continue
        packed, stats_s, served = carried[0]
        yield TopicStats(
            block.terms,
            _unpack(packed),
            extra={
                "tokens": block.n_tokens,
                "docs": block.n_docs,
                "pairs": block.nnz,
                "served_bytes": served,
            },
            timings={"kernel": kernel_s, "stats": stats_s},
        )


def replace_shard(update: Callable, k: int) -> Callable[[tuple], tuple]:
    """A shard's next generation from ``(its model entry, its merged statistics)``:
    ``update(old rows, local terms, merged rows) -> (new rows, summary extras)``
    (``terms``/``rows`` None when no block has a term of the shard); the summary (no
    rows: the round's counts and timings and the update's O(K) extras) travels with it
    to the driver."""

    def run(pair):
        (s, lo, base, _, _), merged = pair
        st = merged[0][1] if merged else None
        extra = dict(st.extra) if st is not None else {}
        timings = dict(st.timings) if st is not None else {}
        terms = None if st is None else np.asarray(st.terms, dtype=np.int64) - lo
        rows = None if st is None else st.rows
        new, extras = update(base, terms, rows)
        extra.update(extras)
        summary = TopicStats(np.zeros(0, np.int32), np.zeros((0, k)), extra, timings)
        return s, lo, new, None, summary

    return run


class StatefulShardedExecutor(ShardedExecutor):
    """Rounds of a stateful mode whose N^Φ lives on the executors (module docstring).
    The mode supplies, besides the stateful contract, ``fetch_rows(t)``, ``row_step(t)``
    (the shard's replacement of its rows), ``round_value(t)`` (the O(K) part only),
    ``initial_rows()`` (after a resume), ``shard_topic_word()`` (its model's rows from a
    shard's: :meth:`topics`, read where they live; ``collect_base`` only when a caller
    asks for the array)."""

    def __init__(self, corpus, checkpoint_interval: int = 0, n_shards: int | None = None):
        super().__init__(corpus, checkpoint_interval, n_shards)
        # the block states' lineage is cut as the shards' (ClassicExecutor.load_states)
        self.checkpoint_interval = self.lineage_interval
        self.state_checkpointer: PeriodicCheckpointer | None = None
        self.keep: Callable | None = None  # the mode's kept_state()
        self.grouped = None  # RDD: each shard's requests, one list a partition

    def _requests(self):
        """The blocks' requests, one list a shard (cached), zipped with the shards."""
        if self.grouped is None:
            self.grouped = (
                one_per_batch(
                    self.corpus.train.mapPartitionsWithIndex(request_pieces(self.bounds))
                    .partitionBy(self.n_shards, _shard_partition)
                    .glom()
                )
                .setName("sparklda model requests (block terms by shard)")
                .cache()
            )
        return self.grouped

    def _states_checkpointer(self, mode) -> PeriodicCheckpointer:
        return PeriodicCheckpointer(self.sc, self.lineage_interval, f"the {mode.name} block states")

    def _combine(self, mode, states, t: int) -> tuple:
        """The statistics the states carry combined by shard into the next generation of
        the model (replacing its rows: ``mode.row_step(t)``, t = −1 for the initial
        states), persisted and computed; the summaries in shard order and whether the
        model's generation was checkpointed."""
        assert self.checkpointer is not None and self.state_checkpointer is not None
        n, k, bounds = self.n_shards, self.k, self.bounds
        merged = (
            states.mapPartitions(carried_statistics)
            .mapPartitionsWithIndex(shard_pieces(bounds))
            .partitionBy(n, _shard_partition)
            .mapPartitions(merge_pieces)
        )
        new = one_per_batch(
            self.model.zip(one_per_batch(merged.glom())).map(replace_shard(mode.row_step(t), k))
        ).setName(f"sparklda {mode.name} model shards ({_generation(t)})")
        marked = self.checkpointer.update(new)
        summaries = new.map(lambda e: (e[0], e[4])).collect()
        self.state_checkpointer.materialized()
        self.checkpointer.materialized()
        self.model = new
        shards = [st for _, st in sorted(summaries, key=lambda e: e[0])]
        return shards, bool(marked and self.checkpointer.last_cut)

    def _skeleton(self):
        """Shards with no rows yet (``base`` of width 0), the first generation's input."""
        bounds = self.bounds

        def empty(s):
            lo, hi = int(bounds[s]), int(bounds[s + 1])
            return s, lo, np.zeros((hi - lo, 0)), None, None

        return one_per_batch(self.sc.parallelize(range(self.n_shards), self.n_shards).map(empty))

    # -- the initial states ------------------------------------------------------
    states_hold_blocks = True

    def _saved_states(self):
        """``(block, kept state)`` pairs: what the mode keeps of a state between rounds
        (:meth:`~sparklda.modes.StatefulMode.kept_state`, MAP's N^Θ), as the driver
        placement's checkpoints hold it."""
        keep = self.keep
        return self.states.map(
            lambda item: (item[0], item[1] if keep is None else keep(item[0], item[1]))
        )

    def init_states(self, mode) -> RoundOutput:
        self.k = int(mode.params.k)
        self.keep = mode.kept_state()
        self.state_checkpointer = self._states_checkpointer(mode)
        self.checkpointer = PeriodicCheckpointer(
            self.sc, self.lineage_interval, f"the {mode.name} model's shards"
        )
        t0 = time.perf_counter()
        value = mode.init_value()  # a warm start's φ̂ (None otherwise)
        bc = self.sc.broadcast(value) if value is not None else None
        t1 = time.perf_counter()
        states = one_per_batch(
            self.corpus.train.mapPartitions(
                init_carrying(bc, mode.init_state(), mode.statistics()),
                preservesPartitioning=True,
            )
        ).setName(f"sparklda {mode.name} block states (initial)")
        self.state_checkpointer.update(states)
        self.states = states
        self.model = self._skeleton()
        self._requests()
        shards, _ = self._combine(mode, states, -1)
        if bc is not None:
            self.state_checkpointer.hold(bc)
        mode.collect_base = self.collect_base
        mode.held_topics = self.topics  # evaluation, checkpoints, the model: the shards
        t2 = time.perf_counter()
        return self._output(shards, {"ship_s": t1 - t0, "job_s": t2 - t1, "release_s": 0.0}, 0)

    def load_states(self, mode, path: str) -> None:
        self.keep = mode.kept_state()
        super().load_states(mode, path)  # the classic executor's, into self.checkpointer
        self.state_checkpointer, self.checkpointer = self.checkpointer, None
        self.k = int(mode.params.k)

    def _output(self, shards: list, timings: dict, served: int) -> RoundOutput:
        stats = concat_shards(shards)
        return RoundOutput(
            [],
            timings=timings,
            shipped_bytes=served,
            driver_bytes=sum(_summary_bytes(st) for st in shards),
            shards=shards,
            tasks=len(stats.timings.get("kernel", [])),
            combine="executors",
        )

    # -- a round ----------------------------------------------------------------
    def run_round(self, mode, t: int) -> RoundOutput:
        if self.model is None:  # resumed: the shards start from the restored N^Φ
            self._start(mode)
        assert self.state_checkpointer is not None
        t0 = time.perf_counter()
        small = tuple(mode.round_value(t))
        parts = mode.round_partitions(t)
        served = (
            self._requests()
            .zip(self.model)
            .flatMap(serve_terms(mode.fetch_rows(t)))
            .partitionBy(len(parts), _identity)
        )
        new_states = one_per_batch(
            self.states.zip(one_per_batch(served.glom())).mapPartitions(
                advance_served(mode.kernel(t), small, mode.statistics()),
                preservesPartitioning=True,
            )
        ).setName(f"sparklda {mode.name} block states (round {t + 1})")
        self.state_checkpointer.update(new_states)
        self.states = new_states
        t1 = time.perf_counter()
        shards, cut = self._combine(mode, new_states, t)
        t2 = time.perf_counter()
        self.since_cut = 0 if cut else self.since_cut + 1
        self._info = {"checkpointed": cut, "lineage_rounds": self.since_cut}
        out = self._output(shards, {"ship_s": t1 - t0, "job_s": t2 - t1, "release_s": 0.0}, 0)
        out.shipped_bytes = value_nbytes(small) + int(
            sum(float(st.extra.get("served_bytes", 0.0)) for st in shards)
        )
        return out

    def report(self) -> dict:
        out = super().report()
        if self.state_checkpointer is not None:
            out["state_checkpoints"] = self.state_checkpointer.checkpoints
        return out

    def close(self) -> None:
        if self.grouped is not None:
            self.grouped.unpersist()
            self.grouped = None
        if self.state_checkpointer is not None:
            self.state_checkpointer.close()
            self.state_checkpointer = None
        super().close()


def _summary_bytes(st: TopicStats) -> int:
    return sum(int(v.nbytes) for v in st.extra.values() if isinstance(v, np.ndarray))


def _generation(t: int) -> str:
    return "initial" if t < 0 else f"round {t + 1}"
