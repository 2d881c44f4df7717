"""Several runs at once: ``pllzoo bench --jobs N`` trains up to N planned runs in worker processes.

Each run gets its own process (started by ``forkserver``, else ``spawn``; never ``fork``, since
CUDA may be live in the parent).  The child registers the parent's plugins under the same names
(modules by import name, other objects pickled, with the parent's ``sys.path``), so in-process
plugins work too and ``PLLZOO_LOAD_PLUGINS`` is not re-read; it unpickles its
:class:`~pllzoo.bench.RunPlan`, sets its torch threads and trains through the same
:func:`pllzoo.bench._train` as the sequential path, so its run folder and run id are those of
``--jobs 1``, and on CPU so is every record given the same thread count (:mod:`pllzoo.threads`:
the count may change a float sum; by default each worker gets ``cores // N``).  The child sends
``("run" | "epoch" | "warning" | "done" | "failed", payload)`` messages through a pipe of its own
(no lock shared between workers, nothing buffered at exit); the parent turns them into the same
``on_run``/``on_epoch`` calls as the sequential path, so the CLI shows one progress bar per run,
and it collects the final records in plan order.

When it pays.  On a GPU that one run does not fill: small models or small batches, e.g. a
ResNet-18 on 32×32 images at batch 64-256, where one run leaves the GPU waiting on Python, the
data path and kernel launches, so two to four runs share it with little slow-down each.  On CPU
the runs share the cores, so it rarely beats ``--jobs 1``.

Costs.  Each process holds its own data, model and optimizer, and on CUDA its own context
(0.3-0.5 GiB) and allocator cache: memory grows about N-fold.  The plan, data included, is sent
by plain pickling, a copy through a pipe: CIFAR-10-sized data (185 MB pickled) took 0.2 s to
pickle and 0.2 s to unpickle on this project's 2-core dev machine.  Not torch's shared memory:
``/dev/shm`` is often small in containers.  Not re-loading in the child either: that would repeat
the loader's work per run and rest on the loader being deterministic.  Start-up: the forkserver
imports torch, ``torch._dynamo`` and pllzoo once (about 6.5 s on the dev machine), then each worker starts
in under a second plus its plugins' imports; the code is read then, so do not edit it during a bench.
(``torch._dynamo``: a torch optimizer imports it when the first one is made, 2.5 s of each worker's start
otherwise; a 4-run ``--jobs 2`` bench took 22 s, 12 s with it preloaded.)  As
with any forkserver/spawn start, a script that calls ``execute(jobs=N)`` needs the
``if __name__ == "__main__":`` guard (a worker re-imports the main module; ``pllzoo bench`` has it).
``--view-workers`` applies per run: N runs start N pools.

Failures.  A run that raises is reported through ``on_run(plan, "failed: <one line>")`` with its
traceback in its folder as ``error.txt`` (:func:`record_failure`, shared with the sequential path),
and the other runs go on; :func:`run_parallel` returns the failed runs' one-line reasons beside the
finished runs' records, and :func:`pllzoo.bench.execute` writes them to ``results.csv`` and raises
one :class:`RunsFailed` naming them, as for ``--jobs 1``; ``--resume`` reruns only those.  A worker
that dies without a word (killed, out of memory) is reported the same way.

Stops.  Ctrl-C, SIGTERM or another stop signal (:data:`pllzoo.interrupts.STOP_SIGNALS`) reaching the parent
(alone, or with its whole process group, as a terminal's Ctrl-C, ``timeout`` or a batch system's preemption send
it) stops the workers as the sequential path
stops its run: the parent says so once, tells every worker through a shared int they poll (not a
signal, so a worker that got the group's signal too does not count two), starts no more runs, and
each worker ends its current epoch with a checkpoint (a repeat within a second is the same stop:
:data:`pllzoo.checkpoint.REPEAT_S`); :class:`RunsStopped` then carries the finished runs' records, so
``results.csv`` covers them and the CLI prints how to continue (exit 128 + the signal).  A second
signal abandons the epochs: the workers are killed, each keeping its last checkpoint.  Any other
exception in the parent stops the workers the first way.  A worker ignores the other stop signals (the parent
decides) and takes a SIGTERM of its own as that stop; a worker whose parent died stops itself the same way, and its
run's lock, which it joined, stays held until it has.
The forkserver is started with the stop signals ignored (:func:`_start_server`).

Time limit.  ``--time-limit`` gives every worker the bench's deadline on ``time.monotonic`` (one clock
for all processes): each stops at an epoch boundary with a checkpoint before it, runs not started by
then wait, and :class:`RunsStopped` reports the clean stops with the finished runs' records.
"""

