"""CC — Feng et al., "Provably Consistent Partial-Label Learning", NeurIPS 2020
(official code: RCCC, ``cc_loss``).

Algorithm (per mini-batch; no state, no warm-up):
  1. L = −(1/B) Σ_i log Σ_{j∈S_i} p_j(x_i)                → ``cc.loss`` (+ consistency and
     mixup under the SoLar protocol, ``protocol.py``)
     (classifier-consistent under uniform candidate generation: the transition
     factor is constant and drops out)

Deviations:
  * computed as logsumexp(z_S) − logsumexp(z) instead of log of a sum of
    softmax values, which is −inf when that sum underflows.
    Test: tests/unit/test_cc.py::test_stable_for_extreme_logits.
"""

from __future__ import annotations

import torch

from pllzoo import Method, PLLState, Step
from pllzoo_baselines.protocol import ProtocolLoss


def cc_loss(logits: torch.Tensor, candidates: torch.Tensor) -> torch.Tensor:
    """Per-sample ``−log Σ_{j∈S} softmax(z)_j`` → ``[B]``."""
    z = logits.float()
    in_set = z.masked_fill(candidates <= 0, float("-inf"))
    return torch.logsumexp(z, dim=1) - torch.logsumexp(in_set, dim=1)


class CCLoss(ProtocolLoss):
    """The classifier-consistent loss (Alg. l.1) on candidate rows, with consistency and mixup."""

    distributed = True  # with or without mixup (ProtocolLoss: the global batch's)
    ignores = frozenset({"targets"})  # the candidate rows in every term: a label update would change nothing

    def labels(self, step: Step, state: PLLState) -> torch.Tensor:
        return step.batch.candidates

    def per_sample(self, logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        return cc_loss(logits, labels)


CC = Method(
    name="cc",
    loss="cc.loss",
    description="CC: maximise the total probability of the candidate set",
    citation="Feng et al., NeurIPS 2020",
)
