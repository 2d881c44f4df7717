"""Multi-process training (torchrun/DDP) on CPU: 2 gloo processes equal 1 process with the global batch.

The rules D1–D11 of ``docs/distributed.md``.  One pair of processes (tests/ddp_workers.py, spawned once per module) trains every
ready method with per-rank batch B/2; the references train here in one process with batch B.
Tolerance (float32, the mlp-nobn of ddp_workers, 3 epochs of 6 steps): the gradients are averaged
over 2 slices instead of summed over one batch, so the numbers agree up to float32 reduction order:
losses and tables to ``RTOL``/``ATOL`` below, accuracies exactly.  The LR is small on purpose: at
lr 0.1 CORR's −log(|1 − p| + 1e−9) saturates on this toy (loss 2.7 → 12 in 3 epochs) and the float32
differences grow chaotically (2e-4 relative by epoch 3); at 0.02 they stay at ~1e-7.
"""

from __future__ import annotations

import math

import pytest
import torch

import ddp_workers
from conftest import make_tiny_data
from pllzoo.distributed import SINGLE
from pllzoo.run import TrainConfig

pytestmark = pytest.mark.skipif(
    not (torch.distributed.is_available() and torch.distributed.is_gloo_available()),
    reason="torch.distributed with the gloo backend is unavailable in this torch build")

RTOL, ATOL = 1e-5, 1e-6  # measured: losses and logs ≤ 2.8e-7 relative, state ≤ 2.4e-7 (SoLar: ≤ 9.5e-7, its queue
# of log-probabilities and confidences; its prior exact), weights ≤ 1.2e-7 (float32)
CFG = TrainConfig(model="mlp-nobn", epochs=3, lr=0.02, weight_decay=1e-4, batch_size=16)
#: a torchrun case whose sibling in the default suite covers the same path (each launch costs two interpreters and
#: a rendezvous): run with -m slow, which keeps the default suite near ten minutes on two cores
SLOW_SIBLING = pytest.mark.slow
MIXUP = {"loss.mixup": True}  # tabular defaults turn the protocol's mixup off: force it on (D7)
SOLAR_FAST = {"estimator.est_epochs": 0, "label_update.queue_length": 1, "loss.warmup_epochs": 0,
              "selection.warmup_epochs": 0}
READY = {  # test id -> (method, hyper-parameter overrides)
    "proden": ("proden", {}), "cc": ("cc", {}), "corr": ("corr", {}), "corr-records": ("corr-records", {}),
    "proden-records": ("proden-records", {}), "cc-records": ("cc-records", {}),
    "proden-mixup": ("proden", MIXUP), "cc-mixup": ("cc", MIXUP), "corr-records-mixup": ("corr-records-mixup", {}),
    "lws-mixup": ("lws", MIXUP), "mse": ("mse", {}), "exp-mixup": ("exp", MIXUP),  # MSE/EXP: |S| = K rows masked (D5)
    "htc": ("htc", {"loss.ramp_epochs": 1}),  # η = 0.9 from epoch 1: the selected-row terms at full weight (D10)
    # SoLar (D3/D4/D5/D7/D8): a queue of one global batch (full from the second step), ramps done at epoch 0
    "solar": ("solar", {**SOLAR_FAST, "estimator.est_epochs": 1, "loss.mixup": True}),  # + the pre-estimation stage
    "solar-online-cr": ("solar", {**SOLAR_FAST, "label_update.queue_length": 2, "estimator.mode": "online",
                                  "loss.cr": True}),  # votes all-reduced per step; the sync-free empty-R branch
    "solar-global-selection": ("solar-global-selection", SOLAR_FAST),
    "solar-no-selection": ("solar-no-selection", {k: v for k, v in SOLAR_FAST.items() if "selection" not in k}),
    "proden-s-cpe": ("proden-s-cpe", {k: v for k, v in SOLAR_FAST.items() if "label_update" not in k}),
    # the built-in soft CE behind a class-wise selection: its mean is over the global batch's selected rows (D5)
    "proden-s-cpe-soft-ce": ("proden-s-cpe+loss=pllzoo.soft_ce",
                             {k: v for k, v in SOLAR_FAST.items() if k.split(".")[0] in ("estimator", "selection")}),
    # PiCO (D11): MoCo in epoch 0, SupCon over [q_G; k_G; queue] and W from the prototypes from epoch 1; a queue of
    # two global batches (wraps around); the strong view is the identity on tabular data
    "pico": ("pico", {"loss.queue": 32}),
    # VALEN: a 1-epoch PRODEN warm-up, then the kNN graph (replicated), d̃ drawn for the global batch, the graph term
    # against the gathered d̃, o and d by rows.  γ = 1: with the tabular γ = 20 this toy is chaotic in one process
    # already (the LR × (1 + 1e-6) moves d by 3.7e-3 and enc by 3.1e-3 after 3 epochs; 2 processes: 1.9e-3, 1.6e-3)
    "valen": ("valen", {"loss.warm_up": 1, "loss.gamma": 1.0}),
}


@pytest.fixture(scope="module")
def test_model():
    from pllzoo.models import MODELS
    from pllzoo.registry import reset_registry

    ddp_workers.add_test_model()
    yield
    MODELS.pop("mlp-nobn", None)
    reset_registry()


@pytest.fixture(scope="module")
def two_ranks(tmp_path_factory, test_model):
    """Every READY method trained by 2 processes (per-rank batch 8), once per module: ``{method: [rank0, rank1]}``."""
    jobs = [(m, o, CFG, 3) for m, o in READY.values()]
    out = ddp_workers.spawn(ddp_workers.train_many, tmp_path_factory.mktemp("ddp"), jobs)
    return {m: [out[0][i], out[1][i]] for i, m in enumerate(READY)}


