"""The run folders of a bench: is a run finished and reusable, locks against a second bench on the
same run or results, and the atomic swap of a retrained run into place (:mod:`pllzoo.bench`).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import threading
import time
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pllzoo import checkpoint_file as checkpoint  # NAME, CheckpointError, quick_check: no torch for report
from pllzoo.atomic import write_atomic
from pllzoo.errors import PLLZooError
from pllzoo.procinfo import start_ticks
from pllzoo.results import DamagedRun, cpu_model, read_log, run_config


def supplier_change(run_dir: Path, plugins: dict[str, Any]) -> str | None:
    """How the plugins that supply a run's components, backbone and views (``plugins``: env.json's
    ``components`` and ``trainer`` parts, :func:`pllzoo.results.plugins_env`) differ from those recorded in
    ``run_dir/env.json``, or None.  The run id names components by name only, so another plugin's component
    of the same name (another distribution installed, one plugin refused in its place) would otherwise be
    taken for the finished run's.  A version change of the same plugin is not a change here."""
    changes = []
    for key, old, current in _suppliers(recorded_env(run_dir), plugins):
        if (old.get("plugin"), old.get("dist")) != (current["plugin"], current["dist"]):
            name = current.get("component", current.get("name"))
            changes.append(f"{key} {name!r} of plugin {old.get('plugin')!r} ({old.get('dist')}), now of plugin "
                           f"{current['plugin']!r} ({current['dist']})")
    return "; ".join(changes) or None


def _suppliers(env: dict[str, Any] | None, plugins: dict[str, Any]) -> Iterator[tuple[str, dict, dict]]:
    """``(key, recorded, now)`` for each component slot and trainer key (backbone, views, dataset) of env.json's
    ``components`` and ``trainer`` parts that ``env`` records and ``plugins`` plans now."""
    for part in ("components", "trainer"):
        was, now = (env or {}).get(part), plugins.get(part) or {}
        if isinstance(was, dict):
            yield from ((key, was[key], current) for key, current in now.items()
                        if isinstance(was.get(key), dict) and isinstance(current, dict))


def version_change(env: dict[str, Any] | None, plugins: dict[str, Any], keys: frozenset[str] | None = None
                   ) -> str | None:
    """Which distributions supplied the run's components, backbone or views (env.json's ``components`` and
    ``trainer`` parts) at another version than the ones installed now (``plugins``, the same parts planned now),
    or None; ``keys``: only these slots or trainer keys (e.g. ``{"predict", "model"}`` for a re-scoring).  A run's
    id names its components and their hyper-parameters, not the code's version: a component may compute
    otherwise from one version to the next (an outside review: HTC's ensemble changed its default for classes of
    prior 0 under the same id), as scikit-learn warns when a model pickled by another version is loaded.  Said,
    not refused: most version changes leave a component's numbers as they were.  A record made before env.json
    had those parts is read by its ``versions`` (every distribution's version; a review: 313 archived runs).
    E.g. ``"pllzoo-ltpll 0.1.0 (htc.ensemble), now 0.2.0"``."""
    changed: dict[tuple[str, str, str], list[str]] = {}
    versions = (env or {}).get("versions")  # every distribution's, also in records made before the parts above
    for part in ("components", "trainer"):  # a part a record lacks: its distribution's version there
        if env is not None and not isinstance(env.get(part), dict) and isinstance(versions, dict):
            env = {**env, part: {key: {"dist": now["dist"], "version": versions[now["dist"]]}
                                 for key, now in (plugins.get(part) or {}).items()
                                 if isinstance(now, dict) and now.get("dist") in versions}}
    for key, old, current in _suppliers(env, plugins):
        if (keys is None or key in keys) and old.get("dist") == current.get("dist") and \
                old.get("version") != current.get("version"):
            name = str(current.get("component", current.get("name")))
            names = changed.setdefault((str(old.get("dist")), str(old.get("version")), str(current.get("version"))),
                                       [])
            if name not in names:
                names.append(name)
    return "; ".join(f"{dist} {old} ({', '.join(names)}), now {new}"
                     for (dist, old, new), names in changed.items()) or None


def recorded_env(run_dir: Path) -> dict[str, Any] | None:
    """``run_dir/env.json`` as a dict, or None where it is missing or damaged."""
    try:
        env = json.loads((run_dir / "env.json").read_text())
    except (OSError, ValueError):
        return None
    return env if isinstance(env, dict) else None


