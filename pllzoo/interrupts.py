"""Ctrl-C told apart from a ``KeyboardInterrupt`` that code raised.

Python's own SIGINT handler raises ``KeyboardInterrupt``, and so can a plugin's code: the first must end the
command (exit 130), the second fails only the run it came from (:func:`pllzoo.checkpoint.from_signal`).  While
:func:`watch` is active (every ``pllzoo`` command) SIGINT raises ``KeyboardInterrupt`` as Python's handler does and
is remembered (:func:`arrived`), so the two are told apart before and after the trainer's clean-stop window
(:func:`pllzoo.checkpoint.stop_signals`), e.g. while the bench plans and times its runs.  Torch-free: the CLI
imports it at start-up.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from typing import Any, Iterator

_arrived = False
ending = False  # set by the ``pllzoo`` command (pllzoo.cli.main): the command's end is the process's


def on_sigint(signum: int, frame: Any) -> None:
    """The handler :func:`watch` installs: remember the signal, then do what Python's handler does."""
    global _arrived
    _arrived = True
    raise KeyboardInterrupt


def take_over(handler: Any) -> dict[int, Any]:
    """Install ``handler`` for SIGINT and SIGTERM where each still has a default action (the system's, Python's, or
    :func:`watch`'s); ``{signal: previous handler}`` of those taken, to put back.  A signal ignored (``nohup``) or
    handled by the program's own code stays as it is."""
    defaults = (signal.SIG_DFL, signal.default_int_handler, on_sigint)
    return {s: signal.signal(s, handler) for s in (signal.SIGINT, signal.SIGTERM) if signal.getsignal(s) in defaults}


def arrived() -> bool:
    """Whether a SIGINT arrived while :func:`watch` was active."""
    return _arrived


def watching() -> bool:
    """Whether :func:`watch`'s handler is SIGINT's now."""
    return signal.getsignal(signal.SIGINT) is on_sigint


@contextlib.contextmanager
def watch() -> Iterator[None]:
    """Remember SIGINTs while active; only in the main thread and only where SIGINT has Python's own handler (an
    ignored SIGINT, ``nohup cmd &``, or a program's own handler stays as it is)."""
    global _arrived
    if threading.current_thread() is not threading.main_thread() or \
            signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
        yield
        return
    _arrived = False
    previous = signal.signal(signal.SIGINT, on_sigint)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def ignore_from_now() -> None:
    """Ignore SIGINT and SIGTERM from now on, when the process ends with the command (:data:`ending`; not a
    CliRunner inside a test): once a stop is taken, a repeat signal (a double press, a batch system) would only
    land in torch's exit finalizers as a traceback (an outside review)."""
    if not ending:
        return
    for sig in (signal.SIGINT, signal.SIGTERM):
        try:
            signal.signal(sig, signal.SIG_IGN)
        except (ValueError, OSError):  # not the main thread: nothing to do
            pass

