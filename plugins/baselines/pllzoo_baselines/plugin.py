"""The ``baselines`` entry point: registers every baseline's components and recipes."""

from __future__ import annotations

from pllzoo import hookimpl
from pllzoo_baselines import cc, corr, lws, mse_exp, pico, proden, valen


@hookimpl
def pllzoo_register_label_updates(register):
    register("proden.confidence", proden.Confidence)
    register("lws.weights", lws.Weights)
    register("pico.confidence", pico.PiCOConfidence)
    register("valen.targets", valen.Targets)
    register("corr.confidence", corr.Confidence)


@hookimpl
def pllzoo_register_losses(register):
    register("proden.loss", proden.ProdenLoss)
    register("cc.loss", cc.CCLoss)
    register("lws.loss", lws.LWSLoss)
    register("mse.loss", mse_exp.MSELoss)
    register("exp.loss", mse_exp.EXPLoss)
    register("pico.loss", pico.PiCOLoss)
    register("valen.loss", valen.VALENLoss)
    register("corr.loss", corr.CorrLoss)


@hookimpl
def pllzoo_register_methods(register):
    for method in (proden.PRODEN, cc.CC, lws.LWS, mse_exp.MSE, mse_exp.EXP, valen.VALEN, pico.PICO, corr.CORR):
        register(method)
