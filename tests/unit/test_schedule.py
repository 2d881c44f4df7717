"""The trainer's learning-rate schedules (pllzoo.schedule.lr_at) by hand, its deviation from SoLar's
adjust_learning_rate included (an outside review: neither the step rule nor the cosine clamp had a test)."""

from __future__ import annotations

import dataclasses
import math

import pytest

from pllzoo.errors import PLLZooError
from pllzoo.run import TrainConfig
from pllzoo.schedule import lr_at


def _config(**kw) -> TrainConfig:
    return dataclasses.replace(TrainConfig(), **kw)


def test_step_decays_after_each_milestone_not_at_it():
    """SoLar's released command (--lr_decay_epochs 700,800): lr · 0.1^#{m : epoch > m}, epochs from 0."""
    config = _config(schedule="step", lr=0.01, lr_decay=0.1, milestones=(700, 800), epochs=1000)
    got = [lr_at(config, e) for e in (0, 700, 701, 800, 801, 999)]
    assert got == pytest.approx([0.01, 0.01, 0.001, 0.001, 0.0001, 0.0001], rel=1e-12)


def test_cosine_by_hand_and_held_at_its_minimum_past_the_horizon():
    """lr_min + (lr − lr_min)(1 + cos(π·e/E))/2, lr_min = lr · cosine_min_factor.  Past E (a stage longer than the
    final one) it stays at lr_min, where the reference's unclamped formula climbs back to lr at 2E."""
    lr, factor, horizon = 0.05, 0.001, 10
    config = _config(schedule="cosine", lr=lr, cosine_min_factor=factor, epochs=horizon)
    lr_min = lr * factor
    assert lr_at(config, 0) == pytest.approx(lr)
    assert lr_at(config, 5) == pytest.approx((lr + lr_min) / 2)
    assert lr_at(config, 2) == pytest.approx(lr_min + (lr - lr_min) * (1 + math.cos(math.pi * 0.2)) / 2)
    assert lr_at(config, horizon) == pytest.approx(lr_min)
    past = [lr_at(config, e) for e in (11, 15, 19)]
    reference = [lr_min + (lr - lr_min) * (1 + math.cos(math.pi * e / horizon)) / 2 for e in (11, 15, 19)]
    assert past == pytest.approx([lr_min] * 3)
    assert reference[1] == pytest.approx((lr + lr_min) / 2)  # what the deviation leaves out


def test_constant_and_an_unknown_schedule():
    assert {lr_at(_config(lr=0.2), e) for e in (0, 5, 500)} == {0.2}
    with pytest.raises(PLLZooError, match="unknown schedule 'linear'; valid: constant, step, cosine"):
        lr_at(_config(schedule="linear"), 0)
