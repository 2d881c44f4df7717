"""Writing a file whole or not at all, and never through a link someone left beside it.

Every file pllzoo writes into a results folder goes through :func:`write_atomic`: into a temporary file of
this process's own (``<name>.<pid>-<n>.tmp``), created anew and exclusively, then renamed over ``<name>``.  A
reader sees the old file or the new one, never a part; two processes writing one file at once (two ``pllzoo
archive`` of one folder, two sweeps claiming trials) each rename a whole file of their own (an outside review:
with one shared ``<name>.tmp`` the second removed the first's, whose rename then failed).  Results folders are
shared (copied, unpacked from an archive someone sent), so whatever lies at the temporary name (a crashed
write's leftover of a reused PID, or a symbolic link) is removed first, never written through, and a link at
``<name>`` itself is replaced, not followed (an outside review: a link planted at ``OUT/summary.md.tmp`` had a
bench overwrite the file it pointed to).
"""
from __future__ import annotations

import itertools
import os
import re
from pathlib import Path
from typing import BinaryIO, Callable

NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)  # not on Windows, where O_EXCL alone refuses an existing link
_WRITES = itertools.count()


def temporary(path: Path) -> Path:
    """A name beside ``path`` for this process's next write of it."""
    return path.with_name(f"{path.name}.{os.getpid()}-{next(_WRITES)}.tmp")


def target(name: str) -> str:
    """The file a temporary file's name (:func:`temporary`, or an older ``<name>.tmp``) was to become."""
    return re.sub(r"(\.\d+-\d+)?\.tmp$", "", name)


def write_atomic(path: Path, data: bytes | str | Callable[[BinaryIO], object]) -> None:
    """Write ``path`` whole or not at all (the module docstring); on failure no ``.tmp`` stays.

    :param data: bytes, text (UTF-8, whatever the locale), or a function writing into the open binary file.
    """
    path = Path(path)
    tmp = temporary(path)
    tmp.unlink(missing_ok=True)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | NOFOLLOW | getattr(os, "O_BINARY", 0), 0o666)
    try:
        with os.fdopen(fd, "wb") as f:
            if callable(data):
                data(f)
            else:
                f.write(data.encode("utf-8") if isinstance(data, str) else data)
        os.replace(tmp, path)
    except BaseException as exc:
        tmp.unlink(missing_ok=True)
        named = _named(exc, path)
        if named is exc:
            raise
        raise named from exc


def _named(exc: BaseException, path: Path) -> BaseException:
    """``exc`` as an ``OSError`` naming ``path`` where the system refused the write without naming a file (a full
    disk is often first said when the file is closed; torch.save wraps it in a RuntimeError: an outside review
    got "unexpected pos 125248 vs 125176", or the command's line blamed standard output), else ``exc``."""
    err = exc if isinstance(exc, OSError) else exc.__context__ if isinstance(exc, RuntimeError) else None
    if not isinstance(err, OSError) or err.errno is None or (err is exc and err.filename):
        return exc
    return OSError(err.errno, err.strerror or str(err), str(path))
