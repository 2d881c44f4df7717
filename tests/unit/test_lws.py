"""LWS's loss and weight update on hand-computed cases."""

from __future__ import annotations

import math

import torch

from pllzoo_baselines.lws import lws_loss, split_normalise


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
