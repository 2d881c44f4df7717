"""SoLar-LA: post-hoc logit adjustment with the estimated prior (paper §4.4, App. C; not in the code).

``solar.la`` (slot ``predict``): predict argmax_j [ g_j(x) − ζ·log r_j ] with r SoLar's final
estimated prior; ζ ∈ {0.5, 1, 2} in the paper (``--hp predict.zeta=2``).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from pllzoo import Component, PLLState, hookimpl, hp


@dataclass(frozen=True)
class LogitAdjustHParams:
    zeta: float = hp(1.0, "ζ: strength of the adjustment g − ζ·log r", ge=0)


class LogitAdjustment(Component):
    """Subtract ζ·log r from the test logits."""

    HParams = LogitAdjustHParams
    needs = frozenset({"prior"})

    @hookimpl
    def pllzoo_predict(self, logits: torch.Tensor, state: PLLState) -> torch.Tensor:
        return logits - self.hp.zeta * torch.log(state.prior.clamp_min(1e-12))
