"""SoLar's training loss (pllzoo_solar.loss) on a hand-computed 4-sample case (SoLar code: utils/utils_loss.py `partial_loss`)."""

from __future__ import annotations

import math

import pytest
import torch

from pllzoo import PLLState, Stage
from pllzoo.run import Batch, Step
from pllzoo.mixup import mixup_coefficient
from pllzoo_solar.loss import SolarLoss, SolarLossHParams

Z_WEAK = [[2.0, 0.0, -1.0], [0.5, 1.5, 0.0], [0.0, 0.0, 3.0], [1.0, -1.0, 0.5]]
Z_STRONG = [[1.0, 0.5, 0.0], [0.0, 2.0, 1.0], [-1.0, 0.0, 1.0], [0.0, 0.0, 0.0]]
Q = [[0.8, 0.2, 0.0], [0.0, 1.0, 0.0], [0.0, 0.3, 0.7], [0.5, 0.0, 0.5]]  # Sinkhorn targets
CONF = [[0.6, 0.4, 0.0], [0.0, 0.5, 0.5], [0.2, 0.2, 0.6], [1.0, 0.0, 0.0]]  # stored re-normalised targets
X = torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0], [2.0, -1.0]])  # weak inputs (for mixup)
W = torch.tensor([[1.0, -1.0, 0.5], [0.0, 2.0, -0.5]])  # the "network" of the mixup pass: x @ W


def ce(z, t) -> float:
    """−Σ_j t_j log softmax(z)_j, written out."""
    lse = math.log(sum(math.exp(v) for v in z))
    return -sum(tj * (zj - lse) for zj, tj in zip(z, t))


def _mean(values):
    return sum(values) / len(values)


def _setup(epoch: int, mask, generator=None, forward=None, **hp):
    hp = {"eta": 0.9, "warmup_epochs": 4, "cr": True, "mixup": False, **hp}
    comp = SolarLoss(SolarLossHParams(**hp))
    comp.pllzoo_on_epoch_start(epoch)
    idx = torch.tensor([3, 0, 2, 1])  # rows of the confidence table, shuffled
    conf = torch.zeros(4, 3)
    conf[idx] = torch.tensor(CONF)
    logits = torch.tensor(Z_WEAK, requires_grad=True)
    batch = Batch(index=idx, x=X, candidates=(torch.tensor(Q) + torch.tensor(CONF) > 0).float(),
                  y_true=torch.zeros(4, dtype=torch.long))
    step = Step(batch=batch, logits=logits, probs=torch.softmax(logits.detach(), 1), forward=forward,
                generator=generator, epoch=epoch, stage=Stage(), nominal_batch_size=4,
                logits_strong=torch.tensor(Z_STRONG), targets=torch.tensor(Q), mask=torch.tensor(mask))
    return comp, step, PLLState({"confidence": conf})


def _rn(i):
    return ce(Z_WEAK[i], CONF[i])


def test_eta_ramp():
    comp = SolarLoss(SolarLossHParams(eta=0.9, warmup_epochs=50))
    for epoch, eta in [(0, 0.0), (1, 0.018), (25, 0.45), (50, 0.9), (200, 0.9)]:
        comp.pllzoo_on_epoch_start(epoch)
        assert comp.eta == pytest.approx(eta)
    comp = SolarLoss(SolarLossHParams(eta=0.9, warmup_epochs=0))
    comp.pllzoo_on_epoch_start(0)
    assert comp.eta == pytest.approx(0.9)


@pytest.mark.parametrize("mask", [[True, False, True, False], [False] * 4, [True] * 4])
def test_first_epoch_is_rn_on_all_samples(mask):
    comp, step, state = _setup(0, mask, mixup=True)  # mixup must not run either (no generator given)
    loss = comp.pllzoo_loss(step, state)
    assert loss.item() == pytest.approx(_mean([_rn(i) for i in range(4)]), rel=1e-6)


def test_first_epoch_rule_can_be_switched_off():
    # epoch 0 without the rule: η_0 = 0, so only the unreliable rows' rn remains
    comp, step, state = _setup(0, [True, False, True, False], first_epoch_rn=False)
    assert comp.pllzoo_loss(step, state).item() == pytest.approx(_mean([_rn(1), _rn(3)]), rel=1e-6)


def test_empty_reliable_set_falls_back_to_rn():
    comp, step, state = _setup(2, [False] * 4)
    assert comp.pllzoo_loss(step, state).item() == pytest.approx(_mean([_rn(i) for i in range(4)]), rel=1e-6)


def test_formula_by_hand_with_cr():
    # epoch 2 of a 4-epoch ramp: η = 0.45; R = {0, 2}, U = {1, 3}
    comp, step, state = _setup(2, [True, False, True, False])
    l_ce = _mean([ce(Z_WEAK[i], Q[i]) for i in (0, 2)])
    l_cr = _mean([ce(Z_STRONG[i], Q[i]) for i in (0, 2)])
    l_u = _mean([_rn(i) for i in (1, 3)])
    loss = comp.pllzoo_loss(step, state)
    assert loss.item() == pytest.approx(0.45 * (l_ce + l_cr) + 0.55 * l_u, rel=1e-6)
    assert step.logs["eta"] == pytest.approx(0.45)
    loss.backward()
    assert torch.isfinite(step.logits.grad).all()


