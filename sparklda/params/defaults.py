"""The defaults that depend on the corpus or the cluster, and the names and constants
the parameter table uses (:mod:`sparklda.params.table`)."""

from __future__ import annotations

#: The algorithms, in the order of the modes registry (:data:`sparklda.modes.MODES`; the
#: modes sit above this layer, so ``tests/test_registry.py`` keeps the two equal).
ALGORITHMS = ("scvb0", "cvb0", "cvb", "svb", "map", "gibbs")
#: The algorithms that take seeded topics (the modes whose ``takes_seed_topics`` is set).
SEEDED_ALGORITHMS = ("scvb0", "cvb0", "gibbs")
#: How held-out documents are scored (the 'evaluator' parameter; sparklda.evaluation):
#: document completion, or the left-to-right particle estimate of whole documents.
EVALUATORS = ("completion", "left_to_right")
#: How rounds run (the 'execution' parameter; docs/architecture.md, "Spark Connect path").
EXECUTIONS = ("auto", "classic", "dataframe")
#: Where the model lives during training (the 'model_placement' parameter;
#: docs/architecture.md, "Memory model").
PLACEMENTS = ("driver", "executors", "auto")
#: The algorithms whose model can live on the executors (``model_placement="executors"``).
SHARDED_ALGORITHMS = ("scvb0", "cvb0", "cvb", "svb", "map", "gibbs")
#: α, the document-topic prior, when none is given (pyspark's "auto" maps here too).
DEFAULT_ALPHA = 0.1
#: η, the topic-word prior, when none is given.
DEFAULT_ETA = 0.01
#: Upper end of the documented range of α and η.
MAX_PRIOR = 1e4


class _Unset(float):
    """The type of :data:`AUTO_PRIOR` (a float, so the fields keep their type)."""

    def __repr__(self) -> str:
        return "AUTO_PRIOR"


#: α or η left unset: the algorithm's default (:func:`default_alpha`, :func:`default_eta`),
#: told apart by identity (``value is AUTO_PRIOR``), so a -1 given is still refused; the
#: ``pyspark.ml`` layer maps its -1 for docConcentration and topicConcentration here.
AUTO_PRIOR: float = _Unset(-1.0)
#: The algorithms whose α and η must exceed 1: MAP estimation, whose estimates take α − 1
#: and η − 1 as pseudo-counts (the modes of the Dirichlet posteriors).
ABOVE_ONE_ALGORITHMS = ("map",)
#: MAP's default η (MLlib's EM optimizer's topicConcentration default).
MAP_ETA = 1.1


def default_alpha(algorithm: str, k: int) -> float:
    """α when none is given: 50/k + 1 for 'map' (MLlib's EM docConcentration default),
    else :data:`DEFAULT_ALPHA`."""
    if algorithm in ABOVE_ONE_ALGORITHMS:
        return 50.0 / max(int(k), 1) + 1.0
    return DEFAULT_ALPHA


def default_eta(algorithm: str) -> float:
    """η when none is given: :data:`MAP_ETA` for 'map', else :data:`DEFAULT_ETA`."""
    return MAP_ETA if algorithm in ABOVE_ONE_ALGORITHMS else DEFAULT_ETA


#: The default minibatch: at least this many documents per round ...
MIN_DEFAULT_MINIBATCH = 2000
#: ... and at least this many per task, so each task keeps enough documents ...
DEFAULT_DOCS_PER_TASK = 1000
#: ... and, on large corpora, no more than this many rounds per pass.
MAX_DEFAULT_ROUNDS_PER_PASS = 50


def default_minibatch_size(tasks_per_round: int, n_train_docs: int = 0) -> int:
    """The minibatch size when none is set:
    ``max(2000, 1000 × tasks_per_round, ceil(n_train_docs / MAX_DEFAULT_ROUNDS_PER_PASS))``
    (50 rounds).

    ``tasks_per_round`` is ``parts_per_slice`` (by default the cluster's default
    parallelism), so the documents per task, which set how much of a round the
    kernel is, stay at 1000 or more as the cluster grows. ``n_train_docs`` (the
    training documents, known once the corpus is read) caps the rounds of a pass on
    large corpora, where a round's fixed cost of Spark work would otherwise be paid
    hundreds of times a pass; SCVB0's per-document step schedule keeps the quality of
    a pass at that size (docs/architecture.md, "Corpus layout")."""
    if tasks_per_round < 1:
        raise ValueError(f"tasks_per_round must be at least 1, got {tasks_per_round}")
    return max(
        MIN_DEFAULT_MINIBATCH,
        DEFAULT_DOCS_PER_TASK * int(tasks_per_round),
        -(-max(int(n_train_docs), 0) // MAX_DEFAULT_ROUNDS_PER_PASS),
    )


#: A batch mode's default layout (every round sweeps every block: :attr:`Mode.batch_layout`
#: of :mod:`sparklda.modes.base`) holds up to this many documents per task in one slice.
BATCH_MAX_DOCS_PER_TASK = 50_000


def default_batch_minibatch_size(tasks_per_round: int, n_train_docs: int = 0) -> int:
    """The minibatch size when none is set, for a mode whose rounds sweep every block:
    every training document in one slice (a round's tasks are then the cluster's
    ``tasks_per_round``, one block each, not a queue of small ones), up to
    :data:`BATCH_MAX_DOCS_PER_TASK` documents per task; never below
    :func:`default_minibatch_size`."""
    cap = BATCH_MAX_DOCS_PER_TASK * int(tasks_per_round)
    return max(
        default_minibatch_size(tasks_per_round, n_train_docs),
        min(max(int(n_train_docs), 1), cap),
    )


#: The paper's ρ^Φ schedule counts minibatches of this many documents ...
PAPER_SCHEDULE_MINIBATCH = 100
#: ... and the automatic one (``schedule_minibatch`` 0) counts 1/200 of the training
#: documents, when that is fewer: the paper's τ = 1000 steps are then 5 passes ...
AUTO_SCHEDULE_STEPS_PER_PASS = 200
#: ... but never fewer than this many documents per step (corpora under 4,000
#: training documents: docs/architecture.md, "Step schedules").
AUTO_SCHEDULE_MIN_DOCS = 20


def schedule_minibatch_docs(schedule_minibatch: int, n_train_docs: int) -> float:
    """M0, the documents per step t of SCVB0's ρ^Φ schedule (docs/architecture.md,
    "Step schedules").

    A positive ``schedule_minibatch`` is taken as it is. 0 (the default) gives
    ``min(100, max(20, n_train_docs / 200))``: the paper's 100 documents on corpora of
    20,000 training documents or more; on smaller ones the paper's schedule compressed
    so that it takes as many passes as on 20,000 documents, down to 20 documents per
    step."""
    if schedule_minibatch > 0:
        return float(schedule_minibatch)
    return min(
        float(PAPER_SCHEDULE_MINIBATCH),
        max(
            float(AUTO_SCHEDULE_MIN_DOCS),
            max(int(n_train_docs), 1) / AUTO_SCHEDULE_STEPS_PER_PASS,
        ),
    )