N_ROWS, K_ROWS = 12, 3
ROW_BATCHES = [torch.randperm(N_ROWS, generator=torch.Generator().manual_seed(s))[:4] for s in range(5)]
X_MEAN = torch.arange(12.0).view(6, 2)
V_MASK = torch.arange(1.0, 9.0)
MASK = torch.tensor([True, False, False, False, True, True, True, False])  # 1 selected row on rank 0, 3 on rank 1
_sk = torch.Generator().manual_seed(7)
SK_LOGITS = [3 * torch.randn(16, 5, generator=_sk) for _ in range(5)]  # 5 global batches of B = 16, K = 5
SK_CAND = [(torch.rand(16, 5, generator=_sk) < 0.4) | torch.eye(5, dtype=torch.bool)[torch.arange(16) % 5]
           for _ in range(5)]
SK_PRIOR = torch.tensor([0.4, 0.25, 0.15, 0.12, 0.08])
_gq = torch.Generator().manual_seed(11)
GQ_X, GQ_K = torch.randn(8, 5, generator=_gq), torch.nn.functional.normalize(torch.randn(8, 5, generator=_gq), dim=1)
GQ_QUEUE = torch.nn.functional.normalize(torch.randn(6, 5, generator=_gq), dim=1)
GQ_LABELS, GQ_QLABELS = torch.tensor([0, 1, 2, 0, 1, 1, 2, 0]), torch.tensor([2, 0, 1, 1, -1, 0])
VALEN_S = 0.01 + torch.rand(8, 4, generator=_gq)  # Dirichlet concentrations of a global batch of 8
REFUSED = [("valen", {}, CFG, "loss"),  # every shipped component is ready: one marked not ready
           ("proden", {}, TrainConfig(model="mlp-nobn", batch_size=15)),
           ("proden", {}, TrainConfig(model="mlp-nobn", batch_size=16, drop_last=False))]


@pytest.fixture(scope="module")
def small_jobs(tmp_path_factory, test_model):
    """The rows table, the refusals and the global mean of 2 processes, in one spawn: ``[rank0, rank1]``."""
    calls = [(ddp_workers.rows, (N_ROWS, K_ROWS, ROW_BATCHES)), (ddp_workers.refusals, (REFUSED,)),
             (ddp_workers.batch_mean_of_halves, (X_MEAN,)), (ddp_workers.masked_mean_grads, (V_MASK, MASK)),
             (ddp_workers.module_grads, ()),
             (ddp_workers.sinkhorn_rows, (SK_LOGITS, SK_CAND, SK_PRIOR, 2)),
             (ddp_workers.gather_grads, (GQ_X, GQ_K, GQ_QUEUE, GQ_LABELS, GQ_QLABELS)),
             (ddp_workers.valen_draw, (VALEN_S, 5)), (ddp_workers.stop_votes, ()), (ddp_workers.plan_agreement, ())]
    return ddp_workers.spawn(ddp_workers.several, tmp_path_factory.mktemp("small"), calls)


def _one_process(method: str, overrides=None, cfg=CFG, run_dir=None, on_epoch=None, resume=False, device="cpu"):
    from pllzoo.registry import get_registry
    from pllzoo.trainer import Trainer

    reg, data = get_registry(), make_tiny_data()
    comps = reg.build_components(reg.method(method), overrides or {}, (data.name, data.kind))
    trainer = Trainer(data, comps, cfg, seed=3, device=torch.device(device), run_dir=run_dir, on_epoch=on_epoch)
    seen = []
    step = trainer.step
    trainer.step = lambda stage, epoch, idx, *a, **kw: (seen.append(idx.clone()), step(stage, epoch, idx, *a, **kw))[1]
    records = [{k: v for k, v in r.items() if k != "wall_s"} for r in trainer.fit(resume=resume)]
    cpu = lambda t: t.detach().cpu() if isinstance(t, torch.Tensor) else t  # noqa: E731
    return {"records": records, "state": trainer.state.state_dict(),
            "model": {k: cpu(v) for k, v in trainer.model.state_dict().items()},
            "modules": {f"{m}.{k}": cpu(v) for m, mod in trainer.modules.items() for k, v in mod.state_dict().items()},
            "batches": [cpu(b) for b in seen]}


def _assert_same_run(got: dict, ref: dict, rtol: float = RTOL, atol: float = ATOL) -> None:
    """Per-epoch records (accuracies exact, losses to tolerance), method state and weights to tolerance."""
    assert len(got["records"]) == len(ref["records"])
    for a, b in zip(got["records"], ref["records"]):
        assert list(a) == list(b)  # in the same order too (an outside review: DDP sorted the logged keys)
        for key in a:
            if isinstance(b[key], float) and not key.startswith("acc"):
                assert math.isclose(a[key], b[key], rel_tol=rtol, abs_tol=atol), (key, a[key], b[key])
            elif isinstance(b[key], list) and b[key] and all(isinstance(v, float) for v in b[key]):
                # logged vectors (the prior) are rounded to 6 decimals: a last-bit difference of the sums under
                # another reduction order may land one rounding step away (seen on another CPU)
                assert len(a[key]) == len(b[key]) and all(
                    math.isclose(x, y, rel_tol=rtol, abs_tol=atol + 1e-6) for x, y in zip(a[key], b[key])), \
                    (key, a[key], b[key])
            else:
                assert a[key] == b[key], (key, a[key], b[key])
    assert got["state"].keys() == ref["state"].keys()
    for key, value in ref["state"].items():
        torch.testing.assert_close(got["state"][key], value, rtol=rtol, atol=atol, msg=key)
    for part in ("model", "modules"):  # the network, and the extra modules (HTC's tail classifier and A)
        assert got[part].keys() == ref[part].keys()
        for key, value in ref[part].items():
            torch.testing.assert_close(got[part][key], value, rtol=rtol, atol=atol, msg=key)


def test_single_process_context_is_the_identity():
    x = torch.randn(4, 3)
    assert SINGLE.world == 1 and SINGLE.is_main and not SINGLE.active
    assert SINGLE.gather(x) is x and SINGLE.all_reduce_sum(x) is x and SINGLE.broadcast(x) is x
    assert torch.equal(SINGLE.batch_mean(x), x.mean(0)) and SINGLE.any(True) and not SINGLE.any(False)


