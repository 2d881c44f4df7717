"""The paper's Figure 1(b)(c) from a results folder: estimated vs true class prior, class-wise accuracy."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from pllzoo.results import final_rows, load, read_jsonl


def _true_prior(out_dir: Path, run: str) -> np.ndarray:
    import json

    counts = np.asarray(json.loads((Path(out_dir) / "runs" / run / "config.json").read_text())["data"]["train_counts"])
    return counts / counts.sum()


def figure(out_dir: Path, methods: list[str] | None = None):
    """A matplotlib figure: (b) prior estimates of methods that log one, (c) class-wise test accuracy."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    df = final_rows(load(out_dir))
    if methods:
        df = df[df["method"].isin(methods)]
    if df.empty:
        raise ValueError(f"no finished runs under {out_dir}")
    fig, (ax_b, ax_c) = plt.subplots(1, 2, figsize=(12, 4.2))
    k = len(df["class_acc"].iloc[0])
    x = np.arange(k)
    ax_b.plot(x, _true_prior(out_dir, df["run"].iloc[0]), "k-o", label="true training prior")
    for method, rows in df.groupby("method", sort=False):
        if "prior" in rows and rows["prior"].notna().all():
            est = np.mean(np.stack([np.asarray(p) for p in rows["prior"]]), axis=0)
            ax_b.plot(x, est, "--s", label=f"{method} estimate")
        acc = np.nanmean(np.stack([np.asarray(a, dtype=float) for a in rows["class_acc"]]), axis=0)
        ax_c.plot(x, acc, "-o", label=method)
    ax_b.set(title="(b) class prior: estimated vs true", xlabel="class (0 = head)", ylabel="prior")
    ax_c.set(title="(c) class-wise test accuracy (last epoch)", xlabel="class (0 = head)", ylabel="accuracy %")
    for ax in (ax_b, ax_c):
        ax.legend(fontsize=8)
        ax.grid(alpha=0.3)
    fig.tight_layout()
    return fig
