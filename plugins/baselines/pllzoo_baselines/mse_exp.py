"""MSE and EXP — Feng et al., "Learning with Multiple Complementary Labels", ICML 2020
(official code: LMCL, ``unbiased_estimator(mse_loss)``, ``exp_loss``).

The non-candidates are complementary labels Ȳ, |Ȳ| = K − |S|; with P_S = Σ_{j∈S} p_j:
  EXP: L = (1/B) Σ_i (K−1)/(K−|S_i|) · exp(−P_S,i)                                → ``exp.loss``
  MSE: L = (1/B) Σ_i [1 + ‖p_i‖² − 2P_S,i + 2(|S_i|−1)(1−P_S,i)/(K−|S_i|)]      → ``mse.loss``
       (the closed form of Σ_{k∈S} ℓ(p, e_k) − (|S|−1)/(K−|S|) Σ_{k∉S} ℓ(p, e_k), ℓ = squared error;
       unbiased, so it can be negative)

Deviation (``full_set``): when every label is a candidate (|S| = K, possible under uniform
flipping: ~0.2 % of CIFAR-10-LT at φ = 0.5) both losses divide by zero (EXP: ∞, MSE: ∞·0 = NaN);
the official code has no guard.  ``mask`` (default) leaves such samples out — they carry no
supervision; ``clamp`` uses K − |S| ≥ 1 (a guard on the closed form: at |S| = K MSE is then ‖p‖² − 1, not the
official estimator's K‖p‖² + K − 2 with its K − |S| clamped, as the closed form assumes |S| < K; both push p
towards uniform and carry no supervision); ``none`` keeps the division by zero, so the loss is not finite
as the official one (MSE here gives ±∞, or NaN where P_S rounds to 1 and the term is 0/0, where the official
estimator gives NaN: the closed form divides before it multiplies) and the run fails with "non-finite
training loss" either way.
Test: tests/unit/test_mse_exp.py::test_full_candidate_set_guard.  With ``mask`` the protocol's mixup term
(``protocol.py``) still averages over all B rows, a left-out row (or partner) counting 0: a weight of
|informative| / B on that term (≈ 0.998 at φ = 0.5), where the main and consistency terms average over the
informative rows.

Under torchrun (G > 1): no state; with ``mask`` the mean over the informative rows is the global
batch's (each rank's local sum scaled by G / their global count, ``masked_mean`` with ``step.dist``,
D5), as is the mixup (``protocol.py``).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import torch

from pllzoo import Method, PLLState, Step, hookimpl, hp
from pllzoo_baselines.protocol import ProtocolHParams, ProtocolLoss


def _parts(logits: torch.Tensor, candidates: torch.Tensor, full_set: str):
    p = torch.softmax(logits.float(), dim=1)
    k, size = p.shape[1], candidates.sum(1)
    comp = k - size if full_set == "none" else (k - size).clamp_min(1)
    return p, (p * candidates).sum(1), size, comp, k  # p, P_S, |S|, K − |S| (guarded), K


def exp_loss(logits: torch.Tensor, candidates: torch.Tensor, full_set: str = "mask") -> torch.Tensor:
    """Per-sample EXP loss → ``[B]``."""
    _, p_s, _, comp, k = _parts(logits, candidates, full_set)
    return (k - 1) / comp * torch.exp(-p_s)


def mse_loss(logits: torch.Tensor, candidates: torch.Tensor, full_set: str = "mask") -> torch.Tensor:
    """Per-sample unbiased MSE loss (closed form) → ``[B]``."""
    p, p_s, size, comp, _ = _parts(logits, candidates, full_set)
    return 1 + (p * p).sum(1) - 2 * p_s + 2 * (size - 1) * (1 - p_s) / comp


def informative(candidates: torch.Tensor) -> torch.Tensor:
    """Rows with at least one non-candidate (|S| < K) → bool ``[B]``; the others carry no supervision."""
    return candidates.sum(1) < candidates.shape[1]


@dataclass(frozen=True)
class ComplementaryHParams(ProtocolHParams):
    full_set: str = hp("mask", "samples with |S| = K: mask (leave out), clamp (K−|S| ≥ 1), none (non-finite, "
                                "as official)",
                       choices=("mask", "clamp", "none"))


class _ComplementaryLoss(ProtocolLoss):
    HParams = ComplementaryHParams
    fn = staticmethod(mse_loss)
    ignores = frozenset({"targets"})  # the candidate rows in every term: a label update would change nothing

    def labels(self, step: Step, state: PLLState) -> torch.Tensor:
        return step.batch.candidates

    def per_sample(self, logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        loss = self.fn(logits, labels, self.hp.full_set)
        return loss * informative(labels) if self.hp.full_set == "mask" else loss

    @hookimpl
    def pllzoo_loss(self, step: Step, state: PLLState) -> torch.Tensor:
        if self.hp.full_set == "mask":  # average over the samples that carry supervision
            keep = informative(step.batch.candidates)
            mask = step.mask  # float weights stay weights (an outside review: .bool() dropped them)
            step = replace(step, mask=keep if mask is None else mask & keep if mask.dtype == torch.bool
                           else mask * keep)
        return super().pllzoo_loss(step, state)


class MSELoss(_ComplementaryLoss):
    """The unbiased MSE risk over complementary labels, with consistency and mixup."""

    distributed = True  # per-sample; the informative-rows mean is over the global batch (masked_mean, D5)
    fn = staticmethod(mse_loss)


class EXPLoss(_ComplementaryLoss):
    """The bounded EXP risk over complementary labels, with consistency and mixup."""

    distributed = True  # per-sample; the informative-rows mean is over the global batch (masked_mean, D5)
    fn = staticmethod(exp_loss)


MSE = Method(name="mse", loss="mse.loss", description="MSE: unbiased squared-error risk from complementary labels",
             citation="Feng et al., ICML 2020")
EXP = Method(name="exp", loss="exp.loss", description="EXP: bounded exponential risk from complementary labels",
             citation="Feng et al., ICML 2020")
