"""Mixup for PLL losses (Zhang et al., ICLR 2018), as SoLar and the SoLar protocol for baselines use it.

One coefficient per batch, l = max(l', 1 − l') with l' ~ Beta(α, α) (SoLar's code), one permutation
π; the mixed input l·x + (1 − l)·x[π] goes through an extra train-mode forward pass, and any
per-sample loss ℓ(z, a) is mixed as l·ℓ(z, a) + (1 − l)·ℓ(z, a[π]).  For soft-target cross-entropy
(linear in its targets) this equals CE with mixed targets l·q + (1 − l)·q[π].

Under torchrun (G > 1 processes, exact pairing) the mixup is the one-process mixup
of the global batch: every rank draws l and π of the n mixed rows (n = B, or |R_G| over a subset)
from its generators, which stay in lockstep (every rank makes the same draws in the same order: the
same number of rows, decided from replicated or gathered values), so l and π are the same on every
rank and equal to the one-process draw; the inputs and labels of the global batch are gathered
(``step.dist.gather``, rank order = the one-process order, D1), so row j pairs with the global row
π(j); rank g computes the mixed rows j ∈ [g·n/G, (g+1)·n/G) (its own slice for the whole batch) and
its loss G·Σ_j ℓ_j / n, so that DDP's average of the gradients is that of the global mean (D5).
In one process :class:`Mixup` is the plain formula above, bit for bit.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np
import torch

from pllzoo.distributed import DistContext
from pllzoo.run import Step
from pllzoo.syncs import host_side

PerSampleLoss = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


def mixup_coefficient(generator: torch.Generator, alpha: float) -> float:
    """l = max(l', 1 − l') with l' ~ Beta(α, α), drawn from the run's (host) generator."""
    with host_side():  # a CPU generator's draw: no device is involved
        seed = int(torch.randint(2**31 - 1, (1,), generator=generator))
    lam = float(np.random.RandomState(seed).beta(alpha, alpha))
    return max(lam, 1.0 - lam)


def take_rows(x: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """``x.index_select(0, index)`` in ``x``'s memory format → ``[len(index), ...]``.

    ``index_select`` returns a contiguous (NCHW) tensor even from a channels-last batch (the trainer's
    layout on CUDA), which the channels-last network would then convert back on every mixup pass;
    advanced indexing keeps the layout.  The same values, bit for bit (a gather either way)."""
    out = x[index]
    if x.dim() == 4 and x.is_contiguous(memory_format=torch.channels_last):
        out = out.contiguous(memory_format=torch.channels_last)  # a no-op where indexing kept the layout
    return out


def true_rows(mask: torch.Tensor, count: int) -> torch.Tensor:
    """Positions of the ``count`` True entries of a bool ``[B]`` mask, ascending → long ``[count]``
    (``mask.nonzero()`` without a host sync, given the count)."""
    return torch.sort((~mask).to(torch.uint8), stable=True).indices[:count]


@dataclass(frozen=True)
class Mixup:
    """One mixup draw over the n rows mixed in the global batch, and this rank's share of them.

    ``lam`` = l; ``own`` = this rank's positions ``[lo, hi)`` among the n rows (all of them in one
    process); ``partner`` = π over ``own`` → long ``[hi − lo]``; ``keep`` = the global positions of the
    mixed rows (None: the whole batch).  :meth:`take` gathers a per-sample tensor of the step and keeps
    the mixed rows, :meth:`mix` and :meth:`pair` read the share, :meth:`mean` is the D5 mean.
    """

    lam: float
    own: slice
    partner: torch.Tensor
    n: int
    keep: torch.Tensor | None
    dist: DistContext

    def take(self, x: torch.Tensor) -> torch.Tensor:
        """The rows to mix of a per-sample tensor of this rank's batch ``[b, ...]`` → ``[n, ...]`` (gathered; no grad
        under G > 1)."""
        x = self.dist.gather(x)
        return x if self.keep is None else take_rows(x, self.keep)

    def mix(self, x: torch.Tensor) -> torch.Tensor:
        """l·x_j + (1 − l)·x_π(j) for this rank's j, from :meth:`take`'s ``[n, ...]`` → ``[hi − lo, ...]``."""
        return self.lam * x[self.own] + (1 - self.lam) * x[self.partner]

    def pair(self, a: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(a_j, a_π(j)) for this rank's j, from :meth:`take`'s ``[n, ...]``."""
        return a[self.own], a[self.partner]

    def mean(self, values: torch.Tensor) -> torch.Tensor:
        """The mean over the n mixed rows of per-row ``values`` ``[hi − lo]``: ``values.mean()`` in one process, else
        G·Σ values / n (DDP averages the ranks' gradients: the gradient of the global mean, D5)."""
        if not self.dist.active:
            return values.mean()
        return values.sum() * (self.dist.world / self.n)


