"""Selection across the trials of a sweep (PLENCH's selection across hyper-parameters, collect_results.py).

First each run's epoch is chosen by a rule of :mod:`pllzoo.model_selection`; then, per method and seed
(PLENCH: per algorithm and trial seed), the trial whose chosen epoch has the best *validation score*:

* ``approx``  — that epoch's approximated accuracy on the held-out partially labelled rows (``val_approx``);
* ``heldout`` — its covering rate there (``val_covering``);
* ``last``    — the last epoch, ranked by its approximated accuracy (``val_approx``): the last epoch has no
  score of its own, and this one needs no true label;
* ``oracle``  — test accuracy for both choices: labelled ORACLE, an upper bound, never a result.

The value reported is the **test accuracy** (``acc_all``) of the winner's chosen epoch.  Ties between trials
go to the **later** trial, as in PLENCH (a stable sort by score, then reversed, keeps the largest
hparams_seed of equal scores first).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pandas as pd

from pllzoo.errors import PLLZooError
from pllzoo.model_selection import RULES, SCORES, select_epochs

if TYPE_CHECKING:  # pragma: no cover
    from pllzoo.report import Report

RANK_BY = {**SCORES, "last": "val_approx"}
"""The field of the chosen epoch that ranks trials, per rule."""

CAPTIONS = {
    "approx": "Each run's epoch with the best approximated accuracy (PLENCH) on held-out partially labelled "
              "rows (earliest on ties); the trial with the best such score wins",
    "heldout": "Each run's epoch with the best covering rate on held-out partially labelled rows (earliest on "
               "ties); the trial with the best such score wins",
    "last": "Each run's last epoch; the trial with the best approximated accuracy (PLENCH) of that epoch on "
            "held-out partially labelled rows wins",
    "oracle": "ORACLE: each run's epoch and the winning trial by test accuracy (uses test labels; an upper "
              "bound, not a result)",
}
TIES = "Ties between trials go to the later trial (PLENCH). Score: the ranking field in %; test: acc_all in %"


def score_trials(records: pd.DataFrame, rule: str) -> pd.DataFrame:
    """One row per run of ``records`` (per-epoch records with a ``trial`` column): ``trial, method, seed,
    run, epoch`` (the chosen one), ``score`` (:data:`RANK_BY`) and ``acc_all`` (test), by trial."""
    if rule not in RULES:
        raise PLLZooError(f"unknown model selection {rule!r}; valid: {', '.join(RULES)}")
    field = RANK_BY[rule]
    # a run per trial, though two trials may train the same run id (equal draws; a method a scoped key leaves
    # alone): select_epochs groups by run, and pooled they lost rows and the later-trial tie (an outside review)
    keyed = records.assign(run_id=records["run"], run=records["trial"].astype(str) + "/" + records["run"].astype(str))
    chosen = select_epochs(keyed, rule)
    if field not in chosen or chosen[field].isna().any():  # only `last` gets here: the others checked it
        raise PLLZooError(f"--select {rule} ranks trials by '{field}' of the last epoch, which the runs lack; "
                          f"run the sweep with --holdout 0.1")
    out = chosen[["trial", "method", "seed", "run_id", "epoch"]].rename(columns={"run_id": "run"}).assign(
        score=chosen[field].to_numpy(), acc_all=chosen["acc_all"].to_numpy())
    return out.sort_values(["trial", "method", "seed"], kind="stable").reset_index(drop=True)


def winners(scores: pd.DataFrame) -> pd.DataFrame:
    """Per (method, seed), the row of :func:`score_trials` with the best score, the later trial on ties."""
    ordered = scores.sort_values(["method", "seed", "trial"], kind="stable")
    best = ordered[ordered["score"] == ordered.groupby(["method", "seed"])["score"].transform("max")]
    return best.groupby(["method", "seed"], sort=False).tail(1).reset_index(drop=True)


def trials_report(scores: pd.DataFrame, best: pd.DataFrame, rule: str, labels: dict[tuple[int, str], str]) -> "Report":
    """The trials table: ``trial, overrides, method, seed, epoch, score, test``, the winners marked ``*``;
    ``labels``: the overrides that reached each ``(trial, run)`` (not a key scoped to another method)."""
    from pllzoo.report import Report

    won = set(zip(best["trial"], best["method"], best["seed"]))
    rows = [[f"{r.trial}{' *' if (r.trial, r.method, r.seed) in won else ''}", labels[(r.trial, r.run)], r.method,
             str(r.seed), str(r.epoch), f"{r.score:.2f}", f"{r.acc_all:.2f}"] for r in scores.itertuples()]
    title = f"Sweep: {scores['trial'].nunique()} trial(s), selection {rule}" + (" (ORACLE)" if rule == "oracle" else "")
    cap = f"{CAPTIONS[rule]}; * marks the winner of each method and seed. {TIES}."
    return Report(title, ["Trial", "Overrides", "Method", "Seed", "Epoch", "Score", "Test"], rows, cap)
