"""The host's own plugin: generic components, the built-in datasets, backbones and views, and the TensorBoard observer.

Registered through the same hooks as any third-party plugin.  Nothing here is
specific to a method: a uniform label update, select-all, soft-target CE, and test-time logit
adjustment by an estimated prior (SoLar-LA, RECORDS' debiased prediction); ``pllzoo.tensorboard``
(:mod:`pllzoo.tensorboard_observer`).
"""

from __future__ import annotations

import torch

from dataclasses import dataclass

from pllzoo import hookimpl
from pllzoo.components import SELECT_ALL, UNIFORM_TARGETS, Component
from pllzoo.hparams import hp
from pllzoo.losses import masked_mean, normalize_rows, soft_cross_entropy
from pllzoo.run import Step
from pllzoo.state import PLLState


class UniformTargets(Component):
    """Targets uniform over the candidate set: ``t_i = s_i / |S_i|`` (no disambiguation)."""

    neutral = True  # no disambiguation: a loss that ignores the targets may have it; its targets are not tallied
    distributed = True  # per sample, no state

    @hookimpl
    def pllzoo_label_update(self, step: Step) -> torch.Tensor:
        return normalize_rows(step.batch.candidates)


class SelectAll(Component):
    """Every sample is reliable."""

    neutral = True  # no selection: a loss that ignores the mask may have it
    distributed = True  # per sample, no state

    @hookimpl
    def pllzoo_select(self, step: Step) -> torch.Tensor:
        return torch.ones(step.batch.size, dtype=torch.bool, device=step.batch.index.device)


class SoftCrossEntropy(Component):
    """Mean over selected samples of ``-sum_j t_ij log p_ij`` on the weak view."""

    distributed = True  # the mean over the global batch's selected rows (masked_mean with step.dist, D5)

    @hookimpl
    def pllzoo_loss(self, step: Step, state: PLLState) -> torch.Tensor:
        return masked_mean(soft_cross_entropy(step.logits, step.targets), step.mask, step.dist)


@dataclass(frozen=True)
class LogitAdjustHParams:
    zeta: float = hp(1.0, "ζ: strength of the adjustment g − ζ·log r", ge=0)


class LogitAdjustment(Component):
    """Predict ``argmax_j [g_j(x) − ζ·log r_j]`` with ``r = state.prior``, whoever estimates it
    (SoLar's epoch-end estimate, RECORDS' head-on-mean-feature estimate).  ``log`` is taken of
    ``r`` clamped at 1e-12 (RECORDS adds 1e-9 instead: the logits then differ by log(1 + 1e-9/r_j), below
    1e-6 while r_j > 1e-3, which changes the argmax only on such a near-tie; 0.69 at r_j = 1e-9).

    Deviation: a class of prior exactly 0 (an oracle prior of a class without training rows, as Lost, Italian and
    FG-NET have) is not adjusted.  The formula gives it +∞, and the clamp +27.6·ζ: it was every test row's
    prediction and the accuracy 0 (an outside review).  A tiny estimated prior is adjusted as the formula says
    (r_j = 3.5e-5 adds 10.3·ζ), so where an estimate puts a class near 0, LA predicts it widely.
    Test: tests/unit/test_solar_predict.py::test_uniform_prior_is_a_shift_and_zero_prior_stays_finite"""

    HParams = LogitAdjustHParams
    needs = frozenset({"prior"})
    distributed = True  # reads the replicated prior at evaluation

    @hookimpl
    def pllzoo_predict(self, logits: torch.Tensor, state: PLLState) -> torch.Tensor:
        prior = state.prior
        return logits - self.hp.zeta * torch.where(prior > 0, torch.log(prior.clamp_min(1e-12)), 0.0)


@hookimpl
def pllzoo_register_predictors(register):
    register("pllzoo.logit_adjust", LogitAdjustment)


@hookimpl
def pllzoo_register_label_updates(register):
    register(UNIFORM_TARGETS, UniformTargets)


@hookimpl
def pllzoo_register_selections(register):
    register(SELECT_ALL, SelectAll)


@hookimpl
def pllzoo_register_losses(register):
    register("pllzoo.soft_ce", SoftCrossEntropy)


@hookimpl
def pllzoo_register_datasets(register):
    from pllzoo.data.catalog import builtin_datasets

    for spec in builtin_datasets():
        register(spec)


@hookimpl
def pllzoo_register_models(register):
    from pllzoo.models import MODELS

    for name, factory in MODELS.items():
        register(name, factory)


@hookimpl
def pllzoo_register_views(register):
    from pllzoo.augment import VIEWS  # with the "-batched" twins pllzoo.augment_batched adds

    for name, view in VIEWS.items():
        register(name, view)


@hookimpl
def pllzoo_register_observers(register):
    from pllzoo.tensorboard_observer import TensorBoard

    register("pllzoo.tensorboard", TensorBoard)
