"""CORR (the RECORDS release's two-view form): loss and confidence update on hand-computed cases."""

from __future__ import annotations

import math

import torch

from pllzoo import PLLState, Stage
from pllzoo.run import Batch, Step
from pllzoo_baselines.corr import Confidence, ConfidenceHParams, CorrLoss, LossHParams, corr_per_sample

LN2 = math.log(2.0)
CANDS = torch.tensor([[1.0, 1.0, 0.0]])
Z_W = torch.tensor([[0.0, 0.0, 0.0]])  # p^w = (1/3, 1/3, 1/3)
Z_S = torch.tensor([[LN2, 0.0, 0.0]])  # p^s = (1/2, 1/4, 1/4)


class _Run:
    candidates = CANDS.bool()


def _step(epoch=1, offset=None, targets=None, forward=None):
    batch = Batch(index=torch.tensor([0]), x=torch.zeros(1, 2), candidates=CANDS, y_true=torch.zeros(1).long(),
                  x_strong=torch.ones(1, 2))
    step = Step(batch=batch, logits=Z_W.clone(), probs=torch.softmax(Z_W, 1), forward=forward,
                generator=torch.Generator().manual_seed(0), epoch=epoch, stage=Stage(), nominal_batch_size=1,
                logits_strong=Z_S.clone(), logit_offset=offset)
    step.targets = targets
    return step


def test_loss_by_hand():
    t = torch.tensor([[0.5, 0.5, 0.0]])
    # negative j = 2: −log(1 − 1/3) − log(1 − 1/4); KL(t‖p^w) = log 1.5; KL(t‖p^s) = ½ log 2
    expected = -math.log(2 / 3) - math.log(3 / 4) + math.log(1.5) + 0.5 * LN2  # 1.445186
    assert abs(float(corr_per_sample(Z_W, Z_S, t)) - expected) < 1e-6
    loss = CorrLoss().pllzoo_loss(_step(targets=t), PLLState())
    assert abs(float(loss) - expected) < 1e-6


def test_loss_kl_has_no_nan_for_zero_targets_and_one_hot_targets():
    t = torch.tensor([[1.0, 0.0, 0.0]])
    # KL(t‖p^w) = log 3, KL(t‖p^s) = log 2; negatives j = 1, 2 on both views
    expected = math.log(3) + LN2 - 2 * math.log(2 / 3) - 2 * math.log(3 / 4)
    assert abs(float(corr_per_sample(Z_W, Z_S, t)) - expected) < 1e-6


def test_loss_honours_the_selection_mask():
    t = torch.tensor([[0.5, 0.5, 0.0], [1.0, 0.0, 0.0]])
    zw, zs = Z_W.repeat(2, 1), Z_S.repeat(2, 1)
    per = corr_per_sample(zw, zs, t)
    step = _step(targets=t)
    step.logits, step.logits_strong = zw, zs
    step.mask = torch.tensor([False, True])
    assert abs(float(CorrLoss().pllzoo_loss(step, PLLState())) - float(per[1])) < 1e-6


def test_update_by_hand():
    state, comp = PLLState(), Confidence()
    comp.pllzoo_setup_stage(_Run(), state)
    targets = comp.pllzoo_label_update(_step(), state)
    torch.testing.assert_close(targets, torch.tensor([[0.5, 0.5, 0.0]]))  # read before the update
    # sqrt(p^w ⊙ p^s) on {0, 1} = (√(1/6), √(1/12)) ∝ (√2, 1)
    torch.testing.assert_close(state.confidence, torch.tensor([[2 ** 0.5 / (2 ** 0.5 + 1), 1 / (2 ** 0.5 + 1), 0.0]]))


def test_no_update_before_start_epoch():
    state, comp = PLLState(), Confidence()
    comp.pllzoo_setup_stage(_Run(), state)
    comp.pllzoo_label_update(_step(epoch=0), state)
    torch.testing.assert_close(state.confidence, torch.tensor([[0.5, 0.5, 0.0]]))


def test_mask_modes():
    """'support' (CORR) keeps a dropped candidate dropped; 'candidates' (RECORDS) lets it back."""
    for mode, expected in [("support", [1.0, 0.0, 0.0]), ("candidates", [2 ** 0.5 / (2 ** 0.5 + 1), 1 / (2 ** 0.5 + 1), 0.0])]:
        state, comp = PLLState(), Confidence(ConfidenceHParams(mask=mode))
        comp.pllzoo_setup_stage(_Run(), state)
        state.confidence[0] = torch.tensor([1.0, 0.0, 0.0])
        comp.pllzoo_label_update(_step(), state)
        torch.testing.assert_close(state.confidence[0], torch.tensor(expected))


