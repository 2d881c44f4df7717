"""The SoLar protocol for baselines: loss + consistency on the strong view + mixup, by hand."""

from __future__ import annotations

import torch

from pllzoo import PLLState, Stage
from pllzoo.mixup import mixup_coefficient
from pllzoo.run import Batch, Step
from pllzoo_baselines.cc import CCLoss, cc_loss
from pllzoo_baselines.protocol import ProtocolHParams


def _step(net, gen):
    torch.manual_seed(0)
    x, xs = torch.randn(4, 2), torch.randn(4, 2)
    cands = torch.tensor([[1.0, 1.0, 0.0], [0.0, 1.0, 1.0], [1.0, 0.0, 0.0], [1.0, 1.0, 1.0]])
    batch = Batch(torch.arange(4), x, cands, torch.zeros(4).long(), x_strong=xs)
    logits = net(x)
    return Step(batch=batch, logits=logits, probs=logits.softmax(1).detach(), forward=net, generator=gen,
                epoch=1, stage=Stage(), nominal_batch_size=4, logits_strong=net(xs),
                mask=torch.ones(4, dtype=torch.bool))


def test_cc_with_consistency_and_mixup_by_hand():
    net = torch.nn.Linear(2, 3)
    comp = CCLoss(ProtocolHParams(cr=True, mixup=True))
    assert comp.views == {"strong"}
    step = _step(net, torch.Generator().manual_seed(7))
    got = comp.pllzoo_loss(step, PLLState())
    twin = torch.Generator().manual_seed(7)
    lam = mixup_coefficient(twin, 4.0)
    perm = torch.randperm(4, generator=twin)
    x, y = step.batch.x, step.batch.candidates
    z_mix = net(lam * x + (1 - lam) * x[perm])
    expected = (cc_loss(step.logits, y).mean() + cc_loss(step.logits_strong, y).mean()
                + (lam * cc_loss(z_mix, y) + (1 - lam) * cc_loss(z_mix, y[perm])).mean())
    torch.testing.assert_close(got, expected)


def test_switches_and_tabular_defaults():
    net = torch.nn.Linear(2, 3)
    comp = CCLoss(ProtocolHParams(cr=False, mixup=False))
    assert comp.views == frozenset()
    step = _step(net, torch.Generator().manual_seed(0))
    torch.testing.assert_close(comp.pllzoo_loss(step, PLLState()), cc_loss(step.logits, step.batch.candidates).mean())
    assert CCLoss.dataset_defaults("birdsong", "tabular") == {"cr": False, "mixup": False}
    assert CCLoss.dataset_defaults("cifar10lt", "image") == {}
