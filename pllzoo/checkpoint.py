"""One checkpoint per run, rewritten atomically after every epoch.

It holds what a resumed run needs to equal an uninterrupted one: stage and
epoch, model and optimizer state, the method state (PLLState tensors), the
records so far, and the RNG states (the trainer also derives each epoch's
streams from the seed, so the RNG states are a second line of defence).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import torch

from pllzoo.state import PLLState

NAME = "checkpoint.pt"


def _rng_states() -> dict[str, Any]:
    states: dict[str, Any] = {"torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        states["cuda"] = torch.cuda.get_rng_state_all()
    return states


def save_checkpoint(
    run_dir: Path, stage: int, epoch: int, model: torch.nn.Module, optimizer: torch.optim.Optimizer,
    state: PLLState, records: list[dict[str, Any]], modules: dict[str, torch.nn.Module] | None = None,
) -> Path:
    path = Path(run_dir) / NAME
    tmp = path.with_suffix(".tmp")
    torch.save(
        {
            "stage": stage, "epoch": epoch, "model": model.state_dict(), "optimizer": optimizer.state_dict(),
            "state": state.state_dict(), "records": records, "rng": _rng_states(),
            "modules": {name: m.state_dict() for name, m in (modules or {}).items()},
        },
        tmp,
    )
    os.replace(tmp, path)
    return path


def load_checkpoint(run_dir: Path) -> dict[str, Any] | None:
    """The run's checkpoint, or None when there is none; restores the RNG states."""
    path = Path(run_dir) / NAME
    if not path.exists():
        return None
    ckpt = torch.load(path, map_location="cpu", weights_only=False)
    torch.set_rng_state(ckpt["rng"]["torch"])
    if "cuda" in ckpt["rng"] and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(ckpt["rng"]["cuda"])
    return ckpt