def test_sampler_slices_concatenate_to_the_one_process_batches(two_ranks, test_model):
    """D1: same steps per epoch; rank 0's slice then rank 1's is the 1-process batch; no duplicates."""
    ref = _one_process("proden")["batches"]
    rank0, rank1 = (r["batches"] for r in two_ranks["proden"])
    assert len(rank0) == len(rank1) == len(ref) == 3 * (96 // 16)
    for a, b, whole in zip(rank0, rank1, ref):
        assert a.numel() == b.numel() == 8
        assert torch.equal(torch.cat([a, b]), whole)
    per_epoch = torch.stack([torch.cat([a, b]) for a, b in zip(rank0, rank1)]).view(3, -1)
    assert all(row.unique().numel() == row.numel() for row in per_epoch)


def test_rows_tables_are_equal_on_every_rank_and_to_one_process(small_jobs):
    """D2: after steps of per-rank writes, both replicas equal the table one process writes."""
    replicas = [rank[0] for rank in small_jobs]
    assert torch.equal(replicas[0], replicas[1])
    assert torch.equal(replicas[0], ddp_workers.rows(SINGLE, N_ROWS, K_ROWS, ROW_BATCHES))
    assert replicas[0].abs().sum() > 0


@pytest.mark.parametrize("case", list(READY))
def test_two_processes_equal_one_process(two_ranks, case, test_model):
    """Per-epoch losses and accuracies, the method state and the weights: 2 × batch 8 = 1 × batch 16
    (with mixup: the same coefficient and pairing over the global batch as one process, D7)."""
    ref = _one_process(*READY[case])
    for rank in two_ranks[case]:
        _assert_same_run(rank, ref)
    dense = lambda t: t.to_dense() if t.is_sparse else t  # noqa: E731  (VALEN's kNN graph)
    for key, value in two_ranks[case][0]["state"].items():  # the replicas agree bit for bit
        assert torch.equal(dense(value), dense(two_ranks[case][1]["state"][key])), key


def test_not_ready_recipes_are_refused_before_training(small_jobs):
    errors = small_jobs[0][1]
    assert errors[0].startswith("not ready for 2 processes (DDP): ")
    assert "loss 'valen.loss'" in errors[0] and "valen.targets" not in errors[0]  # names the components not ready only
    assert "batch_size 15 is not divisible by the 2 processes" in errors[1]
    assert "drop_last=false" in errors[2]
    assert all("\n" not in e for e in errors)


@pytest.mark.parametrize("method, overrides", [
    pytest.param("corr-records", {}, marks=SLOW_SIBLING),
    ("solar", {**SOLAR_FAST, "estimator.est_epochs": 1, "label_update.queue_length": 2}),  # the queue restored
    pytest.param("pico", {"loss.queue": 32}, marks=SLOW_SIBLING),  # prototypes, queue, head and key encoder restored
    pytest.param("valen", {"loss.warm_up": 1, "loss.gamma": 1.0}, marks=SLOW_SIBLING),  # kNN graph, d, enc, dec
], ids=["corr-records", "solar", "pico", "valen"])
def test_resume_a_one_process_checkpoint_with_two_processes(tmp_path, test_model, method, overrides):
    """A checkpoint is the same for any G: one process stops after its second epoch, two processes finish the run;
    rank 0 alone wrote; equal to the uninterrupted 1-process run (SoLar: stopped in its final stage, with the
    Sinkhorn queue and the carried prior in the checkpoint)."""
    cfg = TrainConfig(model="mlp-nobn", epochs=4, lr=0.02, batch_size=16, checkpoint_every=1)

    class Cut(Exception):
        pass

    def cut(records):
        if len(records) == 2:
            raise Cut

    (tmp_path / "run").mkdir()
    with pytest.raises(Cut):
        _one_process(method, overrides, cfg=cfg, run_dir=tmp_path / "run", on_epoch=cut)
    full = _one_process(method, overrides, cfg=cfg)
    ranks = ddp_workers.spawn(ddp_workers.train, tmp_path / "spawn", method, overrides, cfg, 3,
                              str(tmp_path / "run"), True)
    for rank in ranks:
        _assert_same_run(rank, full)
    ckpt = torch.load(tmp_path / "run" / "checkpoint.pt", weights_only=False)
    assert ckpt["epoch"] == 3 and len(ckpt["records"]) == len(full["records"])


def test_batch_mean_is_over_the_global_batch(small_jobs):
    """D9: RECORDS' feature mean; each rank holds half of the rows."""
    means = [rank[2] for rank in small_jobs]
    torch.testing.assert_close(means[0], X_MEAN.mean(0))
    assert torch.equal(means[0], means[1])


def _bench_one_and_two(args: list[str], tmp_path, timeout: int, dist_timeout: int = 60):
    """``pllzoo <args>`` in one process (``--out tmp_path/one``) and under ``torchrun --standalone
    --nproc-per-node 2`` (``tmp_path/two``) → the two completed processes."""
    import os
    import subprocess
    import sys

    env = {**os.environ, "OMP_NUM_THREADS": "1", "PLLZOO_DIST_TIMEOUT_S": str(dist_timeout)}
    run = lambda *launch, out: subprocess.run(  # noqa: E731
        [sys.executable, *launch, "-m", "pllzoo", *args, "--out", str(out)], env=env, capture_output=True,
        text=True, timeout=timeout)
    return (run(out=tmp_path / "one"),
            run("-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2", out=tmp_path / "two"))


def test_torchrun_bench_equals_one_process_and_rank0_alone_writes(tmp_path):
    """The real CLI path: ``torchrun --standalone --nproc-per-node 2 -m pllzoo bench`` on a synthetic-lt subset
    (a linear model: no BatchNorm) gives the 1-process run's id, accuracies and losses (to RTOL); the run
    folder holds what one process writes, and the table is printed once."""
    import pandas as pd

    args = ["bench", "--methods", "proden", "--dataset", "synthetic-lt", "--subset", "256", "--epochs", "2",
            "--batch-size", "32", "--device", "cpu", "--hp", "train.model=linear", "--hp", "train.lr=0.02"]
    one, two = _bench_one_and_two(args, tmp_path, timeout=180)
    assert one.returncode == 0, one.stderr[-2000:]
    assert two.returncode == 0, two.stderr[-2000:]
    assert two.stdout.count("results: ") == 1
    a, b = (pd.read_csv(tmp_path / d / "results.csv") for d in ("one", "two"))
    assert list(a["run"]) == list(b["run"]) and list(a["acc_all"]) == list(b["acc_all"])
    assert math.isclose(a["loss"][0], b["loss"][0], rel_tol=RTOL)
    files = lambda d: sorted(p.relative_to(d).as_posix() for p in d.rglob("*"))  # noqa: E731
    assert files(tmp_path / "one") == files(tmp_path / "two")
    env_two = (tmp_path / "two" / "runs" / b["run"][0] / "env.json").read_text()
    assert '"processes": 2' in env_two


def test_the_opt_in_is_not_inherited():
    """A subclass may change what a step writes (PiCO's confidences subclass PRODEN's): it opts in itself."""
    from pllzoo.components import is_distributed
    from pllzoo_baselines.proden import Confidence, ProdenLoss

    class Derived(Confidence):
        pass

    assert is_distributed(Confidence()) and not is_distributed(Derived())
    assert is_distributed(ProdenLoss()) and is_distributed(ProdenLoss(ProdenLoss.HParams(mixup=False)))  # D7


def test_subset_mean_is_scaled_to_the_global_subset(small_jobs):
    """D5: with masked_mean(values, mask, dist) the ranks' averaged gradients (what DDP applies) are those of
    the global masked mean; the naive local masked mean's are not (the ranks' subsets differ in size)."""
    values = V_MASK.clone().requires_grad_(True)
    from pllzoo.losses import masked_mean

    masked_mean(values ** 2, MASK).backward()
    scaled = torch.cat([rank[3][0] for rank in small_jobs]) / 2  # DDP: the mean of the ranks' gradients
    naive = torch.cat([rank[3][1] for rank in small_jobs]) / 2
    torch.testing.assert_close(scaled, values.grad)
    assert not torch.allclose(naive, values.grad)
    torch.testing.assert_close(small_jobs[0][3][2], masked_mean(V_MASK ** 2, MASK))  # the loss value, every rank
    assert torch.equal(small_jobs[0][3][2], small_jobs[1][3][2])


def test_extra_modules_start_equal_and_average_their_gradients(small_jobs):
    """The components' extra modules (not wrapped in DDP, pllzoo.ddp): rank 0's initial values everywhere, the
    gradients averaged over ranks after backward, an unreached parameter without a gradient."""
    a, b = (rank[4] for rank in small_jobs)
    assert torch.equal(a["weight"], b["weight"])
    assert not torch.equal(a["local"], b["local"])
    torch.testing.assert_close(a["grad"], (a["local"] + b["local"]) / 2)
    assert torch.equal(a["grad"], b["grad"]) and a["unused"] is None and b["unused"] is None


def test_sinkhorn_rows_on_two_ranks_equal_one_process(small_jobs):
    """D3: each rank's pseudo-labels are its rows of the one-process solution over [queue; global batch] (the queue
    of 2 global batches is full from the third step on); the queue, its pointer and the warm start are the
    one-process ones, on both ranks."""
    ref = ddp_workers.sinkhorn_rows(SINGLE, SK_LOGITS, SK_CAND, SK_PRIOR, 2)
    a, b = (rank[5] for rank in small_jobs)
    for t, whole in enumerate(ref["rows"]):
        assert torch.equal(torch.cat([a["rows"][t], b["rows"][t]]), whole), t
    assert ref["state"]["queue_filled"] == 32
    for key, value in ref["state"].items():
        assert torch.equal(a["state"][key], value) and torch.equal(b["state"][key], value), key


def test_gather_with_grad_gives_the_one_process_gradients(small_jobs):
    """D11: with ``gather_with_grad`` the ranks' gradients, averaged (what DDP applies), are those of the one-process
    loss over the concatenated batch (anchors local, the rest gathered); a gather without gradient loses the
    other ranks' terms.  PiCO's supervised contrastive loss over [q_G; k_G; queue] (positives from the gathered
    pseudo-labels, anchor i's own column g·b + i excluded): the same value and gradients as one process."""
    import torch.nn.functional as F

    from pllzoo_baselines.pico import contrastive_loss

    a, b = (rank[6] for rank in small_jobs)
    x = GQ_X.clone().requires_grad_(True)
    torch.logsumexp(x @ x.T, dim=1).mean().backward()
    torch.testing.assert_close(torch.cat([a["with_grad"], b["with_grad"]]) / 2, x.grad)
    assert not torch.allclose(torch.cat([a["naive"], b["naive"]]) / 2, x.grad)
    q = GQ_X.clone().requires_grad_(True)
    loss = contrastive_loss(F.normalize(q, dim=1), GQ_K, GQ_QUEUE, GQ_LABELS, GQ_QLABELS, 0.5, True)
    loss.backward()
    torch.testing.assert_close(torch.cat([a["pico"], b["pico"]]) / 2, q.grad)
    torch.testing.assert_close(a["pico_loss"], loss.detach())
    assert torch.equal(a["pico_loss"], b["pico_loss"])


def test_valen_draw_is_the_one_process_draw(small_jobs):
    """VALEN's d̃ under 2 processes: each rank's rows of the one-process draw over the global batch, bit for bit, and
    the gradients of its rows (row i of d̃ depends on s_i only)."""
    from pllzoo_baselines.valen import dirichlet_rsample

    s = VALEN_S.clone().requires_grad_(True)
    d = dirichlet_rsample(s, torch.Generator().manual_seed(5))
    d.square().sum().backward()
    (d0, g0), (d1, g1) = (rank[7] for rank in small_jobs)
    assert torch.equal(torch.cat([d0, d1]), d.detach())
    torch.testing.assert_close(torch.cat([g0, g1]), s.grad)


@pytest.mark.slow
def test_torchrun_bench_equals_one_process_for_every_shipped_method(tmp_path):
    """Every shipped method through the real CLI under ``torchrun --nproc-per-node 2`` (one bench with all of
    them, gloo, a linear model without BatchNorm) against one process: the same run ids, losses to 1e-4
    relative and accuracies within one test sample (an argmax near-tie may flip after rounding)."""
    import pandas as pd

    from conftest import registered_methods

    methods = [m for m in registered_methods() if "+" not in m]
    args = ["bench", "--methods", ",".join(methods), "--dataset", "synthetic-lt", "--subset", "256", "--epochs", "2",
            "--batch-size", "32", "--device", "cpu", "--hp", "train.model=linear", "--hp", "train.lr=0.02",
            "--hp", "solar:estimator.est_epochs=1"]
    one, two = _bench_one_and_two(args, tmp_path, timeout=1200, dist_timeout=120)
    assert one.returncode == 0, one.stderr[-3000:]
    assert two.returncode == 0, two.stderr[-3000:]
    a, b = (pd.read_csv(tmp_path / d / "results.csv").set_index("run") for d in ("one", "two"))
    assert sorted(a.index) == sorted(b.index) and len(a) == len(methods)
    one_sample = 100.0 / 256
    for run_id in a.index:
        assert math.isclose(a.loc[run_id, "loss"], b.loc[run_id, "loss"], rel_tol=1e-4), run_id
        assert abs(a.loc[run_id, "acc_all"] - b.loc[run_id, "acc_all"]) <= one_sample + 1e-9, run_id


@pytest.mark.slow
def test_torchrun_with_plain_batchnorm_is_close_not_equal(tmp_path):
    """The documented looser check with BatchNorm (docs/distributed.md): plain BN normalises each rank's b rows,
    so G = 2 differs from one process; on synthetic-lt (``mlp``: BatchNorm1d, 3 epochs) the final loss stays
    within 10 % and All accuracy within 3 points (measured: 0.8 % / 3.8 % and 0.2 / 0.0 points)."""
    import pandas as pd

    args = ["bench", "--methods", "proden,cc", "--dataset", "synthetic-lt", "--subset", "512", "--epochs", "3",
            "--batch-size", "64", "--device", "cpu", "--hp", "train.model=mlp", "--hp", "train.lr=0.02"]
    assert all(done.returncode == 0 for done in _bench_one_and_two(args, tmp_path, timeout=600))
    a, b = (pd.read_csv(tmp_path / d / "results.csv").set_index("run") for d in ("one", "two"))
    for run_id in a.index:
        assert math.isclose(a.loc[run_id, "loss"], b.loc[run_id, "loss"], rel_tol=0.10), run_id
        assert abs(a.loc[run_id, "acc_all"] - b.loc[run_id, "acc_all"]) <= 3.0, run_id


# ------------------------------------------------------------------ CUDA (issue 15 item 5: a lent GPU)
CUDA_CASES = ("proden", "cc-mixup", "corr-records-mixup", "htc", "solar", "pico", "valen")
CUDA_CFG = TrainConfig(model="mlp-nobn", epochs=3, lr=0.02, weight_decay=1e-4, batch_size=16, amp=False)
RTOL_CUDA, ATOL_CUDA = 1e-4, 1e-5  # float32 on the GPU (no autocast): other reduction orders than the CPU's


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device (run on a lent GPU)")
def test_two_processes_on_one_gpu_equal_one_process(tmp_path, test_model):
    """The collectives' CUDA path with the GPU one machine has: 2 gloo processes both on ``cuda:0`` (gloo
    all-gathers and all-reduces CUDA tensors; NCCL would need one GPU per rank) against one process on
    ``cuda:0`` with the global batch, for methods covering every kind of state (rows, queues, the
    Sinkhorn marginals, prototypes, the kNN graph, extra modules, mixup over the global batch); and
    SyncBatchNorm (``train.sync_bn``, a BatchNorm model): 2 × 8 rows normalised together equal one
    process's 16."""
    bn = ("proden", {}, TrainConfig(model="mlp", epochs=3, lr=0.02, weight_decay=1e-4, batch_size=16, amp=False,
                                    sync_bn=True))
    jobs = [(*READY[c], CUDA_CFG, 3, None, False, "cuda") for c in CUDA_CASES] + [(*bn, 3, None, False, "cuda")]
    ranks = ddp_workers.spawn(ddp_workers.train_many, tmp_path, jobs)
    import dataclasses

    refs = [_one_process(*READY[c], cfg=CUDA_CFG, device="cuda") for c in CUDA_CASES]
    refs.append(_one_process(bn[0], bn[1], cfg=dataclasses.replace(bn[2], sync_bn=False), device="cuda"))
    for i, (case, ref) in enumerate(zip((*CUDA_CASES, "proden-syncbn"), refs)):
        for rank in ranks:
            try:
                _assert_same_run(rank[i], ref, RTOL_CUDA, ATOL_CUDA)
            except AssertionError as exc:
                raise AssertionError(f"{case}: {exc}") from exc


def _torchrun(args: list[str], out, timeout: int = 150, dist_timeout: int = 30):
    import os
    import subprocess
    import sys

    env = {**os.environ, "OMP_NUM_THREADS": "1", "PLLZOO_DIST_TIMEOUT_S": str(dist_timeout)}
    return subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
                           "-m", "pllzoo", *args, "--out", str(out)], env=env, capture_output=True, text=True,
                          timeout=timeout)


