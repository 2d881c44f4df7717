"""ResNet-18 (CIFAR stem) training-step throughput on a GPU: eager vs torch.compile, batch 256 and 512.

    python benchmarks/gpu/model_limit.py [--runs eager:256,eager:512,default:256,reduce-overhead:256]
    python benchmarks/gpu/model_limit.py --runs reduce-overhead:256:2,reduce-overhead:256:2:nocudnn,...

A run is ``mode:batch[:calls[:variant]]``: ``calls`` network calls (different inputs, as SoLar's weak
and strong views) before one backward; ``variant`` ``nocudnn`` (cuDNN off) or ``notrees`` (inductor's
CUDA graphs without cudagraph trees), to find which one lets CUDA graphs run the trainer's step;
``dyn``: one more call whose size changes every step (SoLar's mixup over the reliable rows), compiled
as the network (the second H100 session's failing step); ``dyneager``: the same, the network compiled
by the trainer's ``pllzoo.devices.compile_model`` (fixed sizes graphed, others eager).
A failing run prints its error and the next one goes on.

Random float inputs already on the device, channels-last, bf16 autocast, SGD with momentum; 5 warm-up
steps (which include compilation), then 30 timed steps.  It answers one question: is a step of this
size bound by the GPU or by launching its kernels from Python?  (Per-step time that does not grow
with the batch, and CUDA graphs that help, mean the latter.)
"""

from __future__ import annotations

import argparse
import time

import torch

from pllzoo.models import build_model


def bench(mode: str, bs: int, calls: int = 1, steps: int = 30, variant: str = "") -> float:
    d = torch.device("cuda")
    torch._dynamo.reset()
    net = build_model("resnet18", 10, (3, 32, 32)).to(d).to(memory_format=torch.channels_last).train()
    if mode != "eager" and variant == "dyneager":
        from pllzoo.devices import compile_model

        compile_model(net, mode, frozenset({bs}))
    elif mode != "eager":
        if variant == "dyn":  # as the trainer did in the second H100 session
            import torch._inductor.config as inductor_config

            inductor_config.triton.cudagraph_skip_dynamic_graphs = True
        net.compile(mode=mode)
    extra = [97, 130, 201, 64, 177]  # the data-sized call's sizes, in turn
    opt = torch.optim.SGD(net.parameters(), lr=0.01, momentum=0.9)
    xs = [torch.randn(bs, 3, 32, 32, device=d).contiguous(memory_format=torch.channels_last) for _ in range(calls)]
    y = torch.randint(0, 10, (bs,), device=d)

    count = [0]

    def one() -> None:
        if mode == "reduce-overhead":
            torch.compiler.cudagraph_mark_step_begin()
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = sum(torch.nn.functional.cross_entropy(net(x).float(), y) for x in xs)
            if variant.startswith("dyn"):
                n = extra[count[0] % len(extra)]
                loss = loss + torch.nn.functional.cross_entropy(net(xs[0][:n]).float(), y[:n])
        count[0] += 1
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    t = time.perf_counter()
    for _ in range(5):
        one()
    torch.cuda.synchronize()
    warm = time.perf_counter() - t
    t = time.perf_counter()
    for _ in range(steps):
        one()
    torch.cuda.synchronize()
    rows = bs * calls * steps + (sum(extra[(5 + i) % len(extra)] for i in range(steps)) if variant.startswith("dyn") else 0)
    rate = rows / (time.perf_counter() - t)
    print(f"{mode} bs={bs} calls={calls}: {rate:,.0f} img/s (warm-up {warm:.1f} s)", flush=True)
    return rate


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", default="eager:256,eager:512,default:256,reduce-overhead:256")
    import torch._inductor.config as inductor_config

    for run in ap.parse_args().runs.split(","):
        parts = run.split(":")
        mode, bs, calls, variant = parts[0], parts[1], parts[2] if len(parts) > 2 else "1", ":".join(parts[3:])
        torch.backends.cudnn.enabled = variant != "nocudnn"
        inductor_config.triton.cudagraph_trees = variant != "notrees"
        try:
            bench(mode, int(bs), int(calls), variant=variant)
        except Exception as exc:  # noqa: BLE001 - a diagnostic: report and go on
            print(f"{run}: FAILED {type(exc).__name__}: {str(exc).splitlines()[0]}", flush=True)


if __name__ == "__main__":
    main()
