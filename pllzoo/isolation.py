"""What a plugin's code may not leak out of the run it trains: torch's process-wide settings and stdout.

A bench trains its runs one after another in one process (``--jobs 1``); a component that sets the default
dtype or turns grad mode off, say, would otherwise change every run after its own, which would still be
recorded as fine.  And stdout carries results (the bench's table, ``--json`` listings): what a plugin prints
goes to stderr.  The data are the trainer's own copy (:class:`pllzoo.trainer.Trainer`).  Used around each
run (:func:`pllzoo.bench._train`), the cost estimate's timed steps (:mod:`pllzoo.timing`) and plugin
discovery (:func:`pllzoo.registry.get_registry`, stdout only).
"""

from __future__ import annotations

import contextlib
import sys
from typing import Iterator


def pop_modes(depth: int) -> None:
    """Pop torch function modes (``set_default_device``'s, a ``with torch.device(...)`` entered and never left)
    above ``depth``, so that nothing after computes under them."""
    import torch

    length = getattr(torch._C, "_len_torch_function_stack", None)
    pop = getattr(torch._C, "_pop_torch_function_stack", None)
    if length is None or pop is None:  # an older torch: the default device's mode at least
        torch.set_default_device(None)
        return
    top = getattr(torch._C, "_get_function_stack_at", None)
    while length() > depth:
        context = getattr(getattr(torch, "_GLOBAL_DEVICE_CONTEXT", None), "device_context", None)
        if context is not None and top is not None and top(length() - 1) is context:
            torch.set_default_device(None)  # set_default_device's own mode: leave it as torch does
        else:
            pop()


@contextlib.contextmanager
def torch_globals_kept() -> Iterator[None]:
    """Torch's process-wide settings as they were before, afterwards: the default dtype and device, grad mode,
    deterministic algorithms (and their warn-only mode), anomaly mode, float32 matmul precision and cuDNN's
    benchmark and deterministic flags."""
    import torch

    get_device = getattr(torch, "get_default_device", None)  # torch >= 2.3
    device = get_device() if get_device is not None else None
    length = getattr(torch._C, "_len_torch_function_stack", None)
    modes = length() if length is not None else None
    before = (torch.get_default_dtype(), torch.is_grad_enabled(), torch.are_deterministic_algorithms_enabled(),
              torch.is_deterministic_algorithms_warn_only_enabled(), torch.is_anomaly_enabled(),
              torch.get_float32_matmul_precision(), torch.backends.cudnn.benchmark, torch.backends.cudnn.deterministic)
    try:
        yield
    finally:
        dtype, grad, det, warn_only, anomaly, precision, benchmark, cudnn_det = before
        torch.set_default_dtype(dtype)
        torch.set_grad_enabled(grad)
        torch.use_deterministic_algorithms(det, warn_only=warn_only)
        torch.set_anomaly_enabled(anomaly)
        torch.set_float32_matmul_precision(precision)
        torch.backends.cudnn.benchmark, torch.backends.cudnn.deterministic = benchmark, cudnn_det
        if modes is not None and length() > modes:  # a with-block of a device, or set_default_device, left open
            pop_modes(modes)
        if device is not None and get_device() != device:  # None: torch's own default (the CPU), no mode left
            torch.set_default_device(None if device == torch.device("cpu") else device)


@contextlib.contextmanager
def plugin_code() -> Iterator[None]:
    """Around code that runs plugins' hooks: torch's settings kept (:func:`torch_globals_kept`), stdout to
    stderr."""
    with torch_globals_kept(), contextlib.redirect_stdout(sys.stderr):
        yield
