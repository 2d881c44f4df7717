"""Held-out partially labelled rows, smoke subsets, and the covering rate."""

import warnings

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


def test_hold_out_warns_when_fewer_rows_than_classes_are_held_out():
    data = make_tiny_data(n=96, k=4)  # ceil(0.03 * 96) = 3 rows < 4 classes; ceil(0.04 * 96) = 4 is enough
    with pytest.warns(UserWarning, match=r"holds out 3 of 96 training rows, fewer than the 4 classes"):
        assert hold_out(data, 0.03, 1).x_val.shape[0] == 3
    with pytest.warns(UserWarning, match=r"holds out 1 of 96 .* in steps of 1/1$"):
        hold_out(data, 1e-9, 1)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert hold_out(data, 0.04, 1).x_val.shape[0] == 4


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