def data_change(env: dict[str, Any] | None, data_sha: str, trainer: dict[str, Any] | None = None) -> str | None:
    """How the data a finished run was trained and tested on (``env``'s ``data_sha256``,
    :func:`pllzoo.data.base.fingerprint`) differ from the data planned now (``data_sha``), or None.  The run id
    names a user's ``.mat`` file or image folder by its name, shape and counts only, so another file of the same
    name and shape (or another ``--data-dir`` copy of a built-in set) would otherwise be taken for the data
    the run saw.  ``trainer``: env.json's ``trainer`` part planned now (:func:`pllzoo.results.backbone_env`); where
    it and ``env`` name another distribution or version of the plugin that registered the dataset, that is one more
    candidate said (a review: it replaced the others, though a pllzoo upgrade may coincide with another copy).""" 
    was = env.get("data_sha256") if env is not None else None
    if not isinstance(was, str) or was == data_sha:
        return None
    recorded = env.get("trainer") if env is not None else None
    old = recorded.get("dataset") if isinstance(recorded, dict) else None
    now = (trainer or {}).get("dataset")
    guesses = "another file of the same name, another --data-dir copy, or another image decoder"
    if isinstance(old, dict) and isinstance(now, dict) and (old.get("dist"), old.get("version")) != (
            now.get("dist"), now.get("version")):  # one more candidate, not the cause: nothing shows it is
        guesses += (f"; or dataset {now.get('name')!r} of {old.get('dist')} {old.get('version')}, now of "
                    f"{now.get('dist')} {now.get('version')}")
    return f"fingerprint {was}, now {data_sha}: {guesses}?"


def machine_change(env: dict[str, Any] | None, threads: int, verbs: tuple[str, str] = ("recorded", "replayed"),
                   every_part: bool = True) -> str | None:
    """How this machine, running a CPU run with ``threads`` torch threads, differs from the run's record
    (``env``: its env.json) in what picks the last bits of its numbers, or None: the CPU (model and the
    instruction set torch dispatches to, as :func:`pllzoo.results.env_info` records them), the torch thread
    count and torch's version.  ``verbs``: what the record did and what happens now (a replay; a resume says
    "ran", "resumes").  ``every_part``: a replay repeats every part of a resumed run (env.json's
    ``earlier_parts``); a resume continues from the last only.  An outside review replayed a recorded study on
    another CPU, got other numbers from epoch 1 and no word why; a record made before env.json named the CPU
    says so."""
    import importlib.metadata as md

    import torch

    if env is None:
        return None
    now = {"cpu": cpu_model(), "cpu_capability": torch.backends.cpu.get_cpu_capability(), "torch_threads": threads,
           "torch": md.version("torch")}

    def values(part: dict[str, Any]) -> dict[str, Any]:
        versions = part.get("versions")
        return {k: part.get(k) for k in ("cpu", "cpu_capability", "torch_threads")} | {
            "torch": versions.get("torch") if isinstance(versions, dict) else None}

    was = values(env)  # the last part's (a resume rewrites env.json)
    say = {"cpu": lambda v: f"CPU {v!r}", "cpu_capability": lambda v: f"torch's {v} kernels",
           "torch_threads": lambda v: f"{v} torch thread{'s' * (str(v) != '1')}", "torch": lambda v: f"torch {v}"}
    earlier = env.get("earlier_parts") if every_part else None
    parts = [values(p) for p in earlier if isinstance(p, dict)] + [was] if isinstance(earlier, list) else [was]
    mixed = {k: list(dict.fromkeys(str(p[k]) for p in parts if p[k] is not None)) for k in now}
    mixed = {k: v for k, v in mixed.items() if len(v) > 1}
    if mixed:  # an outside review: compared with the last part only, a replay as it said differed, one unlike matched
        told = "; ".join(f"{' then '.join(say[k](v) for v in vs)}" for k, vs in mixed.items())
        return (f"the run was resumed in parts that ran otherwise ({told}; env.json's earlier_parts), so no replay "
                "repeats it bit for bit; its numbers may differ from the first epoch on")
    differ = [k for k in now if was[k] is not None and str(was[k]) != str(now[k])]
    changes = (f"{verbs[0]} with {', '.join(say[k](was[k]) for k in differ)}, {verbs[1]} with "
               f"{', '.join(say[k](now[k]) for k in differ)}") if differ else ""
    if was["cpu"] is None:
        head = "the record names no CPU (made before env.json kept it)" + (f"; {changes}" if changes else "")
    elif differ:
        head = changes
    else:
        return None
    hint = f" (--threads {was['torch_threads']} repeats its thread count)" if "torch_threads" in differ else ""
    return (f"{head}: a CPU run repeats bit for bit only on the same kind of CPU with the same thread count and "
            f"torch; elsewhere its numbers may differ from the first epoch on{hint}")


