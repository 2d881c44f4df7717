"""CORR — Wu, Wang & Zhang, "Revisiting Consistency Regularization for Deep Partial Label Learning",
ICML 2022, in the two-view form the RECORDS release trains (MediaBrain-SJTU/RECORDS-LTPLL,
``utils/utils_loss.py`` ``CORR_loss``, ``CORR_loss_RECORDS``, ``CORR_loss_RECORDS_mixup``).

Algorithm (per mini-batch; t_i = w_i read *before* the update; one stage):
  1. w_i ← s_i / |S_i|                                                       → setup
  2. L = (1/B) Σ_i [ Σ_{j: t_ij = 0} −log(|1 − p^w_ij| + 1e−9) − log(|1 − p^s_ij| + 1e−9) ]
         + KL(t ‖ p^w) + KL(t ‖ p^s)                                         → ``corr.loss``
     (KL batch-mean: (1/B) Σ_ij t_ij (log t_ij − log p_ij), 0·log 0 = 0; consistency weight 1)
  3. from epoch ``start_epoch`` on (code: upd_start = 1), before the backward pass, with the same
     pre-step outputs:  w_i ← normalise( sqrt( m_i ⊙ p^w_i ⊙ p^s_i ) )        → ``corr.confidence``
     m_i = 1[t_i > 0] (plain CORR: a candidate whose confidence underflowed is dropped for good) or
     s_i (``mask=candidates``: the RECORDS variant); p here is ``step.label_probs``, i.e. debiased
     by the run's logit offset when it has one (RECORDS, ``pllzoo_ltpll.records``).
  4. with ``mixup`` (RECORDS' ``--mixup``), from epoch ``mixup_start_epoch`` on: l ~ Beta(4, 4),
     l ← max(l, 1 − l), one permutation π of the whole batch; both views mixed with the same l and
     π, t_mix = l·t + (1 − l)·t[π]; the term of step 2 on the mixed views with t_mix, weight α.

Deviations:
  * With mixup the release forwards the two views and the two mixed views as one batch (BatchNorm
    over 4B); here the views are one forward (``joint_forward``, the default: BN over 2B, as the
    release without mixup) and the mixed views another (BN over 2B), because the mixed inputs are
    made in the loss, after the views' forward.  ``loss.joint_forward=false`` forwards each view on
    its own, as every other pllzoo method.  Test: tests/unit/test_corr.py::test_joint_forward.
  * Re-normalisation divides by the row sum clamped at the float32 tiny (the release adds 1e-9 to
    it), as every pllzoo confidence update; a row whose products all underflow is computed in log
    space (the release's becomes 0, and its sample loses its targets: pllzoo's targets sum to 1).
    Seen on Italian (tabular, 17.5k rows). Test: tests/unit/test_corr.py::test_underflowing_row_stays_normalised.
  * The loss honours ``step.mask`` (a mean over the selected rows; all rows with the recipe's
    ``pllzoo.all``), so CORR composes with a selection, e.g. SoLar's.
  * With a selection, mixup permutes the whole batch, as the release (selection does not enter it).
  * ``loss.mixup_start_epoch`` is a field of its own; the release starts the mixup term with the
    label updates (``upd_start``).  Both default to 1: set both to move them together.  In the
    epochs before, the release still forwards the mixed views with the others (BatchNorm over 4B,
    see the first deviation); pllzoo forwards no mixed view then.

Under torchrun (G > 1): w rows synchronised (``"rows"``); the means over the global batch's mask
(D5); the mixup of l.4 is the one-process mixup of the global batch (both views and t gathered, one l
and one π of the B rows on every rank; :mod:`pllzoo.mixup`).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from pllzoo import Component, Method, PLLState, Run, Step, hookimpl, hp
from pllzoo.losses import masked_mean, normalize_masked, normalize_rows
from pllzoo.mixup import draw_mixup

NEG_EPS = 1e-9  # −log(|1 − p| + 1e−9) (the release's constant)


@dataclass(frozen=True)
class ConfidenceHParams:
    mask: str = hp("support", "what the update keeps: 'support' of w (CORR) or 'candidates' (RECORDS)",
                   choices=("support", "candidates"))
    start_epoch: int = hp(1, "first epoch (from 0) with label updates (code: upd_start = 1)", ge=0)


class Confidence(Component):
    """CORR's confidences w ∈ R^{N×K}: the targets, re-estimated from both views' agreement."""

    HParams = ConfidenceHParams
    views = frozenset({"strong"})
    provides = frozenset({"confidence"})
    reads = frozenset({"logit_offset"})  # step.label_probs(_of): debiased by the run's logit offset
    distributed = True
    sync = {"confidence": "rows"}  # l.3 writes the batch rows only

    @hookimpl
    def pllzoo_setup_stage(self, run: Run, state: PLLState) -> None:
        state.confidence = normalize_rows(run.candidates.float())  # l.1

    @hookimpl
    def pllzoo_label_update(self, step: Step, state: PLLState) -> torch.Tensor:
        idx = step.batch.index
        targets = state.confidence[idx]  # t: read before the update (a copy: advanced indexing)
        if step.epoch >= self.hp.start_epoch:  # l.3
            keep = (targets > 0).float() if self.hp.mask == "support" else step.batch.candidates
            agree = (keep * step.label_probs * step.label_probs_of(step.logits_strong)).sqrt()
            log_agree = 0.5 * (step.label_log_probs_of(step.logits) + step.label_log_probs_of(step.logits_strong))
            state.confidence[idx] = normalize_masked(agree, keep, log_agree)  # underflow-safe (Deviations)
        return targets


def corr_per_sample(logits_w: torch.Tensor, logits_s: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Step 2 per sample → ``[B]``: the negatives' −log(1 − p) on both views + KL(t ‖ p) on both views."""
    out = torch.zeros(targets.shape[0], device=targets.device)
    negative = (targets == 0).float()
    t_log_t = torch.xlogy(targets, targets).sum(1)
    for z in (logits_w, logits_s):
        log_p = F.log_softmax(z.float(), dim=1)
        out = out - (negative * torch.log((1 - log_p.exp()).abs() + NEG_EPS)).sum(1)
        out = out + t_log_t - (targets * log_p).sum(1)
    return out


