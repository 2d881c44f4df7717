"""pllzoo: a plugin-based zoo of partial-label learning methods for long-tailed data.

Public API for plugin authors: everything an outside plugin needs is importable from
``pllzoo`` itself (``from pllzoo import Component, Method, Step, hookimpl, hp``), and
:data:`__all__` lists it; submodules (``pllzoo.run``, ``pllzoo.losses``, ...) are
internal and may move.

* Hooks and components: :data:`hookimpl`, :class:`Component`, :class:`Method`, :data:`SLOTS`.
* What the hooks receive: :class:`Step`, :class:`Batch`, :class:`Run`, :class:`Stage`,
  :class:`PLLState`, :class:`TrainConfig`.
* Hyper-parameters: :func:`hp` (a field with default, help and range), :class:`NoHParams`,
  :func:`describe`, :func:`as_dict`.
* Losses: :func:`soft_cross_entropy`, :func:`masked_mean`, :func:`normalize_rows`,
  :func:`mixup_loss`.
* Errors: :class:`PLLZooError` (a one-line, user-fixable error; raise it for bad input),
  :class:`UnknownNameError`.
* Backbones, views and datasets (``pllzoo_register_models``/``_views``/``_datasets``): :class:`PLLNet`,
  :class:`DatasetSpec`, :class:`PLLData`, :class:`DataOptions`, :class:`TrainDefaults`,
  :func:`image_folder_dataset`, :func:`pll_from_images`.
* Run observers: :class:`Observer` (base class), :class:`RunInfo`, :class:`RunSummary`.
* The registry: :func:`get_registry`; :func:`register_plugin` / :func:`unregister_plugin` add a plugin object
  without packaging it (a notebook).
"""

from typing import TYPE_CHECKING, Any

import pluggy

__version__ = "0.4.0"

hookimpl = pluggy.HookimplMarker("pllzoo")

# The public names, each imported from its module on first use (PEP 562): ``import pllzoo`` (and so
# ``pllzoo --help``) loads no torch; ``from pllzoo import Component`` imports ``pllzoo.components`` then.
_LAZY = {
    "SLOTS": "pllzoo.components", "Component": "pllzoo.components", "Method": "pllzoo.components",
    "PLLZooError": "pllzoo.errors", "UnknownNameError": "pllzoo.errors",
    "NoHParams": "pllzoo.hparams", "as_dict": "pllzoo.hparams", "describe": "pllzoo.hparams", "hp": "pllzoo.hparams",
    "masked_mean": "pllzoo.losses", "normalize_rows": "pllzoo.losses", "soft_cross_entropy": "pllzoo.losses",
    "mixup_loss": "pllzoo.mixup",
    "get_registry": "pllzoo.registry", "register_plugin": "pllzoo.registry", "unregister_plugin": "pllzoo.registry",
    "Batch": "pllzoo.run", "Run": "pllzoo.run", "Stage": "pllzoo.run", "Step": "pllzoo.run",
    "TrainConfig": "pllzoo.run",
    "PLLState": "pllzoo.state",
    "DataOptions": "pllzoo.data.base", "DatasetSpec": "pllzoo.data.base", "PLLData": "pllzoo.data.base",
    "TrainDefaults": "pllzoo.data.base",
    "image_folder_dataset": "pllzoo.data.imagefolder", "pll_from_images": "pllzoo.data.imagefolder",
    "PLLNet": "pllzoo.pllnet",
    "Observer": "pllzoo.observers", "RunInfo": "pllzoo.observers", "RunSummary": "pllzoo.observers",
}

if TYPE_CHECKING:  # pragma: no cover  (what type checkers and IDEs see)
    from pllzoo.components import SLOTS, Component, Method
    from pllzoo.errors import PLLZooError, UnknownNameError
    from pllzoo.hparams import NoHParams, as_dict, describe, hp
    from pllzoo.losses import masked_mean, normalize_rows, soft_cross_entropy
    from pllzoo.mixup import mixup_loss
    from pllzoo.registry import get_registry, register_plugin, unregister_plugin
    from pllzoo.run import Batch, Run, Stage, Step, TrainConfig
    from pllzoo.state import PLLState
    from pllzoo.data.base import DataOptions, DatasetSpec, PLLData, TrainDefaults
    from pllzoo.data.imagefolder import image_folder_dataset, pll_from_images
    from pllzoo.pllnet import PLLNet
    from pllzoo.observers import Observer, RunInfo, RunSummary


def __getattr__(name: str) -> Any:
    """A public name from :data:`_LAZY`, imported on first access and kept in the module."""
    if name not in _LAZY:
        raise AttributeError(f"module 'pllzoo' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(_LAZY[name]), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


__all__ = [
    "hookimpl", "Component", "Method", "SLOTS",
    "Step", "Batch", "Run", "Stage", "PLLState", "TrainConfig",
    "hp", "NoHParams", "describe", "as_dict",
    "soft_cross_entropy", "masked_mean", "normalize_rows", "mixup_loss",
    "PLLZooError", "UnknownNameError",
    "PLLNet", "DatasetSpec", "PLLData", "DataOptions", "TrainDefaults", "image_folder_dataset", "pll_from_images",
    "Observer", "RunInfo", "RunSummary",
    "get_registry", "register_plugin", "unregister_plugin", "__version__",
]
