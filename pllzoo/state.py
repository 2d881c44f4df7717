"""PLLState: the method state of a run, kept as named tensors.

Components keep per-sample tables (confidences ``[N, K]``) and global buffers
(a class prior ``[K]``, queues, counters as 0-dim tensors) here, never in module
globals or Python scalars, so that the trainer can checkpoint the state and,
under DDP, all-reduce it.
"""

from __future__ import annotations

from typing import Iterable, Iterator

import torch


class PLLState:
    """A namespace of tensors: ``state.confidence = t``; ``"prior" in state``."""

    __slots__ = ("_tensors",)

    def __init__(self, tensors: dict[str, torch.Tensor] | None = None) -> None:
        object.__setattr__(self, "_tensors", dict(tensors or {}))

    def __getattr__(self, key: str) -> torch.Tensor:
        try:
            return self._tensors[key]
        except KeyError:
            raise AttributeError(f"PLLState has no tensor {key!r} (has: {sorted(self._tensors)})") from None

    def __setattr__(self, key: str, value: torch.Tensor) -> None:
        if not isinstance(value, torch.Tensor):
            raise TypeError(f"PLLState holds tensors only; {key!r} got {type(value).__name__}")
        self._tensors[key] = value

    def __delattr__(self, key: str) -> None:
        del self._tensors[key]

    def __contains__(self, key: object) -> bool:
        return key in self._tensors

    def __iter__(self) -> Iterator[str]:
        return iter(sorted(self._tensors))

    def get(self, key: str, default: torch.Tensor | None = None) -> torch.Tensor | None:
        return self._tensors.get(key, default)

    def keep(self, keys: Iterable[str]) -> "PLLState":
        """A new state holding only ``keys`` (those present); used across stages."""
        keys = set(keys)
        return PLLState({k: v for k, v in self._tensors.items() if k in keys})

    def state_dict(self) -> dict[str, torch.Tensor]:
        return {k: v.detach().cpu().clone() for k, v in self._tensors.items()}

    def load_state_dict(self, tensors: dict[str, torch.Tensor], device: torch.device | str) -> None:
        self._tensors.clear()
        self._tensors.update({k: v.to(device) for k, v in tensors.items()})

    def __repr__(self) -> str:
        shapes = ", ".join(f"{k}={tuple(v.shape)}" for k, v in sorted(self._tensors.items()))
        return f"PLLState({shapes})"
