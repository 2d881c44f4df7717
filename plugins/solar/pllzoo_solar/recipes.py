"""SoLar's named recipes: the method, every row of the paper's Table 4, and SoLar-LA.

Each variant is the ``solar`` recipe with one slot swapped or one hyper-parameter set, so
any of them can be re-mixed from the command line (``solar+selection=...``).
"""

from __future__ import annotations

import dataclasses

from pllzoo import Method

SOLAR = Method(
    name="solar",
    label_update="solar.sinkhorn",
    selection="solar.classwise",
    loss="solar.loss",
    estimator="solar.prior",
    description="SoLar: Sinkhorn label refinery with class-prior estimation and class-wise selection",
    citation="Wang et al., NeurIPS 2022",
)


def _variant(name: str, description: str, **changes) -> Method:
    return dataclasses.replace(SOLAR, name=name, description=description, **changes)


RECIPES = [
    SOLAR,
    _variant("solar-no-preest", "Table 4: w/o pre-estimation, from a uniform prior",
             hparams={"estimator.est_epochs": 0}),
    # "no pre-estimation" is our reading: the paper (§4.3) calls Cand-Est "an alternative way for initializing r",
    # which is what the pre-estimation stage does, and says Oracle "also removes the pre-estimation stage"
    _variant("solar-cand-est", "Table 4: prior initialised by candidate counts, no pre-estimation (our reading)",
             hparams={"estimator.init": "candidates", "estimator.est_epochs": 0}),
    _variant("solar-cand-mle", "ours: prior initialised by the candidate sets' maximum-likelihood prior, "
             "no pre-estimation", hparams={"estimator.init": "cand-mle", "estimator.est_epochs": 0}),
    _variant("solar-oracle", "Table 4: the true training prior, fixed", hparams={"estimator.init": "oracle"}),
    _variant("solar-no-selection", "Table 4: w/o S, every sample reliable", selection="pllzoo.all"),
    _variant("solar-global-selection", "Table 4: w GS, small-loss selection over the whole batch",
             hparams={"selection.mode": "global"}),
    _variant("solar-no-smallloss", "Table 4: w/o S-SL, high-confidence selection only",
             hparams={"selection.mode": "confidence"}),
    _variant("proden-s-cpe", "Table 4: PRODEN's confidences with SoLar's selection and prior estimation",
             label_update="proden.confidence"),
    _variant("solar-la", "SoLar-LA: logit adjustment g − ζ·log r at test time (--hp predict.zeta=...)",
             predict="solar.la"),
]
