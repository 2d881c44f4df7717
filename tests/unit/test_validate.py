"""check_pll: one-line errors for broken inputs, a counted warning for labels outside candidates."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from pllzoo.data.validate import PLLDataWarning, check_pll, exception_line, labels_from_target
from pllzoo.errors import PLLZooError


def _ok(n: int = 6, K: int = 3) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    y = np.arange(n) % K
    cand = np.zeros((n, K), bool)
    cand[np.arange(n), y] = True
    return np.zeros((n, 2)), y, cand


def _raises(match: str, *args, **kwargs) -> str:
    with pytest.raises(PLLZooError, match=match) as e:
        check_pll(*args, **kwargs)
    assert "\n" not in str(e.value)
    return str(e.value)


def test_valid_input_returns_zero_based_labels() -> None:
    x, y, cand = _ok()
    as_tensors = (torch.from_numpy(a) for a in (x, y, cand))
    np.testing.assert_array_equal(check_pll(*as_tensors, 3, "t"), y)
    np.testing.assert_array_equal(check_pll(x, np.eye(3)[y], cand, 3, "t"), y)  # one-hot


def test_empty_candidate_rows() -> None:
    x, y, cand = _ok()
    cand[[2, 4]] = False
    msg = _raises("empty candidate sets", x, y, cand, 3, "toy.mat")
    assert "toy.mat" in msg and "2 of 6 rows" in msg and "row 2" in msg


def test_label_out_of_range_and_one_hot_rows() -> None:
    x, y, cand = _ok()
    _raises("outside 0..2", x, np.array([0, 1, 2, 0, 1, 3]), cand, 3, "t", one_based=False)
    bad = np.eye(3)[y]
    bad[1] = 0
    bad[3] = 1
    msg = _raises("without exactly one 1", x, bad, cand, 3, "t")
    assert "2 of 6 rows" in msg and "row 1" in msg


def test_index_vector_bases() -> None:
    _, y, cand = _ok()
    np.testing.assert_array_equal(labels_from_target(y + 1, 3, "t", cand), y)  # has K -> 1-based
    np.testing.assert_array_equal(labels_from_target(y, 3, "t", cand), y)  # has 0 -> 0-based
    one_based_no_k = np.array([1, 2, 1, 2])  # ambiguous: candidates decide
    cand4 = np.eye(3, dtype=bool)[[0, 1, 0, 1]]
    np.testing.assert_array_equal(labels_from_target(one_based_no_k, 3, "t", cand4), [0, 1, 0, 1])
    np.testing.assert_array_equal(labels_from_target(one_based_no_k.reshape(1, -1), 3, "t", cand4), [0, 1, 0, 1])
    with pytest.raises(PLLZooError, match="outside 1..3"):
        labels_from_target(np.array([1, 4, 2]), 3, "t")
    with pytest.raises(PLLZooError, match="non-integer"):
        labels_from_target(np.array([1.5, 1, 2]), 3, "t")


def test_nan_features_and_shapes() -> None:
    x, y, cand = _ok()
    x[3, 1] = np.nan
    x[5, 0] = np.inf
    msg = _raises("NaN/inf features", x, y, cand, 3, "t")
    assert "2 of 6 rows" in msg and "row 3" in msg
    x, y, cand = _ok()
    _raises("candidate matrix has shape", x, y, cand[:5], 3, "t")
    _raises("expected", x, y, cand, 4, "t")
    _raises("5 true labels for 6 feature rows", x, y[:5], cand, 3, "t", one_based=False)


def test_true_label_outside_candidates_warns_with_count() -> None:
    x, y, cand = _ok()
    cand[0] = [False, True, False]
    cand[4] = [True, False, False]
    with pytest.warns(PLLDataWarning, match="2 of 6 true labels are outside"):
        check_pll(x, y, cand, 3, "t")


def test_exception_line_is_one_line() -> None:
    assert exception_line(ValueError("a\nb")) == "ValueError: a"


def test_negative_label_indices_are_counted_alone() -> None:
    x, y, cand = _ok()
    idx = y + 1  # 1-based
    idx[[1, 4]] = -1  # two bad rows: the others must not be counted as out of range under a 0-based guess
    msg = _raises("negative label indices", x, idx, cand, 3, "t")
    assert "2 of 6 rows" in msg and "row 1" in msg


def test_candidate_entries_other_than_0_1_and_one_class() -> None:
    x, y, cand = _ok()
    c = cand.astype(float)
    c[2, 0] = -1
    c[5, 1] = 0.5
    msg = _raises("candidate entries other than 0/1", x, y, c, 3, "t")
    assert "2 of 6 rows" in msg and "row 2" in msg
    check_pll(x, y, cand.astype(float), 3, "t")  # 0.0/1.0 is fine
    _raises("1 class; partial-label learning needs at least 2", x, np.zeros(6), np.ones((6, 1)), 1, "t")


def test_check_training_set(tiny_data) -> None:
    from pllzoo.data.validate import check_training_set

    check_training_set(tiny_data)  # nothing to say
    few = tiny_data.replace(y_train=tiny_data.y_train[:3], candidates=tiny_data.candidates[:3],
                            x_train=tiny_data.x_train[:3])
    with pytest.raises(PLLZooError, match="3 training rows for 4 classes"):
        check_training_set(few)
    no_class_3 = tiny_data.replace(y_train=tiny_data.y_train % 3)
    with pytest.warns(PLLDataWarning, match="1 of 4 classes have no training rows \\(first: class 3\\)"):
        check_training_set(no_class_3)
    with pytest.warns(PLLDataWarning, match="every label is a candidate on every training row"):
        check_training_set(tiny_data.replace(candidates=torch.ones_like(tiny_data.candidates)))
