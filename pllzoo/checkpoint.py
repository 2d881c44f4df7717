"""One checkpoint per run, rewritten atomically; when it is written, and clean stops.

It holds what a resumed run needs to equal an uninterrupted one: stage and
epoch, model and optimizer state, the method state (PLLState tensors), the
records so far, and the RNG states (the trainer also derives each epoch's
streams from the seed, so the RNG states are a second line of defence).

Safe loading: the file holds tensors and plain data only (the records are made plain when
saved) and is read with ``torch.load(weights_only=True)``, so a crafted file runs no code.
It is marked ``format``/``version`` (:data:`FORMAT`, :data:`VERSION`); :func:`read_checkpoint`
refuses, with one line (:class:`CheckpointError`), a file that is empty, truncated, not a
pllzoo checkpoint, of another version, or missing a part.

When (:class:`Bookkeeper`): every ``train.checkpoint_every`` epochs (0: off) or once
``train.checkpoint_minutes`` have passed since the last one (0: off), whichever comes
first, and always at the end of each stage and of the run.  The defaults (0 and 10
minutes) cost a tiny CPU run nothing and a 1000-epoch GPU run one ~90 MB write per
10 minutes.  Both are bookkeeping: they never change a number, so they stay out of
the run id (:data:`pllzoo.run.BOOKKEEPING_FIELDS`).

Clean stops, always at an epoch boundary with a checkpoint of that boundary, then
:class:`Stopped`: SIGINT/SIGTERM and the other stop signals (:func:`stop_signals`; the current epoch finishes,
a second signal abandons it and keeps the last checkpoint), or a deadline
(``pllzoo bench --time-limit``) that the next epoch plus a checkpoint would miss.
Time is read from :data:`clock`, which tests replace.
"""

from __future__ import annotations

import contextlib
import pickle
import signal
import threading
import time
import warnings
import zipfile
from pathlib import Path
from typing import Any, Callable, Iterator

import torch

from pllzoo import best_effort, interrupts
from pllzoo.atomic import write_atomic
from pllzoo.checkpoint_file import NAME, CheckpointError, read_refused  # torch-free (report reads folders)
from pllzoo.errors import PLLZooError
from pllzoo.state import PLLState

TIME_LIMIT_EXIT = 75  # EX_TEMPFAIL (sysexits.h): stopped at --time-limit, run again with --resume
clock: Callable[[], float] = time.monotonic  # seconds; system-wide, so job processes share one deadline


class Stopped(PLLZooError):
    """Training stopped cleanly at an epoch boundary; ``--resume`` continues it.

    ``exit_code`` is :data:`TIME_LIMIT_EXIT` at a time limit and 128 + the signal number after
    SIGINT/SIGTERM (the shell's convention), so a retry loop can tell the two apart.
    """

    def __init__(self, message: str, exit_code: int) -> None:
        super().__init__(message)
        self.exit_code = exit_code


class Skipped(Stopped):
    """Runs left untrained because another live bench holds them (their lock): the rest went on; rerunning
    once that bench is done trains them (exit :data:`TIME_LIMIT_EXIT`, as a clean stop)."""


class Abandoned(KeyboardInterrupt):
    """A second SIGINT/SIGTERM (after the one that asked for a clean stop): the epoch is abandoned, each run
    keeps its last checkpoint.  ``exit_code`` is 128 + that signal's number, as for a clean stop by it;
    ``failed`` holds the one-line reasons of the runs that failed before it (``--jobs``: index → reason)."""

    def __init__(self, signum: int, failed: dict[int, str] | None = None) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum, self.exit_code, self.failed = signum, 128 + signum, dict(failed or {})


def from_signal(exc: KeyboardInterrupt) -> bool:
    """Whether ``exc`` came from a stop signal, not from code that raised it: an :class:`Abandoned`; under
    :func:`pllzoo.interrupts.watch` (the CLI), one after a SIGINT arrived; else any ``KeyboardInterrupt`` while
    SIGINT is neither this module's (:func:`stop_signals` is not active, so Python's Ctrl-C handler may have
    raised it) nor ignored (``nohup cmd &``: no signal raises anything then)."""
    if isinstance(exc, (Abandoned, interrupts.Interrupted)):  # (the second: a stop signal before training)
        return True
    if interrupts.watching():
        return interrupts.arrived()
    return signal.getsignal(signal.SIGINT) not in (_on_signal, signal.SIG_IGN)


FORMAT = "pllzoo-checkpoint"  # the marker key ``format`` of every checkpoint
VERSION = 1  # the layout below; a file of another version is refused (retrain the run)
KEYS = ("format", "version", "stage", "epoch", "model", "optimizer", "state", "records", "rng", "modules")


