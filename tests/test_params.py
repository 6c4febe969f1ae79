"""The one parameter table and its one validator, reached through TrainParams, the jobs'
from_dict, sparklda.LDA (pyspark's names) and the corpus functions.

Invalid values are generated from each Constraint record (as scikit-learn's
_param_validation does), so a parameter added to the table is tested too.
"""

from __future__ import annotations

import logging
import math
import re
from dataclasses import fields

import numpy as np
import pytest

from sparklda.errors import ParamError
from sparklda.params import (
    ALGORITHMS,
    BY_NAME,
    CONSTRAINTS,
    DEFAULT_ALPHA,
    DEFAULT_ETA,
    FIRST_STEPS,
    TrainParams,
    validate_params,
)
from tests.helpers import no_spark_job

MESSAGE = re.compile(
    r"^The '(?P<name>\w+)' parameter of (?P<owner>\w+) must be "
    r"(an int in the range [\[(]\S+, \S+[\])]|a float in the range [\[(]\S+, "
    r"\S+[\])]|one of \[.*\]|a str|a bool \(True or False\)|"
    r"a mapping \{topic: \[words\]\} \(.*\))(, .+)?\. "
    r"Got (?P<got>.+) instead\.$"
)


def invalid_values(c, pyspark_converted=False):
    """Values ``c`` must reject: below ``low`` or at an open ``low``, above ``high`` or at an
    open ``high``, nan and ±inf (inf only when the table does not allow it), the wrong type
    (a float for an int, bool, str, None), an unknown option. With ``pyspark_converted``, only
    those that pass pyspark's type converters (numbers of the right type, and None)."""
    out = []
    if c.type is dict:
        out += [{-1: ["w"]}, {"x": ["w"]}, {0: []}, {0: "w"}, {0: [-1]}, {0: [1.5]}, {0: [True]}]
        out += [] if pyspark_converted else [["w"], "w", 3]
    elif c.type is str:
        out += ["no-such-option"] if c.options else []
        out += [] if pyspark_converted else [3, True]
    elif c.type is bool:
        out += [] if pyspark_converted else [1, 0, "true", 1.0]
    else:
        num = c.type
        if c.low is not None:
            out.append(c.low - 1 if num is int else c.low - 0.5)
            if c.low_open:
                out.append(num(c.low))
            elif num is float:
                out.append(float(np.nextafter(c.low, -math.inf)))
        if c.high is not None:
            out.append(num(c.high) + 1)
            if c.high_open:
                out.append(num(c.high))
            elif num is float:
                out.append(float(np.nextafter(c.high, math.inf)))
        if num is float:
            out += [math.nan, -math.inf] + ([] if c.allow_inf else [math.inf])
        elif not pyspark_converted:
            valid = c.low if c.low is not None else 0
            out += [50.0, float(valid), np.float64(valid), math.nan, math.inf]
        if not pyspark_converted:
            out += [True, False, "1", np.bool_(True)]
    out.append(None)
    return [v for v in out if v not in c.special]


def valid_values(c):
    """Values ``c`` must accept: its closed bounds, numpy scalars, ints for floats."""
    out = [getattr(TrainParams(), c.name)]
    if c.type is dict:
        return out + [{"0": ["w", 3]}, {2: ("a",)}]
    if c.type is bool:
        return out + [True, False, np.bool_(True)]
    if c.type is str:
        return out + (list(c.options) if c.options else ["", "/some/dir", "hdfs:///x"])
    for bound, is_open in ((c.low, c.low_open), (c.high, c.high_open)):
        if bound is not None and not is_open:
            out += [c.type(bound), np.int64(bound) if c.type is int else np.float64(bound)]
    if c.type is float:
        out += [np.float32(out[0])]
        if c.allow_inf:
            out.append(math.inf)
    return out


def cases(valid):
    make = valid_values if valid else invalid_values
    return [pytest.param(c, v, id=f"{c.name}={v!r}") for c in CONSTRAINTS for v in make(c)]


def assert_names(err, name, value, owner="LDA"):
    m = MESSAGE.match(str(err))
    assert m, f"not in the one message format: {err}"
    assert (m["name"], m["owner"], m["got"]) == (name, owner, repr(value))


# --------------------------------------------------------------------------
# The table


def test_table_and_train_params_match_one_to_one():
    assert [c.name for c in CONSTRAINTS] == [f.name for f in fields(TrainParams)]
    for c, f in zip(CONSTRAINTS, fields(TrainParams), strict=True):
        assert c.type.__name__ == str(f.type).split("[")[0], c.name
        assert c.doc and c.doc.endswith("."), c.name
        assert c.algorithms is None or set(c.algorithms) <= set(ALGORITHMS), c.name
        assert c.options is None or c.type is str, c.name
        assert c.accepts(getattr(TrainParams(), f.name)), c.name
    assert TrainParams().validate() == TrainParams()
    assert (TrainParams().alpha, TrainParams().eta) == (DEFAULT_ALPHA, DEFAULT_ETA)


