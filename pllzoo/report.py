"""Summaries → rich tables (pure functions, no I/O)."""

from __future__ import annotations

import math

import pandas as pd
from rich.table import Table

from pllzoo.results import ACC_COLUMNS

HEADERS = {"acc_all": "All", "acc_many": "Many", "acc_medium": "Medium", "acc_few": "Few"}


def fmt(mean: float, std: float) -> str:
    """``mean ± std`` with two decimals; ``mean`` alone when std is undefined (one seed)."""
    if mean is None or (isinstance(mean, float) and math.isnan(mean)):
        return "–"
    if std is None or (isinstance(std, float) and math.isnan(std)):
        return f"{mean:.2f}"
    return f"{mean:.2f} ± {std:.2f}"


def table(summary: pd.DataFrame, title: str, caption: str) -> Table:
    """One row per method: All / Many / Medium / Few as mean ± sample std over n seeds."""
    t = Table(title=title, caption=caption, caption_justify="left")
    t.add_column("Method", style="bold", overflow="fold")
    for col in ACC_COLUMNS:
        t.add_column(HEADERS[col], justify="right")
    t.add_column("n", justify="right")
    for _, row in summary.iterrows():
        t.add_row(row["method"], *(fmt(row[f"{c}_mean"], row[f"{c}_std"]) for c in ACC_COLUMNS), str(int(row["n"])))
    return t


def markdown(summary: pd.DataFrame, caption: str) -> str:
    """The same table as Markdown."""
    head = "| Method | " + " | ".join(HEADERS[c] for c in ACC_COLUMNS) + " | n |"
    lines = [head, "|---" * (len(ACC_COLUMNS) + 2) + "|"]
    for _, row in summary.iterrows():
        cells = [fmt(row[f"{c}_mean"], row[f"{c}_std"]) for c in ACC_COLUMNS]
        lines.append(f"| {row['method']} | " + " | ".join(cells) + f" | {int(row['n'])} |")
    return "\n".join(lines) + f"\n\n{caption}\n"
