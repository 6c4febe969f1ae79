"""Batch MAP estimation by EM (Asuncion, Welling, Smyth & Teh 2009, the MAP row of
their Table 1; lecture notes 003, section 4; Foulds et al. 2013, section 4 and
Appendix A, of which SCVB0 is the online version; Spark MLlib's ``optimizer="em"``).

MAP-EM is CVB0's sweep with two changes (:func:`sparklda.kernels.cvb0_block` with
``include_token=True``): the counts include the token's own share (no "−ij"), and the
pseudo-counts are α − 1 and η − 1, the modes of the Dirichlet posteriors:

    γ_pk ∝ (N^Φ_uk + η − 1) / (N^Z_k + W(η − 1)) · (N^Θ_jk + α − 1).

Everything else is CVB0's (:mod:`sparklda.modes.cvb0`): γ per (document, term) pair
kept with the cached blocks, one iteration a round over every partition, the
statistics recomputed from the blocks each iteration, the periodic lineage checkpoints.

The priors must exceed 1 (the parameter validator refuses α ≤ 1 or η ≤ 1 for 'map'
and learned priors); left unset they are MLlib's EM defaults, α = 50/k + 1 and
η = 1.1 (:func:`sparklda.params.default_alpha`). The counts are floored at 0 in the
kernel, so no factor is negative.

The estimates. ``mode.alpha`` and ``mode.eta`` are the pseudo-counts the estimates
use, α − 1 and η − 1; the model is saved with them, so the one formula of
:class:`sparklda.model.TopicModel` gives MAP's topics
φ̂_kw = (N^Φ_wk + η − 1) / (N^Z_k + W(η − 1)), and its fold-in (held-out scoring,
``transform``) MAP's θ̂_jk ∝ N^Θ_jk + α − 1. The priors as given stay in the
parameters (the model's ``metadata["params"]``) and the checkpoints.
"""

from __future__ import annotations

import numpy as np

from .cvb0 import CVB0, sweep_kernel


class MAP(CVB0):
    """Batch MAP-EM (Asuncion et al. 2009): CVB0's sweep with the token's own share
    included and α − 1, η − 1 as pseudo-counts."""

    name = "map"
    title = "batch MAP estimation by EM, Asuncion et al. 2009 (MLlib's optimizer='em')"
    takes_seed_topics = False
    second_order = False

    @property  # type: ignore[override]
    def alpha(self) -> np.ndarray:
        """α − 1, the document-topic pseudo-counts of the MAP estimates (K-vector)."""
        return self.priors.alpha - 1.0

    @alpha.setter
    def alpha(self, value: np.ndarray) -> None:
        self.priors.alpha = np.asarray(value, dtype=np.float64) + 1.0

    @property  # type: ignore[override]
    def eta(self) -> float:
        """η − 1, the topic-word pseudo-count of the MAP estimates."""
        return self.priors.eta - 1.0

    @eta.setter
    def eta(self, value: float) -> None:
        self.priors.eta = float(value) + 1.0

    def kernel(self, t):
        return sweep_kernel(self.alpha.copy(), self.eta, self.w_eta, False, include_token=True)

    def report(self):
        return {
            **super().report(),
            # the pseudo-counts of the estimates (the model's α and η)
            "map_alpha_minus_one": float(self.alpha.mean()),
            "map_eta_minus_one": self.eta,
        }
