"""The ``ltpll`` entry point: registers RECORDS' and HTC's components and recipes."""

from __future__ import annotations

from pllzoo import hookimpl
from pllzoo_ltpll import htc, records


@hookimpl
def pllzoo_register_label_updates(register):
    register("htc.confidence", htc.HTCConfidence)


@hookimpl
def pllzoo_register_losses(register):
    register("htc.loss", htc.HTCLoss)


@hookimpl
def pllzoo_register_estimators(register):
    register("records.prior", records.FeaturePrior)


@hookimpl
def pllzoo_register_predictors(register):
    register("htc.ensemble", htc.HTCEnsemble)


@hookimpl
def pllzoo_register_methods(register):
    for method in records.RECIPES:
        register(method)
    register(htc.HTC)
