"""Random hyper-parameter search: N trials drawn from a space (:mod:`pllzoo.search_space`), each a normal bench.

Layout of a sweep folder ``OUT``::

    OUT/sweep.json         what defines the trials (space, draw seed, methods, dataset, seeds, fixed --hp,
                           data options) and every trial's overrides and run ids
    OUT/trials/<k>/        trial k as a bench output folder (runs/<run-id>/, results.csv), ``pllzoo report``-able
    OUT/sweep.csv          the trials table of the last selection (``pllzoo sweep`` writes it)

Trial k is exactly ``pllzoo bench ... --hp <fixed> --hp <trial k's draws> --out OUT/trials/<k>``: the same plans
(:func:`pllzoo.bench.plan`), run ids and run folders.  Every trial is planned, and every value of the space
checked against its field's declared choices and range, before any trains.  Re-running the same sweep
resumes it: finished runs are reused, unfinished ones resume from their checkpoints (``execute(resume=True)``);
more ``--trials`` add trials and keep the drawn ones.  A different sweep into the same ``OUT`` is refused.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import pandas as pd

from pllzoo import checkpoint
from pllzoo.bench import execute, plan
from pllzoo.costs import RunCost, run_costs
from pllzoo.costs import plan_lines as bench_plan_lines
from pllzoo.data.base import DataOptions
from pllzoo.errors import PLLZooError
from pllzoo.hparams import as_dict, override
from pllzoo.jobs import RunsFailed
from pllzoo import model_args
from pllzoo.models import model_who
from pllzoo.planning import RunPlan, _route
from pllzoo.runfolders import take_lock, waiting_lock
from pllzoo.registry import Registry
from pllzoo.results import load, write_json
from pllzoo.run import TrainConfig
from pllzoo.search_space import Dimension, draw_trials

MANIFEST = "sweep.json"


@dataclass
class Trial:
    """One draw of the space: its index, ``--hp`` overrides and the bench plans they give."""

    index: int
    overrides: dict[str, str]
    plans: list[RunPlan] = field(default_factory=list)

    @property
    def label(self) -> str:
        return " ".join(f"{k}={v}" for k, v in self.overrides.items())

    def label_of(self, p: RunPlan) -> str:
        """:attr:`label` as far as it reaches run ``p``: a key of another method's components, or one scoped to
        another method (``METHOD:key``), is left out; one scoped to ``p``'s method is its."""
        def reaches(key: str) -> bool:
            scope, colon, bare = key.rpartition(":")
            if colon and scope != p.method.name:
                return False
            return bare.startswith(("train.", "model.")) or bare in p.component_overrides

        return " ".join(f"{k}={v}" for k, v in self.overrides.items() if reaches(k)) or "defaults"


def trial_dir(out: Path, index: int) -> Path:
    return Path(out) / "trials" / f"{index:03d}"


def check_space(registry: Registry, methods: list[str], space: list[Dimension]) -> None:
    """Every value a dimension can take (its ends, or its choices) is a valid ``--hp`` value of its key.

    :raises PLLZooError: one line naming the spec and the field's rule (an unknown key: the valid keys).
    """
    recipes = [registry.method(m) for m in methods]
    for dim in space:
        for value in dim.support():
            try:
                train, per_method = _route({dim.key: value}, recipes, registry)
                for fields in train.values():
                    if fields:
                        override(TrainConfig(), fields, "train")
                for recipe in recipes:
                    if per_method[recipe.name]:
                        registry.build_components(recipe, per_method[recipe.name])
            except PLLZooError as exc:
                raise type(exc)(f"--space {dim}: {exc}") from None


def identity(methods: list[str], dataset: str, seeds: list[int], options: DataOptions, space: list[Dimension],
             seed: int, hp: dict[str, str], epochs: int | None, batch_size: int | None) -> dict[str, Any]:
    """What defines a sweep's trials (stored in ``sweep.json``; a rerun must match it)."""
    data = {k: v for k, v in as_dict(options).items() if k not in ("seed", "data_dir", "download")}
    return {"methods": list(methods), "dataset": dataset, "seeds": list(seeds), "data": data,
            "space": [str(d) for d in space], "draw_seed": seed, "hp": dict(hp), "epochs": epochs,
            "batch_size": batch_size}