from __future__ import annotations

import contextlib
import multiprocessing as mp
import multiprocessing.connection
import pickle
import signal
import sys
import threading
import time
import traceback
import warnings
from collections import deque
from pathlib import Path
from types import ModuleType
from typing import Any, Callable, Iterator

from pllzoo import best_effort, checkpoint, interrupts
from pllzoo import threads as torch_threads
from pllzoo.atomic import write_atomic
from pllzoo.checkpoint import TIME_LIMIT_EXIT, Stopped
from pllzoo.errors import PLLZooError
from pllzoo.plugins import debug_traceback, one_line
from pllzoo.threads import default_threads, set_threads

POLL_S = 0.2  # the parent's longest wait between looks at its workers
STOP_GRACE_S = 120.0  # a stopped worker gets this long to end its epoch with a checkpoint, then is killed


def plugin_specs(registry) -> list[tuple[str, str, Any]]:
    """How a worker re-registers each plugin of ``registry``: a module by its import name, else the pickled object.

    :raises PLLZooError: a plugin registered in-process that cannot be pickled (say, a local class).
    """
    specs = []
    for name, plugin in registry.pm.list_name_plugin():
        importable = isinstance(plugin, ModuleType) and plugin.__name__ != "__main__"
        if importable and sys.modules.get(plugin.__name__) is plugin:
            specs.append((name, "module", plugin.__name__))
            continue
        try:
            specs.append((name, "object", pickle.dumps(plugin)))
        except Exception as exc:
            raise PLLZooError(
                f"plugin {name!r} cannot be sent to --jobs worker processes ({one_line(exc)}); "
                "define it in an importable module or use --jobs 1") from None
    return specs


def _rebuild_registry(specs: list[tuple[str, str, Any]]):
    """The parent's registry, in a worker: the same plugins under the same names."""
    import importlib

    from pllzoo.plugins import make_plugin_manager
    from pllzoo.registry import Registry

    pm, infos = make_plugin_manager(load_entrypoints=False)  # the built-ins (and PLLZOO_TRACE_PLUGINS)
    for name, how, what in specs:
        if pm.get_plugin(name) is None:
            pm.register(importlib.import_module(what) if how == "module" else pickle.loads(what), name=name)
    pm.check_pending()
    return Registry.build(pm, infos)


def describe(exc: BaseException) -> str:
    """One line: a user error's message, else ``Type: message`` (:func:`pllzoo.plugins.one_line`)."""
    if isinstance(exc, PLLZooError):
        return (str(exc).strip().splitlines() or [""])[0]
    return one_line(exc)


def record_failure(run_dir: Path, exc: BaseException) -> str:
    """Save ``exc``'s traceback as ``run_dir/error.txt`` (a rerun of the run removes it,
    :func:`pllzoo.bench._train`) and return its one-line reason (:func:`describe`).  Both paths
    of ``pllzoo bench`` record a failed run through this."""
    if run_dir.is_symlink():  # a folder elsewhere (pllzoo.bench._train refuses to train into it): nothing written
        return describe(exc)
    run_dir.mkdir(parents=True, exist_ok=True)
    write_atomic(run_dir / "error.txt", "".join(traceback.format_exception(type(exc), exc, exc.__traceback__)))
    debug_traceback(exc)  # PLLZOO_DEBUG=1: on the terminal too (an outside review: only the bench's own was shown)
    return describe(exc)


