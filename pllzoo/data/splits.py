"""Train/test splits for the real-world PLL sets (SoLar paper App. C.6, the two test protocols).

* ``uniform``: a seeded random 80/20 split of all examples, the "previous works' random
  split" (LWS/PRODEN use 80/20; LWS also stratifies, we do not: a uniformly random test
  set is the point of this protocol).  ``n_test = ceil(0.2 n)`` as sklearn rounds.
* ``balanced``: SoLar paper App. C.6, a (roughly) class-balanced test set: for each label
  with ``n_j >= 200`` examples, 100 random ones; otherwise ``floor(n_j / 2)`` random ones
  (the paper says "half" without a rounding; we floor).  Labels with 0 or 1 examples add
  nothing to test.

Both draw from the run's ``RandomState`` and return sorted index arrays.
"""

from __future__ import annotations

import math
from typing import Literal

import numpy as np

from pllzoo.errors import PLLZooError

SplitName = Literal["uniform", "balanced"]
UNIFORM_TEST_FRACTION = 0.2
BALANCED_BIG_CLASS = 200  # n_j >= this -> a fixed number of test samples
BALANCED_BIG_TEST = 100


def balanced_test_counts(class_counts: np.ndarray) -> np.ndarray:
    """Return the per-label test size of the balanced protocol: 100 if ``n_j >= 200`` else ``n_j // 2``."""
    n = np.asarray(class_counts, dtype=np.int64)
    return np.where(n >= BALANCED_BIG_CLASS, BALANCED_BIG_TEST, n // 2)


def uniform_split(
    n: int, rng: np.random.RandomState, test_fraction: float = UNIFORM_TEST_FRACTION
) -> tuple[np.ndarray, np.ndarray]:
    """Return ``(train_idx, test_idx)`` of a uniformly random split with ``ceil(test_fraction n)`` test rows."""
    n_test = math.ceil(test_fraction * n)
    perm = rng.permutation(n)
    return np.sort(perm[n_test:]), np.sort(perm[:n_test])


def balanced_split(
    labels: np.ndarray, num_classes: int, rng: np.random.RandomState
) -> tuple[np.ndarray, np.ndarray]:
    """Return ``(train_idx, test_idx)`` with :func:`balanced_test_counts` random test rows per label.

    Vectorised: one random permutation, a stable sort by label, and the within-label rank
    of each row compared with its label's quota.
    """
    labels = np.asarray(labels, dtype=np.int64)
    quota = balanced_test_counts(np.bincount(labels, minlength=num_classes))  # [K]
    perm = rng.permutation(labels.shape[0])
    order = perm[np.argsort(labels[perm], kind="stable")]  # grouped by label, random within
    sorted_labels = labels[order]
    starts = np.searchsorted(sorted_labels, np.arange(num_classes))  # first row of each label
    rank = np.arange(order.shape[0]) - starts[sorted_labels]  # position within its label
    is_test = rank < quota[sorted_labels]
    return np.sort(order[~is_test]), np.sort(order[is_test])


def split_indices(
    split: SplitName, labels: np.ndarray, num_classes: int, rng: np.random.RandomState
) -> tuple[np.ndarray, np.ndarray]:
    """Dispatch on the protocol name; see the module docstring."""
    if split == "uniform":
        return uniform_split(len(labels), rng)
    if split == "balanced":
        return balanced_split(labels, num_classes, rng)
    raise PLLZooError(f"unknown test split {split!r}; use 'uniform' or 'balanced'")
