"""What a bench will cost, said before it trains: the plan, an estimate of its duration, and a warning
when the plan looks unreasonable (the cost guard of ``pllzoo bench``; ``--dry-run`` stops after it).

* The plan (:func:`run_costs`): per run its method, seed, model, device, and its stages with their epochs,
  from the recipe's own ``pllzoo_stages`` answer as the trainer asks it (SoLar: ``pre-estimation 20 +
  train 40``); the steps per epoch follow from the training rows and the batch size.
* The estimate (:func:`run_seconds`): ``epochs × (steps per epoch × step_s + evaluated rows × eval_row_s)``
  per run, with ``step_s`` and ``eval_row_s`` timed on the run's own device from a few steps of the first
  run of its method (:mod:`pllzoo.timing`; a few seconds in all: once the timing budget is spent the
  remaining methods are assumed to cost what the first did; not with ``--jobs N`` or torchrun, where the
  progress estimates from the first epochs).  The bench's total is the sum over the runs
  it will train (runs already finished under ``--out`` are reused and cost nothing) divided by the runs
  trained at once (``--jobs``; an upper bound on the speed-up).  Not counted: a method's epoch-end or
  stage-start passes over the training set, checkpoints, data loading.
* The guard (:func:`cost_warning`): one line when a ResNet or WRN runs on the CPU for more than
  :data:`CPU_RESNET_EPOCHS` epochs or the whole bench is estimated above :data:`LONG_HOURS` hours,
  suggesting the CPU-tier recipe (:data:`CPU_RECIPE`) on a CPU, fewer epochs or more GPUs elsewhere;
  and one tip line (:func:`graphs_tip`) when a long GPU bench runs its network without CUDA graphs.
"""

from __future__ import annotations

import json
import math
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pllzoo.errors import PLLZooError
from pllzoo.planning import RunPlan
from pllzoo.registry import Registry

CPU_RESNET_EPOCHS = 100  # a ResNet on the CPU for more epochs than this is warned about, whatever the estimate
LONG_HOURS = 12.0  # a bench estimated above this many hours is warned about
CPU_RECIPE = ("benchmarks/cifar10lt-cpu/run.sh (a small CNN: --hp train.model=cnn, 40 epochs, "
              "--hp train.schedule=cosine)")


@dataclass(frozen=True)
class RunCost:
    """One planned run as the plan shows it."""

    method: str
    seed: int
    run_id: str
    model: str
    device: str
    stages: tuple[tuple[str, int], ...]  # (stage name, epochs), in training order
    steps_per_epoch: int
    eval_rows: int  # rows evaluated after every epoch (test, and held-out training rows)
    reused: bool = False  # finished under --out already: reused, not trained
    done: int = 0  # epochs trained before (--resume of a run with a checkpoint; from its log.jsonl)

    @property
    def epochs(self) -> int:
        """Epochs over all stages."""
        return sum(e for _, e in self.stages)

    def stage_text(self) -> str:
        """``pre-estimation 20 + train 40 = 60 epochs`` (one stage: ``train 40 epochs``)."""
        parts = " + ".join(f"{name} {e}" for name, e in self.stages)
        return f"{parts} = {self.epochs} epochs" if len(self.stages) > 1 else f"{parts} epochs"


def stages_of(registry: Registry, plan: RunPlan) -> tuple[tuple[str, int], ...]:
    """``plan``'s stages as ``(name, epochs)``: the recipe's ``pllzoo_stages`` answer, or one ``train`` stage."""
    from pllzoo.components import single_answerers
    from pllzoo.hookcalls import RunHooks, make_run_manager
    from pllzoo.run import Run

    comps = registry.build_components(plan.method, plan.component_overrides, (plan.data.name, plan.data.kind))
    calls = RunHooks(make_run_manager(comps), comps, single_answerers(plan.method.name, comps))
    run = Run(data=plan.data, candidates=plan.data.candidates.bool(), config=plan.train,
              device=_cpu(), seed=plan.seed)
    planned = calls.stages(run) or [_default_stage()]
    return tuple((s.name, s.epochs if s.epochs is not None else plan.train.epochs) for s in planned)


def _cpu() -> Any:
    import torch

    return torch.device("cpu")


def _default_stage() -> Any:
    from pllzoo.run import Stage

    return Stage()