def failure_line(failed: list[tuple[str, str]], attempted: int, runs_dir: Path, overwrite: bool = False) -> str:
    """One line naming every failed run: ``failed`` holds ``(run name, reason)``, ``attempted`` counts
    the runs trained this time (not the reused ones); ``overwrite``: they were retrained over finished runs,
    which a failure keeps (so --resume would reuse those, not retrain)."""
    names = "; ".join(f"{name} ({why})" for name, why in failed)
    others = f"The others finished in {runs_dir}; " if len(failed) < attempted else ""
    again = ("retrain them with --overwrite and their --methods and --seeds alone (--resume would keep the earlier "
             "finished runs, and --overwrite retrains every run it plans)" if overwrite
             else "rerun with --resume to run only the failed ones")
    return f"{len(failed)} of {attempted} runs failed: {names}. {others}tracebacks in each run's error.txt; " \
           f"fix the cause and {again}"


class RunsFailed(PLLZooError):
    """Some runs of a bench failed and the others finished: ``rows`` is what ``results.csv`` holds
    (a ``status`` and an ``error`` column say which), ``failed`` the failed ``(plan, reason)`` pairs."""

    def __init__(self, message: str, rows, failed: list[tuple[Any, str]]) -> None:
        super().__init__(message)
        self.rows = rows
        self.failed = failed


def _watch_parent(alive) -> None:
    """Stop this worker (as if terminated) once the parent is gone: ``alive``'s other end, which only
    the parent holds, closes.  (Not ``os.getppid()``: a forkserver outlives the parent while its
    workers run.)"""
    with contextlib.suppress(EOFError, OSError):
        alive.recv()  # the parent never sends: this returns by EOF only
    checkpoint.request_stop(signal.SIGTERM)


def _watch_stop(signum) -> None:
    """Stop this worker cleanly once the parent puts its signal in ``signum`` (a shared int, polled)."""
    while not signum.value:
        time.sleep(POLL_S)
    checkpoint.request_stop(signum.value)


def _child(blob: bytes, specs, sys_path: list[str], run_dir: str, resume: bool, threads: int, deadline: float | None,
           conn, alive, signum, lock: str | None = None) -> None:
    """Worker body: train one plan, sending each step of it (and each warning) through ``conn``.

    The stop signals are ignored (Ctrl-C reaches the whole process group; the parent decides).  A SIGTERM, the
    parent's signal put in ``signum`` (a shared int) or the parent's end asks for a
    clean stop (:func:`pllzoo.checkpoint.request_stop`): the current epoch ends with a checkpoint, then
    the run stops.  Quietly: the parent says it once for all.  The worker joins the run's ``lock``, which the
    parent holds (:func:`pllzoo.runfolders.join_lock`): a parent killed outright leaves a lock that is held
    while its worker still finishes the epoch.
    """
    interrupts.ignore()  # the parent decides (the group's signal reaches it too) ...
    signal.signal(signal.SIGTERM, lambda *_: checkpoint.request_stop(signal.SIGTERM))  # ... but for a SIGTERM
    best_effort.install()  # the parent's stderr, inherited: a `| tee` that Ctrl-C ended fails no run here either

    def send(*message) -> None:
        with contextlib.suppress(OSError):  # the parent is gone: _watch_parent stops the run cleanly
            conn.send(message)

    warnings.showwarning = lambda message, *_, **__: send("warning", str(message))
    sys.path[:0] = [p for p in sys_path if p not in sys.path]  # the parent's, so its plugin modules import
    torch_threads.own_process = True  # set_threads may set inter-op threads: this process is pllzoo's
    set_threads(threads)
    if deadline is not None:
        checkpoint.start_part()  # this worker's run trains an epoch before the deadline stops it
    from pllzoo import bench

    run_dir = Path(run_dir)
    if lock is not None:
        from pllzoo.runfolders import join_lock

        with contextlib.suppress(OSError):  # a lock it cannot add itself to is the parent's alone, as before
            join_lock(Path(lock))
    try:
        with checkpoint.stop_signals():  # entered here first, so the trainer's own entry keeps a stop asked for
            # before it (it takes over no signal: they are ignored, SIGTERM handled above)
            threading.Thread(target=_watch_parent, args=(alive,), daemon=True).start()
            threading.Thread(target=_watch_stop, args=(signum,), daemon=True).start()
            registry, plan = _rebuild_registry(specs), pickle.loads(blob)
            records = bench._train(registry, plan, run_dir, resume, on_epoch=lambda p, rec: send("epoch", rec),
                                   on_run=lambda p, status: send("run", status), deadline=deadline, threads=threads)
        send("done", records[-1])
    except Stopped as exc:  # a clean stop (time limit, SIGTERM) with a checkpoint: --resume continues, no error
        send("stopped", (describe(exc), exc.exit_code))
    except (Exception, KeyboardInterrupt) as exc:  # a worker ignores SIGINT and turns SIGTERM into a clean stop,
        send("failed", record_failure(run_dir, exc))  # so a KeyboardInterrupt here is one a plugin raised