@dataclass(frozen=True)
class LossHParams:
    mixup: bool = hp(False, "RECORDS' mixup term (CORR + RECORDS w/ Mixup)")
    mixup_alpha: float = hp(4.0, "Beta(α, α) of the mixup coefficient (code: 4, hard-coded)", gt=0)
    mixup_weight: float = hp(1.0, "weight of the mixup term (code: --alpha 1.0)", ge=0)
    mixup_start_epoch: int = hp(1, "first epoch (from 0) with the mixup term (code: with label updates)", ge=0)
    joint_forward: bool = hp(True, "weak and strong views in one forward pass, BN over both (code); "
                             "false: one pass per view")


class CorrLoss(Component):
    """Negative learning on non-targets + KL to the targets, on the weak and strong views (l.2, l.4)."""

    HParams = LossHParams
    distributed = True  # the mixup of l.4 is the global batch's (pllzoo.mixup); means over the global mask (D5)

    def __init__(self, hp: LossHParams | None = None) -> None:
        super().__init__(hp)
        self.views = frozenset({"strong", "joint"} if self.hp.joint_forward else {"strong"})

    @hookimpl
    def pllzoo_loss(self, step: Step, state: PLLState) -> torch.Tensor:
        t = step.targets
        loss = masked_mean(corr_per_sample(step.logits, step.logits_strong, t), step.mask, step.dist)  # l.2
        step.logs["corr"] = loss.detach()
        global_size = step.batch.size * step.dist.world  # B: the same decision on every rank
        if self.hp.mixup and step.epoch >= self.hp.mixup_start_epoch and global_size > 1:  # l.4
            m = draw_mixup(step, self.hp.mixup_alpha)  # l and π of the global batch; this rank's rows (its slice)
            mix_w, mix_s = m.mix(m.take(step.batch.x)), m.mix(m.take(step.batch.x_strong))
            if self.hp.joint_forward:
                z_w, z_s = step.forward(torch.cat([mix_w, mix_s])).split(mix_w.shape[0])
            else:
                z_w, z_s = step.forward(mix_w), step.forward(mix_s)
            t_own, t_partner = m.pair(m.take(t))
            mixed = corr_per_sample(z_w, z_s, m.lam * t_own + (1 - m.lam) * t_partner)
            mix = masked_mean(mixed, step.mask, step.dist)  # own rows = this rank's slice: its mask applies
            step.logs["corr_mix"] = mix.detach()
            loss = loss + self.hp.mixup_weight * mix
        return loss


CORR = Method(
    name="corr",
    label_update="corr.confidence",
    selection="pllzoo.all",
    loss="corr.loss",
    description="CORR: consistency-regularised PLL, two views (the RECORDS release's form)",
    citation="Wu et al., ICML 2022",
)
