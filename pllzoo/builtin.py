"""The host's own plugin: generic components and the built-in datasets.

Registered through the same hooks as any third-party plugin.  Nothing here is
specific to a method: a uniform label update, select-all, and soft-target CE.
"""

from __future__ import annotations

import torch

from pllzoo import hookimpl
from pllzoo.components import Component
from pllzoo.losses import masked_mean, normalize_rows, soft_cross_entropy
from pllzoo.run import Step
from pllzoo.state import PLLState


class UniformTargets(Component):
    """Targets uniform over the candidate set: ``t_i = s_i / |S_i|`` (no disambiguation)."""

    @hookimpl
    def pllzoo_label_update(self, step: Step) -> torch.Tensor:
        return normalize_rows(step.batch.candidates)


class SelectAll(Component):
    """Every sample is reliable."""

    @hookimpl
    def pllzoo_select(self, step: Step) -> torch.Tensor:
        return torch.ones(step.batch.size, dtype=torch.bool, device=step.batch.index.device)


class SoftCrossEntropy(Component):
    """Mean over selected samples of ``-sum_j t_ij log p_ij`` on the weak view."""

    @hookimpl
    def pllzoo_loss(self, step: Step, state: PLLState) -> torch.Tensor:
        return masked_mean(soft_cross_entropy(step.logits, step.targets), step.mask)


@hookimpl
def pllzoo_register_label_updates(register):
    register("pllzoo.uniform", UniformTargets)


@hookimpl
def pllzoo_register_selections(register):
    register("pllzoo.all", SelectAll)


@hookimpl
def pllzoo_register_losses(register):
    register("pllzoo.soft_ce", SoftCrossEntropy)


@hookimpl
def pllzoo_register_datasets(register):
    from pllzoo.data.catalog import builtin_datasets

    for spec in builtin_datasets():
        register(spec)