def _context():
    """``forkserver`` (its server imports torch and pllzoo once, so a worker starts in about a second
    instead of four, unless the server is already running), else ``spawn``."""
    if "forkserver" not in mp.get_all_start_methods():
        return mp.get_context("spawn")
    ctx = mp.get_context("forkserver")
    # importing torch, or torch._dynamo (the module docstring says why it is here), initialises no CUDA
    ctx.set_forkserver_preload(["__main__", "pllzoo.bench", "torch._dynamo"])
    return ctx


def _name(plan) -> str:
    return f"{plan.method.name} seed {plan.seed}"


def run_parallel(
    registry, plans: list, runs_dir: Path, resume: bool, todo: list[int], jobs: int,
    on_epoch: Callable[[Any, dict[str, Any]], None] | None = None,
    on_run: Callable[[Any, str], None] | None = None,
    threads: int | None = None, deadline: float | None = None, dirs: dict[int, Path] | None = None,
) -> tuple[dict[int, dict[str, Any]], dict[int, str]]:
    """Train ``plans[i]`` for ``i`` in ``todo`` into ``runs_dir/<run-id>`` (or ``dirs[i]``, e.g. a temporary
    folder the caller swaps in, :func:`pllzoo.bench.execute`), up to ``jobs`` at a time.

    :param todo: indices into ``plans``, started in this order (the caller has cleared or kept their folders).
    :param threads: torch threads per worker; ``None``: :func:`pllzoo.threads.default_threads` of ``jobs``.
    :param deadline: a :data:`pllzoo.checkpoint.clock` time (``time.monotonic``, the same clock in every
        process): each worker stops by it at an epoch boundary with a checkpoint; runs not started by then
        are left for ``--resume``.
    :returns: index → final record of each finished run, and index → one-line reason of each failed run
        (its traceback in its folder's ``error.txt``); together they cover ``todo``.
    :raises RunsStopped: some runs stopped cleanly (time limit, SIGTERM); it carries the final records of
        the runs that did finish and the reasons of those that failed.
    """
    specs = plugin_specs(registry)  # an unpicklable plugin fails here, before anything starts
    threads = threads or default_threads(jobs)
    ctx = _context()
    _start_server(ctx)
    alive, parent_end = ctx.Pipe(duplex=False)  # workers watch ``alive``; only this process holds ``parent_end``
    # the parent's stop signal, 0 until one came: every worker polls it (a shared int, no lock: a multiprocessing
    # Event's set() waits for each waiter to wake, and blocks for ever on one whose worker already exited)
    signum = ctx.RawValue("i", 0)
    pending: deque[int] = deque(todo)
    running: dict[int, tuple[Any, Any]] = {}  # index → (process, the read end of its pipe)
    finals: dict[int, dict[str, Any]] = {}
    failed: dict[int, str] = {}
    stopped: dict[int, tuple[str, int]] = {}  # index → (one line, exit status)
    progressed = deadline is None or checkpoint.part_progressed()  # a worker trained an epoch in this part
    began: dict[int, float] = {}  # index → when its worker was started
    first_epoch: dict[str, float] = {}  # method → seconds from a worker's start to its first epoch, the last seen

    def handle(i: int, kind: str, payload: Any) -> None:
        nonlocal progressed
        if kind == "epoch":
            progressed = True
            if i in began:
                first_epoch[plans[i].method.name] = checkpoint.clock() - began.pop(i)
        if kind == "epoch" and on_epoch:
            on_epoch(plans[i], payload)
        elif kind == "run" and on_run:
            on_run(plans[i], payload)
        elif kind == "warning":
            warnings.warn(f"{_name(plans[i])}: {payload}", stacklevel=2)
        elif kind == "done":
            finals[i] = payload
        elif kind == "failed":
            failed[i] = payload
            if on_run:
                on_run(plans[i], f"failed: {payload}")
        elif kind == "stopped":
            stopped[i] = payload
            if on_run:  # (a run the stop kept from starting is said so: it was "stopped", an outside review)
                on_run(plans[i], "stopped" if i in running else "not started")

    def start(i: int) -> None:
        # (each worker's run trains an epoch all the same: checkpoint.start_part; as bench._stop_before)
        if deadline is not None and progressed and checkpoint.misses(deadline, first_epoch.get(plans[i].method.name)):
            handle(i, "stopped", ("stopped before it started to stay within the time limit", TIME_LIMIT_EXIT))
            return
        if asked:
            name = signal.Signals(asked[0]).name
            handle(i, "stopped", (f"not started (stopped by {name})", 128 + asked[0]))
            return
        try:
            blob = pickle.dumps(plans[i])
        except Exception as exc:
            handle(i, "failed", f"its plan cannot be sent to a worker ({describe(exc)}); use --jobs 1")
            return
        reader, writer = ctx.Pipe(duplex=False)
        run_dir = (dirs or {}).get(i, runs_dir / plans[i].run_id)
        args = (blob, specs, list(sys.path), str(run_dir), resume, threads, deadline, writer, alive, signum,
                str(runs_dir / f"{plans[i].run_id}.lock"))
        proc = ctx.Process(target=_child, args=args, name=f"pllzoo-job-{i}")
        began[i] = checkpoint.clock()
        proc.start()
        writer.close()  # the worker has its own copy
        running[i] = (proc, reader)

    abandon = False
    try:
        with _parent_signals() as asked:
            _loop(pending, running, jobs, start, handle, finals, failed, stopped, lambda: _tell(asked, signum))
    except checkpoint.Abandoned as exc:  # a second signal: abandon the epochs (any other exception: stop the
        abandon = True  # workers cleanly); the runs that failed before it are still written to results.csv
        exc.failed.update(failed)
        raise
    finally:
        _stop(list(running.values()), abandon)
        alive.close()
        parent_end.close()
    if stopped:
        first = min(stopped)
        names = "; ".join(f"{_name(plans[i])}: {why}" for i, (why, _) in sorted(stopped.items()))
        raise RunsStopped(names, stopped[first][1], finals, failed)
    return finals, failed


