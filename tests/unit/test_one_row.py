"""A step of one row through BatchNorm: when an epoch has one (by hand), when torch refuses it, and the trainer's
one line where it comes anyway (a sweep's trial; ``pllzoo bench`` refuses it before training:
tests/test_bad_inputs.py)."""

from __future__ import annotations

import pytest
import torch

from conftest import make_tiny_data
from pllzoo.checks import one_row_fails, one_row_step
from pllzoo.models import build_model
from pllzoo.errors import PLLZooError
from pllzoo.run import TrainConfig
from pllzoo.trainer import Trainer


@pytest.mark.parametrize("bs, rows, drop_last, one", [
    (1, 40, True, True), (1, 1, False, True),  # every step is one row
    (256, 257, False, True), (256, 257, True, False),  # 256 + 1; the 1 dropped
    (256, 258, False, False), (256, 256, False, False), (10, 1, False, True), (3, 7, False, True), (3, 8, False, False),
])
def test_one_row_step_by_hand(bs, rows, drop_last, one):
    assert one_row_step(bs, rows, drop_last) is one


def test_one_row_fails_where_torch_refuses_it():
    """torch refuses a BatchNorm over one value per channel: BatchNorm1d over one row, a 2-d one over a 1 × 1 map;
    an image backbone's BatchNorm2d over a larger map trains on one row (an outside review: the check refused
    ``cnn``, ``resnet18`` and ``wrn28-2`` runs, which train)."""
    bn1 = torch.nn.Sequential(torch.nn.Linear(2, 3), torch.nn.BatchNorm1d(3))
    bn1.eval()
    assert one_row_fails(bn1, (2,)) and not bn1.training  # its mode kept
    assert not one_row_fails(torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.LayerNorm(2)), (2,))
    assert not one_row_fails(torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3, padding=1), torch.nn.BatchNorm2d(4)),
                             (3, 4, 4))
    assert one_row_fails(torch.nn.Sequential(torch.nn.Conv2d(3, 4, 4), torch.nn.BatchNorm2d(4)), (3, 4, 4))  # 1 × 1
    assert one_row_fails(build_model("mlp", 10, (5,)), (5,))
    assert not one_row_fails(build_model("cnn", 10, (3, 32, 32)), (3, 32, 32))
    with pytest.raises(ValueError, match="other"):  # any other error is the model's own
        one_row_fails(torch.nn.Sequential(_Raises()), (2,))


class _Raises(torch.nn.Module):
    def forward(self, x):
        raise ValueError("other")


def test_the_trainer_names_the_setting(registry):
    data = make_tiny_data()
    n = data.x_train.shape[0]
    comps = registry.build_components(registry.method("proden"), {}, (data.name, data.kind))
    cfg = TrainConfig(model="mlp", epochs=1, batch_size=n - 1, drop_last=False)
    with pytest.raises(PLLZooError, match=rf"batch size {n - 1} on {n} training rows leaves a last batch of 1 "
                                          r"\(train.drop_last=false\), and BatchNorm in 'mlp'"):
        Trainer(data, comps, cfg, 1, torch.device("cpu")).fit()
