"""CORR + RECORDS (Hong et al., ICLR 2023) over whole training steps against an independent re-derivation
from the released code (RECORDS-LTPLL utils/utils_loss.py ``CORR_loss``, ``CORR_loss_RECORDS``, their mixup
variant), and the ``proden-records`` recipe's hyper-parameters.

The case: K = 3, N = 6, B = 4 distinct samples, a linear encoder (3 → 2) under the linear head, the
components ``records.prior`` (μ, π̂ and the offset log(π̂ + ε)), ``corr.confidence`` with
``mask=candidates`` and ``corr.loss`` with its mixup term (the ``corr-records-mixup`` recipe), called in the
trainer's order: offset → label update → loss → SGD step.  Four steps at epochs 0, 1, 1, 2 with plain SGD
between them, so each step's π̂ comes from a different pre-step head.  Row 1's candidate 2 starts at
confidence 0 (as if it had underflowed): epoch 0 treats it as a negative, epoch 1's update (mask Y) brings it
back.  Compared at every step: μ, π̂, the targets, the loss, every parameter's gradient and W; after the
last, the epoch-end prior.  The mixup draws (l, π) are the plugin's own (a spy on ``draw_mixup``);
each is checked to be a permutation of distinct rows that is not the identity.  The reference uses torch
primitives only (no pllzoo helper)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch
import torch.nn.functional as F

import pllzoo_baselines.corr as corr
from pllzoo import PLLState, Stage
from pllzoo.run import Batch, Step
from pllzoo_baselines.corr import Confidence, ConfidenceHParams, CorrLoss, LossHParams
from pllzoo_ltpll.records import RECIPES, FeaturePrior

K, N, DIN, FEAT = 3, 6, 3, 2
CANDS = torch.tensor([[1, 1, 0], [1, 1, 1], [0, 1, 1], [1, 0, 1], [1, 1, 0], [0, 0, 1]], dtype=torch.bool)
SCHEDULE = [(0, [3, 1, 0, 2]), (1, [3, 1, 0, 2]), (1, [4, 1, 5, 2]), (2, [0, 1, 2, 3])]  # (epoch, batch rows)
LR = 0.5  # plain SGD between steps: the head moves, so π̂ must be read from the pre-step head


@pytest.fixture(autouse=True)
def _one_thread(one_torch_thread):
    """Bit-for-bit gradient comparisons: one torch thread (conftest.one_torch_thread)."""


class _Model(torch.nn.Module):
    feature_dim = FEAT

    def __init__(self):
        super().__init__()
        g = torch.Generator().manual_seed(7)
        self.enc, self.head = torch.nn.Linear(DIN, FEAT), torch.nn.Linear(FEAT, K)
        with torch.no_grad():
            for p in self.parameters():
                p.copy_(torch.randn(p.shape, generator=g))

    def forward(self, x):
        return self.head(self.enc(x))


def _case():
    g = torch.Generator().manual_seed(2)
    x = torch.randn(N, DIN, generator=g)
    x_strong = x + 0.5 * torch.randn(N, DIN, generator=g)  # a strong view distinct from the weak one
    model = _Model()
    run = SimpleNamespace(model=model, data=SimpleNamespace(train_counts=[5, 3, 1]), device=torch.device("cpu"),
                          candidates=CANDS)
    return x, x_strong, model, run


# ---------------------------------------------------------------------- the reference, from the spec
def _corr_term(z_w, z_s, t):
    """(1/B) Σ_i Σ_{j: t_ij = 0} [−log(|1 − p^w_ij| + 1e−9) − log(|1 − p^s_ij| + 1e−9)] + KL(t‖p^w) + KL(t‖p^s),
    KL = F.kl_div(log_softmax(z), t, 'batchmean') as the release."""
    p_w, p_s = F.softmax(z_w, 1), F.softmax(z_s, 1)
    neg = (t == 0).float()
    negatives = (neg * (-torch.log((1 - p_w).abs() + 1e-9) - torch.log((1 - p_s).abs() + 1e-9))).sum() / t.shape[0]
    kl = sum(F.kl_div(F.log_softmax(z, 1), t, reduction="batchmean") for z in (z_w, z_s))
    return negatives + kl


def _ref_step(model, ref, x, x_strong, epoch, idx, draw):
    """One step of CORR + RECORDS (w/ Mixup); ``ref`` holds μ and W, updated in place."""
    xw, xs = x[idx], x_strong[idx]
    f_w, f_s = model.enc(xw), model.enc(xs)
    z_w, z_s = model.head(f_w), model.head(f_s)
    ref.mu = 0.9 * ref.mu + 0.1 * ((f_w + f_s) / 2).mean(0).detach()  # every batch, epoch 0 included
    prior = F.softmax(model.head(ref.mu), 0).detach()  # π̂ from the pre-step head
    t = ref.w[idx].clone()  # read before the update
    loss = _corr_term(z_w, z_s, t)
    if epoch >= 1:  # mixup term (α = 1) and the label update: only from upd_start = 1
        lam, perm = draw
        xw_mix, xs_mix = lam * xw + (1 - lam) * xw[perm], lam * xs + (1 - lam) * xs[perm]
        loss = loss + _corr_term(model(xw_mix), model(xs_mix), lam * t + (1 - lam) * t[perm])
        y = CANDS[idx].float()  # mask Y (RECORDS), not the support of W
        offset = torch.log(prior + 1e-9)
        q = y * F.softmax(z_w.detach() - offset, 1) * F.softmax(z_s.detach() - offset, 1)  # Y ⊙ p̃^w ⊙ p̃^s
        q = q / (q.sum(1, keepdim=True) + 1e-9)
        q = q.sqrt()
        ref.w[idx] = q / (q.sum(1, keepdim=True) + 1e-9)
    grads = torch.autograd.grad(loss, list(model.parameters()))
    return loss.detach(), grads, t, prior


def test_corr_records_steps_match_the_spec(monkeypatch):
    x, x_strong, model, run = _case()
    state, prior_c = PLLState(), FeaturePrior()
    conf, loss_c = Confidence(ConfidenceHParams(mask="candidates")), CorrLoss(LossHParams(mixup=True))
    prior_c.pllzoo_setup_stage(run, state)
    conf.pllzoo_setup_stage(run, state)
    state.confidence[1] = torch.tensor([0.7, 0.3, 0.0])  # candidate 2 of row 1 underflowed to 0
    ref = SimpleNamespace(mu=torch.zeros(FEAT), w=state.confidence.clone())
    draws, draw = [], corr.draw_mixup

    def spy(*args, **kwargs):  # the plugin's mixup draws
        draws.append(draw(*args, **kwargs))
        return draws[-1]

    monkeypatch.setattr(corr, "draw_mixup", spy)
    names = [n for n, _ in model.named_parameters()]
    for k, (epoch, rows) in enumerate(SCHEDULE):
        idx = torch.tensor(rows)
        xw, xs = x[idx], x_strong[idx]
        f_w, f_s = model.enc(xw), model.enc(xs)
        z_w = model.head(f_w)
        batch = Batch(index=idx, x=xw, candidates=CANDS[idx].float(), y_true=torch.zeros(4).long(), x_strong=xs)
        step = Step(batch=batch, logits=z_w, probs=torch.softmax(z_w.detach(), 1), forward=model,
                    generator=torch.Generator().manual_seed(10 + k), epoch=epoch, stage=Stage(), nominal_batch_size=4,
                    logits_strong=model.head(f_s), features=f_w, features_strong=f_s)
        with torch.no_grad():  # the trainer's order: offset, label update, selection (pllzoo.all)
            step.logit_offset = prior_c.pllzoo_logit_offset(step, state)
            step.targets = conf.pllzoo_label_update(step, state)
            step.mask = torch.ones(4, dtype=torch.bool)
        n_draws = len(draws)
        loss = loss_c.pllzoo_loss(step, state)
        grads = torch.autograd.grad(loss, list(model.parameters()))
        if epoch == 0:
            assert len(draws) == n_draws  # no mixup before epoch 1
            draw_k = None
        else:
            assert len(draws) == n_draws + 1
            m = draws[-1]  # l ∈ [½, 1), π of 4 distinct rows, not the identity
            assert 0.5 <= m.lam < 1 and not torch.equal(m.partner, torch.arange(4)), (m.lam, m.partner)
            draw_k = (m.lam, m.partner)
        ref_loss, ref_grads, ref_t, ref_prior = _ref_step(model, ref, x, x_strong, epoch, idx, draw_k)
        torch.testing.assert_close(state.records_mu, ref.mu)
        torch.testing.assert_close(state.prior, ref_prior)
        torch.testing.assert_close(step.logit_offset, torch.log(ref_prior + 1e-9))
        torch.testing.assert_close(step.targets, ref_t)
        torch.testing.assert_close(loss.detach(), ref_loss)
        for name, got, want in zip(names, grads, ref_grads):
            torch.testing.assert_close(got, want, msg=lambda msg, name=name: f"step {k}, {name}: {msg}")
        torch.testing.assert_close(state.confidence, ref.w)
        if k == 0:  # epoch 0: no update; the zero candidate is a negative of the loss
            assert state.confidence[1, 2] == 0 and step.targets[1, 2] == 0
        if k == 1:  # epoch 1: the update over Y brings candidate 2 of row 1 back
            assert state.confidence[1, 2] > 0.01 and step.targets[1, 2] == 0
        if k == 2:  # and the next step reads it as a target, not a negative
            assert step.targets[1, 2] > 0.01
        with torch.no_grad():  # plain SGD on the model (the same gradients: the plugin's equal the reference's)
            for p, g in zip(model.parameters(), grads):
                p -= LR * g
    prior_c.pllzoo_on_epoch_end(run, state)  # the prior with the head after the last step
    torch.testing.assert_close(state.prior, F.softmax(model.head(ref.mu), 0).detach())
    assert state.confidence[1, 2] > 0.01


def test_records_offset_debiases_the_update_towards_rare_classes():
    """A hand case of the debiased update: π̂ = softmax(head(μ)) with head = 0·x + log(½, ¼, ¼) is (½, ¼, ¼)
    for any μ; z^w = z^s = 0 on Y = {0, 1, 2}: p̃ ∝ 1/π̂ = (2, 4, 4), so w ∝ sqrt(p̃^w p̃^s) ∝ (2, 4, 4)
    → (0.2, 0.4, 0.4) (without the offset it would stay uniform); the offset's sign matters."""
    x, x_strong, model, run = _case()
    with torch.no_grad():
        model.head.weight.zero_()
        model.head.bias.copy_(torch.tensor([0.5, 0.25, 0.25]).log())
    state, prior_c, conf = PLLState(), FeaturePrior(), Confidence(ConfidenceHParams(mask="candidates"))
    prior_c.pllzoo_setup_stage(run, state)
    conf.pllzoo_setup_stage(run, state)
    idx = torch.tensor([1])
    z = torch.zeros(1, K)
    batch = Batch(index=idx, x=x[idx], candidates=CANDS[idx].float(), y_true=torch.zeros(1).long(), x_strong=x[idx])
    step = Step(batch=batch, logits=z, probs=torch.softmax(z, 1), forward=None, generator=None, epoch=1,
                stage=Stage(), nominal_batch_size=1, logits_strong=z, features=torch.ones(1, FEAT),
                features_strong=torch.ones(1, FEAT))
    step.logit_offset = prior_c.pllzoo_logit_offset(step, state)
    torch.testing.assert_close(state.prior, torch.tensor([0.5, 0.25, 0.25]))
    conf.pllzoo_label_update(step, state)
    torch.testing.assert_close(state.confidence[1], torch.tensor([0.2, 0.4, 0.4]))


def test_proden_records_recipe_hparams(registry):
    """``proden-records``: PRODEN's update over Y (a dropped candidate can come back as π̂ moves), and PRODEN's
    loss alone, without the SoLar protocol's consistency and mixup terms (the released ``Proden_loss_RECORDS``
    has one view and no mixup), on image data too (the protocol turns them off only on tabular data)."""
    by_name = {m.name: m for m in RECIPES}
    hparams = by_name["proden-records"].hparams
    assert hparams["label_update.mask"] == "candidates"
    assert hparams["loss.cr"] is False and hparams["loss.mixup"] is False
    for dataset in (("cifar10", "image"), ("synthetic-lt", "tabular")):
        comps = registry.build_components(registry.method("proden-records"), dataset=dataset)
        assert comps["label_update"].hp.mask == "candidates", dataset
        assert (comps["loss"].hp.cr, comps["loss"].hp.mixup) == (False, False), dataset
        assert "strong" not in comps["loss"].views  # one view: μ from the weak features alone (as the release)
