"""Warm start: continue training from a model on a new or grown corpus."""

from __future__ import annotations

import numpy as np

from .corpus import CorpusError, DocSource


def align_initial(model, source: DocSource, params):
    """Return (source, initial N^Φ) with the vocabularies merged.

    The model's terms keep their ids; terms new in ``source`` are appended
    after them and start from the prior (zero statistics). Without
    vocabularies on both sides the sizes must match.
    """
    if model.k != params.k:
        raise CorpusError(f"The 'k' parameter ({params.k}) must equal the initial model's k "
                          f"({model.k}).")
    if model.vocab is None or source.vocab is None:
        if source.vocab_size != model.vocab_size:
            raise CorpusError(f"The corpus has {source.vocab_size} terms but the initial model "
                              f"has {model.vocab_size}; provide vocabularies to merge them.")
        return source, model.topic_word
    index = {t: i for i, t in enumerate(model.vocab)}
    merged = list(model.vocab)
    mapping = np.empty(len(source.vocab), dtype=np.int64)
    for j, term in enumerate(source.vocab):
        i = index.get(term)
        if i is None:
            i = len(merged)
            index[term] = i
            merged.append(term)
        mapping[j] = i
    tw = np.zeros((len(merged), model.k))
    tw[: model.vocab_size] = model.topic_word
    identity = len(merged) == len(source.vocab) and np.array_equal(mapping, np.arange(len(mapping)))
    if identity:
        return source, tw
    m_bc = source.rdd.context.broadcast(mapping)

    def remap(d):
        doc_id, terms, counts = d
        new = m_bc.value[terms]
        order = np.argsort(new, kind="stable")
        return doc_id, new[order], counts[order]

    remapped = DocSource(source.rdd.map(remap), len(merged), merged, source.what,
                         source.declared_docs)
    return remapped, tw
