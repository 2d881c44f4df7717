"""Where a run trains: the device named on the command line, and the compiled network on it."""

from __future__ import annotations

import re
from typing import Any, Callable

import torch

from pllzoo.errors import PLLZooError


_DEVICE = re.compile(r"cuda(?::(\d+))?")


def resolve_device(name: str) -> torch.device:
    """``auto`` → CUDA when present, else CPU; ``cpu``; ``cuda`` or ``cuda:i``, which must exist.

    :raises PLLZooError: any other name (``tpu``, ``""``), or a CUDA device torch does not see (one line).
    """
    given, name = name, name.strip()
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name == "cpu":
        return torch.device("cpu")
    cuda = _DEVICE.fullmatch(name)
    if cuda is None:
        raise PLLZooError(f"unknown --device {given!r}; use auto, cpu, cuda or cuda:i")  # as typed: ' ', not ''"
    if not torch.cuda.is_available():
        raise PLLZooError("--device cuda asked for, but torch sees no CUDA device; use --device auto or cpu")
    if cuda.group(1) is not None and int(cuda.group(1)) >= torch.cuda.device_count():
        raise PLLZooError(f"--device {name}: torch sees {torch.cuda.device_count()} CUDA device(s), "
                          f"numbered from 0")
    return torch.device(name)


def graph_sizes(batch: int, n_train: int, drop_last: bool, eval_batch: int, eval_rows: tuple[int, ...]) -> frozenset[int]:
    """The leading sizes of the passes whose shape the trainer fixes: the training batch ``batch`` (this
    rank's rows), both views in one pass (2·batch), the epoch's last short batch (without ``drop_last``),
    and the evaluation batches over sets of ``eval_rows`` rows (full ones and each set's remainder)."""
    sizes = {batch, 2 * batch, eval_batch}
    if not drop_last:
        sizes |= {n_train % batch, 2 * (n_train % batch)}
    sizes |= {n % eval_batch for n in eval_rows}
    return frozenset(s for s in sizes if s > 0)


def dispatch_by_size(compiled: Callable[..., Any], eager: Callable[..., Any],
                     sizes: frozenset[int]) -> Callable[..., Any]:
    """A call that runs ``compiled`` on inputs whose leading size is in ``sizes``, ``eager`` otherwise."""

    def call(x: torch.Tensor, *args: Any, **kwargs: Any) -> Any:
        return (compiled if x.shape[0] in sizes else eager)(x, *args, **kwargs)

    return call


def compile_model(model: torch.nn.Module, mode: str, sizes: frozenset[int] | None = None) -> None:
    """``torch.compile`` the network in place (its state-dict keys stay), in ``mode``.

    The trainer's passes are launch-bound on a GPU at batch 256 (``benchmarks/gpu/README.md``: eager
    ResNet-18 26.6k img/s, CUDA graphs 58.6k).  With ``reduce-overhead`` the passes of a fixed shape
    (``sizes``, from :func:`graph_sizes`: the weak and strong batches, evaluation batches) replay CUDA
    graphs; a pass whose size depends on the data (SoLar's mixup over the reliable rows) runs *eager*.
    Each step starts with ``cudagraph_mark_step_begin`` (:meth:`Trainer.step`), so graph outputs of the
    previous step may be overwritten.

    Why static graphs per size and eager for the rest: on an H100 (torch 2.11, second session) SoLar's
    step failed in ``backward`` ("a saved [512] tensor is modified in place") when dynamo marked the
    network's passes dynamic after a second size and the data-sized mixup pass ran compiled without
    graphs.  The cause, pinned down in the fourth session (:func:`compile_features`): a compiled pass
    writes BatchNorm's running statistics back with a version-bumping copy, which breaks the backward of
    an eager BatchNorm pass made before it in the same step.  With every pass of a step compiled (SoLar's
    mixup at a fixed shape, ``train.mixup_rows``; the feature passes compiled too) every registered method
    trains under CUDA graphs on an H100, SoLar 2.2× and PRODEN 3.3× faster an epoch than the eager path
    after 20–45 s of compilation (``benchmarks/gpu/README.md``, fourth session).  Still opt-in: the
    default stays ``none`` until the CUDA test suite has run with it on.  ``default`` compiles every pass
    (no graphs).
    """
    if mode == "reduce-overhead" and not hasattr(torch.compiler, "cudagraph_mark_step_begin"):  # torch 2.2 on;
        # the floor is torch 2.1 (an outside review: every step of such a run was an AttributeError)
        raise PLLZooError(f"train.compile=reduce-overhead needs torch>=2.2 (it marks each step for CUDA graphs); "
                          f"this is torch {torch.__version__}: use train.compile=default, or upgrade torch")
    if mode == "reduce-overhead" and sizes is not None:
        import torch._dynamo.config as dynamo_config

        # one static graph per fixed size (a handful, in train and eval mode) rather than one dynamic-shape
        # graph, which cudagraph trees would not record; process-wide settings
        dynamo_config.automatic_dynamic_shapes = False
        limit = "recompile_limit" if hasattr(dynamo_config, "recompile_limit") else "cache_size_limit"
        setattr(dynamo_config, limit, max(getattr(dynamo_config, limit), 2 * len(sizes) + 2))
    model.compile(mode=mode)
    if mode == "reduce-overhead" and sizes is not None and model._compiled_call_impl is not None:
        # nn.Module.__call__ runs _compiled_call_impl when set, else _call_impl (the eager module call)
        model._compiled_call_impl = dispatch_by_size(model._compiled_call_impl, model._call_impl, sizes)


def compile_features(model: torch.nn.Module, mode: str, sizes: frozenset[int] | None = None
                     ) -> Callable[[torch.Tensor], tuple[torch.Tensor, torch.Tensor]]:
    """``model.forward_with_features`` compiled like :func:`compile_model` compiles the network's call (the
    passes of components that ask for features: PiCO, RECORDS, HTC's mixup), as a separate callable; the
    module itself is left alone (components deep-copy it).

    Why every training pass must be compiled alike: a compiled pass writes BatchNorm's running statistics
    back with a copy (AOTAutograd functionalises the in-place update), which bumps the buffers' version
    counters; an *eager* BatchNorm pass earlier in the same step saved those buffers for its backward, so
    the backward then fails ("a [128] tensor is at version 1; expected version 0": RECORDS' methods on an
    H100 and under inductor on the CPU, ``benchmarks/gpu/README.md``, fourth session).  Eager passes after
    every compiled one (a data-sized pass under ``reduce-overhead``) are safe.
    Test: tests/test_compile_option.py::test_feature_passes_are_compiled_too.
    """
    compiled = torch.compile(model.forward_with_features, mode=mode)
    if mode == "reduce-overhead" and sizes is not None:
        return dispatch_by_size(compiled, model.forward_with_features, sizes)
    return compiled
