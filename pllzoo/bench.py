"""Head-to-head runs: plan (validate everything, write nothing), then execute.

:func:`plan` resolves method strings, the dataset, hyper-parameter overrides and
the data of every seed, and checks recipe compatibility, so bad input fails
before any file is written (:mod:`pllzoo.planning`).  :func:`execute` trains each method × seed
into ``OUT/runs/<run-id>/`` (locks, reuse and the swap of retrained runs: :mod:`pllzoo.runfolders`)
and writes ``OUT/results.csv``.

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

Under torchrun (``dist.world`` > 1, :mod:`pllzoo.distributed`) every process plans the same runs
(:func:`agree_on_plans` checks it); rank 0 runs :func:`execute` (run folders, locks, logs, checkpoints,
``results.csv``) and, before each run it trains, broadcasts which one; the other ranks run :func:`follow`,
which trains the same runs with them and writes nothing.  A run failing on some processes only ends the
bench on all of them (:func:`_failed_alone`).
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import shutil
import signal
import threading
import warnings
from pathlib import Path
from typing import Any, Callable

import pandas as pd

from pllzoo import archive, checkpoint, distributed
from pllzoo.atomic import write_atomic
from pllzoo.columns import TRAINER_COLUMNS
from pllzoo.data.base import fingerprint
from pllzoo.errors import PLLZooError
from pllzoo.isolation import plugin_code
from pllzoo.jobs import RunsFailed, describe, failure_line, record_failure
from pllzoo.observers import RunInfo, observing
from pllzoo.planning import (DEVICE_VIEWS, RunPlan, _route, carve, check_seeds, device_views, hashed_train,
                             parse_overrides, plan, train_config)
from pllzoo.plugins import one_line
from pllzoo.registry import Registry
from pllzoo.results import (RESULT_COLUMNS, append_jsonl, env_info, final_rows, load, order_methods, plugins_env,
                            run_id, write_json, write_jsonl)
from pllzoo.run import BOOKKEEPING_FIELDS
from pllzoo.runfolders import (data_change, finished_records, machine_change, recorded_env, recover, recover_abandoned,
                               results_lock, retrain_note, reusable, settle, settle_all, supplier_change, take_lock,
                               version_change)
from pllzoo.threads import default_threads, set_threads
from pllzoo.trainer import Trainer

__all__ = [  # planning lives in pllzoo.planning, run folders in pllzoo.runfolders; both re-exported here
    "DEVICE_VIEWS", "RunPlan", "_route", "carve", "check_seeds", "device_views", "execute", "follow",
    "hashed_train", "parse_overrides", "plan", "results_lock", "train_config",
]



def execute(
    registry: Registry, plans: list[RunPlan], out: Path, resume: bool = False,
    on_epoch: Callable[[RunPlan, dict[str, Any]], None] | None = None,
    on_run: Callable[[RunPlan, str], None] | None = None,
    jobs: int = 1, threads: int | None = None, time_limit: float | None = None, overwrite: bool = False,
    started: float | None = None,
) -> pd.DataFrame:
    """Train every planned run (skipping finished ones when ``resume``); return the rows of ``results.csv``.

    ``jobs`` > 1 trains up to that many runs at once in worker processes (:mod:`pllzoo.jobs`, with
    ``threads`` torch threads each); the records, run folders and rows are those of ``jobs=1``.
    ``threads``: torch threads (None: :func:`pllzoo.threads.default_threads`).  ``time_limit``: minutes
    for the whole bench, counted from ``started`` (a :data:`pllzoo.checkpoint.clock` time: the command's start,
    so loading and planning count; None: now), with at least one epoch trained (its first run's: every part
    makes progress); on a clean stop (time limit, SIGINT/SIGTERM) ``results.csv`` lists the finished
    (and failed) runs only and :class:`~pllzoo.checkpoint.Stopped` is raised.

    Finished runs are never lost: without ``resume`` a finished run is reused with a one-line warning,
    or with ``overwrite`` retrained into ``runs/.<run-id>.tmp-<pid>`` and swapped in only when it finished
    (a failure or a stop keeps the old run); an unfinished or damaged run folder is retrained the same way, with a
    one-line note (:func:`~pllzoo.runfolders.retrain_note`), and stays when the retraining stops before it gets
    further (:func:`~pllzoo.runfolders.settle`).  What a bench killed during a swap left is put right first
    (:func:`~pllzoo.runfolders.recover`).  Each run
    folder is locked (``runs/<run-id>.lock``) while this bench works on it: a run locked by another live
    bench is skipped with one warning (and the bench ends with :class:`~pllzoo.checkpoint.Stopped`, exit 75, once
    the others are done).  ``results.csv`` is rebuilt, under ``OUT/results.lock``, from every
    finished run under ``OUT`` (:func:`pllzoo.results.load`), plus this bench's failed runs.

    A finished run archived in ``OUT/runs.jsonl.xz`` (:mod:`pllzoo.archive`) counts as a finished run folder
    (reused, or retrained with ``overwrite``).  Runs recorded under old run ids (with machine paths, or float
    milestones) are first moved to their new ids (:func:`pllzoo.migrate.migrate`), so they are found.

    :raises RunsFailed: after every other run finished and ``results.csv`` is written, when some runs
        failed (see the module doc); it carries the rows.
    """
    if time_limit is not None and time_limit <= 0:
        raise PLLZooError(f"--time-limit must be > 0 minutes, got {time_limit:g}")
    if overwrite and resume:
        raise PLLZooError("--overwrite and --resume exclude each other; --overwrite retrains finished runs, "
                          "--resume keeps them")
    dist = distributed.current()
    if dist.active and jobs > 1:
        raise PLLZooError(f"--jobs {jobs} under torchrun: the {dist.world} processes train one run at a time")
    deadline = _deadline(time_limit, started)
    threads = threads or default_threads(jobs)
    runs_dir = Path(out) / "runs"
    runs_dir.mkdir(parents=True, exist_ok=True)
    _migrate(out)
    archived, archived_env, archived_damage = archive.finished(out)  # run id → records, env, damage of OUT's archive
    if not overwrite:
        take_fetch_twins(plans, out, archived)
    for p in plans:  # a file of the user's where a run folder goes: set aside and lost, silently (an outside review)
        if (runs_dir / p.run_id).exists() and not (runs_dir / p.run_id).is_dir():
            raise PLLZooError(f"cannot write the results under --out {out}: {runs_dir / p.run_id} is a file, where "
                              "pllzoo keeps a folder; move it away")
    shas: dict[int, str] = {}  # id(p.data) → its fingerprint, made only for runs that are reused

    def reuse_warning(p: RunPlan, env: dict[str, Any] | None, where: str) -> str:
        """The line that says a finished run is reused, and whether it saw other data than planned now."""
        if id(p.data) not in shas:
            shas[id(p.data)] = fingerprint(p.data)
        other = data_change(env, shas[id(p.data)], p.plugins.get("trainer"))
        older = version_change(env, p.plugins)  # said under --resume too: not the plain "reusing" line
        if other is None and older is None:
            return f"reusing finished run {p.run_id}{where}; --overwrite retrains it"
        if other is None:
            return (f"{_name(p)}: finished run {p.run_id}{where} was recorded with {older}; reused as it is (its "
                    "numbers are that version's): --overwrite retrains it with these")
        return (f"{_name(p)}: finished run {p.run_id}{where} was trained on other data than these ({other})"
                f"{f', recorded with {older}' if older else ''}; reused as it is: --overwrite retrains it on these")
    finals: list[dict[str, Any] | None] = []
    failed: dict[int, str] = {}  # index → one-line reason (pllzoo.jobs.record_failure)
    first_epoch: dict[str, float] = {}  # method → seconds to the first epoch of its last run here (_stop_before)
    attempted = 0  # runs trained this time, not reused
    todo = []  # indices of the runs left to the --jobs workers
    dirs: dict[int, Path] = {}  # index → the folder it trains into (a temporary one, swapped in, see settle)
    swaps: dict[int, tuple[Path, Path, bool]] = {}  # index → (temporary folder, run folder, old one finished)
    locks: list[Path] = []
    bench_no = next(_BENCHES)  # names this bench's failure marks (the same number on every rank)
    skipped: list[str] = []  # runs another live bench holds: not done here, so no success (exit 75)
    alone: str | None = None  # under torchrun: why a run failed on some processes only (the bench ends)
    abandoned: KeyboardInterrupt | None = None  # a second stop signal (pllzoo.checkpoint.Abandoned) or Ctrl-C
    signals = checkpoint.stop_signals() if jobs == 1 else contextlib.nullcontext()  # --jobs: see pllzoo.jobs
    try:
        with signals:
            for p in plans:
                run_dir = runs_dir / p.run_id
                lock = runs_dir / f"{p.run_id}.lock"
                holder = take_lock(lock)
                if holder is not None:
                    warnings.warn(f"{_name(p)}: run {p.run_id} is in use by another bench (pid {holder}, {lock}); "
                                  f"skipped (if no bench runs it, remove the lock file)")
                    skipped.append(_name(p))
                    finals.append(None)
                    continue
                locks.append(lock)
                put_back = recover(runs_dir, p.run_id)
                if put_back is not None:
                    warnings.warn(put_back)
                target = run_dir
                if p.run_id in archived and not overwrite and (not run_dir.exists() or
                                                               finished_records(run_dir) is None):
                    line = reuse_warning(p, archived_env.get(p.run_id), f" (from {archive.NAME})")
                    if not resume or not line.startswith("reusing"):
                        warnings.warn(line)
                    if on_run:
                        on_run(p, "reused")
                    finals.append(archived[p.run_id][-1])
                    continue
                if p.run_id in archived_damage and not run_dir.exists():  # retrained, as a damaged folder is
                    warnings.warn(f"{_name(p)}: {archived_damage[p.run_id]}; retraining it")
                records = (reusable(run_dir) if resume else finished_records(run_dir)) if run_dir.exists() else None
                changed = supplier_change(run_dir, p.plugins or plugins_env(registry, p.method)) \
                    if records is not None and not overwrite else None
                if changed is not None:  # another plugin's component of the same name: not this run's result
                    warnings.warn(f"{_name(p)}: finished run {p.run_id} was trained with {changed}; it is retrained "
                                  "(the finished run stays until the new one finishes)")
                if run_dir.exists() and (not resume or changed is not None):
                    if records is not None and not overwrite and changed is None:
                        warnings.warn(reuse_warning(p, recorded_env(run_dir), ""))
                        if on_run:
                            on_run(p, "reused")
                        finals.append(records[-1])
                        continue
                    if records is None and not resume and not overwrite:
                        note = retrain_note(run_dir)
                        if note is not None:
                            warnings.warn(f"{_name(p)}: {note}")
                    target = runs_dir / f".{p.run_id}.tmp-{os.getpid()}"
                    shutil.rmtree(target, ignore_errors=True)
                    swaps[len(finals)] = (target, run_dir, records is not None)
                    records = None
                if records is not None:
                    line = reuse_warning(p, recorded_env(run_dir), "")  # --resume: said only when the data differ
                    if not line.startswith("reusing"):
                        warnings.warn(line)
                    if on_run:
                        on_run(p, "reused")
                    finals.append(records[-1])
                    continue
                attempted += 1
                if resume and not run_dir.exists():
                    _say_unfinished_twins(p, runs_dir)
                if jobs > 1:
                    todo.append(len(finals))
                    dirs[len(finals)] = target
                    finals.append(None)  # filled in below, from the worker
                    continue
                i = len(finals)
                try:
                    _stop_before(p, deadline, first_epoch.get(p.method.name))
                    dist.broadcast_object(("train", i, resume))  # the other ranks train it with us (follow)
                    timed = _first_epoch_timer(first_epoch, p.method.name, on_epoch)
                    finals.append(_train(registry, p, target, resume, timed, on_run, deadline, threads)[-1])
                    settle(swaps, i, ok=True)
                except checkpoint.Stopped as exc:
                    settle(swaps, i, ok=False)
                    _write_rows(out, plans, finals, failed)
                    raise checkpoint.Stopped(f"{_name(p)}: {exc}; {_finished(finals, failed, len(plans))}",
                                             exc.exit_code) from None
                except (Exception, KeyboardInterrupt) as exc:  # the others go on; as a --jobs worker's record
                    if isinstance(exc, KeyboardInterrupt) and checkpoint.from_signal(exc):
                        raise  # a second stop signal (or Ctrl-C outside stop_signals): the bench ends, below
                    failed[i] = record_failure(target, exc)  # (a KeyboardInterrupt a plugin raised: its run fails)
                    finals.append(None)
                    if settle(swaps, i, ok=False):
                        failed[i] += "; the earlier finished run is kept"
                    alone = _failed_alone(dist, f"{bench_no}/{i}", _name(p), failed[i])
                    if alone is not None:  # the first cause, not what the collective said when its peer left
                        failed[i] = alone.removeprefix("the bench ends: ")
                        if f" on rank {dist.rank}: " not in failed[i]:  # error.txt holds this process's traceback
                            with (contextlib.suppress(OSError),  # (review)
                                  open(target / "error.txt", "a", encoding="utf-8") as f):
                                f.write(f"\nThe traceback above is this process's, from the collective that the "
                                        f"failed process left. The first cause: {failed[i]}\n")
                    if on_run:  # (after: a peer's failure is not shown as this process's component's)
                        on_run(p, f"failed: {failed[i]}")
                    if alone is not None:
                        break
        if todo:
            from pllzoo.jobs import RunsStopped, run_parallel

            try:
                done, worker_failed = run_parallel(registry, plans, runs_dir, resume, todo, jobs, on_epoch, on_run,
                                                   threads, deadline, dirs)
            except RunsStopped as exc:
                for i, record in exc.finals.items():
                    finals[i] = record
                failed.update(exc.failed)
                settle_all(swaps, finals, failed)
                _write_rows(out, plans, finals, failed)
                raise checkpoint.Stopped(f"{exc}; {_finished(finals, failed, len(plans))}", exc.exit_code) from None
            for i, record in done.items():
                finals[i] = record
            failed.update(worker_failed)
            settle_all(swaps, finals, failed)
    except KeyboardInterrupt as exc:  # abandoned: results.csv still lists the runs finished (or failed) so far
        abandoned = exc
        raise
    finally:
        if alone is None:  # (after a lone failure the others wait in another collective: no broadcast)
            dist.broadcast_object(("done",))  # releases the other ranks (follow)
        else:  # the bench ends here: the launcher's SIGTERM (sent once the failed process left) must not cut
            _keep_on_to_the_end()  # the writes below short (results.csv was lost so); its SIGKILL still ends all
        for i in list(swaps):  # an interruption: the temporary folders go, the old run folders stay
            settle(swaps, i, ok=False, discard=True)
        for lock in locks:
            lock.unlink(missing_ok=True)
        if abandoned is not None:
            with contextlib.suppress(OSError):  # the interruption is what the bench reports
                _write_rows(out, plans, finals, {**failed, **getattr(abandoned, "failed", {})})
    rows = _write_rows(out, plans, finals, failed)
    if alone is not None:  # with the rows and the failed runs, as RunsFailed: the CLI rebuilds summary.* and prints
        # the table before its line (an outside review: both were skipped, summary.csv left stale)
        raise distributed.FailedAlone(f"{alone}; {_finished(finals, failed, len(plans))}, the others not started; "
                                      "fix the cause and rerun with --resume", rows,
                                      [(plans[i], why) for i, why in sorted(failed.items())])
    if failed:
        named = [(_name(plans[i]), why) for i, why in sorted(failed.items())]
        raise RunsFailed(failure_line(named, attempted, runs_dir, overwrite), rows,
                         [(plans[i], why) for i, why in sorted(failed.items())])
    if skipped:  # a script's `bench && next` must not go on without them
        raise checkpoint.Skipped(f"{len(skipped)} run(s) skipped, in use by another bench ({', '.join(skipped)}); "
                                 f"{_finished(finals, failed, len(plans))}; once that bench is done, they can be "
                                 "trained",
                                 checkpoint.TIME_LIMIT_EXIT)
    return rows


def _migrate(out: Path) -> None:
    """Move runs recorded under old run ids (with machine paths, or float milestones) to their new ids
    (:func:`pllzoo.migrate.migrate`), so they are found; one warning line when there were some."""
    from pllzoo.migrate import migrate

    moved = migrate(out)
    if moved:
        warnings.warn(f"{out}: moved {len(moved)} run(s) recorded under old run ids (with machine paths, or float "
                      f"milestones) to their new ids, e.g. {next(iter(moved))} -> {next(iter(moved.values()))}")


def take_fetch_twins(plans: list[RunPlan], out: Path, archived: dict[str, Any] | None = None) -> None:
    """Plan a run under its *fetch twin*'s id where OUT has the twin and not the run: the same config but for
    ``data.download`` (``--offline``), which says how the data came, not what they are (an outside review:
    ``--resume --offline`` after a bench without it started the run over; a finished run was trained again).

    ``download`` stays hashed into the run id: every id recorded so far (with and without ``--offline``) keeps
    its name.  The run then records the twin's value, as the twin did; nothing reads it back but ``--from-run``,
    whose ``--offline`` it sets, and the command line's ``--offline`` still governs this bench's loading.  The CLI
    calls it before it shows the plan (whose estimate and progress go by run id); :func:`execute` again, after
    moving runs recorded under old ids (``archived``: OUT's archive, read here when not given)."""
    runs_dir = Path(out) / "runs"
    if archived is None:
        archived = archive.finished(out)[0] if (Path(out) / archive.NAME).exists() else {}
    for p in plans:
        data = p.config.get("data")
        if not isinstance(data, dict) or not isinstance(data.get("download"), bool):
            continue
        if (runs_dir / p.run_id).exists() or p.run_id in archived:
            continue
        twin = {**p.config, "data": {**data, "download": not data["download"]}}
        if (runs_dir / run_id(twin)).is_dir() or run_id(twin) in archived:
            p.config = twin


def agree_on_plans(plans: list[RunPlan] | None, failed: BaseException | None = None) -> None:
    """Under torchrun, before any run: every process planned rank 0's runs (the same run ids, in order), on the
    same data (:func:`~pllzoo.data.base.fingerprint`: a run id names the data by name, shape and counts) with
    the same plugin distributions and versions (``env.json`` records rank 0's).

    Rank 0 announces runs by their place in the plan (:func:`follow`), so a process started with other
    arguments, another config file, other data or other package versions would train another run beside
    rank 0's and be averaged with it.  A collective check; no-op in one process.

    ``failed``: this process could not plan (its error, which the caller raises after this returns): it takes part
    in the check all the same, so that the others, waiting in it, end at once with its line instead of at the
    process group's timeout.  (The same error on every process, e.g. an unknown method: each raises its own.)

    :raises PLLZooError: on every process alike, one line naming the processes whose plan differs, or, on the
        processes that planned, the line of one that could not.
    """
    dist = distributed.current()
    if not dist.active:
        return
    if failed is not None:  # said before the collectives, so that it is there when they return
        dist.end(f"rank {dist.rank} could not plan the bench: {failed_line(failed)}")
        mine = None
    else:
        shas: dict[int, str] = {}  # id(p.data) → its fingerprint: a run id names data by name, shape and counts
        mine = [(p.run_id, shas.setdefault(id(p.data), fingerprint(p.data)), _suppliers(p)) for p in plans]
    ours = dist.broadcast_object(mine)
    parts = ("runs", "data", "plugin versions", "planning")  # what a rank's plan differs in first: 1 + its index
    if mine is None:
        own = len(parts)
    elif ours is None:  # rank 0 could not plan: its line, below
        own = 0
    else:
        own = 1 if len(mine) != len(ours) else \
            next((1 + i for i in range(len(parts) - 1) if [m[i] for m in mine] != [o[i] for o in ours]), 0)
    differs = dist.sum_ints([own if r == dist.rank else 0 for r in range(dist.world)])
    if failed is not None:
        return
    if len(parts) in differs or ours is None:
        raise PLLZooError(f"the bench ends: {dist.ended() or 'another process could not plan it'}")
    if any(differs):
        ranks = ", ".join(f"{r} ({parts[d - 1]})" for r, d in enumerate(differs) if d)
        first = next(r for r, d in enumerate(differs) if d)  # what differs there, said by that rank
        said = dist.broadcast_object(_plan_difference(mine, ours) if dist.rank == first else None, src=first)
        raise PLLZooError(f"the {dist.world} processes planned different runs (rank {ranks} against rank 0: "
                          f"{len(ours)} run(s), e.g. {ours[0][0] if ours else 'none'}{'; ' + said if said else ''}); "
                          "start every process with the same arguments, config file, data and package versions")


def _suppliers(p: RunPlan) -> str:
    """Which plugin, distribution and version supply the components, backbone and views of run ``p`` (the
    parts of its ``env.json`` a process must agree on; other loaded plugins may differ), as JSON."""
    return json.dumps({k: v for k, v in p.plugins.items() if k != "plugins"}, sort_keys=True, default=str)


def _supplier(entry: dict[str, Any]) -> str:
    """``plugin 'p' (dist 1.0)`` of a supplier entry of env.json; ``nothing`` for none."""
    if not entry:
        return "nothing"
    return f"plugin {entry.get('plugin')!r} ({entry.get('dist')} {entry.get('version')})"


def _plan_difference(mine: list[tuple[str, str, str]], ours: list[tuple[str, str, str]]) -> str:
    """The first thing this process planned otherwise than rank 0 (``ours``), in a few words."""
    if len(mine) != len(ours):
        return f"rank {distributed.current().rank}: {len(mine)} run(s)"
    for (run, data, sup), (run0, data0, sup0) in zip(mine, ours):
        if run != run0:
            return f"rank {distributed.current().rank}: {run}"
        if data != data0:
            return f"{run}'s data differ"
        if sup != sup0:
            here, there = json.loads(sup), json.loads(sup0)
            for group in sorted(set(here) | set(there)):
                a, b = here.get(group, {}), there.get(group, {})
                for key in sorted(set(a) | set(b)):
                    if a.get(key) != b.get(key):
                        mine_, theirs = a.get(key) or {}, b.get(key) or {}
                        what = theirs.get("component") or mine_.get("component") or theirs.get("name") or ""
                        return (f"{key}{' ' + repr(what) if what else ''} from {_supplier(mine_)} on rank "
                                f"{distributed.current().rank}, {_supplier(theirs)} on rank 0")
    return ""


def failed_line(exc: BaseException) -> str:
    """A planning error in one line: the message of pllzoo's and click's own errors, else ``Type: message``."""
    import click

    if isinstance(exc, (PLLZooError, click.ClickException)):
        text = exc.format_message() if isinstance(exc, click.ClickException) else str(exc)
        return (text.strip().splitlines() or [type(exc).__name__])[0]
    return one_line(exc)


def _say_unfinished_twins(p: RunPlan, runs_dir: Path) -> None:
    """``--resume`` of a run not under ``OUT``: a warning naming an unfinished run there of the same method,
    dataset and seed trained with other settings (an outside review: ``--resume --epochs 30`` after a stopped
    25-epoch bench started a new run without a word, the stopped one left behind)."""
    from pllzoo.results import _flat

    prefix = p.run_id.rsplit("-", 1)[0] + "-"
    for other in sorted(runs_dir.glob(f"{prefix}*")) if runs_dir.is_dir() else ():
        if other.name == p.run_id or not other.is_dir() or (other / "done").exists():
            continue
        try:
            config = json.loads((other / "config.json").read_text())
        except (OSError, ValueError):
            continue
        mine = _flat(json.loads(json.dumps(p.config, default=str)))  # as config.json holds it (tuples as lists)
        theirs = _flat(config) if isinstance(config, dict) else {}
        differ = [k for k in sorted(set(mine) | set(theirs)) if mine.get(k) != theirs.get(k)][:3]
        shown = ", ".join(f"{k}={theirs.get(k, '–')}" for k in differ)
        warnings.warn(f"{_name(p)}: --resume starts a new run: {runs_dir / other.name} is an unfinished run of it "
                      f"with other settings ({shown}); a run resumes with its own settings only")
        return


def _deadline(time_limit: float | None, started: float | None) -> float | None:
    """The :data:`pllzoo.checkpoint.clock` time ``time_limit`` minutes after ``started`` (the command's start;
    None: now), or None; a time-limited bench begins a part (:func:`pllzoo.checkpoint.start_part`)."""
    if time_limit is None:
        return None
    checkpoint.start_part()
    return (checkpoint.clock() if started is None else started) + 60 * time_limit


def follow(registry: Registry, plans: list[RunPlan], time_limit: float | None = None,
           started: float | None = None) -> None:
    """A rank other than 0 under torchrun: train each run rank 0 announces, with it, until it says done.

    Nothing is written.  A run that stops here stops on rank 0 too (stops are decided collectively; once rank 0
    says done, the stop is raised here too, for the same line and exit status on every process); a run
    that fails here usually fails on every rank (the same replicated computation, rank 0's verdict on its
    checkpoint), and then this rank goes on to rank 0's next announcement.  A failure that is this rank's
    alone (its device, its disk: the others do not report it within :func:`~pllzoo.distributed.failure_wait_s`)
    ends the bench (:func:`_failed_alone`, :class:`~pllzoo.distributed.FailedAlone`).
    """
    import torch

    dist = distributed.current()
    deadline = _deadline(time_limit, started)
    bench_no = next(_BENCHES)
    stopped: checkpoint.Stopped | None = None
    with checkpoint.stop_signals():
        while True:
            message = dist.broadcast_object(None)
            if message[0] == "done":
                if stopped is not None:  # every process ends with the stop's status, as rank 0 does
                    raise stopped
                return
            _, i, resume = message
            p = plans[i]
            try:  # a run refused while it is set up (not ready for DDP, a batch that does not split) is refused
                # on rank 0 too, which records it and announces the next: go on with it, do not leave the group
                with plugin_code():  # as rank 0's _train: torch's settings kept, prints to stderr
                    comps = registry.build_components(p.method, p.component_overrides, (p.data.name, p.data.kind))
                    trainer = Trainer(p.data, comps, p.train, p.seed, torch.device(p.config["device"]), None,
                                      {"method": p.method.name, "dataset": p.data.name}, None, p.view_workers,
                                      deadline=deadline, check=p.check, dist=dist, registry=registry)
                    trainer.fit(resume=resume)
            except checkpoint.Stopped as exc:  # decided collectively: rank 0 stops too and records it
                stopped = stopped or exc
            except Exception as exc:  # rank 0 records it when it failed there too; else this rank's alone
                # worded as rank 0 words its own (record_failure): one fault, one text in results.csv's error
                # column whichever rank it struck (an outside review: "ComponentError: ..." on rank 1 only)
                alone = _failed_alone(dist, f"{bench_no}/{i}", _name(p), describe(exc))
                if alone is not None:  # printed by the CLI, on every process
                    raise distributed.FailedAlone(alone) from None


_BENCHES = itertools.count()  # execute()/follow() calls in this process: the same sequence on every rank


def _failed_alone(dist: distributed.DistContext, key: str, run: str, reason: str) -> str | None:
    """After run ``run`` failed here (``reason``: one line), under torchrun: None when it failed on every process
    (the bench goes on), else the line that ends the bench, said to the other processes too.  A process that
    ended the bench before (its own lone failure) is named: its exit made the collectives fail here.  A
    collective's own error here (a timeout, a peer's closed connection) is another process's doing, and is said
    so first (an outside review: a hang on rank 1 was "an error of this process alone" on rank 0)."""
    if not dist.active:
        return None
    ended = dist.ended()  # another process's lone failure, said before it left: why the collective failed here
    if ended is not None:
        return f"the bench ends: {ended}"
    if dist.failed_everywhere(key, give_up=lambda: checkpoint.stop_requested() is not None):
        ended = dist.ended()
        return f"the bench ends: {ended}" if ended is not None else None
    why, peer = f"{run} failed on rank {dist.rank}", distributed.collective_error(reason)
    if checkpoint.stop_requested() is not None:  # the launcher stops the processes left: another one exited
        line = (f"the bench ends: {why}: another process exited without saying why (the launcher's output, "
                f"or that process's own, says), and the launcher stops this one; here: {reason}" if peer else
                f"the bench ends: {why}: {reason}; another process exited without saying why (the launcher's "
                "output, or that process's own, says), and the launcher stops this one")
    elif peer == "timeout":
        line = (f"the bench ends: {why}: another process did not reach a collective in time "
                "(PLLZOO_DIST_TIMEOUT_S): it hangs, or it stopped; its own output says why; here: " + reason)
    elif peer == "left":
        line = (f"the bench ends: {why}: another process left a collective (it failed or exited; its own output "
                "says why); here: " + reason)
    else:
        line = (f"the bench ends: {why}: {reason}, and not on every process within "
                f"{distributed.failure_wait_s():g} s (an error of this process alone: its device or disk; the "
                "others wait in a collective)")
    dist.end(line.removeprefix("the bench ends: "))
    return line


def _keep_on_to_the_end() -> None:
    """Ignore SIGTERM from now on (main thread only): the bench is ending after a lone failure under torchrun,
    and a stop signal has nothing left to stop but the writing of its results."""
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, signal.SIG_IGN)