@pytest.mark.parametrize("c,value", cases(valid=False))
def test_every_constraint_rejects_generated_invalid_values(c, value):
    with pytest.raises(ParamError) as e:
        TrainParams(**{c.name: value}).validate()
    assert_names(e.value, c.name, value)
    # the jobs' path and the mapping path give the same error
    with pytest.raises(ParamError) as e2:
        TrainParams.from_dict({c.name: value}).validate()
    with pytest.raises(ParamError) as e3:
        validate_params({c.name: value})
    assert str(e2.value) == str(e3.value) == str(e.value)
    with pytest.raises(ParamError) as e4:
        validate_params({c.name: value}, "LDA", aliases={c.name: "someAlias"})
    assert_names(e4.value, "someAlias", value)


@pytest.mark.parametrize("c,value", cases(valid=True))
def test_every_constraint_accepts_its_closed_bounds_and_numpy_scalars(c, value):
    tp = validate_params({c.name: value})
    assert getattr(tp, c.name) is value


@pytest.mark.parametrize(
    "kwargs,message",
    [
        (
            dict(k=50.0),
            "The 'k' parameter of LDA must be an int in the range [2, inf). Got 50.0 instead.",
        ),
        (
            dict(alpha=1e300),
            "The 'alpha' parameter of LDA must be a float in the range (0, 10000]. "
            "Got 1e+300 instead.",
        ),
        (
            dict(eta=math.inf),
            "The 'eta' parameter of LDA must be a float in the range (0, 10000]. Got inf instead.",
        ),
        (
            dict(heldout_fraction=1.0),
            "The 'heldout_fraction' parameter of LDA must be a float in "
            "the range [0, 1). Got 1.0 instead.",
        ),
        (
            dict(seed=2**63),
            "The 'seed' parameter of LDA must be an int in the range "
            "[0, 9223372036854775807]. Got 9223372036854775808 instead.",
        ),
        (
            dict(dtype="float16"),
            "The 'dtype' parameter of LDA must be one of ['float32', "
            "'float64']. Got 'float16' instead.",
        ),
        (
            dict(batch=1),
            "The 'batch' parameter of LDA must be a bool (True or False). Got 1 instead.",
        ),
    ],
)
def test_exact_messages(kwargs, message):
    with pytest.raises(ParamError) as e:
        TrainParams(**kwargs).validate()
    assert str(e.value) == message


def test_time_budget_may_be_inf_but_other_floats_must_be_finite():
    assert TrainParams(time_budget=math.inf).validate().time_budget == math.inf
    assert [c.name for c in CONSTRAINTS if c.allow_inf] == ["time_budget"]


def test_unknown_names_are_param_errors():
    with pytest.raises(ParamError, match=r"Unknown LDA parameter\(s\) \['topics'\]; known "):
        TrainParams.from_dict({"k": 5, "topics": 5})
    with pytest.raises(ParamError, match=r"Unknown LDA parameter\(s\) \['topics'\]"):
        validate_params({"topics": 5})


# --------------------------------------------------------------------------
# First steps: only for the algorithm that uses the schedule

BREAKING = {  # values that make each schedule's first step > 1
    ("s_phi", "tau_phi", "kappa_phi"): dict(s_phi=100.0, tau_phi=1.0),
    ("s_theta", "tau_theta", "kappa_theta"): dict(s_theta=5.0, tau_theta=1.0),
    ("learning_offset", "learning_decay"): dict(learning_offset=0.5),
}


@pytest.mark.parametrize("step", FIRST_STEPS, ids=lambda s: "/".join(s.names))
def test_first_step_checks_apply_only_to_their_algorithm(step):
    bad = BREAKING[step.names]
    assert {BY_NAME[n].algorithms for n in step.names} == {(step.algorithm,)}
    with pytest.raises(ParamError) as e:
        TrainParams(algorithm=step.algorithm, **bad).validate()
    formula = step.formula.format(**{n: n for n in step.names})
    assert str(e.value).startswith(f"The first step {formula} of LDA must be at most 1. Got ")
    assert (
        f"{step.names[0]}={bad.get(step.names[0], getattr(TrainParams(), step.names[0]))!r}"
        in str(e.value)
    )
    for other in ALGORITHMS:
        if other != step.algorithm:
            TrainParams(algorithm=other, **bad).validate()
    if step.algorithm == "svb":  # batch VB has no schedule (ρ = 1)
        TrainParams(algorithm="svb", batch=True, **bad).validate()