def _loop(pending, running, jobs, start, handle, finals, failed, stopped, tell: Callable[[], None]) -> None:
    """Start runs while fewer than ``jobs`` run, and pass their messages on, until none is left; ``tell``
    passes a stop signal on to the workers, at least every :data:`POLL_S`."""
    while pending or running:
        tell()
        while pending and len(running) < jobs:
            start(pending.popleft())
        mp.connection.wait([r for _, r in running.values()] + [p.sentinel for p, _ in running.values()], POLL_S)
        for i, (proc, reader) in list(running.items()):
            exited = not proc.is_alive()  # before reading: an exited worker's messages are all in its pipe
            for message in _received(reader):
                handle(i, *message)
            if exited:
                proc.join()
                reader.close()
                del running[i]
                if i not in finals and i not in failed and i not in stopped:
                    why = f"worker exited with code {proc.exitcode} and no report (killed? out of memory?)"
                    handle(i, "failed", why)


@contextlib.contextmanager
def _parent_signals() -> Iterator[list[int]]:
    """While the workers run: each stop signal is put in the yielded list, the first said once; the loop
    acts on them at its next look (:func:`_tell`), never inside the handler, which touches no lock (the
    loop may hold one when a signal arrives) and writes its line with one ``os.write``
    (:func:`pllzoo.best_effort.notice`).
    A repeat within :data:`pllzoo.checkpoint.REPEAT_S` of the first is the same stop (``timeout`` and a
    terminal may deliver one signal to the process and to its group).  Only signals at their default
    action are taken over, and only in the main thread."""
    asked: list[int] = []
    if threading.current_thread() is not threading.main_thread():
        yield asked
        return
    first = [0.0]

    def on_signal(received: int, frame: Any) -> None:
        now = time.monotonic()
        if asked and now - first[0] < checkpoint.REPEAT_S:
            return
        if not asked:
            first[0] = now
            best_effort.notice(f"{signal.Signals(received).name} received: the running runs stop with a checkpoint "
                               "after their current epoch, no other starts (send it again to abandon the epochs)")
        asked.append(received)

    previous = interrupts.take_over(on_signal)  # as checkpoint.stop_signals (the CLI's Ctrl-C watch too)
    try:
        yield asked
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)