def test_torchrun_resumes_an_unfinished_run(tmp_path):
    """--resume under torchrun: rank 0 reads the checkpoint and judges it, the others receive both (they
    have no run folder; they used to fail on it and leave rank 0 waiting in a collective until the timeout)."""
    import os
    import subprocess
    import sys

    import pandas as pd

    args = ["bench", "--methods", "proden", "--dataset", "synthetic-lt", "--subset", "256", "--epochs", "3",
            "--batch-size", "32", "--device", "cpu", "--threads", "1", "--hp", "train.model=linear"]
    out = tmp_path / "out"
    first = subprocess.run([sys.executable, "-m", "pllzoo", *args, "--out", str(out)],
                           env={**os.environ, "OMP_NUM_THREADS": "1"}, capture_output=True, text=True, timeout=120)
    assert first.returncode == 0, first.stderr[-2000:]
    before = pd.read_csv(out / "results.csv")
    (run,) = (out / "runs").iterdir()
    (run / "done").unlink()  # interrupted before its end was marked: resumed from its checkpoint
    resumed = _torchrun([*args, "--resume"], out)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert "proden seed 1 resumed" in resumed.stderr and (run / "done").exists()
    after = pd.read_csv(out / "results.csv")
    assert list(after["run"]) == list(before["run"]) and list(after["acc_all"]) == list(before["acc_all"])


