"""What each of the 2 gloo processes of tests/test_distributed.py runs (a module, so spawn can import it).

:func:`spawn` starts ``world`` processes with ``torch.multiprocessing`` (:func:`start`) over a ``file://``
rendezvous in a temporary folder and a short timeout; process ``rank`` runs ``job(ctx, *args)`` and
its answer is saved to ``result-<rank>.pt`` for the test to read.
"""

from __future__ import annotations

import datetime
import math
import os
from pathlib import Path
from typing import Any, Callable

import torch
from torch import nn

TIMEOUT_S = 60  # a hang fails the test within a minute


def mlp_nobn(num_classes: int, input_shape: tuple[int, ...], hidden: int = 16):
    """Flatten → Linear(d, 16) → ReLU → Linear(16, K): an MLP without BatchNorm (exact DDP equivalence)."""
    from pllzoo.models import PLLNet

    d = math.prod(input_shape)
    return PLLNet(nn.Sequential(nn.Flatten(1), nn.Linear(d, hidden), nn.ReLU()), nn.Linear(hidden, num_classes))


def add_test_model() -> None:
    """Add ``mlp-nobn`` to the built-in backbones; the registry is rebuilt (pllzoo.builtin registers MODELS)."""
    from pllzoo.models import MODELS
    from pllzoo.registry import reset_registry

    MODELS["mlp-nobn"] = mlp_nobn
    reset_registry()


def _entry(rank: int, world: int, folder: str, job: Callable[..., Any], args: tuple) -> None:
    import signal

    signal.signal(signal.SIGINT, signal.default_int_handler)  # a process's own, not the forkserver's (ignored)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    os.environ["PLLZOO_LOAD_PLUGINS"] = "baselines,solar,ltpll"
    os.environ["PLLZOO_DIST_TIMEOUT_S"] = str(TIMEOUT_S)  # as pllzoo bench: failure_wait_s follows the group's
    torch.set_num_threads(1)
    torch.distributed.init_process_group("gloo", init_method=f"file://{folder}/rendezvous", rank=rank,
                                         world_size=world, timeout=datetime.timedelta(seconds=TIMEOUT_S))
    from pllzoo import distributed

    done = False
    try:
        add_test_model()
        torch.save(job(distributed.current(), *args), Path(folder) / f"result-{rank}.pt")
        done = True
    finally:
        distributed.shutdown(wait=done)  # as pllzoo bench ends: collect, barrier (unless this rank failed), destroy


def start(job: Callable[..., Any], folder: Path, args: tuple, world: int = 2) -> None:
    """``_entry`` on ``world`` processes, from the forkserver ``pllzoo bench --jobs`` starts its workers from (torch,
    torch._dynamo and pllzoo imported once: ~6 s of imports a process with ``spawn``)."""
    from pllzoo import jobs

    ctx = jobs._context()
    jobs._start_server(ctx)
    torch.multiprocessing.start_processes(_entry, args=(world, str(folder), job, args), nprocs=world, join=True,
                                          start_method=ctx.get_start_method())


def spawn(job: Callable[..., Any], folder: Path, *args: Any, world: int = 2) -> list[Any]:
    """Run ``job(ctx, *args)`` on ``world`` gloo processes; their answers, by rank."""
    folder.mkdir(parents=True, exist_ok=True)
    start(job, folder, args, world)
    return [torch.load(folder / f"result-{r}.pt", weights_only=False) for r in range(world)]


# ---------------------------------------------------------------------- jobs
def train(ctx, method: str, overrides: dict[str, Any], cfg, seed: int, run_dir: str | None = None,
          resume: bool = False, device: str = "cpu") -> dict[str, Any]:
    """Train ``method`` on conftest's tiny data; the records, the final state and model, the batches' indices
    (tensors on the CPU).  ``device="cuda"``: every rank trains on ``cuda:0`` (gloo moves CUDA tensors: the
    collectives' CUDA path on one GPU)."""
    import sys

    sys.path.insert(0, str(Path(__file__).parent))
    from conftest import make_tiny_data
    from pllzoo.registry import get_registry
    from pllzoo.trainer import Trainer

    reg = get_registry()
    data = make_tiny_data()
    comps = reg.build_components(reg.method(method), overrides, (data.name, data.kind))
    if device != "cpu":
        import dataclasses

        ctx = dataclasses.replace(ctx, device=torch.device(device, 0))
    trainer = Trainer(data, comps, cfg, seed=seed, device=torch.device(device),
                      run_dir=Path(run_dir) if run_dir else None, dist=ctx)
    seen: list[torch.Tensor] = []
    step = trainer.step

    def recording(stage, epoch, idx, *a, **kw):
        seen.append(idx.clone())
        return step(stage, epoch, idx, *a, **kw)

    trainer.step = recording
    records = trainer.fit(resume=resume)
    cpu = lambda t: t.detach().cpu().clone() if isinstance(t, torch.Tensor) else t  # noqa: E731
    return {"records": [{k: v for k, v in r.items() if k != "wall_s"} for r in records],
            "state": {k: cpu(v) for k, v in trainer.state.state_dict().items()},
            "model": {k: cpu(v) for k, v in trainer.model.state_dict().items()},
            "modules": {f"{m}.{k}": cpu(v) for m, mod in trainer.modules.items() for k, v in mod.state_dict().items()},
            "batches": [cpu(b) for b in seen], "wrote": sorted(p.name for p in Path(run_dir).iterdir()) if run_dir else []}


