"""PLLState: the method state of a run, kept as named tensors.

Components keep per-sample tables (confidences ``[N, K]``) and global buffers
(a class prior ``[K]``, queues, counters as 0-dim tensors) here, never in module
globals or Python scalars, so that the trainer can checkpoint the state and,
under DDP, all-reduce it.

When it is saved: every checkpoint (every ``train.checkpoint_every`` epochs,
once ``train.checkpoint_minutes`` have passed, at the end of each stage and of
the run, and on a clean stop) holds the whole state, always at an epoch
boundary, together with the network, the optimizer, the extra modules of
``pllzoo_modules`` and the RNG states.  On resume the trainer calls
``pllzoo_setup_stage`` and then loads the checkpointed state over what it wrote.
So anything a component keeps on ``self`` that changes during training is lost
on resume unless it is derived again from the epoch (``pllzoo_on_epoch_start``)
or the run; tests/test_resume_every_method.py checks, for every registered
method, that a resumed run equals an uninterrupted one bit for bit, and
``pllzoo check METHOD`` does the same for any recipe, a plugin's included.

Stages: a new stage starts from an empty state except the keys in
``stage.carry``.  Declare the keys a component writes (``provides``) and the
keys of other components it reads (``needs``) on the component class.  A key
one component provides is its own: another component that assigns it
(``state.confidence = ...`` inside one of its hooks) or deletes it is refused, one line
naming both (:meth:`PLLState.set_owners`), and so is one that changes it in
place (``state.confidence[i] = ...``, ``state.prior.mul_(2)``) without listing
it in its ``needs`` (PiCO's loss, which updates the confidences in place, lists
them).  In-place changes are seen by the tensor's version counter around each
hook call (:meth:`PLLState.watch`); the trainer's own writes are not checked.
"""

from __future__ import annotations

from contextvars import ContextVar
from typing import Iterable, Iterator

import torch

from pllzoo.errors import PLLZooError

#: the slot whose hook is running (set by pllzoo.hookcalls); None: the trainer itself
WRITER: ContextVar[str | None] = ContextVar("pllzoo_state_writer", default=None)


class PLLState:
    """A namespace of tensors: ``state.confidence = t``; ``"prior" in state``."""

    __slots__ = ("_tensors", "_owners", "_needs", "_watched")

    def __init__(self, tensors: dict[str, torch.Tensor] | None = None) -> None:
        object.__setattr__(self, "_tensors", dict(tensors or {}))
        self.set_owners({})

    def set_owners(self, owners: dict[str, tuple[str, str]], needs: dict[str, frozenset[str]] | None = None) -> None:
        """``{key: (slot, who)}``: the keys each component ``provides`` (``who`` names it in messages); only
        that slot's hooks may assign them.  ``needs``: ``{slot: keys}``, the keys of others a slot's component
        may change in place (its ``needs``); any other key of another is watched while its hooks run."""
        object.__setattr__(self, "_owners", dict(owners))
        object.__setattr__(self, "_needs", dict(needs or {}))
        object.__setattr__(self, "_watched", {})  # slot -> the keys watched while its hooks run

    def watched_keys(self, slot: str) -> tuple[str, ...]:
        """The keys of other components that a hook of ``slot`` does not list in ``needs`` (cached)."""
        keys = self._watched.get(slot)
        if keys is None:
            mine = self._needs.get(slot, frozenset())
            keys = self._watched[slot] = tuple(k for k, (s, _) in self._owners.items() if s != slot and k not in mine)
        return keys

    def watch(self, slot: str) -> list[tuple[str, torch.Tensor, int]]:
        """Before a hook of ``slot`` runs: the keys of other components it does not list in ``needs``, each
        with its tensor and that tensor's version counter (``torch.Tensor._version``: an in-place change
        bumps it).  Give the answer to :meth:`check_watched` after the hook."""
        tensors = self._tensors
        return [(k, tensors[k], tensors[k]._version) for k in self.watched_keys(slot) if k in tensors]

    def check_watched(self, watched: list[tuple[str, torch.Tensor, int]], where: str = "state.") -> None:
        """:raises PLLZooError: one line, when a watched key's tensor changed in place during the hook."""
        for key, tensor, version in watched:
            if tensor._version != version:
                raise PLLZooError(f"it changes {where}{key} in place, which {self._owners[key][1]} provides (its "
                                  f"own key); list {key!r} in needs to update it, or keep a key of your own, "
                                  "declared in provides")

    def check_write(self, key: str, verb: str, where: str = "state.") -> None:
        """:raises PLLZooError: one line, when the running hook's slot does ``verb`` (assigns, deletes) to a key that
        another component provides, or that no component provides (the trainer's own writes, outside hooks, are not
        checked)."""
        owner, writer = self._owners.get(key), WRITER.get()
        if owner is not None and writer is not None and writer != owner[0]:
            tail = "; use a key of your own, declared in provides" if verb == "assigns" else ""
            raise PLLZooError(f"it {verb} {where}{key}, which {owner[1]} provides (its own key){tail}")
        if owner is None and writer is not None:  # an outside review: two components' undeclared keys collided
            raise PLLZooError(f"it {verb} {where}{key}, which no component of the recipe provides; declare "
                              f"{key!r} in its provides (the ownership and DDP checks know a key from there)")

    def __getattr__(self, key: str) -> torch.Tensor:
        try:
            return self._tensors[key]
        except KeyError:
            raise AttributeError(f"PLLState has no tensor {key!r} (has: {sorted(self._tensors)})") from None

    def __setattr__(self, key: str, value: torch.Tensor) -> None:
        if not isinstance(value, torch.Tensor):
            raise TypeError(f"PLLState holds tensors only; {key!r} got {type(value).__name__}")
        self.check_write(key, "assigns")
        self._tensors[key] = value

    def __delattr__(self, key: str) -> None:
        self.check_write(key, "deletes")
        try:
            del self._tensors[key]
        except KeyError:
            raise AttributeError(f"PLLState has no tensor {key!r} (has: {sorted(self._tensors)})") from None

    def __contains__(self, key: object) -> bool:
        return key in self._tensors

    def __iter__(self) -> Iterator[str]:
        return iter(sorted(self._tensors))

    def get(self, key: str, default: torch.Tensor | None = None) -> torch.Tensor | None:
        return self._tensors.get(key, default)

    def keep(self, keys: Iterable[str]) -> "PLLState":
        """A new state holding only ``keys`` (those present), with the same owners; used across stages."""
        keys = set(keys)
        kept = PLLState({k: v for k, v in self._tensors.items() if k in keys})
        kept.set_owners(self._owners, self._needs)
        return kept

    def state_dict(self) -> dict[str, torch.Tensor]:
        return {k: v.detach().cpu().clone() for k, v in self._tensors.items()}

    def load_state_dict(self, tensors: dict[str, torch.Tensor], device: torch.device | str) -> None:
        self._tensors.clear()
        self._tensors.update({k: v.to(device) for k, v in tensors.items()})

    def __repr__(self) -> str:
        shapes = ", ".join(f"{k}={tuple(v.shape)}" for k, v in sorted(self._tensors.items()))
        return f"PLLState({shapes})"


