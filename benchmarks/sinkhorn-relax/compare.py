"""SoLar with ``label_update.relax=check`` (benchmarks/realworld/, pllzoo's default) against ``relax=nan`` (here),
per real-world set and split, paired by seed (the same split, initialisation and batches).

    python benchmarks/sinkhorn-relax/compare.py > benchmarks/sinkhorn-relax/table.md

writes ``per_seed.csv`` from the run folders (``results/``, not kept in git: 0.9 MB of archives would pass
benchmarks/' 5 MB) and the table from it; without ``results/`` (a clean checkout) the table comes from the
committed ``per_seed.csv``.  Last epoch of the final stage: All and Few accuracy (mean ± sample std over the
seeds both sides have), the paired difference nan − check (mean ± std), and the relaxed solves per epoch over
the final stage (mean).
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from pllzoo.model_selection import select_epochs
from pllzoo.report import fmt
from pllzoo.results import load

HERE = Path(__file__).resolve().parent
CHECK = HERE.parent / "realworld" / "results"
NAN = HERE / "results"


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
    return fmt(x.mean(), x.std()) if len(x) > 1 else f"{x.mean():.2f}"


PER_SEED = HERE / "per_seed.csv"


def per_seed() -> pd.DataFrame:
    """One row per (set and split, seed, relax): All, Few, relaxed solves per epoch; from ``results/``."""
    rows = []
    for folder in sorted(p for p in NAN.iterdir() if p.is_dir()):
        for relax, source in (("check", CHECK / folder.name), ("nan", folder)):
            got = _solar(source)
            if got is None:
                continue
            last, relaxed = got
            rows += [{"set": folder.name, "seed": int(seed), "relax": relax, "acc_all": r.acc_all,
                      "acc_few": r.acc_few, "relaxed_per_epoch": float(relaxed.loc[seed])}
                     for seed, r in last.iterrows()]
    return pd.DataFrame(rows)


def main() -> None:
    if NAN.is_dir():
        per_seed().to_csv(PER_SEED, index=False, float_format="%.6g")
    df = pd.read_csv(PER_SEED, keep_default_na=False, na_values=[""])  # "nan" is a relax value, not NaN
    print("| set, split | All check | All nan | All nan − check | Few check | Few nan | Few nan − check "
          "| relaxed solves / epoch check → nan | seeds |")
    print("|---|---|---|---|---|---|---|---|---|")
    for name, rows in df.groupby("set", sort=True):
        a, b = (rows[rows["relax"] == r].set_index("seed") for r in ("check", "nan"))
        seeds = sorted(set(a.index) & set(b.index))
        if not seeds:
            continue
        a, b = a.loc[seeds], b.loc[seeds]
        d_all, d_few = b["acc_all"] - a["acc_all"], b["acc_few"] - a["acc_few"]
        print(f"| {name} | {_ms(a['acc_all'])} | {_ms(b['acc_all'])} | {_ms(d_all)} | {_ms(a['acc_few'])} "
              f"| {_ms(b['acc_few'])} | {_ms(d_few)} | {a['relaxed_per_epoch'].mean():.1f} → "
              f"{b['relaxed_per_epoch'].mean():.1f} | {len(seeds)} |")


if __name__ == "__main__":
    main()