def test_torchrun_a_run_refused_while_set_up_is_one_failed_run_not_a_hang(tmp_path):
    """A batch that does not split over the processes is refused on every rank alike: rank 0 records the
    failed run and goes on, the other rank follows it (it used to exit, leaving rank 0 in a collective)."""
    import pandas as pd

    args = ["bench", "--methods", "proden,cc", "--dataset", "synthetic-lt", "--subset", "256", "--epochs", "1",
            "--batch-size", "31", "--device", "cpu", "--threads", "1", "--hp", "train.model=linear",
            "--hp", "cc:train.batch_size=32"]
    res = _torchrun(args, tmp_path / "out")
    assert res.returncode == 1, res.stderr[-3000:]
    assert "proden seed 1 failed: train.batch_size 31 is not divisible by the 2 processes" in res.stderr
    assert "Timed out" not in res.stderr and "1 of 2 runs failed" in res.stderr
    rows = pd.read_csv(tmp_path / "out" / "results.csv").set_index("method")
    assert rows["acc_all"].isna()["proden"] and not rows["acc_all"].isna()["cc"]  # the next run trained


def test_a_signal_to_one_process_stops_every_process_and_says_so(small_jobs):
    """The stop decision's one collective carries the signal: rank 0, not signalled itself, reports SIGTERM to
    another process (it used to call it a time-limit stop) with the signal's exit status."""
    from pllzoo import checkpoint

    assert small_jobs[0][8] == small_jobs[1][8] == [1, 1, 15]
    stop = checkpoint.signal_stop("after epoch 3/9 of stage 'train'", 15)
    assert str(stop) == "stopped by SIGTERM to another process after epoch 3/9 of stage 'train'"
    assert stop.exit_code == 128 + 15


