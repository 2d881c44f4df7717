"""HTC (Jia et al., AAAI 2024): one whole training step of ``htc.loss`` + ``htc.confidence`` against an
independent re-derivation from the released code (HTC-LTPLL train.py ``train_loop``, utils/utils_loss.py ``PLL_loss``), at epochs 0, 1, 30 and 60.

The case: K = 3, N = 10, B = 8 distinct samples, a linear encoder (4 → 2) under the head classifier, the
tail classifier and the weighting module A with fixed weights.  Compared: the loss, the gradient of every
parameter (encoder, head, tail, A) and W after the post-step update.  From epoch 1 on both branches select
|R| ≥ 2 rows, so both mixup passes run, each with a permutation of R that is not the identity; the mixup
draws (l, σ) are the plugin's own (a spy on ``draw_mixup``): randomness is not what is checked here, how the
draws are used is.  The reference is written with torch primitives only (no pllzoo helper)."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest
import torch
import torch.nn.functional as F

import pllzoo_ltpll.htc as htc
from pllzoo import PLLState, Stage
from pllzoo.run import Batch, Step

K, N, B, DIN, FEAT = 3, 10, 8, 4, 2
EPOCHS = 80  # run.config.epochs: ω_e = 0.5·min(e/80, 1)
CANDS = torch.tensor([[1, 1, 0], [1, 0, 0], [1, 1, 1], [0, 1, 1], [1, 0, 1],
                      [0, 0, 1], [1, 1, 0], [0, 1, 0], [1, 1, 1], [1, 0, 1]], dtype=torch.bool)
IDX = torch.tensor([0, 2, 3, 4, 5, 7, 8, 9])  # distinct rows; rows 1 and 6 are not in the batch


@pytest.fixture(autouse=True)
def _one_thread(one_torch_thread):
    """Bit-for-bit gradient comparisons: one torch thread (conftest.one_torch_thread)."""


def _case():
    """Inputs, both views, W before the step and the four modules, all fixed (no global RNG)."""
    g = torch.Generator().manual_seed(3)
    x = torch.randn(N, DIN, generator=g)
    x_strong = x + 0.3 * torch.randn(N, DIN, generator=g)  # a strong view distinct from the weak one
    enc, head = torch.nn.Linear(DIN, FEAT), torch.nn.Linear(FEAT, K)
    tail, att = torch.nn.Linear(FEAT, K), torch.nn.Linear(2 * K, 2)
    gm = torch.Generator().manual_seed(5)  # weights chosen so that from epoch 1 both branches select ≥ 2 rows, ỹ's
    # argmax covers all 3 classes and the tail's budget from π^T differs from one from π^H (at epoch 30)
    with torch.no_grad():
        for mod in (enc, head):
            for p in mod.parameters():
                p.copy_(torch.randn(p.shape, generator=gm))
        tail.weight.copy_(torch.tensor([[0.5, -1.0], [1.2, 0.1], [-0.3, 0.7]]))
        tail.bias.copy_(torch.tensor([0.1, 0.0, -0.2]))
        att.weight.copy_(torch.linspace(-1, 1, 12).view(2, 6))
        att.bias.copy_(torch.tensor([0.2, -0.1]))
    w0 = CANDS.float() / CANDS.float().sum(1, keepdim=True)  # Y/|S| ...
    w0[2] = torch.tensor([0.6, 0.3, 0.1])  # ... moved by earlier steps on two rows: π^H is not uniform
    w0[8] = torch.tensor([0.1, 0.1, 0.8])
    w0[0] = torch.tensor([0.9, 0.1, 0.0])
    return SimpleNamespace(x=x, xs=x_strong, enc=enc, head=head, tail=tail, att=att, w0=w0)


def _params(c):
    return [*c.enc.parameters(), *c.head.parameters(), *c.tail.parameters(), *c.att.parameters()]


def _plugin_step(c, epoch: int):
    """One step through the components' hooks: label update, loss, gradients, post-step update."""
    state = PLLState({"confidence": c.w0.clone()})
    loss_c, conf = htc.HTCLoss(), htc.HTCConfidence()
    mods = loss_c.pllzoo_modules(SimpleNamespace(model=SimpleNamespace(feature_dim=FEAT), num_classes=K))
    with torch.no_grad():  # the loss's own modules take the case's weights
        mods["tail"].load_state_dict(c.tail.state_dict())
        mods["attention"].load_state_dict(c.att.state_dict())
    loss_c.pllzoo_on_epoch_start(SimpleNamespace(config=SimpleNamespace(epochs=EPOCHS), num_classes=K), epoch, state)

    def forward_with_features(x):
        f = c.enc(x)
        return c.head(f), f

    xw, xs = c.x[IDX], c.xs[IDX]
    fw, fs = c.enc(xw), c.enc(xs)
    batch = Batch(index=IDX, x=xw, candidates=CANDS[IDX].float(), y_true=torch.zeros(B).long(), x_strong=xs)
    gen = torch.Generator().manual_seed(11)
    step = Step(batch=batch, logits=c.head(fw), probs=torch.softmax(c.head(fw).detach(), 1), forward=None,
                generator=gen, device_generator=gen, epoch=epoch, stage=Stage(), nominal_batch_size=B,
                logits_strong=c.head(fs), features=fw, features_strong=fs,
                forward_with_features=forward_with_features)
    step.targets = conf.pllzoo_label_update(step, state)
    loss = loss_c.pllzoo_loss(step, state)
    params = [*c.enc.parameters(), *c.head.parameters(), *mods["tail"].parameters(), *mods["attention"].parameters()]
    grads = torch.autograd.grad(loss, params)
    conf.pllzoo_post_step(step, state)
    return loss.detach(), grads, state.confidence


