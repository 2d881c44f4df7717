"""Held-out partially labelled rows, smoke subsets, and the covering rate."""

import pytest
import torch

from pllzoo.data.holdout import hold_out, subsample
from pllzoo.errors import PLLZooError
from pllzoo.metrics import covering_rate
from tests.conftest import make_tiny_data


def _rows(x):
    return {tuple(r.tolist()) for r in x}


def test_hold_out_moves_ceil_fraction_of_rows_with_their_candidates():
    data = make_tiny_data(n=95)
    out = hold_out(data, 0.1, seed=3)
    assert out.x_val.shape[0] == 10 and out.num_train == 85  # ceil(9.5) = 10
    assert _rows(out.x_val).isdisjoint(_rows(out.x_train))
    assert _rows(out.x_val) | _rows(out.x_train) == _rows(data.x_train)
    index = {tuple(r.tolist()): i for i, r in enumerate(data.x_train)}
    for x, c in zip(out.x_val, out.candidates_val):
        assert torch.equal(c, data.candidates[index[tuple(x.tolist())]])
    assert out.info["n_val"] == 10 and torch.equal(out.x_test, data.x_test)


def test_hold_out_is_seeded():
    data = make_tiny_data()
    assert torch.equal(hold_out(data, 0.2, 1).x_val, hold_out(data, 0.2, 1).x_val)
    assert not torch.equal(hold_out(data, 0.2, 1).x_val, hold_out(data, 0.2, 2).x_val)


@pytest.mark.parametrize("fraction", [0.0, 1.0, -0.1])
def test_hold_out_rejects_bad_fractions(fraction):
    with pytest.raises(PLLZooError, match="holdout"):
        hold_out(make_tiny_data(), fraction, 1)


def test_subsample_keeps_n_train_and_test_rows():
    data = make_tiny_data(n=96)
    out = subsample(data, 20, seed=1)
    assert out.num_train == 20 and out.y_test.shape[0] == 16  # the tiny test set has 16 rows
    assert _rows(out.x_train) <= _rows(data.x_train)
    with pytest.raises(PLLZooError):
        subsample(data, 0, 1)


def test_covering_rate_by_hand():
    cand = torch.tensor([[1, 1, 0], [0, 1, 0], [0, 0, 1], [1, 0, 1]], dtype=torch.bool)
    pred = torch.tensor([1, 0, 2, 1])  # hit, miss, hit, miss
    assert covering_rate(pred, cand) == 50.0
