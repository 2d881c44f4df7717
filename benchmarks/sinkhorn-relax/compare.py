"""SoLar with ``label_update.relax=check`` (benchmarks/realworld/, pllzoo's default) against ``relax=nan``
(``results/``) and ``relax=reference`` (``results-reference/``), per real-world set and split, paired by seed (the
same split, initialisation and batches).

    python benchmarks/sinkhorn-relax/compare.py > benchmarks/sinkhorn-relax/table.md

updates ``per_seed.csv`` from the run folders that exist (``results*/``, not kept in git: 0.9 MB of archives each
would pass benchmarks/' 5 MB; the rows of a variant whose folder is absent stay as committed) and writes one table
per variant against ``check`` from it.  Last epoch of the final stage: All and Few accuracy (mean ± sample std over
the seeds both sides have), the paired difference variant − check (mean ± std), and the relaxed solves per epoch
over the final stage (mean).
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from pllzoo.model_selection import select_epochs
from pllzoo.report import fmt
from pllzoo.results import load

HERE = Path(__file__).resolve().parent
SOURCES = {"check": HERE.parent / "realworld" / "results", "nan": HERE / "results",
           "reference": HERE / "results-reference"}


def _solar(folder: Path) -> tuple[pd.DataFrame, pd.Series] | None:
    """The last-epoch rows of the finished SoLar runs in ``folder`` by seed, and their mean relaxed solves per
    epoch; None without any."""
    df = load(folder) if folder.is_dir() else pd.DataFrame()
    if df.empty or not (df["method"] == "solar").any():
        return None
    df = df[df["method"] == "solar"]
    final = df[df["final_stage"]]
    relaxed = final.groupby("seed")["sinkhorn_relaxed_count"].mean()
    return select_epochs(df, "last").set_index("seed"), relaxed


def _ms(x: pd.Series) -> str:
    return fmt(x.mean(), x.std() if len(x) > 1 else None)


PER_SEED = HERE / "per_seed.csv"


def per_seed() -> pd.DataFrame:
    """One row per (set and split, seed, relax): All, Few, relaxed solves per epoch; from the run folders of each
    variant other than ``check`` that exist (with ``check``'s rows for their sets), else the committed rows."""
    kept = pd.read_csv(PER_SEED, keep_default_na=False, na_values=[""]) if PER_SEED.exists() else pd.DataFrame()
    rows = []
    for relax in ("nan", "reference"):
        if not SOURCES[relax].is_dir():
            continue
        for folder in sorted(p for p in SOURCES[relax].iterdir() if p.is_dir()):
            for variant, source in (("check", SOURCES["check"] / folder.name), (relax, folder)):
                got = _solar(source)
                if got is None:
                    continue
                last, relaxed = got
                rows += [{"set": folder.name, "seed": int(seed), "relax": variant, "acc_all": r.acc_all,
                          "acc_few": r.acc_few, "relaxed_per_epoch": float(relaxed.loc[seed])}
                         for seed, r in last.iterrows()]
    new = pd.DataFrame(rows).drop_duplicates(["set", "seed", "relax"]) if rows else pd.DataFrame()
    if kept.empty or new.empty:
        return new if kept.empty else kept
    fresh = set(map(tuple, new[["set", "seed", "relax"]].astype(str).values))
    old = kept[[tuple(x) not in fresh for x in kept[["set", "seed", "relax"]].astype(str).values]]
    return pd.concat([old, new], ignore_index=True).sort_values(["relax", "set", "seed"], kind="stable")


def table(df: pd.DataFrame, variant: str) -> list[str]:
    """The Markdown table of ``variant`` against ``check``, or [] when no set has both."""
    lines = [f"| set, split | All check | All {variant} | All {variant} − check | Few check | Few {variant} "
             f"| Few {variant} − check | relaxed solves / epoch check → {variant} | seeds |",
             "|---|---|---|---|---|---|---|---|---|"]
    for name, rows in df.groupby("set", sort=True):
        a, b = (rows[rows["relax"] == r].set_index("seed") for r in ("check", variant))
        seeds = sorted(set(a.index) & set(b.index))
        if not seeds:
            continue
        a, b = a.loc[seeds], b.loc[seeds]
        d_all, d_few = b["acc_all"] - a["acc_all"], b["acc_few"] - a["acc_few"]
        lines.append(f"| {name} | {_ms(a['acc_all'])} | {_ms(b['acc_all'])} | {_ms(d_all)} | {_ms(a['acc_few'])} "
                     f"| {_ms(b['acc_few'])} | {_ms(d_few)} | {a['relaxed_per_epoch'].mean():.1f} → "
                     f"{b['relaxed_per_epoch'].mean():.1f} | {len(seeds)} |")
    return lines if len(lines) > 2 else []


def main() -> None:
    if any(SOURCES[v].is_dir() for v in ("nan", "reference")):
        per_seed().to_csv(PER_SEED, index=False, float_format="%.6g")
    df = pd.read_csv(PER_SEED, keep_default_na=False, na_values=[""])  # "nan" is a relax value, not NaN
    blocks = [lines for lines in (table(df, v) for v in ("nan", "reference")) if lines]
    print("\n\n".join("\n".join(lines) for lines in blocks))


if __name__ == "__main__":
    main()
