"""Library entry points over Spark: train from any input, transform a DataFrame.

The library never builds a SparkSession: callers pass ``spark`` or a DataFrame.
"""

from __future__ import annotations

import functools
import logging
import threading
import time
from collections.abc import Sequence

import numpy as np

from .corpus import DocSource, from_text, from_vectors, load_text_dataframe, read_uci
from .errors import CorpusError, executor_errors
from .execution import Backend, backend_for
from .inference import transform_dataframe
from .kernels.warm import settle_heap, warm
from .limits import check_model_memory
from .model import TopicModel
from .modes import MODES
from .params import TrainParams
from .training import Callback, TrainResult, check_placement, train
from .warmstart import align_initial

__all__ = [
    "Callback",
    "TrainResult",
    "fit",
    "source_from_config",
    "transform",
    "transform_dataframe",
]

log = logging.getLogger("sparklda")


def fit(
    source: DocSource,
    params: TrainParams,
    initial_model=None,
    callbacks: Sequence[Callback] = (),
    resume: bool = False,
) -> TrainResult:
    """Validate ``params`` and the documents, build the corpus and train.

    Parameters
    ----------
    source : the documents (:func:`~sparklda.corpus.read_uci`,
        :func:`~sparklda.corpus.from_vectors`, :func:`~sparklda.corpus.from_text`).
    params : the training parameters, validated before any Spark job runs.
        Held-out documents come from ``heldout_count``/``heldout_fraction``
        and ``seed``; :func:`sparklda.corpus.split_documents` gives the same
        split for scoring other systems on the same documents.
    initial_model : a :class:`~sparklda.model.TopicModel` to warm-start from;
        its vocabulary is merged with the corpus's
        (:func:`sparklda.warmstart.align_initial`).
    callbacks : :class:`~sparklda.training.Callback` objects, told when the
        corpus building starts and ends, when training starts, after each round
        and evaluation, and when training ends; any of them may stop training
        early (:class:`sparklda.progress.Progress` shows progress,
        :class:`sparklda.coherence.CorpusCoherence` scores the topics on the
        training documents).
    resume : continue a killed run from the newest checkpoint in
        ``params.checkpoint_dir`` (written every ``checkpoint_interval`` rounds
        and/or ``checkpoint_seconds``); the model then equals the one the
        uninterrupted run would have produced.

    Elapsed times in the result count from the start of this call, so corpus
    building (block layout and caching) is included.
    """
    start = time.perf_counter()
    params.validate()
    initial = None
    if initial_model is not None:
        source, initial = align_initial(initial_model, source, params)
    # before any allocation
    check_model_memory(source.vocab_size, params.k, params.dtype, placement=params.model_placement)
    for cb in callbacks:
        hook = getattr(cb, "on_build_start", None)
        if hook is not None:
            hook(source.what)
    backend = source_backend(source, params)
    check_placement(backend.name, params)  # before the corpus is built

    def on_phase(phase: str, counts: dict) -> None:
        for cb in callbacks:
            hook = getattr(cb, "on_build_phase", None)
            if hook is not None:
                hook(phase, counts)

    # the kernels' compiled code loaded while the corpus is built: on the driver in a
    # thread, in the workers by the job that caches the blocks (docs/architecture.md,
    # "Startup: kernels compile once per machine")
    mode = MODES[params.algorithm]
    task_kernels = mode.task_kernels
    if params.heldout_fraction or params.heldout_count:
        task_kernels += ("inference",)
        if params.evaluator == "left_to_right":
            task_kernels += ("left_to_right",)
    driver_warm = threading.Thread(
        target=_warm_driver, args=(mode.driver_kernels, params.dtype), daemon=True
    )
    driver_warm.start()
    corpus = backend.build_corpus(
        source,
        minibatch_size=params.minibatch_size,
        heldout_fraction=params.heldout_fraction,
        heldout_count=params.heldout_count or None,
        seed=params.seed,
        parts_per_slice=params.parts_per_slice or None,
        dtype=np.dtype(params.dtype),
        on_phase=on_phase,
        warm=functools.partial(warm_worker, task_kernels, params.dtype),
        batch_layout=mode.batch_layout,
    )
    driver_warm.join()
    try:
        for cb in callbacks:
            hook = getattr(cb, "on_corpus", None)
            if hook is not None:
                hook(corpus)
        build_seconds = time.perf_counter() - start
        log.info("corpus built in %.2f s: %s", build_seconds, corpus.report)
        with executor_errors(source.what):
            result = train(
                corpus, params, initial, callbacks=callbacks, clock_start=start, resume=resume
            )
    finally:
        backend.release(corpus)
    result.report["corpus_build_seconds"] = build_seconds
    return result


