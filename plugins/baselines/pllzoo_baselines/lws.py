"""LWS — Wen et al., "Leveraged Weighted Loss for Partial Label Learning", ICML 2021
(official code: hongwei-wen/LW-loss-for-partial-label, ``lws_loss``, ``confidence_update_lw``).

Algorithm (per mini-batch, no warm-up; z raw logits, σ the sigmoid):
  1. w_ij ← 1/K for every sample and class (not masked by the candidates)
  2. L = (1/B) Σ_i [ α Σ_{j∈S_i} w_ij σ(−z_ij) + β Σ_{j∉S_i} w_ij σ(z_ij) ]    → ``lws.loss``
  3. after the optimizer step, a fresh no-grad forward on the same batch (train mode), p = softmax:
     w_ij ← p_ij / (Σ_{k∈S_i} p_ik + K·1e−8) on candidates, p_ij / (Σ_{k∉S_i} p_ik + K·1e−8) off them
                                                                                 → ``lws.weights``

Defaults: α = ``lw0`` = 1; β = ``lw`` = 1, the README's best for CIFAR-10 (the argparse default 0
silently drops the non-candidate term).  The targets handed to other components (selection, and the
SoLar protocol's consistency and mixup terms, which are CE on them: the SoLar paper, §4.1,
``protocol.py``) are w re-normalised within the candidate set.

Deviations: none in the maths; σ is torch's stable sigmoid (the official code computes it piecewise).

Under torchrun (G > 1): w is replicated and its rows synchronised after each step (``"rows"``); the
post-step forward of l.3 runs on every rank on its slice (train mode, no grad: row by row the
one-process forward, with a network without BatchNorm or with SyncBatchNorm); the loss is a
per-sample mean (``protocol.py``).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from pllzoo import Component, Method, PLLState, Run, Step, hookimpl, hp
from pllzoo.losses import normalize_rows
from pllzoo_baselines.protocol import ProtocolHParams, ProtocolLoss

EPS = 1e-8  # the official K·1e-8 guard in the denominators


def lws_loss(logits: torch.Tensor, weights: torch.Tensor, candidates: torch.Tensor, alpha: float,
             beta: float) -> torch.Tensor:
    """Per-sample leveraged weighted loss → ``[B]`` (Alg. l.2)."""
    z = logits.float()
    on = (candidates * weights * torch.sigmoid(-z)).sum(1)
    off = ((1 - candidates) * weights * torch.sigmoid(z)).sum(1)
    return alpha * on + beta * off


def split_normalise(probs: torch.Tensor, candidates: torch.Tensor) -> torch.Tensor:
    """w on candidates and off them, each part normalised separately (Alg. l.3) → ``[B, K]``."""
    k = probs.shape[1]
    on, off = probs * candidates, probs * (1 - candidates)
    return on / (on.sum(1, keepdim=True) + k * EPS) + off / (off.sum(1, keepdim=True) + k * EPS)


class Weights(Component):
    """The weight table w ∈ R^{N×K}, refreshed by a post-step forward pass."""

    provides = frozenset({"lws_weights"})
    distributed = True
    sync = {"lws_weights": "rows"}  # l.3 writes the batch rows only (a per-row forward of the replicated model)

    @hookimpl
    def pllzoo_setup_stage(self, run: Run, state: PLLState) -> None:
        state.lws_weights = torch.full((run.num_train, run.num_classes), 1.0 / run.num_classes,
                                       device=run.device)  # Alg. l.1

    @hookimpl
    def pllzoo_label_update(self, step: Step, state: PLLState) -> torch.Tensor:
        return normalize_rows(state.lws_weights[step.batch.index] * step.batch.candidates)

    @hookimpl
    def pllzoo_post_step(self, step: Step, state: PLLState) -> None:
        probs = torch.softmax(step.forward(step.batch.x), dim=1)  # l.3: fresh forward, updated weights
        state.lws_weights[step.batch.index] = split_normalise(probs, step.batch.candidates)


@dataclass(frozen=True)
class LWSHParams(ProtocolHParams):
    alpha: float = hp(1.0, "α (lw0): weight of the candidate term", ge=0)
    beta: float = hp(1.0, "β (lw): weight of the non-candidate term (README best for CIFAR-10: 1; grid 1, 2)", ge=0)
    # added after LWS runs were recorded with the LWS loss in these terms: the run id names it unless it is "loss"
    # (tabular runs, where both terms are off, keep it at "loss" and their ids)
    protocol_terms: str = hp("targets", "consistency and mixup terms: targets (CE on the re-normalised weights, "
                             "spec 3.0) or loss (the LWS loss again, as LWS runs were recorded before); loss on "
                             "tabular, where both terms are off", choices=("targets", "loss"), unnamed_when="loss")


class LWSLoss(ProtocolLoss):
    """The leveraged weighted loss, with the SoLar protocol's consistency and mixup."""

    HParams = LWSHParams
    needs = frozenset({"lws_weights"})

    def __init__(self, hp: LWSHParams | None = None) -> None:
        super().__init__(hp)
        self.protocol_terms = self.hp.protocol_terms  # "targets": CE on the weights re-normalised on the candidates
        if self.protocol_terms == "loss":  # every term reads the weights and candidates, never step.targets
            self.ignores = frozenset({"targets"})

    @classmethod
    def dataset_defaults(cls, dataset: str, kind: str) -> dict[str, object]:
        return {**super().dataset_defaults(dataset, kind), **({"protocol_terms": "loss"} if kind == "tabular" else {})}
    distributed = True  # a per-sample mean (ProtocolLoss: global mask and mixup)

    def labels(self, step: Step, state: PLLState) -> torch.Tensor:
        return torch.stack([state.lws_weights[step.batch.index], step.batch.candidates], dim=-1)  # [B, K, 2]

    def per_sample(self, logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        return lws_loss(logits, labels[..., 0], labels[..., 1], self.hp.alpha, self.hp.beta)


LWS = Method(
    name="lws",
    label_update="lws.weights",
    loss="lws.loss",
    description="LWS: leveraged weighted sigmoid loss on candidates and non-candidates",
    citation="Wen et al., ICML 2021",
)