def test_update_reads_the_debiased_probabilities():
    """With a logit offset log π̂, π̂ = (½, ¼, ¼): p̃^w = (1/5, 2/5, 2/5), p̃^s = (1/3, 1/3, 1/3),
    so sqrt(p̃^w ⊙ p̃^s) on {0, 1} ∝ (1, √2)."""
    state, comp = PLLState(), Confidence()
    comp.pllzoo_setup_stage(_Run(), state)
    comp.pllzoo_label_update(_step(offset=torch.tensor([0.5, 0.25, 0.25]).log()), state)
    torch.testing.assert_close(state.confidence, torch.tensor([[1 / (2 ** 0.5 + 1), 2 ** 0.5 / (2 ** 0.5 + 1), 0.0]]))


def test_mixup_term_by_hand():
    """One sample: the permutation is the identity, so the mixed views are the views themselves and the
    mixup term equals the plain term: L = (1 + α)·ℓ."""
    t = torch.tensor([[0.5, 0.5, 0.0]])
    step = _step(targets=t, forward=lambda x: torch.cat(list(next(outputs))))  # one joint pass of 2B rows
    step.batch.index = torch.tensor([0, 0])  # batch.size > 1 switches mixup on; rows are the same sample
    step.batch.x, step.batch.x_strong = torch.zeros(2, 2), torch.ones(2, 2)
    step.logits, step.logits_strong, step.targets = Z_W.repeat(2, 1), Z_S.repeat(2, 1), t.repeat(2, 1)
    outputs = iter([(Z_W.repeat(2, 1), Z_S.repeat(2, 1))])
    loss = CorrLoss(LossHParams(mixup=True, mixup_weight=0.5)).pllzoo_loss(step, PLLState())
    assert abs(float(loss) - 1.5 * float(corr_per_sample(Z_W, Z_S, t))) < 1e-6
    step.epoch = 0  # before mixup_start_epoch: the plain term only
    assert abs(float(CorrLoss(LossHParams(mixup=True)).pllzoo_loss(step, PLLState())) - float(
        corr_per_sample(Z_W, Z_S, t))) < 1e-6


def test_joint_forward(tiny_data):
    """``joint_forward`` (the release): one pass of the 2B weak + strong rows; off: one pass per view.
    A network without BatchNorm gives the same logits either way."""
    from pllzoo.builtin import SelectAll
    from pllzoo.run import TrainConfig
    from pllzoo.trainer import Trainer

    sizes = {}
    for joint in (True, False):
        comps = {"label_update": Confidence(), "selection": SelectAll(), "loss": CorrLoss(LossHParams(joint_forward=joint))}
        trainer = Trainer(tiny_data, comps, TrainConfig(model="mlp", epochs=1, batch_size=16), seed=1,
                          device=torch.device("cpu"))
        trainer._enter_stage(trainer.stages()[-1])
        calls = []
        forward = trainer.model.forward
        trainer.model.forward = lambda x: calls.append(x.shape[0]) or forward(x)
        gen = torch.Generator().manual_seed(0)
        step, _ = trainer.step(trainer.stages()[-1], 0, torch.arange(16), gen, gen)
        sizes[joint] = calls
        assert step.logits.shape == step.logits_strong.shape == (16, tiny_data.num_classes)
    assert sizes == {True: [32], False: [16, 16]}


def test_underflowing_row_stays_normalised():
    """The model puts all its mass on a non-candidate (class 2): p^w ⊙ p^s on {0, 1} underflows in float32.
    The row is the normalised geometric mean computed in log space: (log p^w + log p^s)/2 on {0, 1} is
    (−50 − 60, −55 − 58)/2 relative to class 2, so the weights are softmax((−55, −56.5)) = (0.8176, 0.1824)."""
    state, comp = PLLState(), Confidence()
    comp.pllzoo_setup_stage(_Run(), state)
    step = _step()
    step.logits = torch.tensor([[0.0, -5.0, 50.0]]) - 50.0  # log p^w ≈ (−50, −55, 0)
    step.logits_strong = torch.tensor([[0.0, 2.0, 60.0]]) - 60.0  # log p^s ≈ (−60, −58, 0)
    step.probs = torch.softmax(step.logits, 1)
    assert float((step.probs * torch.softmax(step.logits_strong, 1))[0, :2].sum()) < torch.finfo(torch.float32).tiny
    comp.pllzoo_label_update(step, state)
    row = state.confidence[0]
    assert abs(float(row.sum()) - 1) < 1e-6 and row[2] == 0
    w = torch.softmax(torch.tensor([-55.0, -56.5]), 0)
    torch.testing.assert_close(row[:2], w, atol=1e-5, rtol=1e-4)
