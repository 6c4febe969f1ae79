"""Held-out quality by document completion, shared by every mode and peer.

Section 6 of Foulds et al. (2013): each held-out document's tokens are split
in half at random (seeded, :func:`sparklda.block.split_halves`); θ is
inferred on the first half with the topics fixed
(:func:`sparklda.kernels.foldin_block`); the score is the mean per-token
log Σ_k θ_k φ̂_kw over the second half. Higher is better; perplexity is
exp(−score). The topics enter only as φ̂, so a model from any mode, or from
Spark MLlib, is scored by the same code on the same documents.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .block import DocBlock, HeldoutBlock, split_halves
from .kernels import foldin_block, loglik_block
from .kernels.warm import settle_heap
from .stats import normalize_topics
from .vectors import arrow_vectors, with_row_positions

__all__ = ["HeldoutScore", "completion_loglik", "completion_loglik_df", "normalize_topics"]


@dataclass
class HeldoutScore:
    loglik_per_token: float
    tokens: float
    documents: int

    @property
    def perplexity(self) -> float:
        return float(np.exp(-self.loglik_per_token))

    @classmethod
    def from_parts(cls, parts) -> HeldoutScore:
        """The score of the (log-likelihood, tokens, documents) of each part."""
        total = sum(p[0] for p in parts)
        tokens = sum(p[1] for p in parts)
        docs = sum(p[2] for p in parts)
        if tokens == 0:
            raise ValueError("the held-out set has no target tokens to score")
        return cls(total / tokens, tokens, docs)

    def as_dict(self) -> dict:
        return {
            "heldout_loglik": self.loglik_per_token,
            "perplexity": self.perplexity,
            "heldout_tokens": self.tokens,
            "heldout_documents": self.documents,
        }


def _score_partition(phi_bc, alpha, max_iter, tol):
    def score(it):
        settle_heap()
        yield _score_blocks(phi_bc.value, it, alpha, max_iter, tol)

    return score


def _score_blocks(phi_all, blocks, alpha, max_iter, tol):
    """(log-likelihood of the target halves, their tokens, documents) of
    :class:`HeldoutBlock` s."""
    total = tokens = 0.0
    docs = 0
    for hb in blocks:
        obs, tgt = hb.observed, hb.target
        if hb.n_docs == 0:
            continue
        # both halves against the union of their terms, rows gathered once
        terms = np.union1d(obs.terms, tgt.terms)
        phi = phi_all[terms]
        loc_obs = np.searchsorted(terms, obs.terms)[obs.local]
        loc_tgt = np.searchsorted(terms, tgt.terms)[tgt.local]
        theta = foldin_block(
            obs.indptr, loc_obs, obs.counts.astype(phi.dtype), phi, alpha, max_iter, tol
        )
        # target rows follow the observed document order (same ids, same sort)
        t, n = loglik_block(tgt.indptr, loc_tgt, tgt.counts, phi, theta)
        total += t
        tokens += n
        docs += hb.n_docs
    return total, tokens, docs


def _alpha_arg(alpha):
    """α as the fold-in kernel takes it: a float, or a float64 K-vector."""
    a = np.asarray(alpha, dtype=np.float64)
    return float(a) if a.ndim == 0 else a


def completion_loglik(
    heldout_rdd, phi: np.ndarray, alpha: float, max_iter: int = 100, tol: float = 1e-4
) -> HeldoutScore:
    """Held-out per-token log-likelihood by document completion, on Spark.

    Parameters
    ----------
    heldout_rdd : RDD of :class:`sparklda.block.HeldoutBlock`
    phi : array (V, K)
        φ̂ with columns summing to one (column k is topic k's distribution
        over the vocabulary); float32 or float64.
    alpha : float or float array (K,)
        The document-topic prior α used for fold-in (a K-vector when learned).
    """
    phi = np.asarray(phi)
    if phi.ndim != 2 or not np.all(np.isfinite(phi)) or (phi < 0).any():
        raise ValueError("phi must be a finite non-negative (V, K) matrix")
    sc = heldout_rdd.context
    bc = sc.broadcast(np.ascontiguousarray(phi))
    try:
        parts = heldout_rdd.mapPartitions(
            _score_partition(bc, _alpha_arg(alpha), max_iter, tol)
        ).collect()
    finally:
        bc.destroy()
    return HeldoutScore.from_parts(parts)


def completion_loglik_df(
    df,
    features_col: str,
    phi: np.ndarray,
    alpha,
    seed: int,
    max_iter: int = 100,
    tol: float = 1e-4,
    what: str | None = None,
) -> HeldoutScore:
    """:func:`completion_loglik` of the documents of a DataFrame column of ML vectors
    (term counts), with DataFrame operations only, so it runs under Spark Connect.

    Documents are numbered by their position in ``df`` (partition by partition, as
    :func:`sparklda.corpus.from_vectors` numbers them with ``zipWithIndex``), so the
    halves, and the score, are those of the classic route. Empty documents and zero
    counts are dropped; a bad vector raises on the executors (run it inside
    :func:`sparklda.errors.executor_errors`). φ̂ travels in the task closure.
    """
    from pyspark.sql import functions as F

    phi = np.ascontiguousarray(phi, dtype=np.float64)
    if phi.ndim != 2 or not np.all(np.isfinite(phi)) or (phi < 0).any():
        raise ValueError("phi must be a finite non-negative (V, K) matrix")
    v = phi.shape[0]
    what = what or f"column {features_col!r}"
    alpha = _alpha_arg(alpha)
    numbered = with_row_positions(df.select(F.col(features_col).alias("_vec")), "_doc")

    def score(batches):
        import pyarrow as pa

        obs, tgt = [], []
        for batch in batches:
            if batch.num_rows == 0:
                continue
            ids = batch.column("_doc").to_numpy(zero_copy_only=False)
            vecs = arrow_vectors(batch.column("_vec"), v, what, first_doc=int(ids[0]))
            for doc_id, (idx, val) in zip(ids.tolist(), vecs, strict=True):
                keep = val > 0
                if not keep.any():
                    continue
                (ta, ca), (tb, cb) = split_halves(doc_id, idx[keep], val[keep], seed)
                obs.append((doc_id, ta, ca))
                tgt.append((doc_id, tb, cb))
        block = HeldoutBlock(
            DocBlock.from_docs(obs, dtype=np.float64), DocBlock.from_docs(tgt, dtype=np.float64)
        )
        total, tokens, docs = _score_blocks(phi, [block], alpha, max_iter, tol)
        yield pa.RecordBatch.from_pydict(
            {"total": [float(total)], "tokens": [float(tokens)], "docs": [int(docs)]}
        )

    parts = numbered.mapInArrow(score, "total double, tokens double, docs long").collect()
    return HeldoutScore.from_parts(parts)
