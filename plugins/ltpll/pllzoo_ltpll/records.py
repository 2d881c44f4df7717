"""RECORDS — Hong et al., "Long-Tailed Partial Label Learning via Dynamic Rebalancing", ICLR 2023
(official code: MediaBrain-SJTU/RECORDS-LTPLL, ``CORR_loss_RECORDS``, ``train.py`` ``test``).

A parameter-free estimate of the training prior from the model itself, used to debias the
disambiguation step of any PLL method (``records.prior``, slot ``estimator``):

  1. μ ← 0 at the start of training                                             → setup
  every step, before the label update (``pllzoo_logit_offset``):
  2. μ ← m·μ + (1 − m)·mean_i (f^w_i + f^s_i)/2   (encoder features of both views; the weak
     view's alone when the run has no strong view)
  3. π̂ ← softmax(head(μ)) with the pre-step classifier head
  4. offset ← log(π̂ + ε): the label update reads softmax(z − log(π̂ + ε))   (``step.label_probs``)
  after the epoch, before evaluation:
  5. π̂ ← softmax(head(μ)) with the current head; with ``predict=pllzoo.logit_adjust`` the test
     prediction is argmax (z − log π̂)                                          → ``state.prior``

The loss is not adjusted.  Which label updates honour the offset: PRODEN's and CORR's
(``pllzoo_baselines``) and HTC's W update (``pllzoo_ltpll.htc``); with CC (no label update) RECORDS
only debiases the prediction.

Recipes (``RECIPES``): ``corr-records`` and ``corr-records-mixup`` (the RECORDS README's CORR +
RECORDS, without and with mixup), ``proden-records`` (``Proden_loss_RECORDS``, present in the
released file but not wired into its runner: one view, so without the consistency and mixup
terms that pllzoo's ``proden`` adds under the SoLar protocol) and ``cc-records`` (prediction only).

Deviations:
  * ε in the test-time adjustment: ``pllzoo.logit_adjust`` clamps π̂ at 1e-12 instead of adding
    1e-9.  The adjusted logits differ by log(1 + 1e-9/π̂_j) per class: below 1e-6 while π̂_j > 1e-3,
    so only a near-tie of the adjusted logits (within that difference) can change the argmax.  Below
    that the gap grows (0.69 at π̂_j = 1e-9, 6.9 at 1e-12), and a π̂_j that underflows to exactly 0
    (softmax(fc(μ)) with that logit ~100 below the largest) is not shifted at all where the release adds
    −log 1e-9 = 20.7 (``LogitAdjustment``'s zero-prior rule, made for oracle priors).
    Test: tests/unit/test_records.py::test_prediction_adjusts_by_the_current_prior.
  * ``proden-records`` re-normalises over the candidate set Y (``label_update.mask=candidates``),
    not the support of the current confidences as the released ``Proden_loss_RECORDS``: with a
    prior that moves, a candidate whose confidence underflowed must be able to come back (the
    released CORR + RECORDS masks by Y for the same reason).  Test:
    tests/unit/test_corr_records_whole_step.py::test_proden_records_recipe_hparams.
  * Two views' features are averaged only when the run forwards a strong view (``corr-records``;
    ``proden-records`` forwards one, as the released PRODEN variant, unless its ``loss.cr`` or
    ``loss.mixup`` is switched on).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import torch

from pllzoo import Component, Method, PLLState, Run, Step, hookimpl, hp


@dataclass(frozen=True)
class FeaturePriorHParams:
    momentum: float = hp(0.9, "m: μ ← m·μ + (1 − m)·batch mean of the features (code: --m 0.9)", ge=0, lt=1)
    eps: float = hp(1e-9, "ε of the offset log(π̂ + ε)", ge=0)


class FeaturePrior(Component):
    """The classifier head on a momentum mean of the training features, as the training prior."""

    HParams = FeaturePriorHParams
    views = frozenset({"features"})
    provides = frozenset({"prior", "records_mu"})
    distributed = True  # μ from the global batch's feature mean (step.dist.batch_mean); both keys replicated

    @hookimpl
    def pllzoo_setup_stage(self, run: Run, state: PLLState) -> None:
        self._head = run.model.head
        self._true = torch.as_tensor(run.data.train_counts, dtype=torch.float32, device=run.device)
        self._true = self._true / self._true.sum()  # logging only (prior_tv)
        state.records_mu = torch.zeros(run.model.feature_dim, device=run.device)  # l.1
        state.prior = self._estimate(state)

    @torch.no_grad()
    def _estimate(self, state: PLLState) -> torch.Tensor:
        """π̂ = softmax(head(μ)), float32 ``[K]`` (l.3, l.5)."""
        return torch.softmax(self._head(state.records_mu.to(self._head.weight.dtype)).float(), dim=0)

    @hookimpl
    def pllzoo_logit_offset(self, step: Step, state: PLLState) -> torch.Tensor:
        feats = step.features if step.features_strong is None else (step.features + step.features_strong) / 2
        m = self.hp.momentum
        state.records_mu = m * state.records_mu + (1 - m) * step.dist.batch_mean(feats.detach().float())  # l.2, over the
        # global batch under DDP (one all-reduce of the feature sum and count)
        state.prior = self._estimate(state)  # l.3: the head before this step's update
        return torch.log(state.prior + self.hp.eps)  # l.4

    @hookimpl
    def pllzoo_on_epoch_end(self, run: Run, state: PLLState) -> dict[str, Any]:
        state.prior = self._estimate(state)  # l.5: the head after the epoch's last step
        return {"prior_tv": 0.5 * float((state.prior - self._true).abs().sum()),
                "prior": [round(float(v), 6) for v in state.prior]}  # as SoLar's: `pllzoo plot` draws it


# ---------------------------------------------------------------------- recipes
def _debiased(base: Method, name: str, description: str, **hparams: Any) -> Method:
    return dataclasses.replace(base, name=name, estimator="records.prior", predict="pllzoo.logit_adjust",
                               hparams={**base.hparams, **hparams}, description=description,
                               citation="Hong et al., ICLR 2023")


def _recipes() -> list[Method]:
    from pllzoo_baselines.cc import CC
    from pllzoo_baselines.corr import CORR
    from pllzoo_baselines.proden import PRODEN

    return [
        _debiased(CORR, "corr-records", "CORR + RECORDS: CORR's update debiased by the feature-mean prior "
                  "(RECORDS README)", **{"label_update.mask": "candidates"}),
        _debiased(CORR, "corr-records-mixup", "CORR + RECORDS with CORR's mixup term (RECORDS README)",
                  **{"label_update.mask": "candidates", "loss.mixup": True}),
        _debiased(PRODEN, "proden-records", "PRODEN + RECORDS: PRODEN's confidences debiased by the "
                  "feature-mean prior (one view, as Proden_loss_RECORDS)",
                  **{"label_update.mask": "candidates", "loss.cr": False, "loss.mixup": False}),
        _debiased(CC, "cc-records", "CC + RECORDS: CC's prediction debiased by the feature-mean prior"),
    ]


RECIPES = _recipes()
