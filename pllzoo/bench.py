"""Head-to-head runs: plan (validate everything, write nothing), then execute.

:func:`plan` resolves method strings, the dataset, hyper-parameter overrides and
the data of every seed, and checks recipe compatibility, so bad input fails
before any file is written.  :func:`execute` trains each method × seed into
``OUT/runs/<run-id>/`` and writes ``OUT/results.csv``.

Bookkeeping never enters a run id: the checkpoint cadence
(:data:`pllzoo.run.BOOKKEEPING_FIELDS`, recorded in env.json), the torch threads
(:mod:`pllzoo.threads`) and the time limit.  ``execute(time_limit=M)`` gives the
whole bench M minutes: a run that would miss them stops at an epoch boundary with
a checkpoint, later runs are left unstarted, ``results.csv`` lists the finished
runs only, and :class:`~pllzoo.checkpoint.Stopped` (exit status 75 in the CLI)
says so; ``resume=True`` continues, on this or another machine.

A run that fails (an exception in a component, a non-finite loss, a bad output)
does not stop the bench: its traceback goes to ``runs/<run-id>/error.txt``, the
other runs finish, ``results.csv`` lists it with ``status`` "failed" and the
one-line ``error``, and :class:`~pllzoo.jobs.RunsFailed` names every failed run
at the end; ``resume=True`` reruns only those.  ``--jobs N`` does the same.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import re
import shutil
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import pandas as pd

from pllzoo import checkpoint, prefetch
from pllzoo.components import Method, views_of
from pllzoo.data.base import DataOptions, PLLData
from pllzoo.augment import make_view
from pllzoo.data.holdout import hold_out, subsample
from pllzoo.data.validate import check_training_set
from pllzoo.errors import PLLZooError, UnknownNameError
from pllzoo.hparams import as_dict, check, override
from pllzoo.jobs import RunsFailed, failure_line, record_failure
from pllzoo.registry import Registry
from pllzoo.results import (RESULT_COLUMNS, DamagedRun, env_info, final_rows, load, order_methods, plugins_env,
                            read_log, run_id, write_json, write_jsonl)
from pllzoo.run import BOOKKEEPING_FIELDS, HASHED_UNLESS_DEFAULT, TrainConfig
from pllzoo.threads import default_threads, set_threads
from pllzoo.devices import resolve_device
from pllzoo.trainer import Trainer


@dataclass
class RunPlan:
    method: Method
    seed: int
    data: PLLData
    train: TrainConfig
    component_overrides: dict[str, str]
    config: dict[str, Any] = field(default_factory=dict)
    view_workers: int = 0  # processes computing the strong view ahead (pllzoo.prefetch); 0: in the loop
    check: bool = False  # check the components' outputs at every step (pllzoo.checks); never in the run id
    plugins: dict[str, Any] = field(default_factory=dict)  # env.json: plugins, and who supplied each component

    @property
    def run_id(self) -> str:
        return run_id(self.config)


# A dotted key (``train.lr``, ``slot.field``) and its ``=``, at the start or right after a ``METHOD:`` scope.
# Registered names hold no ``=`` (components.check_name), so in a mixed scope (``proden+selection=solar.classwise``)
# every ``=`` follows a slot name after a ``+``: the first match is the key, whatever ``:`` or ``=`` the value holds.
_KEY = re.compile(r"(?:^|:)\s*([A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+)\s*=")


def parse_overrides(pairs: tuple[str, ...] | list[str]) -> dict[str, str]:
    """``["a.b=1", "proden+selection=solar.classwise:selection.rho_end=0.5", ...]`` →
    ``{"a.b": "1", "proden+selection=solar.classwise:selection.rho_end": "0.5"}``.

    A pair is ``[METHOD:]key=value``: the key is the first dotted name followed by ``=`` at the
    start or after a ``:`` (so a mixed method string may scope it, and the value may hold ``=`` or
    ``:``); a pair with no dotted key splits at its first ``=`` (the key is then reported unknown by
    :func:`_route`).  A missing ``=`` or an empty key is an error.
    """
    out = {}
    for pair in pairs:
        found = _KEY.search(pair)
        if found:
            scope = re.sub(r"\s*([+=])\s*", r"\1", pair[:found.start()].strip())  # as Registry.method names it
            key, value = f"{scope}:{found.group(1)}" if scope else found.group(1), pair[found.end():]
        else:
            key, _, value = pair.partition("=")
        if "=" not in pair or not key.strip():
            raise PLLZooError(f"bad --hp {pair!r}; write key=value, e.g. train.lr=0.05, loss.eta=0.5 or "
                              f"proden:loss.eta=0.5")
        out[key.strip()] = value.strip()
    return out


def _scope(key: str, methods: list[Method]) -> tuple[str | None, str]:
    """Split ``METHOD:rest`` at the longest prefix that is a planned method's name (None: no scope).

    :raises UnknownNameError: a ``:`` scope that names no planned method (one line, listing them).
    """
    names = sorted((m.name for m in methods if key.startswith(m.name + ":")), key=len, reverse=True)
    if names:
        return names[0], key[len(names[0]) + 1:]
    if ":" not in key:
        return None, key
    scope = key.rpartition(":")[0]
    raise UnknownNameError(f"--hp {key}: method {scope!r} is not in --methods; "
                           f"scope one of: {', '.join(m.name for m in methods)}")


def _route(overrides: dict[str, str], methods: list[Method], registry: Registry) -> tuple[dict, dict]:
    """Split overrides into trainer ones and per-method component ones; unknown keys are errors."""
    train, per_method = {}, {m.name: {} for m in methods}
    for key, value in overrides.items():
        scope, rest = _scope(key, methods)
        if rest.startswith("train."):
            train[rest[len("train."):]] = value
            continue
        targets = [m for m in methods if scope is None or m.name == scope]
        takers = [m for m in targets if rest in registry.hparam_keys(m)]
        if not takers:
            valid = sorted(set().union(*(registry.hparam_keys(m) for m in targets)))
            fields = [f"train.{f.name}" for f in dataclasses.fields(TrainConfig)]
            raise UnknownNameError(f"unknown hyper-parameter {key!r}; valid: {', '.join(valid + fields)}")
        for m in takers:
            per_method[m.name][rest] = value
    return train, per_method


def train_config(data: PLLData, epochs: int | None, batch_size: int | None, overrides: dict[str, str]) -> TrainConfig:
    d = data.defaults
    cfg = TrainConfig(
        model=d.model, epochs=d.epochs, lr=d.lr, weight_decay=d.weight_decay, momentum=d.momentum,
        batch_size=d.batch_size, schedule=d.schedule, milestones=tuple(d.milestones),
    )
    flags = {k: v for k, v in {"epochs": epochs, "batch_size": batch_size}.items() if v is not None}
    return check(override(cfg, {**flags, **overrides}, where="train"), "train")  # the dataset's defaults too


# On a GPU the PIL views (one sample at a time, on the host) are replaced by their batched tensor twins
# (pllzoo.augment_batched), unless the run names a view explicitly with --hp train.weak_view/strong_view.
DEVICE_VIEWS = {"strong": "strong-batched", "simaugment": "simaugment-batched"}


def device_views(cfg: TrainConfig, device: str, explicit: dict[str, str]) -> TrainConfig:
    """``cfg`` with each PIL view not set in ``explicit`` swapped for its batched twin when ``device`` is not the CPU."""
    if device == "cpu":
        return cfg
    swap = {f: DEVICE_VIEWS[getattr(cfg, f)] for f in ("weak_view", "strong_view")
            if f not in explicit and getattr(cfg, f) in DEVICE_VIEWS}
    return dataclasses.replace(cfg, **swap)


def hashed_train(cfg: TrainConfig) -> dict[str, Any]:
    """The trainer settings that name a run: all but the bookkeeping ones, and the later additions at their defaults."""
    defaults = {f.name: f.default for f in dataclasses.fields(TrainConfig)}
    return {k: v for k, v in as_dict(cfg).items()
            if k not in BOOKKEEPING_FIELDS and not (k in HASHED_UNLESS_DEFAULT and v == defaults[k])}


def carve(data: PLLData, options: DataOptions, seed: int) -> PLLData:
    """Apply the loader-independent options: ``subset`` (smoke runs), then ``holdout``."""
    if options.subset is not None:
        data = subsample(data, options.subset, seed)
    if options.holdout:
        data = hold_out(data, options.holdout, seed)
    return data


SEED_LIMIT = 2**32  # numpy's RandomState (the data splits and candidates) takes seeds below it


def check_seeds(seeds: list[int]) -> list[int]:
    """``seeds`` once each, in order (a repeat is dropped with a one-line warning).

    :raises PLLZooError: a seed outside ``0 .. 2**32 - 1`` (one line).
    """
    bad = [s for s in seeds if not 0 <= s < SEED_LIMIT]
    if bad:
        raise PLLZooError(f"--seeds {bad[0]} is out of range; seeds are integers from 0 to {SEED_LIMIT - 1}")
    return _once(seeds, lambda s: s, "--seeds", "seed")


def _once(items: list, key: Callable[[Any], Any], flag: str, what: str) -> list:
    """``items`` without repeats (by ``key``), first occurrence kept; one warning names the repeats.

    A repeat would train the same run id twice into the same folder, so it runs once.
    """
    kept, seen, repeated = [], set(), []
    for i in items:
        if key(i) not in seen:
            kept.append(i)
        elif key(i) not in repeated:
            repeated.append(key(i))
        seen.add(key(i))
    if repeated:
        warnings.warn(f"{flag} lists {what} {', '.join(map(str, repeated))} more than once; each runs once",
                      stacklevel=3)
    return kept


def plan(
    registry: Registry, methods: list[str], dataset: str, seeds: list[int], options: DataOptions,
    epochs: int | None = None, batch_size: int | None = None, hp: dict[str, str] | None = None,
    device: str = "auto", view_workers: int | None = None, check: bool = False,
) -> list[RunPlan]:
    if not methods:
        raise PLLZooError("no method given; try --methods proden")
    if not seeds:
        raise PLLZooError("no seed given; try --seeds 1,2,3")
    seeds = check_seeds(seeds)
    recipes = _once([registry.method(m) for m in methods], lambda r: r.name, "--methods", "method")
    spec = registry.dataset(dataset)
    train_hp, per_method = _route(hp or {}, recipes, registry)
    for recipe in recipes:  # instantiate once now: bad values and incompatible mixes fail here
        registry.build_components(recipe, per_method[recipe.name])
    resolved_device = str(resolve_device(device))
    workers = prefetch.resolve_workers(view_workers, resolved_device)
    plans = []
    plugins = {recipe.name: plugins_env(registry, recipe) for recipe in recipes}
    for seed in seeds:
        data = carve(spec.load(dataclasses.replace(options, seed=seed)), options, seed)
        cfg = device_views(train_config(data, epochs, batch_size, train_hp), resolved_device, train_hp)
        for f in ("weak_view", "strong_view"):  # on tabular data too, where the trainer never builds them
            make_view(getattr(cfg, f), f"train.{f}")
        check_training_set(data)  # after the checks of the flags: a warning here would precede their error
        for recipe in recipes:
            comps = registry.build_components(recipe, per_method[recipe.name], (data.name, data.kind))
            config = {
                "method": recipe.name, "dataset": data.name, "seed": seed, "device": resolved_device,
                "recipe": {s: c.name for s, c in comps.items()},
                "hparams": {s: as_dict(c.hp) for s, c in comps.items()},
                "train": hashed_train(cfg),  # see module doc
                "data": {**as_dict(options), "seed": seed, **data.info, "train_counts": data.train_counts.tolist()},
            }
            pooled = workers if prefetch.uses_pool(data.kind, views_of(comps), cfg.strong_view) else 0
            if pooled:  # another random stream (pllzoo.prefetch); absent otherwise, so older run ids stand
                config["view_stream"] = "pooled"
            if resolved_device != "cpu":  # views and permutations drawn on the device (Trainer.generators)
                config["rng"] = "device"
            plans.append(RunPlan(recipe, seed, data, cfg, per_method[recipe.name], config, pooled, check,
                                 plugins[recipe.name]))
    return plans


def execute(
    registry: Registry, plans: list[RunPlan], out: Path, resume: bool = False,
    on_epoch: Callable[[RunPlan, dict[str, Any]], None] | None = None,
    on_run: Callable[[RunPlan, str], None] | None = None,
    jobs: int = 1, threads: int | None = None, time_limit: float | None = None, overwrite: bool = False,
) -> pd.DataFrame:
    """Train every planned run (skipping finished ones when ``resume``); return the rows of ``results.csv``.

    ``jobs`` > 1 trains up to that many runs at once in worker processes (:mod:`pllzoo.jobs`, with
    ``threads`` torch threads each); the records, run folders and rows are those of ``jobs=1``.
    ``threads``: torch threads (None: :func:`pllzoo.threads.default_threads`).  ``time_limit``: minutes
    for the whole bench; on a clean stop (time limit, SIGINT/SIGTERM) ``results.csv`` lists the finished
    (and failed) runs only and :class:`~pllzoo.checkpoint.Stopped` is raised.

    Finished runs are never lost: without ``resume`` a finished run is reused with a one-line warning,
    or with ``overwrite`` retrained into ``runs/.<run-id>.tmp-<pid>`` and swapped in only when it finished
    (a failure or a stop keeps the old run); an unfinished run folder is retrained the same way.  Each run
    folder is locked (``runs/<run-id>.lock``) while this bench works on it: a run locked by another live
    bench is skipped with one warning.  ``results.csv`` is rebuilt, under ``OUT/results.lock``, from every
    finished run under ``OUT`` (:func:`pllzoo.results.load`), plus this bench's failed runs.

    :raises RunsFailed: after every other run finished and ``results.csv`` is written, when some runs
        failed (see the module doc); it carries the rows.
    """
    if time_limit is not None and time_limit <= 0:
        raise PLLZooError(f"--time-limit must be > 0 minutes, got {time_limit:g}")
    if overwrite and resume:
        raise PLLZooError("--overwrite and --resume exclude each other; --overwrite retrains finished runs, "
                          "--resume keeps them")
    deadline = checkpoint.clock() + 60 * time_limit if time_limit is not None else None
    threads = threads or default_threads(jobs)
    runs_dir = Path(out) / "runs"
    runs_dir.mkdir(parents=True, exist_ok=True)
    finals: list[dict[str, Any] | None] = []
    failed: dict[int, str] = {}  # index → one-line reason (pllzoo.jobs.record_failure)
    attempted = 0  # runs trained this time, not reused
    todo = []  # indices of the runs left to the --jobs workers
    dirs: dict[int, Path] = {}  # index → the folder it trains into (a temporary one, swapped in, see _settle)
    swaps: dict[int, tuple[Path, Path, bool]] = {}  # index → (temporary folder, run folder, old one finished)
    locks: list[Path] = []
    signals = checkpoint.stop_signals() if jobs == 1 else contextlib.nullcontext()  # --jobs: see pllzoo.jobs
    try:
        with signals:
            for p in plans:
                run_dir = runs_dir / p.run_id
                lock = runs_dir / f"{p.run_id}.lock"
                holder = _take_lock(lock)
                if holder is not None:
                    warnings.warn(f"{_name(p)}: run {p.run_id} is in use by another bench (pid {holder}, {lock}); "
                                  f"skipped")
                    finals.append(None)
                    continue
                locks.append(lock)
                target = run_dir
                if run_dir.exists() and not resume:
                    records = _finished_records(run_dir)
                    if records is not None and not overwrite:
                        warnings.warn(f"reusing finished run {p.run_id}; --overwrite retrains it")
                        if on_run:
                            on_run(p, "reused")
                        finals.append(records[-1])
                        continue
                    target = runs_dir / f".{p.run_id}.tmp-{os.getpid()}"
                    shutil.rmtree(target, ignore_errors=True)
                    swaps[len(finals)] = (target, run_dir, records is not None)
                records = _reusable(run_dir) if resume and run_dir.exists() else None
                if records is not None:
                    if on_run:
                        on_run(p, "reused")
                    finals.append(records[-1])
                    continue
                attempted += 1
                if jobs > 1:
                    todo.append(len(finals))
                    dirs[len(finals)] = target
                    finals.append(None)  # filled in below, from the worker
                    continue
                i = len(finals)
                try:
                    _stop_before(p, deadline)
                    finals.append(_train(registry, p, target, resume, on_epoch, on_run, deadline, threads)[-1])
                    _settle(swaps, i, ok=True)
                except checkpoint.Stopped as exc:
                    _settle(swaps, i, ok=False)
                    _write_rows(out, plans, finals, failed)
                    raise checkpoint.Stopped(f"{_name(p)}: {exc}; {_finished(finals, failed, len(plans))}",
                                             exc.exit_code) from None
                except Exception as exc:  # the others go on; the same record as a --jobs worker's (pllzoo.jobs)
                    failed[i] = record_failure(target, exc)
                    finals.append(None)
                    if _settle(swaps, i, ok=False):
                        failed[i] += "; the earlier finished run is kept"
                    if on_run:
                        on_run(p, f"failed: {failed[i]}")
        if todo:
            from pllzoo.jobs import RunsStopped, run_parallel

            try:
                done, worker_failed = run_parallel(registry, plans, runs_dir, resume, todo, jobs, on_epoch, on_run,
                                                   threads, deadline, dirs)
            except RunsStopped as exc:
                for i, record in exc.finals.items():
                    finals[i] = record
                failed.update(exc.failed)
                _settle_all(swaps, finals, failed)
                _write_rows(out, plans, finals, failed)
                raise checkpoint.Stopped(f"{exc}; {_finished(finals, failed, len(plans))}", exc.exit_code) from None
            for i, record in done.items():
                finals[i] = record
            failed.update(worker_failed)
            _settle_all(swaps, finals, failed)
    finally:
        for i in list(swaps):  # an interruption: the temporary folders go, the old run folders stay
            _settle(swaps, i, ok=False, discard=True)
        for lock in locks:
            lock.unlink(missing_ok=True)
    rows = _write_rows(out, plans, finals, failed)
    if failed:
        named = [(_name(plans[i]), why) for i, why in sorted(failed.items())]
        raise RunsFailed(failure_line(named, attempted, runs_dir), rows,
                         [(plans[i], why) for i, why in sorted(failed.items())])
    return rows


def _settle_all(swaps: dict[int, tuple[Path, Path, bool]], finals: list, failed: dict[int, str]) -> None:
    """Swap in the temporary folders of the --jobs runs that finished; settle the others (:func:`_settle`)."""
    for i in list(swaps):
        if _settle(swaps, i, ok=finals[i] is not None) and i in failed:
            failed[i] += "; the earlier finished run is kept"


def _settle(swaps: dict[int, tuple[Path, Path, bool]], i: int, ok: bool, discard: bool = False) -> bool:
    """Put run ``i``'s temporary folder in place of its run folder when it finished (``ok``) or the old folder
    held no finished run (a failed or stopped retraining of an unfinished run replaces it, for its error.txt or
    ``--resume``); otherwise, or with ``discard`` (an interruption), remove the temporary folder.  True when
    an old finished run was kept."""
    if i not in swaps:
        return False
    tmp, run_dir, old_finished = swaps.pop(i)
    if not tmp.exists():
        return old_finished
    if discard or (old_finished and not ok):
        shutil.rmtree(tmp, ignore_errors=True)
        return old_finished
    aside = tmp.with_name(tmp.name.replace(".tmp-", ".old-", 1))
    shutil.rmtree(aside, ignore_errors=True)
    if run_dir.exists():
        os.replace(run_dir, aside)  # two renames: the run folder is missing for an instant, never half-written
    os.replace(tmp, run_dir)
    shutil.rmtree(aside, ignore_errors=True)
    return False


def _finished_records(run_dir: Path) -> list[dict[str, Any]] | None:
    """The records of the finished, undamaged run in ``run_dir`` (as ``report`` reads it), else None; changes nothing."""
    if not (run_dir / "done").exists():
        return None
    try:
        records = read_log(run_dir)
        if (run_dir / checkpoint.NAME).exists():
            checkpoint.quick_check(run_dir / checkpoint.NAME)
    except (DamagedRun, checkpoint.CheckpointError):
        return None
    return records


STALE_LOCK_S = 30.0  # a lock file without a PID (its writer died between creating and writing it) after this


def _take_lock(lock: Path) -> int | str | None:
    """Create ``lock`` holding this PID (``O_CREAT | O_EXCL``); None when taken, else the holder's PID.

    A lock whose PID is not a live process is stale and taken over."""
    for _ in range(3):
        try:
            fd = os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            holder = _lock_holder(lock)
            if holder is not None:
                return holder
            lock.unlink(missing_ok=True)  # stale
            continue
        with os.fdopen(fd, "w") as f:
            f.write(f"{os.getpid()}\n")
        return None
    return "unknown"


def _lock_holder(lock: Path) -> int | str | None:
    """The live PID named in ``lock``; None when the lock is stale."""
    import time

    try:
        text, age = lock.read_text().strip(), time.time() - lock.stat().st_mtime
    except FileNotFoundError:
        return None
    except OSError:
        return "unknown"
    if not text.isdigit():
        return None if age > STALE_LOCK_S else "unknown"
    pid = int(text)
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return None
    except OSError:  # alive, another user's
        pass
    return pid


@contextlib.contextmanager
def results_lock(out: Path, wait_s: float = 120.0):
    """Hold ``OUT/results.lock`` (waiting up to ``wait_s`` for another bench) while the tables are rebuilt.

    :raises PLLZooError: one line, when another live bench holds it that long."""
    import time

    lock, start = Path(out) / "results.lock", time.monotonic()
    while (holder := _take_lock(lock)) is not None:
        if time.monotonic() - start > wait_s:
            raise PLLZooError(f"{lock} is held by another bench (pid {holder}) for over {wait_s:g} s; "
                              f"rerun when it is done (or remove the file if no bench runs)")
        time.sleep(0.05)
    try:
        yield
    finally:
        lock.unlink(missing_ok=True)


def _reusable(run_dir: Path) -> list[dict[str, Any]] | None:
    """With ``resume``: the records of a finished, undamaged run; otherwise None, and the run resumes from its
    checkpoint or retrains.

    Damage is one warning line naming the run and what is wrong: a finished run's log that is not whole
    (:func:`pllzoo.results.read_log`; the run resumes from its checkpoint, which holds every record, or
    retrains), or a checkpoint that cannot be used (:func:`pllzoo.checkpoint.read_checkpoint`; a finished
    run's only gets :func:`~pllzoo.checkpoint.quick_check`): it is kept as ``checkpoint.pt.damaged`` and the
    run retrains from the start.
    """
    path, done = run_dir / checkpoint.NAME, (run_dir / "done").exists()
    log_problem = ckpt_problem = None
    if done:
        try:
            records = read_log(run_dir)
        except DamagedRun as exc:
            log_problem = str(exc)
    if path.exists():
        try:
            (checkpoint.quick_check if done and log_problem is None else checkpoint.read_checkpoint)(path)
        except checkpoint.CheckpointError as exc:
            ckpt_problem = str(exc)
    if done and log_problem is None and ckpt_problem is None:
        return records
    if ckpt_problem is not None:
        path.replace(run_dir / f"{checkpoint.NAME}.damaged")
    (run_dir / "done").unlink(missing_ok=True)
    if log_problem is not None:
        then = ("resuming it from its checkpoint" if path.exists() else
                "its checkpoint is unusable too: retraining it" if ckpt_problem else "no checkpoint: retraining it")
        warnings.warn(f"{log_problem}; {then}")
    elif ckpt_problem is not None:
        warnings.warn(f"{ckpt_problem}; retraining the run from the start (the file is kept as "
                      f"{checkpoint.NAME}.damaged)")
    return None


def _name(p: RunPlan) -> str:
    return f"{p.method.name} seed {p.seed}"


def _finished(finals: list[dict[str, Any] | None], failed: dict[int, str], total: int) -> str:
    n_done = sum(f is not None for f in finals)
    return f"{n_done} of {total} runs finished" + (f", {len(failed)} failed" if failed else "")


def _stop_before(p: RunPlan, deadline: float | None) -> None:
    """A pending stop signal or a passed deadline leaves run ``p`` unstarted."""
    if checkpoint.stop_requested() is not None:
        raise checkpoint.signal_stop("before it started")
    if deadline is not None and checkpoint.clock() >= deadline:
        raise checkpoint.time_stop("before it started")


def _write_rows(out: Path, plans: list[RunPlan], finals: list[dict[str, Any] | None],
                failed: dict[int, str] | None = None) -> pd.DataFrame:
    """``OUT/results.csv``, rebuilt under :func:`results_lock`: the final rows of every finished run under
    ``OUT`` (:func:`pllzoo.results.load`, as ``pllzoo report`` reads them, so earlier benches' runs stay) and
    of this bench's failed ones (``failed[i]``: ``plans[i]``'s one-line reason) whose folder holds no
    finished run; this bench's methods first, in plan order.  The last two columns, ``status``
    ("ok" | "failed") and ``error``, say which.  ``finals`` is not read: the folders are the record."""
    with results_lock(out):
        records = load(out, damaged=[])  # the damaged ones: bench and report warn about them
        order = list(dict.fromkeys([p.method.name for p in plans] + list(records["method"])))
        if len(records):
            rows = order_methods(final_rows(records.drop(columns=["setting", "train_counts"])), order)
            extra = [c for c in rows.columns if c not in RESULT_COLUMNS and c != "class_acc"]
            rows = rows[list(RESULT_COLUMNS) + extra].reset_index(drop=True)
        else:
            rows = pd.DataFrame(columns=list(RESULT_COLUMNS))
        rows = rows.assign(status="ok", error="")
        failed = {i: why for i, why in (failed or {}).items() if plans[i].run_id not in set(rows.get("run", ()))}
        if failed:
            bad = pd.DataFrame([{"method": plans[i].method.name, "dataset": plans[i].data.name,
                                 "seed": plans[i].seed, "run": plans[i].run_id, "status": "failed", "error": why}
                                for i, why in failed.items()])
            ints = [c for c in rows.columns if pd.api.types.is_integer_dtype(rows[c])]  # stay integers beside NaN
            rows = pd.concat([rows.astype({c: "Int64" for c in ints}), bad], ignore_index=True)[list(rows.columns)]
            rows = order_methods(rows, order).reset_index(drop=True)
        tmp = Path(out) / "results.csv.tmp"
        rows.to_csv(tmp, index=False)
        tmp.replace(Path(out) / "results.csv")
    return rows


def _train(registry, p: RunPlan, run_dir: Path, resume: bool, on_epoch, on_run, deadline: float | None = None,
           threads: int | None = None) -> list[dict[str, Any]]:
    """Train one run into ``run_dir``.  ``deadline``: a :data:`pllzoo.checkpoint.clock` time to stop by;
    ``threads``: torch threads for it (None: leave them).  Plain arguments, so a job process passes them too."""
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "error.txt").unlink(missing_ok=True)  # a failed run's (pllzoo.jobs.record_failure), rerun
    device = p.config["device"]
    if threads is not None:
        set_threads(threads)
    _warn_on_other_threads(run_dir, resume, device)
    write_json(run_dir / "config.json", p.config)
    bookkeeping = {f: getattr(p.train, f) for f in sorted(BOOKKEEPING_FIELDS)}
    plugins = p.plugins or plugins_env(registry, p.method)  # from plan(): a --jobs worker's registry lacks the infos
    write_json(run_dir / "env.json", {**env_info(device), **plugins, "view_workers": p.view_workers,
                                      "bookkeeping": bookkeeping})
    comps = registry.build_components(p.method, p.component_overrides, (p.data.name, p.data.kind))
    base = {"method": p.method.name, "dataset": p.data.name}
    log = run_dir / "log.jsonl"

    def epoch_done(records: list[dict[str, Any]]) -> None:
        write_jsonl(log, records)
        if on_epoch:
            on_epoch(p, records[-1])

    import torch

    trainer = Trainer(p.data, comps, p.train, p.seed, torch.device(device), run_dir, base, epoch_done, p.view_workers,
                      deadline=deadline, on_resume=lambda records: write_jsonl(log, records),  # drop recomputed ones
                      check=p.check)
    if on_run:
        on_run(p, "resumed" if resume and (run_dir / "checkpoint.pt").exists() else "started")
    records = trainer.fit(resume=resume)
    write_jsonl(log, records)
    (run_dir / "done").write_text("ok\n")
    return records


def _warn_on_other_threads(run_dir: Path, resume: bool, device: str) -> None:
    """A CPU run resumed with another torch thread count may differ in the last bits (pllzoo.threads)."""
    import torch

    env = run_dir / "env.json"
    if not (resume and device == "cpu" and env.exists() and (run_dir / "checkpoint.pt").exists()):
        return
    before = json.loads(env.read_text()).get("torch_threads")
    if before is not None and before != torch.get_num_threads():
        warnings.warn(f"{run_dir.name} ran with {before} torch threads and resumes with {torch.get_num_threads()}: "
                      f"its numbers may differ in the last bits from an uninterrupted run (--threads {before} avoids it)")