def train_many(ctx, jobs: list[tuple]) -> list[Any]:
    """:func:`train` for each ``(method, overrides, cfg, seed)``, in one pair of processes (one start-up)."""
    return [train(ctx, *job) for job in jobs]


def refusals(ctx, cases: list[tuple]) -> list[str]:
    """The one-line error of building a Trainer for each ``(method, overrides, cfg[, slot])`` under ``ctx``; with
    ``slot``, that slot's component is marked not ready (every shipped component is)."""
    import sys

    sys.path.insert(0, str(Path(__file__).parent))
    from conftest import make_tiny_data
    from pllzoo.errors import PLLZooError
    from pllzoo.registry import get_registry
    from pllzoo.trainer import Trainer

    reg, data, out = get_registry(), make_tiny_data(), []
    for method, overrides, cfg, *slot in cases:
        comps = reg.build_components(reg.method(method), overrides, (data.name, data.kind))
        for name in slot:
            comps[name].distributed = False  # the instance's opt-in overrides its class's
        try:
            Trainer(data, comps, cfg, seed=1, device=torch.device("cpu"), dist=ctx)
            out.append("")
        except PLLZooError as exc:
            out.append(str(exc))
    return out


def rows(ctx, n: int, k: int, batches: list[torch.Tensor]) -> torch.Tensor:
    """A ``"rows"`` table after steps in which each rank writes its slice of each global batch."""
    from pllzoo import ddp
    from pllzoo.state import PLLState

    state = PLLState({"table": torch.zeros(n, k)})
    for step, global_idx in enumerate(batches):
        idx = ddp.rank_slice(global_idx, ctx)
        state.table[idx] = idx.float()[:, None] * 10 + step + torch.arange(k).float()  # this rank's rows only
        ddp.sync_rows(state, ["table"], idx, ctx)
    return state.table


def batch_mean_of_halves(ctx, x: torch.Tensor) -> torch.Tensor:
    """``ctx.batch_mean`` with each rank holding its half of the rows of ``x``."""
    half = x.shape[0] // ctx.world
    return ctx.batch_mean(x[ctx.rank * half : (ctx.rank + 1) * half])


def stop_votes(ctx) -> list[int]:
    """``ctx.sum_ints`` as the trainer's stop decision uses it: rank 1 alone got SIGTERM (15)."""
    got = 15 if ctx.rank == 1 else None
    return ctx.sum_ints([int(got is not None), int(got is not None), got or 0])


def several(ctx, calls: list[tuple[Callable[..., Any], tuple]]) -> list[Any]:
    """Each ``job(ctx, *args)`` of ``calls`` in turn, in one pair of processes (one start-up)."""
    return [job(ctx, *args) for job, args in calls]


