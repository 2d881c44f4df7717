"""The SoLar paper's protocol for baselines: consistency regularisation + mixup around a PLL loss.

"We equip all the baselines except PiCO with consistency regularization and Mixup" (SoLar §4.1).
How is not public; this is our inference (SoLar paper §4.1), modelled on SoLar's own terms:

  L = mean_i ℓ(f(x^w_i), a_i)                                   the method's own loss
    + mean_i ℓ'(f(x^s_i), b_i)                       if ``cr``: strong view
    + mean_i [l·ℓ'(f(x_mix,i), b_i) + (1−l)·ℓ'(f(x_mix,i), b_π(i))]   if ``mixup``

where a_i is what the method's loss reads for sample i.  A target-free loss (CC, MSE, EXP) repeats itself
on the candidate row: ℓ' = ℓ, b_i = a_i.  A method that keeps a per-sample target t_i (PRODEN's confidences,
LWS's weights re-normalised on the candidates: ``protocol_terms = "targets"``) adds CE on it: ℓ' = soft CE,
b_i = t_i, the label update's targets (the SoLar paper's baseline protocol, §4.1; for PRODEN, whose own loss is
that CE, the two are one).
For soft-target CE the mixed term equals CE with mixed targets.
``cr`` and ``mixup`` are on by default and off on tabular data ("not applicable to tabular data").
The loss and consistency terms are means over ``step.mask``; the mixup term mixes the whole batch, also beside a
selection swapped in (``proden+selection=solar.classwise``): the methods' own recipes select every row
(``pllzoo.all``), and a loss cannot tell that mask from another's without a host read in every step, nor mix over
it without changing their recorded runs.  SoLar's own loss mixes its reliable rows only.

Under torchrun (G > 1, ``docs/distributed.md``) the means over a selection mask are over the global
batch's mask (``masked_mean`` with ``step.dist``, D5) and the mixup is the global batch's (one l, one
π of the B rows, the same on every rank and equal to the one-process draw; :mod:`pllzoo.mixup`), so a
subclass that opts in (``distributed = True`` on its own class) needs only its state's ``sync``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import torch

from pllzoo import Component, PLLState, Step, hookimpl, hp
from pllzoo.losses import masked_mean, soft_cross_entropy
from pllzoo.mixup import mixup_loss


@dataclass(frozen=True)
class ProtocolHParams:
    cr: bool = hp(True, "consistency: the same loss on the strong view (SoLar protocol; off on tabular)")
    mixup: bool = hp(True, "mixup: the loss on mixed inputs with permuted labels (SoLar protocol; off on tabular)")
    mixup_alpha: float = hp(4.0, "Beta(α, α) of the mixup coefficient", gt=0)


class ProtocolLoss(Component):
    """A per-sample PLL loss ``ℓ(logits, a)`` wrapped in the protocol; subclasses give ``per_sample``, and
    ``protocol_terms = "targets"`` when the consistency and mixup terms are CE on the targets (module doc)."""

    HParams = ProtocolHParams
    protocol_terms: ClassVar[str] = "loss"  # "loss": ℓ on a_i again; "targets": soft CE on step.targets

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
        aux, b = (soft_cross_entropy, step.targets) if self.protocol_terms == "targets" else (self.per_sample, a)
        if self.hp.cr:
            loss = loss + masked_mean(aux(step.logits_strong, b), step.mask, step.dist)
        if self.hp.mixup and step.batch.size * step.dist.world > 1:  # the global batch's size: the same on every rank
            loss = loss + mixup_loss(step, aux, b, self.hp.mixup_alpha)
        return loss
