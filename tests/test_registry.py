"""Every table that names the modes agrees with the modes registry
(:data:`sparklda.modes.MODES`), and every parameter's documentation is written once.

The parameter table and the kernels' warmers sit below the modes (they cannot import the
registry), so these tests are what keeps them in step when a mode is added."""

from __future__ import annotations

import re

import numpy as np
import pytest

from sparklda.cli import compare
from sparklda.kernels.warm import WARMERS
from sparklda.modes import MODES, Mode, StatefulMode
from sparklda.params import (
    ALGORITHMS,
    BY_NAME,
    CONSTRAINTS,
    FIRST_STEPS,
    SEEDED_ALGORITHMS,
    TrainParams,
)


def test_the_parameter_tables_algorithms_are_the_registrys():
    assert ALGORITHMS == tuple(MODES)
    assert BY_NAME["algorithm"].options == tuple(MODES)
    assert SEEDED_ALGORITHMS == tuple(n for n, m in MODES.items() if m.takes_seed_topics)
    for c in CONSTRAINTS:
        assert c.algorithms is None or set(c.algorithms) <= set(MODES), c.name
    assert {s.algorithm for s in FIRST_STEPS} <= set(MODES)


@pytest.mark.parametrize("name", list(MODES))
def test_each_mode_fills_the_contract(name):
    mode = MODES[name]
    assert mode.name == name and mode.title
    assert not mode.__abstractmethods__, f"{name} leaves {sorted(mode.__abstractmethods__)}"
    assert mode.stateful == issubclass(mode, StatefulMode)
    # its kernels can be loaded ahead of the first round
    assert set(mode.task_kernels) | set(mode.driver_kernels) <= set(WARMERS)
    for variant, overrides in mode.variants.items():
        TrainParams(algorithm=name, **overrides).validate()
        assert variant not in MODES


def test_every_warmer_serves_a_mode_or_the_evaluation():
    # the held-out evaluation's fold-in and the left-to-right evaluator (sparklda.api)
    used = {"inference", "left_to_right"}
    for mode in MODES.values():
        used |= set(mode.task_kernels) | set(mode.driver_kernels)
    assert used == set(WARMERS)


def test_a_mode_missing_part_of_its_contract_cannot_be_built():
    class Half(Mode):
        name = "half"

        def round_value(self, t):
            return None

        def kernel(self, t):
            return lambda value, block: np.zeros((0, 1))

    with pytest.raises(TypeError, match="abstract"):
        Half(None, TrainParams())

    class NoStates(StatefulMode):
        name = "no-states"

        def round_value(self, t):
            return None

        def kernel(self, t):
            return None

        def update(self, stats, t):
            return {}

        def topic_word(self):
            return np.zeros((1, 2))

    assert NoStates.stateful
    assert {"init_state", "statistics", "set_initial"} <= NoStates.__abstractmethods__


def test_compare_trains_every_mode_of_the_registry_and_their_variants():
    expected = {}
    for name, mode in MODES.items():
        expected[name] = {"algorithm": name}
        expected.update({v: {"algorithm": name, **o} for v, o in mode.variants.items()})
    assert compare.MODES == expected
    assert list(compare.MODES)[: len(MODES)] == list(MODES)
    args = compare.parser().parse_args([])
    assert [name for name, _ in compare.plan(args)] == list(compare.MODES)


def test_the_ml_layer_offers_every_mode():
    from sparklda.ml import LDA
    from sparklda.ml.params import OPTIMIZER

    assert set(MODES) <= set(OPTIMIZER.options)
    doc = LDA().getParam("algorithm").doc
    for name, mode in MODES.items():
        assert f"{name!r} ({mode.title})" in doc
        assert LDA(algorithm=name)._train_params().algorithm == name


def test_the_ml_params_docs_come_from_the_parameter_table():
    """Each pyspark Param that sets one TrainParams field (and is sparklda's, not one of
    pyspark's shared Params) is documented by that field's entry in the table."""
    from pyspark.ml.param.shared import HasCheckpointInterval, HasMaxIter, HasSeed

    from sparklda.ml import LDA
    from sparklda.ml.params import ML_NAMES, TRAIN_PARAM_NAMES

    pyspark_own = {
        p for cls in (HasMaxIter, HasSeed, HasCheckpointInterval) for p in vars(cls) if p[0] != "_"
    }
    lda = LDA()
    checked = 0
    for name, field in TRAIN_PARAM_NAMES.items():
        if name in pyspark_own:
            continue
        doc = lda.getParam(name).doc
        text = BY_NAME[field].text(ML_NAMES)
        assert doc.startswith(text), (name, doc, text)
        checked += 1
    assert checked == len(TRAIN_PARAM_NAMES) - 3


def test_trainparams_documents_every_field_from_the_table():
    doc = TrainParams.__doc__ or ""
    for c in CONSTRAINTS:
        assert f"``{c.name}`` ({c.describe()}): {c.text()}" in doc
    # a doc's references to other parameters name parameters that exist
    assert BY_NAME["min_gain"].text({"eval_every": "evalEvery"}).count("'evalEvery'") == 1
    for c in CONSTRAINTS:
        for ref in re.findall(r"`(\w+)`", c.doc):
            assert ref in BY_NAME, (c.name, ref)
