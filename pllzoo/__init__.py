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
* The registry: :func:`get_registry`.
"""

import pluggy

__version__ = "0.2.0"

hookimpl = pluggy.HookimplMarker("pllzoo")

from pllzoo.components import SLOTS, Component, Method  # noqa: E402
from pllzoo.data.base import DataOptions, DatasetSpec, PLLData, TrainDefaults  # noqa: E402
from pllzoo.data.imagefolder import image_folder_dataset, pll_from_images  # noqa: E402
from pllzoo.errors import PLLZooError, UnknownNameError  # noqa: E402
from pllzoo.hparams import NoHParams, as_dict, describe, hp  # noqa: E402
from pllzoo.losses import masked_mean, normalize_rows, soft_cross_entropy  # noqa: E402
from pllzoo.mixup import mixup_loss  # noqa: E402
from pllzoo.pllnet import PLLNet  # noqa: E402
from pllzoo.observers import Observer, RunInfo, RunSummary  # noqa: E402
from pllzoo.registry import get_registry  # noqa: E402
from pllzoo.run import Batch, Run, Stage, Step, TrainConfig  # noqa: E402
from pllzoo.state import PLLState  # noqa: E402

__all__ = [
    "hookimpl", "Component", "Method", "SLOTS",
    "Step", "Batch", "Run", "Stage", "PLLState", "TrainConfig",
    "hp", "NoHParams", "describe", "as_dict",
    "soft_cross_entropy", "masked_mean", "normalize_rows", "mixup_loss",
    "PLLZooError", "UnknownNameError",
    "PLLNet", "DatasetSpec", "PLLData", "DataOptions", "TrainDefaults", "image_folder_dataset", "pll_from_images",
    "Observer", "RunInfo", "RunSummary",
    "get_registry", "__version__",
]
