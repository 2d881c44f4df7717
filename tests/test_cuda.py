"""The CUDA path: every method trains on a GPU, and the tensor kernels give the CPU's answers there.

Skipped where torch sees no CUDA device (CI, the 2-core development machine); run on a GPU machine with
``python -m pytest tests/test_cuda.py``.  The CPU suite pins the maths; these tests pin that nothing
leaves the device, mixes devices, or changes numbers beyond float tolerance when it moves to CUDA.
"""

from __future__ import annotations

import math

import pytest
import torch

from pllzoo.run import TrainConfig
from pllzoo.trainer import Trainer
from conftest import make_fake_images, registered_methods

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device: torch.cuda.is_available() is False")
CUDA = torch.device("cuda")


@pytest.mark.parametrize("name", registered_methods())
@pytest.mark.parametrize("amp", [True, False], ids=["bf16", "fp32"])
def test_method_trains_on_cuda(name, amp, registry):
    """Two stages where a method has them, strong/SimCLR views, mixup, queues: all on the GPU."""
    data = make_fake_images(n=64, k=4)
    method = registry.method(name)
    overrides = {"estimator.est_epochs": 1} if "estimator.est_epochs" in registry.hparam_keys(method) else {}
    comps = registry.build_components(method, overrides, dataset=(data.name, data.kind))
    cfg = TrainConfig(model="cnn", epochs=2, lr=0.01, weight_decay=0.0, batch_size=16, amp=amp)
    trainer = Trainer(data, comps, cfg, seed=1, device=CUDA)
    records = trainer.fit()
    assert records and all(math.isfinite(r["loss"]) for r in records)
    assert trainer.optimizer.defaults["fused"]  # one fused SGD kernel a step on CUDA
    assert trainer.test_metrics()["acc_all"] == records[-1]["acc_all"]  # the record is the final model's accuracy
    for key in trainer.state:
        assert trainer.state.get(key).device.type == "cuda", key
    if "confidence" in trainer.state:
        conf = trainer.state.confidence
        assert torch.isfinite(conf).all()
        torch.testing.assert_close(conf.sum(1), torch.ones(conf.shape[0], device=CUDA), atol=1e-4, rtol=0)
        assert torch.all(conf[~trainer.candidates] == 0)
    if "prior" in trainer.state:
        assert float(trainer.state.prior.sum()) == pytest.approx(1.0, abs=1e-5)


@pytest.mark.parametrize("name", registered_methods())
def test_method_trains_under_cuda_graphs(name, registry):
    """``train.compile=reduce-overhead`` (CUDA graphs per fixed size, SoLar's mixup padded): every method trains,
    with finite losses and confidences that stay distributions over the candidates."""
    data = make_fake_images(n=64, k=4)
    method = registry.method(name)
    overrides = {"estimator.est_epochs": 1} if "estimator.est_epochs" in registry.hparam_keys(method) else {}
    comps = registry.build_components(method, overrides, dataset=(data.name, data.kind))
    cfg = TrainConfig(model="cnn", epochs=2, lr=0.01, weight_decay=0.0, batch_size=16, compile="reduce-overhead")
    trainer = Trainer(data, comps, cfg, seed=1, device=CUDA)
    records = trainer.fit()
    assert records and all(math.isfinite(r["loss"]) for r in records)
    if "confidence" in trainer.state:
        conf = trainer.state.confidence
        assert torch.isfinite(conf).all() and torch.all(conf[~trainer.candidates] == 0)


@pytest.mark.parametrize("sparse", [False, True], ids=["dense", "csr"])
def test_sinkhorn_matches_cpu(sparse):
    from pllzoo_solar.sinkhorn import masked_log_softmax, sinkhorn

    g = torch.Generator().manual_seed(0)
    n, k = 2048, 40
    cand = torch.rand(n, k, generator=g) < 0.12
    cand[torch.arange(n), torch.randint(k, (n,), generator=g)] = True
    logits = torch.randn(n, k, generator=g)
    r = 100.0 ** (-torch.arange(k) / (k - 1))
    r = r / r.sum()
    ls = masked_log_softmax(logits, cand)
    cpu = sinkhorn(ls, r, sparse=sparse, max_iter=2000, tol=1e-4)
    gpu = sinkhorn(ls.to(CUDA), r.to(CUDA), sparse=sparse, max_iter=2000, tol=1e-4)
    assert gpu.q.device.type == "cuda" and gpu.sparse == cpu.sparse == sparse
    assert gpu.relaxed == cpu.relaxed
    torch.testing.assert_close(gpu.q.cpu(), cpu.q, atol=1e-4, rtol=0)
    assert cpu.col_err <= 1e-4 and gpu.col_err <= 1e-4 and torch.all(gpu.q.cpu()[~cand] == 0)


def test_classwise_selection_matches_cpu():
    from pllzoo_solar.selection import classwise_quota, small_loss_mask

    g = torch.Generator().manual_seed(1)
    pseudo = torch.randint(0, 397, (256,), generator=g)
    loss = torch.randint(0, 20, (256,), generator=g).float()  # many ties: the stable order must hold
    prior = torch.softmax(torch.randn(397, generator=g), 0)
    quota = classwise_quota(pseudo, prior, 0.6, 256)
    cpu = small_loss_mask(pseudo, loss, quota)
    gpu = small_loss_mask(pseudo.to(CUDA), loss.to(CUDA), classwise_quota(pseudo.to(CUDA), prior.to(CUDA), 0.6, 256))
    assert torch.equal(gpu.cpu(), cpu)


@pytest.mark.parametrize("view", ["weak", "strong", "simaugment", "pico-strong"])
def test_views_keep_images_on_the_device(view):
    from pllzoo.augment import make_view

    x = torch.randint(0, 256, (8, 3, 32, 32), dtype=torch.uint8)
    out_gpu = make_view(view)(x.to(CUDA), torch.Generator(CUDA).manual_seed(0))
    assert out_gpu.device.type == "cuda" and out_gpu.dtype == torch.uint8 and out_gpu.shape == x.shape
