"""The trained model: topic-word statistics, priors, vocabulary, metadata.

Its persistence (a directory written atomically) and its read-only uses:
topics, topic distributions of new documents (fold-in on executors) and
held-out evaluation. Every mode produces this same class.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import uuid

import numpy as np

from .evaluation import completion_loglik
from .inference import transform_dataframe
from .stats import normalize_topics
from ._version import __version__
from .io import filesystem as _filesystem
from .io import fs_exists as _exists

FORMAT_VERSION = 1


class TopicModel:
    """An LDA model: N^Φ-style statistics (V, K) with α, η and a vocabulary.

    The point estimate of the topics is φ̂_kw = (N^Φ_wk + η) / (N^Z_k + Wη)
    with N^Z = Σ_w N^Φ_w (Eq. 12-style, Foulds et al. 2013); SVB's λ is
    stored as λ − η so the same formula gives λ / Σλ.
    """

    def __init__(self, topic_word, alpha: float, eta: float, vocab=None, metadata=None):
        self.topic_word = np.asarray(topic_word, dtype=np.float64)
        if self.topic_word.ndim != 2:
            raise ValueError("topic_word must be a (vocabulary size, k) matrix")
        self.alpha = float(alpha)
        self.eta = float(eta)
        self.vocab = list(vocab) if vocab is not None else None
        if self.vocab is not None and len(self.vocab) != self.vocab_size:
            raise ValueError(f"vocabulary has {len(self.vocab)} terms but the model has "
                             f"{self.vocab_size} rows")
        self.metadata = dict(metadata or {})

    @property
    def k(self) -> int:
        return self.topic_word.shape[1]

    @property
    def vocab_size(self) -> int:
        return self.topic_word.shape[0]

    def topics_matrix(self) -> np.ndarray:
        """φ̂ as a (V, K) matrix whose column k is topic k's distribution over terms."""
        return normalize_topics(self.topic_word, self.eta)

    def describe_topics(self, max_terms: int = 10) -> list[dict]:
        """Top terms per topic: dicts of topic, termIndices, termWeights, terms."""
        if not isinstance(max_terms, int) or max_terms < 1:
            raise ValueError(f"The 'maxTermsPerTopic' parameter must be an int in the range "
                             f"[1, inf). Got {max_terms!r} instead.")
        phi = self.topics_matrix()
        n = min(max_terms, self.vocab_size)
        out = []
        for k in range(self.k):
            idx = np.argsort(-phi[:, k], kind="stable")[:n]
            out.append({"topic": k, "termIndices": [int(i) for i in idx],
                        "termWeights": [float(phi[i, k]) for i in idx],
                        "terms": [self.vocab[i] for i in idx] if self.vocab else None})
        return out

    def format_topics(self, max_terms: int = 10) -> str:
        lines = []
        for t in self.describe_topics(max_terms):
            words = t["terms"] or [str(i) for i in t["termIndices"]]
            lines.append(f"topic {t['topic']:3d}: " + " ".join(words))
        return "\n".join(lines)

    # -- uses on Spark ---------------------------------------------------
    def evaluate(self, heldout_rdd, max_iter: int = 100):
        """Held-out document-completion score (:mod:`sparklda.evaluation`)."""
        return completion_loglik(heldout_rdd, self.topics_matrix(), self.alpha, max_iter)

    def transform(self, df, features_col: str = "features",
                  output_col: str = "topicDistribution", max_iter: int = 100):
        """Append a vector column of each document's topic distribution θ.

        Fold-in runs on the executors (:func:`sparklda.kernels.foldin_block`)
        with the topics fixed. Terms outside the model's vocabulary are not
        allowed (an error names them); documents with no terms get the
        uniform vector 1/K (the prior mean).
        """
        return transform_dataframe(self.topics_matrix(), self.alpha, df, features_col,
                                   output_col, max_iter)

    # -- persistence -----------------------------------------------------
    def save(self, path: str, overwrite: bool = False) -> None:
        """Write ``path/metadata.json`` and ``path/topics.parquet`` atomically.

        Everything is written to a temporary sibling directory first and moved
        into place once complete, so a crash never leaves a half-written model
        where a good one was.
        """
        import pyarrow as pa
        import pyarrow.parquet as pq

        filesystem, target = _filesystem(path)
        if _exists(filesystem, target) and not overwrite:
            raise FileExistsError(f"{path!r} already exists; pass overwrite=True to replace it.")
        parent = os.path.dirname(target.rstrip("/")) or "."
        tmp = f"{parent}/.{os.path.basename(target.rstrip('/'))}.tmp-{uuid.uuid4().hex}"
        filesystem.create_dir(tmp, recursive=True)
        try:
            import pyspark

            meta = {
                "format": "sparklda.TopicModel", "format_version": FORMAT_VERSION,
                "k": self.k, "vocab_size": self.vocab_size, "alpha": self.alpha, "eta": self.eta,
                "has_vocab": self.vocab is not None,
                "sparklda_version": __version__, "spark_version": pyspark.__version__,
                "created": _dt.datetime.now(_dt.timezone.utc).isoformat(),
                **{k: v for k, v in self.metadata.items() if k not in ("k", "vocab_size")},
            }
            with filesystem.open_output_stream(f"{tmp}/metadata.json") as f:
                f.write(json.dumps(meta, indent=1, default=_json_default).encode())
            k = self.k
            table = pa.table({
                "term_index": pa.array(np.arange(self.vocab_size, dtype=np.int32)),
                "term": pa.array(self.vocab if self.vocab is not None else [None] * self.vocab_size,
                                 type=pa.string()),
                "topic_word": pa.FixedSizeListArray.from_arrays(
                    pa.array(self.topic_word.ravel()), k),
            })
            pq.write_table(table, f"{tmp}/topics.parquet", filesystem=filesystem)
            if _exists(filesystem, target):
                old = f"{tmp}.old"
                filesystem.move(target, old)
                filesystem.move(tmp, target)
                filesystem.delete_dir(old)
            else:
                filesystem.move(tmp, target)
        except BaseException:
            if _exists(filesystem, tmp):
                filesystem.delete_dir(tmp)
            raise

    @classmethod
    def load(cls, path: str) -> "TopicModel":
        import pyarrow.parquet as pq

        filesystem, target = _filesystem(path)
        if not _exists(filesystem, f"{target}/metadata.json"):
            raise FileNotFoundError(f"No sparklda model at {path!r} (no metadata.json).")
        with filesystem.open_input_stream(f"{target}/metadata.json") as f:
            meta = json.loads(f.read().decode())
        if meta.get("format_version", 0) > FORMAT_VERSION:
            raise ValueError(f"The model at {path!r} has format version {meta['format_version']}; "
                             f"this sparklda reads up to {FORMAT_VERSION}.")
        table = pq.read_table(f"{target}/topics.parquet", filesystem=filesystem)
        k = int(meta["k"])
        tw = table.column("topic_word").combine_chunks().flatten().to_numpy().reshape(-1, k)
        vocab = table.column("term").to_pylist() if meta.get("has_vocab") else None
        alpha, eta = meta.pop("alpha"), meta.pop("eta")
        return cls(tw, alpha, eta, vocab, meta)


def _json_default(o):
    if isinstance(o, np.generic):
        return o.item()
    if isinstance(o, np.ndarray):
        return o.tolist()
    raise TypeError(f"not JSON serialisable: {type(o)}")