def masked_mean_grads(ctx, values: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """This rank's gradient of ``masked_mean(v², mask, ctx)`` and of the naive local one over its half of the rows,
    and the scaled loss averaged over ranks."""
    from pllzoo.losses import masked_mean

    half = values.shape[0] // ctx.world
    rows = slice(ctx.rank * half, (ctx.rank + 1) * half)
    grads = []
    for dist in (ctx, None):
        v = values[rows].clone().requires_grad_(True)
        loss = masked_mean(v ** 2, mask[rows], dist) if dist is not None else masked_mean(v ** 2, mask[rows])
        loss.backward()
        grads.append(v.grad)
        if dist is not None:
            value = ctx.all_reduce_sum(loss.detach()) / ctx.world
    return grads[0], grads[1], value


def module_grads(ctx) -> dict[str, Any]:
    """Extra modules under G > 1: a module initialised differently on each rank gets rank 0's values
    (``broadcast_modules``); after a backward on rank-dependent inputs the gradients are averaged
    (``average_grads``), and a parameter no backward reached keeps no gradient."""
    from pllzoo import ddp

    torch.manual_seed(10 + ctx.rank)
    used, unused = nn.Linear(3, 2), nn.Linear(2, 2)
    ddp.broadcast_modules({"b": unused, "a": used}, ctx)
    x = torch.arange(6.0).view(2, 3) + ctx.rank
    used(x).square().sum().backward()
    local = used.weight.grad.clone()
    ddp.average_grads([*used.parameters(), *unused.parameters()], ctx)
    return {"weight": used.weight.detach().clone(), "local": local, "grad": used.weight.grad.clone(),
            "unused": unused.weight.grad}


def sinkhorn_rows(ctx, logits: list[torch.Tensor], candidates: list[torch.Tensor], prior: torch.Tensor,
                  queue_length: int) -> dict[str, Any]:
    """SoLar's refinery (``solar.sinkhorn``) over a few global batches ``logits[t]`` ``[B, K]``, each rank holding
    its slice: this rank's pseudo-label rows per step and the final queue state."""
    from types import SimpleNamespace

    from pllzoo import ddp
    from pllzoo.run import Batch, Stage, Step, TrainConfig
    from pllzoo.state import PLLState
    from pllzoo_solar.refinery import SinkhornRefinery

    b_global, k = logits[0].shape
    refinery, state = SinkhornRefinery(SinkhornRefinery.HParams(queue_length=queue_length)), PLLState()
    state.prior = prior.clone()
    run = SimpleNamespace(num_classes=k, config=TrainConfig(batch_size=b_global), device=torch.device("cpu"),
                          candidates=torch.cat(candidates).bool())
    refinery.pllzoo_setup_stage(run=run, state=state)
    rows, gen = [], torch.Generator().manual_seed(0)
    for t, (z, cand) in enumerate(zip(logits, candidates)):
        idx = ddp.rank_slice(torch.arange(t * b_global, (t + 1) * b_global), ctx)
        z_loc, c_loc = ddp.rank_slice(z, ctx), ddp.rank_slice(cand, ctx).float()
        step = Step(batch=Batch(idx, z_loc, c_loc, z_loc.argmax(1)), logits=z_loc, probs=torch.softmax(z_loc, 1),
                    forward=None, generator=gen, epoch=0, stage=Stage(), nominal_batch_size=b_global, dist=ctx)
        rows.append(refinery.pllzoo_label_update(step=step, state=state))
    return {"rows": rows, "state": {key: v.clone() for key, v in state.state_dict().items()}}


def gather_grads(ctx, x: torch.Tensor, k: torch.Tensor, queue: torch.Tensor, labels: torch.Tensor,
                 queue_labels: torch.Tensor) -> dict[str, Any]:
    """This rank's gradients, each rank holding its half of the rows ``x`` ``[B, d]``: of a loss of its rows against
    the gathered batch (``gather_with_grad``, and the naive ``gather`` without gradient), and of PiCO's supervised
    contrastive loss over [q_G; k_G; queue] (D11), with that loss's value averaged over ranks."""
    import torch.nn.functional as F

    from pllzoo_baselines.pico import contrastive_loss

    half = x.shape[0] // ctx.world
    rows = slice(ctx.rank * half, (ctx.rank + 1) * half)
    out: dict[str, Any] = {}
    for name, gather in (("with_grad", ctx.gather_with_grad), ("naive", ctx.gather)):
        v = x[rows].clone().requires_grad_(True)
        torch.logsumexp(v @ gather(v).T, dim=1).mean().backward()
        out[name] = v.grad
    q = x[rows].clone().requires_grad_(True)
    loss = contrastive_loss(F.normalize(q, dim=1), k[rows], queue, labels[rows], queue_labels, 0.5, True, ctx)
    loss.backward()
    out["pico"], out["pico_loss"] = q.grad, ctx.all_reduce_sum(loss.detach()) / ctx.world
    return out


def valen_draw(ctx, s: torch.Tensor, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """VALEN's d̃ for this rank's half of the concentrations ``s`` ``[B, K]``, and the gradient of Σ d̃² on its rows."""
    from pllzoo_baselines.valen import dirichlet_rsample

    half = s.shape[0] // ctx.world
    mine = s[ctx.rank * half : (ctx.rank + 1) * half].clone().requires_grad_(True)
    d = dirichlet_rsample(mine, torch.Generator().manual_seed(seed), ctx)
    d.square().sum().backward()
    return d.detach(), mine.grad


def plan_agreement(ctx) -> list[str]:
    """``bench.agree_on_plans`` with the same plan on both ranks, then with rank 1 planning seed 2, the same run
    on other data, and with another plugin version: each answer is "" (agreed) or the one-line error; the same on
    every rank."""
    from pllzoo import bench
    from pllzoo.data.base import DataOptions
    from pllzoo.errors import PLLZooError
    from pllzoo.registry import get_registry

    out = []
    for case in ("same", "seeds", "data", "plugins", "other plugin"):
        seeds = [2] if case == "seeds" and ctx.rank == 1 else [1]
        plans = bench.plan(get_registry(), ["proden"], "synthetic-lt", seeds, DataOptions(subset=64), epochs=1,
                           batch_size=16, device="cpu")
        if ctx.rank == 1 and case == "data":  # the same run id on other data (another file of the same name)
            plans[0].data.x_train[0] += 1
        if ctx.rank == 1 and case == "plugins":  # another version of a plugin on this process's path
            plans[0].plugins = {**plans[0].plugins, "components": {"loss": {"plugin": "baselines", "dist": "x",
                                                                            "version": "9"}}}
        if ctx.rank == 1 and case == "other plugin":  # a plugin no component of the run comes from: no matter
            plans[0].plugins = {**plans[0].plugins, "plugins": [*plans[0].plugins["plugins"],
                                                                {"name": "unrelated", "dist": "u", "version": "1"}]}
        try:
            bench.agree_on_plans(plans)
            out.append("")
        except PLLZooError as exc:
            out.append(str(exc))
    return out


class RankBoom:
    """A test plugin: loss ``ranktest.boom`` raises on rank ``ONLY`` alone (its device, say) at its third step,
    ``ranktest.all`` on every rank there (the same error everywhere)."""

    ONLY = 1

    @staticmethod
    def _loss(everywhere: bool):
        from pllzoo import hookimpl
        from pllzoo.builtin import SoftCrossEntropy

        class Boom(SoftCrossEntropy):
            distributed = True  # declared by the class itself (a subclass may change what it computes)
            steps = 0

            @hookimpl
            def pllzoo_loss(self, step, state):
                Boom.steps += 1
                if Boom.steps == 3 and (everywhere or step.dist.rank == RankBoom.ONLY):
                    raise RuntimeError(f"boom on rank {step.dist.rank}")
                return super().pllzoo_loss(step, state)

        return Boom


def _rank_plugin():
    from pllzoo import Method, hookimpl

    class Plugin:
        @hookimpl
        def pllzoo_register_losses(self, register):
            register("ranktest.boom", RankBoom._loss(False))
            register("ranktest.all", RankBoom._loss(True))

        @hookimpl
        def pllzoo_register_methods(self, register):
            register(Method(name="ranktest-boom", loss="ranktest.boom"))
            register(Method(name="ranktest-all", loss="ranktest.all"))

    return Plugin()


def failing_rank(ctx, folder: str, method: str) -> None:
    """Train ``method`` then proden under torchrun's bench protocol (rank 0 ``execute``, the others ``follow``);
    save what each rank raised, then leave as the CLI does after a lone failure (no barrier)."""

    from pllzoo import bench
    from pllzoo.data.base import DataOptions
    from pllzoo.plugins import make_plugin_manager
    from pllzoo.registry import Registry

    os.environ["PLLZOO_DIST_TIMEOUT_S"] = "25"  # failure_wait_s 5 s: the test waits that long, the group 60 s
    pm, infos = make_plugin_manager()
    pm.register(_rank_plugin(), name="ranktest")
    reg = Registry.build(pm, infos)
    plans = bench.plan(reg, [method, "proden"], "synthetic-lt", [1], DataOptions(subset=128), epochs=2,
                       batch_size=32, device="cpu", hp={"train.model": "linear"})
    try:
        if ctx.rank == 0:
            bench.execute(reg, plans, Path(folder) / "out", threads=1)
        else:
            bench.follow(reg, plans)
        what = "finished"
    except Exception as exc:  # noqa: BLE001 - the answer
        what = f"{type(exc).__name__}: {exc}"
    torch.save(what, Path(folder) / f"result-{ctx.rank}.pt")
    os._exit(0)  # as the CLI after FailedAlone: no barrier (it would pair with a collective still pending)
