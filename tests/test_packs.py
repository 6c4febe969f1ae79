"""Packed documents (sparklda.packs and the Arrow conversions of sparklda.corpus)
against plain per-document references (tests/reference.py)."""

from __future__ import annotations

import math

import numpy as np
import pyarrow as pa
import pytest

from sparklda.block import DocBlock
from sparklda.corpus import (
    CorpusError,
    pack_from_batch,
    pack_to_batch,
    vectors_to_pack,
)
from sparklda.packs import (
    check_pack,
    check_packs,
    clean_pack,
    compact_pack,
    concat_packs,
    docs_of_pack,
    group_by,
    pack_from_bytes,
    pack_of,
    pack_to_bytes,
    packs_of_docs,
    slice_docs,
    take_docs,
)

from . import reference as ref

V = 50


def random_docs(rng, n, problems=True):
    """Documents with empty ones, zero counts and (with ``problems``) bad values."""
    docs = []
    for j in range(n):
        length = int(rng.integers(0, 8))
        terms = rng.integers(0, V, length).astype(np.int64)
        counts = rng.integers(0, 4, length).astype(np.float64)
        # one or two bad counts (a document's checks stop at its first kind of problem)
        for _ in range(2 if problems and length and rng.random() < 0.3 else 0):
            if rng.random() < 0.5:
                k = int(rng.integers(0, length))
                counts[k] = rng.choice([np.nan, np.inf, -2.0, 0.5, 1.5])
        if problems and length and rng.random() < 0.05:
            terms[int(rng.integers(0, length))] = rng.choice([-1, V, V + 7])
        docs.append((int(rng.integers(0, 10_000)) if j % 3 else j, terms, counts))
    return docs


def as_lists(docs):
    return [(int(i), [int(t) for t in ts], [float(c) for c in cs]) for i, ts, cs in docs]


def same_summary(a, b):
    assert {k: v for k, v in a.items() if k not in ("problems", "tokens")} == {
        k: v for k, v in b.items() if k not in ("problems", "tokens")
    }
    assert a["tokens"] == b["tokens"] or (math.isnan(a["tokens"]) and math.isnan(b["tokens"]))
    assert a["problems"].keys() == b["problems"].keys()
    for name, (doc, value) in a["problems"].items():
        other_doc, other = b["problems"][name]
        assert doc == other_doc, name
        assert value == other or (math.isnan(value) and math.isnan(other)), name


@pytest.mark.parametrize("seed", range(12))
def test_check_pack_matches_the_per_document_checks(seed):
    rng = np.random.default_rng(seed)
    docs = random_docs(rng, 60)
    same_summary(check_pack(pack_of(docs), V), ref.check_documents(as_lists(docs), V))
    # in several packs: the earlier documents name the problems
    packs = list(packs_of_docs(docs, size=7))
    assert len(packs) == 9
    same_summary(check_packs(packs, V), ref.check_documents(as_lists(docs), V))


def test_check_pack_of_no_documents():
    summary = check_pack(pack_of([]), V)
    assert summary == {"docs": 0, "empty": 0, "nnz": 0, "tokens": 0.0, "problems": {}, "max_id": -1}


@pytest.mark.parametrize("seed", range(6))
def test_clean_pack_matches_the_per_document_cleaning(seed):
    rng = np.random.default_rng(seed)
    docs = random_docs(rng, 50)
    assert as_lists(docs_of_pack(clean_pack(pack_of(docs)))) == ref.clean_documents(as_lists(docs))


