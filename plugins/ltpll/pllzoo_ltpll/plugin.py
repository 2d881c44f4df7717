"""The ``ltpll`` entry point: registers RECORDS' and HTC's components and recipes."""

from __future__ import annotations

from pllzoo import hookimpl
from pllzoo_ltpll import records


@hookimpl
def pllzoo_register_estimators(register):
    register("records.prior", records.FeaturePrior)


@hookimpl
def pllzoo_register_methods(register):
    for method in records.RECIPES:
        register(method)
