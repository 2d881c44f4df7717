"""``pllzoo plot``: Figure 1(b)(c) of the SoLar paper from one or more results folders (PNG)."""

from __future__ import annotations

from pathlib import Path

import click

from pllzoo.cli import cli
from pllzoo.cli.options import UserPath
from pllzoo.cli.outputs import FIGURE_SUFFIXES, OutputFile, writing
from pllzoo.errors import PLLZooError


@cli.command()
@click.argument("results", nargs=-1, required=True, type=UserPath(exists=True, file_okay=False))
@click.option("--methods", default=None, help="Comma-separated methods to draw (default: all).")
@click.option("--out", type=OutputFile(FIGURE_SUFFIXES), default=None,
              help="Figure path, PNG unless its suffix names another format (default: figure1.png in the first RESULTS).")
def plot(results: tuple[Path, ...], methods: str | None, out: Path | None) -> None:
    """Draw estimated vs true class prior and class-wise test accuracy (needs the ``plot`` extra: matplotlib)."""
    import importlib

    try:
        importlib.import_module("matplotlib")  # an optional dependency: the `plot` extra
    except ImportError:
        raise PLLZooError('pllzoo plot needs matplotlib, which is not installed: pip install "pllzoo[plot]"') from None
    from pllzoo.plot import figure, save

    try:
        fig = figure(*results, methods=[m.strip() for m in methods.split(",")] if methods else None)
    except ValueError as exc:
        raise PLLZooError(str(exc)) from None
    # a link the user names is written through, as --md/--csv (pllzoo.cli.outputs); the default, in the results
    # folder, never is (pllzoo.atomic)
    target = out.resolve() if out is not None and out.is_symlink() else out or results[0] / "figure1.png"
    out = out or target
    with writing(out):
        save(fig, target)  # 100 dpi, PNGs with a 64-colour palette: the committed study figures stay small
    click.echo(f"figure: {out}")
