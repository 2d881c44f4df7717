"""SoLar's mixup over the reliable rows at the batch's fixed shape (``train.mixup_rows=padded``,
pllzoo.mixup.padded_mixup_loss + pllzoo.masked_bn): the same value and gradient as the exact |R|-row
pass for the same l and π, no host read in a step, and the trainer's views grouped over batches."""

from __future__ import annotations

import copy
import dataclasses

import pytest
import torch

from pllzoo import masked_bn
from pllzoo.losses import soft_cross_entropy
from pllzoo.mixup import mixup_coefficient, mixup_loss, padded_mixup_loss, true_rows
from pllzoo.models import build_model
from pllzoo.run import Batch, Stage, Step, TrainConfig
from pllzoo.syncs import count_syncs
from pllzoo.trainer import Trainer
from conftest import make_fake_images

B, K = 12, 4
CUDA = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")


def _step(model, x, rows, forward_padded=None, seed=3):
    logits = model(x)
    batch = Batch(torch.arange(B, device=x.device), x, torch.ones(B, K, device=x.device),
                  torch.zeros(B, dtype=torch.long, device=x.device))
    host, device = _generators(x.device.type, seed)
    return Step(batch=batch, logits=logits, probs=logits.softmax(1).detach(), forward=model, generator=host,
                epoch=1, stage=Stage(), nominal_batch_size=B, device_generator=device, forward_padded=forward_padded)


def _padded_forward(model, masks):
    """``Step.forward_padded`` of a bare network with masked BatchNorm (the trainer's, without autocast)."""
    def forward(x, weight):
        with masks.applied(weight):
            return model(x)
    return forward


def _generators(device: str, seed: int = 3) -> tuple[torch.Generator, torch.Generator]:
    """(host, device) generators as the trainer makes them: one and the same on CPU."""
    host = torch.Generator().manual_seed(seed)
    return host, (host if device == "cpu" else torch.Generator(device=device).manual_seed(seed))


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=CUDA)])
@pytest.mark.parametrize("n", [5, 12, 2])
def test_padded_equals_exact_for_the_same_draws(n: int, device: str) -> None:
    torch.manual_seed(0)
    plain = build_model("cnn", K, (3, 16, 16)).double().train().to(device)
    padded = copy.deepcopy(plain)
    masks = masked_bn.install(padded, capacity=B)

    x = torch.randn(B, 3, 16, 16, dtype=torch.float64).to(device)
    q = torch.softmax(torch.randn(B, K, dtype=torch.float64), 1).to(device)
    rows = torch.zeros(B, dtype=torch.bool, device=device)
    rows[torch.randperm(B, generator=torch.Generator().manual_seed(n))[:n]] = True
    got = padded_mixup_loss(_step(padded, x, rows, _padded_forward(padded, masks)), soft_cross_entropy, q, 4.0, rows)
    plain(x)  # the weak pass _step made on the padded copy: the same running-statistics update
    # the exact path by hand, with the padded path's draws: l from the host generator, then π from the keys
    host, gen = _generators(device)
    lam = mixup_coefficient(host, 4.0)
    keys = torch.rand(B, generator=gen, dtype=torch.float64, device=device)
    pos = torch.arange(B, device=device)
    pi = torch.where(pos < n, keys, 2.0 + pos).argsort()[:n]
    assert sorted(pi.tolist()) == list(range(n))
    keep = true_rows(rows, n)
    xr, qr = x[keep], q[keep]
    logits = plain(lam * xr + (1 - lam) * xr[pi])
    want = (lam * soft_cross_entropy(logits, qr) + (1 - lam) * soft_cross_entropy(logits, qr[pi])).mean()
    torch.testing.assert_close(got, want, rtol=1e-10, atol=1e-12)
    got.backward(), want.backward()
    for a, b in zip(plain.parameters(), padded.parameters()):
        torch.testing.assert_close(b.grad, a.grad, rtol=1e-8, atol=1e-12)
    for (key, a), (_, b) in zip(plain.state_dict().items(), padded.state_dict().items()):
        torch.testing.assert_close(b, a, rtol=1e-10, atol=1e-12, msg=key)


@pytest.mark.parametrize("n", [0, 1])
def test_fewer_than_two_rows_add_nothing(n: int) -> None:
    torch.manual_seed(0)
    model = build_model("cnn", K, (3, 16, 16)).train()
    masks = masked_bn.install(model, capacity=B)
    before = copy.deepcopy(model.state_dict())

    x = torch.randn(B, 3, 16, 16)
    rows = torch.arange(B) < n
    step = _step(model, x, rows, _padded_forward(model, masks))
    model.load_state_dict(before)  # _step's plain forward moved the running statistics
    loss = padded_mixup_loss(step, soft_cross_entropy, torch.full((B, K), 1 / K), 4.0, rows)
    assert float(loss.detach()) == 0.0
    loss.backward()
    assert all(p.grad is None or not p.grad.any() for p in model.parameters())
    for key, value in model.state_dict().items():
        torch.testing.assert_close(value, before[key], msg=key)


SOLAR = {"estimator.est_epochs": 0, "label_update.queue_length": 1, "loss.warmup_epochs": 0,
         "selection.warmup_epochs": 0}


def _trainer(registry, **train) -> Trainer:
    data = make_fake_images(n=64, k=4)
    comps = registry.build_components(registry.method("solar"), SOLAR, dataset=(data.name, data.kind))
    cfg = TrainConfig(model="cnn", epochs=4, lr=0.05, weight_decay=1e-4, batch_size=16, strong_view="weak", **train)
    return Trainer(data, comps, cfg, seed=1, device=torch.device("cpu"))