def _warm_driver(names: tuple[str, ...], dtype: str) -> None:
    try:
        log.debug("driver kernels loaded in %.2f s", warm(names, dtype))
    except Exception:  # a failure here shows again, with its context, where the kernel runs
        log.debug("loading the driver's kernels ahead of training failed", exc_info=True)


def source_backend(source: DocSource, params: TrainParams) -> Backend:
    """The backend ``fit`` trains ``source`` on: ``params.execution`` in the session the
    source was read in ("auto": the DataFrame backend under Spark Connect)."""
    return backend_for(source.spark, params.execution, source.what)


def warm_worker(names: tuple[str, ...], dtype: str) -> float:
    """In a Python worker (a task of the corpus-building job): the modes imported (with
    this module: what the rounds' pickled kernels refer to) and the kernel groups
    ``names`` loaded for ``dtype`` (:func:`sparklda.kernels.warm.warm`), so the first
    round's tasks find them ready; the seconds it took."""
    seconds = warm(names, dtype)
    settle_heap()
    return seconds


def transform(
    model: TopicModel,
    df,
    features_col: str = "features",
    output_col: str = "topicDistribution",
    max_iter: int = 100,
):
    """``df`` with a column of each document's topic distribution under ``model``.

    Lazy, like any DataFrame transformation: the vectors' size is checked here
    (:func:`~sparklda.inference.transform_dataframe`), other bad documents
    raise at the action, inside :func:`sparklda.errors.executor_errors` as
    :class:`~sparklda.errors.CorpusError`."""
    return transform_dataframe(model.phi(), model.alpha, df, features_col, output_col, max_iter)


def source_from_config(spark, cfg: dict) -> DocSource:
    """A :class:`DocSource` from the ``[input]`` table of a job config. A path that does
    not exist is a :class:`CorpusError` naming it and the ``[input]`` keys."""
    named = [f"input.{k} = {cfg[k]!r}" for k in ("docword", "vocab", "path") if cfg.get(k)]
    with executor_errors(", ".join(named) or None):
        return _source_from_config(spark, cfg)


def _source_from_config(spark, cfg: dict) -> DocSource:
    fmt = cfg.get("format", "uci")
    if fmt == "uci":
        if "docword" not in cfg:
            raise CorpusError(
                "input.format = 'uci' needs input.docword (path of docword.txt[.gz])."
            )
        return read_uci(spark, cfg["docword"], cfg.get("vocab"), encoding=cfg.get("encoding"))
    if fmt in ("text", "json", "parquet"):
        if "path" not in cfg:
            raise CorpusError(f"input.format = {fmt!r} needs input.path.")
        df = load_text_dataframe(
            spark, cfg["path"], fmt, cfg.get("text_col", "text"), cfg.get("encoding")
        )
        opts = {
            k: cfg[k] for k in ("vocab_size", "min_df", "max_df", "min_token_length") if k in cfg
        }
        if fmt == "parquet" and cfg.get("features_col"):
            return from_vectors(df, cfg["features_col"], cfg.get("id_col"))
        return from_text(df, cfg.get("text_col", "text"), cfg.get("id_col"), **opts)
    raise CorpusError(
        f"The 'input.format' parameter must be one of 'uci', 'text', 'json', "
        f"'parquet'; got {fmt!r}."
    )
