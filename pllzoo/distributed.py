"""The distributed context of a run: rank, world size and the few collectives components need.

One process (no ``torchrun``) is the default and sees :data:`SINGLE`: world 1, every collective
an identity, no process group, no overhead.  Under ``torchrun`` (or any launcher that sets
``RANK``/``WORLD_SIZE``/``LOCAL_RANK``), :func:`init_from_env` starts the ``torch.distributed``
process group (NCCL on CUDA, device ``cuda:LOCAL_RANK``; gloo on CPU) and every later
:func:`current` returns a context over it.  A test may build one by hand over a group it
initialised itself (``init_method="file://..."``).

Semantics (``docs/distributed.md``): :meth:`DistContext.gather` concatenates in rank order, so with the
trainer's contiguous per-rank slices of the global batch gathering a per-sample tensor gives
back the 1-process batch in its order (:meth:`DistContext.gather_with_grad` does so with a gradient, for a
loss of the local rows against the global batch: PiCO's contrast set, D11); :meth:`DistContext.all_reduce_sum` sums over ranks;
:meth:`DistContext.broadcast` copies rank ``src``'s tensor.  Every rank must call a collective
the same number of times in the same order: a branch around one must be taken by all ranks
or none (decide it from replicated values, or all-reduce the decision first).
"""

from __future__ import annotations

import contextlib
import gc
import datetime
import math
import os
import re
import time
from dataclasses import dataclass
from typing import Any, Callable

import torch

from pllzoo.errors import PLLZooError

DEFAULT_TIMEOUT_S = 300.0
"""Process-group timeout: a rank that waits this long in a collective fails instead of hanging
(``PLLZOO_DIST_TIMEOUT_S`` overrides it, from :data:`MIN_TIMEOUT_S` to :data:`MAX_TIMEOUT_S`)."""
MIN_TIMEOUT_S, MAX_TIMEOUT_S = 1.0, 7 * 24 * 3600.0  # a second to a week


class FailedAlone(PLLZooError):
    """A run failed on some processes and not on the others, which wait in a collective: the bench ends on
    every process, without the barrier of :func:`shutdown` (it would pair with their pending collective).
    On rank 0, as :class:`pllzoo.jobs.RunsFailed`: ``rows`` (results.csv) and ``failed`` (plan, reason)."""

    def __init__(self, message: str, rows: Any = None, failed: list | None = None) -> None:
        super().__init__(message)
        self.rows, self.failed = rows, failed or []