def settle_all(swaps: dict[int, tuple[Path, Path, bool]], finals: list, failed: dict[int, str]) -> None:
    """Swap in the temporary folders of the --jobs runs that finished; settle the others (:func:`settle`)."""
    for i in list(swaps):
        if settle(swaps, i, ok=finals[i] is not None) and i in failed:
            failed[i] += "; the earlier finished run is kept"


def progress(folder: Path) -> int:
    """The epochs a run folder holds that a bench can use: its log's lines when it finished or has a checkpoint to
    resume from, else 0."""
    if not ((folder / "done").exists() or (folder / checkpoint.NAME).exists()):
        return 0
    try:
        return sum(1 for line in (folder / "log.jsonl").read_text(errors="replace").splitlines() if line.strip())
    except OSError:
        return 0


def settle(swaps: dict[int, tuple[Path, Path, bool]], i: int, ok: bool, discard: bool = False) -> bool:
    """Put run ``i``'s temporary folder in place of its run folder when it finished (``ok``), or when it failed or
    stopped further along than the old folder, which held no finished run (for its error.txt or ``--resume``);
    otherwise, or with ``discard`` (an interruption), remove the temporary folder: a retraining that stops early
    never costs the epochs an unfinished or damaged run folder holds (the failure's error.txt goes into the kept
    folder).  True when an old finished run was kept."""
    if i not in swaps:
        return False
    tmp, run_dir, old_finished = swaps.pop(i)
    if not tmp.exists():
        return old_finished
    if not discard and not ok and not old_finished and run_dir.exists() and progress(run_dir) > progress(tmp):
        if (tmp / "error.txt").exists():
            write_atomic(run_dir / "error.txt", (tmp / "error.txt").read_bytes())  # not through a link there
        warnings.warn(f"{run_dir}: kept as it was ({progress(run_dir)} epochs); the retraining that stopped "
                      f"after {progress(tmp)} did not get as far")
        discard = True
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


def recover(runs_dir: Path, run_id: str) -> str | None:
    """Put right what a bench that died while it held run ``run_id`` left (call with the run's lock held: its
    temporary folders are then no live bench's).  A swap (:func:`settle`) is two renames; killed between them, the
    run folder is missing and the finished run lies set aside as ``.<id>.old-<pid>``, the new one as
    ``.<id>.tmp-<pid>``: the new one goes in place when it finished, else the old one.  Every other leftover
    temporary folder of the run (a killed ``--overwrite`` retraining) is removed.  Returns what was put back, for
    a warning, or None."""
    run_dir = runs_dir / run_id
    olds, tmps = sorted(runs_dir.glob(f".{run_id}.old-*")), sorted(runs_dir.glob(f".{run_id}.tmp-*"))
    said = None
    if not run_dir.exists() and (olds or tmps):
        new = next((t for t in tmps if (t / "done").exists()), None)
        back = new or (olds[-1] if olds else None)
        if back is not None:
            os.replace(back, run_dir)
            said = (f"{run_dir}: put back from {back.name}, where a bench that was killed while it swapped the run "
                    f"in left it ({'the retrained, finished run' if back is new else 'the earlier run'})")
    for leftover in (*olds, *tmps):
        shutil.rmtree(leftover, ignore_errors=True)
    return said


def set_aside(runs_dir: Path) -> dict[str, Path]:
    """The runs of ``runs_dir`` whose folder is missing while a swap's leftover of it (``.<id>.old-<pid>``,
    ``.<id>.tmp-<pid>``) lies there: run id → one such leftover (the last by name)."""
    found = {}
    for aside in sorted(runs_dir.glob(".*.*-*")):
        name, _, kind = aside.name[1:].rpartition(".")
        if kind.split("-")[0] in ("old", "tmp") and name and not (runs_dir / name).exists():
            found[name] = aside
    return found


