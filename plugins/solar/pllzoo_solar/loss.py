"""SoLar's training loss (paper Eq. 7 and App. B; SoLar code: utils/utils_loss.py `partial_loss`).

Algorithm (``solar.loss``, slot ``loss``; R = reliable samples, U = the rest, Q = pseudo-labels):
  1. η_e = η·min(e / warm-up, 1)
  2. first epoch of a stage (or R empty): L = mean_i ℓ_rn(i), with ℓ_rn(i) = −Σ_j conf_ij log p_ij
  3. otherwise L = η_e·(L_ce + L_mix + L_cr) + (1 − η_e)·mean_{i∈U} ℓ_rn(i), where
     L_ce  = mean_{i∈R} −Σ_j Q_ij log p_j(x^w_i)
     L_cr  = mean_{i∈R} −Σ_j Q_ij log p_j(x^s_i)            (consistency, strong view)
     L_mix = mean CE(f(l·x^w_R + (1−l)·x^w_R[π]), l·Q_R + (1−l)·Q_R[π]),
             l = max(l', 1−l'), l' ~ Beta(4, 4), one l per batch, π a permutation of R

Switches: ``cr`` and ``mixup`` (off on tabular data, as the paper: "not applicable to tabular
data"); ``first_epoch_rn`` (the code's first-epoch rule, which the paper does not mention).
The targets may come from any label update (PRODEN's confidences in ``proden-s-cpe``).

Host synchronisation (``pllzoo.syncs``): without mixup the step reads nothing on the host (an empty R
is a ``torch.where``). With mixup it reads |R| once: the mixup pass runs the network on the R mixed
rows, so the shape of that forward pass (and BatchNorm's statistics over exactly those rows) and the
number of random draws for π depend on |R|.  Unless the trainer offers a padded pass
(``step.forward_padded``, ``train.mixup_rows``, the default under CUDA graphs): then the mixup runs at
the batch's fixed size with BatchNorm's statistics over R only — the same value and gradient for the
same l and π (:func:`pllzoo.mixup.padded_mixup_loss`), π from another stream — and nothing is read.
Tests: tests/test_sync_free.py, tests/test_padded_mixup.py.

Under torchrun (G > 1, ``docs/distributed.md``): the mask is this rank's slice of the global R (the selection
gathers), the means over R (L_ce, L_cr) and over U are the global ones (``masked_mean(..., step.dist)``:
local G·Σ/|R_G|, whose DDP average is the global mean), the "R empty" branch and the mixup's "|R| > 1"
are decided from |R_G| (one all-reduce of the local count; the host read stays one, with mixup only), and
L_mix mixes over the global R (:func:`pllzoo.mixup.mixup_loss` with ``n_rows`` = |R_G|: the same l and π on
every rank, each rank's share of the mixed rows).  The first epoch's mean over the batch needs nothing.
Test: tests/test_distributed.py (solar cases).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from pllzoo import Component, PLLState, Step, hookimpl, hp
from pllzoo.errors import PLLZooError
from pllzoo.losses import masked_mean, soft_cross_entropy
from pllzoo.mixup import mixup_loss
from pllzoo_solar import defaults
from pllzoo_solar.ramps import linear_ramp


@dataclass(frozen=True)
class SolarLossHParams:
    eta: float = hp(0.9, "final weight η of the reliable-sample terms (1 − η weighs the others)", ge=0, le=1)
    warmup_epochs: int = hp(50, "epochs of the linear η ramp", ge=0)
    cr: bool = hp(True, "consistency regularisation on the strong view of reliable samples")
    mixup: bool = hp(True, "mixup within the reliable samples (an extra forward pass)")
    mixup_alpha: float = hp(4.0, "Beta(α, α) of the mixup coefficient", gt=0)
    first_epoch_rn: bool = hp(True, "first epoch of a stage: re-normalised loss on all samples (code)")


class SolarLoss(Component):
    """η-weighted reliable-sample terms plus the re-normalised loss on the rest."""

    HParams = SolarLossHParams
    needs = frozenset({"confidence"})
    distributed = True  # subset means over R_G and U_G (D5), branches from |R_G|, mixup over the global R (D7)

    def __init__(self, hp: Any | None = None) -> None:
        super().__init__(hp)
        self.views = frozenset({"strong"}) if self.hp.cr else frozenset()

    @classmethod
    def dataset_defaults(cls, dataset: str, kind: str) -> dict[str, Any]:
        no_views = {"cr": False, "mixup": False} if kind == "tabular" else {}  # "not applicable to tabular data"
        return {**no_views, **defaults.for_dataset("loss", dataset)}

    @hookimpl
    def pllzoo_on_epoch_start(self, epoch: int) -> None:
        self.epoch, self.eta = epoch, self.hp.eta * linear_ramp(epoch, self.hp.warmup_epochs)

    @hookimpl
    def pllzoo_loss(self, step: Step, state: PLLState) -> torch.Tensor:
        dist = step.dist  # G > 1: means over R and U are the global ones (D5), R_G's count decides the branches
        rn = soft_cross_entropy(step.logits, state.confidence[step.batch.index])  # ℓ_rn, [B]
        if self.hp.first_epoch_rn and self.epoch == 0:  # Alg. l.2
            return rn.mean()  # a full-batch mean: DDP's average over equal slices is the global mean
        if step.mask.dtype != torch.bool:  # R is a set (Alg. l.4: CE, CR and mixup over it, ℓ_rn over U = B \ R);
            # weights read as "> 0" would be honoured by no term (an outside review): refused, not made a set
            raise PLLZooError("solar.loss takes the selection as a set of reliable rows (a bool mask); this "
                              "selection answers float weights")
        reliable, q = step.mask, step.targets
        loss = masked_mean(soft_cross_entropy(step.logits, q), reliable, dist)  # L_ce
        if self.hp.cr:
            loss = loss + masked_mean(soft_cross_entropy(step.logits_strong, q), reliable, dist)
        n_reliable = dist.all_reduce_sum(reliable.sum())  # |R_G| (one process: |R|), on the device
        if self.hp.mixup and step.forward_padded is not None:  # a fixed-shape pass over R: no host read
            loss = loss + mixup_loss(step, soft_cross_entropy, q, self.hp.mixup_alpha, rows=reliable)  # 0 if |R| ≤ 1
        elif self.hp.mixup:  # the step's one host read: the mixed batch is the reliable rows (see the docstring)
            n_reliable = int(n_reliable)
            if n_reliable == 0:  # Alg. l.2
                return rn.mean()
            # Deviation: with one reliable row the reference still adds CE(f(x_r), q_r), its mix with itself
            # (train.py l.319-332); we leave it out, as the padded path does: a BatchNorm1d network cannot
            # forward one row in train mode. Only a batch with exactly one reliable row differs.
            if n_reliable > 1:
                loss = loss + mixup_loss(step, soft_cross_entropy, q, self.hp.mixup_alpha, rows=reliable,
                                         n_rows=n_reliable)
            step.logs["eta"] = self.eta
            return self.eta * loss + (1.0 - self.eta) * masked_mean(rn, ~reliable, dist)  # masked_mean(∅) = 0
        # no host read: an empty R selects the re-normalised loss (l.2) on the device; the other branch gets
        # zero gradients, so the step is the same
        any_reliable = n_reliable > 0
        step.logs["eta"] = any_reliable.to(torch.float64) * self.eta  # 0 where l.2 applied: the epoch sum is unchanged
        unreliable = masked_mean(rn, ~reliable, dist)
        return torch.where(any_reliable, self.eta * loss + (1.0 - self.eta) * unreliable, rn.mean())
