"""Seconds per training step and per evaluated row of a planned run, from a few steps on its device.

:func:`time_steps` builds the run's components and trainer (no run folder), enters its first stage and
times up to ``max_steps`` training steps on the first batches of epoch 0, stopping early once
``budget_s`` seconds are spent (always at least one step), then one evaluation batch.  The step time is
the median of the steps after the first (the first pays for warm-up: allocations, cuDNN's choices, a
compile) or, when only one step ran, that step; so a ResNet-18 on a CPU costs one step, a small model
a handful.  It leaves no trace: the global random states (python, numpy, torch, CUDA) are restored, so
the runs that follow are bit-for-bit those of a bench that never timed, and nothing is written.

What it does not see: a method's epoch-end or stage-start passes over the training set (SoLar's
prior re-estimation, VALEN's graph), checkpoints, the strong-view worker processes (``--view-workers``),
and work that grows as a run fills its buffers: SoLar's Sinkhorn problem is its first batches alone, a
queue of 64 batches later (an outside review measured a full-queue step at 7× the timed one at K = 1000,
before the queue listed its candidates: benchmarks/large-k/).  The estimate built on it (:mod:`pllzoo.costs`)
says so.
"""

from __future__ import annotations

import contextlib
import random
import statistics
import time
from dataclasses import dataclass
from typing import Any, Callable, Iterator

from pllzoo.planning import RunPlan
from pllzoo.registry import Registry


@dataclass(frozen=True)
class Timing:
    """What a short timing measured: seconds per training step and per evaluated (test) row."""

    step_s: float  # one optimiser step at the run's batch size, views and method included
    eval_row_s: float  # one row of the per-epoch evaluation (eval-mode forward pass)
    steps: int  # training steps timed (the first included)


@contextlib.contextmanager
def _no_trace(devices: list[Any]) -> Iterator[None]:
    """Restore python's, numpy's and torch's global random states (CUDA's on ``devices``) on exit."""
    import numpy as np
    import torch

    py, npy = random.getstate(), np.random.get_state()
    with torch.random.fork_rng(devices=devices):
        try:
            yield
        finally:
            random.setstate(py)
            np.random.set_state(npy)


def _sync(device: Any) -> None:
    import torch

    if device.type == "cuda":
        torch.cuda.synchronize(device)


def time_steps(registry: Registry, plan: RunPlan, max_steps: int = 5, budget_s: float = 3.0,
               clock: Callable[[], float] = time.perf_counter) -> Timing:
    """Time ``plan``'s first training steps and one evaluation batch (see the module doc).

    :param max_steps: at most this many training steps (≥ 1).
    :param budget_s: stop taking steps once this many seconds are spent (one step always runs).
    :returns: the :class:`Timing`.
    :raises Exception: whatever the run itself would raise in its first steps (the caller reports it).
    """
    import torch

    from pllzoo.isolation import plugin_code
    from pllzoo.trainer import Trainer

    device = torch.device(plan.config["device"])
    comps = registry.build_components(plan.method, plan.component_overrides, (plan.data.name, plan.data.kind))
    with _no_trace([device] if device.type == "cuda" else []), plugin_code():
        trainer = Trainer(plan.data, comps, plan.train, plan.seed, device, None,
                          {"method": plan.method.name, "dataset": plan.data.name})
        try:
            return _time(trainer, max(1, max_steps), budget_s, clock)
        finally:
            del trainer
            if device.type == "cuda":
                torch.cuda.empty_cache()


def _time(trainer: Any, max_steps: int, budget_s: float, clock: Callable[[], float]) -> Timing:
    """The steps of epoch 0 of the first stage, as :meth:`pllzoo.trainer.Trainer._epoch` begins it."""
    import torch

    from pllzoo.schedule import lr_at

    start = clock()
    stage = trainer.stages()[0]
    trainer._enter_stage(stage)  # the stage's model, components' setup, optimiser
    for group in trainer.optimizer.param_groups:
        group["lr"] = lr_at(trainer.config, 0)
    trainer.calls.all("pllzoo_on_epoch_start", run=trainer.run, epoch=0, state=trainer.state)
    trainer.model.train()
    gen, vgen = trainer.generators(stage, 0)
    n = trainer.x_train.shape[0]
    bs = min(trainer.config.batch_size, n)
    perm = torch.randperm(n, generator=vgen, device=vgen.device).to(trainer.device)  # [N]
    times: list[float] = []
    for i in range(max_steps):
        lo = (i * bs) % max(n - bs + 1, 1)
        t0 = clock()
        trainer.step(stage, 0, perm[lo:lo + bs], gen, vgen, check=False)
        _sync(trainer.device)
        times.append(clock() - t0)
        if clock() - start >= budget_s:
            break
    step_s = statistics.median(times[1:]) if len(times) > 1 else times[0]
    rows = min(trainer.config.eval_batch_size, trainer.x_test.shape[0])
    t0 = clock()
    trainer._eval_logits(trainer.x_test[:rows])  # [rows, K]
    _sync(trainer.device)
    return Timing(step_s=step_s, eval_row_s=(clock() - t0) / max(rows, 1), steps=len(times))
