"""Model-selection rules of `pllzoo report`, on hand-made epoch records."""

import pandas as pd
import pytest

from pllzoo.errors import PLLZooError
from pllzoo.model_selection import select_epochs


def records(val=True):
    rows = []
    # run a: a pre-estimation stage (not final) with the best numbers, then 3 final epochs
    rows += [dict(run="a", final_stage=False, epoch=1, acc_all=99.0, val_covering=99.0)]
    rows += [dict(run="a", final_stage=True, epoch=e, acc_all=acc, val_covering=cov)
             for e, acc, cov in [(1, 50.0, 80.0), (2, 70.0, 90.0), (3, 60.0, 90.0)]]
    # run b: oracle tie at epochs 1 and 3 -> the later one
    rows += [dict(run="b", final_stage=True, epoch=e, acc_all=acc, val_covering=cov)
             for e, acc, cov in [(1, 40.0, 95.0), (2, 30.0, 60.0), (3, 40.0, 70.0)]]
    df = pd.DataFrame(rows)
    return df if val else df.drop(columns="val_covering")


def picked(rule, df=None):
    out = select_epochs(records() if df is None else df, rule)
    return dict(zip(out["run"], out["epoch"]))


def test_last_is_last_epoch_of_final_stage():
    assert picked("last") == {"a": 3, "b": 3}


def test_oracle_is_best_test_accuracy_in_final_stage_ties_later():
    assert picked("oracle") == {"a": 2, "b": 3}


def test_heldout_is_best_covering_rate_ties_earliest():
    """PLENCH's max over checkpoints keeps the earliest (an outside review: the later one was taken)."""
    assert picked("heldout") == {"a": 2, "b": 1}


def test_heldout_without_val_records_explains_how_to_get_them():
    with pytest.raises(PLLZooError, match="--holdout"):
        picked("heldout", records(val=False))


def test_unknown_rule():
    with pytest.raises(PLLZooError, match="valid: last, oracle, heldout"):
        picked("best")