@pytest.mark.parametrize("world, local, head", [
    (1, None, "pllzoo bench"), (2, None, "torchrun --nproc-per-node 2 -m pllzoo bench"),
    (4, "2", "torchrun --nnodes 2 --nproc-per-node 2 -m pllzoo bench")])
def test_the_continue_command_of_a_stopped_bench_keeps_its_processes(monkeypatch, world, local, head):
    """A bench stopped under torchrun prints the torchrun command that continues it, not a one-process one."""
    import click

    from pllzoo import distributed
    from pllzoo.cli.bench import _continue_command
    from pllzoo.distributed import DistContext

    monkeypatch.setattr(distributed, "current", lambda: DistContext(rank=0, world=world))
    if local is None:
        monkeypatch.delenv("LOCAL_WORLD_SIZE", raising=False)
    else:
        monkeypatch.setenv("LOCAL_WORLD_SIZE", local)
    ctx = click.Context(click.Command("bench"))
    ctx.meta["pllzoo.bench.args"] = ["--methods", "proden", "--out", "o"]
    assert _continue_command(ctx) == f"{head} --methods proden --out o --resume"


def test_processes_that_planned_different_runs_end_the_bench_alike(small_jobs):
    """Rank 1 started with other seeds: every process gets the same one line, before any run trains."""
    answers = [rank[9] for rank in small_jobs]
    assert answers[0] == answers[1]
    agreed, differs, data, plugins, unrelated = answers[0]
    assert agreed == "" and unrelated == ""  # a loaded plugin none of the run's parts comes from (a review)
    assert differs.startswith("the 2 processes planned different runs (rank 1 (runs) against rank 0: 1 run(s), "
                              "e.g. proden__synthetic-lt__s1-") and "\n" not in differs
    # the same run ids on other data, or with another plugin version: an outside review trained them together
    assert data.startswith("the 2 processes planned different runs (rank 1 (data) against rank 0")
    assert plugins.startswith("the 2 processes planned different runs (rank 1 (plugin versions) against rank 0")
    # named: rank 1's components here are a loss of another version alone (the first slot that differs is said)
    assert "; label_update 'proden.confidence' from nothing on rank 1, plugin 'baselines' (" in plugins, plugins
    assert "seed 2" not in differs and "; rank 1: proden__synthetic-lt__s2-" in differs


@pytest.mark.parametrize("method", ["ranktest-boom", pytest.param("ranktest-all", marks=SLOW_SIBLING)])
def test_a_run_failing_on_one_process_ends_the_bench_soon(tmp_path, method):
    """A run that fails on rank 1 alone (its device, say): rank 1 waits failure_wait_s (5 s here) for the others
    to report the same failure, then ends the bench; rank 0, whose collective then fails, ends it too, naming
    rank 1's error, long before the 60 s process-group timeout.  The same error on every rank is one failed
    run, and the next run trains (``RunsFailed`` on rank 0)."""
    import pandas as pd

    folder = tmp_path / "spawn"
    folder.mkdir()
    ddp_workers.start(ddp_workers.failing_rank, folder, (str(folder), method))
    rank0, rank1 = (torch.load(folder / f"result-{r}.pt", weights_only=False) for r in (0, 1))
    rows = pd.read_csv(folder / "out" / "results.csv")
    if method == "ranktest-all":
        assert rank0.startswith("RunsFailed: 1 of 2 runs failed: ranktest-all seed 1 (") and rank1 == "finished"
        assert list(rows["status"]) == ["failed", "ok"]
        return
    assert rank1.startswith("FailedAlone: the bench ends: ranktest-boom seed 1 failed on rank 1: ") and \
        "boom on rank 1" in rank1 and "not on every process within 5 s" in rank1
    assert rank0.startswith("FailedAlone: the bench ends: ranktest-boom seed 1 failed on rank 1: ")
    assert "0 of 2 runs finished, 1 failed, the others not started" in rank0  # the protocol, not the timeout,
    assert "timeout" not in (rank0 + rank1).lower()  # ended it (a count of messages, no wall-clock assert)
    assert list(rows["method"]) == ["ranktest-boom"] and list(rows["status"]) == ["failed"]
    assert "boom on rank 1" in rows["error"][0]  # the first cause, not rank 0's closed connection


