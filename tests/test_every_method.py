"""Every registered method trains for real on tiny data and leaves a valid state; SoLar's image path runs."""

from __future__ import annotations

import math

import pytest
import torch

from pllzoo.run import TrainConfig
from pllzoo.trainer import Trainer
from conftest import make_fake_images, registered_methods


METHODS = registered_methods()
CFG = TrainConfig(model="linear", epochs=2, lr=0.1, weight_decay=0.0, batch_size=16)


@pytest.fixture(autouse=True)
def _one_thread():
    """Tiny models gain nothing from intra-op threads, and on a busy 2-core machine two OpenMP threads
    oversubscribe (the image run below took 7 s instead of 0.3 s next to a benchmark)."""
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(previous)


def test_methods_are_discovered():
    assert {"proden", "cc", "solar"} <= set(METHODS)


def _check_state(state, candidates: torch.Tensor) -> None:
    if "confidence" in state:
        conf = state.confidence
        assert torch.isfinite(conf).all() and (conf >= 0).all()
        torch.testing.assert_close(conf.sum(1), torch.ones(conf.shape[0]), atol=1e-5, rtol=0)
        assert torch.all(conf[~candidates] == 0)
    if "prior" in state:
        prior = state.prior
        assert prior.dim() == 1 and prior.numel() == candidates.shape[1]
        assert torch.isfinite(prior).all() and (prior >= 0).all()
        assert float(prior.sum()) == pytest.approx(1.0, abs=1e-5)


@pytest.mark.parametrize("name", METHODS)
def test_method_trains_on_tiny_data(name, registry, tiny_data):
    data = tiny_data  # conftest.make_tiny_data(): 96 rows, K = 4, tabular
    method = registry.method(name)
    overrides = {"estimator.est_epochs": 1} if "estimator.est_epochs" in registry.hparam_keys(method) else {}
    comps = registry.build_components(method, overrides, dataset=(data.name, data.kind))
    trainer = Trainer(data, comps, CFG, seed=1, device=torch.device("cpu"))
    records = trainer.fit()

    plan = trainer.stages()
    expected = [(s.index, e + 1) for s in plan for e in range(s.epochs if s.epochs is not None else CFG.epochs)]
    assert [(r["stage_index"], r["epoch"]) for r in records] == expected
    if overrides and comps["estimator"].hp.init != "oracle":
        assert [s.name for s in plan] == ["pre-estimation", "train"]
    m = data.y_test.numel()
    for r in records:
        assert math.isfinite(r["loss"]), r
        assert (r["acc_all"] * m / 100.0) == pytest.approx(round(r["acc_all"] * m / 100.0), abs=1e-6)  # k of m right
        assert r["final_stage"] == (r["stage_index"] == plan[-1].index)
    assert trainer.test_metrics()["acc_all"] == records[-1]["acc_all"]  # the record is the final model's accuracy
    _check_state(trainer.state, data.candidates)


def test_solar_image_path_runs_strong_view_and_mixup(registry, monkeypatch):
    import pllzoo.mixup as pllzoo_mixup

    data = make_fake_images()
    # one stage, and the full loss from epoch 0 (no first-epoch rule, η already at 0.9), so that the
    # strong view and the mixup pass run in a single epoch
    comps = registry.build_components(
        registry.method("solar"),
        {"estimator.est_epochs": 0, "loss.first_epoch_rn": False, "loss.warmup_epochs": 0},
        dataset=(data.name, data.kind),
    )
    assert comps["loss"].hp.cr and comps["loss"].hp.mixup

    seen = {"mixup": 0, "strong": 0, "batches": 0}
    real_coefficient = pllzoo_mixup.mixup_coefficient

    def counting_coefficient(generator, alpha):
        seen["mixup"] += 1
        return real_coefficient(generator, alpha)

    monkeypatch.setattr(pllzoo_mixup, "mixup_coefficient", counting_coefficient)
    real_loss = comps["loss"].pllzoo_loss.__func__

    def spy_loss(self, step, state):
        seen["batches"] += 1
        assert step.batch.x_strong is not None and step.logits_strong is not None
        assert step.batch.x_strong.shape == step.batch.x.shape and step.batch.x_strong.dtype == torch.float32
        assert not torch.equal(step.batch.x_strong, step.batch.x)  # a different augmentation
        seen["strong"] += 1
        return real_loss(self, step, state)

    spy_loss.pllzoo_impl = real_loss.pllzoo_impl  # keep pluggy's marker
    monkeypatch.setattr(type(comps["loss"]), "pllzoo_loss", spy_loss)

    cfg = TrainConfig(model="cnn", epochs=1, lr=0.01, weight_decay=0.0, batch_size=16)
    trainer = Trainer(data, comps, cfg, seed=1, device=torch.device("cpu"))
    assert "strong" in trainer.views
    records = trainer.fit()
    assert len(records) == 1 and math.isfinite(records[0]["loss"])
    assert seen["batches"] == 4 and seen["strong"] == 4 and seen["mixup"] == 4
    assert records[0]["eta"] == pytest.approx(0.9)
    _check_state(trainer.state, data.candidates)