def _name(p: RunPlan) -> str:
    return f"{p.method.name} seed {p.seed}"


def _finished(finals: list[dict[str, Any] | None], failed: dict[int, str], total: int) -> str:
    n_done = sum(f is not None for f in finals)
    return f"{n_done} of {total} runs finished" + (f", {len(failed)} failed" if failed else "")


def _stop_before(p: RunPlan, deadline: float | None, first_epoch_s: float | None = None) -> None:
    """A pending stop signal, a passed deadline, or one that a first epoch as long as the last run of the same
    method took in this bench (``first_epoch_s``, start-up included) would miss, leaves run ``p`` unstarted (an
    outside review: a run begun 0.55 s before the limit trained a whole epoch past it, 53 % over)."""
    if checkpoint.stop_requested() is not None:
        raise checkpoint.signal_stop("before it started")
    if deadline is None or not checkpoint.part_progressed():  # (the part's first run trains an epoch all the same)
        return
    if checkpoint.misses(deadline):
        raise checkpoint.time_stop("before it started")
    if checkpoint.misses(deadline, first_epoch_s):
        raise checkpoint.time_stop(f"before it started (the first epoch of {p.method.name}'s last run here took "
                                   f"{first_epoch_s:.1f} s)")


def _first_epoch_timer(times: dict[str, float], method: str, on_epoch):
    """``on_epoch``, also putting the time from now to the run's first epoch in ``times[method]``."""
    begun, seen = checkpoint.clock(), []

    def timed(plan, record):
        if not seen:
            seen.append(True)
            times[method] = checkpoint.clock() - begun
        if on_epoch is not None:
            on_epoch(plan, record)
    return timed


