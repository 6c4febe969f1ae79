"""Kernels against the plain references in tests/reference.py (no JVM needed)."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from sparklda import kernels
from sparklda.kernels.random import doc_keys, splitmix64
from sparklda.kernels.scvb0 import add_scaled_rows, scatter_add_rows
from sparklda.stats import TopicStats, normalize_topics
from tests import reference


def random_block(rng, n_docs=7, vocab=13, max_len=9, empty_every=3):
    indptr = [0]
    local, counts = [], []
    for j in range(n_docs):
        if j % empty_every == 1:
            indptr.append(indptr[-1])
            continue
        n = rng.integers(1, max_len)
        terms = np.sort(rng.choice(vocab, size=n, replace=False))
        local.extend(terms)
        counts.extend(rng.integers(1, 5, size=n))
        indptr.append(indptr[-1] + n)
    return (
        np.array(indptr, dtype=np.int64),
        np.array(local, dtype=np.int32),
        np.array(counts, dtype=np.float64),
    )


def _scvb0_case(seed, k=5):
    rng = np.random.default_rng(seed)
    indptr, local, counts = random_block(rng)
    phi_norm = rng.random((13, k)) + 0.01
    lengths = np.diff(np.concatenate([[0], np.cumsum(counts)])[indptr])
    theta0 = kernels.init_doc_stats(rng.random((len(indptr) - 1, k)), lengths)
    return indptr, local, counts, phi_norm, theta0


@pytest.mark.parametrize("dtype,rtol", [(np.float64, 1e-10), (np.float32, 2e-4)])
@pytest.mark.parametrize("burnin", [0, 1, 3])
@pytest.mark.parametrize("exclude", [False, True])
def test_scvb0_block_matches_reference(dtype, rtol, burnin, exclude):
    """``exclude``: sweeps after the first take the clump's previous γ out of N^Θ_j."""
    indptr, local, counts, phi_norm, theta0 = _scvb0_case(0 if not exclude else 3)
    want = reference.scvb0_block(
        indptr, local, counts, phi_norm, theta0, 0.1, burnin, exclude=exclude
    )
    args = (indptr, local, counts.astype(dtype), phi_norm.astype(dtype), theta0.astype(dtype))
    got = kernels.scvb0_block(*args, 0.1, burnin, exclude=exclude)
    assert got.dtype == dtype
    np.testing.assert_allclose(got, want, rtol=rtol, atol=rtol * 1e-3)
    # every token's responsibilities sum to one: the block's N̂ mass is its token count
    assert got.sum() == pytest.approx(counts.sum(), rel=rtol * 10)
    if exclude:
        plain = kernels.scvb0_block(*args, 0.1, burnin)
        if burnin == 0:  # one sweep: no previous γ to take out
            np.testing.assert_array_equal(got, plain)
        else:
            assert np.abs(got - plain).max() > 1e-3


def test_exclusion_keeps_a_short_document_from_reinforcing_its_own_topic():
    """A single-token document whose term is equally likely under both topics, started
    with all of N^Θ in topic 0. ρ_0 = 1 (τ_θ = 1), so the first sweep sets N^Θ_j to the
    token's γ; without exclusion the second sweep sees that count and keeps γ on topic
    0, with it the token sees only α and γ is uniform."""
    phi_norm = np.array([[0.5, 0.5]])
    theta0 = np.array([[1.0, 0.0]])
    block = (np.array([0, 1]), np.array([0], dtype=np.int32), np.array([1.0]))
    kept = kernels.scvb0_block(*block, phi_norm, theta0, 0.1, 1, tau_theta=1.0)
    excluded = kernels.scvb0_block(*block, phi_norm, theta0, 0.1, 1, tau_theta=1.0, exclude=True)
    assert kept[0, 0] > 0.8
    np.testing.assert_allclose(excluded[0], [0.5, 0.5], rtol=1e-12)