def plan_sweep(registry: Registry, methods: list[str], dataset: str, seeds: list[int], options: DataOptions,
               space: list[Dimension], n_trials: int, seed: int, hp: dict[str, str] | None = None,
               epochs: int | None = None, batch_size: int | None = None, device: str = "auto") -> list[Trial]:
    """The ``n_trials`` trials of the space, each planned like a bench (nothing written).

    :raises PLLZooError: one line: no trials, an empty space, a key in both ``hp`` and the space, a value of
        the space outside its field's rule, or anything :func:`pllzoo.bench.plan` refuses.
    """
    hp = dict(hp or {})
    if n_trials < 1:
        raise PLLZooError(f"--trials must be at least 1, got {n_trials}")
    if not space:
        raise PLLZooError("no --space given; e.g. --space 'train.lr=loguniform(1e-3,1e-1)'")
    def split(key: str) -> tuple[str | None, str]:  # "proden:train.lr" → ("proden", "train.lr")
        scope, _, rest = key.rpartition(":")
        return (scope or None), rest

    def overlap(a: str, b: str) -> bool:  # the same field for some method: unscoped reaches every method
        (sa, ra), (sb, rb) = split(a), split(b)
        return ra == rb and (sa is None or sb is None or sa == sb)

    # a scoped --hp of a searched key won over every draw, silently (an outside review); two dimensions likewise
    both = [(d.key, k) for d in space for k in hp if overlap(d.key, k)]
    if both:
        raise PLLZooError(f"{both[0][0]} is both fixed by --hp {both[0][1]} and searched by --space; keep one")
    twice = [(a.key, b.key) for i, a in enumerate(space) for b in space[i + 1:] if overlap(a.key, b.key)]
    if twice:
        raise PLLZooError(f"--space searches {twice[0][1]} and {twice[0][0]}, one field for a method; keep one")
    for flag, value, key in (("--epochs", epochs, "train.epochs"), ("--batch-size", batch_size, "train.batch_size")):
        if value is not None and any(d.key == key for d in space):  # an outside review: "--hp ... disagree" said it
            raise PLLZooError(f"{key} is both fixed by {flag} {value} and searched by --space; keep one")
    check_space(registry, methods, space)
    trials = [Trial(k, o) for k, o in enumerate(draw_trials(space, n_trials, seed))]
    for t in trials:
        try:
            t.plans = plan(registry, methods, dataset, seeds, options, epochs=epochs, batch_size=batch_size,
                           hp={**hp, **t.overrides}, device=device)
        except PLLZooError as exc:
            raise type(exc)(f"trial {t.index} ({t.label}): {exc}") from None
    check_backbone_space(registry, trials, space)
    return trials


def check_backbone_space(registry: Registry, trials: list[Trial], space: list[Dimension]) -> None:
    """Every value a ``model.NAME`` dimension can take is an argument the backbone of each run it reaches takes
    (:mod:`pllzoo.model_args`): the backbone is known once the trials are planned, and a value no trial drew was
    not checked (a review: ``choice(16,abc)`` trained when no trial drew ``abc``).

    :raises PLLZooError: one line naming the spec."""
    for dim in space:
        scope, _, bare = dim.key.rpartition(":")
        if not bare.startswith("model."):
            continue
        for t in trials:
            for p in t.plans:
                if scope and scope != p.method.name:
                    continue
                factory, who = registry.model(p.train.model), model_who(registry, p.train.model)
                for value in dim.support():
                    try:
                        model_args.parse(f"{who} ({p.method.name})", factory,
                                         [model_args.as_entry(bare[len("model."):], value)])
                    except PLLZooError as exc:
                        raise type(exc)(f"--space {dim}: {exc}") from None


def check_claim(out: Path, ident: dict[str, Any]) -> dict[int, dict[str, Any]]:
    """The trials ``OUT/sweep.json`` lists (none: no manifest); refuse an ``OUT`` that holds another sweep, or a
    file that is no manifest (one line).  Writes nothing (``--dry-run``)."""
    path = Path(out) / MANIFEST
    if path.exists():
        try:
            before = json.loads(path.read_text())
        except (OSError, ValueError):
            before = None
        listed = before.get("trials", []) if isinstance(before, dict) else None
        if not isinstance(listed, list) or not all(isinstance(t, dict) and isinstance(t.get("trial"), int)
                                                    for t in listed):
            # a damaged manifest of this same sweep need not cost its trials (an outside review): say how to go on
            again = (f"; if --out holds this same sweep, move {MANIFEST} away and rerun: the sweep writes it again "
                     "and reuses the finished runs of its trials" if (Path(out) / "trials").is_dir() else "")
            raise PLLZooError(f"{path} is not a sweep manifest (damaged, or another program's); pick another "
                              f"--out{again}") from None
        old = {k: before.get(k) for k in ident}

        def same(k: str) -> bool:  # the space in any order: each dimension draws by its own key (an outside review)
            if k == "space" and isinstance(old[k], list) and isinstance(ident[k], list):
                return sorted(map(str, old[k])) == sorted(map(str, ident[k]))
            return old[k] == ident[k]

        if not all(same(k) for k in ident):
            diff = next(k for k in ident if not same(k))
            raise PLLZooError(f"--out {out} holds another sweep ({diff}: {old[diff]} there, {ident[diff]} now); "
                              f"pick another --out or repeat that sweep's arguments")
        return {t["trial"]: t for t in listed}
    return {}


