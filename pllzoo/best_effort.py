"""Standard error as a best-effort channel: a progress line or a notice never fails a run.

pllzoo writes its progress lines, signal notices and warnings to standard error.  When that stream stops taking
them, a write raises ``OSError``: the reader of its pipe is gone (``pllzoo bench ... 2>&1 | tee log``, where
Ctrl-C or a batch system's SIGTERM to the process group ends ``tee`` with pllzoo, and a closed terminal ends it
under ``nohup``: EPIPE), the disk under it is full (ENOSPC), or its descriptor was closed when the program
started (``2>&-``: EBADF).  An outside review found such a write, from the notice that a SIGINT was received,
recorded as the run's failure, with no checkpoint, and the bench ended.

:func:`install` (the ``pllzoo`` program, each ``--jobs`` worker) puts :class:`BestEffort` in front of
``sys.stderr``: the first failed write points descriptor 2 at the null device (so that what C code, child
processes and the interpreter's exit write there goes nowhere instead of failing) and what follows is dropped.
A run's outcome rests on its files (``log.jsonl``, the checkpoint, ``results.csv``) and on the exit status.
Standard output is not wrapped: a table that cannot be printed is the command's error (``pllzoo.cli``), and a
standard output closed at start fails its first write (:class:`ClosedOutput`).
"""

from __future__ import annotations

import errno
import io
import os
import sys
from typing import Any, TextIO

STDERR = 2


class BestEffort:
    """A stream that forwards to ``stream`` until a write or flush raises ``OSError``, then drops output.

    Everything else (``encoding``, ``isatty``, ``fileno``, ``reconfigure``, ...) is the stream's own, except
    ``buffer``, guarded the same way and failing with it: click writes UTF-8 to a stream's binary buffer when the
    stream's encoding is ASCII (``LC_ALL=C``)."""

    def __init__(self, stream: TextIO, fd: int | None = STDERR, _text: BestEffort | None = None) -> None:
        self._stream = stream
        self._fd = fd
        self._text = _text or self  # the text stream a buffer belongs to: one failure ends both
        self._failed: OSError | None = None

    @property
    def failed(self) -> OSError | None:
        """The error that ended the output, or ``None``."""
        return self._text._failed

    @property
    def buffer(self) -> BestEffort:
        return BestEffort(self._stream.buffer, self._fd, self._text)

    def write(self, data):
        if self.failed is None:
            try:
                return self._stream.write(data)
            except OSError as exc:
                self._fail(exc)
        return len(data)

    def writelines(self, lines) -> None:
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        if self.failed is None:
            try:
                self._stream.flush()
            except OSError as exc:
                self._fail(exc)

    def _fail(self, exc: OSError) -> None:
        self._text._failed = exc
        if self._fd is not None:
            null_descriptor(self._fd)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def null_descriptor(fd: int) -> None:
    """Point ``fd`` at the null device (open for writing; for reading where ``fd`` is 0)."""
    try:
        null = os.open(os.devnull, os.O_RDONLY if fd == 0 else os.O_WRONLY)
    except OSError:
        return
    if null != fd:
        try:
            os.dup2(null, fd)
        except OSError:
            pass
        os.close(null)


def notice(line: str) -> None:
    """``line`` to descriptor 2 in one unbuffered write, as a signal handler may (a write into ``sys.stderr``'s
    buffer could be re-entrant); a descriptor that fails is pointed at the null device and the line dropped (an
    outside review: the ``--jobs`` parent's SIGINT notice, the first write after a ``| tee`` ended, exited 1)."""
    try:
        os.write(STDERR, (line + "\n").encode(errors="replace"))
    except OSError:
        null_descriptor(STDERR)


def _closed(fd: int) -> bool:
    try:
        os.fstat(fd)
    except OSError:
        return True
    return False


class ClosedOutput(io.TextIOBase):
    """Standard output whose descriptor was closed when the program started (``pllzoo methods >&-``): a write
    fails with ``EBADF``, as it would in C, and so the command ends in one line and exit 1, as under a full disk
    (an outside review: the listing went nowhere and the exit was 0).  Flushing what was never written is not
    an error (the interpreter flushes at exit)."""

    def writable(self) -> bool:
        return True

    def write(self, data) -> int:
        raise OSError(errno.EBADF, "standard output is closed")


def install() -> BestEffort:
    """Put :class:`BestEffort` in front of ``sys.stderr`` (once) and give closed standard descriptors the null
    device, so that no file the program opens later takes descriptor 0, 1 or 2 and receives what was meant for a
    terminal.  A ``sys.stderr`` the interpreter left ``None`` (descriptor 2 closed at start) becomes a stream to
    the null device; a ``sys.stdout`` left ``None``, a :class:`ClosedOutput`."""
    for fd in (0, 1, 2):
        if _closed(fd):
            null_descriptor(fd)
    if sys.stdout is None:  # `>&-`: what a command prints is its output; its loss is the command's error
        sys.stdout = ClosedOutput()
    if isinstance(sys.stderr, BestEffort):
        return sys.stderr
    if sys.stderr is None:
        sys.stderr = BestEffort(open(os.devnull, "w", encoding="utf-8"), fd=None)
    else:
        try:
            fd = sys.stderr.fileno()
        except (OSError, AttributeError, ValueError):  # a stream with no descriptor of its own
            fd = None
        sys.stderr = BestEffort(sys.stderr, fd=fd if fd == STDERR else None)
    return sys.stderr
