"""Same seed on CPU → identical records; a resumed run equals an uninterrupted one."""

from __future__ import annotations

import pytest
import torch

from pllzoo.registry import get_registry
from pllzoo.run import TrainConfig
from pllzoo.trainer import Trainer

CFG = TrainConfig(model="mlp", epochs=4, lr=0.05, weight_decay=1e-4, batch_size=16, checkpoint_every=1)  # resume mid-stage


def _strip(records):
    return [{k: v for k, v in r.items() if k != "wall_s"} for r in records]


def _trainer(data, run_dir=None, on_epoch=None, seed=3):
    reg = get_registry()
    comps = reg.build_components(reg.method("proden"))
    return Trainer(data, comps, CFG, seed=seed, device=torch.device("cpu"), run_dir=run_dir, on_epoch=on_epoch)


def test_same_seed_gives_identical_records(tiny_data):
    a = _trainer(tiny_data).fit()
    b = _trainer(tiny_data).fit()
    assert _strip(a) == _strip(b)
    c = _trainer(tiny_data, seed=4).fit()
    assert [r["loss"] for r in c] != [r["loss"] for r in a]


class _Interrupt(Exception):
    pass


def test_resume_from_mid_run_checkpoint_equals_uninterrupted(tiny_data, tmp_path):
    full_trainer = _trainer(tiny_data, tmp_path / "full")
    (tmp_path / "full").mkdir()
    full = full_trainer.fit()

    def stop_after_two(records):
        if len(records) == 2:
            raise _Interrupt

    (tmp_path / "cut").mkdir()
    with pytest.raises(_Interrupt):
        _trainer(tiny_data, tmp_path / "cut", on_epoch=stop_after_two).fit()
    resumed = _trainer(tiny_data, tmp_path / "cut").fit(resume=True)
    assert _strip(resumed) == _strip(full)
    final_full = full_trainer.model.state_dict()
    # the confidence table (method state) and the weights agree bit for bit too
    ckpt = torch.load(tmp_path / "cut" / "checkpoint.pt", weights_only=False)
    for k, v in final_full.items():
        assert torch.equal(ckpt["model"][k], v), k
    assert torch.equal(ckpt["state"]["confidence"], full_trainer.state.confidence)


def test_resume_across_a_stage_boundary_with_solar(tiny_data, tmp_path):
    """SoLar's two stages: stop inside the final stage, resume, and match an uninterrupted run."""
    reg = get_registry()

    def trainer(run_dir, on_epoch=None):
        comps = reg.build_components(reg.method("solar"), {"estimator.est_epochs": 2, "label_update.queue_length": 2})
        return Trainer(tiny_data, comps, CFG, seed=5, device=torch.device("cpu"), run_dir=run_dir, on_epoch=on_epoch)

    (tmp_path / "full").mkdir()
    full = trainer(tmp_path / "full").fit()

    def stop_after_three(records):
        if len(records) == 3:  # 2 pre-estimation epochs + 1 of the final stage
            raise _Interrupt

    (tmp_path / "cut").mkdir()
    with pytest.raises(_Interrupt):
        trainer(tmp_path / "cut", stop_after_three).fit()
    resumed = trainer(tmp_path / "cut").fit(resume=True)
    assert [r["stage"] for r in full] == ["pre-estimation"] * 2 + ["train"] * 4
    assert _strip(resumed) == _strip(full)
