"""The two real-world test protocols (SoLar paper App. C.6)."""

from __future__ import annotations

import numpy as np
import pytest

from pllzoo.data.splits import balanced_split, balanced_test_counts, split_indices, uniform_split
from pllzoo.errors import PLLZooError


def test_balanced_rule_by_hand() -> None:
    counts = np.array([0, 1, 2, 3, 199, 200, 500])
    np.testing.assert_array_equal(balanced_test_counts(counts), [0, 0, 1, 1, 99, 100, 100])


def test_balanced_split_per_label() -> None:
    counts = [0, 1, 199, 200, 500, 7]
    labels = np.random.RandomState(0).permutation(np.repeat(np.arange(len(counts)), counts))
    tr, te = balanced_split(labels, len(counts), np.random.RandomState(1))
    np.testing.assert_array_equal(np.bincount(labels[te], minlength=6), [0, 0, 99, 100, 100, 3])
    assert len(np.intersect1d(tr, te)) == 0 and len(tr) + len(te) == len(labels)
    tr2, te2 = balanced_split(labels, len(counts), np.random.RandomState(1))
    np.testing.assert_array_equal(te, te2)
    _, te3 = balanced_split(labels, len(counts), np.random.RandomState(2))
    assert not np.array_equal(te, te3)


def test_uniform_split() -> None:
    tr, te = uniform_split(1001, np.random.RandomState(0))
    assert len(te) == 201 and len(tr) == 800  # ceil(0.2 n) test rows, as sklearn
    np.testing.assert_array_equal(np.sort(np.concatenate([tr, te])), np.arange(1001))
    _, te2 = uniform_split(1001, np.random.RandomState(0))
    np.testing.assert_array_equal(te, te2)


def test_unknown_split() -> None:
    with pytest.raises(PLLZooError, match="unknown test split"):
        split_indices("stratified", np.zeros(3, int), 1, np.random.RandomState(0))  # type: ignore[arg-type]