def _write_rows(out: Path, plans: list[RunPlan], finals: list[dict[str, Any] | None],
                failed: dict[int, str] | None = None) -> pd.DataFrame:
    """``OUT/results.csv``, rebuilt under :func:`results_lock`: the final rows of every finished run under
    ``OUT`` (:func:`pllzoo.results.load`, as ``pllzoo report`` reads them, so earlier benches' runs stay) and
    of this bench's failed ones (``failed[i]``: ``plans[i]``'s one-line reason) whose folder holds no
    finished run; this bench's methods first, in ``--methods`` order (so every ``--shard`` writes the same
    order), then seed.  The last three columns: ``setting`` (the run's setting label, told apart as ``pllzoo
    report`` tells them: runs of one method and seed under one ``OUT`` trained on other data or splits, or with
    other hyper-parameters, differ there alone, and grouping by method would pool them; an outside review),
    ``status`` ("ok" | "failed") and ``error``.  ``finals`` is not read: the folders are the record."""
    with results_lock(out):
        for line in recover_abandoned(out / "runs"):  # another run's swap that a killed bench left half-done
            warnings.warn(line)
        failed = dict(failed or {})
        labels: list[str] = []  # the failed runs' settings, told apart as the finished runs' are
        records = load(out, damaged=[], beside=[plans[i].config for i in failed], beside_labels=labels)
        order = list(dict.fromkeys([m for p in plans for m in (*p.methods, p.method.name)] + list(records["method"])))
        if len(records):
            rows = order_methods(final_rows(records.drop(columns=["train_counts"])), order)
            extra = [c for c in rows.columns if c not in (*RESULT_COLUMNS, "class_acc", "setting")]
            extra = [c for c in TRAINER_COLUMNS if c in extra] + [c for c in extra if c not in TRAINER_COLUMNS]
            rows = rows[[*RESULT_COLUMNS, *extra, "setting"]].reset_index(drop=True)
        else:
            rows = pd.DataFrame(columns=[*RESULT_COLUMNS, "run", "setting"])  # a failed row's run id stays
        rows = rows.assign(status="ok", error="")
        label = dict(zip(failed, labels))
        failed = {i: why for i, why in failed.items() if plans[i].run_id not in set(rows.get("run", ()))}
        if failed:
            bad = pd.DataFrame([{"method": plans[i].method.name, "dataset": plans[i].data.name,
                                 "seed": plans[i].seed, "run": plans[i].run_id, "setting": label[i],
                                 "status": "failed", "error": why}
                                for i, why in failed.items()])
            ints = [c for c in rows.columns if pd.api.types.is_integer_dtype(rows[c])]  # stay integers beside NaN
            rows = pd.concat([rows.astype({c: "Int64" for c in ints}), bad], ignore_index=True)[list(rows.columns)]
            rows = order_methods(rows, order).reset_index(drop=True)
        write_atomic(Path(out) / "results.csv", rows.to_csv(index=False))
    return rows