# --------------------------------------------------------------------------
# The pyspark.ml layer: pyspark's names mapped onto the table, same validator


def lda_cases():
    """(pyspark Param, constraint to generate from, algorithm) for every mapped Param."""
    from sparklda.ml.params import (
        CHECKPOINT_INTERVAL,
        STEP_PARAM_NAMES,
        TOPIC_CONCENTRATION,
        TRAIN_PARAM_NAMES,
        doc_concentration_constraint,
    )

    own = {
        "checkpointInterval": CHECKPOINT_INTERVAL,
        "topicConcentration": TOPIC_CONCENTRATION,
        "docConcentration": doc_concentration_constraint(10),
    }
    out = []
    for name, field in TRAIN_PARAM_NAMES.items():
        if name != "seed":  # any long is a pyspark seed; it is masked onto [0, 2^63)
            out.append((name, own.get(name, BY_NAME[field]), "scvb0"))
    for name, candidates in STEP_PARAM_NAMES.items():
        for field in candidates:
            out.append((name, BY_NAME[field], BY_NAME[field].algorithms[0]))
    return [
        pytest.param(name, c, alg, v, id=f"{name}={v!r}/{alg}")
        for name, c, alg in out
        for v in invalid_values(c, pyspark_converted=True)
        # None is pyspark's "unset" for these: the default, or no checkpoints
        if not (name in ("docConcentration", "topicConcentration", "checkpointDir") and v is None)
    ]


@pytest.mark.parametrize("name,c,algorithm,value", lda_cases())
def test_lda_rejects_generated_invalid_values_under_pyspark_names(name, c, algorithm, value):
    from sparklda import LDA

    lda = LDA(algorithm=algorithm, **{name: value})  # construction never checks ranges
    with pytest.raises(ParamError) as e:
        lda._train_params()
    shown = [value] if name == "docConcentration" else value
    assert_names(e.value, name, shown)


@pytest.mark.parametrize(
    "name,value",
    [
        ("k", 2.5),
        ("k", True),
        ("maxIter", "3"),
        ("learningOffset", "x"),
        ("algorithm", 3),
        ("heldoutFraction", False),
    ],
)
def test_lda_wrong_types_fail_in_pysparks_converters_naming_the_param(name, value):
    from sparklda import LDA

    with pytest.raises(TypeError, match=f'param "{name}"'):
        LDA(**{name: value})


def test_em_with_learning_offset_uses_cvb0_and_ignores_the_step_params(caplog):
    from sparklda import LDA

    with caplog.at_level(logging.INFO, logger="sparklda.ml"):
        tp = LDA(optimizer="em", learningOffset=1.0, learningDecay=0.6)._train_params()
    assert tp.algorithm == "cvb0"
    defaults = TrainParams()
    assert (tp.tau_phi, tp.kappa_phi, tp.learning_offset, tp.learning_decay) == (
        defaults.tau_phi,
        defaults.kappa_phi,
        defaults.learning_offset,
        defaults.learning_decay,
    )
    notes = [r.getMessage() for r in caplog.records]
    assert "LDA: learningOffset is ignored by the cvb0 algorithm." in notes
    assert "LDA: learningDecay is ignored by the cvb0 algorithm." in notes


def test_step_params_map_per_algorithm_and_name_pyspark_params_in_first_step_errors():
    from sparklda import LDA

    scvb0 = LDA(learningOffset=500.0, learningDecay=0.8)._train_params()
    assert (scvb0.tau_phi, scvb0.kappa_phi, scvb0.learning_offset) == (500.0, 0.8, 10.0)
    svb = LDA(algorithm="svb", learningOffset=64.0, learningDecay=0.6)._train_params()
    assert (svb.learning_offset, svb.learning_decay, svb.tau_phi) == (64.0, 0.6, 1000.0)
    with pytest.raises(ParamError) as e:
        LDA(learningOffset=1.0)._train_params()
    assert str(e.value) == (
        "The first step stepScale/learningOffset^learningDecay of LDA must be "
        "at most 1. Got 10 from stepScale=10.0, learningOffset=1.0, "
        "learningDecay=0.9 instead."
    )
    with pytest.raises(ParamError) as e:
        LDA(algorithm="svb", learningOffset=0.5)._train_params()
    assert str(e.value) == (
        "The first step learningOffset^-learningDecay of LDA must be at most "
        "1. Got 1.625 from learningOffset=0.5, learningDecay=0.7 instead."
    )
    with pytest.raises(ParamError, match="^The 'optimizer' parameter of LDA must be one of "):
        LDA(optimizer="nmf")._train_params()
    with pytest.raises(
        ParamError,
        match="^The 'optimizer' parameter of LDA must be one of "
        r"\['em', 'online', 'scvb0', 'cvb0', 'cvb', 'svb', 'map', 'gibbs'\]",
    ):
        LDA(optimizer="lsa")._train_params()


