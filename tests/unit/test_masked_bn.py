"""Masked BatchNorm (pllzoo.masked_bn): a padded pass with statistics over the selected rows equals
torch's BatchNorm on those rows alone — outputs, gradients, running statistics."""

from __future__ import annotations

import copy

import pytest
import torch
from torch import nn

from pllzoo import masked_bn


def _net(dim: int, momentum: float | None) -> nn.Module:
    torch.manual_seed(0)
    if dim == 4:
        return nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.BatchNorm2d(4, momentum=momentum), nn.ReLU(),
                             nn.Flatten(), nn.Linear(4 * 5 * 5, 6), nn.BatchNorm1d(6, momentum=momentum), nn.Linear(6, 3))
    return nn.Sequential(nn.Linear(7, 6), nn.BatchNorm1d(6, momentum=momentum), nn.ReLU(), nn.Linear(6, 3))


@pytest.mark.parametrize("dim", [2, 4])
@pytest.mark.parametrize("momentum", [0.1, None])
def test_padded_pass_equals_subset_pass(dim: int, momentum: float | None) -> None:
    gen = torch.Generator().manual_seed(1)
    b, n = 8, 5
    x = torch.randn((b, 3, 5, 5) if dim == 4 else (b, 7), generator=gen, dtype=torch.float64)
    ref, pad = _net(dim, momentum).double(), None
    pad = copy.deepcopy(ref)
    masks = masked_bn.install(pad, capacity=b)
    assert masked_bn.supports(pad) and len(masks.layers) == (2 if dim == 4 else 1)
    for _ in range(2):  # two steps: the running statistics (and cumulative averages) move twice
        ref.train(), pad.train()
        out_ref = ref(x[:n])
        w = (torch.arange(b) < n).double()
        masks.set(w)
        out_pad = pad(x)
        masks.clear()
        torch.testing.assert_close(out_pad[:n], out_ref, rtol=1e-10, atol=1e-10)
        (out_ref.square().sum()).backward()
        (out_pad[:n].square().sum()).backward()
    for (k, a), (_, p) in zip(ref.state_dict().items(), pad.state_dict().items()):
        torch.testing.assert_close(p, a, rtol=1e-10, atol=1e-10, msg=k)
    for a, p in zip(ref.parameters(), pad.parameters()):
        torch.testing.assert_close(p.grad, a.grad, rtol=1e-10, atol=1e-10)
    assert "row_weight" not in "".join(pad.state_dict())  # checkpoints keep their keys


def test_hand_computed_statistics() -> None:
    """One channel, rows (1, 3, 100) with the last masked out: μ = 2, σ² = 1, unbiased 2."""
    bn = nn.BatchNorm1d(1, momentum=0.5, affine=False)
    masks = masked_bn.install(bn, capacity=3)
    masks.set(torch.tensor([1.0, 1.0, 0.0]))
    y = bn(torch.tensor([[1.0], [3.0], [100.0]]))
    torch.testing.assert_close(y[:2, 0], torch.tensor([-1.0, 1.0]) / (1 + 1e-5) ** 0.5)
    torch.testing.assert_close(bn.running_mean, torch.tensor([1.0]))  # 0.5·0 + 0.5·2
    torch.testing.assert_close(bn.running_var, torch.tensor([1.5]))  # 0.5·1 + 0.5·2


def test_fewer_than_two_rows_leave_running_stats_and_stay_finite() -> None:
    bn = nn.BatchNorm2d(2)
    masks = masked_bn.install(bn, capacity=4)
    before = copy.deepcopy(bn.state_dict())
    for k in (0, 1):
        masks.set((torch.arange(4) < k).float())
        y = bn(torch.randn(4, 2, 3, 3) * 50)
        assert torch.isfinite(y).all()
    for key, value in bn.state_dict().items():
        torch.testing.assert_close(value, before[key], msg=key)


def test_plain_mode_and_eval_are_torch_batchnorm() -> None:
    ref = nn.BatchNorm2d(3)
    pad = copy.deepcopy(ref)
    masks = masked_bn.install(pad, capacity=4)
    x = torch.randn(4, 3, 2, 2)
    torch.testing.assert_close(pad(x), ref(x))  # not set: torch's path, bit for bit
    masks.set(torch.tensor([1.0, 0.0, 1.0, 0.0]))
    pad.eval(), ref.eval()
    torch.testing.assert_close(pad(x), ref(x))  # eval mode uses the running statistics
    assert isinstance(pad, nn.BatchNorm2d)


def test_supports_refuses_unknown_batch_statistics_layers() -> None:
    assert masked_bn.supports(nn.Linear(2, 2))
    assert not masked_bn.supports(nn.Sequential(nn.InstanceNorm2d(2)))
    assert not masked_bn.supports(nn.Sequential(nn.SyncBatchNorm(2)))
