"""RECORDS' feature-mean prior (``records.prior``): the momentum mean, the prior, the offset, the
prediction and the recipes, on hand-computed cases."""

from __future__ import annotations

import math

import pytest
import torch

from pllzoo import PLLState, Stage
from pllzoo.builtin import LogitAdjustment
from pllzoo.run import Batch, Step
from pllzoo_baselines.proden import Confidence as ProdenConfidence, ConfidenceHParams as ProdenHParams
from pllzoo_ltpll.records import RECIPES, FeaturePrior


class _Model(torch.nn.Module):
    feature_dim = 2

    def __init__(self):
        super().__init__()
        self.head = torch.nn.Linear(2, 3)
        with torch.no_grad():
            self.head.weight.copy_(torch.tensor([[1.0, 0.0], [0.0, 1.0], [0.0, 0.0]]))
            self.head.bias.zero_()


class _Data:
    train_counts = [6, 3, 1]


class _Run:
    def __init__(self):
        self.model, self.data, self.device = _Model(), _Data(), torch.device("cpu")


def _step(feats, feats_strong=None, logits=None):
    b = feats.shape[0]
    batch = Batch(index=torch.arange(b), x=torch.zeros(b, 2), candidates=torch.ones(b, 3), y_true=torch.zeros(b).long())
    logits = torch.zeros(b, 3) if logits is None else logits
    return Step(batch=batch, logits=logits, probs=torch.softmax(logits, 1), forward=None, generator=None, epoch=0,
                stage=Stage(), nominal_batch_size=b, features=feats, features_strong=feats_strong)


def _prior(mu):  # softmax(head(μ)) for the head above: (e^μ0, e^μ1, 1) / sum
    e = torch.tensor([math.exp(mu[0]), math.exp(mu[1]), 1.0])
    return e / e.sum()


def test_momentum_mean_prior_and_offset_by_hand():
    run, state, comp = _Run(), PLLState(), FeaturePrior()
    comp.pllzoo_setup_stage(run, state)
    torch.testing.assert_close(state.records_mu, torch.zeros(2))
    torch.testing.assert_close(state.prior, torch.full((3,), 1 / 3))  # head(0) = bias = 0
    # weak features mean (1, 1), strong mean (0, 0): the views' average (½, ½); μ = 0.9·0 + 0.1·(½, ½)
    offset = comp.pllzoo_logit_offset(_step(torch.tensor([[2.0, 0.0], [0.0, 2.0]]), torch.zeros(2, 2)), state)
    torch.testing.assert_close(state.records_mu, torch.tensor([0.05, 0.05]))
    torch.testing.assert_close(state.prior, _prior([0.05, 0.05]))
    torch.testing.assert_close(offset, torch.log(_prior([0.05, 0.05]) + 1e-9))
    # no strong view: the weak features alone; μ = 0.9·(0.05, 0.05) + 0.1·(1, 0) = (0.145, 0.045)
    comp.pllzoo_logit_offset(_step(torch.tensor([[1.0, 0.0]])), state)
    torch.testing.assert_close(state.records_mu, torch.tensor([0.145, 0.045]))
    torch.testing.assert_close(state.prior, _prior([0.145, 0.045]))


def test_epoch_end_uses_the_current_head_and_logs_tv():
    run, state, comp = _Run(), PLLState(), FeaturePrior()
    comp.pllzoo_setup_stage(run, state)
    comp.pllzoo_logit_offset(_step(torch.tensor([[10.0, 0.0]])), state)  # μ = (1, 0)
    with torch.no_grad():
        run.model.head.bias.copy_(torch.tensor([0.0, 0.0, 1.0]))  # an optimizer step after the offset
    logs = comp.pllzoo_on_epoch_end(run, state)
    expected = torch.softmax(torch.tensor([1.0, 0.0, 1.0]), 0)
    torch.testing.assert_close(state.prior, expected)
    true = torch.tensor([0.6, 0.3, 0.1])
    assert logs["prior_tv"] == pytest.approx(0.5 * float((expected - true).abs().sum()), abs=1e-6)
    assert logs["prior"] == pytest.approx(expected.tolist(), abs=1e-6)  # logged, as SoLar's, for `pllzoo plot`


def test_prediction_adjusts_by_the_current_prior():
    prior = torch.tensor([0.5, 0.25, 0.25])
    logits = torch.tensor([[1.0, 0.5, 0.0]])
    out = LogitAdjustment().pllzoo_predict(logits, PLLState({"prior": prior}))
    torch.testing.assert_close(out, logits - prior.log())  # (1.693, 1.886, 1.386): argmax moves to class 1
    assert int(out.argmax()) == 1
    # the released log(π̂ + 1e-9) gives the same argmax
    assert int((logits - torch.log(prior + 1e-9)).argmax()) == 1


def test_proden_update_is_debiased_by_the_offset():
    """PRODEN's post-step update reads step.label_probs: softmax(z − log π̂) on the candidates."""
    comp, state = ProdenConfidence(ProdenHParams(mask="candidates")), PLLState()

    class Run:
        candidates = torch.tensor([[True, True, False]])

    comp.pllzoo_setup_stage(Run(), state)
    step = _step(torch.zeros(1, 2), logits=torch.zeros(1, 3))
    step.batch.candidates = torch.tensor([[1.0, 1.0, 0.0]])
    step.logit_offset = torch.tensor([0.5, 0.25, 0.25]).log()
    comp.pllzoo_post_step(step, state)
    torch.testing.assert_close(state.confidence, torch.tensor([[1 / 3, 2 / 3, 0.0]]))  # (2, 4) on {0, 1}


def test_recipes():
    by_name = {m.name: m for m in RECIPES}
    assert set(by_name) == {"corr-records", "corr-records-mixup", "proden-records", "cc-records"}
    for m in RECIPES:
        assert (m.estimator, m.predict) == ("records.prior", "pllzoo.logit_adjust")
    assert by_name["corr-records"].hparams == {"label_update.mask": "candidates"}
    assert by_name["corr-records-mixup"].hparams == {"label_update.mask": "candidates", "loss.mixup": True}
    assert by_name["proden-records"].label_update == "proden.confidence"
    assert by_name["cc-records"].label_update == "pllzoo.uniform"