def draw_mixup(step: Step, alpha: float, rows: torch.Tensor | None = None, n_rows: int | None = None) -> Mixup:
    """l and π for the step's batch (or its ``rows``), this rank's share (see the module docstring).

    :param rows: bool ``[b]``, this rank's rows to mix (None: all); under G > 1 the mixed set is the
        union of the ranks' rows, in global batch order.
    :param n_rows: |R| over the *global* batch (in one process the True entries of ``rows``) if the caller
        knows it; otherwise it is read here (a host sync: the permutation's size depends on it).
    Sync-free over the whole batch: l comes from the host generator, π from ``step.device_generator``
    (the same generator on CPU, so the CPU stream is unchanged).
    """
    dist, keep = step.dist, None
    n = step.batch.size * dist.world
    if rows is not None:
        rows = dist.gather(rows.to(torch.uint8)).bool() if dist.active else rows  # [B]
        n = int(rows.sum()) if n_rows is None else n_rows
        keep = true_rows(rows, n)
    lam = mixup_coefficient(step.generator, alpha)
    gen = step.device_generator if step.device_generator is not None else step.generator
    perm = torch.randperm(n, generator=gen, device=gen.device).to(step.batch.x.device)  # [n], the same on every rank
    lo, hi = dist.rank * n // dist.world, (dist.rank + 1) * n // dist.world  # (0, n) in one process
    return Mixup(lam=lam, own=slice(lo, hi), partner=perm[lo:hi], n=n, keep=keep, dist=dist)


def padded_mixup_loss(step: Step, loss_fn: PerSampleLoss, labels: torch.Tensor, alpha: float,
                      rows: torch.Tensor) -> torch.Tensor:
    """:func:`mixup_loss` over ``rows`` as a pass of the batch's fixed size, with no host read.

    The n = |R| rows go first (ascending, as :func:`true_rows`), then the others; π permutes the first n
    positions among themselves (random keys, the others' keys fixed above them: a uniform permutation of
    the n rows, drawn from ``step.device_generator``) and fixes the rest; ``step.forward_padded`` runs the
    network on all B rows with BatchNorm's statistics over the first n only (:mod:`pllzoo.masked_bn`), and
    the loss is the mean over those n.  So for n ≥ 2 this is the exact path's value and gradient for the
    same l and π (tests/test_padded_mixup.py); the draws differ from its ``randperm(n)`` (another stream).
    With n ≤ 1 it is 0, as the exact path then adds no term.  One process only (the trainer offers
    ``forward_padded`` only without torchrun).
    """
    b = rows.shape[0]
    n = rows.sum()  # |R| on the device
    keep = true_rows(rows, b)  # [B]: R ascending, then the rest
    pos = torch.arange(b, device=rows.device)
    lam = mixup_coefficient(step.generator, alpha)
    gen = step.device_generator if step.device_generator is not None else step.generator
    keys = torch.rand(b, generator=gen, device=gen.device, dtype=torch.float64).to(rows.device)
    perm = torch.where(pos < n, keys, 2.0 + pos).argsort()  # [B]: π on the first n, identity after
    x, a = take_rows(step.batch.x, keep), labels.index_select(0, keep)
    weight = (pos < n).float()  # the rows BatchNorm and the loss count
    logits = step.forward_padded(lam * x + (1 - lam) * x[perm], weight)
    per_row = lam * loss_fn(logits, a) + (1 - lam) * loss_fn(logits, a[perm])
    mean = (per_row * weight).sum() / n.clamp_min(1)
    return torch.where(n > 1, mean, torch.zeros_like(mean))


def mixup_loss(step: Step, loss_fn: PerSampleLoss, labels: torch.Tensor, alpha: float,
               rows: torch.Tensor | None = None, n_rows: int | None = None) -> torch.Tensor:
    """Mean mixed loss over the batch (or its ``rows``, a bool mask): one extra forward pass.

    :param labels: per-sample label information ``[b, ...]`` that ``loss_fn(logits, labels)`` reads
        (soft targets, candidate rows, ...), without grad; permuted along with the inputs.
    :param rows, n_rows: as :func:`draw_mixup` (``n_rows``: the global |R|).
    Under G > 1 the global batch's mixup (module docstring): every rank must call it, with the same
    decision whether to.  Over ``rows``, when the trainer offers ``step.forward_padded``
    (``train.mixup_rows``), :func:`padded_mixup_loss`: a fixed-shape pass, no host read, 0 for |R| ≤ 1.
    """
    if rows is not None and step.forward_padded is not None:
        return padded_mixup_loss(step, loss_fn, labels, alpha, rows)
    m = draw_mixup(step, alpha, rows, n_rows)
    x, a = m.take(step.batch.x), m.take(labels)
    logits = step.forward(m.mix(x))  # train mode: BN sees the mixed rows
    a_own, a_partner = m.pair(a)
    return m.mean(m.lam * loss_fn(logits, a_own) + (1 - m.lam) * loss_fn(logits, a_partner))
