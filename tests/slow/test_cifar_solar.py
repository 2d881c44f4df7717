"""Slow: SoLar runs on CIFAR-10-LT from the offline JPEG copy (2 + 2 epochs, small CNN)."""

from __future__ import annotations

import math

import pytest

from pllzoo import bench
from pllzoo.data.base import DataOptions

pytestmark = pytest.mark.slow


def test_solar_two_stages_on_cifar10lt(registry, shared_data, tmp_path):
    plans = bench.plan(registry, ["solar"], "cifar10lt", [1], DataOptions(data_dir=shared_data), epochs=2,
                       hp={"train.model": "cnn", "estimator.est_epochs": "2"}, device="cpu")
    rows = bench.execute(registry, plans, tmp_path)
    assert math.isfinite(rows["acc_all"].iloc[0]) and rows["acc_all"].iloc[0] > 10.0
