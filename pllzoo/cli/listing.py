"""Print a listing (``plugins``, ``methods``, ``datasets``) without ever cutting a word of it.

On a terminal a rich table is printed when, at the terminal's width, every word of every cell comes
out whole (rich folds or crops a word wider than its column: ``solar-global-selec…``).  Off a terminal
(a pipe, a file, ``CliRunner``), or when the table does not fit, the listing is plain aligned lines,
one row per line, as wide as they need to be, so ``pllzoo plugins | grep NAME`` finds every name.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TYPE_CHECKING

import click

if TYPE_CHECKING:  # pragma: no cover
    from rich.console import Console
    from rich.table import Table

Cell = str  # several lines for a rich cell; joined with "; " on a plain line


def plain_lines(title: str, headers: Sequence[str], rows: Sequence[Sequence[Cell]]) -> list[str]:
    """The title, then the header and each row on one line, columns aligned by two spaces.

    A cell's lines are joined with ``"; "``; nothing is cut, so lines may be longer than the screen.
    """
    cells = [[c.replace("\n", "; ") for c in row] for row in rows]
    widths = [max([len(h), *(len(r[i]) for r in cells)]) for i, h in enumerate(headers)]

    def line(values: Sequence[str]) -> str:
        return "  ".join(v.ljust(w) for v, w in zip(values, widths)).rstrip()

    return [title, line(headers), *(line(r) for r in cells)]


def _table(title: str, headers: Sequence[str], rows: Sequence[Sequence[Cell]], styles: Sequence[str]) -> "Table":
    """A rich table: the first column never wraps, the others wrap at spaces (markup off: names are text)."""
    from rich.table import Table
    from rich.text import Text

    table = Table(title=Text(title, style="italic"))
    for i, header in enumerate(headers):
        table.add_column(header, no_wrap=i == 0, overflow="fold",
                         style=styles[i] if i < len(styles) else "")
    for row in rows:
        table.add_row(*(Text(c) for c in row))
    return table


def words_whole(rendered: str, texts: Sequence[str]) -> bool:
    """True when every word of ``texts`` appears in ``rendered`` as often as in ``texts`` together.

    Rendering only removes or splits text (crop, ellipsis, fold), so a count that drops means a cut word.
    """
    source = "\n".join(texts)
    return all(rendered.count(w) >= source.count(w) for w in set(source.split()))


def fits(console: "Console", table: "Table", texts: Sequence[str]) -> bool:
    """Whether ``table`` rendered at ``console``'s width keeps every word of ``texts`` whole."""
    from rich.console import Console

    probe = Console(width=console.width, color_system=None, force_terminal=False)
    with probe.capture() as captured:
        probe.print(table)
    return words_whole(captured.get(), texts)


def show(title: str, headers: Sequence[str], rows: Sequence[Sequence[Cell]], styles: Sequence[str] = ()) -> None:
    """Print a listing: a rich table on a terminal it fits whole, plain aligned lines otherwise."""
    from rich.console import Console

    console = Console()
    if console.is_terminal:
        table = _table(title, headers, rows, styles)
        if fits(console, table, [title, *headers, *(c for row in rows for c in row)]):
            console.print(table)
            return
    for line in plain_lines(title, headers, rows):
        click.echo(line)


def show_report(report: Any) -> None:
    """Print a results table (:class:`pllzoo.report.Report`) without cutting a word: on a terminal the rich
    table where it fits whole, else plain aligned lines and the caption; off a terminal (a file, a pipe) the
    rich table at its own width, not the 80 columns rich assumes there (an outside review: a mix's name was
    folded across rows, so ``grep NAME`` found nothing)."""
    from rich.console import Console

    from pllzoo.report import to_rich

    console, table = Console(), to_rich(report)
    if not console.is_terminal:
        # the title and caption wrap at the table's width: at least their longest word (a second review: a dataset
        # name longer than the table was folded)
        table.min_width = max([len(w) for text in (report.title, report.caption or "") for w in text.split()] or [0])
        wide = Console(width=100_000).measure(table).maximum  # (a measure is capped at the console's width)
        Console(width=max(console.width, wide)).print(table)
        return
    cells = [[str(c) for c in row] for row in report.rows]
    if fits(console, table, [report.title, *report.headers, *(c for row in cells for c in row)]):
        console.print(table)
        return
    for line in plain_lines(report.title, report.headers, cells):
        click.echo(line)
    if report.caption:
        click.echo(report.caption)
