"""Candidate generation: expected set sizes, the true label, the three matrices, seeding."""

from __future__ import annotations

import numpy as np
import pytest

from pllzoo.data.candidates import (
    NONUNIFORM_RATES,
    candidate_kind,
    draw_candidates,
    expected_set_size,
    generate_candidates,
    hierarchical_transition,
    nonuniform_transition,
    transition_matrix,
    uniform_transition,
)
from pllzoo.data.cifar100_classes import CIFAR100_FINE_NAMES, CIFAR100_SUPERCLASSES
from pllzoo.errors import PLLZooError


def _labels(n: int, K: int, seed: int = 0) -> np.ndarray:
    return np.random.RandomState(seed).randint(0, K, size=n)


def _within_binomial(mean_size: float, expected: float, p: float, trials: int, n: int) -> None:
    """|S| - 1 is a sum of ``trials`` Bernoulli(p) per row; allow 5 standard errors."""
    tol = 5 * np.sqrt(trials * p * (1 - p) / n) + 1e-12
    assert abs(mean_size - expected) <= tol, (mean_size, expected, tol)


@pytest.mark.parametrize(("K", "phi"), [(10, 0.3), (10, 0.5), (100, 0.05), (100, 0.1)])
def test_uniform_expected_size_and_true_label(K: int, phi: float) -> None:
    n = 20000
    y = _labels(n, K)
    Y = draw_candidates(y, uniform_transition(K, phi), np.random.RandomState(1))
    assert Y.dtype == np.bool_ and Y.shape == (n, K)
    assert Y[np.arange(n), y].all()
    assert expected_set_size(uniform_transition(K, phi), y) == pytest.approx(1 + phi * (K - 1))
    _within_binomial(Y.sum(1).mean(), 1 + phi * (K - 1), phi, K - 1, n)


def test_uniform_extremes() -> None:
    y = _labels(50, 6)
    assert (draw_candidates(y, uniform_transition(6, 0.0), np.random.RandomState(0)).sum(1) == 1).all()
    assert draw_candidates(y, uniform_transition(6, 1.0), np.random.RandomState(0)).all()
    with pytest.raises(PLLZooError):
        uniform_transition(6, 1.5)


def test_superclass_table_is_a_partition() -> None:
    fine = [f for group in CIFAR100_SUPERCLASSES.values() for f in group]
    assert len(CIFAR100_SUPERCLASSES) == 20
    assert all(len(g) == 5 for g in CIFAR100_SUPERCLASSES.values())
    assert sorted(fine) == sorted(CIFAR100_FINE_NAMES) and len(set(fine)) == 100


def test_hierarchical_stays_within_superclass() -> None:
    phi, n = 0.5, 20000
    T = hierarchical_transition(phi)
    assert (T.sum(1) == 1 + 4 * phi).all()
    y = _labels(n, 100)
    Y = draw_candidates(y, T, np.random.RandomState(2))
    assert Y[np.arange(n), y].all()
    assert not (Y & (T[y] == 0)).any()  # nothing outside the superclass
    _within_binomial(Y.sum(1).mean(), 1 + 4 * phi, phi, 4, n)
    same = {(a, b) for g in CIFAR100_SUPERCLASSES.values() for a in g for b in g}
    names = CIFAR100_FINE_NAMES
    assert ("apple", "pear") in same and T[names.index("apple"), names.index("pear")] == phi
    assert T[names.index("apple"), names.index("bear")] == 0.0


def test_hierarchical_follows_names_not_order() -> None:
    order = np.random.RandomState(0).permutation(100)
    names = [CIFAR100_FINE_NAMES[i] for i in order]
    T, Tp = hierarchical_transition(0.3), hierarchical_transition(0.3, names)
    np.testing.assert_array_equal(Tp, T[np.ix_(order, order)])
    with pytest.raises(PLLZooError):
        hierarchical_transition(0.3, ["airplane"] * 100)


def test_nonuniform_matrix_and_frequencies() -> None:
    K, n = 10, 40000
    T = nonuniform_transition(K)
    for k, rate in enumerate(NONUNIFORM_RATES, start=1):
        assert np.allclose(T[np.arange(K), (np.arange(K) + k) % K], rate)
    assert np.allclose(np.diag(T), 1) and (T > 0).sum() == 6 * K
    y = _labels(n, K)
    Y, kind = generate_candidates(y, K, -1.0, np.random.RandomState(0))
    assert kind == "nonuniform"
    for k, rate in enumerate(NONUNIFORM_RATES, start=1):
        freq = Y[np.arange(n), (y + k) % K].mean()
        assert abs(freq - rate) < 5 * np.sqrt(rate * (1 - rate) / n)
    with pytest.raises(PLLZooError):
        nonuniform_transition(5)


def test_transition_matrix_dispatch() -> None:
    np.testing.assert_array_equal(transition_matrix("uniform", 4, 0.2), uniform_transition(4, 0.2))
    assert transition_matrix("hierarchical", 100, 0.2).shape == (100, 100)
    with pytest.raises(PLLZooError):
        transition_matrix("hierarchical", 10, 0.2)
    with pytest.raises(PLLZooError):
        generate_candidates(_labels(5, 100), 100, -1.0, np.random.RandomState(0), hierarchical=True)


def test_seeding() -> None:
    y = _labels(500, 10)
    a, _ = generate_candidates(y, 10, 0.5, np.random.RandomState(7))
    b, _ = generate_candidates(y, 10, 0.5, np.random.RandomState(7))
    c, _ = generate_candidates(y, 10, 0.5, np.random.RandomState(8))
    np.testing.assert_array_equal(a, b)
    assert (a != c).any()


def test_one_uniform_draw_like_the_reference() -> None:
    y = _labels(300, 10)
    np.random.seed(4)
    U = np.random.uniform(0, 1, size=(300, 10))
    expected = U < uniform_transition(10, 0.3)[y]
    np.testing.assert_array_equal(draw_candidates(y, uniform_transition(10, 0.3), np.random.RandomState(4)), expected)


def test_phi_zero_is_uniform_with_no_flips() -> None:
    """``--phi 0`` is the uniform generator with flip probability 0: one candidate per row, the true label.  Only
    phi < 0 selects the App. C.5 matrix (a mutation audit: ``phi <= 0`` there passed every other test, and would
    give phi = 0 rows of about 2.5 candidates on 10 classes).  Hierarchical phi = 0 is allowed likewise."""
    assert candidate_kind(0.0) == "uniform" and candidate_kind(-1.0) == "nonuniform"
    assert candidate_kind(0.0, hierarchical=True) == "hierarchical"
    y = _labels(200, 10)
    Y, kind = generate_candidates(y, 10, 0.0, np.random.RandomState(0))
    assert kind == "uniform"
    np.testing.assert_array_equal(Y, np.eye(10, dtype=bool)[y])  # exactly the one-hot true labels
