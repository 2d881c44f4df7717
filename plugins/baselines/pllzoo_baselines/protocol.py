"""The SoLar paper's protocol for baselines: consistency regularisation + mixup around a PLL loss.

"We equip all the baselines except PiCO with consistency regularization and Mixup" (SoLar §4.1).
How is not public; this is our inference (SoLar paper §4.1), modelled on SoLar's own terms:

  L = mean_i ℓ(f(x^w_i), a_i)                                   the method's own loss
    + mean_i ℓ(f(x^s_i), a_i)                        if ``cr``: same loss, strong view
    + mean_i [l·ℓ(f(x_mix,i), a_i) + (1−l)·ℓ(f(x_mix,i), a_π(i))]   if ``mixup``

where a_i is what the method's loss reads for sample i: its targets (PRODEN, LWS weights) or its
candidate row (CC, MSE, EXP).  For soft-target CE the mixed term equals CE with mixed targets.
``cr`` and ``mixup`` are on by default and off on tabular data ("not applicable to tabular data").

Under torchrun (G > 1, ``docs/distributed.md``) the means over a selection mask are over the global
batch's mask (``masked_mean`` with ``step.dist``, D5) and the mixup is the global batch's (one l, one
π of the B rows, the same on every rank and equal to the one-process draw; :mod:`pllzoo.mixup`), so a
subclass that opts in (``distributed = True`` on its own class) needs only its state's ``sync``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from pllzoo import Component, PLLState, Step, hookimpl, hp
from pllzoo.losses import masked_mean
from pllzoo.mixup import mixup_loss


@dataclass(frozen=True)
class ProtocolHParams:
    cr: bool = hp(True, "consistency: the same loss on the strong view (SoLar protocol; off on tabular)")
    mixup: bool = hp(True, "mixup: the loss on mixed inputs with permuted labels (SoLar protocol; off on tabular)")
    mixup_alpha: float = hp(4.0, "Beta(α, α) of the mixup coefficient", gt=0)


class ProtocolLoss(Component):
    """A per-sample PLL loss ``ℓ(logits, a)`` wrapped in the protocol; subclasses give ``per_sample``."""

    HParams = ProtocolHParams

    def __init__(self, hp: Any | None = None) -> None:
        super().__init__(hp)
        self.views = frozenset({"strong"}) if self.hp.cr else frozenset()

    @classmethod
    def dataset_defaults(cls, dataset: str, kind: str) -> dict[str, Any]:
        return {"cr": False, "mixup": False} if kind == "tabular" else {}

    def per_sample(self, logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        """The method's loss per sample → ``[B]``."""
        raise NotImplementedError

    def labels(self, step: Step, state: PLLState) -> torch.Tensor:
        """What ``per_sample`` reads per sample (default: the label update's targets ``[B, K]``)."""
        return step.targets

    @hookimpl
    def pllzoo_loss(self, step: Step, state: PLLState) -> torch.Tensor:
        a = self.labels(step, state)
        loss = masked_mean(self.per_sample(step.logits, a), step.mask, step.dist)
        if self.hp.cr:
            loss = loss + masked_mean(self.per_sample(step.logits_strong, a), step.mask, step.dist)
        if self.hp.mixup and step.batch.size * step.dist.world > 1:  # the global batch's size: the same on every rank
            loss = loss + mixup_loss(step, self.per_sample, a, self.hp.mixup_alpha)
        return loss
