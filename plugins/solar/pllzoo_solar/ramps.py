"""The linear ramp SoLar uses for ρ and η (``utils_algo.linear_rampup``), whole-epoch granularity."""

from __future__ import annotations


def linear_ramp(epoch: int, warmup_epochs: int) -> float:
    """``min(epoch / warmup_epochs, 1)``; 1 when there is no warm-up."""
    return 1.0 if warmup_epochs <= 0 else min(epoch / warmup_epochs, 1.0)