def test_solar_step_with_padded_mixup_reads_nothing(registry) -> None:
    torch.set_num_threads(1)
    trainer = _trainer(registry, mixup_rows="padded")
    trainer._enter_stage(trainer.stages()[-1])
    assert trainer.row_masks is not None
    trainer.hooks.pllzoo_on_epoch_start(run=trainer.run, epoch=3, state=trainer.state)
    stage = trainer.run.stage
    gen, vgen = trainer.generators(stage, 3)
    perm = torch.randperm(64, generator=vgen)
    for b in range(4):
        with count_syncs(cuda=False) as syncs:
            step, loss = trainer.step(stage, 3, perm[16 * b: 16 * (b + 1)], gen, vgen)
        assert syncs.ops == [] and torch.isfinite(loss)
        assert step.forward_padded is not None


@CUDA
def test_solar_trains_under_cuda_graphs_with_padded_mixup(registry) -> None:
    """compile=reduce-overhead on CUDA: the padded pass (auto) is a graphed size, and SoLar trains."""
    data = make_fake_images(n=64, k=4)
    comps = registry.build_components(registry.method("solar"), SOLAR, dataset=(data.name, data.kind))
    cfg = TrainConfig(model="cnn", epochs=3, lr=0.05, batch_size=16, compile="reduce-overhead")
    trainer = Trainer(data, comps, cfg, seed=1, device=torch.device("cuda"))
    records = trainer.fit()
    assert trainer.row_masks is not None and all(torch.isfinite(torch.tensor(r["loss"])) for r in records)


def test_auto_is_exact_without_cuda_graphs(registry) -> None:
    trainer = _trainer(registry)
    trainer._enter_stage(trainer.stages()[-1])
    assert trainer.row_masks is None  # the recorded CPU runs are untouched


def test_padded_run_trains_and_keeps_checkpoint_keys(registry, tmp_path) -> None:
    torch.set_num_threads(1)
    exact, padded = _trainer(registry), _trainer(registry, mixup_rows="padded")
    records = [t.fit() for t in (exact, padded)]
    assert all(r[-1]["loss"] == r[-1]["loss"] for r in records)  # finite
    assert list(exact.model.state_dict()) == list(padded.model.state_dict())


def test_grouped_views_train_and_one_group_is_the_per_step_stream(registry) -> None:
    """view_batches=1 (the CPU default) keeps the recorded stream; N > 1 computes N batches' views per call."""
    torch.set_num_threads(1)
    runs = {n: _trainer(registry, view_batches=n).fit() for n in (0, 1, 3)}
    assert [r["loss"] for r in runs[0]] == [r["loss"] for r in runs[1]]
    assert all(r["loss"] == r["loss"] for r in runs[3])
    assert [r["loss"] for r in runs[3]] != [r["loss"] for r in runs[1]]  # another view stream


def test_view_group_size(registry) -> None:
    trainer = _trainer(registry, view_batches=7)
    assert trainer._view_group(16) == 7
    trainer.VIEW_GROUP_BYTES = 16 * trainer.x_train[0].numel() * 4 * 2 * 3  # room for 3 batches of both views
    assert trainer._view_group(16) == 3
    assert dataclasses.replace(trainer.config, view_batches=0).view_batches == 0


def test_padded_asked_for_an_unsupported_model_warns_and_runs_exact(registry, monkeypatch) -> None:
    monkeypatch.setattr(masked_bn, "supports", lambda model: False)  # e.g. a third-party net with InstanceNorm
    trainer = _trainer(registry, mixup_rows="padded")
    with pytest.warns(UserWarning, match="mixup over a subset runs exact"):
        trainer._enter_stage(trainer.stages()[-1])
    assert trainer.row_masks is None


@pytest.mark.parametrize("padded_path", [False, True])
def test_mixed_batch_keeps_a_channels_last_layout(padded_path: bool) -> None:
    """The trainer feeds a channels-last batch on CUDA; the mixup pass over rows must hand the network a
    channels-last batch too (``index_select`` alone returns NCHW), with the same values as the NCHW path."""
    seen = []

    def net(x):
        seen.append((x.is_contiguous(memory_format=torch.channels_last), x.detach().clone()))
        return x.flatten(1)[:, :K] * 1.0

    rows = torch.tensor([True, False, True, True, False, True] * 2)
    x = torch.randn(B, 3, 5, 7)
    for layout in (torch.contiguous_format, torch.channels_last):
        xl = x.contiguous(memory_format=layout)
        batch = Batch(torch.arange(B), xl, torch.ones(B, K), torch.zeros(B, dtype=torch.long))
        host = torch.Generator().manual_seed(5)
        step = Step(batch=batch, logits=net(xl), probs=torch.full((B, K), 1 / K), forward=net, generator=host,
                    epoch=1, stage=Stage(), nominal_batch_size=B, device_generator=host,
                    forward_padded=(lambda v, w: net(v)) if padded_path else None)
        mixup_loss(step, soft_cross_entropy, torch.full((B, K), 1 / K), 1.0, rows, n_rows=int(rows.sum()))
    (nchw_layout, nchw), (cl_layout, cl) = seen[1], seen[3]  # each layout: the step's pass, then the mixed one
    assert not nchw_layout and cl_layout
    assert torch.equal(nchw, cl)  # the same mixed values in either layout
