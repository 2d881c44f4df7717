"""A slim checkpoint (no SGD momentum buffers) resumes with momentum restarted, and says so."""

from __future__ import annotations

import dataclasses
import warnings

import pytest
import torch

from pllzoo.checkpoint import CheckpointError, lacks_momentum, read_checkpoint, slim_checkpoint
from pllzoo.registry import get_registry
from pllzoo.run import TrainConfig
from pllzoo.trainer import Trainer

CFG = TrainConfig(model="mlp", epochs=4, lr=0.05, momentum=0.9, weight_decay=1e-4, batch_size=16, checkpoint_every=1)


def _trainer(data, run_dir=None, on_epoch=None, config=CFG):
    reg = get_registry()
    return Trainer(data, reg.build_components(reg.method("proden")), config, seed=3, device=torch.device("cpu"),
                   run_dir=run_dir, on_epoch=on_epoch)


def _strip(records):
    return [{k: v for k, v in r.items() if k not in ("wall_s", "momentum_restarted")} for r in records]


class _Interrupt(Exception):
    pass


def _stop_after(n):
    def on_epoch(records):
        if len(records) == n:
            raise _Interrupt
    return on_epoch


def _cut(data, run_dir, n=2, config=CFG):
    run_dir.mkdir()
    with pytest.raises(_Interrupt):
        _trainer(data, run_dir, on_epoch=_stop_after(n), config=config).fit()
    return run_dir / "checkpoint.pt"


def test_slim_drops_the_momentum_buffers_and_keeps_everything_else(tiny_data, tmp_path):
    path = _cut(tiny_data, tmp_path / "run")
    full = read_checkpoint(path)
    assert full["optimizer"]["state"] and not lacks_momentum(full)
    size = path.stat().st_size
    before, after = slim_checkpoint(path)
    slim = read_checkpoint(path)
    assert (before, after) == (size, path.stat().st_size) and after < before
    assert slim["optimizer"]["state"] == {} and lacks_momentum(slim)
    assert slim["optimizer"]["param_groups"] == full["optimizer"]["param_groups"]
    for key in ("stage", "epoch", "records"):
        assert slim[key] == full[key]
    for k, v in full["model"].items():
        assert torch.equal(slim["model"][k], v), k
    assert torch.equal(slim["state"]["confidence"], full["state"]["confidence"])
    assert torch.equal(slim["rng"]["torch"], full["rng"]["torch"])
    assert not list(tmp_path.glob("run/*.tmp"))


def test_resume_from_a_slim_checkpoint_restarts_momentum_there(tiny_data, tmp_path):
    """Resuming = an uninterrupted run whose momentum buffers are cleared after epoch 2, bit for bit; the
    first epoch after the restart is marked, and the run differs from one that kept its momentum."""
    path = _cut(tiny_data, tmp_path / "cut")
    slim_checkpoint(path)
    with pytest.warns(UserWarning, match="without SGD momentum.*epoch 3"):
        resumed = _trainer(tiny_data, tmp_path / "cut").fit(resume=True)
    assert [r.get("momentum_restarted", False) for r in resumed] == [False, False, True, False]

    reference = _trainer(tiny_data)

    def clear_after_two(records):
        if len(records) == 2:
            reference.optimizer.state.clear()

    reference.on_epoch = clear_after_two
    cleared = reference.fit()
    assert _strip(resumed) == _strip(cleared)
    kept = _trainer(tiny_data).fit()
    assert _strip(kept)[:2] == _strip(resumed)[:2]
    assert [r["loss"] for r in kept][2:] != [r["loss"] for r in resumed][2:]


def test_a_full_checkpoint_resumes_without_note(tiny_data, tmp_path):
    _cut(tiny_data, tmp_path / "cut")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        resumed = _trainer(tiny_data, tmp_path / "cut").fit(resume=True)
    assert not any("momentum_restarted" in r for r in resumed)


def test_no_momentum_means_nothing_to_restart(tiny_data, tmp_path):
    config = dataclasses.replace(CFG, momentum=0.0)
    path = _cut(tiny_data, tmp_path / "cut", config=config)
    slim_checkpoint(path)
    assert not lacks_momentum(read_checkpoint(path))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        resumed = _trainer(tiny_data, tmp_path / "cut", config=config).fit(resume=True)
    assert not any("momentum_restarted" in r for r in resumed)


def test_slim_at_the_last_epoch_marks_nothing(tiny_data, tmp_path):
    path = _cut(tiny_data, tmp_path / "cut", n=4)
    slim_checkpoint(path)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        resumed = _trainer(tiny_data, tmp_path / "cut").fit(resume=True)
    assert len(resumed) == 4 and not any("momentum_restarted" in r for r in resumed)


@pytest.mark.parametrize("content", [b"", b"not a checkpoint"])
def test_slim_refuses_a_damaged_file_in_one_line(tmp_path, content):
    path = tmp_path / "checkpoint.pt"
    path.write_bytes(content)
    with pytest.raises(CheckpointError, match="damaged checkpoint|not a pllzoo checkpoint"):
        slim_checkpoint(path)
    assert path.read_bytes() == content
