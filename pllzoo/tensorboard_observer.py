"""The built-in TensorBoard observer, ``pllzoo.tensorboard`` (``pllzoo bench --tensorboard DIR``).

Each run writes its own event files under ``DIR/<run-id>/`` through
``torch.utils.tensorboard.SummaryWriter``: at every epoch one scalar per number in the epoch's
record (:func:`scalars`: ``loss``, ``lr``, ``acc_all``, ``acc_many``/``acc_medium``/``acc_few``,
``prior_tv`` and every other key a component logs), tagged with the record's key, at step = the
record's 1-based position in ``log.jsonl`` (it increases over stages).  The writer opens with
``purge_step`` = the first step it writes, so a resumed run (or a retrained one) replaces the
steps it writes again instead of doubling them.

``tensorboard`` is an optional dependency (``pip install 'pllzoo[tensorboard]'``); without it,
selecting the observer is a one-line error before any run starts (:meth:`TensorBoard.check`).
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

from pllzoo import hookimpl
from pllzoo.errors import PLLZooError
from pllzoo.observers import Observer, RunInfo, RunSummary

INSTALL = "pip install 'pllzoo[tensorboard]' (or pip install 'tensorboard>=2.10')"
#: record keys that identify an epoch rather than measure it: never written as scalars
NOT_SCALARS: frozenset[str] = frozenset({"seed", "epoch", "epochs", "stage_index", "final_stage"})


def require_tensorboard() -> None:
    """Raise a one-line :class:`PLLZooError` telling how to install tensorboard when it is missing."""
    try:
        importlib.import_module("tensorboard")
    except ImportError:
        raise PLLZooError(f"--tensorboard needs the tensorboard package, which is not installed: {INSTALL}") from None


def scalars(record: dict[str, Any]) -> dict[str, float]:
    """The numbers of an epoch record that TensorBoard plots: ints and floats (not bools), finite or not,
    except the keys that identify the epoch (:data:`NOT_SCALARS`); lists (``class_acc``) and strings are skipped."""
    return {k: float(v) for k, v in record.items()
            if k not in NOT_SCALARS and isinstance(v, (int, float)) and not isinstance(v, bool)}


class TensorBoard(Observer):
    """Scalars of every epoch to ``DIR/<run-id>/`` (``--tensorboard DIR``, or ``--observe pllzoo.tensorboard=DIR``)."""

    @classmethod
    def check(cls, arg: str | None) -> None:
        if not arg:
            raise PLLZooError("observer pllzoo.tensorboard needs a folder: --tensorboard DIR "
                              "(or --observe pllzoo.tensorboard=DIR)")
        if Path(arg).exists() and not Path(arg).is_dir():
            raise PLLZooError(f"--tensorboard {arg} is a file; pass a folder (it is created if missing)")
        require_tensorboard()

    def __init__(self, arg: str | None = None) -> None:
        super().__init__(arg)
        self.writer: Any = None

    @hookimpl
    def pllzoo_observe_epoch(self, run: RunInfo, record: dict[str, Any], step: int) -> None:
        if self.writer is None:  # opened at the first epoch this process trains: its step is the purge step
            from torch.utils.tensorboard import SummaryWriter

            self.writer = SummaryWriter(log_dir=str(Path(self.arg) / run.run_id), purge_step=step)
        for key, value in scalars(record).items():
            self.writer.add_scalar(key, value, global_step=step)
        self.writer.flush()  # one epoch's worth: live in TensorBoard while the run trains

    @hookimpl
    def pllzoo_observe_run_end(self, summary: RunSummary) -> None:
        if self.writer is not None:
            self.writer.close()
            self.writer = None
