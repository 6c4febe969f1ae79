"""Draw a synthetic LDA corpus on the executors: ``sparklda-generate OUT --docs N ...``
or ``python -m sparklda generate OUT ...``.

The documents are drawn where they are written: ``spark.range(n_docs,
numPartitions)`` then ``mapInArrow`` (DataFrame API only, so the same code
runs under Spark Connect), each task building the true topics from the seed
(:func:`sparklda.synthetic.true_topics`) and each document from its own
generator seeded by (seed, id) (:func:`sparklda.synthetic.draw_document`).
The output is therefore the same for a given seed and parameters whatever
the number of partitions. The output directory holds

* ``corpus/``: Parquet, ``id`` (long) and ``features`` (a ``pyspark.ml``
  SparseVector of term counts, size V), what :func:`sparklda.corpus.from_vectors`
  and ``[input] format = "parquet"``, ``features_col = "features"`` read;
* ``topics/``: the (K_true, V) true topic-word distributions
  (:meth:`sparklda.storage.SparkFiles.write_arrays`, array ``topics``);
* ``params/``: one JSON line with the generator's parameters, written last.

It is written to a temporary sibling and renamed into place when the session
can rename (classic sessions); under Spark Connect it is written in place,
``params/`` last. See docs/architecture.md, "Synthetic corpora".
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
import uuid
from collections.abc import Iterator
from typing import Any

import numpy as np

from ..errors import ModelPathError
from ..storage import SparkFiles
from ..synthetic import CorpusSpec, draw_documents, topic_cdfs, true_topics

log = logging.getLogger("sparklda.generate")

DESCRIPTION = "Draw a synthetic corpus from the LDA generative process on the executors."

_CDF_CACHE: dict[tuple, np.ndarray] = {}


def _cdf(spec: CorpusSpec) -> np.ndarray:
    key = tuple(spec.to_dict().items())
    if key not in _CDF_CACHE:
        _CDF_CACHE.clear()
        _CDF_CACHE[key] = topic_cdfs(true_topics(spec))
    return _CDF_CACHE[key]


def _arrow_batches(spec: CorpusSpec):
    """mapInArrow function: the ``id`` batches of ``spark.range`` -> (id, features)."""

    def run(batches: Iterator) -> Iterator:
        import pyarrow as pa

        cdf = _cdf(spec)
        for batch in batches:
            ids = batch.column(0).to_numpy().astype(np.int64)
            indptr, terms, counts = draw_documents(
                cdf, ids, spec.alpha, spec.mean_length, spec.seed
            )
            offsets = pa.array(indptr.astype(np.int32), pa.int32())
            features = pa.StructArray.from_arrays(
                [
                    pa.array(np.zeros(len(ids), np.int8), pa.int8()),
                    pa.array(np.full(len(ids), spec.vocab_size, np.int32), pa.int32()),
                    pa.ListArray.from_arrays(offsets, pa.array(terms, pa.int32())),
                    pa.ListArray.from_arrays(offsets, pa.array(counts, pa.float64())),
                ],
                names=["type", "size", "indices", "values"],
            )
            yield pa.RecordBatch.from_arrays(
                [pa.array(ids, pa.int64()), features], names=["id", "features"]
            )

    return run


def corpus_dataframe(spark, spec: CorpusSpec, partitions: int | None = None):
    """The documents as a DataFrame (``id`` long, ``features`` vector), drawn lazily on
    the executors."""
    from pyspark.ml.linalg import VectorUDT
    from pyspark.sql.types import LongType, StructField, StructType

    spec.validate()
    schema = StructType([StructField("id", LongType()), StructField("features", VectorUDT())])
    ids = spark.range(0, spec.n_docs, 1, partitions) if partitions else spark.range(spec.n_docs)
    return ids.mapInArrow(_arrow_batches(spec), schema)


def generate(
    spark, spec: CorpusSpec, out: str, partitions: int | None = None, overwrite: bool = False
) -> dict[str, Any]:
    """Draw the corpus of ``spec`` and write it under ``out`` (see the module docstring).
    Refuses an existing ``out`` unless ``overwrite``. Returns the written parameters."""
    spec.validate()
    files = SparkFiles(spark)
    out = out.rstrip("/")
    if files.exists(out):
        if not overwrite:
            raise ModelPathError(
                f"The output directory {out!r} already exists; pass --overwrite to replace it."
            )
        if files.connect:
            raise ModelPathError(
                f"The output directory {out!r} already exists and a Spark Connect session "
                "cannot delete it; remove it or choose another."
            )
    files.check_writable(out)
    can_rename = not files.connect
    target = f"{out}.tmp-{uuid.uuid4().hex[:8]}" if can_rename else out
    t0 = time.perf_counter()
    topics = true_topics(spec)
    corpus_dataframe(spark, spec, partitions).write.mode("error").parquet(f"{target}/corpus")
    files.write_arrays(f"{target}/topics", {"topics": topics})
    info = {
        "kind": "sparklda.SyntheticCorpus",
        "spec": spec.to_dict(),
        "partitions": partitions,
        "seconds": time.perf_counter() - t0,
    }
    files.write_json(f"{target}/params", info)
    if can_rename:
        fs, src = files._hadoop(target)
        _, dst = files._hadoop(out)
        if overwrite and fs.exists(dst):
            fs.delete(dst, True)
        if not fs.rename(src, dst):
            raise ModelPathError(f"Could not rename {target!r} to {out!r}.")
    log.info("wrote %d documents to %s in %.1f s", spec.n_docs, out, info["seconds"])
    return info


def read_generated(spark, path: str) -> tuple[CorpusSpec, np.ndarray]:
    """The parameters and the (K_true, V) true topics of a generated corpus at ``path``."""
    files = SparkFiles(spark)
    path = path.rstrip("/")
    info = files.read_json(f"{path}/params")
    topics = files.read_arrays(f"{path}/topics")["topics"]
    return CorpusSpec(**info["spec"]), topics


def parser(prog: str | None = None) -> argparse.ArgumentParser:
    d = CorpusSpec()
    p = argparse.ArgumentParser(prog=prog, description=DESCRIPTION)
    p.add_argument("out", help="output directory (any Spark file system)")
    p.add_argument("--docs", type=int, default=d.n_docs, help="number of documents")
    p.add_argument("--vocab", type=int, default=d.vocab_size, help="vocabulary size V")
    p.add_argument("--topics", type=int, default=d.k_true, help="number of true topics K")
    p.add_argument("--alpha", type=float, default=d.alpha, help="document-topic Dirichlet α")
    p.add_argument(
        "--mean-length", type=float, default=d.mean_length, help="Poisson mean document length"
    )
    p.add_argument(
        "--zipf", type=float, default=d.zipf_exponent, help="exponent of the Zipfian base"
    )
    p.add_argument(
        "--boost-fraction",
        type=float,
        default=d.boost_fraction,
        help="share of the vocabulary each topic boosts",
    )
    p.add_argument("--boost", type=float, default=d.boost, help="factor of a boosted term")
    p.add_argument(
        "--concentration",
        type=float,
        default=d.topic_concentration,
        help="shape of the per-term Gamma noise of each topic (smaller: spikier)",
    )
    p.add_argument("--seed", type=int, default=d.seed)
    p.add_argument("--partitions", type=int, default=None, help="tasks (default: Spark's)")
    p.add_argument("--overwrite", action="store_true", help="replace an existing output")
    p.add_argument("--master", help="Spark master with plain python (default local[2])")
    p.add_argument("--log-level", default="INFO")
    return p


def main(argv=None, prog: str | None = None) -> int:
    """``sparklda-generate``: bad parameters fail before Spark starts (exit 2)."""
    from .job import error, setup_logging
    from .session import build_session

    args = parser(prog).parse_args(argv)
    setup_logging(args.log_level)
    spec = CorpusSpec(
        n_docs=args.docs,
        vocab_size=args.vocab,
        k_true=args.topics,
        alpha=args.alpha,
        mean_length=args.mean_length,
        zipf_exponent=args.zipf,
        boost_fraction=args.boost_fraction,
        boost=args.boost,
        topic_concentration=args.concentration,
        seed=args.seed,
    )
    try:
        spec.validate()
        if args.partitions is not None and args.partitions < 1:
            raise ValueError(f"--partitions must be at least 1; got {args.partitions}.")
    except ValueError as e:
        return error(e)
    spark = build_session({}, args.master, "sparklda-generate")
    try:
        info = generate(spark, spec, args.out, args.partitions, args.overwrite)
    except (ValueError, FileExistsError) as e:
        return error(e)
    finally:
        spark.stop()
    print(
        f"wrote {spec.n_docs} documents (V={spec.vocab_size}, K_true={spec.k_true}) to "
        f"{args.out} in {info['seconds']:.1f} s"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
