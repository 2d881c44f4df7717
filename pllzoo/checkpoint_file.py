"""A run's checkpoint file as a folder reader sees it, without torch: its name, its error, and a look at it
(:func:`quick_check`).  ``pllzoo report`` and ``archive`` read run folders with these alone (importing torch was
half of a report's time); :mod:`pllzoo.checkpoint` writes and reads the file itself."""

from __future__ import annotations

import errno
import zipfile
from pathlib import Path

from pllzoo.errors import PLLZooError

NAME = "checkpoint.pt"


class CheckpointError(PLLZooError):
    """A checkpoint that cannot be used: empty, truncated, not a pllzoo checkpoint, another version."""


class CheckpointUnreadable(PLLZooError):
    """A checkpoint the system would not let pllzoo read (no permission, an I/O error, a stale network handle):
    nothing says the file is damaged, so it is left as it is and the command ends in one line (an outside
    review: such a file was taken for a damaged one, put aside, and the run retrained from the start)."""


REFUSALS = frozenset(getattr(errno, name) for name in ("EACCES", "EPERM", "EIO", "ESTALE", "EREMOTEIO", "ETIMEDOUT",
                                                       "ENOLINK", "EHOSTDOWN") if hasattr(errno, name))
"""The errors of a read the system refused (permissions, the disk, a network share); any other error reading a
checkpoint is the file's (a review: torch's reader says EINVAL for a truncated file, which is damage)."""


def read_refused(path: Path, exc: BaseException) -> None:
    """Raise ``exc`` (or the ``OSError`` it was raised from: torch's reader wraps them) as
    :class:`CheckpointUnreadable` where the system refused the read (:data:`REFUSALS`); return where the error is
    what a damaged or missing file looks like."""
    err = exc if isinstance(exc, OSError) else exc.__context__ if isinstance(exc.__context__, OSError) else None
    if err is not None and err.errno in REFUSALS:
        raise CheckpointUnreadable(f"cannot read {path}: {err.strerror or err}; it is left as it is: fix its "
                                   "permissions or the disk, then run again") from None


def quick_check(path: Path) -> None:
    """A cheap look at the file without reading it: empty, or not a whole archive (truncated, garbage).

    :raises CheckpointError: one line saying what is wrong.
    :raises CheckpointUnreadable: the system refused the read (:func:`read_refused`).
    """
    path = Path(path)
    try:
        if path.stat().st_size == 0:
            raise CheckpointError(f"{path}: damaged checkpoint (empty, 0 bytes)")
        with zipfile.ZipFile(path):  # reads the archive's directory, at its end: gone when truncated
            pass
    except (OSError, zipfile.BadZipFile, ValueError) as exc:
        read_refused(path, exc)
        raise CheckpointError(f"{path}: damaged checkpoint (truncated or corrupt: "
                              f"{type(exc).__name__})") from None