def recover_abandoned(runs_dir: Path) -> list[str]:
    """:func:`recover` every run of ``runs_dir`` whose folder is missing while a swap's leftover of it lies there
    and no live bench holds its lock (each taken for the while): a bench killed between a swap's two renames left
    it, and a later bench of other runs rebuilt ``results.csv`` without it (an outside review).  → the warnings."""
    said = []
    for name in sorted(set_aside(runs_dir)):
        lock = runs_dir / f"{name}.lock"
        if take_lock(lock) is not None:  # a live bench's: its own swap is in progress
            continue
        try:
            line = recover(runs_dir, name)
        finally:
            lock.unlink(missing_ok=True)
        if line is not None:
            said.append(line)
    return said


def finished_records(run_dir: Path) -> list[dict[str, Any]] | None:
    """The records of the finished, undamaged run in ``run_dir`` (as ``report`` reads it), else None; changes nothing."""
    return _finished(run_dir)[0]


def _finished(run_dir: Path) -> tuple[list[dict[str, Any]] | None, str | None]:
    """(the records of the finished, undamaged run in ``run_dir``, None) or (None, why it is damaged: one line, or
    None when it did not finish)."""
    if not (run_dir / "done").exists():
        return None, None
    try:
        records = read_log(run_dir)
        run_config(run_dir, records[0])  # a finished run's config.json must be whole too
        if (run_dir / checkpoint.NAME).exists():
            checkpoint.quick_check(run_dir / checkpoint.NAME)
    except (DamagedRun, checkpoint.CheckpointError) as exc:
        return None, str(exc)
    return records, None


def retrain_note(run_dir: Path) -> str | None:
    """What a bench without ``--resume`` says before it trains again over ``run_dir``, which holds no usable
    finished run: a finished run that is damaged, or an unfinished one it could continue; None for a folder with
    nothing to lose (a failed run without a checkpoint).  The old folder stays until the new run gets further
    (:func:`settle`)."""
    records, why = _finished(run_dir)
    if records is not None:
        return None
    kept = "the folder stays until the new run gets further"
    if why is not None:
        return f"{why}; retraining it ({kept}; --resume may restore it from its checkpoint)"
    if (run_dir / checkpoint.NAME).exists():
        return (f"{run_dir}: unfinished, {progress(run_dir)} epoch(s) with a checkpoint; retraining it from the start "
                f"without --resume ({kept}; --resume continues it)")
    return None


STALE_LOCK_S = 30.0  # a lock file without a PID (its writer died between creating and writing it) after this
HEARTBEAT_S = 60.0  # how often a process touches the locks it holds (their mtime says it is alive)
REMOTE_STALE_S = 15 * 60.0  # another host's lock untouched for this long: its process is gone (or its node)
BREAK_S = 10.0  # a LOCK.break older than this was left by a process that died breaking a stale lock
_held: set[Path] = set()
_beat: threading.Thread | None = None
_beat_guard = threading.Lock()


def _hold(lock: Path) -> None:
    """Keep ``lock``'s mtime fresh while this process holds it (:func:`_heartbeat`)."""
    global _beat
    with _beat_guard:
        _held.add(lock)
        if _beat is None or not _beat.is_alive():  # (a forked child has no thread of its parent's)
            _beat = threading.Thread(target=_heartbeat, name="pllzoo-lock-heartbeat", daemon=True)
            _beat.start()


def _heartbeat() -> None:
    """Every :data:`HEARTBEAT_S`, touch each lock this process holds; forget those that are gone or no longer
    name it.  A lock of another host cannot be checked by its PID: its age says whether its process lives (an
    outside review: a bench killed by a scheduler's SIGKILL on node A left a lock that a requeue on node B skipped
    for good, exit 75 every time)."""
    while True:
        time.sleep(HEARTBEAT_S)
        me = str(os.getpid())
        for lock in list(_held):
            try:
                if not any(line.split()[:1] == [me] for line in lock.read_text(errors="replace").splitlines()):
                    _held.discard(lock)  # released, and perhaps taken by another process since
                    continue
                os.utime(lock)
            except FileNotFoundError:
                _held.discard(lock)
            except OSError:  # a read-only or lost share: the lock ages, and another host may take it over late
                pass


def _holder_line() -> str:
    start = start_ticks(os.getpid())
    return f"{os.getpid()} {socket.gethostname()}{'' if start is None else ' ' + start}\n"


