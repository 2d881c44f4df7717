"""Learning-rate schedules of the trainer (``train.schedule``): constant, step (SoLar), cosine."""

from __future__ import annotations

import math

from pllzoo.errors import PLLZooError
from pllzoo.run import TrainConfig


def lr_at(config: TrainConfig, epoch: int) -> float:
    """LR of an epoch (0-based); the horizon of cosine is ``config.epochs`` in every stage."""
    if config.schedule == "constant":
        return config.lr
    if config.schedule == "step":  # SoLar: lr * decay ** #{m : epoch > m}
        return config.lr * config.lr_decay ** sum(epoch > m for m in config.milestones)
    if config.schedule == "cosine":
        lr_min = config.lr * config.cosine_min_factor
        progress = min(epoch, config.epochs) / config.epochs  # a stage longer than the horizon stays at lr_min
        return lr_min + (config.lr - lr_min) * (1 + math.cos(math.pi * progress)) / 2
    raise PLLZooError(f"unknown schedule {config.schedule!r}; valid: constant, step, cosine")
