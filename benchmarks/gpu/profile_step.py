"""Where a training step's time goes on a GPU: torch.profiler over steps of a method's third epoch.

    python benchmarks/gpu/profile_step.py --data-dir .devdata --method solar --hp train.compile=reduce-overhead

The trainer runs as ``benchmarks/gpu_speed.py`` sets it up (CIFAR-10-LT φ = 0.5, γ = 100, seed 1,
ResNet-18, SoLar without pre-estimation); the first two epochs warm up (compilation, cuDNN), then
``--steps`` steps of the third epoch are profiled.  Prints the ops by self CPU time (what the
launching thread spends) and by self CUDA time, the profiled steps' wall time per step, and the CPU time of
each labelled part of a step (the role hooks: label update, selection, loss, ...; the network passes; the
grouped views).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import torch

from pllzoo import bench
from pllzoo.data.base import DataOptions
from pllzoo.registry import get_registry
from pllzoo.trainer import Trainer


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data-dir", type=Path, required=True)
    ap.add_argument("--method", default="solar")
    ap.add_argument("--steps", type=int, default=15)
    ap.add_argument("--rows", type=int, default=25)
    ap.add_argument("--hp", action="append", default=[])
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--model", default="resnet18")
    ap.add_argument("--subset", type=int, default=None, help="smoke runs only")
    args = ap.parse_args()
    reg = get_registry()
    hp = {"train.model": args.model, **({"estimator.est_epochs": "0"} if args.method == "solar" else {})}
    hp.update(bench.parse_overrides(args.hp))
    options = DataOptions(data_dir=args.data_dir, phi=0.5, imb=100, subset=args.subset, download=False)
    (plan,) = bench.plan(reg, [args.method], "cifar10lt", [1], options, epochs=3, hp=hp, device=args.device,
                         view_workers=0)
    comps = reg.build_components(plan.method, plan.component_overrides, (plan.data.name, plan.data.kind))
    trainer = Trainer(plan.data, comps, plan.train, plan.seed, torch.device(args.device), view_workers=0)
    cuda = trainer.device.type == "cuda"
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    step, seen = trainer.step, {"n": 0}
    acts = [torch.profiler.ProfilerActivity.CPU] + ([torch.profiler.ProfilerActivity.CUDA] if cuda else [])
    prof = torch.profiler.profile(activities=acts)
    timing = {}

    def profiled(stage, epoch, *a, **kw):
        if epoch == 2 and seen["n"] == 0:
            sync()
            prof.start()
            timing["t0"] = time.perf_counter()
        out = step(stage, epoch, *a, **kw)
        if epoch == 2:
            seen["n"] += 1
            if seen["n"] == args.steps:
                sync()
                timing["dt"] = time.perf_counter() - timing["t0"]
                prof.stop()
        return out

    trainer.step = profiled
    role = trainer.calls.role

    def labelled_role(name, **kwargs):  # each role hook under its own label: "## hook:label_update ##" rows
        with torch.profiler.record_function(f"## hook:{name} ##"):
            return role(name, **kwargs)

    trainer.calls.role = labelled_role
    for name in ("_views_forward", "forward_padded", "_group_views"):  # the trainer's passes and grouped views
        original_fn = getattr(trainer, name)

        def labelled(*a, _fn=original_fn, _name=name, **kw):
            with torch.profiler.record_function(f"## {_name} ##"):
                return _fn(*a, **kw)

        setattr(trainer, name, labelled)
    trainer.fit()
    print(f"{args.method} {' '.join(args.hp)}: {1000 * timing['dt'] / args.steps:.1f} ms per profiled step "
          f"(profiler on)")
    table = prof.key_averages()
    print(table.table(sort_by="self_cpu_time_total", row_limit=args.rows))
    if cuda:
        print(table.table(sort_by="self_cuda_time_total", row_limit=args.rows // 2))
    print("Per labelled part (CPU total, ms per step):")  # where the launching thread's time goes
    for event in sorted(table, key=lambda e: -e.cpu_time_total):
        if event.key.startswith("## ") and not event.key.startswith("## Call"):
            print(f"  {event.key:40s} {event.cpu_time_total / 1000 / args.steps:8.2f} ms  ({event.count} calls)")


if __name__ == "__main__":
    main()