@pytest.mark.parametrize("alone", [0, pytest.param(1, marks=SLOW_SIBLING)])
def test_a_process_that_cannot_plan_ends_the_bench_on_every_process(tmp_path, alone):
    """One process refused before planning (here an unknown method; an outside review met a plugin that failed to
    import on one rank): the others waited in the comparison of plans until the process group's timeout, then
    ended with gloo's traceback.  Now it takes part in the comparison, and the others end at once with its
    line (a message protocol, not a wall-clock assert: after the timeout the line would be gloo's)."""
    import os
    import stat
    import subprocess
    import sys

    status = tmp_path / "status"
    wrapper = tmp_path / "rank.sh"
    wrapper.write_text(f'#!/bin/sh\nM=proden; [ "$RANK" = {alone} ] && M=nosuch\n'
                       f'"{sys.executable}" -m pllzoo bench --methods $M "$@"\nrc=$?\necho "$RANK $rc" >> "{status}"\n'
                       'exit $rc\n')
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IEXEC)
    args = ["--dataset", "synthetic-lt", "--subset", "256", "--epochs", "1", "--batch-size", "32", "--device", "cpu",
            "--threads", "1", "--hp", "train.model=linear", "--out", str(tmp_path / "out")]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PLLZOO_DIST_TIMEOUT_S": "30"}
    res = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
                          "--no-python", str(wrapper), *args], env=env, capture_output=True, text=True, timeout=150)
    # torchrun stops (SIGTERM) the processes still running when the first exits non-zero: a status line the
    # wrapper writes after the other's exit may be cut, but not the lines said before the closing barrier
    recorded = status.read_text().split("\n")[:-1]
    assert recorded and set(recorded) <= {f"{alone} 2", f"{1 - alone} 1"}, res.stderr[-3000:]
    errors = [line for line in res.stderr.splitlines() if line.startswith("Error: ")]
    assert any(line.startswith("Error: unknown method 'nosuch'") for line in errors), res.stderr[-3000:]
    assert f"Error: the bench ends: rank {alone} could not plan the bench: unknown method 'nosuch'" in \
        "\n".join(errors), res.stderr[-3000:]
    assert "gloo" not in res.stderr and "Timed out" not in res.stderr
    assert not (tmp_path / "out" / "results.csv").exists()


def test_a_collective_stop_ends_every_process_with_its_status(tmp_path):
    """A --time-limit stop under torchrun: every process prints the stop line and exits 75 (rank 1 used to exit 0
    with no line, so a job script on another node could not tell a clean stop from a finished bench)."""
    import os
    import stat
    import subprocess
    import sys

    status = tmp_path / "status"
    wrapper = tmp_path / "rank.sh"
    wrapper.write_text(f'#!/bin/sh\n"{sys.executable}" -m pllzoo "$@"\nrc=$?\necho "$RANK $rc" >> "{status}"\n'
                       'exit $rc\n')
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IEXEC)
    args = ["bench", "--methods", "proden", "--dataset", "synthetic-lt", "--subset", "256", "--epochs", "100000",
            "--batch-size", "32", "--device", "cpu", "--threads", "1", "--hp", "train.model=linear",
            "--time-limit", "0.05", "--out", str(tmp_path / "out")]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PLLZOO_DIST_TIMEOUT_S": "30"}
    res = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
                          "--no-python", str(wrapper), *args], env=env, capture_output=True, text=True, timeout=150)
    recorded = status.read_text().split("\n")[:-1]  # torchrun may stop the later one's wrapper before it writes
    assert recorded and set(recorded) <= {"0 75", "1 75"}, res.stderr[-3000:]
    stops = [line for line in res.stderr.splitlines() if "to stay within the time limit" in line]
    assert len(stops) == 2 and all(line.endswith("--resume") for line in stops), res.stderr[-3000:]


_RANK_FAIL_PLUGIN = '''
import os

from pllzoo import Method, hookimpl
from pllzoo.builtin import SoftCrossEntropy


class Fails(SoftCrossEntropy):
    """Fails on rank 1 alone at its third step: raises (its device, say) or exits without a word (a crash)."""

    distributed = True
    steps = 0

    @hookimpl
    def pllzoo_loss(self, step, state):
        Fails.steps += 1
        if Fails.steps == 3 and step.dist.rank == 1:
            if os.environ.get("RANKFAIL_MODE") == "exit":
                os._exit(3)
            raise RuntimeError("boom on rank 1")
        return super().pllzoo_loss(step, state)


class Unready(SoftCrossEntropy):
    """Not opted in to DDP (a subclass does not inherit ``distributed``)."""


@hookimpl
def pllzoo_register_losses(register):
    register("rankfail.loss", Fails)
    register("rankfail.unready", Unready)


@hookimpl
def pllzoo_register_methods(register):
    register(Method(name="rankfail", loss="rankfail.loss"))
    register(Method(name="rankfail-unready", loss="rankfail.unready"))
'''


