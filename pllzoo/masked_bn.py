"""BatchNorm over a subset of a batch's rows: a pass of fixed shape that computes the subset's pass.

Why.  SoLar mixes only the reliable rows R of a batch, so its mixup pass has |R| rows, a size that
changes every step; under CUDA graphs (``--hp train.compile=reduce-overhead``) a pass of a new size
cannot replay a recorded graph, and the eager pass cost SoLar 18 ms of launching a step on an H100
(``benchmarks/gpu/README.md``, third session).  Every layer of the built-in networks but BatchNorm
treats rows independently, so the |R|-row pass equals a pass over the whole batch size B in which
the R rows come first and BatchNorm's statistics (and its running-statistics update) are taken over
those rows only; the other rows' outputs are then ignored by the loss.  This module gives that
BatchNorm; the trainer installs it (:func:`install`) only when a run asks for padded subset passes
(``train.mixup_rows``), so every other run keeps torch's BatchNorm.

Maths, per channel c, rows weighted by w ∈ {0, 1}^B, m = Σ_i w_i · (spatial size):
  μ_c = Σ w_i x_ic / m,  σ²_c = Σ w_i (x_ic − μ_c)² / m,  y = γ_c (x − μ_c) / √(σ²_c + ε) + β_c;
  running_mean ← (1 − momentum) · running_mean + momentum · μ,  running_var likewise with the unbiased
  σ² · m / (m − 1), exactly as ``torch.nn.BatchNorm*d`` over the selected rows.  With fewer than two
  selected rows nobody uses the pass (the mixup term is zero, :func:`pllzoo.mixup.mixup_loss`): the
  statistics are then taken over all rows, so every activation stays finite, and the running
  statistics are left as they are (the exact path makes no pass at all then).
Computed in float32 at least (under bf16 autocast too), returned in the input's dtype, as torch's BatchNorm.
Test: tests/unit/test_masked_bn.py (outputs, gradients and running statistics against torch's
BatchNorm on the subset, 2-d and 4-d, momentum and cumulative averaging).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch
from torch import nn


class MaskedBatchNormMixin:
    """Adds the masked mode to a ``torch.nn.BatchNorm1d/2d``; plain BatchNorm while ``row_masked`` is False."""

    row_masked: bool
    row_weight: torch.Tensor  # float32 [B], shared by every masked layer of a network (a non-persistent buffer)

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # noqa: D102 (torch's BatchNorm docstring applies)
        if not (self.row_masked and self.training):
            return super().forward(x)  # type: ignore[misc]
        w = self.row_weight[: x.shape[0]]  # [B]
        spatial = x[0, 0].numel()  # H·W for 4-d inputs, 1 for 2-d
        n_rows = w.sum()
        enough = n_rows > 1.5  # at least two rows: the pass is used, the running statistics move
        w = torch.where(enough, w, torch.ones_like(w))  # otherwise statistics over all rows: finite, unused
        n_rows = torch.where(enough, n_rows, float(w.shape[0]))
        view = (-1,) + (1,) * (x.dim() - 1)  # w over rows
        per_channel = (1, -1) + (1,) * (x.dim() - 2)  # statistics over channels
        dims = [0] + list(range(2, x.dim()))
        xf = x.float() if x.dtype in (torch.float16, torch.bfloat16) else x  # float32 at least
        w = w.to(xf.dtype)
        wv = w.view(view)
        count = n_rows.to(xf.dtype) * spatial  # m
        mean = (xf * wv).sum(dims) / count  # [C]
        centred = xf - mean.view(per_channel)
        var = (centred.square() * wv).sum(dims) / count  # biased, for normalising
        y = centred * torch.rsqrt(var + self.eps).view(per_channel)
        if self.affine:
            y = y * self.weight.view(per_channel) + self.bias.view(per_channel)
        if self.track_running_stats:
            with torch.no_grad():
                step = enough.to(self.num_batches_tracked.dtype)
                self.num_batches_tracked.data.add_(step)
                momentum = (self.momentum if self.momentum is not None
                            else 1.0 / self.num_batches_tracked.clamp_min(1).to(mean.dtype))
                rate = momentum * enough.to(mean.dtype)  # 0: unchanged
                unbiased = var * count / (count - 1).clamp_min(1)
                # through .data, as torch's BatchNorm kernel writes them: the version counters stay, so an earlier
                # pass that saved these buffers for its backward (every BatchNorm call does) can still run it
                self.running_mean.data.add_(rate * (mean - self.running_mean))
                self.running_var.data.add_(rate * (unbiased - self.running_var))
        return y.to(x.dtype)


class MaskedBatchNorm1d(MaskedBatchNormMixin, nn.BatchNorm1d):
    """``torch.nn.BatchNorm1d`` with the masked mode (module docstring)."""


class MaskedBatchNorm2d(MaskedBatchNormMixin, nn.BatchNorm2d):
    """``torch.nn.BatchNorm2d`` with the masked mode (module docstring)."""


_MASKED = {nn.BatchNorm1d: MaskedBatchNorm1d, nn.BatchNorm2d: MaskedBatchNorm2d}


class RowMasks:
    """The masked layers of one network and their shared row weights: a padded pass runs inside
    :meth:`applied` (or between :meth:`set` and :meth:`clear`)."""

    def __init__(self, layers: list[MaskedBatchNormMixin], weight: torch.Tensor) -> None:
        self.layers, self.weight = layers, weight

    @property
    def active(self) -> bool:
        """Whether a padded pass is under way (between :meth:`set` and :meth:`clear`)."""
        return bool(self.layers) and self.layers[0].row_masked

    def set(self, weight: torch.Tensor) -> None:
        """Mask mode with row weights ``weight`` (float [b], 0/1, b ≤ the capacity); no host read."""
        self.weight[: weight.shape[0]].copy_(weight)
        for layer in self.layers:
            layer.row_masked = True

    def clear(self) -> None:
        """Back to torch's BatchNorm."""
        for layer in self.layers:
            layer.row_masked = False

    @contextlib.contextmanager
    def applied(self, weight: torch.Tensor) -> Iterator[None]:
        """Mask mode with row weights ``weight`` for the passes inside the block."""
        self.set(weight)
        try:
            yield
        finally:
            self.clear()


