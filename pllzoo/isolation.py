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
from typing import Any, Iterator


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


SETTINGS: dict[str, tuple[str, Any]] = {  # name: (how it is set, torch's own value before anyone set it)
    "default dtype": ("torch.set_default_dtype", "torch.float32"),
    "grad mode": ("torch.set_grad_enabled", True),
    "deterministic algorithms": ("torch.use_deterministic_algorithms", False),
    "their warn-only mode": ("torch.use_deterministic_algorithms(..., warn_only=)", False),
    "anomaly mode": ("torch.autograd.set_detect_anomaly", False),
    "float32 matmul precision": ("torch.set_float32_matmul_precision", "highest"),
    "cuDNN benchmark": ("torch.backends.cudnn.benchmark", False),
    "cuDNN deterministic": ("torch.backends.cudnn.deterministic", False),
}
"""Torch's process-wide settings that change what every computation after them does (the default device apart,
:func:`torch_globals_kept`), by name: how each is set, and its value in a fresh process."""


def torch_settings() -> dict[str, Any]:
    """:data:`SETTINGS`' values now (their fresh-process values when no one imported torch yet: the CLI does
    not), by name."""
    torch = sys.modules.get("torch")
    if torch is None:
        return {name: fresh for name, (_, fresh) in SETTINGS.items()}
    return {"default dtype": str(torch.get_default_dtype()), "grad mode": torch.is_grad_enabled(),
            "deterministic algorithms": torch.are_deterministic_algorithms_enabled(),
            "their warn-only mode": torch.is_deterministic_algorithms_warn_only_enabled(),
            "anomaly mode": torch.is_anomaly_enabled(),
            "float32 matmul precision": torch.get_float32_matmul_precision(),
            "cuDNN benchmark": torch.backends.cudnn.benchmark,
            "cuDNN deterministic": torch.backends.cudnn.deterministic}


def put_back(before: dict[str, Any]) -> list[str]:
    """Set :data:`SETTINGS` back to ``before`` (:func:`torch_settings`' answer) → the names of those that had
    changed, each with its new value and how it is set (``grad mode (False; torch.set_grad_enabled)``)."""
    now = torch_settings()
    changed = [f"{name} ({now[name]}; {SETTINGS[name][0]})" for name in SETTINGS if now[name] != before[name]]
    if changed:
        import torch

        torch.set_default_dtype(getattr(torch, str(before["default dtype"]).removeprefix("torch.")))
        torch.set_grad_enabled(before["grad mode"])
        torch.use_deterministic_algorithms(before["deterministic algorithms"],
                                           warn_only=before["their warn-only mode"])
        torch.set_anomaly_enabled(before["anomaly mode"])
        torch.set_float32_matmul_precision(before["float32 matmul precision"])
        torch.backends.cudnn.benchmark = before["cuDNN benchmark"]
        torch.backends.cudnn.deterministic = before["cuDNN deterministic"]
    return changed


@contextlib.contextmanager
def torch_globals_kept() -> Iterator[None]:
    """Torch's process-wide settings as they were before, afterwards: :data:`SETTINGS` (the default dtype, grad
    mode, deterministic algorithms and their warn-only mode, anomaly mode, float32 matmul precision, cuDNN's
    benchmark and deterministic flags) and the default device."""
    import torch

    get_device = getattr(torch, "get_default_device", None)  # torch >= 2.3
    device = get_device() if get_device is not None else None
    length = getattr(torch._C, "_len_torch_function_stack", None)
    modes = length() if length is not None else None
    before = torch_settings()
    try:
        yield
    finally:
        put_back(before)
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
