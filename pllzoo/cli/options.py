"""Options that ``pllzoo bench`` and ``pllzoo sweep`` share: how long runs train and which data they read; option types."""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any, Callable

import click


def _finite(kind: click.ParamType, number: float, value: Any, param: click.Parameter | None,
            ctx: click.Context | None) -> float:
    if not math.isfinite(number):
        kind.fail(f"{value!r} is not a finite number", param, ctx)
    return number


class Finite(click.types.FloatParamType):
    """A finite number: ``inf`` and ``nan`` parse as floats but are no rate, ratio or fraction (and would be written
    to config.json as ``Infinity``, which is not JSON)."""

    name = "finite number"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> float:
        return _finite(self, super().convert(value, param, ctx), value, param, ctx)


FINITE = Finite()


class PositiveFinite(click.FloatRange):
    """A number > 0 that is finite: ``nan`` passes a range check (every comparison is False), ``inf`` means no limit."""

    def __init__(self) -> None:
        super().__init__(min=0, min_open=True)

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> float:
        return _finite(self, super().convert(value, param, ctx), value, param, ctx)


class UserPath(click.Path):
    """A path as the shell would give it: ``~`` and ``~user`` expanded (a config file or a Python call passes them
    literally; an outside review: ``out = "~/res"`` trained into a folder named ``~``); a user without a home
    folder leaves the path as it is.  ``path_type``: Path."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(path_type=Path, **kwargs)

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, (str, os.PathLike)) and str(value).startswith("~"):
            value = os.path.expanduser(value)  # as the shell: ``~nosuchuser/x`` stays as it is
        return super().convert(value, param, ctx)


class InputFile(UserPath):
    """A regular file to read (``--paper``, ``--space-file``): a folder, a device or a pipe is refused before
    anything is read (an outside review: ``/dev/zero`` was read forever)."""

    def __init__(self) -> None:
        super().__init__(exists=True, dir_okay=False)

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Path:
        path = Path(super().convert(value, param, ctx))
        if not path.is_file():
            self.fail(f"{str(path)!r} is not a regular file (a device or a pipe); give a file", param, ctx)
        return path


INPUT_FILE = InputFile()


_RUN_OPTIONS = (
    click.option("--epochs", type=int, default=None, help="Epochs of the final stage (default: the dataset's)."),
    click.option("--batch-size", type=int, default=None, help="Training batch size (default: the dataset's)."),
    click.option("--data-dir", type=UserPath(), default=None, help="Offline data folder."),
    click.option("--split", type=click.Choice(["uniform", "balanced"]), default="uniform", show_default=True,
                 help="Test protocol of the real-world .mat sets."),
    click.option("--phi", type=FINITE, default=None, help="Partial rate (CIFAR; any value < 0 selects the non-uniform matrix, recorded as -1)."),
    click.option("--imb", type=FINITE, default=None, help="Imbalance ratio gamma (CIFAR, synthetic)."),
    click.option("--imb-type", type=click.Choice(["exp", "step"]), default=None, help="Long-tail profile."),
)


def run_options(command: Callable) -> Callable:
    """Add ``--epochs --batch-size --data-dir --split --phi --imb --imb-type`` to ``command``, in that order."""
    for option in reversed(_RUN_OPTIONS):
        command = option(command)
    return command
