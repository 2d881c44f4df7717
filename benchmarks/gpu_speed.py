"""GPU speed of the training path against the model-only limit, in one process on one device.

    python benchmarks/gpu_speed.py --device cuda --data-dir .devdata --out $OUT/gpu_speed.json
    python benchmarks/gpu_speed.py --device cpu --subset 512 --epochs 2 --model cnn   # a smoke run, here

(a) **Model-only limit**: the backbone (ResNet-18 with the CIFAR stem) trained on resident random
    uint8 images at batch 256 — normalise, forward, backward, SGD step — under bf16 autocast with
    channels-last inputs; images per second.
(b) **Each method, this path**: ``pllzoo.trainer.Trainer`` on CIFAR-10-LT (φ = 0.5, γ = 100, seed 1),
    the device's defaults (batched views on the device, device generators); seconds per epoch
    *including* the epoch's evaluation and any prior-estimation pass (the median of the epochs after
    the first ``--warmup`` ones, so cuDNN autotuning and a filling queue are left out), and training
    images × passes per second: every train-mode forward pass counts its rows (SoLar: weak, strong
    and mixup passes; a padded mixup pass, ``train.mixup_rows``, counts its R rows, not its padding),
    divided by the epoch time.  Throughput / model-only limit is the issue's
    "≥ 60 %" measure.
Extra ``--hp KEY=VALUE`` apply to every method run, e.g. ``--hp train.compile=reduce-overhead``.

(c) **Each method, the PIL views**: the same with ``train.strong_view=strong`` (and PiCO's weak view
    unchanged), i.e. the strong view on PIL images through the view pool (``--view-workers``, the
    previous default on CUDA).  Run the script with ``PYTHONPATH`` pointing at an older checkout to
    time that checkout's path instead (the script uses only ``bench.plan`` and ``Trainer``).

SoLar runs without its pre-estimation stage here (``estimator.est_epochs=0``): the stage-2 epoch is
the one that repeats 1000 times.  No checkpoints are written (no run folder).
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import time
from pathlib import Path

import torch

from pllzoo import augment, bench
from pllzoo.data.base import DataOptions
from pllzoo.models import build_model
from pllzoo.registry import get_registry
from pllzoo.trainer import Trainer

METHODS = ("solar", "proden", "cc", "pico")
CIFAR_MEAN, CIFAR_STD = (0.4914, 0.4822, 0.4465), (0.247, 0.243, 0.261)


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def model_limit(model: str, device: torch.device, batch: int = 256, steps: int = 30, warmup: int = 10) -> dict:
    """Images / s of normalise → forward → backward → SGD step on resident random images."""
    net = build_model(model, 10, (3, 32, 32)).to(device).train()
    if device.type == "cuda":
        net = net.to(memory_format=torch.channels_last)
    opt = torch.optim.SGD(net.parameters(), lr=0.01, momentum=0.9, weight_decay=5e-4)
    gen = torch.Generator(device=device).manual_seed(0)
    x_u8 = torch.randint(0, 256, (batch, 3, 32, 32), generator=gen, device=device, dtype=torch.uint8)
    y = torch.randint(0, 10, (batch,), generator=gen, device=device)
    mean = torch.tensor(CIFAR_MEAN).view(-1, 1, 1).to(device)
    std = torch.tensor(CIFAR_STD).view(-1, 1, 1).to(device)
    amp = torch.autocast("cuda", dtype=torch.bfloat16) if device.type == "cuda" else torch.autocast("cpu", enabled=False)

    def one() -> None:
        x = augment.normalize(x_u8, mean, std)
        if device.type == "cuda":
            x = x.contiguous(memory_format=torch.channels_last)
        with amp:
            loss = torch.nn.functional.cross_entropy(net(x).float(), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    for _ in range(warmup):
        one()
    _sync(device)
    t = time.perf_counter()
    for _ in range(steps):
        one()
    _sync(device)
    dt = time.perf_counter() - t
    return {"model": model, "batch": batch, "steps": steps, "images_per_s": batch * steps / dt}


def method_speed(method: str, path: str, args: argparse.Namespace, reg) -> dict:
    """Seconds per epoch and train-mode images × passes / s of one method on CIFAR-10-LT."""
    hp = {"train.model": args.model, **({"estimator.est_epochs": "0"} if method == "solar" else {})}
    if path == "pil":
        hp["train.strong_view"] = "strong"
    hp.update(bench.parse_overrides(args.hp))  # e.g. train.compile=reduce-overhead
    options = DataOptions(data_dir=args.data_dir, phi=0.5, imb=100, subset=args.subset, download=False)
    (plan,) = bench.plan(reg, [method], "cifar10lt", [1], options, epochs=args.epochs, hp=hp, device=args.device,
                         view_workers=None if path == "pil" else 0)
    comps = reg.build_components(plan.method, plan.component_overrides, (plan.data.name, plan.data.kind))
    device = torch.device(plan.config["device"])
    trainer = Trainer(plan.data, comps, plan.train, plan.seed, device, view_workers=plan.view_workers)
    rows = [torch.zeros((), device=device)]
    epoch_rows: list[int] = []

    def count(x: torch.Tensor) -> None:  # rows of one train-mode pass
        masks, n = trainer.row_masks, x.shape[0]
        if masks is not None and masks.active:  # a padded pass: its R rows
            rows[0] += masks.weight[:n].sum()  # on the device, read at the epoch's end
        else:
            rows[0] += n

    records: list[dict] = []

    def on_epoch(recs: list[dict]) -> None:
        _sync(device)
        epoch_rows.append(int(rows[0]))
        rows[0] = torch.zeros((), device=device)
        records.append({**recs[-1], "t_end": time.perf_counter()})

    trainer.on_epoch = on_epoch
    original = trainer._new_model

    def new_model(stage):  # count every stage's fresh network's train-mode passes
        original(stage)
        model = trainer.model
        if getattr(model, "_speed_hooked", False):
            return
        model._speed_hooked = True
        if model._compiled_call_impl is None:  # eager: a pre-hook on the encoder, which every pass calls
            model.encoder.register_forward_pre_hook(lambda m, inputs: count(inputs[0]) if m.training else None)
            return  # (forward and forward_with_features alike; PiCO's passes are the latter)
        # compiled: count around the compiled callables, never inside them. With the encoder hook traced into
        # the compiled call, this benchmark's log showed dynamo compiling torchvision's BasicBlock.forward by
        # itself up to its recompile limit, and SoLar at 2.31 s an epoch; the paper run in the same call, with
        # no hook, logged no recompile and ran 1.30 s an epoch (fifth H100 session, results-speed5/)
        def counted(call):
            def wrapper(x, *args, **kwargs):
                if model.training:
                    count(x)
                return call(x, *args, **kwargs)
            return wrapper

        model._compiled_call_impl = counted(model._compiled_call_impl)
        trainer._features_pass = counted(trainer._features_pass)

    trainer._new_model = new_model
    t0 = time.perf_counter()
    trainer.fit()
    ends = [t0] + [r["t_end"] for r in records]
    epoch_s = [b - a for a, b in zip(ends, ends[1:])]  # whole epochs: steps, hooks, evaluation, estimation
    keep = list(range(min(args.warmup, len(epoch_s) - 1), len(epoch_s)))
    s_per_epoch = statistics.median(epoch_s[i] for i in keep)
    passes = statistics.median(epoch_rows[i] for i in keep)
    return {
        "method": method, "path": path + "".join(f" {h}" for h in args.hp), "strong_view": plan.train.strong_view, "weak_view": plan.train.weak_view,
        "view_workers": plan.view_workers, "epochs": len(epoch_s), "timed_epochs": len(keep),
        "train_images": plan.data.num_train, "s_per_epoch": s_per_epoch, "epoch_s": epoch_s,
        "image_passes_per_epoch": passes, "image_passes_per_s": passes / s_per_epoch,
        "acc_all_last": records[-1]["acc_all"],
    }


def env(device: torch.device) -> dict:
    out = {"torch": torch.__version__, "python": platform.python_version(), "device": str(device),
           "threads": torch.get_num_threads()}
    if device.type == "cuda":
        out["device_name"] = torch.cuda.get_device_name(device)
        out["cuda"] = torch.version.cuda
    return out


def table(result: dict) -> str:
    limit = result["model_limit"]["images_per_s"]
    lines = [f"Model-only limit ({result['model_limit']['model']}, batch 256): {limit:,.0f} images/s "
             f"on {result['env'].get('device_name', result['env']['device'])}", "",
             "| method | path | strong view | s / epoch | images × passes / s | % of model limit |",
             "|---|---|---|---|---|---|"]
    for r in result["methods"]:
        lines.append(f"| {r['method']} | {r['path']} | {r['strong_view']} | {r['s_per_epoch']:.3f} | "
                     f"{r['image_passes_per_s']:,.0f} | {100 * r['image_passes_per_s'] / limit:.0f} % |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--data-dir", type=Path, default=Path(__file__).resolve().parents[2] / "shared" / "data")
    ap.add_argument("--model", default="resnet18")
    ap.add_argument("--methods", default=",".join(METHODS))
    ap.add_argument("--paths", default="device,pil", help="device: this path's defaults; pil: PIL strong view")
    ap.add_argument("--epochs", type=int, default=6)
    ap.add_argument("--warmup", type=int, default=2, help="epochs left out of the median")
    ap.add_argument("--subset", type=int, default=None, help="smoke runs only")
    ap.add_argument("--hp", action="append", default=[], help="extra pllzoo --hp for every method run (repeatable)")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    device = torch.device(args.device)
    reg = get_registry()
    recorded = {k: (v.name if k == "out" and v is not None else str(v)) for k, v in vars(args).items()}  # no machine path
    result = {"env": env(device), "args": recorded,
              "model_limit": model_limit(args.model, device), "methods": []}
    print(f"model limit: {result['model_limit']['images_per_s']:,.0f} images/s", flush=True)
    for path in args.paths.split(","):
        for method in args.methods.split(","):
            try:
                row = method_speed(method, path, args, reg)
            except Exception as exc:  # noqa: BLE001 - a measurement: record the failure, time the next method
                result.setdefault("failed", []).append(
                    {"method": method, "path": path, "error": f"{type(exc).__name__}: {str(exc).splitlines()[0]}"})
                print(f"{method} [{path}]: FAILED {result['failed'][-1]['error']}", flush=True)
                continue
            result["methods"].append(row)
            print(f"{method} [{path}]: {row['s_per_epoch']:.3f} s/epoch, {row['image_passes_per_s']:,.0f} "
                  f"images×passes/s", flush=True)
            if args.out:  # after every row: a call cut short still leaves what it measured
                args.out.parent.mkdir(parents=True, exist_ok=True)
                args.out.write_text(json.dumps(result, indent=2) + "\n")
                args.out.with_suffix(".md").write_text(table(result) + "\n")
    print(table(result))


if __name__ == "__main__":
    main()
