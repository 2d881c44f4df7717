"""Which epoch of a run is reported: the model-selection rules of ``pllzoo report``.

* ``last``    — the last epoch of the final stage (default; what the papers' code prints);
* ``oracle``  — the final-stage epoch with the best test accuracy.  It looks at test labels,
  so it is an upper bound, never a result; tables say "oracle" wherever it is used;
* ``heldout`` — the final-stage epoch with the best covering rate on held-out *partially
  labelled* training rows (``pllzoo bench --holdout F``; PLENCH's criterion).  Ties go to the
  earliest epoch, as PLENCH's (an outside review: the later one was taken, which moved PRODEN's mean by 7
  points where the covering rate held its best value over many epochs).  Needs no true label anywhere;
* ``approx``  — the final-stage epoch with the best *approximated accuracy* on the same held-out
  rows (``val_approx``, :func:`pllzoo.metrics.approximated_accuracy`; PLENCH's
  ``val_approximated_accuracy``).  Ties go to the **earliest** epoch, as PLENCH's early stopping
  (Python ``max`` keeps the first maximum), which is the rule ``approx`` exists to reproduce.

PLENCH drops its step-0 record (the untrained model) before selecting; pllzoo writes no such record
(the first is taken after epoch 1), and pre-estimation stages are left out like it (``final_stage``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pllzoo.errors import PLLZooError

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd  # imported where used: the CLI reads RULES without pandas

RULES = ("last", "oracle", "heldout", "approx")

CAPTIONS = {
    "last": "Model selection: last epoch",
    "oracle": "Model selection: ORACLE, the epoch with the best test accuracy (uses test labels; an upper bound)",
    "heldout": "Model selection: the epoch with the best covering rate on held-out partially labelled training rows, "
               "earliest on ties",
    "approx": "Model selection: the epoch with the best approximated accuracy (PLENCH) on held-out partially "
              "labelled training rows, earliest on ties",
}

SCORES = {"oracle": "acc_all", "heldout": "val_covering", "approx": "val_approx"}
"""The per-epoch record field each rule maximises (``last`` maximises none)."""

_EARLIEST_ON_TIES = frozenset({"heldout", "approx"})  # PLENCH's max over checkpoints; oracle keeps the later


def select_epochs(records: pd.DataFrame, rule: str) -> pd.DataFrame:
    """One row per run (column ``run``) from per-epoch ``records``, chosen by ``rule``."""
    import pandas as pd

    if rule not in RULES:
        raise PLLZooError(f"unknown model selection {rule!r}; valid: {', '.join(RULES)}")
    final = records[records["final_stage"].astype(bool)].sort_values(["run", "epoch"], kind="stable")
    if rule == "last":
        return final.groupby("run", sort=False).tail(1)
    score = SCORES[rule]
    if score not in final or final[score].isna().any():
        absent = final.get(score, pd.Series(index=final.index)).isna()
        missing = sorted(set(final.loc[absent, "run"]))
        some = sorted(set(missing) & set(final.loc[~absent, "run"]))  # a run that logged it at other epochs
        if some:  # not a run trained without --holdout: its log was changed (an outside review)
            epoch = final.loc[absent & final["run"].isin(some), "epoch"].iloc[0]
            raise PLLZooError(f"--select {rule} needs '{score}' in every epoch record; {some[0]} logged it at other "
                              f"epochs but not at epoch {epoch} (a damaged or edited log.jsonl)")
        raise PLLZooError(
            f"--select {rule} needs '{score}' in every epoch record; missing in {', '.join(missing[:3])}"
            + (" (rerun pllzoo bench with --holdout 0.1)" if score.startswith("val_") else "")
        )
    best = final[final[score] == final.groupby("run")[score].transform("max")].groupby("run", sort=False)
    return best.head(1) if rule in _EARLIEST_ON_TIES else best.tail(1)  # ties: earliest / later epoch