def test_take_group_concat_and_bytes_keep_the_documents():
    rng = np.random.default_rng(3)
    docs = random_docs(rng, 40, problems=False)
    pack = pack_of(docs)
    index = np.array([5, 0, 39, 5, 17])
    assert as_lists(docs_of_pack(take_docs(pack, index))) == as_lists([docs[i] for i in index])
    assert as_lists(docs_of_pack(slice_docs(pack, 3, 9))) == as_lists(docs[3:9])
    assert as_lists(docs_of_pack(slice_docs(pack, 5, 5))) == []
    keys = rng.integers(0, 4, len(docs))
    groups = list(group_by(pack, keys))
    assert [k for k, _ in groups] == sorted(set(keys.tolist()))
    for key, sub in groups:
        expected = [d for d, k in zip(docs, keys, strict=True) if k == key]
        assert as_lists(docs_of_pack(sub)) == as_lists(expected)
    assert as_lists(docs_of_pack(concat_packs(sub for _, sub in groups))) == as_lists(
        [d for k in sorted(set(keys.tolist())) for d, kk in zip(docs, keys, strict=True) if kk == k]
    )
    back = pack_from_bytes(pack_to_bytes(pack))
    assert as_lists(docs_of_pack(back)) == as_lists(docs)
    with pytest.raises(ValueError, match="packed record"):
        pack_from_bytes(pack_to_bytes(pack) + b"x")


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_a_block_from_compact_packs_is_the_block_of_the_documents(dtype):
    rng = np.random.default_rng(5)
    docs = [(i, *d[1:]) for i, d in enumerate(random_docs(rng, 30, problems=False))]
    docs = [(i, np.unique(t), np.ones(len(np.unique(t))) * 2) for i, t, _ in docs]
    packs = [compact_pack(q, dtype) for q in packs_of_docs(docs[::-1], size=4)]
    a, b = DocBlock.from_packed(packs, dtype=dtype), DocBlock.from_docs(docs, dtype=dtype)
    for name in ("doc_ids", "indptr", "terms", "local", "counts"):
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name))
        assert getattr(a, name).dtype == getattr(b, name).dtype


def test_docs_batches_round_trip_including_sliced_and_null_lists():
    docs = [(4, np.array([1, 3]), np.array([2.0, 1.0])), (9, np.zeros(0, np.int64), np.zeros(0))]
    docs.append((2, np.array([0, 5, 7]), np.array([1.0, 1.0, 4.0])))
    batch = pack_to_batch(pack_of(docs), {"held": [True, False, True]})
    assert batch.schema.names == ["doc_id", "terms", "counts", "held"]
    assert as_lists(docs_of_pack(pack_from_batch(batch))) == as_lists(docs)
    assert as_lists(docs_of_pack(pack_from_batch(batch.slice(1)))) == as_lists(docs[1:])
    with_null = pa.RecordBatch.from_pydict(
        {
            "doc_id": pa.array([1, 2], pa.int64()),
            "terms": pa.array([None, [3]], pa.list_(pa.int64())),
            "counts": pa.array([None, [2.0]], pa.list_(pa.float64())),
        }
    )
    assert as_lists(docs_of_pack(pack_from_batch(with_null))) == [(1, [], []), (2, [3], [2.0])]


VECTOR_TYPE = pa.struct(
    [
        ("type", pa.int8()),
        ("size", pa.int32()),
        ("indices", pa.list_(pa.int32())),
        ("values", pa.list_(pa.float64())),
    ]
)


def vector_column(vectors):
    rows = [
        None if v is None else dict(zip(("type", "size", "indices", "values"), v, strict=True))
        for v in vectors
    ]
    return pa.array(rows, VECTOR_TYPE)


def test_vectors_to_pack_matches_the_vectors_row_by_row():
    vectors = [
        (0, 6, [0, 3], [2.0, 1.0]),
        None,
        (1, None, None, [0.0, 1.0, 0.0, 0.0, 3.0, 0.0]),
        (0, 6, [], []),
        (0, 6, [1, 2, 5], [0.0, 4.0, 1.0]),  # a stored zero stays (cleaning drops it)
        (1, None, None, [0.0] * 6),
        (1, None, None, [7.0, float("nan"), 0, 0, 0, 1]),
    ]
    ids = np.arange(100, 100 + len(vectors))
    col = vector_column(vectors)
    pack = vectors_to_pack(col, ids, 6, "column 'features'")
    expected = [
        (int(i), *(ref.vector_pairs(v) if v is not None else ([], [])))
        for i, v in zip(ids, vectors, strict=True)
    ]
    got = as_lists(docs_of_pack(pack))
    assert [d[:2] for d in got] == [d[:2] for d in expected]
    for (_, _, a), (_, _, b) in zip(got, expected, strict=True):
        assert np.array_equal(a, b, equal_nan=True)
    # a slice of the column (Arrow offsets) reads the same rows
    sliced = vectors_to_pack(col.slice(2, 3), ids[2:5], 6, "column 'features'")
    assert as_lists(docs_of_pack(sliced))[1:] == got[3:5]
    # all dense, or all null
    dense = vectors_to_pack(vector_column(vectors[2:3]), ids[:1], 6, "x")
    assert as_lists(docs_of_pack(dense)) == [(100, [1, 4], [1.0, 3.0])]
    nothing = vectors_to_pack(vector_column([None, None]), ids[:2], 6, "x")
    assert as_lists(docs_of_pack(nothing)) == [(100, [], []), (101, [], [])]


