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


def test_lws_consistency_and_mixup_are_ce_on_its_targets_by_hand():
    """The SoLar paper's baseline protocol (§4.1): a method that keeps a per-sample target (LWS: its weights
    re-normalised on the candidates) adds CE(f(x^s), t) and CE(f(x_mix), t_mix); its own loss, the LWS sigmoid
    loss, stays on the weak view."""
    from pllzoo.losses import normalize_rows, soft_cross_entropy
    from pllzoo_baselines.lws import LWSHParams, LWSLoss, lws_loss

    net = torch.nn.Linear(2, 3)
    comp = LWSLoss(LWSHParams(cr=True, mixup=True, alpha=1.0, beta=2.0))
    step = _step(net, torch.Generator().manual_seed(7))
    w = torch.tensor([[0.5, 0.2, 0.3], [0.1, 0.6, 0.3], [0.9, 0.05, 0.05], [0.2, 0.3, 0.5]])
    state = PLLState()
    state.lws_weights = w
    y = step.batch.candidates
    step.targets = normalize_rows(w * y)  # what lws.weights hands on (its label update)
    got = comp.pllzoo_loss(step, state)
    twin = torch.Generator().manual_seed(7)
    lam = mixup_coefficient(twin, 4.0)
    perm = torch.randperm(4, generator=twin)
    z_mix = net(lam * step.batch.x + (1 - lam) * step.batch.x[perm])
    t = step.targets
    expected = (lws_loss(step.logits, w, y, 1.0, 2.0).mean() + soft_cross_entropy(step.logits_strong, t).mean()
                + soft_cross_entropy(z_mix, lam * t + (1 - lam) * t[perm]).mean())
    torch.testing.assert_close(got, expected)


def test_lws_protocol_terms_name_new_image_runs_and_keep_tabular_ids():
    """The terms' choice is a hyper-parameter: "targets" (the default on images) is named in the config, so LWS
    image runs recorded with the LWS loss in those terms are not reused as these; "loss" brings that back; on
    tabular data (terms off) it is "loss", unnamed, and the recorded ids stand."""
    from pllzoo.hparams import named
    from pllzoo_baselines.lws import LWSHParams, LWSLoss

    assert LWSLoss.dataset_defaults("lost", "tabular") == {"cr": False, "mixup": False, "protocol_terms": "loss"}
    assert LWSLoss.dataset_defaults("cifar10lt", "image") == {}
    assert named(LWSHParams())["protocol_terms"] == "targets"
    assert "protocol_terms" not in named(LWSHParams(cr=False, mixup=False, protocol_terms="loss"))
    assert LWSLoss(LWSHParams(protocol_terms="loss")).protocol_terms == "loss"