def _rng_states() -> dict[str, Any]:
    states: dict[str, Any] = {"torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        states["cuda"] = torch.cuda.get_rng_state_all()
    return states


_PLAIN = (str, int, float, bool, type(None))


def _plain(obj: Any) -> Any:
    """``obj`` with every value the safe loader refuses made plain: numpy scalars → Python numbers,
    anything else unknown → its ``str`` (as the log writes it)."""
    if isinstance(obj, dict):
        return {k if type(k) in (str, int) else str(k): _plain(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        values = [_plain(v) for v in obj]
        return values if isinstance(obj, list) else tuple(values)
    if type(obj) in _PLAIN or isinstance(obj, torch.Tensor):  # exact types: np.float64 subclasses float
        return obj
    item = getattr(obj, "item", None)  # numpy scalars
    if callable(item):
        with contextlib.suppress(Exception):
            value = item()
            if isinstance(value, (str, int, float, bool)):
                return value
    return str(obj)


def save_checkpoint(
    run_dir: Path, stage: int, epoch: int, model: torch.nn.Module, optimizer: torch.optim.Optimizer,
    state: PLLState, records: list[dict[str, Any]], modules: dict[str, torch.nn.Module] | None = None,
    run: str | None = None,
) -> Path:
    """``run``: the run's id, kept as the optional key ``run`` (:func:`check_owner` compares it)."""
    path = Path(run_dir) / NAME
    _write(path, {
        "format": FORMAT, "version": VERSION,
        "stage": stage, "epoch": epoch, "model": model.state_dict(), "optimizer": optimizer.state_dict(),
        "state": state.state_dict(), "records": _plain(records), "rng": _rng_states(),
        "modules": {name: m.state_dict() for name, m in (modules or {}).items()},
        **({"run": run} if run is not None else {}),
    })
    return path


def _write(path: Path, ckpt: dict[str, Any]) -> None:
    """Write atomically: a reader sees the old file or the new one, never a part."""
    write_atomic(path, lambda f: torch.save(ckpt, f))


def slim_checkpoint(path: Path) -> tuple[int, int]:
    """Rewrite the checkpoint at ``path`` without the optimizer's per-parameter state → (bytes before, after).

    SGD's momentum buffers hold as many numbers as the model: ResNet-18's checkpoint is 90 MB with them and
    46 MB without, which is what fits a device call's transfer limits (``benchmarks/gpu/carry_run.py``).
    A run resumed from a slim checkpoint restarts momentum from its next gradient (torch's SGD starts a
    missing buffer at the gradient), so it no longer equals an uninterrupted run; the trainer warns and
    marks the first epoch after the restart ``momentum_restarted`` in the run's records.

    :raises CheckpointError: as :func:`read_checkpoint`.
    """
    path = Path(path)
    ckpt = read_checkpoint(path)
    before = path.stat().st_size
    ckpt["optimizer"] = {**ckpt["optimizer"], "state": {}}
    _write(path, ckpt)
    return before, path.stat().st_size


def lacks_momentum(ckpt: dict[str, Any]) -> bool:
    """A checkpoint of an optimizer with momentum but without its buffers (:func:`slim_checkpoint`)."""
    opt = ckpt["optimizer"]
    groups = opt.get("param_groups") or []
    return not opt.get("state") and any(float(g.get("momentum", 0) or 0) > 0 for g in groups)


def read_checkpoint(path: Path) -> dict[str, Any]:
    """The checkpoint at ``path``, read safely (tensors and plain data only; nothing in it runs).

    :raises CheckpointError: one line saying what is wrong with the file.
    :raises CheckpointUnreadable: the system refused the read (:func:`pllzoo.checkpoint_file.read_refused`).
    """
    path = Path(path)
    try:
        size = path.stat().st_size
    except OSError as exc:
        read_refused(path, exc)
        raise CheckpointError(f"{path}: cannot read it ({exc.strerror or exc})") from None
    if size == 0:
        raise CheckpointError(f"{path}: damaged checkpoint (empty, 0 bytes)")
    try:
        with warnings.catch_warnings():  # torch's notes on foreign files: the refusal below says it in one line
            warnings.simplefilter("ignore")
            ckpt = torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError:
        if not zipfile.is_zipfile(path) and path.read_bytes()[:1] != b"\x80":  # neither an archive nor a pickle
            raise CheckpointError(f"{path}: damaged checkpoint (truncated or corrupt: neither a torch archive nor "
                                  "a pickle)") from None
        raise CheckpointError(f"{path}: not a pllzoo checkpoint (it holds objects other than tensors and plain "
                              f"data; refused without running them)") from None
    except Exception as exc:  # torch's reader: truncated zip, garbage bytes, ...
        read_refused(path, exc)
        said = (str(exc).strip().splitlines() or [""])[0]  # with its type: a bare KeyError said "174812789"
        first = f"{type(exc).__name__}: {said}"[:120] if said else type(exc).__name__
        raise CheckpointError(f"{path}: damaged checkpoint (truncated or corrupt: {first})") from None
    _check_crcs(path)
    _check_layout(path, ckpt)
    return ckpt


def _check_crcs(path: Path) -> None:
    """Every member of the archive against the CRC-32 written with it: torch's reader does not check them, and a
    file with flipped bytes inside a tensor loaded as other weights (an outside review: evaluate re-scored a run
    at 21 % instead of 48 %, exit 0).  A pass over the file (~0.1 s for ResNet-18's)."""
    try:
        with zipfile.ZipFile(path) as archive:
            bad = archive.testzip()
    except (OSError, zipfile.BadZipFile, ValueError, RuntimeError) as exc:  # a pickle checkpoint is no archive
        read_refused(path, exc)
        if zipfile.is_zipfile(path):
            raise CheckpointError(f"{path}: damaged checkpoint (corrupt: {type(exc).__name__})") from None
        return
    if bad is not None:
        raise CheckpointError(f"{path}: damaged checkpoint (its part {bad!r} fails its CRC-32 check: bytes changed "
                              "since it was written)")


_CPU_RNG_SHAPE = torch.get_rng_state().shape  # torch's CPU generator state: any other size cannot be restored


def _records_ok(records: list[Any]) -> bool:
    """Whether ``records`` read as a run's log: dicts with whole ``stage_index``, ``epoch`` and ``epochs``,
    ``1 <= epoch <= epochs``, in training order (stage by stage, epochs one after another)."""
    last = None
    for r in records:
        if not isinstance(r, dict):
            return False
        pos = tuple(r.get(k) for k in ("stage_index", "epoch", "epochs"))
        if not all(isinstance(v, int) and not isinstance(v, bool) for v in pos) or not 1 <= pos[1] <= pos[2]:
            return False
        if last is not None and not (pos[0] == last[0] and pos[1] == last[1] + 1 or
                                     pos[0] > last[0] and pos[1] == 1):
            return False
        last = pos
    return True


def _check_layout(path: Path, ckpt: Any) -> None:
    if not isinstance(ckpt, dict) or ckpt.get("format") != FORMAT:
        old = isinstance(ckpt, dict) and {"model", "rng", "records"} <= set(ckpt)
        raise CheckpointError(f"{path}: " + ("written by an older pllzoo (no format marker)"
                                             if old else "not a pllzoo checkpoint (no format marker)"))
    if ckpt.get("version") != VERSION:
        raise CheckpointError(f"{path}: checkpoint format version {ckpt.get('version')!r}, this pllzoo reads "
                              f"version {VERSION}")
    missing = [k for k in KEYS if k not in ckpt]
    if missing:
        raise CheckpointError(f"{path}: damaged checkpoint (missing {', '.join(missing)})")
    wrong = [k for k, kind in (("stage", int), ("epoch", int), ("model", dict), ("optimizer", dict),
                               ("state", dict), ("records", list), ("rng", dict), ("modules", dict))
             if not isinstance(ckpt[k], kind) or isinstance(ckpt[k], bool)]
    rng = ckpt["rng"].get("torch") if isinstance(ckpt["rng"], dict) else None
    if not (isinstance(rng, torch.Tensor) and rng.dtype == torch.uint8 and rng.shape == _CPU_RNG_SHAPE):
        wrong.append("rng.torch")
    if isinstance(ckpt["records"], list) and not _records_ok(ckpt["records"]):
        wrong.append("records")
    if not wrong and (ckpt["stage"] < 0 or ckpt["epoch"] < 0):
        wrong.append("stage/epoch")
    last = ckpt["records"][-1] if not wrong and ckpt["records"] else None
    if last is not None and (last["stage_index"], last["epoch"]) != (ckpt["stage"], ckpt["epoch"] + 1):
        wrong.append("records: the last is not the checkpoint's epoch")
    if wrong:
        raise CheckpointError(f"{path}: damaged checkpoint (bad {', '.join(dict.fromkeys(wrong))})")


def check_owner(ckpt: dict[str, Any], path: Path, **run: Any) -> None:
    """Refuse a checkpoint written by another run: it names the run's id (key ``run``, since 2026-11-26), and
    its records their method, dataset and seed.

    ``run``: this run's ``run`` id, ``method``, ``dataset`` and ``seed`` (a None value is not compared).
    :raises CheckpointError: one line naming what differs.
    """
    last = {**(ckpt["records"][-1] if ckpt["records"] else {}), **({"run": ckpt["run"]} if "run" in ckpt else {})}
    differ = [f"{key} {last[key]!r}, not {value!r}" for key, value in run.items()
              if value is not None and key in last and last[key] != value]
    if differ:
        raise CheckpointError(f"{path}: the checkpoint of another run ({'; '.join(differ)}); "
                              "remove it to retrain this run")


def load_checkpoint(run_dir: Path) -> dict[str, Any] | None:
    """The run's checkpoint (:func:`read_checkpoint`), or None when there is none; restores the RNG states."""
    path = Path(run_dir) / NAME
    if not path.exists():
        return None
    ckpt = read_checkpoint(path)
    restore_rng(ckpt)
    return ckpt


def restore_rng(ckpt: dict[str, Any]) -> None:
    """Put a checkpoint's RNG states in place (:func:`load_checkpoint` does; so does a DDP rank that
    received the checkpoint from rank 0)."""
    try:
        torch.set_rng_state(ckpt["rng"]["torch"])
        if "cuda" in ckpt["rng"] and torch.cuda.is_available():  # one state per GPU it saw; a run resumed on a
            # machine with fewer GPUs (issue 11: another machine) keeps the first ones (an outside review:
            # set_rng_state_all raised IndexError); the trainer's own streams derive from (seed, stage, epoch)
            for device, state in zip(range(torch.cuda.device_count()), ckpt["rng"]["cuda"]):
                torch.cuda.set_rng_state(state, device)
    except (RuntimeError, TypeError, ValueError) as exc:  # a state torch cannot take (another build, another GPU count)
        raise CheckpointError(f"damaged checkpoint (its RNG state cannot be restored: {exc})") from None


# ---------------------------------------------------------------------- signals
_received: int | None = None  # the first SIGINT/SIGTERM while stop_signals() is active
_received_at = 0.0  # its time.monotonic()
_depth = 0
#: a second signal this soon after the first is the same stop, not "abandon the epoch": ``timeout`` (without
#: --foreground) and a batch system may send one signal to the process and then to its whole group
REPEAT_S = 1.0


def _on_signal(signum: int, frame: Any) -> None:
    global _received, _received_at
    if _received is not None:
        if time.monotonic() - _received_at < REPEAT_S:
            return
        raise Abandoned(signum)  # the second one abandons the epoch; the last checkpoint stays
    _received, _received_at = signum, time.monotonic()
    # one unbuffered write to descriptor 2: a print here, landing in the middle of the loop's own write to
    # sys.stderr (a progress line), raises "reentrant call" into that write, i.e. into the run
    best_effort.notice(f"{signal.Signals(signum).name} received: stopping with a checkpoint after the current epoch "
                       "(send it again to abandon the epoch)")


@contextlib.contextmanager
def stop_signals() -> Iterator[None]:
    """While active, the stop signals (:data:`pllzoo.interrupts.STOP_SIGNALS`) ask for a clean stop
    (:func:`stop_requested`) instead of killing.

    Only a signal with its default action is taken over: one a program ignores or handles itself
    (a ``--jobs`` worker) stays as it is.  Re-entrant (the bench and each trainer enter it);
    outside the main thread it does nothing.
    """
    global _received, _depth
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {}
    if _depth == 0:
        _received = None
        previous = interrupts.take_over(_on_signal)
    _depth += 1
    try:
        yield
    finally:
        _depth -= 1
        for s, handler in previous.items():
            signal.signal(s, handler)


def request_stop(signum: int) -> None:
    """Ask for a clean stop as if ``signum`` had arrived, without a message and without ever abandoning the
    epoch (a ``--jobs`` worker, told by its parent; :mod:`pllzoo.jobs`).  Any thread may call it."""
    global _received
    if _received is None:
        _received = signum


def take_request() -> int | None:
    """The signal number of the last stop request, or None, and forget it (:func:`pllzoo.cli` asks after an
    in-process command whether Ctrl-C was pressed in it)."""
    global _received
    signum, _received = _received, None
    return signum


def stop_requested() -> int | None:
    """The signal number of a pending stop request, or None."""
    return _received


def signal_stop(progress: str, signum: int | None = None) -> Stopped:
    """A stop by this process's signal, or by ``signum``, another process's (torchrun: the ranks stop together)."""
    signum = _received if signum is None else signum
    name = signal.Signals(signum).name
    return Stopped(f"stopped by {name}{'' if signum == _received else ' to another process'} {progress}",
                   128 + signum)


def misses(deadline: float, epoch_s: float | None = None) -> bool:
    """Whether the deadline has passed, or an epoch of ``epoch_s`` seconds (1.1 × it, as
    :meth:`Bookkeeper.out_of_time`) started now would miss it: a run is not started then (:mod:`pllzoo.bench`,
    :mod:`pllzoo.jobs`)."""
    now = clock()
    return now >= deadline or (epoch_s is not None and now + 1.1 * epoch_s > deadline)


def time_stop(progress: str) -> Stopped:
    return Stopped(f"stopped {progress} to stay within the time limit", TIME_LIMIT_EXIT)


# ---------------------------------------------------------------------- cadence
_part_progressed = True  # whether this part of a time-limited bench trained an epoch yet (start_part)


def start_part() -> None:
    """A time-limited bench (or one ``--jobs`` worker of it) begins: until it has trained one epoch, the deadline
    stops nothing, so every part makes progress.  (The clock starts with the command: a limit shorter than
    planning plus one epoch stopped each part before its first epoch, and a retry loop never ended.)"""
    global _part_progressed
    _part_progressed = False


def part_progressed() -> bool:
    """Whether this part trained an epoch (True outside a time-limited bench: the deadline stops as it says)."""
    return _part_progressed


class Bookkeeper:
    """At each epoch boundary: is a checkpoint due, and should training stop first?

    :param every: checkpoint every this many epochs (0: no epoch trigger).
    :param minutes: checkpoint once this many minutes passed since the last one (0: no time trigger).
    :param deadline: a :data:`clock` time by which training must have stopped with a checkpoint, or None.
    :param history: seconds of earlier epochs (the records' ``wall_s``), a resumed run's first estimate.
    """

    def __init__(self, every: int, minutes: float, deadline: float | None, history: list[float] = ()) -> None:
        if every < 0 or minutes < 0:
            raise PLLZooError("train.checkpoint_every and train.checkpoint_minutes must be ≥ 0 (0 turns one off)")
        self.every, self.minutes, self.deadline = every, minutes, deadline
        self.epoch_s = [float(s) for s in history][-5:]  # the last few epochs' seconds
        self.save_s: list[float] = []
        self.last_save, self.unsaved = clock(), 0  # epochs completed since the last checkpoint
        self._t0 = self.last_save

    def epoch_started(self) -> None:
        self._t0 = clock()

    def epoch_done(self) -> None:
        global _part_progressed
        self.epoch_s = (self.epoch_s + [clock() - self._t0])[-5:]
        self.unsaved += 1
        _part_progressed = True

    @contextlib.contextmanager
    def saving(self) -> Iterator[None]:
        """Time a checkpoint write (the next stop decision budgets for the slowest recent one)."""
        t0 = clock()
        yield
        self.last_save, self.unsaved = clock(), 0
        self.save_s = (self.save_s + [self.last_save - t0])[-5:]

    def due(self, stage_end: bool) -> bool:
        """A checkpoint now: at a stage's (and so the run's) end, or when a trigger fired."""
        if stage_end:
            return True
        by_epochs = self.every > 0 and self.unsaved >= self.every
        return by_epochs or (self.minutes > 0 and clock() - self.last_save >= 60 * self.minutes)

    def out_of_time(self, save_guess: Callable[[], float]) -> bool:
        """Would the next epoch (1.1 × the slowest of the last five) and a checkpoint miss the deadline?

        Before any epoch time is known (a fresh run) only a deadline already passed stops, and nothing does
        before the part's first epoch (:func:`start_part`).
        """
        if self.deadline is None or not _part_progressed:
            return False
        now = clock()
        if not self.epoch_s:
            return now >= self.deadline
        save_s = max(self.save_s) if self.save_s else save_guess()
        return now + 1.1 * max(self.epoch_s) + save_s > self.deadline


def save_guess_s(*parts: torch.nn.Module | torch.optim.Optimizer) -> float:
    """A first guess of a checkpoint's write time (1 s + its bytes at 100 MB/s), until one is measured."""
    n_bytes = 0
    for obj in parts:
        for t in _tensors(obj.state_dict()):
            n_bytes += t.numel() * t.element_size()
    return 1.0 + n_bytes / 100e6


def _tensors(obj: Any) -> Iterator[torch.Tensor]:
    if isinstance(obj, torch.Tensor):
        yield obj
    elif isinstance(obj, dict):
        for v in obj.values():
            yield from _tensors(v)
    elif isinstance(obj, (list, tuple)):
        for v in obj:
            yield from _tensors(v)