def run_costs(registry: Registry, plans: list[RunPlan], out: Path, overwrite: bool = False,
              resume: bool = False) -> list[RunCost]:
    """The :class:`RunCost` of every plan; ``reused`` when ``out`` holds it finished and not ``overwrite``;
    with ``resume``, ``done`` counts the epochs an unfinished run with a checkpoint has trained already."""
    from pllzoo import archive

    try:  # finished, undamaged runs kept in OUT/runs.jsonl.xz are reused as run folders are (pllzoo.bench.execute)
        archived = set(archive.finished(Path(out))[0])
    except PLLZooError:  # an unreadable archive: bench says so when it runs
        archived = set()
    from pllzoo.runfolders import finished_records

    costs, seen = [], {}
    for p in plans:
        key = (p.method.name, repr(p.train), p.data.num_train)
        if key not in seen:  # the stages depend on the recipe and the trainer settings, not the seed
            seen[key] = stages_of(registry, p)
        n, bs = p.data.num_train, p.train.batch_size
        steps = n // bs if p.train.drop_last else math.ceil(n / bs)
        evals = p.data.x_test.shape[0] + (p.data.x_val.shape[0] if p.data.x_val is not None else 0)
        run_dir = Path(out) / "runs" / p.run_id
        reused = not overwrite and (p.run_id in archived or finished_records(run_dir) is not None)  # as bench
        # decides: a damaged finished run resumes or retrains
        done = epochs_done(run_dir) if resume and not reused else 0
        costs.append(RunCost(p.method.name, p.seed, p.run_id, p.train.model, p.config["device"], seen[key],
                             max(steps, 1), int(evals), reused, min(done, sum(e for _, e in seen[key]))))
    return costs


def epochs_done(run_dir: Path) -> int:
    """Epochs an unfinished run resumes after, for the plan and the estimate: the records its checkpoint holds
    (read memory-mapped, without its tensors), else 0. The log may hold more: epochs trained after the last
    checkpoint (``train.checkpoint_every``), which a resume trains again (an outside review: "7 of 20 epochs
    done" for a run that resumed after epoch 4).  A log that cannot be read counts 0, a checkpoint that cannot
    be read the log's records (the run says why when it resumes)."""
    import torch

    from pllzoo.checkpoint import NAME
    from pllzoo.results import DamagedRun, _records

    path = run_dir / NAME
    if not path.is_file():
        return 0
    try:
        logged = len(_records(run_dir))
    except DamagedRun:  # the run says why when it resumes
        return 0
    try:
        with warnings.catch_warnings():  # torch's note on sparse tensors (VALEN's state) is not the user's
            warnings.simplefilter("ignore")
            records = torch.load(path, map_location="cpu", weights_only=True, mmap=True).get("records")
    except Exception:  # damaged, truncated, not mappable: the log's count (the resume itself says what is wrong)
        return logged
    return min(len(records), logged) if isinstance(records, list) else logged


def run_seconds(cost: RunCost, step_s: float, eval_row_s: float) -> float:
    """Estimated seconds of one run: the epochs left (``epochs - done``) × (steps per epoch × step_s +
    evaluated rows × eval_row_s)."""
    return (cost.epochs - cost.done) * (cost.steps_per_epoch * step_s + cost.eval_rows * eval_row_s)


def bench_seconds(run_s: list[float], jobs: int = 1) -> float:
    """The bench's estimate: the runs' seconds summed, divided by the runs trained at once."""
    return sum(run_s) / max(1, min(jobs, len(run_s))) if run_s else 0.0


def _about(seconds: float) -> str:
    """``~12m``; ``<1s`` as it is (an approximate bound needs no tilde)."""
    text = duration(seconds)
    return text if text.startswith("<") else f"~{text}"


def duration(seconds: float) -> str:
    """``<1s``, ``45s``, ``12m``, ``3.4h``, ``2.1 days``: a duration at the precision an estimate deserves."""
    if seconds < 1:
        return "<1s"
    if seconds < 90:
        return f"{seconds:.0f}s"
    if seconds < 90 * 60:
        return f"{seconds / 60:.0f}m"
    if seconds < 48 * 3600:
        return f"{seconds / 3600:.1f}h"
    return f"{seconds / 86400:.1f} days"


