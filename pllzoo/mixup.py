"""Mixup for PLL losses (Zhang et al., ICLR 2018), as SoLar and the SoLar protocol for baselines use it.

One coefficient per batch, l = max(l', 1 − l') with l' ~ Beta(α, α) (SoLar's code), one permutation
π; the mixed input l·x + (1 − l)·x[π] goes through an extra train-mode forward pass, and any
per-sample loss ℓ(z, a) is mixed as l·ℓ(z, a) + (1 − l)·ℓ(z, a[π]).  For soft-target cross-entropy
(linear in its targets) this equals CE with mixed targets l·q + (1 − l)·q[π].
"""

from __future__ import annotations

from typing import Callable

import numpy as np
import torch

from pllzoo.run import Step
from pllzoo.syncs import host_side

PerSampleLoss = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


def mixup_coefficient(generator: torch.Generator, alpha: float) -> float:
    """l = max(l', 1 − l') with l' ~ Beta(α, α), drawn from the run's (host) generator."""
    with host_side():  # a CPU generator's draw: no device is involved
        seed = int(torch.randint(2**31 - 1, (1,), generator=generator))
    lam = float(np.random.RandomState(seed).beta(alpha, alpha))
    return max(lam, 1.0 - lam)


def true_rows(mask: torch.Tensor, count: int) -> torch.Tensor:
    """Positions of the ``count`` True entries of a bool ``[B]`` mask, ascending → long ``[count]``
    (``mask.nonzero()`` without a host sync, given the count)."""
    return torch.sort((~mask).to(torch.uint8), stable=True).indices[:count]


def mixup_loss(step: Step, loss_fn: PerSampleLoss, labels: torch.Tensor, alpha: float,
               rows: torch.Tensor | None = None, n_rows: int | None = None) -> torch.Tensor:
    """Mean mixed loss over the batch (or its ``rows``, a bool mask): one extra forward pass.

    :param labels: per-sample label information ``[B, ...]`` that ``loss_fn(logits, labels)`` reads
        (soft targets, candidate rows, ...); permuted along with the inputs.
    :param n_rows: the number of True entries of ``rows`` if the caller knows it; otherwise it is read
        here (a host sync: the mixed batch's size, and so the forward pass and the random draws,
        depend on it).
    Sync-free over the whole batch: the coefficient comes from the host generator, the permutation
    from ``step.device_generator`` (the same generator on CPU, so the CPU stream is unchanged).
    """
    x, a = step.batch.x, labels
    if rows is not None:
        keep = true_rows(rows, int(rows.sum()) if n_rows is None else n_rows)
        x, a = x.index_select(0, keep), labels.index_select(0, keep)
    lam = mixup_coefficient(step.generator, alpha)
    gen = step.device_generator if step.device_generator is not None else step.generator
    perm = torch.randperm(x.shape[0], generator=gen, device=gen.device).to(x.device)
    logits = step.forward(lam * x + (1 - lam) * x[perm])  # train mode: BN sees the mixed batch
    return (lam * loss_fn(logits, a) + (1 - lam) * loss_fn(logits, a[perm])).mean()
