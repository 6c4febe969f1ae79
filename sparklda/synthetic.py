"""Synthetic corpora drawn from the LDA generative process (pure numpy, no Spark).

The Spark job ``sparklda generate`` (:mod:`sparklda.cli.generate`) calls
:func:`true_topics` once on the driver and :func:`draw_documents` on the
executors; everything here is a plain function of its arguments and the seed.
See docs/architecture.md, "Synthetic corpora".

The model, with V terms and K true topics:

* a **Zipfian base** distribution over the terms, p_w ∝ (w + 1)^-s (term 0 is
  the most frequent; ``zipf_exponent`` = s);
* **topic k** = normalise(p ⊙ b_k ⊙ g_k): the base, times ``boost`` on a
  random subset of ``boost_fraction``·V terms (b_k, its emphasis, drawn
  independently per topic), times i.i.d. Gamma(``topic_concentration``, 1)
  noise g_k per term (small concentrations give spikier topics). Every topic
  keeps the Zipf shape; its boosted terms set it apart;
* **document d**: θ_d ~ Dirichlet(α·1_K), length N_d ~ Poisson(``mean_length``),
  topic counts (n_dk) ~ Multinomial(N_d, θ_d), and n_dk words drawn from
  topic k; the document is the term counts of its words.

Document d's draws use a generator seeded by (seed, document stream, d) only,
so a document is the same whatever partition draws it: the corpus depends on
the seed and the parameters, never on the partitioning.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from .errors import ParamError

#: Streams of the generator's seeds (distinct from sparklda.kernels.random.Stream's use).
TOPIC_STREAM = 101
DOC_STREAM = 102


@dataclass(frozen=True)
class CorpusSpec:
    """What a synthetic corpus is drawn from (every field is saved with it)."""

    n_docs: int = 10_000
    vocab_size: int = 5_000
    k_true: int = 20
    alpha: float = 0.1
    mean_length: float = 100.0
    zipf_exponent: float = 1.0
    boost_fraction: float = 0.02
    boost: float = 50.0
    topic_concentration: float = 1.0
    seed: int = 0

    def validate(self) -> CorpusSpec:
        checks = [
            ("n_docs", self.n_docs >= 1, "an int >= 1"),
            ("vocab_size", self.vocab_size >= 2, "an int >= 2"),
            ("k_true", self.k_true >= 1, "an int >= 1"),
            ("alpha", self.alpha > 0, "a float > 0"),
            ("mean_length", self.mean_length > 0, "a float > 0"),
            ("zipf_exponent", self.zipf_exponent >= 0, "a float >= 0"),
            ("boost_fraction", 0 <= self.boost_fraction <= 1, "a float in [0, 1]"),
            ("boost", self.boost >= 1, "a float >= 1"),
            ("topic_concentration", self.topic_concentration > 0, "a float > 0"),
            ("seed", 0 <= self.seed < 2**63, "an int in [0, 2^63)"),
        ]
        for name, ok, what in checks:
            value = getattr(self, name)
            if isinstance(value, bool) or not ok:
                raise ParamError(
                    f"The {name!r} parameter of the corpus generator must be {what}. "
                    f"Got {value!r} instead."
                )
        return self

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def zipf_base(vocab_size: int, exponent: float) -> NDArray[np.float64]:
    """p_w ∝ (w + 1)^-exponent over ``vocab_size`` terms (sums to 1)."""
    p = (np.arange(1, vocab_size + 1, dtype=np.float64)) ** -float(exponent)
    out: NDArray[np.float64] = p / p.sum()
    return out


def true_topics(spec: CorpusSpec) -> NDArray[np.float64]:
    """The (K_true, V) topic-word distributions (rows sum to 1); see the module docstring."""
    rng = np.random.default_rng([spec.seed, TOPIC_STREAM])
    base = zipf_base(spec.vocab_size, spec.zipf_exponent)
    n_boost = round(spec.boost_fraction * spec.vocab_size)
    topics = np.empty((spec.k_true, spec.vocab_size))
    for k in range(spec.k_true):
        w = base.copy()
        if n_boost:
            w[rng.choice(spec.vocab_size, size=n_boost, replace=False)] *= spec.boost
        w *= rng.gamma(spec.topic_concentration, 1.0, size=spec.vocab_size)
        topics[k] = w / w.sum()
    return topics


def topic_cdfs(topics: NDArray[np.float64]) -> NDArray[np.float64]:
    """Cumulative sums of each topic's row, the last entry set to exactly 1."""
    cdf = np.cumsum(topics, axis=1)
    cdf[:, -1] = 1.0
    return cdf


