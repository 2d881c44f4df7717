"""Torch's CPU threads for a bench: ``pllzoo bench --threads N``.

Torch picks its intra-op thread count from the machine's physical cores (or
``OMP_NUM_THREADS``), which in a container can be far more cores than the process
may use; oversubscribed threads made runs 10-25× slower on a shared 2-core
machine.  :func:`default_threads` takes the smaller of torch's own choice and the
CPUs this process may run on (affinity mask, cgroup CPU quota), shared out over
the runs trained at once.

Not bit-neutral on CPU: a different thread count splits some reductions
differently, so the last bits of a loss can differ and, over many epochs, a few
predictions (the README quickstart job's rows move by up to half a point between 1
and 2 threads).
The count is recorded in each run's env.json (``torch_threads``); rerun or resume
with the same one to reproduce a run bit for bit.  It stays out of the run id, so
``--resume`` finds a run under any count.
"""

from __future__ import annotations

import contextlib
import math
import os
from pathlib import Path

import torch

from pllzoo import interrupts

TORCH_DEFAULT = torch.get_num_threads()  # torch's own choice at import (honours OMP_NUM_THREADS)
#: whether this process is a ``--jobs`` worker: pllzoo's own, like the ``pllzoo`` program's
#: (:data:`pllzoo.interrupts.ending`), where alone torch's inter-op threads, set once per process and for good,
#: are set (an outside review: an in-process bench left a notebook's inter-op count at 1, for good)
own_process = False


def cgroup_quota(root: Path = Path("/sys/fs/cgroup")) -> int | None:
    """CPUs allowed by a cgroup CPU quota (v2 ``cpu.max``, else v1 ``cpu/cpu.cfs_quota_us``), or None."""
    with contextlib.suppress(OSError, ValueError):
        quota, period = (root / "cpu.max").read_text().split()[:2]
        return None if quota == "max" else max(1, math.ceil(int(quota) / int(period)))
    with contextlib.suppress(OSError, ValueError):
        quota = int((root / "cpu" / "cpu.cfs_quota_us").read_text())
        period = int((root / "cpu" / "cpu.cfs_period_us").read_text())
        return None if quota <= 0 else max(1, math.ceil(quota / period))
    return None


def available_cpus() -> int:
    """CPUs this process may run on: its affinity mask, capped by a cgroup CPU quota."""
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    quota = cgroup_quota()
    return min(cpus, quota) if quota else cpus


def default_threads(jobs: int = 1) -> int:
    """``min(available CPUs, torch's default) // jobs``, at least 1: one run gets the cores torch would
    use but no more than it may, and ``jobs`` runs at once share them."""
    return max(1, min(available_cpus(), TORCH_DEFAULT) // max(1, jobs))


def set_threads(n: int) -> None:
    """Torch intra-op threads to ``n``; inter-op threads too in pllzoo's own process (:data:`own_process`, the
    program) where torch still allows it (once per process)."""
    if n < 1:
        raise ValueError(f"threads must be ≥ 1, got {n}")
    torch.set_num_threads(n)
    if own_process or interrupts.ending:
        with contextlib.suppress(RuntimeError):  # only before any inter-op work and only once
            torch.set_num_interop_threads(n)
