"""Long-tail subsampling: per-class counts (SoLar code: utils/utils_data.py) and the reference's RNG order."""

from __future__ import annotations

import numpy as np
import pytest

from pllzoo.data.longtail import img_num_per_cls, longtail_indices
from pllzoo.errors import PLLZooError

C10 = {
    50: [5000, 3237, 2096, 1357, 878, 568, 368, 238, 154, 100],
    100: [5000, 2997, 1796, 1077, 645, 387, 232, 139, 83, 50],
    200: [5000, 2775, 1540, 854, 474, 263, 146, 81, 45, 25],
}
C10_N = {50: 13996, 100: 12406, 200: 11203}
C100 = {10: (19573, 50), 20: (15907, 25), 50: (12608, 10)}  # gamma -> (N, tail)


@pytest.mark.parametrize("imb", sorted(C10))
def test_cifar10_counts_match_spec(imb: int) -> None:
    counts = img_num_per_cls(50000 / 10, 10, imb, "exp")
    assert counts == C10[imb]
    assert sum(counts) == C10_N[imb]


@pytest.mark.parametrize("imb", sorted(C100))
def test_cifar100_counts_match_spec(imb: int) -> None:
    counts = img_num_per_cls(50000 / 100, 100, imb, "exp")
    n, tail = C100[imb]
    assert (sum(counts), counts[0], counts[-1]) == (n, 500, tail)
    if imb == 20:
        assert counts[:5] == [500, 485, 470, 456, 442]


def test_step_profile() -> None:
    assert img_num_per_cls(5000.0, 10, 100, "step") == [5000] * 5 + [50] * 5
    assert img_num_per_cls(500.0, 5, 10, "step") == [500] * 2 + [50] * 3  # odd K: middle joins the tail


def test_balanced_and_bad_arguments() -> None:
    assert img_num_per_cls(7.0, 4, 1.0, "exp") == [7, 7, 7, 7]
    with pytest.raises(PLLZooError):
        img_num_per_cls(100.0, 10, 0.5, "exp")
    with pytest.raises(PLLZooError):
        img_num_per_cls(100.0, 10, 10, "linear")  # type: ignore[arg-type]


def _reference_indices(labels: np.ndarray, counts: list[int], seed: int) -> np.ndarray:
    """The reference's procedure, written against numpy's global RNG."""
    np.random.seed(seed)
    kept = []
    for j, n_j in enumerate(counts):
        idx = np.where(labels == j)[0]
        np.random.shuffle(idx)
        kept.append(idx[:n_j])
    return np.concatenate(kept)


def test_indices_follow_reference_rng_order() -> None:
    labels = np.random.RandomState(5).randint(0, 10, size=3000)
    counts = img_num_per_cls(200.0, 10, 20, "exp")
    ours = longtail_indices(labels, counts, np.random.RandomState(3))
    np.testing.assert_array_equal(ours, _reference_indices(labels, counts, 3))


def test_indices_class_by_class_with_counts() -> None:
    labels = np.tile(np.arange(4), 50)  # 50 per class, interleaved
    counts = [50, 20, 5, 1]
    idx = longtail_indices(labels, counts, np.random.RandomState(0))
    kept = labels[idx]
    np.testing.assert_array_equal(kept, np.repeat(np.arange(4), counts))
    assert len(np.unique(idx)) == len(idx)


def test_indices_too_few_examples() -> None:
    with pytest.raises(PLLZooError, match="class 1 has 2 examples"):
        longtail_indices(np.array([0, 0, 0, 1, 1]), [3, 3], np.random.RandomState(0))
