"""SoLar-LA (pllzoo_solar.predict): post-hoc logit adjustment g − ζ·log r (SoLar paper §4.4 and App. C)."""

from __future__ import annotations

import math

import pytest
import torch

from pllzoo import PLLState
from pllzoo.builtin import LogitAdjustHParams
from pllzoo_solar.predict import LogitAdjustment

LOGITS = torch.tensor([[2.0, 1.5, 1.0], [0.0, 0.0, 0.0]])
PRIOR = torch.tensor([0.7, 0.2, 0.1])  # class 0 is the head, class 2 the tail


@pytest.mark.parametrize("zeta", [0.5, 1.0, 2.0])
def test_adjustment_by_hand(zeta):
    out = LogitAdjustment(LogitAdjustHParams(zeta=zeta)).pllzoo_predict(LOGITS, PLLState({"prior": PRIOR}))
    expected = [[g - zeta * math.log(r) for g, r in zip(row, PRIOR.tolist())] for row in LOGITS.tolist()]
    torch.testing.assert_close(out, torch.tensor(expected))


def test_adjustment_moves_argmax_to_tail():
    state = PLLState({"prior": PRIOR})
    assert LOGITS.argmax(1).tolist() == [0, 0]
    # ζ = 0.5: (2 + 0.178, 1.5 + 0.805, 1 + 1.151) = (2.178, 2.305, 2.151) → class 1
    out = LogitAdjustment(LogitAdjustHParams(zeta=0.5)).pllzoo_predict(LOGITS, state)
    assert out.argmax(1).tolist() == [1, 2]
    # ζ = 1: (2.357, 3.109, 3.303) → class 2, the tail
    out = LogitAdjustment().pllzoo_predict(LOGITS, state)
    assert out.argmax(1).tolist() == [2, 2]
    # ζ = 0 changes nothing
    out = LogitAdjustment(LogitAdjustHParams(zeta=0.0)).pllzoo_predict(LOGITS, state)
    torch.testing.assert_close(out, LOGITS)


def test_uniform_prior_is_a_shift_and_zero_prior_stays_finite():
    state = PLLState({"prior": torch.full((3,), 1 / 3)})
    out = LogitAdjustment().pllzoo_predict(LOGITS, state)
    torch.testing.assert_close(out, LOGITS + math.log(3))
    # a class of prior exactly 0 is not adjusted: the clamp gave it +27.6·ζ, every row's argmax (accuracy 0 on
    # Lost with the oracle prior); by hand: (2 + log 2, 1.5 + log 2, 1) and (log 2, log 2, 0)
    out = LogitAdjustment().pllzoo_predict(LOGITS, PLLState({"prior": torch.tensor([0.5, 0.5, 0.0])}))
    torch.testing.assert_close(out, torch.tensor([[2 + math.log(2), 1.5 + math.log(2), 1.0],
                                                  [math.log(2), math.log(2), 0.0]]))
    assert out.argmax(1).tolist() == [0, 0]
