"""The interface every backbone implements: an encoder to features [B, F] and a linear head to logits [B, K]."""

from __future__ import annotations

import torch
from torch import nn

from pllzoo.errors import PLLZooError


class PLLNet(nn.Module):
    """``encoder`` maps an input batch to features [B, F]; ``head`` (Linear F → K) gives logits [B, K]."""

    def __init__(self, encoder: nn.Module, head: nn.Linear) -> None:
        super().__init__()
        self.encoder = encoder
        self.head = head
        self.feature_dim: int = head.in_features
        self.num_classes: int = head.out_features

    def features(self, x: torch.Tensor) -> torch.Tensor:
        """Return the encoder output [B, F]."""
        return self.encoder(x)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Return logits [B, K]."""
        return self.head(self.encoder(x))

    def forward_with_features(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Return ``(logits [B, K], features [B, F])`` from a single encoder pass."""
        feats = self.encoder(x)  # [B,F]
        return self.head(feats), feats


def image_channels(name: str, input_shape: tuple[int, ...]) -> int:
    """Check that ``input_shape`` is (C, H, W) and return C."""
    if len(input_shape) != 3:
        raise PLLZooError(f"model {name!r} needs image input (C, H, W), got input shape {tuple(input_shape)}")
    return int(input_shape[0])
