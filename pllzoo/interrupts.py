"""Ctrl-C told apart from a ``KeyboardInterrupt`` that code raised.

Python's own SIGINT handler raises ``KeyboardInterrupt``, and so can a plugin's code: the first must end the
command (exit 130), the second fails only the run it came from (:func:`pllzoo.checkpoint.from_signal`).  While
:func:`watch` is active (every ``pllzoo`` command) SIGINT raises ``KeyboardInterrupt`` as Python's handler does and
is remembered (:func:`arrived`), so the two are told apart before and after the trainer's clean-stop window
(:func:`pllzoo.checkpoint.stop_signals`), e.g. while the bench plans and times its runs.  The stop signals
(:data:`STOP_SIGNALS`) are one list for every place that takes them over or ignores them.  Torch-free: the CLI
imports it at start-up.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from typing import Any, Iterator

_arrived = False
ending = False  # set by the ``pllzoo`` command (pllzoo.cli.main): the command's end is the process's

#: The signals that ask a bench for a clean stop (a checkpoint after the current epoch): Ctrl-C, a batch system's
#: SIGTERM, and where the platform has them SIGHUP (a terminal or ssh session closed without ``nohup``) and
#: SIGUSR1/SIGUSR2 (``#SBATCH --signal=USR1@60``, a warning before the time limit).  An outside review: the last
#: three killed the bench at once, without a checkpoint or a word.
STOP_SIGNALS: tuple[int, ...] = tuple(getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGHUP", "SIGUSR1",
                                                                         "SIGUSR2") if hasattr(signal, name))
OTHER_STOPS = STOP_SIGNALS[1:]  # all but SIGINT


class Interrupted(KeyboardInterrupt):
    """A stop signal other than SIGINT that arrived while :func:`watch` was active, outside a bench's clean-stop
    window (loading, planning): the command ends at once, with status ``128 + signum`` and one line (an outside
    review: SIGTERM there ended the process without a word)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def on_sigint(signum: int, frame: Any) -> None:
    """The handler :func:`watch` installs: remember the signal, then do what Python's handler does."""
    global _arrived
    _arrived = True
    raise KeyboardInterrupt


def on_stop(signum: int, frame: Any) -> None:
    """The handler :func:`watch` installs for :data:`OTHER_STOPS` in the ``pllzoo`` program: remember it, then
    end the command (:class:`Interrupted`)."""
    global _arrived
    _arrived = True
    raise Interrupted(signum)


def signum_of(exc: BaseException) -> int:
    """The signal a ``KeyboardInterrupt`` stands for: an :class:`Interrupted`'s, else SIGINT."""
    return getattr(exc, "signum", signal.SIGINT)


def take_over(handler: Any) -> dict[int, Any]:
    """Install ``handler`` for each of :data:`STOP_SIGNALS` that still has a default action (the system's,
    Python's, or :func:`watch`'s); ``{signal: previous handler}`` of those taken, to put back.  A signal ignored
    (``nohup``) or handled by the program's own code stays as it is."""
    defaults = (signal.SIG_DFL, signal.default_int_handler, on_sigint, on_stop)
    return {s: signal.signal(s, handler) for s in STOP_SIGNALS if signal.getsignal(s) in defaults}


def ignore(signals: tuple[int, ...] = STOP_SIGNALS) -> dict[int, Any]:
    """Ignore ``signals`` (a process whose parent decides when to stop: a worker, the forkserver); the previous
    handlers."""
    return {s: signal.signal(s, signal.SIG_IGN) for s in signals}


def arrived() -> bool:
    """Whether a SIGINT arrived while :func:`watch` was active."""
    return _arrived


def watching() -> bool:
    """Whether :func:`watch`'s handler is SIGINT's now."""
    return signal.getsignal(signal.SIGINT) is on_sigint


@contextlib.contextmanager
def watch() -> Iterator[None]:
    """Remember SIGINTs while active; only in the main thread and only where SIGINT has Python's own handler (an
    ignored SIGINT, ``nohup cmd &``, or a program's own handler stays as it is).  In the ``pllzoo`` program
    (:data:`ending`) the other :data:`STOP_SIGNALS` that would kill it raise :class:`Interrupted` instead."""
    global _arrived
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    _arrived = False
    previous = {}
    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        previous[signal.SIGINT] = signal.signal(signal.SIGINT, on_sigint)
    if ending:  # the program: the other stop signals too, where they would kill it (in-process: the caller's),
        # also where SIGINT is ignored (`cmd &` in a batch script: a review found SIGTERM silent there)
        previous.update((s, signal.signal(s, on_stop)) for s in OTHER_STOPS if signal.getsignal(s) is signal.SIG_DFL)
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)


def ignore_from_now() -> None:
    """Ignore :data:`STOP_SIGNALS` from now on, when the process ends with the command (:data:`ending`; not a
    CliRunner inside a test): once a stop is taken, a repeat signal (a double press, a batch system) would only
    land in torch's exit finalizers as a traceback (an outside review)."""
    if not ending:
        return
    for sig in STOP_SIGNALS:
        try:
            signal.signal(sig, signal.SIG_IGN)
        except (ValueError, OSError):  # not the main thread: nothing to do
            pass

