"""Learned priors: held-out quality and coherence with and without them (the priors stage).

For each corpus (by default KOS and 20 Newsgroups, K=20) and each sparklda mode
given, one fit per variant, every fit holding out the run's documents
(``heldout_count`` and ``seed``), so the variants of a corpus are scored on the
same held-out halves:

* ``fixed``: α and η as given (``--alpha``, η's default);
* ``alpha``: ``optimize_alpha`` (an asymmetric α; its total stays K·α);
* ``alpha+sum``: ``optimize_alpha`` and ``optimize_alpha_sum`` (the total learned
  too);
* ``eta``: ``optimize_eta`` (a symmetric η).

Each row has the final held-out log-likelihood per token (the fit's own
evaluation: document completion with the model's α), its gain over ``fixed``,
the learned α's total, smallest and largest value, the learned η, and the mean
u_mass and c_npmi coherence of the topics' top 10 terms over the training
documents (whole documents, the corpus has count vectors only;
``TopicModel.coherence``). See docs/architecture.md, "Learned priors".
"""

from __future__ import annotations

import logging
import time

import numpy as np

from sparklda.api import fit
from sparklda.corpus import read_uci
from sparklda.errors import ParamError
from sparklda.params import ALGORITHMS, TrainParams

from .connect import uci_paths
from .suite import coherence_means

log = logging.getLogger("benchmarks")

#: The variants of a mode's fit and the parameters each sets.
VARIANTS = {
    "fixed": {},
    "alpha": {"optimize_alpha": True},
    "alpha+sum": {"optimize_alpha": True, "optimize_alpha_sum": True},
    "eta": {"optimize_eta": True},
}
#: Modes whose priors must exceed 1 (MAP): their fits keep the mode's default α.
ABOVE_ONE = ("map",)
#: Modes in which ``optimize_alpha_sum`` applies.
ALPHA_SUM_MODES = ("scvb0", "cvb0", "cvb", "svb")
DEFAULT_VARIANTS = "fixed,alpha,alpha+sum,eta"


def parse_passes(text: str) -> dict:
    """``scvb0=5,cvb0=20`` -> {"scvb0": 5, "cvb0": 20}: the modes and their passes."""
    out = {}
    for item in str(text).split(","):
        item = item.strip()
        if not item:
            continue
        name, _, n = item.partition("=")
        if name not in ALGORITHMS or not n.isdigit() or int(n) < 1:
            raise SystemExit(f"error: --priors-modes takes MODE=PASSES items; got {item!r}")
        out[name] = int(n)
    return out


def parse_variants(text: str) -> list:
    names = [x.strip() for x in str(text).split(",") if x.strip()]
    bad = [x for x in names if x not in VARIANTS]
    if bad:
        raise SystemExit(f"error: --priors-variants: unknown {bad}; known: {', '.join(VARIANTS)}")
    return names


def supports(mode: str, variant: str) -> bool:
    """Whether ``mode`` takes the variant's parameters (MAP-EM refuses learned priors)."""
    try:
        TrainParams(algorithm=mode, k=2, **VARIANTS[variant]).validate()
    except ParamError:
        return False
    return True


def run_priors(spark, specs, opts, results: dict) -> list:
    """The priors stage; sets ``results["priors"]`` (its rows and settings). A mode that
    refuses a variant's parameters (``supports``) has no row for it."""
    rows = []
    with_coherence = getattr(opts, "priors_coherence", True)
    for spec in specs:
        docword, vocab = uci_paths(spec.path)
        source = read_uci(spark, docword, vocab)  # the coherence's documents, parsed once
        source.rdd.persist()
        for mode, passes in opts.priors_modes.items():
            fixed = None
            for variant in opts.priors_variants:
                if variant == "alpha+sum" and mode not in ALPHA_SUM_MODES:
                    continue
                if not supports(mode, variant):
                    log.info("priors stage: %s does not take the %s variant", mode, variant)
                    continue
                alpha = {} if mode in ABOVE_ONE else {"alpha": opts.alpha}
                params = TrainParams(
                    algorithm=mode,
                    k=spec.k,
                    **alpha,
                    passes=passes,
                    heldout_count=spec.heldout_count,
                    seed=opts.seed,
                    **VARIANTS[variant],
                )
                t0 = time.perf_counter()
                res = fit(read_uci(spark, docword, vocab), params)
                seconds = time.perf_counter() - t0
                if res.report["corpus"]["heldout_documents"] != spec.heldout_count:
                    raise RuntimeError(
                        f"priors stage: {mode} {variant} on {spec.name} held out "
                        f"{res.report['corpus']['heldout_documents']} documents, not "
                        f"{spec.heldout_count}"
                    )
                score = float(res.evaluations[-1]["heldout_loglik"])
                alpha = np.asarray(res.model.alpha, dtype=np.float64)
                row = {
                    "corpus": spec.name,
                    "k": spec.k,
                    "mode": mode,
                    "passes": passes,
                    "variant": variant,
                    "heldout_loglik": score,
                    "gain": None if fixed is None else score - fixed,
                    "alpha_sum": float(alpha.sum()),
                    "alpha_min": float(alpha.min()),
                    "alpha_max": float(alpha.max()),
                    "eta": float(res.model.eta),
                    **(coherence_means(res.model, source) if with_coherence else {}),
                    "fit_s": seconds,
                }
                if variant == "fixed":
                    fixed = score
                rows.append(row)
                log.info("priors stage: %s", row)
        source.rdd.unpersist()
    results["priors"] = {
        "alpha": opts.alpha,
        "seed": opts.seed,
        "modes": dict(opts.priors_modes),
        "variants": list(opts.priors_variants),
        "rows": rows,
    }
    return rows