def take_lock(lock: Path) -> int | str | None:
    """Create ``lock`` holding this PID (``O_CREAT | O_EXCL``); None when taken, else the holder's PID.

    It holds ``PID HOST START``, START the process's start time in clock ticks since boot (Linux's
    ``/proc/PID/stat``; left out where it cannot be read), and one such line more for each process that joined
    it (:func:`join_lock`).  A lock none of whose PIDs is a live process on this host, or is one that started at
    another time (the PID reused: a later process, or PID 1 of a container restarted under the same hostname),
    is stale and taken over; one written on another host (a shared ``--out`` across nodes, or a new container
    with a new hostname) cannot be checked by its PID and counts as held while its holder keeps touching it
    (:func:`_heartbeat`, every :data:`HEARTBEAT_S`): one untouched for :data:`REMOTE_STALE_S` is stale.  A stale
    lock is removed only by the process holding ``LOCK.break`` (:func:`_break_stale`), after it looked again:
    two processes taking it over at once both got it (an outside review)."""
    for _ in range(100):  # each round: the lock is taken, held, or one process has just broken a stale one
        try:
            fd = os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            holder = lock_holder(lock)
            if holder is not None:
                return holder
            _break_stale(lock)
            continue
        try:
            with os.fdopen(fd, "w") as f:
                f.write(_holder_line())
        except OSError:  # a full disk: no empty lock left behind to hold the run for STALE_LOCK_S
            lock.unlink(missing_ok=True)
            raise
        _hold(lock)
        return None
    return "unknown"