@pytest.mark.parametrize(
    "vector, size",
    [((0, 7, [1], [1.0]), 7), ((1, None, None, [1.0, 2.0]), 2)],
)
def test_vectors_to_pack_names_the_first_vector_of_another_size(vector, size):
    col = vector_column([(0, 6, [1], [1.0]), None, vector, vector])
    with pytest.raises(
        CorpusError,
        match=rf"Vectors in column 'f' must all have the vocabulary size 6; document 12 has "
        rf"size {size}\.",
    ):
        vectors_to_pack(col, np.array([10, 11, 12, 13]), 6, "column 'f'")


@pytest.mark.parametrize("high", [1, 50, 10**7])
def test_unique_inverse_is_numpys(high):
    from sparklda.block import unique_inverse

    rng = np.random.default_rng(high)
    for n in (0, 1, 7, 1000):
        values = rng.integers(0, high, n).astype(np.int32)
        uniq, inverse = unique_inverse(values)
        expected, expected_inverse = np.unique(values, return_inverse=True)
        np.testing.assert_array_equal(uniq, expected)
        np.testing.assert_array_equal(inverse, expected_inverse.ravel())
        assert uniq.dtype == expected.dtype


def test_pack_bytes_are_compact_when_exact_and_wide_when_not():
    ids = np.array([7, 3], np.int64)
    lengths = np.array([2, 1], np.int64)
    terms = np.array([1, 5, 2], np.int64)
    counts = np.array([1.0, 3.0, 2.0])
    data = pack_to_bytes((ids, lengths, terms, counts))
    back = pack_from_bytes(data)
    # 24 bytes of header, ids in 8 bytes, lengths and terms in 4, counts in 4
    assert len(data) == 24 + 2 * 8 + 2 * 4 + 3 * 4 + 3 * 4
    assert [a.dtype for a in back] == [np.int64, np.int32, np.int32, np.float32]
    assert check_pack(back, 10) == check_pack((ids, lengths, terms, counts), 10)
    # what 4 bytes cannot hold exactly travels in 8: a fraction, a count above 2^24,
    # a NaN beside them, a term id beyond int32
    for odd_counts, odd_terms in (
        (np.array([0.1, 3.0, 2.0]), terms),
        (np.array([2.0**24 + 1, 3.0, np.nan]), terms),
        (counts, np.array([1, 2**40, 2], np.int64)),
    ):
        back = pack_from_bytes(pack_to_bytes((ids, lengths, odd_terms, odd_counts)))
        np.testing.assert_array_equal(back[2], odd_terms)
        np.testing.assert_array_equal(back[3], odd_counts)
        assert back[2].dtype == (np.int64 if odd_terms is not terms else np.int32)
        assert back[3].dtype == (np.float64 if odd_counts is not counts else np.float32)


def test_the_tokens_of_a_float32_pack_are_summed_in_float64():
    # 2^24 + 3 ones: a float32 sum stops at 2^24
    n = 2**24 + 3
    pack = (
        np.array([0], np.int64),
        np.array([n], np.int32),
        np.zeros(n, np.int32),
        np.ones(n, np.float32),
    )
    assert check_pack(pack, 1)["tokens"] == float(n)