@dataclass(frozen=True)
class DistContext:
    """Rank ``rank`` of ``world`` processes; ``device`` is where this rank trains (``cuda:LOCAL_RANK``)."""

    rank: int = 0
    world: int = 1
    local_rank: int = 0
    device: torch.device | None = None  # None: the device the caller chose (single process)

    @property
    def is_main(self) -> bool:
        """True on rank 0, the only rank that writes run folders, logs, checkpoints and results."""
        return self.rank == 0

    @property
    def active(self) -> bool:
        """True when more than one process trains the run (collectives communicate)."""
        return self.world > 1

    def gather(self, x: torch.Tensor) -> torch.Tensor:
        """All ranks' ``x`` ``[b, ...]`` concatenated along dim 0 in rank order → ``[G·b, ...]``; no grad.

        Every rank must pass the same shape (the trainer's slices are all of size b).
        """
        if self.world == 1:
            return x
        x = x.contiguous()
        parts = [torch.empty_like(x) for _ in range(self.world)]
        torch.distributed.all_gather(parts, x)
        return torch.cat(parts)

    def gather_with_grad(self, x: torch.Tensor) -> torch.Tensor:
        """:meth:`gather` that passes gradients back to every rank's ``x`` ``[b, ...]`` → ``[G·b, ...]`` (D11).

        Backward: the incoming gradient ``[G·b, ...]`` is summed over ranks (one all-reduce: every rank's loss
        may depend on every row) and this rank keeps its slice ``[g·b, (g+1)·b)``.  So when each rank's loss
        L_g takes its local rows directly (anchors) and the gathered rows as the rest of its terms, the ranks'
        gradients averaged (what DDP and :func:`pllzoo.ddp.average_grads` apply) are those of the 1-process
        loss (1/G)·Σ_g L_g over the concatenated batch: the gradient reaching a row of rank g is its own direct
        term plus Σ_g' ∂L_g'/∂row.  Only all_gather and all_reduce: it runs on gloo too.  Every rank must then
        run the backward (the all-reduce is a collective); world 1: ``x`` itself.
        Test: tests/test_distributed.py::test_gather_with_grad_gives_the_one_process_gradients.
        """
        if self.world == 1:
            return x
        return _GatherWithGrad.apply(x, self)

    def all_reduce_sum(self, x: torch.Tensor) -> torch.Tensor:
        """The sum of ``x`` over ranks (a new tensor; ``x`` itself is left as it was)."""
        if self.world == 1:
            return x
        out = x.detach().clone()
        torch.distributed.all_reduce(out, op=torch.distributed.ReduceOp.SUM)
        return out

    def broadcast(self, x: torch.Tensor, src: int = 0) -> torch.Tensor:
        """Rank ``src``'s ``x`` on every rank (a new tensor on the other ranks; same shape and dtype)."""
        if self.world == 1:
            return x
        out = x.detach().clone().contiguous()
        torch.distributed.broadcast(out, src=src)
        return out

    def broadcast_object(self, obj: Any, src: int = 0) -> Any:
        """Rank ``src``'s picklable ``obj`` (tensors inside included) on every rank; once per run, not per step."""
        if self.world == 1:
            return obj
        box = [obj if self.rank == src else None]
        torch.distributed.broadcast_object_list(box, src=src, device=self._comm_device())
        return box[0]

    def batch_mean(self, x: torch.Tensor) -> torch.Tensor:
        """The mean over the *global* batch of the per-sample rows ``x`` ``[b, ...]`` → ``[...]``.

        World 1: ``x.mean(0)`` (bit-identical to a run without this context).  Otherwise the row
        sums and counts are all-reduced (one collective) and divided: the mean over ``Γ_t`` (D9).
        """
        if self.world == 1:
            return x.mean(0)
        flat = x.reshape(x.shape[0], -1)
        count = torch.full((1,), x.shape[0], dtype=flat.dtype, device=flat.device)
        total = self.all_reduce_sum(torch.cat([flat.sum(0), count]))  # [F + 1]
        return (total[:-1] / total[-1]).reshape(x.shape[1:])

    def any(self, flag: bool) -> bool:
        """True on every rank when ``flag`` is true on some rank (a collective decision)."""
        return self.sum_ints([int(flag)])[0] > 0

    def sum_ints(self, values: list[int]) -> list[int]:
        """``values`` summed elementwise over ranks, on every rank (one collective; host ints in and out)."""
        if self.world == 1:
            return list(values)
        device = self._comm_device() or torch.device("cpu")
        return [int(v) for v in self.all_reduce_sum(torch.tensor(values, dtype=torch.int64, device=device)).tolist()]

    def failed_everywhere(self, key: str, give_up: Callable[[], bool] = lambda: False) -> bool:
        """After this process's run ``key`` failed: whether it failed on every process (True: the same error,
        from the same replicated computation, so the bench goes on with the next run) or not within
        :func:`failure_wait_s` (False: this process's alone, or the others' alone; the others wait in a
        collective, so the bench must end).  Each process leaves a mark in the process group's key-value
        store, which is no collective: a process stuck in one cannot answer, and that is the answer.
        ``give_up()`` true (a stop signal: the launcher stops the processes left when one has exited) ends
        the wait at once with False.  One process, or a group without a store: True (the bench goes on)."""
        store = _store() if self.world > 1 else None
        if store is None:
            return True
        store.set(f"pllzoo/failed/{key}/{self.rank}", "1")
        keys = [f"pllzoo/failed/{key}/{r}" for r in range(self.world)]
        until = time.monotonic() + failure_wait_s()
        while not store.check(keys):  # polled, not store.wait in slices: each timed-out wait logs two c10d lines
            if give_up() or time.monotonic() >= until:  # (a stop signal is looked at between looks)
                return False
            time.sleep(0.2)
        return True

    def end(self, why: str) -> None:
        """Say, for the other processes, that this one ends the bench (``why``: one line)."""
        store = _store() if self.world > 1 else None
        if store is not None:
            store.set("pllzoo/ended", why)

    def ended(self) -> str | None:
        """Why another process ended the bench (:meth:`end`), or None."""
        store = _store() if self.world > 1 else None
        if store is None or not store.check(["pllzoo/ended"]):
            return None
        return store.get("pllzoo/ended").decode(errors="replace")

    def _comm_device(self) -> torch.device | None:
        """The device collectives' scratch tensors live on: this rank's GPU under NCCL, else the CPU."""
        if self.world > 1 and torch.distributed.get_backend() == "nccl":
            return self.device
        return None


