"""Cost of a SoLar epoch against a PRODEN epoch, with SoLar's Sinkhorn queue full.

    python benchmarks/epoch_cost.py [--data-dir ../shared/data] [--datasets synthetic-lt,lost]
                                    [--epochs 5] [--threads 1] [--label after] [--out benchmarks/epoch_cost.json]

Both methods run through the real bench planning (dataset defaults, recipes, hyper-parameters) and
the real trainer (``Trainer._epoch``: the training steps, the epoch-end hooks, e.g. SoLar's offline
prior pass, and the test evaluation), in the final stage, on CPU with ``--threads`` torch threads.
SoLar's queue (``queue_length`` x batch rows of log-predictions) is filled before the first timed
epoch, as in steady state; the timed epochs start past the first-epoch rule (epoch 5), so every term
of SoLar's loss is active.  Reported per dataset and method: the median over ``--epochs`` epochs of
the whole epoch and of its training steps alone (``Trainer._train_epoch``), and SoLar / PRODEN for
both, measured in the same process.  ``--label`` names the measurement in the JSON (``before`` /
``after`` a change); an existing ``--out`` file keeps its other labels.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

import torch

from pllzoo import bench
from pllzoo.data.base import DataOptions
from pllzoo.registry import get_registry
from pllzoo.trainer import Trainer
from pllzoo_solar.sinkhorn import masked_log_softmax

FIRST_EPOCH = 5  # past SoLar's first-epoch rule


def build(method: str, dataset: str, data_dir: Path) -> Trainer:
    """A trainer in the final stage of ``method`` on ``dataset`` (seed 1), as in steady state: the stages
    before it trained for real (SoLar's prior pre-estimation, whose prior the final stage carries), and
    SoLar's queue full of the current network's masked log-predictions of random training rows."""
    reg = get_registry()
    plan = bench.plan(reg, [method], dataset, [1], DataOptions(data_dir=data_dir), device="cpu")[0]
    comps = reg.build_components(plan.method, plan.component_overrides, (plan.data.name, plan.data.kind))
    trainer = Trainer(plan.data, comps, plan.train, 1, torch.device("cpu"))
    stages = trainer.stages()
    for stage in stages[:-1]:
        trainer._enter_stage(stage)
        for epoch in range(stage.epochs):
            trainer._epoch(stage, epoch, stage.epochs, is_last=False)
    trainer._enter_stage(stages[-1])
    if "queue" in trainer.state:
        rows = trainer.state.queue.shape[0]
        pick = torch.randint(trainer.candidates.shape[0], (rows,), generator=torch.Generator().manual_seed(0))
        logits = trainer._eval_logits(trainer.x_train[pick])
        trainer.state.queue = masked_log_softmax(logits, trainer.candidates[pick])  # a new queue, as if restored
        trainer.state.queue_filled = trainer.state.queue_filled + rows
    return trainer


def measure(method: str, dataset: str, data_dir: Path, epochs: int) -> dict:
    trainer = build(method, dataset, data_dir)
    stage = trainer.run.stage
    n_epochs = FIRST_EPOCH + epochs + 1
    whole, steps = [], []
    train_epoch = trainer._train_epoch

    def timed_train_epoch(*a, **kw):
        t = time.perf_counter()
        out = train_epoch(*a, **kw)
        steps.append(time.perf_counter() - t)
        return out

    trainer._train_epoch = timed_train_epoch
    for epoch in range(FIRST_EPOCH, FIRST_EPOCH + epochs + 1):  # the first epoch is a warm-up, not timed
        t = time.perf_counter()
        record = trainer._epoch(stage, epoch, n_epochs, is_last=True)
        whole.append(time.perf_counter() - t)
    bs, n = trainer.config.batch_size, trainer.x_train.shape[0]
    return {
        "method": method, "dataset": dataset, "epochs": epochs, "batch_size": bs, "train_rows": n,
        "queue_rows": int(trainer.state.queue.shape[0]) if "queue" in trainer.state else 0,
        "epoch_s": statistics.median(whole[1:]), "train_steps_s": statistics.median(steps[1:]),
        "steps_per_epoch": n // bs if trainer.config.drop_last else -(-n // bs),
        **{key: record[key] for key in ("sinkhorn_iters", "sinkhorn_relaxed_count") if key in record},  # last epoch
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data-dir", type=Path, default=Path(__file__).resolve().parents[2] / "shared" / "data")
    ap.add_argument("--datasets", default="synthetic-lt,lost")
    ap.add_argument("--epochs", type=int, default=5, help="timed epochs per method (median reported)")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--label", default="after", help="name of this measurement in the JSON (before / after)")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    rows = []
    for dataset in args.datasets.split(","):
        solar, proden = (measure(m, dataset, args.data_dir, args.epochs) for m in ("solar", "proden"))
        ratio = {"epoch": solar["epoch_s"] / proden["epoch_s"], "train_steps": solar["train_steps_s"] / proden["train_steps_s"]}
        rows.append({"dataset": dataset, "solar": solar, "proden": proden, "ratio": ratio})
        print(f"{dataset:<14} solar {solar['epoch_s'] * 1e3:8.1f} ms/epoch ({solar['train_steps_s'] * 1e3:7.1f} ms steps)  "
              f"proden {proden['epoch_s'] * 1e3:8.1f} ms/epoch ({proden['train_steps_s'] * 1e3:7.1f} ms steps)  "
              f"SoLar/PRODEN epoch {ratio['epoch']:.2f}, steps {ratio['train_steps']:.2f}")
    if args.out:
        record = json.loads(args.out.read_text()) if args.out.exists() else {}
        record[args.label] = {"rows": rows, "threads": args.threads, "torch": torch.__version__}
        args.out.write_text(json.dumps(record, indent=2) + "\n")


if __name__ == "__main__":
    main()