@pytest.mark.parametrize("dtype,rtol", [(np.float64, 1e-10), (np.float32, 2e-4)])
def test_scvb0_block_fractional_counts_match_reference(dtype, rtol):
    """Counts that are not all integers (e.g. tf-idf weights) take the kernel's
    per-pair pow path instead of its step-size tables."""
    rng = np.random.default_rng(6)
    indptr, local, counts = random_block(rng)
    counts = counts * 0.37 + 0.05
    k = 4
    phi_norm = rng.random((13, k)) + 0.01
    theta0 = rng.random((len(indptr) - 1, k))
    want = reference.scvb0_block(indptr, local, counts, phi_norm, theta0, 0.1, 2)
    got = kernels.scvb0_block(
        indptr, local, counts.astype(dtype), phi_norm.astype(dtype), theta0.astype(dtype), 0.1, 2
    )
    assert got.dtype == dtype
    np.testing.assert_allclose(got, want, rtol=rtol, atol=rtol * 1e-3)
    assert got.sum() == pytest.approx(counts.sum(), rel=rtol * 10)


@pytest.mark.parametrize("burnin", [0, 2])
def test_clumping_equals_repeated_token_updates(burnin):
    """Eq. 9 (one update per distinct term) equals m token-by-token Eq. 6 updates."""
    rng = np.random.default_rng(1)
    k = 4
    phi_norm = rng.random((6, k)) + 0.05
    tokens = [0, 0, 0, 2, 5, 5]
    theta0 = rng.random(k)
    theta0 *= len(tokens) / theta0.sum()
    want, _ = reference.scvb0_unclumped_doc(tokens, phi_norm, theta0, 0.1, burnin)
    got = kernels.scvb0_block(
        np.array([0, 3]),
        np.array([0, 2, 5], dtype=np.int32),
        np.array([3.0, 1.0, 2.0]),
        phi_norm,
        theta0[None, :],
        0.1,
        burnin,
    )
    np.testing.assert_allclose(got, want, rtol=1e-12)


def test_foldin_and_loglik_match_reference():
    rng = np.random.default_rng(2)
    indptr, local, counts = random_block(rng, n_docs=6)
    k = 4
    phi = rng.dirichlet(np.ones(13), size=k).T  # (V, K) columns are topics
    want = reference.foldin_block(indptr, local, counts, phi, 0.1, max_iter=50, tol=1e-6)
    got = kernels.foldin_block(indptr, local, counts, phi, 0.1, max_iter=50, tol=1e-6)
    np.testing.assert_allclose(got, want, rtol=1e-9)
    np.testing.assert_allclose(got.sum(1), 1.0)
    empty = np.diff(indptr) == 0
    np.testing.assert_allclose(got[empty], 1.0 / k)
    want_ll = reference.loglik_block(indptr, local, counts, phi, got)
    got_ll = kernels.loglik_block(indptr, local, counts, phi, got)
    np.testing.assert_allclose(got_ll, want_ll, rtol=1e-12)


def test_foldin_recovers_a_pure_document():
    k, v = 3, 9
    phi = np.zeros((v, k)) + 1e-6
    for t in range(k):
        phi[t * 3 : (t + 1) * 3, t] = 1.0
    phi /= phi.sum(0, keepdims=True)
    indptr = np.array([0, 3])
    local = np.array([3, 4, 5], dtype=np.int32)
    counts = np.array([10.0, 10.0, 10.0])
    theta = kernels.foldin_block(indptr, local, counts, phi, 0.1)
    assert theta[0].argmax() == 1 and theta[0, 1] > 0.95


@pytest.mark.parametrize("dtype,rtol", [(np.float64, 1e-14), (np.float32, 1e-6)])
def test_init_doc_stats_matches_reference(dtype, rtol):
    rng = np.random.default_rng(4)
    uniforms = rng.random((6, 5)).astype(dtype)
    lengths = np.array([3.0, 0.0, 17.0, 1.0, 250.0, 8.0])  # an empty document too
    got = kernels.init_doc_stats(uniforms, lengths)
    assert got.dtype == dtype and got.shape == (6, 5)
    np.testing.assert_allclose(got, reference.init_doc_stats(uniforms, lengths), rtol=rtol)
    np.testing.assert_allclose(got.sum(1), lengths, rtol=10 * rtol)


def test_splitmix64_matches_published_sequence():
    # SplitMix64 seeded with 0 (Vigna's splitmix64.c) outputs these three numbers first
    want = [0xE220A8397B1DCDAF, 0x6E789E6AA1B965F4, 0x06C45D188009454F]
    states = [(i * 0x9E3779B97F4A7C15) & ((1 << 64) - 1) for i in range(3)]
    assert [reference.splitmix64(x) for x in states] == want
    assert splitmix64(np.array(states, dtype=np.uint64)).tolist() == want


