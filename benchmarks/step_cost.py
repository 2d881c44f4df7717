"""Cost of a SoLar training step against a PRODEN step doing the same consistency + mixup passes.

    python benchmarks/step_cost.py [--data-dir ../shared/data] [--steps 12] [--device cpu] [--out benchmarks/step_cost.json]

Both run through the real trainer on CIFAR-10-LT (phi 0.5, gamma 100, JPEG copy), small CNN,
batch 256, CPU by default (``--device cuda``: bf16 autocast, as in training), at an epoch past the first-epoch rule so every term is active:

* ``solar``: Sinkhorn over [queue (full, 64 x 256 rows); batch], class-wise selection, then
  CE + consistency (strong view) + mixup on the reliable samples and the re-normalised loss on the rest;
* ``proden+loss=solar.loss``: PRODEN's confidences as targets, every sample selected, the same
  loss component, so the same weak/strong/mixup forward passes (mixup over the whole batch).

Reported: median seconds per step, and the time spent inside the label-update and selection hooks
(the part SoLar adds).  SoLar mixes only its reliable subset, so its mixup pass is smaller: the
ratio of the hook time to the step time is the fair measure of the overhead.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import torch

from pllzoo import bench
from pllzoo.data.base import DataOptions
from pllzoo.registry import get_registry
from pllzoo.trainer import Trainer


def measure(method: str, data_dir: Path, steps: int, device: str = "cpu") -> dict:
    reg = get_registry()
    plan = bench.plan(reg, [method], "cifar10lt", [1], DataOptions(data_dir=data_dir), epochs=2,
                      hp={"train.model": "cnn", **({"estimator.est_epochs": "0"} if method == "solar" else {})},
                      device=device)[0]
    comps = reg.build_components(plan.method, plan.component_overrides, (plan.data.name, plan.data.kind))
    data = plan.data.replace(x_train=plan.data.x_train[: 256 * steps], y_train=plan.data.y_train[: 256 * steps],
                             candidates=plan.data.candidates[: 256 * steps])
    trainer = Trainer(data, comps, plan.train, 1, torch.device(device))
    stage = trainer.stages()[-1]
    trainer.run.stage = stage
    trainer._new_model(stage)
    trainer.hooks.pllzoo_setup_stage(run=trainer.run, state=trainer.state)
    trainer._collect_modules_and_optimizer()
    if "queue" in trainer.state:  # a full queue, as in steady state
        trainer.state.queue = torch.log_softmax(torch.randn_like(trainer.state.queue), 1)
        trainer.state.queue_filled += trainer.state.queue.shape[0]
    hook_time = [0.0]
    sync = torch.cuda.synchronize if trainer.device.type == "cuda" else (lambda: None)
    for name in ("pllzoo_label_update", "pllzoo_select"):
        caller = getattr(trainer.hooks, name)
        original = caller.__call__

        def timed(*a, _orig=original, **kw):
            sync()  # CUDA runs asynchronously: time the hook's own kernels only
            t = time.perf_counter()
            out = _orig(*a, **kw)
            sync()
            hook_time[0] += time.perf_counter() - t
            return out

        setattr(trainer.hooks, name, timed)
    trainer.hooks.pllzoo_on_epoch_start(run=trainer.run, epoch=5, state=trainer.state)
    if device != "cpu":  # one untimed epoch: CUDA context, cuDNN autotuning, allocator warm-up
        trainer._train_epoch(stage, 4)
        hook_time[0] = 0.0
    t = time.perf_counter()
    trainer._train_epoch(stage, 5)
    total = time.perf_counter() - t
    return {"method": method, "steps": steps, "s_per_step": total / steps, "hooks_s_per_step": hook_time[0] / steps}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data-dir", type=Path, default=Path(__file__).resolve().parents[2] / "shared" / "data")
    ap.add_argument("--steps", type=int, default=12)
    ap.add_argument("--device", default="cpu", help="cpu | cuda[:i]")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    rows = [measure(m, args.data_dir, args.steps, args.device) for m in ("proden+loss=solar.loss", "solar")]
    ratio = rows[1]["s_per_step"] / rows[0]["s_per_step"]
    for r in rows:
        print(f"{r['method']:<24} {r['s_per_step']:.3f} s/step, label-update+selection hooks {r['hooks_s_per_step']:.4f} s/step")
    print(f"SoLar / PRODEN step time: {ratio:.3f}; SoLar hook overhead: {rows[1]['hooks_s_per_step'] / rows[1]['s_per_step']:.1%} of its step")
    if args.out:
        Path(args.out).write_text(json.dumps({"rows": rows, "ratio": ratio, "threads": torch.get_num_threads(), "device": args.device,
                                              "torch": torch.__version__}, indent=2) + "\n")


if __name__ == "__main__":
    main()
