"""Training steps that never make the host wait for the device, checked on a CPU with ``count_syncs()``.

Each case runs whole training steps through the trainer's ``step`` (views → forward → label update →
selection → loss → SGD → post-step) past the first epoch, with SoLar's queue full, and counts the
operations that would synchronise on CUDA (``pllzoo.syncs``).  Inside ``count_syncs()`` components take
their accelerator path (``host_reads_are_free`` is False), so this checks the code that runs on a GPU.
The epoch's one read of the summed logs is outside the counted steps.
"""

from __future__ import annotations

import pytest
import torch

from pllzoo.run import TrainConfig
from pllzoo.syncs import count_syncs
from pllzoo.trainer import Trainer
from conftest import make_fake_images, make_tiny_data

EPOCH = 3  # past SoLar's first-epoch rule
SOLAR_FAST = {"estimator.est_epochs": 0, "label_update.queue_length": 1, "loss.warmup_epochs": 0,
              "selection.warmup_epochs": 0}
# method, hyper-parameters, image data?, host syncs per step
CASES = [
    ("solar", SOLAR_FAST, False, 0),  # tabular: no consistency, no mixup
    ("solar", {**SOLAR_FAST, "loss.mixup": False}, True, 0),  # image: strong view + consistency
    ("solar", SOLAR_FAST, True, 1),  # with mixup: |R| is read once (pllzoo_solar/loss.py)
    ("solar", {**SOLAR_FAST, "label_update.stop": "fixed"}, False, 0),
    ("solar", {**SOLAR_FAST, "selection.mode": "global"}, False, 0),
    ("solar", {**SOLAR_FAST, "estimator.mode": "online"}, False, 0),
    ("proden", {}, False, 0),
    ("proden", {}, True, 0),  # the SoLar protocol: consistency + mixup over the whole batch
    ("cc", {}, False, 0),
    ("cc", {}, True, 0),
    ("lws", {}, True, 0),
    ("mse", {}, True, 0),
    ("exp", {}, True, 0),
    ("pico", {"loss.prot_start": 0}, True, 0),
    ("corr", {}, True, 0),  # two views in one forward
    ("corr-records-mixup", {}, True, 0),  # + the feature-mean prior (logit offset) and the mixed pair
    ("proden-records", {}, True, 0),
    ("htc", {}, False, 1),  # |R| of both heads, read once (pllzoo_ltpll/htc.py)
    ("htc", {}, True, 1),
    ("valen", {}, False, 2),  # its k-NN graph block: index_select on a sparse matrix (data-dependent nnz)
    ("valen", {}, True, 2),
]


def _trainer(registry, method: str, hp: dict, image: bool, **views: str) -> Trainer:
    data = make_fake_images(n=64, k=4) if image else make_tiny_data(n=96, k=4)
    comps = registry.build_components(registry.method(method), hp, dataset=(data.name, data.kind))
    # the strong view is the weak one here: SoLar's RandAugment runs per image in PIL on the host (by design;
    # off the step with --view-workers), and this file checks the methods' code
    cfg = TrainConfig(model="cnn" if image else "mlp", epochs=EPOCH + 1, lr=0.05, weight_decay=1e-4, batch_size=16,
                      **{"strong_view": "weak", **views})
    trainer = Trainer(data, comps, cfg, seed=1, device=torch.device("cpu"))
    trainer._enter_stage(trainer.stages()[-1])
    trainer.hooks.pllzoo_on_epoch_start(run=trainer.run, epoch=EPOCH, state=trainer.state)
    return trainer


@pytest.mark.parametrize("method,hp,image,expected", CASES,
                         ids=[f"{m}-{'image' if i else 'tabular'}-{'+'.join(h) if h else 'default'}"[:80]
                              for m, h, i, _ in CASES])
def test_steps_do_not_sync(registry, method, hp, image, expected):
    torch.set_num_threads(1)
    trainer = _trainer(registry, method, hp, image)
    stage = trainer.run.stage
    gen, vgen = trainer.generators(stage, EPOCH)
    perm = torch.randperm(trainer.x_train.shape[0], generator=vgen)
    counts, logs = [], []
    for b in range(4):  # SoLar's queue (one batch long) is full from the second step on
        with count_syncs(cuda=False) as syncs:
            step, loss = trainer.step(stage, EPOCH, perm[16 * b: 16 * (b + 1)], gen, vgen)
        counts.append(syncs.ops)
        logs.append(step.logs)
    assert [len(ops) for ops in counts] == [expected] * 4, counts
    assert torch.isfinite(loss)
    if method == "solar":  # the Sinkhorn logs are device tensors, read once per epoch by the trainer
        assert all(isinstance(lg["sinkhorn_iters"], torch.Tensor) for lg in logs)
        assert int(logs[-1]["sinkhorn_iters"]) >= 1


@pytest.mark.parametrize("method,hp,views", [
    ("solar", {**SOLAR_FAST, "loss.mixup": False}, {"strong_view": "strong-batched"}),
    ("pico", {"loss.prot_start": 0}, {"strong_view": "pico-strong-batched", "weak_view": "simaugment-batched"}),
])
def test_batched_views_in_a_step_do_not_sync(registry, method, hp, views):
    """An outside review: the batched views chose their path by ``device.type == "cpu"``, so inside count_syncs on
    a CPU they ran the CPU path (9 counted ops a SoLar step, 17 a PiCO step) and the accelerator's was checked on
    CUDA only; they now take it wherever host reads are not free, as the rest of the step does."""
    torch.set_num_threads(1)
    trainer = _trainer(registry, method, hp, True, **views)
    stage = trainer.run.stage
    gen, vgen = trainer.generators(stage, EPOCH)
    perm = torch.randperm(trainer.x_train.shape[0], generator=vgen)
    for b in range(2):
        with count_syncs(cuda=False) as syncs:
            _, loss = trainer.step(stage, EPOCH, perm[16 * b: 16 * (b + 1)], gen, vgen)
        assert syncs.count == 0, syncs.ops
        assert torch.isfinite(loss)


def test_solar_steps_equal_with_and_without_host_reads(registry):
    """The accelerator path (inside count_syncs) trains exactly as the CPU path: same losses, same state."""
    runs = []
    for counted in (False, True):
        torch.manual_seed(0)
        trainer = _trainer(registry, "solar", SOLAR_FAST, False)
        stage = trainer.run.stage
        gen, vgen = trainer.generators(stage, EPOCH)
        perm = torch.randperm(trainer.x_train.shape[0], generator=vgen)
        losses = []
        for b in range(6):
            idx = perm[16 * b: 16 * (b + 1)]
            if counted:
                with count_syncs(cuda=False):
                    losses.append(trainer.step(stage, EPOCH, idx, gen, vgen)[1].detach())
            else:
                losses.append(trainer.step(stage, EPOCH, idx, gen, vgen)[1].detach())
        runs.append((torch.stack(losses), trainer.state.confidence.clone(), trainer.state.sinkhorn_log_beta.clone(),
                     [p.detach().clone() for p in trainer.model.parameters()]))
    (l0, c0, b0, p0), (l1, c1, b1, p1) = runs
    assert torch.equal(l0, l1) and torch.equal(c0, c1) and torch.equal(b0, b1)
    assert all(torch.equal(a, b) for a, b in zip(p0, p1))