@pytest.mark.parametrize("seed,stream", [(0, 0), (3, 11), (2**63 + 5, 1003)])
def test_random_streams_match_reference(seed, stream):
    ids = np.array([0, 1, 5, 9, 123456, 1_000_000_007, 2**62 + 3], dtype=np.int64)
    assert doc_keys(seed, stream, ids).tolist() == [
        reference.doc_key(seed, stream, int(d)) for d in ids
    ]
    want = reference.uniform_matrix(seed, stream, ids, 6)
    got = kernels.uniform_matrix(seed, stream, ids, 6)
    assert got.dtype == np.float64
    np.testing.assert_array_equal(got, want)
    got32 = kernels.uniform_matrix(seed, stream, ids, 6, np.float32)
    assert got32.dtype == np.float32
    np.testing.assert_array_equal(got32, want.astype(np.float32))
    np.testing.assert_array_equal(kernels.uniform_per_doc(seed, stream, ids), want[:, 0])


def test_random_streams_depend_only_on_seed_stream_and_doc():
    ids = np.array([5, 9, 1_000_000_007], dtype=np.int64)
    a = kernels.uniform_matrix(3, 1, ids, 4)
    b = kernels.uniform_matrix(3, 1, ids[::-1], 4)[::-1]
    np.testing.assert_array_equal(a, b)
    assert not np.allclose(a, kernels.uniform_matrix(3, 2, ids, 4))
    assert not np.allclose(a, kernels.uniform_matrix(4, 1, ids, 4))
    assert ((a > 0) & (a < 1)).all()
    u = kernels.uniform_per_doc(0, 0, np.arange(20000))
    assert abs(u.mean() - 0.5) < 0.01