@pytest.mark.parametrize(
    "kwargs,name,value",
    [
        (dict(docConcentration=1e300), "docConcentration", [1e300]),
        (dict(topicConcentration=math.nan), "topicConcentration", math.nan),
        (dict(heldoutFraction=1.0), "heldoutFraction", 1.0),
        (dict(k=None), "k", None),
        (dict(algorithm="svb", learningDecay=0.5), "learningDecay", 0.5),
    ],
)
def test_lda_fit_fails_before_any_spark_job(spark, kwargs, name, value):
    from pyspark.ml.linalg import Vectors

    from sparklda import LDA

    df = spark.createDataFrame(
        [(0, Vectors.sparse(3, [0, 2], [1.0, 2.0])), (1, Vectors.sparse(3, [1], [4.0]))],
        ["id", "features"],
    )
    with no_spark_job(spark), pytest.raises(ParamError) as e:
        LDA(**kwargs).fit(df)
    if isinstance(value, float) and math.isnan(value):
        assert str(e.value).startswith(f"The '{name}' parameter of LDA must be a float")
        assert str(e.value).endswith("Got nan instead.")
    else:
        assert_names(e.value, name, value)


# --------------------------------------------------------------------------
# Corpus functions: same validator, same format, before any Spark job


def test_corpus_functions_use_the_same_validator_and_format(spark):
    from sparklda.corpus import build_corpus, from_text, load_text_dataframe
    from tests.helpers import planted_source

    src = planted_source(spark, n_docs=10, n_empty=0)
    df = spark.createDataFrame([("a b c",)], ["text"])
    with no_spark_job(spark):
        for kwargs, name, value in (
            (dict(heldout_fraction=1.0), "heldout_fraction", 1.0),
            (dict(minibatch_size=2.0), "minibatch_size", 2.0),
            (dict(heldout_count=-1), "heldout_count", -1),
            (dict(seed=-1), "seed", -1),
        ):
            with pytest.raises(ParamError) as e:
                build_corpus(src, **kwargs)
            assert_names(e.value, name, value, owner="build_corpus")
        with pytest.raises(ParamError) as e:
            from_text(df, vocab_size=0)
        assert_names(e.value, "vocab_size", 0, owner="from_text")
        with pytest.raises(ParamError) as e:
            load_text_dataframe(spark, "/nonexistent", fmt="csv")
        assert_names(e.value, "format", "csv", owner="load_text_dataframe")


def test_default_minibatch_grows_with_the_tasks_per_round():
    from sparklda.params import default_minibatch_size

    assert TrainParams().minibatch_size == 0  # 0: decided from the cluster when the corpus is built
    assert default_minibatch_size(1) == 2000
    assert default_minibatch_size(2) == 2000
    assert default_minibatch_size(3) == 3000
    assert default_minibatch_size(64) == 64_000
    with pytest.raises(ValueError, match="tasks_per_round"):
        default_minibatch_size(0)


def test_default_minibatch_caps_the_rounds_of_a_pass_on_large_corpora():
    from sparklda.params import MAX_DEFAULT_ROUNDS_PER_PASS, default_minibatch_size

    assert MAX_DEFAULT_ROUNDS_PER_PASS == 50
    # up to 100,000 training documents (on two cores) the default stays 2,000
    assert default_minibatch_size(2, 17_774) == 2000
    assert default_minibatch_size(2, 100_000) == 2000
    # beyond, a pass is at most 50 rounds
    assert default_minibatch_size(2, 100_001) == 2001
    assert default_minibatch_size(2, 700_000) == 14_000
    assert default_minibatch_size(64, 700_000) == 64_000  # the tasks' floor wins
    assert default_minibatch_size(64, 10_000_000) == 200_000


def test_the_minibatch_descriptions_name_the_cap_in_use():
    """The parameter's documentation (TrainParams, the estimator's Param, the README's
    configuration table) states the default's rule with the cap the code applies."""
    import os

    from sparklda.ml import LDA
    from sparklda.params import BY_NAME, MAX_DEFAULT_ROUNDS_PER_PASS

    rule = f"max(2000, 1000 × tasks per round, training documents / {MAX_DEFAULT_ROUNDS_PER_PASS})"
    assert rule in BY_NAME["minibatch_size"].doc
    assert rule in LDA().getParam("minibatchSize").doc
    readme = os.path.join(os.path.dirname(__file__), "..", "README.md")
    with open(readme, encoding="utf-8") as f:
        assert f"`minibatch_size` (0: {rule})" in f.read()