class Scratch(dict):
    """``step.scratch``: this step's tensors shared between hooks, guarded as the state's keys are.  A key that one
    component provides (declared in its ``provides``, as a state key) may be assigned or deleted only by its
    hooks, and changed in place only by a component that lists it in ``needs`` (:meth:`watch`); else the run
    fails with one line naming both components."""

    __slots__ = ("_state",)

    def __init__(self, state: PLLState) -> None:
        super().__init__()
        self._state = state  # its owners and needs

    def __setitem__(self, key: str, value: torch.Tensor) -> None:
        self._state.check_write(key, "assigns", "step.scratch.")
        super().__setitem__(key, value)

    def __delitem__(self, key: str) -> None:
        self._state.check_write(key, "deletes", "step.scratch.")
        super().__delitem__(key)

    def pop(self, key: str, *default):  # type: ignore[override]
        if key in self:
            self._state.check_write(key, "deletes", "step.scratch.")
        return super().pop(key, *default)

    def setdefault(self, key: str, default: torch.Tensor | None = None):  # type: ignore[override]
        if key not in self:
            self[key] = default
        return self[key]

    def update(self, *args, **kwargs) -> None:  # type: ignore[override]
        for key, value in dict(*args, **kwargs).items():
            self[key] = value

    def clear(self) -> None:
        for key in list(self):
            del self[key]

    def popitem(self):  # type: ignore[override]
        if not self:
            raise KeyError("popitem(): step.scratch is empty")
        key = next(reversed(self))
        return key, self.pop(key)

    def __ior__(self, other):  # type: ignore[override]
        self.update(other)
        return self

    def __reduce__(self):  # a copy (copy.deepcopy, pickle) is a plain dict of the same tensors
        return dict, (dict(self),)

    def watch(self, slot: str) -> list[tuple[str, torch.Tensor, int]]:
        """As :meth:`PLLState.watch`, over this step's tensors."""
        return [(k, t, t._version) for k in self._state.watched_keys(slot)
                if isinstance(t := self.get(k), torch.Tensor)]

    def check_watched(self, watched: list[tuple[str, torch.Tensor, int]]) -> None:
        """As :meth:`PLLState.check_watched`."""
        self._state.check_watched(watched, "step.scratch.")
