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
    graphs; an isolated network with the same calls trains (``benchmarks/gpu/model_limit.py``, variant
    ``dyn``), so the cause was not pinned down.  This arrangement is the one that trains in the
    trainer: on an H100 (third session) SoLar, CORR and PRODEN, 1.2–1.7× faster an epoch than eager
    after 20–45 s of compilation (``benchmarks/gpu/README.md``); opt-in until every method has run it
    on a device.  ``default`` compiles every pass (no graphs).
    """
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