def _break_stale(lock: Path) -> None:
    """Remove ``lock`` if it is (still) stale, holding ``LOCK.break`` while it looks and removes, so that of
    two processes that both read it as stale, the second finds the first's new lock, not the stale one.  A
    breaker older than :data:`BREAK_S` was left by a process that died holding it."""
    breaker = lock.with_name(lock.name + ".break")
    try:
        fd = os.open(breaker, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
    except FileExistsError:
        try:
            if time.time() - breaker.stat().st_mtime > BREAK_S:
                breaker.unlink(missing_ok=True)
        except OSError:
            pass
        time.sleep(0.01)  # another process is breaking it: look again after it
        return
    try:
        os.close(fd)
        try:
            stale = lock.read_text(errors="replace")
        except FileNotFoundError:
            return
        if lock_holder(lock, stale) is None:
            lock.unlink(missing_ok=True)
    finally:
        breaker.unlink(missing_ok=True)



def join_lock(lock: Path) -> None:
    """Add this process to ``lock``, which a live process (its parent bench) holds, so that the lock stays held
    while this one lives: a ``--jobs`` worker trains the run its parent locked, and a parent killed with
    ``kill -9`` left its lock naming a dead PID, which a new bench took over while the worker still trained and
    wrote into the folder (an outside review).  The lock is replaced whole (a reader never sees half of it)."""
    try:
        text = lock.read_text(errors="replace")
    except OSError:
        return
    write_atomic(lock, text + ("" if text.endswith("\n") or not text else "\n") + _holder_line())
    _hold(lock)


def lock_holder(lock: Path, text: str | None = None) -> int | str | None:
    """A live PID named in ``lock`` (``"PID on HOST"`` for another host's); None when the lock is stale.

    :param text: the lock's text, read already."""
    try:
        age = time.time() - lock.stat().st_mtime
        text = lock.read_text(errors="replace") if text is None else text  # (bytes not UTF-8: garbage, below)
    except FileNotFoundError:
        return None
    except OSError:
        return "unknown"
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if not lines:  # its writer has not written yet, or died before it did
        return None if age > STALE_LOCK_S else "unknown"
    for line in lines:
        holder = _line_holder(line, age)
        if holder is not None:
            return holder
    return None


def _line_holder(line: str, age: float) -> int | str | None:
    pid_text, _, rest = line.partition(" ")  # "PID HOST START"; older locks hold "PID HOST" or the PID alone
    host, _, start = rest.partition(" ")
    if not pid_text.isascii() or not pid_text.isdigit() or int(pid_text) <= 0:  # (PID 0: os.kill(0, 0) is the group)
        return None if age > STALE_LOCK_S else "unknown"
    if host and host != socket.gethostname():  # its process cannot be looked up from here: its heartbeat can
        return f"{pid_text} on {host}" if age <= REMOTE_STALE_S else None
    pid = int(pid_text)
    if not pid_alive(pid):
        return None
    now = start_ticks(pid)
    if start and now is not None and now != start:  # the PID of a process that started after the bench died
        return None  # (an outside review: a container's PID 1, or a reused PID, held a dead bench's run for good)
    return pid


def pid_alive(pid: int) -> bool:
    """Whether process ``pid`` exists (another user's too)."""
    if os.name == "nt":  # there os.kill(pid, 0) sends CTRL_C_EVENT and a dead PID is a plain OSError (an outside
        return _windows_pid_alive(pid)  # review: a dead bench's lock would have held its run for good)
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # alive, another user's
        pass
    return True


def _windows_pid_alive(pid: int, kernel32: Any = None, last_error: Any = None) -> bool:
    """``pid_alive`` on Windows: a process handle that opens (or is refused) and has no exit code yet."""
    import ctypes

    kernel32 = kernel32 or ctypes.WinDLL("kernel32", use_last_error=True)  # type: ignore[attr-defined]
    handle = kernel32.OpenProcess(0x1000, False, pid)  # PROCESS_QUERY_LIMITED_INFORMATION
    if not handle:  # ERROR_ACCESS_DENIED: alive, another user's; else (87) no such process
        return (last_error or ctypes.get_last_error)() == 5  # type: ignore[attr-defined]
    try:
        code = ctypes.c_ulong()
        return bool(kernel32.GetExitCodeProcess(handle, ctypes.byref(code))) and code.value == 259  # STILL_ACTIVE
    finally:
        kernel32.CloseHandle(handle)


class ResultsBusy(PLLZooError):
    """Another bench held ``OUT/results.lock`` (or another :func:`waiting_lock`) for longer than this one waits."""


SAY_WAIT_S = 2.0  # a wait for results.lock longer than this is said, once


def results_lock(out: Path, wait_s: float = 120.0):
    """Hold ``OUT/results.lock`` (waiting up to ``wait_s`` for another bench) while the tables are rebuilt
    (:func:`waiting_lock`)."""
    return waiting_lock(Path(out) / "results.lock", wait_s, "rebuilding the tables")


@contextlib.contextmanager
def waiting_lock(lock: Path, wait_s: float, doing: str):
    """Hold ``lock``, waiting up to ``wait_s`` for the process that holds it (``doing`` what, for the line that
    says so once the wait passes :data:`SAY_WAIT_S`: an outside review found two silent minutes).

    :raises ResultsBusy: one line, when another live process holds it that long."""
    start, said = time.monotonic(), False
    while (holder := take_lock(lock)) is not None:
        waited = time.monotonic() - start
        if waited > wait_s:
            raise ResultsBusy(f"{lock} is held by another bench (pid {holder}) for over {wait_s:g} s; "
                              f"rerun when it is done (or remove the file if no bench runs)")
        if waited > SAY_WAIT_S and not said:
            warnings.warn(f"waiting for {lock}, held by another bench (pid {holder}) {doing}, up to {wait_s:g} s")
            said = True
        time.sleep(0.05)
    try:
        yield
    finally:
        lock.unlink(missing_ok=True)


def reusable(run_dir: Path) -> list[dict[str, Any]] | None:
    """With ``resume``: the records of a finished, undamaged run; otherwise None, and the run resumes from its
    checkpoint or retrains.

    Damage is one warning line naming the run and what is wrong: a finished run's log or config.json that is
    not whole (:func:`pllzoo.results.read_log`, :func:`~pllzoo.results.run_config`; the run resumes from its
    checkpoint, which holds every record, or
    retrains), or a checkpoint that cannot be used (:func:`pllzoo.checkpoint.read_checkpoint`; a finished
    run's only gets :func:`~pllzoo.checkpoint_file.quick_check`): it is kept as ``checkpoint.pt.damaged`` and the
    run retrains from the start.
    """
    from pllzoo.checkpoint import read_checkpoint  # torch

    path, done = run_dir / checkpoint.NAME, (run_dir / "done").exists()
    log_problem = ckpt_problem = None
    if done:
        try:
            records = read_log(run_dir)
            run_config(run_dir, records[0])  # a finished run's config.json must be whole too
        except DamagedRun as exc:
            log_problem = str(exc)
    if path.exists():
        try:
            (checkpoint.quick_check if done and log_problem is None else read_checkpoint)(path)
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
