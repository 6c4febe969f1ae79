"""The trained model: topic-word statistics, priors, vocabulary, metadata.

Its persistence (a committed directory written through Spark,
:mod:`sparklda.storage`) and its read-only uses:
topics, topic distributions of new documents (fold-in on executors) and
held-out evaluation. Every mode produces this same class.
"""

from __future__ import annotations

import datetime as _dt

import numpy as np

from ._version import __version__
from .coherence import coherence as _coherence
from .errors import ModelFormatError, SparkLDAError, executor_errors
from .evaluation import heldout_loglik
from .execution.topics import ShardedTopics, driver_model_limit
from .inference import transform_dataframe
from .stats import normalize_topics
from .storage import CommittedDir, SparkFiles, literal_path, parse_json

FORMAT = "sparklda.TopicModel"
#: 3: α may be a list (a learned asymmetric α); 2: committed versions written through Spark
#: (sparklda.storage); 1: metadata.json and topics.parquet written with pyarrow. A model
#: with a symmetric α is still written as format 2 (α a number), which older sparklda reads.
FORMAT_VERSION = 3
#: The format-1 files, read by load and removed by the next save.
LEGACY_FILES = ("metadata.json", "topics.parquet")


class TopicModel:
    """An LDA model: N^Φ-style statistics (V, K) with α, η and a vocabulary.

    The point estimate of the topics is φ̂_kw = (N^Φ_wk + η) / (N^Z_k + Wη)
    with N^Z = Σ_w N^Φ_w (Eq. 12-style, Foulds et al. 2013); SVB's λ is
    stored as λ − η so the same formula gives λ / Σλ. ``alpha`` is kept as a
    K-vector (float64): a number given is repeated, a learned α is asymmetric.

    ``topic_word`` is the (V, K) array, or a
    :class:`~sparklda.execution.topics.ShardedTopics` held on the executors (a model
    trained with ``model_placement="executors"``, or loaded above
    ``spark.sparklda.driver.maxModelBytes``): then topics, fold-in, scores, coherence
    and saving run on the shards, and only :attr:`topic_word` and
    :meth:`topics_matrix` collect them, below that property (docs/architecture.md,
    "The model on the executors").
    """

    def __init__(self, topic_word, alpha, eta: float, vocab=None, metadata=None):
        #: the statistics held on the executors (a model trained with
        #: model_placement="executors", or loaded above MAX_DRIVER_MODEL_CONF), else None
        self.shards: ShardedTopics | None = None
        self._topic_word: np.ndarray | None = None
        if isinstance(topic_word, ShardedTopics):
            self.shards = topic_word
        else:
            self._topic_word = np.asarray(topic_word, dtype=np.float64)
            if self._topic_word.ndim != 2:
                raise ValueError("topic_word must be a (vocabulary size, k) matrix")
        k = self.k
        a = np.asarray(alpha, dtype=np.float64)
        if a.ndim == 0:
            a = np.full(k, float(a))
        if a.shape != (k,):
            raise ValueError(
                f"alpha must be a number or a vector of k={k} values, got shape {a.shape}"
            )
        self.alpha = a
        self.eta = float(eta)
        self.vocab = list(vocab) if vocab is not None else None
        if self.vocab is not None and len(self.vocab) != self.vocab_size:
            raise ValueError(
                f"vocabulary has {len(self.vocab)} terms but the model has {self.vocab_size} rows"
            )
        self.metadata = dict(metadata or {})

    @property
    def sharded(self) -> bool:
        """Whether the statistics are held on the executors (:attr:`shards`)."""
        return self.shards is not None

    @property
    def statistics(self) -> np.ndarray | ShardedTopics:
        """The statistics as held: the (V, K) array, or the shards."""
        if self.shards is not None:
            return self.shards
        assert self._topic_word is not None
        return self._topic_word

    @property
    def topic_word(self) -> np.ndarray:
        """The (V, K) statistics; a sharded model's are collected, which is refused above
        the Spark property ``spark.sparklda.driver.maxModelBytes``
        (:func:`~sparklda.execution.topics.driver_model_limit`)."""
        if self.shards is not None:
            return self.shards.collect(what="The model's topic-word statistics")
        assert self._topic_word is not None
        return self._topic_word

    @property
    def k(self) -> int:
        return self.statistics.shape[1]

    @property
    def vocab_size(self) -> int:
        return self.statistics.shape[0]

    @property
    def symmetric_alpha(self) -> bool:
        """Whether every topic has the same α."""
        return bool(np.all(self.alpha == self.alpha[0]))

    def _alpha_arg(self):
        """α for fold-in: the number when symmetric, else the K-vector."""
        return float(self.alpha[0]) if self.symmetric_alpha else self.alpha

    def topics_matrix(self) -> np.ndarray:
        """φ̂ as a (V, K) matrix whose column k is topic k's distribution over terms (a
        sharded model's is collected only up to ``spark.sparklda.driver.maxModelBytes``)."""
        if self.shards is not None:
            return normalize_topics(self.shards.collect(what="The topics matrix"), self.eta)
        return normalize_topics(self.topic_word, self.eta)

    def phi(self) -> np.ndarray | ShardedTopics:
        """φ̂ where the statistics are: the array, or computed on the shards."""
        return self.shards.phi(self.eta) if self.shards is not None else self.topics_matrix()

    def describe_topics(self, max_terms: int = 10) -> list[dict]:
        """Top terms per topic: dicts of topic, termIndices, termWeights, terms."""
        if not isinstance(max_terms, int) or max_terms < 1:
            raise ValueError(
                f"The 'maxTermsPerTopic' parameter must be an int in the range "
                f"[1, inf). Got {max_terms!r} instead."
            )
        n = min(max_terms, self.vocab_size)
        if self.shards is not None:  # each shard's top terms, merged (no V×K collect)
            top, weights = self.shards.phi(self.eta).top_terms(n)
        else:
            phi = self.topics_matrix()
            top = np.stack([np.argsort(-phi[:, k], kind="stable")[:n] for k in range(self.k)])
            weights = np.take_along_axis(phi.T, top, axis=1)
        return [
            {
                "topic": k,
                "termIndices": [int(i) for i in top[k]],
                "termWeights": [float(w) for w in weights[k]],
                "terms": [self.vocab[i] for i in top[k]] if self.vocab else None,
            }
            for k in range(self.k)
        ]

    def format_topics(self, max_terms: int = 10) -> str:
        lines = []
        for t in self.describe_topics(max_terms):
            words = t["terms"] or [str(i) for i in t["termIndices"]]
            lines.append(f"topic {t['topic']:3d}: " + " ".join(words))
        return "\n".join(lines)

    # -- uses on Spark ---------------------------------------------------
    def evaluate(
        self,
        heldout_rdd,
        max_iter: int = 100,
        evaluator: str = "completion",
        particles: int = 10,
        seed: int = 0,
    ):
        """Held-out score (:mod:`sparklda.evaluation`): document completion, or with
        ``evaluator="left_to_right"`` the left-to-right estimate of the whole documents
        (``particles`` per document, random streams keyed by ``seed``)."""
        return heldout_loglik(
            heldout_rdd,
            self.phi(),
            self._alpha_arg(),
            evaluator,
            particles,
            seed,
            max_iter,
        )

    def coherence(
        self,
        data,
        measure: str = "u_mass",
        top_n: int = 10,
        features_col: str = "features",
        tokens_col: str | None = None,
        window: int | None = None,
    ) -> list[float]:
        """Coherence of each topic's ``top_n`` terms on ``data``, in topic order.

        ``data``: a DataFrame of term-count vectors (``features_col``) or of token
        arrays (``tokens_col``, matched to the vocabulary), or a
        :class:`~sparklda.corpus.DocSource`. ``measure``: ``"u_mass"`` (document
        co-occurrence) or ``"c_npmi"`` (boolean sliding windows of ``window`` tokens,
        default 10, over ``tokens_col``; whole documents when there are only vectors).
        The definitions are gensim's; counting runs on Spark
        (:mod:`sparklda.coherence`, docs/architecture.md "Topic coherence").
        """
        top = self.shards.phi(self.eta).top_terms(top_n)[0] if self.shards is not None else None
        return _coherence(
            self.topics_matrix() if top is None else None,
            data,
            measure,
            top_n,
            features_col=features_col,
            tokens_col=tokens_col,
            vocab=self.vocab,
            window=window,
            top_indices=top,
        )

    def transform(
        self,
        df,
        features_col: str = "features",
        output_col: str = "topicDistribution",
        max_iter: int = 100,
    ):
        """Append a vector column of each document's topic distribution θ.

        Fold-in runs on the executors (:func:`sparklda.kernels.foldin_block`)
        with the topics fixed. Terms outside the model's vocabulary are not
        allowed (an error names them); documents with no terms get the
        uniform vector 1/K (the prior mean).
        """
        return transform_dataframe(
            self.phi(), self._alpha_arg(), df, features_col, output_col, max_iter
        )

    def pyldavis_inputs(
        self,
        df,
        features_col: str = "features",
        max_iter: int = 100,
    ) -> dict:
        """The five inputs of ``pyLDAvis.prepare`` for the documents of ``df``, computed on
        Spark: ``topic_term_dists`` (K × V, rows summing to one), ``doc_topic_dists``
        (D × K, each document's θ by fold-in, in the order of ``df``), ``doc_lengths``
        (tokens per document), ``vocab`` and ``term_frequency`` (tokens per term over
        ``df``). Use as ``pyLDAvis.prepare(**model.pyldavis_inputs(df))``."""
        import pyarrow as pa

        if self.shards is not None:  # refused before any work when too large to collect
            self.shards.check_collect(None, "The topics matrix (pyLDAvis's topic_term_dists)")
        theta_col = "_sparklda_theta"
        scored = self.transform(df, features_col, theta_col, max_iter).select(
            theta_col, features_col
        )
        v = self.vocab_size

        def per_document(batches):
            for batch in batches:
                theta = batch.column(0).field("values").to_pylist()
                feats = batch.column(1)
                values = feats.field("values").to_pylist()
                valid = feats.is_valid().to_numpy(zero_copy_only=False)
                lengths = [
                    float(np.sum(values[i], dtype=np.float64)) if valid[i] and values[i] else 0.0
                    for i in range(len(values))
                ]
                yield pa.RecordBatch.from_arrays(
                    [pa.array(theta, pa.list_(pa.float64())), pa.array(lengths, pa.float64())],
                    names=["theta", "length"],
                )

        def term_totals(batches):
            total = np.zeros(v, np.float64)
            for batch in batches:
                feats = batch.column(0)
                types = feats.field("type").to_numpy(zero_copy_only=False)
                indices = feats.field("indices").to_pylist()
                values = feats.field("values").to_pylist()
                for i in range(len(feats)):
                    if values[i] is None:
                        continue
                    val = np.asarray(values[i], np.float64)
                    if types[i] == 1:
                        total += val
                    else:
                        np.add.at(total, np.asarray(indices[i], np.int64), val)
            yield pa.RecordBatch.from_arrays(
                [pa.array([total], pa.list_(pa.float64()))], names=["total"]
            )

        with executor_errors(f"column {features_col!r}"):
            rows = scored.mapInArrow(per_document, "theta array<double>, length double").collect()
            totals = df.select(features_col).mapInArrow(term_totals, "total array<double>")
            tf = np.zeros(v, np.float64)
            for r in totals.collect():  # driver-side sum in partition order
                tf += np.asarray(r.total, np.float64)
        k = self.k
        doc_topic = np.array([r.theta for r in rows], np.float64).reshape(len(rows), k)
        return {
            "topic_term_dists": np.ascontiguousarray(self.topics_matrix().T),
            "doc_topic_dists": doc_topic,
            "doc_lengths": np.array([r.length for r in rows], np.float64),
            "vocab": list(self.vocab) if self.vocab is not None else [str(i) for i in range(v)],
            "term_frequency": tf,
        }

    # -- persistence -----------------------------------------------------
    def metadata_record(self) -> dict:
        """What ``metadata`` of a saved model holds (format, K, V, α, η, versions, ...)."""
        import pyspark

        return {
            "format": FORMAT,
            "format_version": 2 if self.symmetric_alpha else FORMAT_VERSION,
            "k": self.k,
            "vocab_size": self.vocab_size,
            "alpha": self._alpha_arg() if self.symmetric_alpha else self.alpha.tolist(),
            "eta": self.eta,
            "has_vocab": self.vocab is not None,
            "sparklda_version": __version__,
            "spark_version": pyspark.__version__,
            "created": _dt.datetime.now(_dt.UTC).isoformat(),
            **{k: v for k, v in self.metadata.items() if k not in ("k", "vocab_size")},
        }

    def check_finite(self) -> None:
        """Raise :class:`~sparklda.errors.SparkLDAError` if a statistic is not finite."""
        if self.shards is not None:
            count, first = self.shards.count_nonfinite()
        else:
            bad = ~np.isfinite(self.topic_word)
            count, first = int(bad.sum()), (tuple(np.argwhere(bad)[0]) if bad.any() else None)
        if count:
            w, k = first
            raise SparkLDAError(
                f"The model's topic-word statistics have {count} "
                f"non-finite values (first: term {w}, topic {k}); training "
                f"diverged and the model is not saved."
            )
        if not (np.all(np.isfinite(self.alpha)) and np.isfinite(self.eta)):
            raise SparkLDAError(
                f"The model's priors are not finite (alpha={self.alpha.tolist()}, "
                f"eta={self.eta}); the model is not saved."
            )

    @staticmethod
    def check_save_target(path: str, overwrite: bool = False, spark=None) -> None:
        """Raise :class:`~sparklda.errors.ModelPathError` now if :meth:`save` to ``path``
        would be refused (an existing model without ``overwrite``, a directory that is not
        a sparklda model, a parent that is a file, a directory that cannot be written)."""
        CommittedDir(path, FORMAT, spark).check_target(overwrite, "model", legacy=LEGACY_FILES)

    def save(self, path: str, overwrite: bool = False, spark=None) -> None:
        """Save to the directory ``path`` on any file system Spark reaches, atomically.

        The model is written through Spark's writers as a new version of
        ``path`` and committed last (:mod:`sparklda.storage`): a reader sees the
        previous complete model or the new one, never a half-written one, and a
        crash mid-save leaves the previous model in place. ``overwrite=False``
        refuses an existing model; ``overwrite=True`` still refuses a directory
        that is not a sparklda model. ``spark`` defaults to the active session.
        """
        self.check_finite()
        target = CommittedDir(path, FORMAT, spark)
        info = {"k": self.k, "vocab_size": self.vocab_size}
        with target.write(
            info, overwrite=overwrite, legacy=LEGACY_FILES, extra=LEGACY_FILES
        ) as staged:
            self.write_payload(staged.path, spark)

    def write_payload(self, base: str, spark=None) -> None:
        """Write ``base/metadata`` and ``base/topics`` (no commit: the caller commits the
        directory that holds them; :meth:`load` reads ``base`` as a format-1 model)."""
        self.check_finite()
        files = SparkFiles(spark)
        files.write_json(f"{base}/metadata", self.metadata_record())
        if self.shards is not None:  # written by the executors, shard by shard
            table = self.shards.table(files.spark, self.vocab)
            table.write.mode("error").parquet(f"{base}/topics")
        else:
            files.write_table(f"{base}/topics", self._topics_table())

    def _topics_table(self):
        import pyarrow as pa

        v, k = self.topic_word.shape
        return pa.table(
            {
                "term_index": pa.array(np.arange(v, dtype=np.int32)),
                "term": pa.array(
                    self.vocab if self.vocab is not None else [None] * v, type=pa.string()
                ),
                "topic_word": pa.ListArray.from_arrays(
                    pa.array(np.arange(0, v * k + 1, k, dtype=np.int32)),
                    pa.array(self.topic_word.ravel()),
                ),
            }
        )

    @staticmethod
    def exists_at(path: str, spark=None) -> bool:
        """Whether a sparklda TopicModel (committed, or in the format-1 layout) is at ``path``."""
        target = CommittedDir(path, FORMAT, spark)
        if target.latest() is not None:
            return True
        files = target.files
        if files.exists(f"{target.root}/{LEGACY_FILES[0]}"):
            return True
        return files.exists(f"{target.root}/metadata") and files.exists(f"{target.root}/topics")

    @classmethod
    def load(cls, path: str, spark=None, max_driver_bytes: int | None = None) -> TopicModel:
        """Load the model saved at ``path`` (the newest committed version; the format-1
        layout of ``metadata.json`` and ``topics.parquet`` is read too). A damaged or
        foreign directory raises :class:`~sparklda.errors.ModelFormatError` naming the
        file and what is wrong; nothing read is ever executed (JSON and Parquet only).

        A model whose statistics (8·V·K bytes) exceed ``max_driver_bytes`` (default: the
        Spark property ``spark.sparklda.driver.maxModelBytes``, 1 GiB when unset) stays
        on the executors, sharded by term (:attr:`shards`; a classic session)."""
        target = CommittedDir(path, FORMAT, spark)
        files = target.files
        latest = target.latest()
        if latest is not None:
            base = latest.path(target.root)
            meta_file, topics_file = f"{base}/metadata", f"{base}/topics"
            meta = files.read_json(meta_file)
        elif files.exists(f"{target.root}/{LEGACY_FILES[0]}"):
            meta_file = f"{target.root}/{LEGACY_FILES[0]}"
            topics_file = f"{target.root}/{LEGACY_FILES[1]}"
            rows = files.spark.read.text(literal_path(meta_file), wholetext=True).collect()
            meta = parse_json(rows[0][0] if rows else "", repr(meta_file))
        elif files.exists(f"{target.root}/metadata") and files.exists(f"{target.root}/topics"):
            # a payload inside a version
            meta_file, topics_file = f"{target.root}/metadata", f"{target.root}/topics"
            meta = files.read_json(meta_file)
        else:
            raise FileNotFoundError(f"No sparklda model at {path!r} (no committed version).")
        k = _check_metadata(meta, path, meta_file)
        limit = driver_model_limit(files.spark) if max_driver_bytes is None else max_driver_bytes
        v = meta.get("vocab_size")
        if v is not None and 8 * v * k > limit and not files.connect:
            return cls._load_sharded(files, meta, k, path, meta_file, topics_file)
        table = files.read_table(topics_file)
        tw, vocab = _topics_from_table(table, k, meta, path, topics_file)
        alpha, eta = meta.pop("alpha"), meta.pop("eta")
        try:
            return cls(tw, alpha, eta, vocab, meta)
        except (TypeError, ValueError) as e:
            raise ModelFormatError(
                f"The model at {path!r} is damaged ({meta_file!r}): {e}"
            ) from None

    @classmethod
    def _load_sharded(cls, files, meta: dict, k: int, path: str, meta_file: str, topics_file):
        frame = files._read_parquet(topics_file)
        v = int(meta["vocab_size"])
        n = files.spark.sparkContext.defaultParallelism
        shards = ShardedTopics.from_table(frame, v, k, n, topics_file)
        vocab = None
        if meta.get("has_vocab"):
            rows = frame.select("term_index", "term").orderBy("term_index").collect()
            vocab = [r[1] for r in rows]
        alpha, eta = meta.pop("alpha"), meta.pop("eta")
        try:
            return cls(shards, alpha, eta, vocab, meta)
        except (TypeError, ValueError) as e:
            shards.unpersist()
            raise ModelFormatError(
                f"The model at {path!r} is damaged ({meta_file!r}): {e}"
            ) from None