def test_formula_without_cr():
    comp, step, state = _setup(3, [False, True, True, True], cr=False)
    l_ce = _mean([ce(Z_WEAK[i], Q[i]) for i in (1, 2, 3)])
    assert comp.pllzoo_loss(step, state).item() == pytest.approx(0.675 * l_ce + 0.325 * _rn(0), rel=1e-6)


def test_empty_unreliable_set_gives_no_nan():
    comp, step, state = _setup(10, [True] * 4)  # η = 0.9 after the ramp
    loss = comp.pllzoo_loss(step, state)
    l_ce = _mean([ce(Z_WEAK[i], Q[i]) for i in range(4)])
    l_cr = _mean([ce(Z_STRONG[i], Q[i]) for i in range(4)])
    assert torch.isfinite(loss)
    assert loss.item() == pytest.approx(0.9 * (l_ce + l_cr), rel=1e-6)
    loss.backward()
    assert torch.isfinite(step.logits.grad).all()


def test_mixup_term_by_hand():
    mask = [True, False, True, True]  # R = {0, 2, 3}, U = {1}
    seen = []

    def forward(x):
        seen.append(x.clone())
        return x @ W

    gen = torch.Generator().manual_seed(1234)
    twin = torch.Generator()
    twin.set_state(gen.get_state())  # the same stream, to reproduce l and π
    comp, step, state = _setup(2, mask, generator=gen, forward=forward, mixup=True)
    loss = comp.pllzoo_loss(step, state)

    lam = mixup_coefficient(twin, 4.0)
    perm = torch.randperm(3, generator=twin)
    assert 0.5 <= lam <= 1.0
    r = torch.tensor([0, 2, 3])
    x_mix = lam * X[r] + (1 - lam) * X[r][perm]
    q_r = torch.tensor(Q)[r]
    q_mix = lam * q_r + (1 - lam) * q_r[perm]
    assert len(seen) == 1  # one extra forward pass, on the mixed reliable inputs only
    torch.testing.assert_close(seen[0], x_mix)
    l_mix = _mean([ce(z, t) for z, t in zip((x_mix @ W).tolist(), q_mix.tolist())])
    l_ce = _mean([ce(Z_WEAK[i], Q[i]) for i in (0, 2, 3)])
    l_cr = _mean([ce(Z_STRONG[i], Q[i]) for i in (0, 2, 3)])
    assert loss.item() == pytest.approx(0.45 * (l_ce + l_cr + l_mix) + 0.55 * _rn(1), rel=1e-5)
    # the generator advanced exactly as far as the twin: the run's stream stays reproducible
    assert torch.equal(gen.get_state(), twin.get_state())


def test_mixup_coefficient_range_and_determinism():
    draws = [mixup_coefficient(torch.Generator().manual_seed(s), 4.0) for s in range(200)]
    assert all(0.5 <= v <= 1.0 for v in draws)
    assert len(set(draws)) > 150
    assert mixup_coefficient(torch.Generator().manual_seed(5), 4.0) == mixup_coefficient(
        torch.Generator().manual_seed(5), 4.0)
    # Beta(4, 4) folded at 0.5: mean = 0.5 + E|l − 0.5| ≈ 0.629 (σ of the mean ≈ 0.006 over 200 draws)
    assert 0.6 < sum(draws) / len(draws) < 0.66


def test_dataset_defaults_and_views(registry):
    assert SolarLoss.dataset_defaults("tiny", "tabular") == {"cr": False, "mixup": False}
    assert SolarLoss.dataset_defaults("cifar10lt", "image") == {}
    assert SolarLoss().views == frozenset({"strong"})
    assert SolarLoss(SolarLossHParams(cr=False)).views == frozenset()
    assert SolarLoss(SolarLossHParams(cr=False, mixup=True)).views == frozenset()  # mixup uses the weak view
    method = registry.method("solar")
    tab = registry.build_components(method, dataset=("tiny", "tabular"))["loss"]
    assert (tab.hp.cr, tab.hp.mixup, tab.views) == (False, False, frozenset())
    img = registry.build_components(method, dataset=("cifar10lt", "image"))["loss"]
    assert (img.hp.cr, img.hp.mixup, img.views) == (True, True, frozenset({"strong"}))


def test_mixup_with_a_single_reliable_sample_and_batchnorm():
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(2, 5), torch.nn.BatchNorm1d(5), torch.nn.Linear(5, 3)).train()
    comp, step, state = _setup(2, [False, True, False, False], generator=torch.Generator().manual_seed(0),
                               forward=net, mixup=True)
    loss = comp.pllzoo_loss(step, state)
    assert torch.isfinite(loss)