class _GatherWithGrad(torch.autograd.Function):
    """all_gather forward; backward: all_reduce SUM of the full gradient, this rank's slice (:meth:`DistContext.gather_with_grad`)."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, dist: DistContext) -> torch.Tensor:  # type: ignore[override]
        ctx.dist, ctx.rows = dist, x.shape[0]
        return dist.gather(x)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):  # type: ignore[override]
        total = ctx.dist.all_reduce_sum(grad.contiguous())
        start = ctx.dist.rank * ctx.rows
        return total[start : start + ctx.rows], None


SINGLE = DistContext()
"""The context of a run without torchrun: rank 0 of 1."""


def distributed_available() -> bool:
    """Whether this torch build has ``torch.distributed`` (some macOS/Windows builds lack it)."""
    return torch.distributed.is_available()


def current() -> DistContext:
    """The context of this process: over the default process group once one is initialised, else :data:`SINGLE`."""
    if not (distributed_available() and torch.distributed.is_initialized()):
        return SINGLE
    rank, world = torch.distributed.get_rank(), torch.distributed.get_world_size()
    local = int(os.environ.get("LOCAL_RANK", rank))
    device = torch.device("cuda", local) if torch.distributed.get_backend() == "nccl" else torch.device("cpu")
    return DistContext(rank=rank, world=world, local_rank=local, device=device)


def timeout_s() -> float:
    """The process-group timeout in seconds (:data:`DEFAULT_TIMEOUT_S` or ``PLLZOO_DIST_TIMEOUT_S``).

    :raises PLLZooError: one line, for a value that is not a number of seconds in range (an outside review:
        ``abc``, ``inf`` and ``nan`` were tracebacks on every rank, ``0`` a C++ stack dump from the first collective).
    """
    text = os.environ.get("PLLZOO_DIST_TIMEOUT_S")
    if text is None:
        return float(DEFAULT_TIMEOUT_S)
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and MIN_TIMEOUT_S <= value <= MAX_TIMEOUT_S):  # below 1 ms torch's is 0, and
        # far above a week it overflows (an outside review: 1e-9 and 1e15 still ended in C++ and Python tracebacks)
        raise PLLZooError(f"PLLZOO_DIST_TIMEOUT_S={text!r}: give the process-group timeout as a number of seconds "
                          f"from {MIN_TIMEOUT_S:g} to {MAX_TIMEOUT_S:g} (default {DEFAULT_TIMEOUT_S:g})")
    return value


def failure_wait_s() -> float:
    """How long a process whose run failed waits for the others to report the same failure: a fifth of the
    process-group timeout, from 5 s to 60 s (the same error reaches every process within one step)."""
    return min(60.0, max(5.0, timeout_s() / 5))


def _store() -> Any:
    """The default process group's key-value store (torch's private accessor; None where it is missing)."""
    getter = getattr(torch.distributed.distributed_c10d, "_get_default_store", None)
    try:
        return getter() if getter is not None and torch.distributed.is_initialized() else None
    except (RuntimeError, ValueError):
        return None


def init_from_env(device: str = "auto") -> DistContext:
    """Start the process group when launched by torchrun; return :func:`current`.

    Without torchrun (or with ``WORLD_SIZE`` 1) nothing is started and :data:`SINGLE` comes back.
    ``device``: ``cpu`` gives gloo; ``auto``/``cuda`` give NCCL on ``cuda:LOCAL_RANK`` when CUDA is
    present, else gloo.  Idempotent: a group already initialised is kept.

    :raises PLLZooError: one line, when distributed training is asked for but unavailable.
    """
    launched = distributed_available() and torch.distributed.is_torchelastic_launched()
    if not launched or int(os.environ.get("WORLD_SIZE", "1")) <= 1:
        return current()
    if torch.distributed.is_initialized():
        return current()
    local = int(os.environ.get("LOCAL_RANK", "0"))
    cuda = device != "cpu" and torch.cuda.is_available()
    if device.startswith("cuda") and not cuda:
        raise PLLZooError("--device cuda under torchrun, but torch sees no CUDA device; use --device cpu (gloo)")
    if cuda:
        if local >= torch.cuda.device_count():
            raise PLLZooError(f"LOCAL_RANK {local}, but torch sees {torch.cuda.device_count()} CUDA device(s); "
                              "start at most one process per GPU (--nproc-per-node)")
        torch.cuda.set_device(local)
    backend = "nccl" if cuda else "gloo"
    kwargs: dict[str, Any] = {"device_id": torch.device("cuda", local)} if cuda else {}
    torch.distributed.init_process_group(backend, timeout=datetime.timedelta(seconds=timeout_s()), **kwargs)
    return current()


def shutdown(wait: bool = True) -> None:
    """Destroy the process group this process started (no-op without one).

    ``wait``: first wait until every rank got here (a barrier), so no rank tears its side down while
    another still uses it (gloo aborts the early one's process otherwise).  A barrier that fails (a rank
    died) is ignored: the group is destroyed anyway.  Objects that still hold the group in a reference
    cycle (a trainer and its DDP wrapper) are collected first, so the group's threads are joined here and
    not at interpreter exit (a rank aborted there under load: "terminate called without an active exception").
    """
    if distributed_available() and torch.distributed.is_initialized():
        gc.collect()
        if wait:
            with contextlib.suppress(RuntimeError):
                torch.distributed.barrier()
        torch.distributed.destroy_process_group()


#: what gloo and NCCL say when another process never came to a collective, or left it
_TIMEOUT = re.compile(r"timed out|timeout|watchdog", re.IGNORECASE)
_LEFT = re.compile(r"connection closed by peer|connection reset|broken pipe|communicator was aborted|"
                   r"process group.*(abort|destroy)", re.IGNORECASE)


def collective_error(text: str) -> str | None:
    """``"timeout"`` or ``"left"`` when ``text`` (an error's one line) is a collective's own failure, caused by
    another process (it hangs, or it failed or exited); None otherwise."""
    if not re.search(r"gloo|nccl|collective|ProcessGroup|c10d|\[\d+\.\d+\.\d+\.\d+\]", text, re.IGNORECASE):
        return None
    if _TIMEOUT.search(text):
        return "timeout"
    return "left" if _LEFT.search(text) else None