def test_kernels_import_without_pyspark():
    code = (
        "import sys; sys.modules['pyspark'] = None\n"
        "import sparklda.kernels as k\n"
        "assert 'pyspark' not in [m for m in sys.modules if sys.modules[m] is not None]\n"
        "print('ok')\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "ok"


def test_scatter_add_rows_matches_reference_and_numpy_add_at():
    rng = np.random.default_rng(0)
    acc = rng.random((30, 7))
    idx = rng.integers(0, 30, size=50)  # repeats on purpose
    rows = rng.random((50, 7)).astype(np.float32)
    want = reference.scatter_add_rows(acc, idx, rows)
    expected = acc.copy()
    np.add.at(expected, idx, rows)
    got = scatter_add_rows(acc, idx, rows)
    assert got is acc  # in place
    # the same float64 additions in the same order: identical sums
    np.testing.assert_array_equal(got, want)
    np.testing.assert_allclose(got, expected, rtol=1e-12)


def test_add_scaled_rows_matches_reference_and_numpy():
    rng = np.random.default_rng(1)
    base = rng.random((40, 5))
    mirror = base.astype(np.float32)
    terms = np.sort(rng.choice(40, size=12, replace=False))
    rows = rng.random((12, 5))
    want_base, want_mirror, want_totals = reference.add_scaled_rows(base, mirror, terms, rows, 0.3)
    exp_base = base.copy()
    exp_base[terms] += 0.3 * rows
    totals = add_scaled_rows(base, mirror, terms, rows, 0.3)
    assert totals.dtype == np.float64
    np.testing.assert_allclose(base, want_base, rtol=1e-15)
    np.testing.assert_array_equal(mirror, want_mirror)
    np.testing.assert_allclose(totals, want_totals, rtol=1e-14)
    np.testing.assert_allclose(base, exp_base, rtol=1e-12)
    np.testing.assert_allclose(mirror, exp_base.astype(np.float32), rtol=1e-6)
    np.testing.assert_allclose(totals, rows.sum(0), rtol=1e-12)


def test_merge_all_sums_rows_by_term():
    rng = np.random.default_rng(2)
    v, k = 25, 4
    parts, dense = [], np.zeros((v, k))
    for i in range(3):
        terms = np.sort(rng.choice(v, size=8, replace=False)).astype(np.int32)
        rows = rng.random((8, k)).astype(np.float32)
        dense[terms] += rows
        parts.append(TopicStats(terms, rows, {"tokens": 10.0 * (i + 1)}, {"kernel": 0.1}))
    merged = TopicStats.merge_all(parts)
    seen = np.flatnonzero(dense.any(axis=1))
    np.testing.assert_array_equal(merged.terms, seen)  # sorted, distinct: only terms that occur
    np.testing.assert_allclose(merged.rows, dense[seen], rtol=1e-6)
    assert merged.extra["tokens"] == 60.0 and merged.timings["kernel"] == [0.1] * 3
    full = merged.to_dense(v)
    np.testing.assert_allclose(full.rows, dense, rtol=1e-6)
    np.testing.assert_array_equal(full.terms, np.arange(v))


def test_union_of_terms_is_numpy_union1d():
    from sparklda.stats import union_of_terms

    rng = np.random.default_rng(4)
    for n_lists in range(0, 5):
        lists = [
            np.sort(rng.choice(300, size=rng.integers(0, 60), replace=False)).astype(np.int32)
            for _ in range(n_lists)
        ]
        want = np.unique(np.concatenate(lists)) if lists else np.zeros(0)
        got = union_of_terms(lists)
        assert got.dtype == np.int64
        np.testing.assert_array_equal(got, want)
    with pytest.raises(ValueError, match="non-negative"):
        union_of_terms([np.array([1, 2]), np.array([-1, 3])])


@pytest.mark.parametrize("eta", [0.0, 0.05])
def test_normalize_topics_matches_reference(eta):
    rng = np.random.default_rng(3)
    vk = rng.random((9, 4)) * 10
    vk[2] = 0.0  # a word no topic uses
    got = normalize_topics(vk, eta)
    assert got.dtype == np.float64 and got.shape == (9, 4)
    np.testing.assert_allclose(got, reference.normalize_topics(vk, eta), rtol=1e-14)
    np.testing.assert_allclose(got.sum(0), 1.0, rtol=1e-14)
    # topics as rows (scikit-learn's components_) give the same (V, K) matrix
    np.testing.assert_allclose(
        normalize_topics(vk.T.astype(np.float32), eta, topic_axis=0),
        reference.normalize_topics(vk.T.astype(np.float32), eta, topic_axis=0),
        rtol=1e-14,
    )


@pytest.mark.parametrize("vocab_size", [5, 64, 1000, 100_003])
def test_terms_digest_round_trips_in_both_forms(vocab_size):
    """A block's terms reach the driver as ids or as a bitmap, whichever is smaller; the
    union of a slice's digests is the union of its blocks' terms."""
    from sparklda.block import bitmap_terms, terms_digest, union_bitmap

    rng = np.random.default_rng(vocab_size)
    sets = [
        np.unique(rng.integers(0, vocab_size, size=n)).astype(np.int32)
        for n in (0, 1, 3, vocab_size // 2, vocab_size * 2)
    ]
    digests = [terms_digest(t, vocab_size) for t in sets]
    kinds = {d[:1] for d in digests}
    assert kinds <= {b"T", b"B"} and (vocab_size < 64 or kinds == {b"T", b"B"})
    for t, d in zip(sets, digests, strict=True):
        assert len(d) == 1 + min(4 * len(t), (vocab_size + 7) // 8)
        assert np.array_equal(bitmap_terms(union_bitmap([d], vocab_size), vocab_size), t)
    union = bitmap_terms(union_bitmap([None, *digests], vocab_size), vocab_size)
    assert np.array_equal(union, np.unique(np.concatenate(sets)))


@pytest.mark.parametrize("unsorted", [False, True])
def test_block_from_packed_documents_is_from_docs(unsorted):
    """Corpus building shuffles packs of documents; the block built from the packs, in any
    order and split, is the block of the documents (``DocBlock.from_docs``, the reference),
    also when a document's terms come unsorted or repeated."""
    from sparklda.block import DocBlock
    from sparklda.packs import pack_of

    rng = np.random.default_rng(int(unsorted))
    for _ in range(50):
        docs = []
        for doc_id in rng.permutation(40)[: rng.integers(0, 40)]:
            n = int(rng.integers(0, 9))
            terms = rng.choice(60, n, replace=False)
            if not unsorted:
                terms = np.sort(terms)
            elif n > 1:
                terms[1] = terms[0]
            docs.append((int(doc_id), terms, rng.integers(1, 5, n).astype(float)))
        k = int(rng.integers(1, 4))
        packs = [pack_of(docs[j::k]) for j in range(k)]
        expected = DocBlock.from_docs(docs)
        got = DocBlock.from_packed(packs[::-1])
        for name in ("doc_ids", "indptr", "terms", "local", "counts"):
            x, y = getattr(expected, name), getattr(got, name)
            assert x.dtype == y.dtype and np.array_equal(x, y), name