def plan_lines(costs: list[RunCost], jobs: int = 1) -> list[str]:
    """The plan, one line for the whole and one per method (its seeds, model, stages, steps per epoch)."""
    if not costs:
        return []
    methods = list(dict.fromkeys(c.method for c in costs))
    seeds = list(dict.fromkeys(c.seed for c in costs))
    reused = sum(c.reused for c in costs)
    resumed = [c for c in costs if c.done]
    grid = "=" if len(costs) == len(methods) * len(seeds) else "of"  # a shard: a part of the grid
    head = (f"plan: {len(costs)} run(s) {grid} {len(methods)} method(s) x {len(seeds)} seed(s) on {costs[0].device}"
            + (f", {jobs} at once" if jobs > 1 else "")
            + (f"; {reused} finished under --out, reused" if reused else "")
            + (f"; {len(resumed)} resumed ({sum(c.done for c in resumed)} of {sum(c.epochs for c in resumed)} "
               "epochs done)" if resumed else ""))
    lines = [head]
    width = max(len(m) for m in methods)
    for m in methods:
        mine = [c for c in costs if c.method == m]
        first = mine[0]
        lines.append(f"  {m:<{width}}  seeds {','.join(str(c.seed) for c in mine)}  model {first.model}  "
                     f"{first.stage_text()}, {first.steps_per_epoch} steps each")
    return lines


def estimate_line(costs: list[RunCost], run_s: dict[str, float], timed: list[str], jobs: int = 1) -> str:
    """``estimate: ~2.1h in all (proden ~12m per run, ...); timed: ...``; ``run_s`` maps run id to seconds."""
    todo = [c for c in costs if not c.reused]
    total = bench_seconds([run_s[c.run_id] for c in todo], jobs)
    per = {}
    for c in todo:
        per.setdefault(c.method, run_s[c.run_id])
    each = ", ".join(f"{m} {_about(s)}" for m, s in per.items())
    return (f"estimate: {_about(total)} in all ({each} per run), from a timing of the first steps of "
            f"{', '.join(timed)}; epoch-end passes, checkpoints and a filled queue's extra cost not included")


DEEP_MODELS = ("resnet", "wrn")  # the shipped backbones too slow on a CPU at a paper's length (the name rule, which
# holds with --jobs and torchrun, where no step is timed: an outside review found WRN-28-2 left out)


def cost_warning(costs: list[RunCost], total_s: float | None) -> str | None:
    """One warning line when the plan looks unreasonable (see the module doc), else None."""
    todo = [c for c in costs if not c.reused]
    if not todo:
        return None
    on_cpu = todo[0].device == "cpu"
    why = []
    slow = [c for c in todo if on_cpu and c.model.startswith(DEEP_MODELS) and c.epochs > CPU_RESNET_EPOCHS]
    if slow:
        why.append(f"{slow[0].model} for {slow[0].epochs} epochs on the CPU")
    if total_s is not None and total_s > LONG_HOURS * 3600:
        why.append(f"estimated at {_about(total_s)}")
    if not why:
        return None
    images = any(c.model not in ("mlp", "linear") for c in todo)  # the CPU tier is a CIFAR recipe
    fix = (f"on a CPU use the CPU-tier recipe {CPU_RECIPE}, or a GPU" if on_cpu and images
           else "fewer epochs or seeds, --jobs N, or --shard I/N over several machines" if on_cpu
           else "fewer epochs or seeds, --jobs N, or --shard I/N over several GPUs")
    return f"Warning: this bench looks too long ({'; '.join(why)}); {fix}. --dry-run shows the plan only."


GRAPHS_TIP_S = 600.0  # a GPU bench estimated above this many seconds without CUDA graphs gets the tip below


def graphs_tip(costs: list[RunCost], compiled: bool, total_s: float | None) -> str | None:
    """One tip line when a GPU bench that would take over :data:`GRAPHS_TIP_S` seconds runs its network eager:
    ``--hp train.compile=reduce-overhead`` (CUDA graphs) trains every method 2–3× faster an epoch after
    20–45 s of compiling (an H100, ``benchmarks/gpu/README.md``).  The estimate times the eager path."""
    todo = [c for c in costs if not c.reused]
    if compiled or not todo or todo[0].device == "cpu" or total_s is None or total_s <= GRAPHS_TIP_S:
        return None
    return ("Tip: on a GPU --hp train.compile=reduce-overhead (CUDA graphs) trains 2-3x faster an epoch after "
            "20-45 s of compiling per run (benchmarks/gpu/README.md).")


def dry_run_json(plans: list[RunPlan], out: Path) -> str:
    """Each run's resolved config (what its ``config.json`` will hold) with its folder, as a JSON list."""
    return json.dumps([{"run": p.run_id, "folder": str(Path(out) / "runs" / p.run_id), "config": p.config}
                       for p in plans], indent=2, sort_keys=True, default=str)  # as results.write_json
