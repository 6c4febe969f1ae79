"""The same seeds give the same models as the code before the package restructuring
(issue 32): small KOS fits of every mode, learned priors, seeded topics and held-out
documents, compared with topics saved by ``tests/make_golden.py`` at 60b5591
(``scvb0_priors`` saved again when SCVB0's learned η moved to one pass's counts; ``map``
saved when MAP-EM moved to Jacobi updates, MLlib's EM's)."""

from __future__ import annotations

import os

import numpy as np
import pytest

from tests.make_golden import FITS, fit_all

GOLDEN = os.path.join(os.path.dirname(__file__), "data", "golden_models.npz")

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("name", sorted(FITS))
def test_the_model_equals_the_one_saved_before_the_restructuring(spark, name):
    saved = np.load(GOLDEN)
    got = fit_all(spark, {name: FITS[name]})
    np.testing.assert_array_equal(got[name + "__alpha"], saved[name + "__alpha"])
    np.testing.assert_allclose(got[name], saved[name], rtol=1e-12, atol=0)