#: env.json's values a part of a run may differ in, each able to change its numbers (its record must say so)
PART_KEYS = ("torch_threads", "processes", "git_commit", "versions", "python", "numpy", "torch_cuda", "cudnn",
             "device", "gpu", "cpu", "cpu_capability", "platform", "data_sha256")


def _earlier_parts(run_dir: Path, resume: bool, env: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    """``{"earlier_parts": [...]}``: for a run resumed from its checkpoint some of whose earlier parts ran
    otherwise than this one (``env``), the :data:`PART_KEYS` values of each earlier part, the oldest first
    (consecutive parts alike as one; the env.json rewritten here said them: an outside review found a resumed
    run's record described its last part only, so rerunning as it said gave other numbers); else ``{}``."""
    if not (resume and (run_dir / "checkpoint.pt").exists() and (run_dir / "env.json").exists()):
        return {}
    try:
        old = json.loads((run_dir / "env.json").read_text())
    except (OSError, ValueError):
        return {}
    if not isinstance(old, dict):
        return {}
    snap = lambda e: {k: e.get(k, 1) if k == "processes" else e.get(k) for k in PART_KEYS}  # noqa: E731
    parts = [p for p in old.get("earlier_parts", []) if isinstance(p, dict)] + [snap(old)]
    parts = [p for i, p in enumerate(parts) if i == 0 or p != parts[i - 1]]
    return {"earlier_parts": parts} if any(p != snap(env) for p in parts) else {}


def _train(registry, p: RunPlan, run_dir: Path, resume: bool, on_epoch, on_run, deadline: float | None = None,
           threads: int | None = None) -> list[dict[str, Any]]:
    """Train one run into ``run_dir``.  ``deadline``: a :data:`pllzoo.checkpoint.clock` time to stop by;
    ``threads``: torch threads for it (None: leave them).  Plain arguments, so a job process passes them too."""
    if run_dir.is_symlink():  # a folder handed over: pllzoo writes inside OUT only (an outside review: a resume
        # rewrote the linked folder elsewhere)
        raise PLLZooError(f"{run_dir} is a symbolic link; pllzoo trains only into folders inside --out: put the "
                          "folder itself there (or remove the link), then rerun")
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "error.txt").unlink(missing_ok=True)  # a failed run's (pllzoo.jobs.record_failure), rerun
    device = p.config["device"]
    if threads is not None:
        set_threads(threads)
    data_sha = fingerprint(p.data)
    plugins = p.plugins or plugins_env(registry, p.method)  # from plan(): a --jobs worker's registry lacks the infos
    _warn_on_resume_changes(run_dir, resume, device, data_sha, plugins)
    write_json(run_dir / "config.json", p.config)
    bookkeeping = {f: getattr(p.train, f) for f in sorted(BOOKKEEPING_FIELDS)}
    processes = {"processes": distributed.current().world} if distributed.current().active else {}  # torchrun
    env = {**env_info(device), **plugins, "view_workers": p.view_workers, "bookkeeping": bookkeeping, **processes,
           "data_sha256": data_sha}
    env |= _earlier_parts(run_dir, resume, env)
    write_json(run_dir / "env.json", env)
    resumed = resume and (run_dir / "checkpoint.pt").exists()
    config, env = (json.loads((run_dir / name).read_text()) for name in ("config.json", "env.json"))  # as written
    info = RunInfo(p.run_id, p.method.name, p.data.name, p.seed, run_dir, config, env, resumed)
    with plugin_code(), observing(registry, p.observers, info) as observers:  # run start, each epoch, run end
        # (pllzoo.observers)
        comps = registry.build_components(p.method, p.component_overrides, (p.data.name, p.data.kind))
        base = {"method": p.method.name, "dataset": p.data.name}
        log, logged = run_dir / "log.jsonl", [0]  # logged: how many of the records log.jsonl holds

        def epoch_done(records: list[dict[str, Any]]) -> None:
            if 0 < logged[0] == len(records) - 1:
                append_jsonl(log, records[-1])
            else:  # the first epoch: a failed earlier part's lines go
                write_jsonl(log, records)
            logged[0] = len(records)
            observers.epoch(records)
            if on_epoch:
                on_epoch(p, records[-1])

        def resumed_from(records: list[dict[str, Any]]) -> None:
            write_jsonl(log, records)  # drop recomputed ones
            logged[0] = len(records)
            observers.seen(records)

        import torch

        trainer = Trainer(p.data, comps, p.train, p.seed, torch.device(device), run_dir, base, epoch_done,
                          p.view_workers, deadline=deadline, on_resume=resumed_from, check=p.check, registry=registry,
                          run_id=p.run_id)
        if on_run:
            on_run(p, "resumed" if resumed else "started")
        records = trainer.fit(resume=resume)
        write_jsonl(log, records)
        write_atomic(run_dir / "done", "ok\n")
    return records


