"""What the system says about a process: its start time (Linux's ``/proc``), torch-free and cheap, for the
program's clock (``--time-limit`` counts from the process's start) and for locks (a PID reused by a later
process is not the lock's writer, :mod:`pllzoo.runfolders`)."""

from __future__ import annotations

import os
from pathlib import Path


def start_ticks(pid: int) -> str | None:
    """Process ``pid``'s start time in clock ticks since boot (field 22 of ``/proc/PID/stat``); None where unread."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()  # after "(command)": field 3 on
        return fields[19] if len(fields) > 19 and fields[19].isdigit() else None
    except (OSError, IndexError):
        return None


def age_s() -> float | None:
    """Seconds since this process started (``/proc/uptime`` less its start), or None where the system does not
    say: the interpreter's start and the imports before pllzoo's first line count (an outside review: a
    ``--time-limit`` counted from after torch's import, seconds on a cluster's shared file system, more cold)."""
    ticks = start_ticks(os.getpid())
    try:
        uptime = float(Path("/proc/uptime").read_text().split()[0])
        per_s = os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, AttributeError):
        return None
    if ticks is None or per_s <= 0:
        return None
    age = uptime - int(ticks) / per_s
    return age if 0 <= age < 86400 else None  # (a clock that disagrees: not trusted)
