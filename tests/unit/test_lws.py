"""LWS's loss and weight update on hand-computed cases."""

from __future__ import annotations

import math

import torch

from pllzoo_baselines.lws import LWSHParams, LWSLoss, Weights, lws_loss, split_normalise


def test_lws_loss_by_hand():
    z = torch.tensor([[0.0, math.log(3), -math.log(3)]])  # sigma: 0.5, 0.75, 0.25
    w = torch.full((1, 3), 1 / 3)
    cands = torch.tensor([[1.0, 1.0, 0.0]])
    # alpha * (1/3)(sigma(-0) + sigma(-ln3)) + beta * (1/3) sigma(-ln3) = 0.25 + 1/12
    torch.testing.assert_close(lws_loss(z, w, cands, 1.0, 1.0), torch.tensor([0.25 + 1 / 12]))
    torch.testing.assert_close(lws_loss(z, w, cands, 1.0, 0.0), torch.tensor([0.25]))  # the argparse default
    torch.testing.assert_close(lws_loss(z, w, cands, 2.0, 2.0), torch.tensor([2 * (0.25 + 1 / 12)]))


def test_split_normalise_by_hand():
    p = torch.tensor([[0.2, 0.6, 0.2]])
    w = split_normalise(p, torch.tensor([[1.0, 1.0, 0.0]]))
    # each part sums to ~1 on its own: the row sums to ~2 when non-candidates exist
    torch.testing.assert_close(w, torch.tensor([[0.25, 0.75, 1.0]]), atol=1e-6, rtol=0)
    full = split_normalise(p, torch.ones(1, 3))
    torch.testing.assert_close(full, p / 1.0, atol=1e-6, rtol=0)


def test_lws_loss_is_finite_for_extreme_logits():
    z = torch.tensor([[500.0, -500.0, 0.0]])
    out = lws_loss(z, torch.full((1, 3), 1 / 3), torch.tensor([[0.0, 1.0, 1.0]]), 1.0, 1.0)
    assert torch.isfinite(out).all()


def test_the_weights_after_a_step_are_the_fresh_forward_split_normalised():
    """Alg. l.3: after the SGD step w ← the new network's p, normalised on S and off S each (p = (.2, .6, .2),
    S = {0, 1}: w = (.25, .75, 1)); a review's mutation writing p unnormalised passed every other LWS test."""
    from pllzoo import PLLState, Stage
    from pllzoo.run import Batch, Step
    from pllzoo_baselines.lws import Weights

    fresh = torch.tensor([[0.2, 0.6, 0.2]])
    cands = torch.tensor([[1.0, 1.0, 0.0]])
    state = PLLState({"lws_weights": torch.full((1, 3), 1 / 3)})
    step = Step(batch=Batch(torch.arange(1), torch.zeros(1, 1), cands, torch.zeros(1, dtype=torch.long)),
                logits=torch.zeros(1, 3), probs=torch.full((1, 3), 1 / 3), forward=lambda x: fresh.log(),
                generator=None, epoch=1, stage=Stage(), nominal_batch_size=1)
    Weights().pllzoo_post_step(step, state)
    torch.testing.assert_close(state.lws_weights, torch.tensor([[0.25, 0.75, 1.0]]), atol=1e-6, rtol=0)


def _first_step(cands: torch.Tensor, z: torch.Tensor):
    """A fresh stage's weight table (``Weights.pllzoo_setup_stage``) and a step over its rows."""
    from types import SimpleNamespace

    from pllzoo import PLLState, Stage
    from pllzoo.run import Batch, Run, Step, TrainConfig

    n, k = cands.shape
    run = Run(data=SimpleNamespace(num_train=n, num_classes=k), candidates=cands.bool(), config=TrainConfig(),
              device=torch.device("cpu"), seed=0)
    state = PLLState()
    Weights().pllzoo_setup_stage(run, state)
    step = Step(batch=Batch(torch.arange(n), torch.zeros(n, 1), cands, torch.zeros(n, dtype=torch.long)),
                logits=z, probs=torch.softmax(z, 1), forward=None, generator=None, epoch=0, stage=Stage(),
                nominal_batch_size=n)
    return state, step


def test_weights_start_uniform_over_all_classes():
    """Alg. l.1 (main-cv_sgd_best.py l.116–118): w_ij = 1/K for every class, the non-candidates
    included, not Y/|S| (a mutation audit: the table initialised as PRODEN's passed every other test; the
    targets handed on, w re-normalised on the candidates, are Y/|S| either way)."""
    cands = torch.tensor([[1.0, 1.0, 0.0], [1.0, 0.0, 0.0], [1.0, 1.0, 1.0]])
    state, step = _first_step(cands, torch.zeros(3, 3))
    torch.testing.assert_close(state.lws_weights, torch.full((3, 3), 1 / 3))
    targets = Weights().pllzoo_label_update(step, state)
    torch.testing.assert_close(targets, torch.tensor([[0.5, 0.5, 0.0], [1.0, 0.0, 0.0], [1 / 3, 1 / 3, 1 / 3]]))


def test_first_step_loss_with_the_default_weights_by_hand():
    """The default β = lw = 1 (README best for CIFAR-10; the argparse default 0 drops the non-candidate term) and
    α = lw0 = 1, on the first step's uniform w = 1/3: z = (0, ln 3, −ln 3) gives σ(z) = (.5, .75, .25), so
    S = {0, 1}: (1/3)(σ(0) + σ(−ln 3)) + (1/3)σ(−ln 3) = 1/4 + 1/12 = 1/3;  S = {0}: (1/3)(.5) + (1/3)(.75 + .25)
    = 1/2.  With β 0 it would be 1/4 and 1/6; with w = Y/|S| 3/8 and 1/2."""
    assert (LWSHParams().alpha, LWSHParams().beta) == (1.0, 1.0)
    cands = torch.tensor([[1.0, 1.0, 0.0], [1.0, 0.0, 0.0]])
    z = torch.tensor([[0.0, math.log(3), -math.log(3)]]).repeat(2, 1)
    state, step = _first_step(cands, z)
    loss = LWSLoss(LWSHParams(cr=False, mixup=False))  # the protocol's terms off: the LWS loss alone
    torch.testing.assert_close(loss.pllzoo_loss(step, state), torch.tensor((1 / 3 + 1 / 2) / 2))
