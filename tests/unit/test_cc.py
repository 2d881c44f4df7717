"""CC's loss on hand-computed cases."""

from __future__ import annotations

import math

import torch

from pllzoo_baselines.cc import cc_loss


def test_cc_loss_by_hand():
    logits = torch.log(torch.tensor([[0.2, 0.6, 0.2], [0.5, 0.1, 0.4]]))
    cands = torch.tensor([[1.0, 1.0, 0.0], [0.0, 1.0, 1.0]])
    # -log(0.2 + 0.6), -log(0.1 + 0.4)
    torch.testing.assert_close(cc_loss(logits, cands), torch.tensor([-math.log(0.8), -math.log(0.5)]))


def test_full_candidate_set_costs_nothing():
    logits = torch.randn(4, 5)
    torch.testing.assert_close(cc_loss(logits, torch.ones(4, 5)), torch.zeros(4), atol=1e-6, rtol=0)


def test_stable_for_extreme_logits():
    # the only candidate has probability e^-200: log(softmax) would give inf, logsumexp gives 200
    logits = torch.tensor([[0.0, 200.0]])
    out = cc_loss(logits, torch.tensor([[1.0, 0.0]]))
    assert torch.isfinite(out).all() and abs(float(out) - 200.0) < 1e-3
