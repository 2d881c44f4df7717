"""SoLar with ``label_update.relax=check`` (benchmarks/realworld/, pllzoo's default) against ``relax=nan`` (here),
per real-world set and split, paired by seed (the same split, initialisation and batches).

    python benchmarks/sinkhorn-relax/compare.py > benchmarks/sinkhorn-relax/table.md

Last epoch of the final stage: All and Few accuracy (mean ± sample std over the seeds both sides have), the
paired difference nan − check (mean ± std), and the relaxed solves per epoch over the final stage (mean).
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


def main() -> None:
    print("| set, split | All check | All nan | All nan − check | Few check | Few nan | Few nan − check "
          "| relaxed solves / epoch check → nan | seeds |")
    print("|---|---|---|---|---|---|---|---|---|")
    for folder in sorted(p for p in NAN.iterdir() if p.is_dir()):
        got = _solar(folder), _solar(CHECK / folder.name)
        if None in got:
            continue
        (nan, nan_relaxed), (check, check_relaxed) = got
        seeds = sorted(set(nan.index) & set(check.index))
        if not seeds:
            continue
        a, b = check.loc[seeds], nan.loc[seeds]
        d_all, d_few = b["acc_all"] - a["acc_all"], b["acc_few"] - a["acc_few"]
        print(f"| {folder.name} | {_ms(a['acc_all'])} | {_ms(b['acc_all'])} | {_ms(d_all)} | {_ms(a['acc_few'])} "
              f"| {_ms(b['acc_few'])} | {_ms(d_few)} | {check_relaxed.loc[seeds].mean():.1f} → "
              f"{nan_relaxed.loc[seeds].mean():.1f} | {len(seeds)} |")


if __name__ == "__main__":
    main()
