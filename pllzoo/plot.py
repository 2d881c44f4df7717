"""The paper's Figure 1(b)(c) from results folders: estimated vs true class prior, class-wise accuracy."""

from __future__ import annotations

import io
import warnings
from pathlib import Path

import numpy as np

from pllzoo.atomic import write_atomic
from pllzoo.results import final_rows, load


def figure(*out_dirs: Path, methods: list[str] | None = None):
    """A matplotlib figure: (b) prior estimates of methods that log one, (c) class-wise test accuracy.

    Runs of every folder are drawn together, one line per method (the mean over its seeds); they must be of one
    setting (``pllzoo report``'s setting labels: the data, and for one method its training settings), else the
    figure would average other experiments.  The true prior is the mean over the runs of their training priors.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    runs = [Path(d) for d in out_dirs if (Path(d) / "config.json").exists() and not (Path(d) / "runs").is_dir()]
    if runs:  # OUT/runs/<run-id>: report and plot read results folders
        raise ValueError(f"{runs[0]} is a run folder; plot takes results folders (the --out of a bench, holding "
                         f"runs/), e.g. {runs[0].parent.parent}")
    df = final_rows(load(*out_dirs))
    if df.empty:
        raise ValueError(f"no finished runs under {', '.join(map(str, out_dirs))}")
    if methods:
        found = list(dict.fromkeys(df["method"]))
        df = df[df["method"].isin(methods)]
        if df.empty:
            raise ValueError(f"no finished runs of {', '.join(methods)} under {', '.join(map(str, out_dirs))}; "
                             f"its methods: {', '.join(found)}")
    df = df[[isinstance(a, list) for a in df["class_acc"]]]  # older logs may lack the class-wise accuracy
    if df.empty:
        raise ValueError(f"the runs under {', '.join(map(str, out_dirs))} record no class-wise accuracy "
                         "(their logs hold no class_acc); nothing to draw")
    sizes = {len(a): setting for a, setting in zip(df["class_acc"], df["setting"])}
    if len(sizes) > 1:  # other data of the same name, or several studies given together
        shown = "; ".join(f"{setting}: {k} classes" for k, setting in sorted(sizes.items()))
        raise ValueError(f"the runs under {', '.join(map(str, out_dirs))} have different numbers of classes "
                         f"({shown}); the figure draws one dataset: plot the folder of one, or name its methods")
    settings = list(dict.fromkeys(df["setting"]))
    data = {s.split(" [")[0] for s in settings}  # the label's data part; " [...]": what one method's runs differ in
    if len(data) > 1 or df.groupby("method")["setting"].nunique().max() > 1:  # e.g. two imbalance ratios, one
        # method trained for other epochs: not more seeds (methods may differ in their own settings)
        shown = "; ".join(f"{setting}: {', '.join(dict.fromkeys(df.loc[df['setting'] == setting, 'method']))}"
                          for setting in settings)
        raise ValueError(f"the runs under {', '.join(map(str, out_dirs))} are of {len(settings)} settings "
                         f"({shown}); the figure averages the seeds of one: plot the folder of one, or name its "
                         "methods")
    fig, (ax_b, ax_c) = plt.subplots(1, 2, figsize=(12, 4.2))
    k = len(df["class_acc"].iloc[0])
    x = np.arange(k)
    counts = np.stack([np.asarray(c, dtype=float) for c in df["train_counts"]])
    prior = (counts / counts.sum(axis=1, keepdims=True)).mean(axis=0)
    # classes from head to tail, as the paper's Fig. 1 (CIFAR-LT's labels already are; a real-world set's are not:
    # an outside review found "0 = head" under MSRCv2's zig-zag), ties in label order; the ticks name the labels
    order = np.argsort(-prior, kind="stable")
    ax_b.plot(x, prior[order], "k-o", label="true training prior")
    for method, rows in df.groupby("method", sort=False):
        if "prior" in rows and rows["prior"].notna().all():
            est = np.mean(np.stack([np.asarray(p) for p in rows["prior"]]), axis=0)
            ax_b.plot(x, est[order], "--s", label=f"{method} estimate")
        with np.errstate(all="ignore"), warnings.catch_warnings():  # a class without test rows: NaN, drawn as a gap
            warnings.simplefilter("ignore", RuntimeWarning)
            acc = np.nanmean(np.stack([np.asarray(a, dtype=float) for a in rows["class_acc"]]), axis=0)
        ax_c.plot(x, acc[order], "-o", label=method)
    axis = "class, by training count (head first)"
    ax_b.set(title="(b) class prior: estimated vs true", xlabel=axis, ylabel="prior")
    ax_c.set(title="(c) class-wise test accuracy (last epoch)", xlabel=axis, ylabel="accuracy %")
    for ax in (ax_b, ax_c):
        if k <= 40:  # the label of each class, where they fit
            ax.set_xticks(x, [str(i) for i in order], fontsize=7 if k > 20 else None)
        ax.legend(fontsize=8)
        ax.grid(alpha=0.3)
    fig.tight_layout()
    return fig


PNG_COLOURS = 64  # a line plot's anti-aliased edges need no more; a study figure drops from ~88 kB to ~24 kB


def compact_png(png: bytes) -> bytes:
    """``png`` as a palette PNG of at most :data:`PNG_COLOURS` colours (median cut), optimised.

    The committed study figures must stay small (``benchmarks/`` ≤ 5 MB in git, tests/test_lean_results.py);
    for matplotlib's white-background plots the palette is visually the same image at about a quarter of
    the bytes.
    """
    from PIL import Image

    with Image.open(io.BytesIO(png)) as im:
        pal = im.convert("RGB").quantize(colors=PNG_COLOURS, method=Image.Quantize.MEDIANCUT)
    buf = io.BytesIO()
    pal.save(buf, format="PNG", optimize=True)
    return buf.getvalue()


def save(fig, out: Path, dpi: int = 100) -> None:
    """Write ``fig`` to ``out`` in the format its suffix names; a PNG as :func:`compact_png` makes it."""
    buf = io.BytesIO()
    fig.savefig(buf, format=out.suffix.lower().lstrip(".") or None, dpi=dpi)
    write_atomic(out, compact_png(buf.getvalue()) if out.suffix.lower() == ".png" else buf.getvalue())
