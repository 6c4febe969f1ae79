"""Defaults that adapt to the corpus (docs/architecture.md, "Step schedules" and
"CVB0 and CVB: the start"): SCVB0's ρ^Φ schedule counted in a fraction of a pass
on small corpora, SVB's per-document schedule, CVB0's start from a fold-in
against random topics; SCVB0 taking each token's own share out of N^Θ_j."""

from __future__ import annotations

import numpy as np
import pytest

from sparklda.api import fit
from sparklda.corpus import DocSource, read_uci
from sparklda.modes.scvb0 import round_step
from sparklda.modes.svb import svb_round_step
from sparklda.params import TrainParams, schedule_minibatch_docs
from tests.helpers import KOS_DOCWORD, KOS_VOCAB

# --------------------------------------------------------------------------
# the rules


def test_schedule_minibatch_adapts_below_20000_documents():
    assert TrainParams().schedule_minibatch == 0
    assert schedule_minibatch_docs(0, 200) == 20.0  # never below 20 documents per step
    assert schedule_minibatch_docs(0, 3000) == 20.0
    assert schedule_minibatch_docs(0, 8000) == 40.0
    assert schedule_minibatch_docs(0, 20_000) == 100.0
    assert schedule_minibatch_docs(0, 1_000_000) == 100.0  # the paper's above
    assert schedule_minibatch_docs(250, 3000) == 250.0  # a set value is kept
    # the steps of a pass are the same on 8,000 documents as on 20,000
    small = round_step(0, 8000, 10.0, 1000.0, 0.9, schedule_minibatch_docs(0, 8000))
    large = round_step(0, 20_000, 10.0, 1000.0, 0.9, schedule_minibatch_docs(0, 20_000))
    assert small == pytest.approx(large, rel=1e-3)
    # on 200 documents the paper's schedule barely moves, the default's steps do
    tiny = round_step(0, 200, 10.0, 1000.0, 0.9, schedule_minibatch_docs(0, 200))
    assert round_step(0, 200, 10.0, 1000.0, 0.9, 100) < 0.05 < tiny


def test_scvb0_defaults_take_out_the_tokens_own_share():
    p = TrainParams()
    assert (p.burnin, p.exclude_token) == (2, True)


def test_svb_round_step_counts_minibatches_of_documents():
    p = TrainParams()
    assert (p.learning_offset, p.learning_decay, p.learning_minibatch) == (10.0, 0.7, 128)
    # a round of exactly M0 aligned documents takes Hoffman's step exactly
    assert svb_round_step(0, 500, 11.0, 0.7, 500) == 11.0**-0.7
    assert svb_round_step(1000, 500, 11.0, 0.7, 500) == pytest.approx(13.0**-0.7, rel=1e-12)
    # a round of n·M0 documents: n steps with the same statistics
    rhos = [(10.0 + t) ** -0.7 for t in range(4)]
    expected = 1.0 - np.prod([1.0 - r for r in rhos])
    assert svb_round_step(0, 512, 10.0, 0.7, 128) == pytest.approx(expected, rel=1e-12)
    assert svb_round_step(0, 0, 10.0, 0.7, 128) == 0.0


# --------------------------------------------------------------------------
# on KOS (shipped with the package): 3,000 training documents, 430 held out


@pytest.fixture(scope="module")
def kos(spark):
    return read_uci(spark, KOS_DOCWORD, KOS_VOCAB)


def _final(src, **kw):
    kw.setdefault("heldout_count", 430)
    res = fit(src, TrainParams(seed=0, **kw))
    return res, res.evaluations[-1]["heldout_loglik"]


@pytest.mark.slow
def test_scvb0_defaults_beat_the_paper_schedule_on_kos(kos):
    """K = 50, 5 passes: the schedule counted in 1/200 of a pass (15 documents, so
    the floor of 20) against the paper's 100-document steps."""
    ours, a = _final(kos, k=50, passes=5)
    _, b = _final(kos, k=50, passes=5, schedule_minibatch=100)
    assert ours.report["mode"]["schedule_minibatch"] == 20.0
    print(f"\nSCVB0 KOS 5 passes: defaults {a:.4f}, the paper's schedule {b:.4f}")
    assert a > b + 0.05


def _shortened(doc, n=6):
    """A KOS document cut to ``n`` of its tokens, drawn without replacement (seeded by
    its id): a corpus of short documents with KOS's topics."""
    i, terms, counts = doc
    rng = np.random.default_rng(int(i))
    tokens = np.repeat(terms, counts.astype(np.int64))
    kept, m = np.unique(
        rng.choice(tokens, size=min(n, len(tokens)), replace=False), return_counts=True
    )
    return i, kept.astype(terms.dtype), m.astype(counts.dtype)


@pytest.mark.slow
def test_scvb0_exclusion_helps_on_short_documents(kos):
    """Six-token documents, K = 20, 10 passes: with Eq. 5 as printed each token's own
    share of N^Θ_j pulls its γ towards the topic it already has; taking it out
    (``exclude_token``, the default) gains more than 0.05 nats per held-out token."""
    short = DocSource(kos.rdd.map(_shortened), kos.vocab_size, kos.vocab, "short KOS")
    _, a = _final(short, k=20, passes=10, heldout_count=400)
    _, b = _final(short, k=20, passes=10, heldout_count=400, exclude_token=False)
    print(f"\nSCVB0 on 6-token KOS documents: exclusion {a:.4f}, Eq. 5 as printed {b:.4f}")
    assert a > b + 0.05


@pytest.mark.slow
@pytest.mark.parametrize("algorithm", ["cvb0", "cvb"])
def test_cvb0_and_cvb_improve_from_their_first_iteration(kos, algorithm):
    """The start from a fold-in against random topics (CVB: half of each pair's γ from
    it, half random): each of the first three iterations gains on the held-out
    documents (from normalised random γ per pair CVB0 and CVB made almost no progress
    in their first 4-5 iterations)."""
    res = fit(
        kos,
        TrainParams(algorithm=algorithm, k=50, passes=3, seed=0, heldout_count=430, eval_every=1),
    )
    scores = [e["heldout_loglik"] for e in res.evaluations[:3]]
    print(f"\n{algorithm} KOS, iterations 1-3: {scores}")
    assert scores[0] > -7.8
    assert scores[1] > scores[0] + 0.03 and scores[2] > scores[1] + 0.03


@pytest.mark.slow
def test_svb_defaults_beat_hoffmans_schedule_per_round(kos):
    """K = 20, 3 passes of 2,000-document rounds: the per-document schedule (τ0 = 10,
    steps of 128 documents) against τ0 = 1024 with one step per round."""
    _, a = _final(kos, algorithm="svb", k=20, passes=3)
    _, b = _final(
        kos, algorithm="svb", k=20, passes=3, learning_offset=1024.0, learning_minibatch=0
    )
    print(f"\nSVB KOS 3 passes: defaults {a:.4f}, τ0 = 1024 per round {b:.4f}")
    assert a > b + 0.2
