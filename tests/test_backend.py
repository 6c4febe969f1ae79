"""The backend seam (sparklda.execution): one backend picked from the input, and the
same answers whichever backend's form the data has."""

from __future__ import annotations

import numpy as np
import pytest
from pyspark.ml.linalg import Vectors

from sparklda.corpus import FrameLayout, build_corpus, from_vectors
from sparklda.evaluation import completion_loglik
from sparklda.execution import (
    ClassicBackend,
    ClassicExecutor,
    DataFrameExecutor,
    FrameBackend,
    backend_for,
    backend_of,
)
from tests.helpers import planted_docs


def test_backend_for_a_classic_session(spark):
    assert backend_for(spark).name == "classic"
    assert backend_for(spark, "classic").has_rdds
    frame = backend_for(spark, "dataframe")
    assert frame.name == "dataframe" and not frame.has_rdds


@pytest.fixture(scope="module")
def vectors(spark):
    docs, v = planted_docs(n_docs=120)
    rows = [(int(d), Vectors.sparse(v, t.tolist(), c.tolist())) for d, t, c in docs]
    return spark.createDataFrame(rows, ["doc", "features"])


@pytest.mark.slow  # builds the corpus three ways and scores each (about 30 s)
def test_each_layout_gets_its_backend_and_the_same_heldout_score(vectors):
    """The classic and DataFrame layouts of one input hold out the same documents:
    completion_loglik, given either corpus's held-out blocks, asks the backend of their
    form and gets the same score; each corpus's backend gives its own executor."""
    args = dict(minibatch_size=40, heldout_count=20, seed=3)
    rdd_corpus = build_corpus(from_vectors(vectors, "features", "doc"), **args)
    frame_corpus = build_corpus(
        from_vectors(vectors, "features", "doc"), layout=FrameLayout(), **args
    )
    try:
        assert isinstance(backend_of(rdd_corpus), ClassicBackend)
        assert isinstance(backend_of(frame_corpus), FrameBackend)
        assert isinstance(backend_of(rdd_corpus.heldout), ClassicBackend)
        assert isinstance(backend_of(frame_corpus.heldout), FrameBackend)
        assert isinstance(backend_of(rdd_corpus).executor(rdd_corpus), ClassicExecutor)
        assert isinstance(backend_of(frame_corpus).executor(frame_corpus), DataFrameExecutor)
        rng = np.random.default_rng(0)
        phi = rng.random((rdd_corpus.vocab_size, 4))
        phi /= phi.sum(0)
        a = completion_loglik(rdd_corpus.heldout, phi, 0.1, 50)
        b = completion_loglik(frame_corpus.heldout, phi, 0.1, 50)
        assert a.documents == b.documents == 20
        assert a.tokens == b.tokens
        assert a.loglik_per_token == pytest.approx(b.loglik_per_token, rel=1e-12)
    finally:
        rdd_corpus.unpersist()
        frame_corpus.unpersist()


def test_only_the_backend_selection_asks_whether_a_session_is_connect():
    """One place tells a Spark Connect session from a classic one: the backend
    selection (and the file-system wrapper of sparklda.storage, which is below it)."""
    import ast
    import pathlib

    root = pathlib.Path(__file__).resolve().parents[1] / "sparklda"
    callers = set()
    for path in root.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call):
                f = node.func
                name = f.id if isinstance(f, ast.Name) else getattr(f, "attr", None)
                if name == "is_connect":
                    callers.add(path.relative_to(root).as_posix())
    assert "execution/select.py" in callers
    assert {c for c in callers if not c.startswith("storage")} == {"execution/select.py"}