# ---------------------------------------------------------------------- the reference, from the spec
def _ce(z, u):
    """−Σ_j u_ij log softmax(z)_ij per row (u detached: a target)."""
    return -(u.detach() * F.log_softmax(z, 1)).sum(1)


def _ref_select(loss_vec, u, prior, alpha):
    """R: per class j = argmax u_i, the k_j = max(min(⌈B·π_j·α⌉, |B_j|), 1) smallest ℓ_i (ties: batch order)."""
    cls, chosen = u.argmax(1), []
    for j in range(K):
        members = (cls == j).nonzero().flatten()
        if len(members) == 0:
            continue
        k = max(min(math.ceil(float(prior[j]) * B * alpha), len(members)), 1)
        chosen += members[torch.argsort(loss_vec[members], stable=True)][:k].tolist()
    return sorted(chosen)


def _ref_step(c, epoch: int, draws: list):
    """Loss, gradients and W after the step, written from HTC's ``train_loop`` and ``PLL_loss``; ``draws``: the (l, σ) of the head's,
    then the tail's mixup pass."""
    w = c.w0.clone()
    r = min(epoch / 50, 1.0)  # lin(e, 50)
    eta, alpha, omega = 0.9 * r, 0.2 + 0.4 * r, 0.5 * min(epoch / EPOCHS, 1.0)
    prior_h = w.sum(0) / w.sum()  # π^H: column sums of W
    prior_t = torch.full((K,), 1.0 / K)  # π^T uniform
    xw, xs = c.x[IDX], c.xs[IDX]
    fw, fs = c.enc(xw), c.enc(xs)
    zhw, zhs, ztw, zts = c.head(fw), c.head(fs), c.tail(fw), c.tail(fs)
    t, y = w[IDX].clone(), CANDS[IDX].float()  # t = W[idx] before the step
    draws, sizes = iter(draws), []

    def get_loss(zw, zs, u, prior, classifier):
        pseu = _ce(zw, t).mean()  # L_pseu on the stored W, all rows (both heads)
        rows = _ref_select(_ce(zw, u).detach(), u, prior, alpha)
        sizes.append(len(rows))
        if epoch < 1 or not rows:
            return pseu
        rows = torch.tensor(rows)
        l_cr = _ce(zs[rows], u[rows]).mean()  # strong view on R
        l_mix = 0.0  # |R| = 1: no mixup pass (pllzoo's deviation; the case below avoids it)
        if len(rows) > 1:
            lam, perm = next(draws)
            x_r, u_r = xw[rows], u[rows]  # weak images of R
            z_mix = classifier(c.enc(lam * x_r + (1 - lam) * x_r[perm]))  # the branch's own classifier
            l_mix = _ce(z_mix, lam * u_r + (1 - lam) * u_r[perm]).mean()
        return eta * (l_mix + l_cr) + pseu  # weight 1 on L_pseu

    loss_h = get_loss(zhw, zhs, t, prior_h, c.head)
    y_tail = F.softmax(zhw - 2.0 * torch.log(prior_h), 1).detach()  # τ = 2, not masked by Y
    loss_t = get_loss(ztw, zts, y_tail, prior_t, c.tail)
    q1 = F.softmax(zhw.detach() - torch.log(prior_h + 1e-5), 1)
    q2 = F.softmax(ztw.detach(), 1)
    a = F.softmax(F.leaky_relu(c.att(torch.cat([q1, q2], 1))), 1)
    wts = a / a.norm(dim=1, keepdim=True)  # (w1, w2), w1² + w2² = 1
    p_fused = F.softmax(wts[:, :1] * q1 + wts[:, 1:] * q2, 1)
    loss_f = -(t * torch.log(p_fused + 1e-8)).sum(1).mean()  # against the stored t
    loss = loss_h + loss_t + omega * loss_f
    grads = torch.autograd.grad(loss, _params(c))
    c_tail = F.softmax(ztw.detach(), 1) * y  # pre-step tail prediction on Y
    w[IDX] = 0.4 * w[IDX] + 0.6 * c_tail / c_tail.sum(1, keepdim=True)
    return loss.detach(), grads, w, sizes