def draw_document(
    cdf: NDArray[np.float64], doc_id: int, alpha: float, mean_length: float, seed: int
) -> tuple[NDArray[np.int32], NDArray[np.float64]]:
    """Document ``doc_id``'s (sorted distinct term ids, counts), from its own
    generator seeded by (seed, DOC_STREAM, doc_id). ``cdf``: :func:`topic_cdfs`."""
    k, v = cdf.shape
    rng = np.random.default_rng([seed, DOC_STREAM, int(doc_id)])
    theta = rng.dirichlet(np.full(k, alpha))
    if not np.all(np.isfinite(theta)):  # every gamma draw underflowed (tiny α): one topic
        theta = np.zeros(k)
        theta[rng.integers(k)] = 1.0
    n = int(rng.poisson(mean_length))
    per_topic = rng.multinomial(n, theta / theta.sum())
    words = np.empty(n, dtype=np.int64)
    at = 0
    for t in np.flatnonzero(per_topic):
        m = int(per_topic[t])
        words[at : at + m] = np.searchsorted(cdf[t], rng.random(m), side="right")
        at += m
    np.minimum(words, v - 1, out=words)
    terms, counts = np.unique(words, return_counts=True)
    return terms.astype(np.int32), counts.astype(np.float64)


def draw_documents(
    cdf: NDArray[np.float64],
    doc_ids: NDArray[np.int64],
    alpha: float,
    mean_length: float,
    seed: int,
) -> tuple[NDArray[np.int64], NDArray[np.int32], NDArray[np.float64]]:
    """Documents ``doc_ids`` as CSR arrays: ``indptr`` (len(doc_ids)+1), ``terms``, ``counts``."""
    indptr = np.zeros(len(doc_ids) + 1, dtype=np.int64)
    terms_parts: list[NDArray[np.int32]] = []
    counts_parts: list[NDArray[np.float64]] = []
    for i, d in enumerate(doc_ids):
        terms, counts = draw_document(cdf, int(d), alpha, mean_length, seed)
        terms_parts.append(terms)
        counts_parts.append(counts)
        indptr[i + 1] = indptr[i] + len(terms)
    terms_all = np.concatenate(terms_parts) if terms_parts else np.zeros(0, np.int32)
    counts_all = np.concatenate(counts_parts) if counts_parts else np.zeros(0)
    return indptr, terms_all.astype(np.int32), counts_all.astype(np.float64)


def match_topics(
    true: NDArray[np.float64], learned: NDArray[np.float64]
) -> tuple[NDArray[np.int64], NDArray[np.float64]]:
    """For each true topic (rows of ``true``, (K_true, V)), the learned topic (rows of
    ``learned``, (K, V), K >= K_true) it is matched to, one-to-one by the Hungarian
    method on Hellinger distance, and that distance (0: equal, 1: disjoint)."""
    from scipy.optimize import linear_sum_assignment

    a = np.sqrt(true / true.sum(1, keepdims=True))
    b = np.sqrt(learned / learned.sum(1, keepdims=True))
    # Hellinger: sqrt(1 - BC), BC = Σ sqrt(p q)
    dist = np.sqrt(np.clip(1.0 - a @ b.T, 0.0, None))
    rows, cols = linear_sum_assignment(dist)
    order = np.argsort(rows)
    return cols[order].astype(np.int64), dist[rows[order], cols[order]]
