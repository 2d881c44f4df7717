"""PRODEN — Lv et al., "Progressive Identification of True Labels for Partial-Label
Learning", ICML 2020 (official code: Lvcrezia77/PRODEN).

Algorithm (per mini-batch, no warm-up):
  1. w_i ← s_i / |S_i| for every training sample (uniform on the candidate set)
  2. L = −(1/B) Σ_i Σ_j w_ij log p_j(x_i)                  → ``proden.loss`` (+ consistency and mixup
     under the SoLar protocol, ``protocol.py``)
  3. after the optimizer step, on the batch rows only:
     w_i ← p(x_i) ⊙ m_i / Σ_j p_j(x_i) m_ij, with p from the *same* (pre-step)
     forward pass                                          → ``proden.confidence``

Deviations:
  * log-softmax instead of the official ``log(softmax)``, which gives 0·(−∞) = NaN
    when a probability underflows (a pitfall of the official code).
  * The mask m is the support of the current w, as the official code
    (``mask="support"``); ``mask="candidates"`` uses the candidate set instead, so
    a candidate whose probability underflowed to 0 is not dropped forever.
    Test: tests/unit/test_proden.py::test_mask_modes.
  * A row whose kept probabilities all underflow (the model puts its mass outside the candidates) is
    the softmax over the kept labels of the logits (``pllzoo.losses.normalize_masked``), so it sums to
    1; the official division gives NaN (0/0).  Every other row as before, bit for bit.
    Test: tests/unit/test_normalize_masked.py.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from pllzoo import Component, Method, PLLState, Run, Step, hookimpl, hp
from pllzoo.losses import normalize_masked, normalize_rows, soft_cross_entropy
from pllzoo_baselines.protocol import ProtocolLoss


@dataclass(frozen=True)
class ConfidenceHParams:
    mask: str = hp(
        "support", "what re-normalisation keeps: 'support' of w (official) or 'candidates'",
        choices=("support", "candidates"),
    )


class Confidence(Component):
    """PRODEN's confidence table w ∈ R^{N×K}: the targets, re-estimated after each step."""

    HParams = ConfidenceHParams
    provides = frozenset({"confidence"})
    reads = frozenset({"logit_offset"})  # step.label_probs: debiased when the recipe offsets the logits
    distributed = True
    sync = {"confidence": "rows"}  # l.3 writes the batch rows only

    @hookimpl
    def pllzoo_setup_stage(self, run: Run, state: PLLState) -> None:
        state.confidence = normalize_rows(run.candidates.float())  # Alg. l.1, [N, K]

    @hookimpl
    def pllzoo_label_update(self, step: Step, state: PLLState) -> torch.Tensor:
        return state.confidence[step.batch.index]  # targets of l.2

    def _keep(self, weights: torch.Tensor, candidates: torch.Tensor) -> torch.Tensor:
        """The labels re-normalisation keeps: the support of ``weights`` or the candidate set."""
        return (weights > 0).float() if self.hp.mask == "support" else candidates

    @hookimpl
    def pllzoo_post_step(self, step: Step, state: PLLState) -> None:
        idx = step.batch.index
        keep = self._keep(state.confidence[idx], step.batch.candidates)
        log_p = step.label_log_probs_of(step.logits)
        state.confidence[idx] = normalize_masked(step.label_probs, keep, log_p)  # Alg. l.3 (pre-step p; debiased
        # by the run's logit offset when it has one, e.g. RECORDS: Hong et al. 2023, proden + records.prior)


class ProdenLoss(ProtocolLoss):
    """−Σ_j w_ij log p_ij on the weak view (Alg. l.2), with the protocol's consistency and mixup."""

    distributed = True  # with or without mixup (ProtocolLoss: the global batch's)

    def per_sample(self, logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        return soft_cross_entropy(logits, labels)


PRODEN = Method(
    name="proden",
    label_update="proden.confidence",
    selection="pllzoo.all",
    loss="proden.loss",
    description="PRODEN: self-training on progressively re-weighted candidate labels",
    citation="Lv et al., ICML 2020",
)
