"""Class-wise small-loss selection, shared by methods that pick reliable samples per pseudo-class
(SoLar's ``solar.classwise``, HTC's two heads): per-class quotas and the masks that honour them.

No per-class Python loop and no host synchronisation (class counts by ``scatter_add``):
one stable sort by (class, loss), within-class ranks from cumulative counts, compared with a per-class
quota tensor.  Ties in the loss keep batch order.  Tests: tests/unit/test_solar_selection.py.
"""

from __future__ import annotations

import math

import torch

from pllzoo.syncs import class_counts


def classwise_quota(
    pseudo: torch.Tensor, prior: torch.Tensor, rho: float, batch_size: int, at_least_one: bool = True,
) -> torch.Tensor:
    """k_j = max(min(⌈B·r_j·ρ⌉, |B_j|), 1) for present classes, 0 for absent ones → long ``[K]``."""
    present = class_counts(pseudo, prior.numel())
    quota = torch.minimum(torch.ceil(batch_size * prior * rho).long(), present)
    return quota.clamp(min=1).minimum(present) if at_least_one else quota


def small_loss_mask(pseudo: torch.Tensor, loss: torch.Tensor, quota: torch.Tensor) -> torch.Tensor:
    """Keep, per pseudo-class j, its ``quota[j]`` smallest losses → bool ``[B]`` (no class loop)."""
    by_loss = torch.sort(loss, stable=True).indices
    order = by_loss[torch.sort(pseudo[by_loss], stable=True).indices]  # by (class, loss)
    cls = pseudo[order]
    counts = class_counts(pseudo, quota.numel())
    starts = torch.cumsum(counts, 0) - counts  # first position of each class in `order`
    rank = torch.arange(order.numel(), device=order.device) - starts[cls]
    mask = torch.zeros_like(pseudo, dtype=torch.bool)
    mask[order] = rank < quota[cls]
    return mask


def global_small_loss_mask(loss: torch.Tensor, rho: float) -> torch.Tensor:
    """The ⌈B·ρ⌉ smallest losses of the whole batch."""
    k = max(1, min(loss.numel(), math.ceil(loss.numel() * rho)))
    mask = torch.zeros_like(loss, dtype=torch.bool)
    mask[torch.topk(loss, k, largest=False).indices] = True
    return mask