def supports(model: nn.Module) -> bool:
    """Whether :func:`install` makes padded passes of ``model`` equal its subset passes: each of its
    normalisation layers with batch statistics is a plain ``BatchNorm1d/2d`` (not a subclass such as
    SyncBatchNorm, nor InstanceNorm); a network without one qualifies.  Layers outside torch's
    ``_NormBase`` are assumed to treat rows independently, as convolutions, linear layers and
    Layer/GroupNorm do."""
    return all(type(m) in _MASKED or type(m) in _MASKED.values()
               for m in model.modules() if isinstance(m, nn.modules.batchnorm._NormBase))


def install(model: nn.Module, capacity: int) -> RowMasks:
    """Replace every ``BatchNorm1d/2d`` of ``model`` (on its device) by its masked twin, in place: same
    parameters, buffers and state-dict keys; plain BatchNorm until :meth:`RowMasks.set`.

    :param capacity: the most rows a padded pass has (the batch size).
    """
    device = next((t.device for t in model.state_dict().values()), torch.device("cpu"))
    weight = torch.ones(capacity, device=device)
    layers: list[MaskedBatchNormMixin] = []
    for module in list(model.modules()):
        masked_cls = _MASKED.get(type(module))  # exact types: a subclass may compute something else
        if masked_cls is None:
            continue
        module.__class__ = masked_cls  # the same object: parameters, buffers and hooks are kept
        module.row_masked = False
        module.register_buffer("row_weight", weight, persistent=False)  # one tensor shared by all layers
        layers.append(module)
    return RowMasks(layers, weight)
