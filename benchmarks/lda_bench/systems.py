"""The systems the benchmark runs, each scored by the same completion code.

Every runner takes a :class:`~benchmarks.lda_bench.data.BenchCorpus` (one cached
training DataFrame, one cached held-out RDD) and returns *points*: dicts with
``system``, ``passes``, ``elapsed_s`` (wall seconds of training counted from
the start of the system's ``fit``, evaluation excluded) and the held-out
score of :func:`sparklda.evaluation.completion_loglik` with the benchmark's
one α for folding in.

* sparklda modes (:mod:`benchmarks.lda_bench.suite`): one
  :func:`sparklda.api.fit` per mode on every document, holding out the same
  documents itself (``heldout_count`` and ``seed``), held-out quality every
  few rounds (``TrainParams.eval_every``; evaluation is off the clock).
* Spark MLlib's online LDA (``pyspark.ml.clustering.LDA``): one fit per
  number of passes (MLlib has no callback and no warm start), timed from
  the call to ``fit`` to its return; φ̂ = ``topicsMatrix()`` (λ, V×K) with
  columns normalised.
* gensim's ``LdaMulticore`` when gensim is importable: the training
  documents are collected to the driver (not timed: gensim is not a Spark
  system), one model trained pass by pass, scored after each.
"""

from __future__ import annotations

import logging
import math
import time

import numpy as np

from sparklda.evaluation import completion_loglik, normalize_topics

log = logging.getLogger("benchmarks")

#: MLlib online LDA variants. "default" leaves every optimizer setting at
#: Spark's default (learningOffset 1024, learningDecay 0.51, subsamplingRate
#: 0.05, α and η = 1/K, α re-estimated). "tuned" is the best of a grid on KOS
#: K=50 after 5 passes (learningOffset 10/64/256/1024 × learningDecay
#: 0.51/0.7 × subsamplingRate 0.05/0.2; docs/benchmarks.md): a larger
#: minibatch fraction (fewer full scans of the corpus per pass) and a much
#: shorter learning-rate offset, so early minibatches weigh more.
MLLIB_VARIANTS = {
    "mllib-online-default": {},
    "mllib-online-tuned": {"subsamplingRate": 0.2, "learningOffset": 10.0, "learningDecay": 0.51},
}


def _score(bcorpus, phi, alpha, foldin_max_iter=100):
    t = time.perf_counter()
    s = completion_loglik(bcorpus.heldout, phi, alpha, foldin_max_iter)
    return {**s.as_dict(), "eval_s": time.perf_counter() - t}


def eval_interval(rounds_per_pass: int, per_pass: int = 4) -> int:
    """The largest divisor d of ``rounds_per_pass`` with at least ``per_pass``
    evaluations per pass (every round when a pass has fewer rounds), so that
    an evaluation falls on every pass boundary."""
    rpp = max(1, int(rounds_per_pass))
    if rpp <= per_pass:
        return 1
    return max(d for d in range(1, rpp + 1) if rpp % d == 0 and rpp // d >= per_pass)


def broadcast_bytes(bcorpus, params, result) -> dict:
    """Bytes broadcast per round (the mode reports them as ``broadcast_bytes``)."""
    sizes = [r["broadcast_bytes"] for r in result.rounds if "broadcast_bytes" in r]
    if not sizes:
        return {}
    rpp = max(1, math.ceil(bcorpus.n_train_docs / params.minibatch_size))
    first, later = sizes[:rpp], sizes[rpp:]
    return {
        "first_pass_median": float(np.median(first)),
        "later_median": float(np.median(later)) if later else None,
        "max": float(np.max(sizes)),
    }


def _mllib_model_phi(model) -> np.ndarray:
    return normalize_topics(model.topicsMatrix().toArray())


def run_mllib(
    bcorpus, variant: str, k: int, pass_points, alpha: float = 0.1, seed: int = 0
) -> dict:
    """Fit ``pyspark.ml.clustering.LDA`` (online) once per number of passes."""
    from pyspark.ml.clustering import LDA

    settings = dict(MLLIB_VARIANTS[variant])
    rate = float(settings.get("subsamplingRate", 0.05))
    points, fits = [], []
    for p in sorted(set(float(x) for x in pass_points)):
        max_iter = max(1, round(p / rate))
        lda = LDA(
            k=k, maxIter=max_iter, seed=seed, optimizer="online", featuresCol="features", **settings
        )
        t0 = time.perf_counter()
        model = lda.fit(bcorpus.train_df)
        elapsed = time.perf_counter() - t0
        phi = _mllib_model_phi(model)
        score = _score(bcorpus, phi, alpha)
        est_alpha = float(np.mean(model.estimatedDocConcentration().toArray()))
        points.append(
            {
                "system": variant,
                "corpus": bcorpus.name,
                "k": k,
                "passes": max_iter * rate,
                "round": max_iter,
                "elapsed_s": elapsed,
                "heldout_loglik": score["heldout_loglik"],
                "perplexity": score["perplexity"],
                "eval_s": score["eval_s"],
                "mllib_estimated_alpha": est_alpha,
            }
        )
        fits.append({"max_iter": max_iter, "seconds": elapsed})
        log.info(
            "%s: %.2f passes (%d iterations) in %.1f s: held-out %.4f",
            variant,
            max_iter * rate,
            max_iter,
            elapsed,
            score["heldout_loglik"],
        )
    return {
        "points": points,
        "settings": {"optimizer": "online", "subsamplingRate": rate, **settings},
        "fits": fits,
    }


def gensim_available() -> bool:
    try:
        import gensim  # noqa: F401
    except Exception:
        return False
    return True


def run_gensim(
    bcorpus, k: int, passes: int, alpha: float = 0.1, seed: int = 0, workers: int = 1
) -> dict:
    """gensim ``LdaMulticore`` on the same training documents, scored after each pass.

    The documents are collected to the driver first (not timed). Training is
    resumed pass by pass (``update`` with the model's own state), so the
    clock covers only gensim's own work.
    """
    from gensim.models import LdaMulticore

    docs = (
        bcorpus.train_df.select("features")
        .rdd.map(lambda r: list(zip(r[0].indices.tolist(), r[0].values.tolist(), strict=False)))
        .collect()
    )
    id2word = {
        i: (bcorpus.vocab[i] if bcorpus.vocab else str(i)) for i in range(bcorpus.vocab_size)
    }
    points = []
    elapsed = 0.0
    t0 = time.perf_counter()
    model = LdaMulticore(
        corpus=None,
        id2word=id2word,
        num_topics=k,
        workers=workers,
        random_state=seed,
        alpha=alpha,
        eta=0.01,
        chunksize=2000,
        passes=1,
    )
    elapsed += time.perf_counter() - t0
    for p in range(1, passes + 1):
        t0 = time.perf_counter()
        model.update(docs)  # one pass: LdaMulticore.update takes the model's passes (1)
        elapsed += time.perf_counter() - t0
        phi = normalize_topics(model.get_topics(), topic_axis=0)
        score = _score(bcorpus, phi, alpha)
        points.append(
            {
                "system": "gensim-ldamulticore",
                "corpus": bcorpus.name,
                "k": k,
                "passes": float(p),
                "round": p,
                "elapsed_s": elapsed,
                "heldout_loglik": score["heldout_loglik"],
                "perplexity": score["perplexity"],
                "eval_s": score["eval_s"],
            }
        )
    return {"points": points, "settings": {"workers": workers, "chunksize": 2000}}