def claim(out: Path, ident: dict[str, Any], trials: list[Trial]) -> None:
    """Write ``OUT/sweep.json``; refuse an ``OUT`` that holds another sweep (one line, :func:`check_claim`).
    Under ``OUT/sweep.json.lock``: two sweeps started together into one ``OUT`` both passed the check before
    either wrote (an outside review), and two copies of one sweep with other ``--trials`` dropped each other's
    trials from the file."""
    Path(out).mkdir(parents=True, exist_ok=True)
    with waiting_lock(Path(out) / f"{MANIFEST}.lock", 60.0, "claiming this folder for a sweep"):
        kept = check_claim(out, ident)
        for t in trials:
            kept[t.index] = {"trial": t.index, "overrides": t.overrides, "runs": [p.run_id for p in t.plans]}
        write_json(Path(out) / MANIFEST, {**ident, "trials": [kept[k] for k in sorted(kept)]})


def run_sweep(registry: Registry, trials: list[Trial], out: Path, jobs: int = 1,
              on_run: Callable[[Trial, RunPlan, str], None] | None = None,
              on_epoch: Callable[[Trial, RunPlan, dict[str, Any]], None] | None = None,
              threads: int | None = None) -> dict[int, str]:
    """Train every trial into ``OUT/trials/<k>/``, reusing finished runs; return failed trials → the reason of
    the first failed run (one line).  ``on_run``/``on_epoch``/``threads``: as :func:`pllzoo.bench.execute`'s,
    with the trial first.

    A failed run does not stop the sweep (its trial is left out of the selection), nor does a run another
    sweep or bench holds (two copies of one sweep on one ``--out`` share its trials; the held runs are named
    at the end, :class:`pllzoo.checkpoint.Skipped`); a clean stop (:class:`pllzoo.checkpoint.Stopped`, a
    signal) propagates.
    """
    failed, held = {}, []
    failed_runs: dict[str, str] = {}  # run id → why it failed in an earlier trial of this sweep: not trained again
    for i, t in enumerate(trials):
        adopt_finished(out, t)
        report = (lambda p, status, t=t: on_run(t, p, status)) if on_run else None
        epoch = (lambda p, rec, t=t: on_epoch(t, p, rec)) if on_epoch else None
        again = [p for p in t.plans if p.run_id in failed_runs]
        if again:  # a review: a shared run that failed trained (and failed) again in every trial
            failed[t.index] = f"{again[0].method.name} seed {again[0].seed}: {failed_runs[again[0].run_id]}"
        todo = [p for p in t.plans if p.run_id not in failed_runs]
        try:
            if todo:
                execute(registry, todo, trial_dir(out, t.index), resume=True, on_run=report, on_epoch=epoch,
                        jobs=jobs, threads=threads)
        except RunsFailed as exc:  # the reason of its first failed run (pllzoo.jobs.record_failure)
            plan_, why = exc.failed[0]
            failed.setdefault(t.index, f"{plan_.method.name} seed {plan_.seed}: {why}")
            failed_runs.update({q.run_id: w for q, w in exc.failed})
        except checkpoint.Skipped:  # its held runs stay for the one training them; the next trial goes on
            held.append(str(t.index))
        if todo and checkpoint.stop_requested() is not None and i + 1 < len(trials):  # a signal in its last epoch:
            # the next execute() would forget it, and the sweep trained on (an outside review)
            raise checkpoint.signal_stop(f"before trial {trials[i + 1].index}")
    if held:
        raise checkpoint.Skipped(f"trial(s) {', '.join(held)} left runs in use by another sweep or bench (they train "
                                 f"once it is done)", checkpoint.TIME_LIMIT_EXIT)
    return failed


def finished_elsewhere(out: Path, t: Trial, run_id: str) -> Path | None:
    """The folder of run ``run_id`` finished in another trial of the sweep under ``out``, or None."""
    for done in sorted((Path(out) / "trials").glob(f"*/runs/{run_id}/done")):
        if done.parent.parent.parent != trial_dir(out, t.index):
            return done.parent
    return None