def _warn_on_resume_changes(run_dir: Path, resume: bool, device: str, data_sha: str, plugins: dict[str, Any]
                            ) -> None:
    """A run resumed on other data (``data_sha256`` of :func:`pllzoo.data.base.fingerprint`: another
    ``--data-dir`` copy) or with components of other plugins (:func:`pllzoo.runfolders.supplier_change`)
    continues on them, with a warning; so does a CPU run resumed with another torch thread count, CPU or torch,
    which may differ in the last bits from an uninterrupted run (:func:`pllzoo.runfolders.machine_change`)."""
    import torch

    env = run_dir / "env.json"
    if not (resume and env.exists() and (run_dir / "checkpoint.pt").exists()):
        return
    try:  # env.json is rewritten by this run right after; a damaged one only loses these warnings
        recorded = json.loads(env.read_text())
    except (OSError, ValueError):
        return
    if not isinstance(recorded, dict):
        return
    changed = supplier_change(run_dir, plugins)
    if changed is not None:
        warnings.warn(f"{run_dir.name} trained with {changed}; it continues with these")
    older = version_change(recorded, plugins)
    if older is not None:
        warnings.warn(f"{run_dir.name} was trained so far with {older}; it continues with these")
    other = data_change(recorded, data_sha, plugins.get("trainer"))
    if other is not None:
        warnings.warn(f"{run_dir.name} trained on other data ({other}); it continues on these")
    other_cpu = (machine_change(recorded, torch.get_num_threads(), ("ran", "resumes"), every_part=False)
                 if device == "cpu" else None)
    if other_cpu is not None:
        warnings.warn(f"{run_dir.name} {other_cpu}")