def _is_number(x) -> bool:
    return isinstance(x, int | float) and not isinstance(x, bool) and bool(np.isfinite(x))


def _check_metadata(meta, path: str, where: str) -> int:
    """K from the metadata record ``meta`` read at ``where``, after checking every field
    :meth:`TopicModel.load` uses; :class:`ModelFormatError` naming what is wrong."""

    def bad(what: str) -> ModelFormatError:
        return ModelFormatError(f"The model at {path!r} is damaged: {where!r} {what}.")

    if not isinstance(meta, dict):
        raise bad(f"holds a JSON {type(meta).__name__}, not the metadata object")
    if "format" in meta and meta["format"] != FORMAT:
        raise bad(f"names the format {meta['format']!r}, not {FORMAT!r}")
    version = meta.get("format_version", 0)
    if not isinstance(version, int) or isinstance(version, bool) or version < 0:
        raise bad(f"has the format version {version!r}; expected an integer")
    if version > FORMAT_VERSION:
        raise ModelFormatError(
            f"The model at {path!r} has format version {version}; this sparklda reads up to "
            f"{FORMAT_VERSION}."
        )
    k = meta.get("k")
    if not isinstance(k, int) or isinstance(k, bool) or k < 1:
        raise bad(f"has k = {k!r}; expected the number of topics, an integer >= 1")
    v = meta.get("vocab_size")
    if v is not None and (not isinstance(v, int) or isinstance(v, bool) or v < 1):
        raise bad(f"has vocab_size = {v!r}; expected an integer >= 1")
    alpha = meta.get("alpha")
    ok = _is_number(alpha) or (
        isinstance(alpha, list) and len(alpha) == k and all(_is_number(a) for a in alpha)
    )
    if not ok:
        raise bad(f"has alpha = {str(alpha)[:60]!r}; expected a number or a list of k={k}")
    if not _is_number(meta.get("eta")):
        raise bad(f"has eta = {str(meta.get('eta'))[:60]!r}; expected a number")
    return k