def adopt_finished(out: Path, t: Trial) -> list[str]:
    """Copy into trial ``t``'s folder each of its runs another trial finished already, so that it trains once: the
    same run id is the same run (a method no key of the trial reaches, or a draw repeating an earlier one; an
    outside review: such runs trained again in every trial).  A run this trial's folder holds, or another bench
    holds the lock of, is left alone.  Returns the run ids copied."""
    runs, copied = trial_dir(out, t.index) / "runs", []
    for p in t.plans:
        source = finished_elsewhere(out, t, p.run_id)
        if source is None or (runs / p.run_id).exists():
            continue
        runs.mkdir(parents=True, exist_ok=True)
        lock = runs / f"{p.run_id}.lock"
        if take_lock(lock) is not None:  # another copy of the sweep adopts or trains it: its bench skips it too
            continue
        tmp = runs / f".{p.run_id}.adopting-{os.getpid()}"  # each process its own (a review: two copies' collided)
        try:
            if not (runs / p.run_id).exists():  # adopted by another copy between the check and the lock
                # links as links (a folder handed over: archive then refuses them, an outside review found the
                # copy had made a linked env.json a file of the trial, secret and all)
                shutil.copytree(source, tmp, symlinks=True, copy_function=_link_checkpoint)
                os.replace(tmp, runs / p.run_id)  # whole or not at all
                copied.append(p.run_id)
        except (shutil.Error, OSError) as exc:  # copytree gathers its failures in a list: say the first
            first = exc.args[0][0] if isinstance(exc, shutil.Error) and exc.args and exc.args[0] else None
            why = first[2] if first else (exc.strerror or str(exc))
            raise PLLZooError(f"cannot copy finished run {p.run_id} from {source.parent.parent} into trial "
                              f"{t.index}: {why}; free the space or path, then rerun") from None
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
            lock.unlink(missing_ok=True)
    return copied


def _link_checkpoint(src: str, dst: str) -> None:
    """copytree's copy: a hard link for the checkpoint, only ever replaced whole (``os.replace``), so no copy sees
    another's change (an outside review: a 6-trial sweep held 12 checkpoints of 3 runs); a copy for the rest,
    which may be appended to, and where the file system has no links."""
    if Path(src).name == checkpoint.NAME:
        with contextlib.suppress(OSError):
            os.link(src, dst)
            return
    shutil.copy2(src, dst)


def trial_costs(registry: Registry, trials: list[Trial], out: Path) -> list[list[RunCost]]:
    """Each trial's :class:`~pllzoo.costs.RunCost` list, read in its own folder as its bench would (finished runs
    reused, unfinished ones resumed: ``execute(resume=True)``); a run another trial finished, or an earlier trial
    of ``trials`` plans too, counts as reused (:func:`adopt_finished` copies it before the trial trains)."""
    costs, planned = [], set()
    for t in trials:
        mine = run_costs(registry, t.plans, trial_dir(out, t.index), resume=True)
        costs.append([dataclasses.replace(c, reused=True) if not c.reused and not c.done and (
            c.run_id in planned or finished_elsewhere(out, t, c.run_id) is not None) else c for c in mine])
        planned.update(c.run_id for c in mine)
    return costs


def plan_lines(trials: list[Trial], costs: list[list[RunCost]], jobs: int = 1) -> list[str]:
    """The sweep's plan: one line for the whole, then one per trial and method (the bench plan's method line,
    after the trial and its overrides: the space may change epochs, stages or steps)."""
    flat = [c for cs in costs for c in cs]
    if not flat:
        return []
    methods = list(dict.fromkeys(c.method for c in flat))
    seeds = list(dict.fromkeys(c.seed for c in flat))
    reused = sum(c.reused for c in flat)
    resumed = sum(bool(c.done) for c in flat)
    lines = [f"plan: {len(trials)} trial(s) x {len(methods)} method(s) x {len(seeds)} seed(s) = {len(flat)} run(s) "
             f"on {flat[0].device}" + (f", {jobs} at once" if jobs > 1 else "")
             + (f"; {reused} reused (finished under --out, or the same run as another trial's: trained once)"
                if reused else "")
             + (f"; {resumed} resumed" if resumed else "")]
    for t, cs in zip(trials, costs):
        for method in dict.fromkeys(c.method for c in cs):  # each method under what of the trial reaches it
            line = bench_plan_lines([c for c in cs if c.method == method], jobs)[1]
            label = next(t.label_of(p) for p in t.plans if p.method.name == method)
            lines.append(f"  trial {t.index} ({label}): {line.strip()}")
    return lines


def trial_records(out: Path, trials: list[Trial]) -> pd.DataFrame:
    """The per-epoch records of the finished runs of ``trials`` (those runs only), with ``trial`` and
    ``overrides`` columns."""
    frames = []
    for t in trials:
        wanted = {p.run_id for p in t.plans}
        records = load(trial_dir(out, t.index))  # a damaged run: one warning, left out
        records = records[records["run"].isin(wanted)]
        if len(records):
            labels = {p.run_id: t.label_of(p) for p in t.plans}
            frames.append(records.assign(trial=t.index, overrides=records["run"].map(labels)))
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
