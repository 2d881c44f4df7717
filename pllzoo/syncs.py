"""Count host synchronisations: operations that make the host wait for an accelerator.

On CUDA the host queues kernels and runs ahead; an operation whose result the host needs (``item()``,
``float(t)``, ``bool(t)``, ``tolist()``, a copy to the CPU, an op whose output shape depends on the
data: ``nonzero``, boolean indexing, ``unique``, ...) waits until the queue has drained.  pllzoo's rule:
no such wait inside a training step; values for logging are summed as device tensors and read once per
epoch.

* :func:`count_syncs` counts them during a block.  On any device it counts, through a
  ``TorchDispatchMode``, the ops that would synchronise on CUDA (:data:`SYNC_OPS`, boolean indexing,
  copies from an accelerator to the CPU) and, through a ``TorchFunctionMode``, ``tolist()``, ``numpy()``,
  ``cpu()``, printing and formatting a tensor (which on a CPU tensor dispatch no op).  ``.to("cpu")``
  is not caught on the CPU: there it cannot be told from ``.to(run.device)``.  Where CUDA is present it also sets
  ``torch.cuda.set_sync_debug_mode("warn")`` and counts the warnings, which catches what the op list
  misses (e.g. a blocking host-to-device copy).  So a CPU-only test can check that a step would not
  wait on a GPU.
* :func:`host_reads_are_free` tells code whether a host read of a tensor on ``device`` costs nothing:
  on the CPU outside :func:`count_syncs`.  Code may then branch on tensor values (early exits that
  skip work); elsewhere, and inside :func:`count_syncs` (which thereby checks the accelerator's path
  on a CPU), it must take its branch-free form, which has to give the same result.
* :func:`host_side` marks a block that works on host tensors by design (draws from the run's CPU
  generator): its ops are not counted on the CPU, where they cannot be told from device tensors.
* :func:`class_counts` is a sync-free ``bincount`` (CUDA's sizes its output from the data's max).

Usage::

    with count_syncs() as syncs:
        step()
    assert syncs.count == 0, syncs.ops
"""

from __future__ import annotations

import contextlib
import threading
import warnings
from dataclasses import dataclass, field
from typing import Iterator

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

aten = torch.ops.aten

# ops that synchronise on CUDA whatever their arguments: a value read by the host, or an output whose
# shape depends on the data (the host must learn it before it can allocate)
SYNC_OPS = {
    aten._local_scalar_dense.default,  # item(), float(t), int(t), bool(t), t.any() in an if
    aten.nonzero.default, aten.argwhere.default, aten.masked_select.default,
    aten.unique_consecutive.default, aten.unique_dim.default, aten._unique.default, aten._unique2.default,
    aten.bincount.default,  # CUDA sizes the output from the data's max
    aten.equal.default,  # returns a Python bool
    aten.repeat_interleave.Tensor,  # without output_size: the length is data-dependent
}
_INDEX_OPS = {aten.index.Tensor, aten.index_put.default, aten.index_put_.default, aten._index_put_impl_.default}
_COPY_OPS = {aten._to_copy.default, aten.copy_.default}
# read the values on the host: on a CPU tensor no op is dispatched (``cpu()`` returns the tensor itself, printing and
# formatting read its memory), so they are caught by name; on CUDA each is a blocking device-to-host copy
_HOST_READS = {torch.Tensor.tolist, torch.Tensor.numpy, torch.Tensor.cpu, torch.Tensor.__repr__,
               torch.Tensor.__format__}

_state = threading.local()


@dataclass
class SyncCounter:
    """What :func:`count_syncs` saw: ``count`` host synchronisations, named in ``ops``."""

    ops: list[str] = field(default_factory=list)

    @property
    def count(self) -> int:
        return len(self.ops)


def _depth() -> int:
    return getattr(_state, "counting", 0)


def host_reads_are_free(device: torch.device | str) -> bool:
    """True when reading a tensor of ``device`` on the host waits for nothing: the CPU, outside
    :func:`count_syncs`.  Elsewhere code must not branch on tensor values."""
    return torch.device(device).type == "cpu" and _depth() == 0


