"""The ``baselines`` entry point: registers every baseline's components and recipes."""

from __future__ import annotations

from pllzoo import hookimpl
from pllzoo_baselines import cc, proden


@hookimpl
def pllzoo_register_label_updates(register):
    register("proden.confidence", proden.Confidence)


@hookimpl
def pllzoo_register_losses(register):
    register("cc.loss", cc.CCLoss)


@hookimpl
def pllzoo_register_methods(register):
    for method in (proden.PRODEN, cc.CC):
        register(method)
