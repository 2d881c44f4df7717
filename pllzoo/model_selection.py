"""Which epoch of a run is reported: the model-selection rules of ``pllzoo report``.

* ``last``    — the last epoch of the final stage (default; what the papers' code prints);
* ``oracle``  — the final-stage epoch with the best test accuracy.  It looks at test labels,
  so it is an upper bound, never a result; tables say "oracle" wherever it is used;
* ``heldout`` — the final-stage epoch with the best covering rate on held-out *partially
  labelled* training rows (``pllzoo bench --holdout F``; PLENCH's criterion).  Ties go to the
  later epoch.  Needs no true label anywhere.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pllzoo.errors import PLLZooError

if TYPE_CHECKING:  # pragma: no cover  (pandas loads when a rule runs: `pllzoo report --help` stays fast)
    import pandas as pd

RULES = ("last", "oracle", "heldout")

CAPTIONS = {
    "last": "Model selection: last epoch",
    "oracle": "Model selection: ORACLE, the epoch with the best test accuracy (uses test labels; an upper bound)",
    "heldout": "Model selection: the epoch with the best covering rate on held-out partially labelled training rows",
}

_SCORE = {"oracle": "acc_all", "heldout": "val_covering"}


def select_epochs(records: pd.DataFrame, rule: str) -> pd.DataFrame:
    """One row per run (column ``run``) from per-epoch ``records``, chosen by ``rule``."""
    import pandas as pd

    if rule not in RULES:
        raise PLLZooError(f"unknown model selection {rule!r}; valid: {', '.join(RULES)}")
    final = records[records["final_stage"].astype(bool)].sort_values(["run", "epoch"], kind="stable")
    if rule == "last":
        return final.groupby("run", sort=False).tail(1)
    score = _SCORE[rule]
    if score not in final or final[score].isna().any():
        missing = sorted(set(final.loc[final.get(score, pd.Series(index=final.index)).isna(), "run"]))
        raise PLLZooError(
            f"--select {rule} needs '{score}' in every epoch record; missing in {', '.join(missing[:3])}"
            + (" (rerun pllzoo bench with --holdout 0.1)" if rule == "heldout" else "")
        )
    best = final[score] == final.groupby("run")[score].transform("max")
    return final[best].groupby("run", sort=False).tail(1)  # ties: the later epoch
