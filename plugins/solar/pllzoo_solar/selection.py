"""SoLar's reliable-sample selection: class-wise small loss ∪ high confidence (paper §3.3; SoLar code: train.py `train_loop`).

Algorithm (``solar.classwise``, slot ``selection``; per mini-batch, targets Q from the label update):
  1. ρ_e = ρ_start + (ρ_end − ρ_start)·min(e / warm-up, 1)
  2. ŷ_i = argmax_j Q_ij;  ℓ_i = −Σ_j Q_ij log p_ij;  B_j = {i : ŷ_i = j}
  3. k_j = max(min(⌈B·r_j·ρ_e⌉, |B_j|), 1) for every non-empty B_j (B: the nominal batch size)
  4. small-loss set: the k_j members of B_j with the smallest ℓ_i
  5. high-confidence set: e_i = Σ_j Q_ij p_ij > τ (dot product with the unmasked softmax)
  6. reliable = small-loss ∪ high-confidence

Ablations (``mode``): ``global`` keeps the ⌈B·ρ_e⌉ smallest losses of the whole batch (SoLar w GS);
``confidence`` keeps only step 5 (SoLar w/o S-SL).

Deviations:
  * no per-class Python loop: one stable sort by (class, loss), within-class ranks from cumulative
    counts, compared with a per-class quota tensor (the code loops over K classes with numpy);
    ties in the loss keep batch order (the reference's sort is unstable).
    Test: tests/unit/test_solar_selection.py
  * ``confidence="cosine"`` normalises e_i, as the paper's text says; the code's dot product is the default.
Under torchrun (G > 1, ``docs/distributed.md``): ℓ, ŷ and e of the ranks' slices are gathered (3B numbers per step),
every rank computes the global mask with the budgets of the global B (the shared :mod:`pllzoo.selection`
routines, ties in batch order) and keeps its slice, so |R_G| is the same on every rank; the selected
fractions are logged over the global batch.  Test: tests/test_distributed.py (solar cases).
Host synchronisation: none (class counts by ``scatter_add``, not CUDA's syncing ``bincount``).
Test: tests/test_sync_free.py.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from pllzoo import Component, PLLState, Run, Step, hookimpl, hp
from pllzoo.ddp import rank_slice
from pllzoo.losses import soft_cross_entropy
from pllzoo.metrics import shot_groups
from pllzoo.selection import classwise_quota, global_small_loss_mask, small_loss_mask  # noqa: F401 (re-exported)
from pllzoo_solar import defaults
from pllzoo_solar.ramps import linear_ramp


@dataclass(frozen=True)
class SelectionHParams:
    rho_start: float = hp(0.2, "small-loss ratio ρ at epoch 0", ge=0, le=1)
    rho_end: float = hp(0.8, "ρ after the ramp (code default 0.8; README: 0.6 CIFAR-10, 0.5 CIFAR-100)", ge=0, le=1)
    warmup_epochs: int = hp(50, "epochs of the linear ρ ramp", ge=0)
    tau: float = hp(0.99, "high-confidence threshold τ", ge=0, le=1)
    mode: str = hp("classwise", "classwise (SoLar) | global (w GS) | confidence (w/o S-SL)",
                   choices=("classwise", "global", "confidence"))
    confidence: str = hp("dot", "dot: Σ Q·p (code); cosine: normalised (paper text)", choices=("dot", "cosine"))
    at_least_one: bool = hp(True, "k_j ≥ 1 for every present class (code); False: the paper's min(⌈B r_j ρ⌉, |B_j|)")


def confidence_score(q: torch.Tensor, p: torch.Tensor, kind: str) -> torch.Tensor:
    """e_i = Σ_j Q_ij p_ij, or its cosine form → ``[B]``."""
    e = (q * p).sum(1)
    return e / (q.norm(dim=1) * p.norm(dim=1)).clamp_min(1e-12) if kind == "cosine" else e


class ClasswiseSelection(Component):
    """Reliable samples whose pseudo-label distribution follows the estimated prior."""

    HParams = SelectionHParams
    needs = frozenset({"prior"})
    reads = frozenset({"targets"})  # the label update's pseudo-labels Q (Alg. l.2): a swapped update has effect here
    distributed = True  # selection over the global batch (D4): |R_G| is the same on every rank

    @classmethod
    def dataset_defaults(cls, dataset: str, kind: str) -> dict[str, Any]:
        return defaults.for_dataset("selection", dataset)

    @hookimpl
    def pllzoo_setup_stage(self, run: Run) -> None:
        g = shot_groups(run.data.train_counts)  # logging only: selected fraction per shot group
        self._group = (g.medium.long() + 2 * g.few.long()).to(run.device)

    @hookimpl
    def pllzoo_on_epoch_start(self, epoch: int) -> None:
        self.rho = self.hp.rho_start + (self.hp.rho_end - self.hp.rho_start) * linear_ramp(epoch, self.hp.warmup_epochs)

    @hookimpl
    def pllzoo_select(self, step: Step, state: PLLState) -> torch.Tensor:
        dist = step.dist  # G > 1: the inputs of the global batch gathered, the global mask, this rank's slice (D4)
        q, p = step.targets, step.probs
        loss = dist.gather(soft_cross_entropy(step.logits.detach(), q))  # Alg. l.2, [B]
        score = dist.gather(confidence_score(q, p, self.hp.confidence))  # e_i, [B]
        if self.hp.mode == "classwise":
            pseudo = dist.gather(q.argmax(1))  # [B]
            quota = classwise_quota(pseudo, state.prior, self.rho, step.nominal_batch_size, self.hp.at_least_one)
            mask = small_loss_mask(pseudo, loss, quota)
        elif self.hp.mode == "global":
            mask = global_small_loss_mask(loss, self.rho)
        else:
            mask = torch.zeros_like(loss, dtype=torch.bool)
        mask |= score > self.hp.tau  # l.5–6
        self._log(step, mask)
        return rank_slice(mask, dist)  # [b]

    def _log(self, step: Step, mask: torch.Tensor) -> None:
        """Selected fractions of the global batch (``mask`` ``[B]``), the same on every rank."""
        group = self._group[step.dist.gather(step.batch.y_true)]  # true labels: logging only
        for gid, name in enumerate(("many", "medium", "few")):
            members = (group == gid).float()
            step.logs[f"selected_{name}"] = (mask.float() * members).sum() / members.sum().clamp_min(1.0)
        step.logs["selected"] = mask.float().mean()