def _topics_from_table(table, k: int, meta: dict, path: str, where: str):
    """(topic-word matrix, vocabulary or None) from the topics table read at ``where``,
    checked against the metadata's K and vocabulary size."""
    import pyarrow as pa

    def bad(what: str) -> ModelFormatError:
        return ModelFormatError(f"The model at {path!r} is damaged: {where!r} {what}.")

    missing = {"term_index", "term", "topic_word"} - set(table.column_names)
    if missing:
        raise bad(f"has no column {sorted(missing)}")
    if not pa.types.is_list(table.schema.field("topic_word").type) and not pa.types.is_large_list(
        table.schema.field("topic_word").type
    ):
        raise bad("has a 'topic_word' column that is not a list of numbers")
    table = table.sort_by("term_index")
    rows = table.num_rows
    v = meta.get("vocab_size")
    if v is not None and rows != v:
        raise bad(f"has {rows} terms but the metadata says vocab_size = {v}")
    lists = table.column("topic_word").combine_chunks()
    lengths = pa.compute.list_value_length(lists).to_numpy(zero_copy_only=False)
    if rows == 0 or lists.null_count or np.any(lengths != k):
        wrong = sorted({int(n) for n in lengths if n != k})[:3] if rows else []
        raise bad(f"does not hold k={k} weights for each of its {rows} terms (found {wrong})")
    idx = table.column("term_index").to_numpy()
    if not np.array_equal(idx, np.arange(rows)):
        raise bad(f"does not number its terms 0..{rows - 1}")
    tw = np.asarray(lists.flatten().to_numpy(zero_copy_only=False), dtype=np.float64)
    vocab = table.column("term").to_pylist() if meta.get("has_vocab") else None
    if vocab is not None and any(t is None for t in vocab):
        raise bad("lacks the term of some row though the metadata says it has a vocabulary")
    return tw.reshape(rows, k), vocab
