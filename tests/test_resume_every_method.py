"""Every registered method (and a mixed recipe) resumes exactly: interrupt, resume, equal the uninterrupted run.

For each method the uninterrupted run is trained once; then, for every cut point, a fresh trainer with
fresh components is stopped after epoch k (``on_epoch`` raises; ``checkpoint_every=1`` so the checkpoint
is of epoch k, not of the stage start) and a second fresh trainer resumes from its checkpoint.  The cut
points are data-driven from the method's own stage plan: one epoch into every stage and one epoch
before its end (so a method with stages, SoLar's pre-estimation and VALEN's warm-up, is cut inside its
first and inside its last stage) and at every boundary between stages.  On CPU the per-epoch records
(all but ``wall_s``), the final network and extra-module weights and the method state must be equal bit
for bit: any state a component keeps outside the checkpoint (a Python attribute that changes during
training) shows up here.
"""

from __future__ import annotations

import math

import pytest
import torch

from pllzoo.run import TrainConfig
from pllzoo.trainer import Trainer
from conftest import make_fake_images, make_tiny_data, registered_methods

MIXED = ["proden+selection=solar.classwise+estimator=solar.prior"]
# image runs (CNN; strong view, and mixup where the protocol adds it): PiCO, whose loss always reads the
# strong view, SoLar (mixup over the reliable rows) and PRODEN, standing for the protocol baselines, which
# all share ProtocolLoss; HTC (two heads, four passes) and CORR + RECORDS with mixup (joint views, the
# feature-mean prior); the rest run on tabular data, where they have no strong view (all pass on images too)
IMAGE = ["pico", "solar", "proden", "htc", "corr-records-mixup"]
CASES = [(name, "tabular") for name in registered_methods() + MIXED] + [(name, "image") for name in IMAGE]
EPOCHS = 3  # the main stage's length; first stages are shortened to 2 below


@pytest.fixture(autouse=True)
def _one_thread(one_torch_thread):
    """Bit-for-bit comparisons: one torch thread (conftest.one_torch_thread)."""


class _Interrupt(Exception):
    pass


def _overrides(registry, method) -> dict:
    """Short first stages and small queues, where the method has them and does not fix them itself."""
    keys = registry.hparam_keys(method)
    wanted = {"estimator.est_epochs": 2, "loss.warm_up": 2, "label_update.queue_length": 2,
              "loss.queue": 24, "loss.low_dim": 16}  # pico's queue: not a multiple of the batch, so it wraps
    return {k: v for k, v in wanted.items() if k in keys and k not in method.hparams}


def _plain(records):
    """Records without ``wall_s``; floats by ``repr`` (exact, and NaN equals NaN)."""
    return [{k: repr(v) if isinstance(v, float) else v for k, v in r.items() if k != "wall_s"} for r in records]


def _cut_points(trainer: Trainer, epochs: int) -> list[int]:
    """Numbers of records after which to interrupt: one epoch into each stage and one epoch before its
    end (where those are inside it), and each boundary between stages."""
    cuts, done = [], 0
    plan = trainer.stages()
    for i, stage in enumerate(plan):
        n = stage.epochs if stage.epochs is not None else epochs
        cuts += [done + e for e in (1, n - 1) if 0 < e < n]
        done += n
        if i < len(plan) - 1 and n > 0:
            cuts.append(done)
    return sorted(set(cuts))


@pytest.mark.parametrize(("name", "kind"), CASES, ids=[f"{n}-{k}" for n, k in CASES])
def test_resume_equals_uninterrupted(name, kind, registry, tmp_path):
    image = kind == "image"
    data = make_fake_images(n=32) if image else make_tiny_data(n=48)
    cfg = TrainConfig(model="cnn" if image else "linear", epochs=EPOCHS, lr=0.05 if image else 0.1,
                      weight_decay=1e-4, batch_size=16, checkpoint_every=1)
    method = registry.method(name)
    overrides = _overrides(registry, method)

    def trainer(run_dir, on_epoch=None) -> Trainer:
        comps = registry.build_components(method, overrides, dataset=(data.name, data.kind))  # fresh objects
        run_dir.mkdir(exist_ok=True)
        return Trainer(data, comps, cfg, seed=7, device=torch.device("cpu"), run_dir=run_dir, on_epoch=on_epoch)

    full_trainer = trainer(tmp_path / "full")
    full = full_trainer.fit()
    assert all(math.isfinite(r["loss"]) for r in full)
    cuts = _cut_points(full_trainer, EPOCHS)
    if len(full_trainer.stages()) > 1:
        assert len(cuts) >= 3, cuts  # inside the first stage, at the boundary, inside the last stage
    assert cuts and max(cuts) < len(full)

    for k in cuts:
        run_dir = tmp_path / f"cut{k}"

        def stop(records, k=k):
            if len(records) == k:
                raise _Interrupt

        with pytest.raises(_Interrupt):
            trainer(run_dir, stop).fit()
        resumed_trainer = trainer(run_dir)
        resumed = resumed_trainer.fit(resume=True)
        where = f"{name}: interrupted after epoch record {k}"
        assert _plain(resumed) == _plain(full), where
        for key, value in full_trainer.model.state_dict().items():
            assert torch.equal(resumed_trainer.model.state_dict()[key], value), f"{where}: weight {key}"
        assert sorted(resumed_trainer.modules) == sorted(full_trainer.modules), where
        for mod_name, module in full_trainer.modules.items():
            other = resumed_trainer.modules[mod_name].state_dict()
            for key, value in module.state_dict().items():
                assert torch.equal(other[key], value), f"{where}: module {mod_name}.{key}"
        assert list(resumed_trainer.state) == list(full_trainer.state), where
        for key in full_trainer.state:
            a, b = resumed_trainer.state.get(key), full_trainer.state.get(key)
            if a.is_sparse:
                a, b = a.to_dense(), b.to_dense()
            assert torch.equal(a, b), f"{where}: state {key}"
