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
import random
import sys
import warnings
from typing import Any, Iterator


DYNAMO_KEYS = ("automatic_dynamic_shapes", "recompile_limit", "cache_size_limit")
"""torch._dynamo's process-wide settings that ``train.compile=reduce-overhead`` sets for its run
(:func:`pllzoo.devices.compile_model`); :func:`torch_globals_kept` sets them back."""


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


SETTINGS: dict[str, str] = {  # name: how it is set
    "default dtype": "torch.set_default_dtype",
    "grad mode": "torch.set_grad_enabled",
    "deterministic algorithms": "torch.use_deterministic_algorithms",
    "their warn-only mode": "torch.use_deterministic_algorithms(..., warn_only=)",
    "anomaly mode": "torch.autograd.set_detect_anomaly",
    "float32 precision (TF32)": "torch.set_float32_matmul_precision, allow_tf32 or torch.backends.*.fp32_precision",
    "cuDNN benchmark": "torch.backends.cudnn.benchmark",
    "cuDNN deterministic": "torch.backends.cudnn.deterministic",
}
"""Torch's process-wide settings that change what every computation after them does (the default device apart,
:func:`torch_globals_kept`), by name: how each is set."""

_FP32_PRECISION = ("fp32_precision", "cuda.matmul.fp32_precision", "cudnn.fp32_precision", "cudnn.conv.fp32_precision",
                   "cudnn.rnn.fp32_precision", "mkldnn.fp32_precision", "mkldnn.matmul.fp32_precision",
                   "mkldnn.conv.fp32_precision", "mkldnn.rnn.fp32_precision")
"""torch.backends' TF32 switches of the API torch >= 2.9 recommends, which the legacy ones
(``torch.set_float32_matmul_precision``, ``allow_tf32``) also set: together they say what both APIs set.  Once a
new switch is set, the legacy getters raise (an outside review: a plugin that did so failed every command)."""


def _backend(path: str) -> tuple[Any, str] | None:
    """(the object, the attribute) of ``torch.backends.<path>``, or None where this torch lacks it."""
    import torch

    obj, parts = torch.backends, path.split(".")
    for part in parts[:-1]:
        obj = getattr(obj, part, None)
    return (obj, parts[-1]) if obj is not None and hasattr(obj, parts[-1]) else None


def _legacy_precision() -> tuple[Any, ...] | None:
    """The legacy API's view: (float32 matmul precision, cuBLAS allow_tf32, cuDNN allow_tf32); None where torch
    refuses to say (the two APIs mixed)."""
    import torch

    try:
        return (torch.get_float32_matmul_precision(), torch.backends.cuda.matmul.allow_tf32,
                torch.backends.cudnn.allow_tf32)
    except RuntimeError:
        return None


def _precision() -> tuple[tuple[str, Any], ...]:
    """The TF32 switches now: the new API's where this torch has it, else the legacy view."""
    found = [(path, getattr(*where)) for path in _FP32_PRECISION if (where := _backend(path)) is not None]
    return tuple(found) if found else (("legacy", _legacy_precision()),)


def torch_settings() -> dict[str, Any]:
    """:data:`SETTINGS`' values now, by name (and the legacy TF32 view, to put back first: :func:`put_back`)."""
    import torch

    return {"default dtype": str(torch.get_default_dtype()), "grad mode": torch.is_grad_enabled(),
            "deterministic algorithms": torch.are_deterministic_algorithms_enabled(),
            "their warn-only mode": torch.is_deterministic_algorithms_warn_only_enabled(),
            "anomaly mode": torch.is_anomaly_enabled(),
            "float32 precision (TF32)": _precision(),
            "cuDNN benchmark": torch.backends.cudnn.benchmark,
            "cuDNN deterministic": torch.backends.cudnn.deterministic,
            "legacy precision": _legacy_precision()}


def _shown(name: str, now: Any, before: Any) -> str:
    """A changed setting's new value, as a line shows it (of the TF32 switches, those that changed)."""
    if name == "float32 precision (TF32)":
        old = dict(before)
        return ", ".join(f"{path}={value}" for path, value in now if old.get(path) != value)
    return str(now)


def put_back(before: dict[str, Any]) -> list[str]:
    """Set :data:`SETTINGS` back to ``before`` (:func:`torch_settings`' answer) → the names of those that had
    changed, each with its new value and how it is set (``grad mode (False; torch.set_grad_enabled)``)."""
    import torch

    now = torch_settings()
    changed = [f"{name} ({_shown(name, now[name], before[name])}; {SETTINGS[name]})" for name in SETTINGS
               if now[name] != before[name]]
    if not changed:
        return changed
    torch.set_default_dtype(getattr(torch, str(before["default dtype"]).removeprefix("torch.")))
    torch.set_grad_enabled(before["grad mode"])
    torch.use_deterministic_algorithms(before["deterministic algorithms"], warn_only=before["their warn-only mode"])
    torch.set_anomaly_enabled(before["anomaly mode"])
    torch.backends.cudnn.benchmark = before["cuDNN benchmark"]
    torch.backends.cudnn.deterministic = before["cuDNN deterministic"]
    if now["float32 precision (TF32)"] != before["float32 precision (TF32)"]:
        legacy = before["legacy precision"]
        if legacy is not None:  # the legacy setters first: they set the new switches too, which then go back
            torch.set_float32_matmul_precision(legacy[0])
            torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = legacy[1], legacy[2]
        for path, value in before["float32 precision (TF32)"]:
            where = _backend(path) if path != "legacy" else None
            if where is not None:
                setattr(*where, value)
    return changed


