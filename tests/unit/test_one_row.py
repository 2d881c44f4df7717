"""A step of one row through BatchNorm: when an epoch has one (by hand), and the trainer's one line where it comes
anyway (a sweep's trial; ``pllzoo bench`` refuses it before training: tests/test_bad_inputs.py)."""

from __future__ import annotations

import pytest
import torch

from conftest import make_tiny_data
from pllzoo.checks import has_batch_norm, one_row_step
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


def test_has_batch_norm():
    assert has_batch_norm(torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.BatchNorm1d(2)))
    assert not has_batch_norm(torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.LayerNorm(2)))


def test_the_trainer_names_the_setting(registry):
    data = make_tiny_data()
    n = data.x_train.shape[0]
    comps = registry.build_components(registry.method("proden"), {}, (data.name, data.kind))
    cfg = TrainConfig(model="mlp", epochs=1, batch_size=n - 1, drop_last=False)
    with pytest.raises(PLLZooError, match=rf"batch size {n - 1} on {n} training rows leaves a last batch of 1 "
                                          r"\(train.drop_last=false\), and BatchNorm in 'mlp'"):
        Trainer(data, comps, cfg, 1, torch.device("cpu")).fit()
