"""A run's checkpoint file as a folder reader sees it, without torch: its name, its error, and a look at it
(:func:`quick_check`).  ``pllzoo report`` and ``archive`` read run folders with these alone (importing torch was
half of a report's time); :mod:`pllzoo.checkpoint` writes and reads the file itself."""

from __future__ import annotations

import zipfile
from pathlib import Path

from pllzoo.errors import PLLZooError

NAME = "checkpoint.pt"


class CheckpointError(PLLZooError):
    """A checkpoint that cannot be used: empty, truncated, not a pllzoo checkpoint, another version."""


def quick_check(path: Path) -> None:
    """A cheap look at the file without reading it: empty, or not a whole archive (truncated, garbage).

    :raises CheckpointError: one line saying what is wrong.
    """
    path = Path(path)
    try:
        if path.stat().st_size == 0:
            raise CheckpointError(f"{path}: damaged checkpoint (empty, 0 bytes)")
        with zipfile.ZipFile(path):  # reads the archive's directory, at its end: gone when truncated
            pass
    except (OSError, zipfile.BadZipFile, ValueError) as exc:
        raise CheckpointError(f"{path}: damaged checkpoint (truncated or corrupt: "
                              f"{type(exc).__name__})") from None
