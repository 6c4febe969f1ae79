"""Seeded topics: the extra pseudo-counts of (topic, seed word) pairs that a mode adds to
its topic-word statistics (docs/architecture.md, "Seeded topics").

A mode that takes seeded topics (``takes_seed_topics = True``) builds one :class:`Seeds`
from its parameters and the corpus, adds :meth:`Seeds.totals` to the denominators
N^Z + Wη it ships, the rows to the numerators (on the driver, or in the tasks with
:func:`add_seed_rows`), and returns :meth:`Seeds.added_to` of its statistics as the
model's topic-word statistics.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import ParamError
from ..params import TrainParams


@dataclass(frozen=True)
class Seeds:
    """The seeds' pseudo-counts as sparse rows: ``terms`` (S,) sorted term ids and ``rows``
    (S, K) float64 (both empty when no topic is seeded)."""

    terms: np.ndarray
    rows: np.ndarray

    @classmethod
    def of(cls, params: TrainParams, corpus) -> Seeds:
        """The seeds ``params.seed_topics`` gives on ``corpus`` (:func:`seed_boost`)."""
        return cls(*seed_boost(params, corpus))

    @property
    def active(self) -> bool:
        """Whether any topic is seeded."""
        return len(self.terms) > 0

    def totals(self) -> np.ndarray:
        """Σ_w of the seeds' pseudo-counts per topic (what the denominators N^Z + Wη get)."""
        return self.rows.sum(axis=0)

    def added_to(self, topic_word: np.ndarray) -> np.ndarray:
        """``topic_word`` (V, K) plus the seeds' pseudo-counts (a copy when seeded)."""
        if not self.active:
            return topic_word
        out = np.array(topic_word, dtype=np.float64, copy=True)
        out[self.terms] += self.rows
        return out


def seed_boost(params: TrainParams, corpus) -> tuple[np.ndarray, np.ndarray]:
    """The seeded topics' pseudo-counts as sparse rows: (sorted term ids (S,), (S, K)).

    Seed word w of topic k gets b_wk = c · (C/K) / n_k: ``seed_confidence`` c of the
    topic's expected tokens C/K (C the training tokens), shared evenly by its n_k seed
    words (docs/architecture.md, "Seeded topics"). Words given as str are looked up in
    the corpus's vocabulary; ints are term ids. Raises ParamError naming unknown words.
    """
    k = params.k
    seeds = params.seed_topics or {}
    if not seeds:
        return np.zeros(0, dtype=np.int64), np.zeros((0, k), dtype=np.float64)
    vocab = getattr(corpus, "vocab", None)
    v = int(corpus.vocab_size)
    index = {w: i for i, w in enumerate(vocab)} if vocab is not None else None
    per_topic = params.seed_confidence * float(corpus.n_train_tokens) / k
    cells: dict[tuple[int, int], float] = {}
    unknown: list = []
    for topic, words in seeds.items():
        t = int(topic)
        ids = []
        for w in words:
            if isinstance(w, str):
                if index is None:
                    raise ParamError(
                        f"The 'seed_topics' parameter gives topic {t} the word {w!r}, but the "
                        f"corpus has no vocabulary: give term ids (ints) instead."
                    )
                if w not in index:
                    unknown.append(w)
                    continue
                ids.append(index[w])
            else:
                if int(w) >= v:
                    unknown.append(int(w))
                    continue
                ids.append(int(w))
        ids = sorted(set(ids))
        for i in ids:
            cells[(i, t)] = cells.get((i, t), 0.0) + per_topic / len(ids)
    if unknown:
        raise ParamError(
            f"The 'seed_topics' parameter names words outside the corpus's vocabulary of "
            f"{v} terms: {unknown!r}."
        )
    terms = np.array(sorted({w for w, _ in cells}), dtype=np.int64)
    rows = np.zeros((len(terms), k), dtype=np.float64)
    pos = {w: i for i, w in enumerate(terms.tolist())}
    for (w, t), b in cells.items():
        rows[pos[w], t] += b
    return terms, rows


def add_seed_rows(
    rows: np.ndarray, block_terms: np.ndarray, seed_terms: np.ndarray, seed_rows: np.ndarray
) -> None:
    """``rows[i] += seed_rows[j]`` where ``block_terms[i] == seed_terms[j]`` (in place;
    both term lists sorted): the seeds' pseudo-counts of a block's seeded terms."""
    if not len(seed_terms) or not len(block_terms):
        return
    pos = np.minimum(np.searchsorted(seed_terms, block_terms), len(seed_terms) - 1)
    hit = seed_terms[pos] == block_terms
    if hit.any():
        rows[hit] += seed_rows[pos[hit]].astype(rows.dtype)
