"""Warm start and vocabulary alignment: continue training from a model on a new
or grown corpus, and express new documents in a model's vocabulary.

Term ids are checked before they are used as indices (a negative id would
otherwise wrap around silently), so a bad document fails with a message that
names it instead of training on the wrong terms.
"""

from __future__ import annotations

import logging

import numpy as np

from .corpus import DOCS_SCHEMA, CorpusError, DocSource, docs_from_batch, docs_to_batch

log = logging.getLogger("sparklda.warmstart")


def merge_vocabularies(old: list, new: list) -> tuple[list, np.ndarray]:
    """(merged vocabulary, mapping of ``new`` ids to merged ids).

    The old terms keep their ids; terms of ``new`` not in ``old`` are appended
    in their order in ``new``.
    """
    index = {t: i for i, t in enumerate(old)}
    merged = list(old)
    mapping = np.empty(len(new), dtype=np.int64)
    for j, term in enumerate(new):
        i = index.get(term)
        if i is None:
            i = len(merged)
            index[term] = i
            merged.append(term)
        mapping[j] = i
    return merged, mapping


def remap_document(d, mapping: np.ndarray, what: str, drop_negative: bool = False):
    """``(doc_id, terms, counts)`` with term id t replaced by ``mapping[t]`` (ids outside
    ``mapping`` are an error; with ``drop_negative``, terms mapped to −1 are dropped)."""
    doc_id, terms, counts = d
    n = len(mapping)
    terms = np.asarray(terms, dtype=np.int64)
    counts = np.asarray(counts, dtype=np.float64)
    bad = (terms < 0) | (terms >= n)
    if bad.any():
        raise CorpusError(
            f"{what} has term id {int(terms[bad][0])} in document {doc_id}, "
            f"outside the vocabulary of {n} terms."
        )
    new = mapping[terms]
    if drop_negative:
        keep = new >= 0
        new, counts = new[keep], counts[keep]
    order = np.argsort(new, kind="stable")
    return doc_id, new[order], counts[order]


def _remap(
    source: DocSource, mapping: np.ndarray, vocab_size: int, vocab, drop_negative=False
) -> DocSource:
    """``source`` with term id t replaced by ``mapping[t]`` (:func:`remap_document`), as
    an RDD (a broadcast mapping) and as a DataFrame (the mapping in the closure)."""
    what = source.what

    def documents():
        base_rdd = source.rdd
        if base_rdd is None:
            return None
        m_bc = base_rdd.context.broadcast(mapping)
        return base_rdd.map(lambda d: remap_document(d, m_bc.value, what, drop_negative))

    frame = None
    base = source.frame
    if base is not None:

        def run(batches):
            for batch in batches:
                docs = (
                    remap_document(d, mapping, what, drop_negative) for d in docs_from_batch(batch)
                )
                yield docs_to_batch(docs)

        def frame():
            docs, cached = base()
            return docs.mapInArrow(run, DOCS_SCHEMA), cached

    return DocSource(
        None,
        vocab_size,
        vocab,
        source.what,
        source.declared_docs,
        frame=frame,
        spark=source.spark,
        documents=documents,
    )


def align_initial(model, source: DocSource, params):
    """Return (source, initial N^Φ) with the vocabularies merged.

    The model's terms keep their ids; terms new in ``source`` are appended
    after them and start from the prior (zero statistics). Without
    vocabularies on both sides the sizes must match and the term ids are
    taken to mean the same terms (a warning says so when only the model has
    a vocabulary); the result keeps whichever vocabulary is known.
    """
    if model.k != params.k:
        raise CorpusError(
            f"The 'k' parameter ({params.k}) must equal the initial model's k "
            f"({model.k}) to continue training from it."
        )
    if model.vocab is None or source.vocab is None:
        if source.vocab_size != model.vocab_size:
            raise CorpusError(
                f"The corpus ({source.what}) has {source.vocab_size} terms but the "
                f"initial model has {model.vocab_size}; provide vocabularies on "
                f"both sides to merge them."
            )
        if model.vocab is not None:
            log.warning(
                "warm start: %s has no vocabulary; its term ids are taken to be the "
                "initial model's (%d terms)",
                source.what,
                model.vocab_size,
            )
        vocab = source.vocab if source.vocab is not None else model.vocab
        # same ids: build_corpus's validation checks them (negative or too large)
        same = DocSource(
            None,
            source.vocab_size,
            vocab,
            source.what,
            source.declared_docs,
            frame=source.frame,
            spark=source.spark,
            documents=lambda: source.rdd,
        )
        if getattr(model, "shards", None) is not None:  # held on the executors: kept there
            return same, model.shards
        return same, np.array(model.topic_word, dtype=np.float64)
    merged, mapping = merge_vocabularies(model.vocab, source.vocab)
    shards = getattr(model, "shards", None)
    if shards is not None:  # held on the executors: kept there, new terms appended
        tw = shards.extended(len(merged))
    else:
        tw = np.zeros((len(merged), model.k))
        tw[: model.vocab_size] = model.topic_word
    log.info(
        "warm start: %d terms of the initial model, %d new terms from %s",
        model.vocab_size,
        len(merged) - model.vocab_size,
        source.what,
    )
    return _remap(source, mapping, len(merged), merged), tw


def project_to_vocabulary(source: DocSource, vocab, vocab_size: int) -> DocSource:
    """Documents of ``source`` expressed in a model's vocabulary (for inference).

    With both vocabularies known, terms are matched by name and terms the
    model does not know are dropped. Otherwise the vocabulary sizes must
    match and ids are kept (and checked).
    """
    if vocab is None or source.vocab is None:
        if source.vocab_size != vocab_size:
            raise CorpusError(
                f"The documents ({source.what}) have {source.vocab_size} terms but "
                f"the model has {vocab_size}; provide vocabularies on both sides "
                f"to match terms by name."
            )
        return _remap(source, np.arange(vocab_size), vocab_size, vocab)
    index = {t: i for i, t in enumerate(vocab)}
    mapping = np.fromiter(
        (index.get(t, -1) for t in source.vocab), dtype=np.int64, count=len(source.vocab)
    )
    return _remap(source, mapping, vocab_size, list(vocab), drop_negative=True)