@pytest.mark.parametrize("epoch", [0, 1, 30, 60])
def test_whole_step_matches_the_spec(monkeypatch, epoch):
    c = _case()
    draws, draw = [], htc.draw_mixup

    def spy(*args, **kwargs):  # the plugin's mixup draws, in call order (head, then tail)
        draws.append(draw(*args, **kwargs))
        return draws[-1]

    monkeypatch.setattr(htc, "draw_mixup", spy)
    loss, grads, w = _plugin_step(c, epoch)
    ref_loss, ref_grads, ref_w, sizes = _ref_step(c, epoch, [(m.lam, m.partner) for m in draws])
    if epoch == 0:  # L_pseu only: no mixup pass
        assert draws == []
    else:  # both branches select ≥ 2 rows: two mixup passes on distinct rows, σ not the identity, l < 1
        assert len(draws) == 2 and [m.n for m in draws] == sizes and min(sizes) >= 2, sizes
        for m in draws:
            assert not torch.equal(m.partner, torch.arange(m.n)) and 0.5 <= m.lam < 1
    torch.testing.assert_close(loss, ref_loss)
    names = [f"{m}.{n}" for m, mod in (("encoder", c.enc), ("head", c.head), ("tail", c.tail), ("attention", c.att))
             for n, _ in mod.named_parameters()]
    for name, got, want in zip(names, grads, ref_grads):
        torch.testing.assert_close(got, want, msg=lambda m, name=name: f"{name}: {m}")
    if epoch > 0:  # ω_e > 0: A learns (from L_F alone)
        assert grads[-1].abs().max() > 0
    torch.testing.assert_close(w, ref_w)
    torch.testing.assert_close(w[[1, 6]], c.w0[[1, 6]])  # rows outside the batch untouched
