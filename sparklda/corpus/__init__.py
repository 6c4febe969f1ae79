"""Reading every input form into cached document blocks, with validation.

Inputs (each becomes a :class:`DocSource`, the documents ``(doc_id, term_ids,
counts)`` plus the vocabulary):

* UCI bag-of-words files: :func:`read_uci`;
* a DataFrame with a Spark ML vector column of term counts: :func:`from_vectors`;
* raw text (DataFrame or text / JSON lines / Parquet files), tokenised and
  counted with Spark ML's ``RegexTokenizer``, ``StopWordsRemover`` and
  ``CountVectorizer``: :func:`from_text`.

:func:`build_corpus` validates the documents on the driver's behalf before any
training job runs, holds out a seeded set of whole documents, and lays the
training documents out so that a round touches only its own partitions: the
corpus is cut into ``n_slices`` minibatch slices of ``parts_per_slice``
partitions each, and round ``t`` runs tasks on one slice's partitions only.

The package's modules, each one job (lower ones never import higher ones):

* :mod:`.build`: :func:`build_corpus`, the one skeleton of corpus building;
* :mod:`.layout` (RDDs: the executors' layout and the driver-laid one) and
  :mod:`.frame` (DataFrames, Spark Connect): the layouts it takes as a strategy
  (:mod:`.strategy`);
* :mod:`.corpus`: the built :class:`Corpus`; :mod:`.validate`: the validation pass;
  :mod:`.holdout`: the held-out split;
* :mod:`.readers`: the inputs; :mod:`.arrow`: documents as Arrow batches;
  :mod:`.source`: :class:`DocSource`.
"""

from ..errors import CorpusError
from .arrow import (
    DOCS_SCHEMA,
    arrow_batch_rdd,
    docs_from_batch,
    docs_to_batch,
    pack_from_batch,
    pack_to_batch,
)
from .build import BUILD_PHASES, PhaseHook, build_corpus, build_corpus_frame
from .corpus import Corpus, block_measures, block_partitions, slice_bitmaps
from .frame import (
    BLOCKS_SCHEMA,
    HELDOUT_SCHEMA,
    FrameLayout,
    default_parallelism,
    exact_partition_column,
    partition_keys,
)
from .holdout import (
    Holdout,
    heldout_block,
    heldout_blocks,
    heldout_keys,
    heldout_mask,
    holdout_keys_summary,
    holdout_summary,
    known_heldout_docs,
    merge_holdout_keys,
    split_documents,
    tag_packs,
)
from .layout import LOCAL_LAYOUT_MAX_PAIRS, Layout, RddLayout, pruned
from .readers import (
    check_output_column,
    check_vector_column,
    declared_size,
    decode_text,
    from_text,
    from_vectors,
    load_text_dataframe,
    read_uci,
    read_vocab,
    vector_size,
    vector_to_arrays,
    vectors_to_pack,
)
from .source import DocSource, source_packs
from .strategy import CorpusLayout
from .validate import check_counts, validate, validate_and_keep, validate_frame, validate_packs

__all__ = [
    "BLOCKS_SCHEMA",
    "BUILD_PHASES",
    "DOCS_SCHEMA",
    "HELDOUT_SCHEMA",
    "LOCAL_LAYOUT_MAX_PAIRS",
    "Corpus",
    "CorpusError",
    "CorpusLayout",
    "DocSource",
    "FrameLayout",
    "Holdout",
    "Layout",
    "PhaseHook",
    "RddLayout",
    "arrow_batch_rdd",
    "block_measures",
    "block_partitions",
    "build_corpus",
    "build_corpus_frame",
    "check_counts",
    "check_output_column",
    "check_vector_column",
    "declared_size",
    "decode_text",
    "default_parallelism",
    "docs_from_batch",
    "docs_to_batch",
    "exact_partition_column",
    "from_text",
    "from_vectors",
    "heldout_block",
    "heldout_blocks",
    "heldout_keys",
    "heldout_mask",
    "holdout_keys_summary",
    "holdout_summary",
    "known_heldout_docs",
    "load_text_dataframe",
    "merge_holdout_keys",
    "pack_from_batch",
    "pack_to_batch",
    "partition_keys",
    "pruned",
    "read_uci",
    "read_vocab",
    "slice_bitmaps",
    "source_packs",
    "split_documents",
    "tag_packs",
    "validate",
    "validate_and_keep",
    "validate_frame",
    "validate_packs",
    "vector_size",
    "vector_to_arrays",
    "vectors_to_pack",
]