@contextlib.contextmanager
def torch_globals_kept() -> Iterator[None]:
    """Torch's process-wide settings as they were before, afterwards: :data:`SETTINGS` (the default dtype, grad
    mode, deterministic algorithms and their warn-only mode, anomaly mode, the TF32 switches of either API, cuDNN's
    benchmark and deterministic flags) and the default device."""
    import torch

    get_device = getattr(torch, "get_default_device", None)  # torch >= 2.3
    device = get_device() if get_device is not None else None
    length = getattr(torch._C, "_len_torch_function_stack", None)
    modes = length() if length is not None else None
    before = torch_settings()
    dynamo = sys.modules.get("torch._dynamo.config")  # train.compile=reduce-overhead sets two (pllzoo.devices)
    compiler = {k: getattr(dynamo, k) for k in DYNAMO_KEYS if hasattr(dynamo, k)} if dynamo is not None else {}
    try:
        yield
    finally:
        _dynamo_back(compiler)
        put_back(before)
        if modes is not None and length() > modes:  # a with-block of a device, or set_default_device, left open
            pop_modes(modes)
        if device is not None and get_device() != device:  # None: torch's own default (the CPU), no mode left
            torch.set_default_device(None if device == torch.device("cpu") else device)


def _dynamo_back(compiler: dict[str, Any]) -> None:
    """:data:`DYNAMO_KEYS` back to ``compiler`` (their values before), or, where torch._dynamo was first imported
    since (a torch optimizer imports it), to their defaults; without a word: pllzoo's own settings of a run (an
    outside review: the caller's own compiled code then recompiled at every new shape)."""
    dynamo = sys.modules.get("torch._dynamo.config")
    if dynamo is None:
        return
    entries = getattr(dynamo, "_config", {})
    for key in DYNAMO_KEYS:
        value = compiler[key] if key in compiler else getattr(entries.get(key), "default", None)
        if value is not None and hasattr(dynamo, key) and getattr(dynamo, key) != value:
            setattr(dynamo, key, value)


@contextlib.contextmanager
def callers_torch_kept(keep: bool = True) -> Iterator[None]:
    """Around a command called in-process (a notebook, a script calling :data:`pllzoo.cli.cli`): torch's thread
    count, torch's and Python's global random state as the caller had them, afterwards (outside reviews:
    ``--threads`` and the trainer's seeds stayed set in the caller's session; the first bench drew from
    ``random``).  Nothing to keep where torch was not imported before
    the command, or when ``keep`` is false (the ``pllzoo`` program, which ends with the command)."""
    torch = sys.modules.get("torch")
    if not keep or torch is None:
        yield
        return
    threads, state = torch.get_num_threads(), torch.random.get_rng_state()
    cuda = torch.cuda.get_rng_state_all() if torch.cuda.is_initialized() else None
    python = random.getstate()  # a library's import draws from it (rich's, on a bench's first table)
    try:
        yield
    finally:
        torch.set_num_threads(threads)
        torch.random.set_rng_state(state)
        random.setstate(python)
        if cuda is not None:
            torch.cuda.set_rng_state_all(cuda)


@contextlib.contextmanager
def plugin_code() -> Iterator[None]:
    """Around code that runs plugins' hooks: torch's settings kept (:func:`torch_globals_kept`), the warning
    filters and display too (an outside review: a component's ``warnings.simplefilter("error")`` stayed for the
    runs after its own and the caller), stdout to stderr."""
    with torch_globals_kept(), warnings_kept(), contextlib.redirect_stdout(sys.stderr):
        yield


@contextlib.contextmanager
def warnings_kept() -> Iterator[None]:
    """The warning filters and display as they were, afterwards.  Unlike ``warnings.catch_warnings``, which
    resets every module's record of the warnings shown once on the way in and out, only a change is undone, so
    a warning shown in a bench's first run is not shown again for each run after it."""
    filters, shown = list(warnings.filters), warnings.showwarning
    try:
        yield
    finally:
        warnings.showwarning = shown
        if list(warnings.filters) != filters:
            warnings.resetwarnings()  # tells the modules' records that the filters changed
            warnings.filters[:] = filters
