"""Files that commands write (``--md``, ``--csv``, ``plot --out``): checked before any work, written with one line
on failure.

A path that names a folder, or a figure format matplotlib cannot write, is a usage error (exit 2, one line)
before anything is computed; a missing folder is made; a write that fails (no permission, a read-only file
system) is one ``Error:`` line naming the file, never a traceback.
"""

from __future__ import annotations

import contextlib
import os
import sys
from pathlib import Path
from typing import Any, Iterator

import click

from pllzoo.atomic import write_atomic
from pllzoo.cli.options import UserPath
from pllzoo.errors import PLLZooError

FIGURE_SUFFIXES = (".png", ".pdf", ".svg", ".svgz", ".jpg", ".jpeg", ".eps", ".ps", ".tif", ".tiff", ".webp")
"""What ``matplotlib``'s ``savefig`` writes (by the file's suffix)."""


#: what pllzoo bench (and archive, sweep) writes into a results folder: never overwritten by another command's
#: --md/--csv
BENCH_FILES = frozenset({"results.csv", "summary.csv", "summary.md", "runs.jsonl.xz", "sweep.json"})

#: what marks a run folder (``OUT/runs/<id>/``): nothing is written into one but by the run itself
RUN_FILES = ("log.jsonl", "config.json", "env.json", "checkpoint.pt")


class OutputFile(UserPath):
    """A file a command writes; ``suffixes``: the ones allowed (a path without one gets the first)."""

    name = "file"

    def __init__(self, suffixes: tuple[str, ...] = ()) -> None:
        super().__init__(dir_okay=False)
        self.suffixes = suffixes

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Path:
        path = Path(super().convert(value, param, ctx))  # an existing folder: "is a directory"
        if self.suffixes and not path.suffix:
            path = path.with_suffix(self.suffixes[0])
        if self.suffixes and path.suffix.lower() not in self.suffixes:
            self.fail(f"{str(path)!r}: cannot write a {path.suffix} file; use one of {', '.join(self.suffixes)}",
                      param, ctx)
        if path.is_dir():
            self.fail(f"{str(path)!r} is a directory", param, ctx)
        if path.name in BENCH_FILES and ((path.parent / "runs").is_dir() or (path.parent / "runs.jsonl.xz").exists()):
            self.fail(f"{str(path)!r} is the bench's own record of that results folder; write another file",
                      param, ctx)
        if any((path.parent / name).exists() for name in RUN_FILES):
            self.fail(f"{str(path)!r} is inside the run folder {str(path.parent)!r}, which holds the run's own "
                      "records; write the file elsewhere", param, ctx)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            self.fail(f"{str(path)!r}: cannot make its folder ({exc.strerror or exc})", param, ctx)
        return path


@contextlib.contextmanager
def writing(path: Path) -> Iterator[None]:
    """A block that writes ``path``. :raises PLLZooError: one line naming the file and why, for an ``OSError``."""
    try:
        yield
    except OSError as exc:
        raise PLLZooError(f"cannot write {path}: {exc.strerror or exc}") from None


def _own_stream(path: Path) -> Any:
    """``sys.stdout`` or ``sys.stderr`` where ``path`` is the file, pipe or terminal it writes to, else None."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    for stream in (sys.stdout, sys.stderr):
        try:
            own = os.fstat(stream.fileno())
        except (OSError, AttributeError, ValueError):  # a captured stream (tests) has no descriptor
            continue
        if (own.st_dev, own.st_ino) == (st.st_dev, st.st_ino):
            return stream
    return None


def write_text(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` (:func:`writing`), whole or not at all: through a temporary file beside it, so a
    full disk leaves the file as it was (an outside review: a table truncated to 0 bytes).  A symbolic link is
    written through (its target gets the text), and a device or pipe (``/dev/stdout``) is written directly.
    ``/dev/stdout`` or ``/dev/stderr`` (or ``/proc/self/fd/N`` of either) goes through that stream, after what this
    process printed, even where the shell redirected it to a file: replaced, or opened to truncate, that file lost
    the printed table, and its resolved name then named a deleted file (an outside review).  Any other regular
    file, ``/dev/shm``'s included, is replaced (a second review: it was appended to)."""
    path = Path(path)
    with writing(path):
        stream = _own_stream(path) if Path(os.path.abspath(path)).parts[1:2] in (("dev",), ("proc",)) else None
        if stream is not None:  # our stdout or stderr (/dev/stdout), whatever it goes to: through it, in order
            stream.write(text)
            stream.flush()
            return
        if path.exists() and not path.is_file():  # a pipe, a device: its resolved name, "pipe:[…]", is no path
            with open(path, "a", encoding="utf-8") as f:
                f.write(text)
            return
        real = path.resolve() if path.is_symlink() else path  # a link is written through, not replaced
        write_atomic(real, text)
