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
        # Deviation: a stage longer than the horizon stays at lr_min; the reference's formula (SoLar's
        # adjust_learning_rate) has no clamp, so its LR climbs back past the horizon.  Only cosine in a stage longer
        # than the final one meets it (never the released CIFAR commands, which use step decay); the recorded CPU
        # studies ran with the clamp.
        progress = min(epoch, config.epochs) / config.epochs
        return lr_min + (config.lr - lr_min) * (1 + math.cos(math.pi * progress)) / 2
    raise PLLZooError(f"unknown schedule {config.schedule!r}; valid: constant, step, cosine")
