"""pllzoo: a plugin-based zoo of partial-label learning methods for long-tailed data.

Public API for plugin authors: :data:`hookimpl`, :class:`Component`, :class:`Method`,
:class:`PLLState`, :class:`Step`, :class:`Run`, :class:`Stage`, :func:`hp`,
and the registry helpers :func:`get_registry`.
"""

import pluggy

__version__ = "0.1.0"

hookimpl = pluggy.HookimplMarker("pllzoo")

from pllzoo.components import Component, Method  # noqa: E402
from pllzoo.hparams import hp  # noqa: E402
from pllzoo.registry import get_registry  # noqa: E402
from pllzoo.run import Batch, Run, Stage, Step, TrainConfig  # noqa: E402
from pllzoo.state import PLLState  # noqa: E402

__all__ = [
    "hookimpl", "Component", "Method", "PLLState", "Step", "Run", "Stage", "Batch", "TrainConfig",
    "hp", "get_registry", "__version__",
]
