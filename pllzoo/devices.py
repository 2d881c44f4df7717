"""Where a run trains: the device named on the command line, and the compiled network on it."""

from __future__ import annotations

import re

import torch

from pllzoo.errors import PLLZooError


_DEVICE = re.compile(r"cuda(?::(\d+))?")


def resolve_device(name: str) -> torch.device:
    """``auto`` → CUDA when present, else CPU; ``cpu``; ``cuda`` or ``cuda:i``, which must exist.

    :raises PLLZooError: any other name (``tpu``, ``""``), or a CUDA device torch does not see (one line).
    """
    name = name.strip()
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name == "cpu":
        return torch.device("cpu")
    cuda = _DEVICE.fullmatch(name)
    if cuda is None:
        raise PLLZooError(f"unknown --device {name!r}; use auto, cpu, cuda or cuda:i")
    if not torch.cuda.is_available():
        raise PLLZooError("--device cuda asked for, but torch sees no CUDA device; use --device auto or cpu")
    if cuda.group(1) is not None and int(cuda.group(1)) >= torch.cuda.device_count():
        raise PLLZooError(f"--device {name}: torch sees {torch.cuda.device_count()} CUDA device(s), "
                          f"numbered from 0")
    return torch.device(name)


def compile_model(model: torch.nn.Module, mode: str) -> None:
    """``torch.compile`` the network in place (its state-dict keys stay), in ``mode``.

    The trainer's passes are launch-bound on a GPU at batch 256 (``benchmarks/gpu/README.md``: eager
    ResNet-18 26.6k img/s, CUDA graphs 58.6k).  With ``reduce-overhead`` the fixed-shape passes (the
    weak and strong batches, evaluation batches) replay CUDA graphs; passes whose size depends on
    the data (SoLar's mixup over the reliable rows) run compiled without graphs rather than
    recording one graph per size.  Each step starts with ``cudagraph_mark_step_begin``
    (:meth:`Trainer.step`), so graph outputs of the previous step may be overwritten.

    Experimental: on an H100 (torch 2.11) SoLar's step, which calls the network two or three times
    before one backward, fails in ``backward`` under ``reduce-overhead`` (a saved [512] tensor is
    modified in place; ``benchmarks/gpu/README.md``, second H100 session).  ``default`` is unaffected.
    """
    if mode == "reduce-overhead":
        import torch._inductor.config as inductor_config

        inductor_config.triton.cudagraph_skip_dynamic_graphs = True
    model.compile(mode=mode)
