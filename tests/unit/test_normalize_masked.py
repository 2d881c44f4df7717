"""pllzoo.losses.normalize_masked: the masked re-normalisation of confidence updates (PRODEN, CORR, HTC)."""

from __future__ import annotations

import torch

from pllzoo.losses import normalize_masked, normalize_rows


def test_ordinary_rows_are_normalize_rows_bit_for_bit():
    p = torch.softmax(torch.randn(6, 5, generator=torch.Generator().manual_seed(0)), 1)
    mask = (torch.rand(6, 5, generator=torch.Generator().manual_seed(1)) < 0.6).float()
    mask[:, 0] = 1
    assert torch.equal(normalize_masked(p, mask, p.log()), normalize_rows(p * mask))


def test_underflowing_row_is_the_softmax_over_the_mask():
    """Logits (−80, −81, 40): the mask {0, 1} holds e^-120 and e^-121 of the mass, 0 in float32; the row is
    softmax((−80, −81)) = (1/(1+e^-1), e^-1/(1+e^-1)) = (0.7311, 0.2689), and sums to 1."""
    z = torch.tensor([[-80.0, -81.0, 40.0]])
    p, mask = torch.softmax(z, 1), torch.tensor([[1.0, 1.0, 0.0]])
    assert float((p * mask).sum()) == 0.0
    out = normalize_masked(p, mask, torch.log_softmax(z, 1))
    torch.testing.assert_close(out, torch.tensor([[0.7311, 0.2689, 0.0]]), atol=1e-4, rtol=0)


def test_subnormal_row_sums_to_one():
    """A masked sum below the smallest normal float (1.2e-38) used to be divided by that number instead
    (rows summing to 0.9975 on Italian); now it is recomputed from the log weights."""
    z = torch.tensor([[-44.0, -45.0, 44.0]])  # mask mass ≈ e^-88 ≈ 6e-39: subnormal
    p, mask = torch.softmax(z, 1), torch.tensor([[1.0, 1.0, 0.0]])
    assert 0 < float((p * mask).sum()) < torch.finfo(torch.float32).tiny
    assert abs(float(normalize_rows(p * mask).sum()) - 1) > 1e-3  # the old division
    assert abs(float(normalize_masked(p, mask, torch.log_softmax(z, 1)).sum()) - 1) < 1e-6


def test_empty_mask_stays_zero():
    z = torch.tensor([[1.0, 2.0]])
    out = normalize_masked(torch.softmax(z, 1), torch.zeros(1, 2), torch.log_softmax(z, 1))
    assert torch.equal(out, torch.zeros(1, 2))