def _rankfail_torchrun(tmp_path, methods: str, mode: str = "raise", *more: str, processes: int = 2):
    """``torchrun --nproc-per-node 2 -m pllzoo bench --methods METHODS`` with the plugin above installed (a
    site folder with its dist-info); ``processes=1``: plain ``python -m pllzoo bench``."""
    import os
    import subprocess
    import sys

    site = tmp_path / "site"
    (site / "rankfail-0.1.dist-info").mkdir(parents=True, exist_ok=True)
    (site / "rankfail.py").write_text(_RANK_FAIL_PLUGIN)
    (site / "rankfail-0.1.dist-info" / "METADATA").write_text("Metadata-Version: 2.1\nName: rankfail\nVersion: 0.1\n")
    (site / "rankfail-0.1.dist-info" / "entry_points.txt").write_text("[pllzoo]\nrankfail = rankfail\n")
    env = {**{k: v for k, v in os.environ.items() if k != "PLLZOO_LOAD_PLUGINS"},  # (the suite's limit)
           "OMP_NUM_THREADS": "1", "PLLZOO_DIST_TIMEOUT_S": "30", "RANKFAIL_MODE": mode,
           "PYTHONPATH": os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")])}
    launch = ["-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2"] if processes > 1 else []
    return subprocess.run([sys.executable, *launch, "-m", "pllzoo", "bench", "--methods", methods, "--dataset",
                           "synthetic-lt", "--subset", "256", "--epochs", "2", "--batch-size", "32", "--device", "cpu",
                           "--threads", "1", "--hp", "train.model=linear", "--out", str(tmp_path / "out"), *more],
                          env=env, capture_output=True, text=True, timeout=200)


@pytest.mark.parametrize("mode", ["raise", pytest.param("exit", marks=SLOW_SIBLING)])
def test_torchrun_a_lone_failure_leaves_results_csv_with_its_cause(tmp_path, mode):
    """Under torchrun, rank 1 failing alone: torchrun stops rank 0 (SIGTERM) as soon as rank 1 has exited; rank 0
    used to die mid-write (exit -15, results.csv lost once, a lock left behind), and after a crash that left no
    word it waited for rank 1's mark past torchrun's grace period (SIGKILL).  Now it writes results.csv with the
    first cause, leaves no lock, and ends with its line."""
    import pandas as pd

    out = tmp_path / "out"
    res = _rankfail_torchrun(tmp_path, "rankfail,proden", mode)
    assert res.returncode != 0 and "exitcode  : -15" not in res.stderr and "-9" not in res.stderr, res.stderr[-3000:]
    assert (out / "results.csv").exists(), res.stderr[-3000:]
    rows = pd.read_csv(out / "results.csv")
    assert list(rows["method"]) == ["rankfail"] and list(rows["status"]) == ["failed"], res.stderr[-3000:]
    cause = "boom on rank 1" if mode == "raise" else "another process exited without saying why"
    assert cause in rows["error"][0]
    if mode == "raise":  # worded as rank 0 words a failure of its own (describe): no "ComponentError:" prefix
        assert rows["error"][0].startswith("rankfail seed 1 failed on rank 1: loss component 'rankfail.loss'")
    assert f"Error: the bench ends: rankfail seed 1 failed on rank {1 if mode == 'raise' else 0}" in res.stderr
    assert not list(out.glob("**/*.lock"))
    # summary.* rebuilt and the table printed, as after failures on every rank (an outside review: both skipped)
    summary = pd.read_csv(out / "summary.csv")
    assert list(summary["method"]) == ["rankfail"] and list(summary["failed"]) == [1], res.stdout[-2000:]
    assert "results: " in res.stdout and "│ rankfail" in res.stdout
    error = next(out.glob("runs/*/error.txt")).read_text()  # rank 0 writes it: the first cause is said there too
    assert mode != "raise" or "The first cause: rankfail seed 1 failed on rank 1: " in error, error[-500:]


@SLOW_SIBLING  # test_not_ready_recipes_are_refused_before_training checks the refusal in one process
def test_torchrun_a_component_not_ready_for_ddp_refuses_the_bench_before_any_run(tmp_path):
    """An outside review: it used to fail each of its runs (one failed row each, torch's launcher traceback) and
    did not say how a component opts in; now the bench is refused on every process before anything trains."""
    res = _rankfail_torchrun(tmp_path, "proden,rankfail-unready")
    lines = [line for line in res.stderr.splitlines() if line.startswith("Error:")]
    assert res.returncode != 0 and len(lines) == 2 and lines[0] == lines[1], res.stderr[-3000:]
    assert lines[0].startswith("Error: not ready for 2 processes (DDP): rankfail-unready: loss 'rankfail.unready'")
    assert "`distributed = True`" in lines[0] and "proden:" not in lines[0]
    assert not (tmp_path / "out" / "runs").exists()
    # its runs trained in one process first: reused, so nothing refuses the torchrun bench (a second review)
    assert _rankfail_torchrun(tmp_path, "rankfail-unready", processes=1).returncode == 0
    res = _rankfail_torchrun(tmp_path, "proden,rankfail-unready", "raise", "--resume")
    assert res.returncode == 0 and "not ready" not in res.stderr, res.stderr[-3000:]


@pytest.mark.parametrize("text", ["abc", "inf", "nan", "0", "-5", "", "1e-9", "0.5", "1e15", "604801"])
def test_a_bad_process_group_timeout_is_one_line(text, monkeypatch):
    """An outside review: PLLZOO_DIST_TIMEOUT_S=abc/inf/nan were tracebacks on every rank, 0 or -5 a C++ stack dump
    from the first collective."""
    from pllzoo.distributed import DEFAULT_TIMEOUT_S, failure_wait_s, timeout_s
    from pllzoo.errors import PLLZooError

    monkeypatch.setenv("PLLZOO_DIST_TIMEOUT_S", text)
    with pytest.raises(PLLZooError, match=rf"^PLLZOO_DIST_TIMEOUT_S='{text}': give the process-group timeout as a "
                                          r"number of seconds from 1 to 604800 \(default 300\)$"):
        timeout_s()
    monkeypatch.setenv("PLLZOO_DIST_TIMEOUT_S", "12.5")
    assert timeout_s() == 12.5 and failure_wait_s() == 5.0
    monkeypatch.setenv("PLLZOO_DIST_TIMEOUT_S", "604800")
    assert timeout_s() == 604800.0 and failure_wait_s() == 60.0
    monkeypatch.delenv("PLLZOO_DIST_TIMEOUT_S")
    assert timeout_s() == DEFAULT_TIMEOUT_S == 300.0 and failure_wait_s() == 60.0
