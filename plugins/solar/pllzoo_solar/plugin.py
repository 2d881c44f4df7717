"""The ``solar`` entry point: registers SoLar's components and recipes."""

from __future__ import annotations

from pllzoo import hookimpl
from pllzoo_solar.loss import SolarLoss
from pllzoo_solar.predict import LogitAdjustment
from pllzoo_solar.prior import PriorEstimator
from pllzoo_solar.recipes import RECIPES
from pllzoo_solar.refinery import SinkhornRefinery
from pllzoo_solar.selection import ClasswiseSelection


@hookimpl
def pllzoo_register_label_updates(register):
    register("solar.sinkhorn", SinkhornRefinery)


@hookimpl
def pllzoo_register_selections(register):
    register("solar.classwise", ClasswiseSelection)


@hookimpl
def pllzoo_register_losses(register):
    register("solar.loss", SolarLoss)


@hookimpl
def pllzoo_register_estimators(register):
    register("solar.prior", PriorEstimator)


@hookimpl
def pllzoo_register_predictors(register):
    register("solar.la", LogitAdjustment)


@hookimpl
def pllzoo_register_methods(register):
    for method in RECIPES:
        register(method)