def _tell(asked: list[int], signum) -> None:
    """Pass the parent's stop signal (``asked``) on to the workers (``signum``, which they poll).
    :raises pllzoo.checkpoint.Abandoned: after a second signal (the workers are killed, each keeping its last
        checkpoint)."""
    if len(asked) > 1:
        raise checkpoint.Abandoned(asked[1])
    if asked and not signum.value:
        signum.value = asked[0]


def _start_server(ctx) -> None:
    """Start the forkserver with the stop signals ignored (it inherits that through exec): a Ctrl-C while it
    imports torch prints no traceback from it, and a signal to the whole process group does not end it
    while its workers stop (the parent reads their exit through it); it ends with the parent.  Its workers
    set their own handlers (:func:`_child`); the parent's are back at once."""
    if ctx.get_start_method() != "forkserver" or threading.current_thread() is not threading.main_thread():
        return
    from multiprocessing import forkserver

    previous = interrupts.ignore()
    try:
        forkserver.ensure_running()
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)


class RunsStopped(Stopped):
    """Some worker runs stopped cleanly; ``finals`` holds the final records of those that finished,
    ``failed`` the one-line reasons of those that failed."""

    def __init__(self, message: str, exit_code: int, finals: dict[int, dict[str, Any]],
                 failed: dict[int, str] | None = None) -> None:
        super().__init__(message, exit_code)
        self.finals = finals
        self.failed = failed or {}


def _received(reader) -> list[tuple]:
    """Every message waiting in ``reader`` (none once the worker has closed it)."""
    out = []
    with contextlib.suppress(EOFError, OSError):
        while reader.poll():
            out.append(reader.recv())
    return out


def _stop(workers: list[tuple[Any, Any]], abandon: bool = False) -> None:
    """Stop the workers still running: SIGTERM, so each ends its current epoch with a checkpoint.

    Waits up to :data:`STOP_GRACE_S`, reading and dropping their messages so that none blocks on a
    full pipe; past that, on a second Ctrl-C, or at once with ``abandon``, kills them (each keeps its last
    checkpoint).  On Windows ``terminate`` is already that kill (``TerminateProcess``): the current epoch is lost.
    """
    for proc, _ in workers:
        if proc.is_alive():
            proc.terminate()
    deadline = time.monotonic() + (0.0 if abandon else STOP_GRACE_S)
    try:
        while any(proc.is_alive() for proc, _ in workers) and time.monotonic() < deadline:
            mp.connection.wait([r for _, r in workers] + [p.sentinel for p, _ in workers], POLL_S)
            for _, reader in workers:
                _received(reader)
    except KeyboardInterrupt:
        pass
    finally:
        for proc, reader in workers:
            if proc.is_alive():
                proc.kill()
            proc.join()
            reader.close()
