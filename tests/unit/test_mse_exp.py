"""MSE and EXP (complementary-label risks) on hand-computed cases, and the |S| = K guard."""

from __future__ import annotations

import math

import pytest
import torch

from pllzoo_baselines.mse_exp import EXPLoss, ComplementaryHParams, MSELoss, exp_loss, mse_loss

P = torch.tensor([[0.5, 0.3, 0.2]])
LOGITS = P.log()
CANDS = torch.tensor([[1.0, 1.0, 0.0]])


def test_mse_closed_form_by_hand():
    # sum_{k in S} l(p, e_k) - (|S|-1)/(K-|S|) sum_{k not in S} l(p, e_k), l = ||p||^2 - 2 p_k + 1:
    # (0.38 + 0.78) - 1 * 0.98 = 0.18
    torch.testing.assert_close(mse_loss(LOGITS, CANDS), torch.tensor([0.18]), atol=1e-6, rtol=0)


def test_exp_by_hand():
    # (K-1)/(K-|S|) * exp(-P_S) = 2 * exp(-0.8)
    torch.testing.assert_close(exp_loss(LOGITS, CANDS), torch.tensor([2 * math.exp(-0.8)]))


def test_mse_can_be_negative():
    logits = torch.tensor([[10.0, -10.0, -10.0]])
    assert float(mse_loss(logits, torch.tensor([[1.0, 0.0, 0.0]]))) == pytest.approx(0.0, abs=1e-6)
    assert float(mse_loss(torch.tensor([[0.0, 10.0, -10.0]]), CANDS)) < 0.2


def test_full_candidate_set_guard():
    full = torch.ones(1, 3)
    assert torch.isnan(mse_loss(LOGITS, full, "none")).all() or torch.isinf(mse_loss(LOGITS, full, "none")).all()
    assert torch.isinf(exp_loss(LOGITS, full, "none")).all()
    for fn in (mse_loss, exp_loss):
        assert torch.isfinite(fn(LOGITS, full, "clamp")).all()
    for cls in (MSELoss, EXPLoss):
        comp = cls(ComplementaryHParams(cr=False, mixup=False))
        both = torch.cat([CANDS, full])
        out = comp.per_sample(torch.cat([LOGITS, LOGITS]), both)
        assert torch.isfinite(out).all() and float(out[1]) == 0.0  # masked: no supervision


def test_mse_and_exp_average_over_the_rows_that_carry_supervision():
    """A row whose candidate set is every class (|S| = K) says nothing and is left out of the mean, with no selection
    or an all-True one (a review: the mean over both rows, the row counted as 0, passed every other test)."""
    from pllzoo import PLLState, Stage
    from pllzoo.run import Batch, Step

    logits = torch.tensor([[0.5, 0.3, 0.2], [0.1, 0.2, 0.7]]).log()
    cands = torch.tensor([[1.0, 1.0, 0.0], [1.0, 1.0, 1.0]])  # row 1: |S| = K
    for cls, fn in ((MSELoss, mse_loss), (EXPLoss, exp_loss)):
        comp = cls(ComplementaryHParams(cr=False, mixup=False))
        for mask in (None, torch.ones(2, dtype=torch.bool)):
            step = Step(batch=Batch(torch.arange(2), torch.zeros(2, 1), cands, torch.zeros(2, dtype=torch.long)),
                        logits=logits, probs=logits.softmax(1), forward=None, generator=None, epoch=1,
                        stage=Stage(), nominal_batch_size=2, mask=mask)
            torch.testing.assert_close(comp.pllzoo_loss(step, PLLState()), fn(logits[:1], cands[:1])[0])
