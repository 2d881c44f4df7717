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

PerSampleLoss = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


def mixup_coefficient(generator: torch.Generator, alpha: float) -> float:
    """l = max(l', 1 − l') with l' ~ Beta(α, α), drawn from the run's generator."""
    seed = int(torch.randint(2**31 - 1, (1,), generator=generator))
    lam = float(np.random.RandomState(seed).beta(alpha, alpha))
    return max(lam, 1.0 - lam)


def mixup_loss(step: Step, loss_fn: PerSampleLoss, labels: torch.Tensor, alpha: float,
               rows: torch.Tensor | None = None) -> torch.Tensor:
    """Mean mixed loss over the batch (or its ``rows``, a bool mask): one extra forward pass.

    :param labels: per-sample label information ``[B, ...]`` that ``loss_fn(logits, labels)`` reads
        (soft targets, candidate rows, ...); permuted along with the inputs.
    """
    x = step.batch.x if rows is None else step.batch.x[rows]
    a = labels if rows is None else labels[rows]
    lam = mixup_coefficient(step.generator, alpha)
    perm = torch.randperm(x.shape[0], generator=step.generator).to(x.device)
    logits = step.forward(lam * x + (1 - lam) * x[perm])  # train mode: BN sees the mixed batch
    return (lam * loss_fn(logits, a) + (1 - lam) * loss_fn(logits, a[perm])).mean()
