"""Loss functions shared by components: numerically safe, per-sample, float32."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from pllzoo.distributed import SINGLE, DistContext


def soft_cross_entropy(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Per-sample ``-sum_j t_ij log softmax(z_i)_j`` → ``[B]`` (log-softmax, never log of a softmax)."""
    return -(targets * F.log_softmax(logits.float(), dim=1)).sum(dim=1)


def normalize_masked(weights: torch.Tensor, mask: torch.Tensor, log_weights: torch.Tensor) -> torch.Tensor:
    """Rows of ``weights ⊙ mask`` divided by their sums → ``[B, K]``; a row whose masked sum is below the
    float's smallest normal number (the model puts all its mass outside the mask, so the products
    underflow) is ``softmax`` over the mask of ``log_weights`` instead — the same weights in exact
    arithmetic — so every row with a non-empty mask sums to 1.  Rows above that are
    :func:`normalize_rows`'s, bit for bit."""
    kept = weights * mask
    small = kept.sum(dim=1, keepdim=True) < torch.finfo(kept.dtype).tiny  # [B, 1]
    safe = torch.softmax(log_weights.masked_fill(mask <= 0, float("-inf")), dim=1).nan_to_num(0.0)
    return torch.where(small, safe, normalize_rows(kept))


def masked_mean(values: torch.Tensor, mask: torch.Tensor | None, dist: DistContext = SINGLE) -> torch.Tensor:
    """Mean of ``values [B]`` over a bool mask or float weights ``[B]``; 0 when the mask is empty.

    ``dist`` (``step.dist``): under G > 1 processes, ``values`` and ``mask`` are this rank's slice and
    the mean is over the *global* batch's mask (``docs/distributed.md``): the local loss is
    G·Σ_i w_i·v_i / Σ_G w (one all-reduce of the weight sum), so that DDP's average of the ranks'
    gradients is the gradient of the global masked mean.  Every rank must call it.  Without a mask the
    local mean is already right (equal slices).
    """
    if mask is None:
        return values.mean()
    w = mask.to(values.dtype)
    if not dist.active:
        return (values * w).sum() / w.sum().clamp_min(1e-12)
    total = dist.all_reduce_sum(w.sum().detach())  # Σ_G w
    return (values * w).sum() * dist.world / total.clamp_min(1e-12)


def normalize_rows(x: torch.Tensor) -> torch.Tensor:
    """Rows divided by their sums (rows that sum to 0 stay 0)."""
    return x / x.sum(dim=1, keepdim=True).clamp_min(torch.finfo(x.dtype).tiny)
