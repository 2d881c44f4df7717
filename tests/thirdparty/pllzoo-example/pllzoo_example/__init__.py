"""An outside plugin: a global small-loss selection and a recipe using it.

It imports only pllzoo's public API, as any third-party plugin would.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from pllzoo import Component, Method, Step, hookimpl, hp, soft_cross_entropy


@dataclass(frozen=True)
class SmallLossHParams:
    keep: float = hp(0.5, "fraction of the batch with the smallest loss to keep")


class GlobalSmallLoss(Component):
    """Keep the ``keep`` fraction of the batch with the smallest loss on the targets."""

    HParams = SmallLossHParams
    reads = frozenset({"targets"})  # step.targets: a label update in front of it has effect, whatever the loss

    @hookimpl
    def pllzoo_select(self, step: Step) -> torch.Tensor:
        losses = soft_cross_entropy(step.logits.detach(), step.targets)
        k = max(1, math.ceil(self.hp.keep * losses.numel()))
        mask = torch.zeros_like(losses, dtype=torch.bool)
        mask[torch.topk(losses, k, largest=False).indices] = True
        return mask


@hookimpl
def pllzoo_register_selections(register):
    register("example.smallloss", GlobalSmallLoss)


@hookimpl
def pllzoo_register_methods(register):
    register(Method(name="example-smallloss", loss="pllzoo.soft_ce", selection="example.smallloss",
                    description="uniform candidate targets, trained on the small-loss half"))