@contextlib.contextmanager
def host_side() -> Iterator[None]:
    """Mark a block whose tensors live on the host by design (e.g. draws from a CPU generator)."""
    _state.host = getattr(_state, "host", 0) + 1
    try:
        yield
    finally:
        _state.host -= 1


def _is_bool_index(indices) -> bool:
    return any(isinstance(i, torch.Tensor) and i.dtype in (torch.bool, torch.uint8) for i in indices or ())


def _syncs(func, args, kwargs) -> bool:
    """Whether ``func(*args, **kwargs)`` synchronises on CUDA."""
    if func in SYNC_OPS:
        return True
    if func is aten.index_select.default:  # on a sparse tensor the output's nnz depends on the data
        return args[0].layout != torch.strided
    if func in _INDEX_OPS:  # a boolean mask is turned into indices with nonzero
        return _is_bool_index(args[1] if len(args) > 1 else kwargs.get("indices"))
    if func is aten._to_copy.default:  # device -> CPU, blocking
        src, dst = args[0], kwargs.get("device")
        return (src.device.type != "cpu" and dst is not None and torch.device(dst).type == "cpu"
                and not kwargs.get("non_blocking", False))
    if func is aten.copy_.default:  # device -> CPU, blocking (a non-blocking copy to pinned memory waits for nothing)
        blocking = not (args[2] if len(args) > 2 else kwargs.get("non_blocking", False))
        return args[0].device.type == "cpu" and args[1].device.type != "cpu" and blocking
    return False


class _DispatchCounter(TorchDispatchMode):
    def __init__(self, counter: SyncCounter) -> None:
        super().__init__()
        self.counter = counter

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if getattr(_state, "host", 0) == 0 and _syncs(func, args, kwargs):
            self.counter.ops.append(str(func))
        return func(*args, **kwargs)


class _FunctionCounter(TorchFunctionMode):
    def __init__(self, counter: SyncCounter) -> None:
        super().__init__()
        self.counter = counter

    def __torch_function__(self, func, types, args=(), kwargs=None):
        if func in _HOST_READS and getattr(_state, "host", 0) == 0:
            self.counter.ops.append(f"Tensor.{func.__name__}")
        return func(*args, **(kwargs or {}))


@contextlib.contextmanager
def count_syncs(cuda: bool | None = None) -> Iterator[SyncCounter]:
    """Count the host synchronisations of the block (see the module docstring).

    :param cuda: also count CUDA's own sync warnings (``set_sync_debug_mode("warn")``); default: when
        CUDA is available.  A sync caught both ways counts twice.
    :returns: a :class:`SyncCounter`, filled when the block ends.
    """
    counter = SyncCounter()
    cuda = torch.cuda.is_available() if cuda is None else cuda
    _state.counting = _depth() + 1
    old_mode = torch.cuda.get_sync_debug_mode() if cuda else 0
    try:
        with warnings.catch_warnings(record=True) as caught, _FunctionCounter(counter), _DispatchCounter(counter):
            warnings.simplefilter("always")
            if cuda:
                torch.cuda.set_sync_debug_mode("warn")
            try:
                yield counter
            finally:
                if cuda:
                    torch.cuda.set_sync_debug_mode(old_mode)
        counter.ops.extend(f"cuda: {w.message}" for w in caught if "synchroniz" in str(w.message))
        for w in caught:  # the other warnings still reach the caller
            if "synchroniz" not in str(w.message):
                warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    finally:
        _state.counting -= 1


def class_counts(labels: torch.Tensor, num_classes: int) -> torch.Tensor:
    """``bincount(labels, minlength=num_classes)`` for labels in ``[0, num_classes)``, without a sync → long ``[K]``."""
    ones = torch.ones_like(labels, dtype=torch.long)
    return torch.zeros(num_classes, dtype=torch.long, device=labels.device).scatter_add_(0, labels, ones)
