"""Candidate-set generation from a label transition matrix (SoLar code: utils/utils_data.py).

Every generator is "flip each label ``j`` into the set independently with probability
``T[y, j]``", with ``T[y, y] = 1`` so the true label is always a candidate:

* uniform:      ``T = I + phi (11^T - I)``  (SOLAR ``generate_uniform_cv_candidate_labels``);
* hierarchical: ``T[a, b] = phi`` iff ``a != b`` share a CIFAR-100 superclass (CIFAR-100-H);
* non-uniform:  ``T[i, (i+k) % K] = 0.5, 0.4, 0.3, 0.2, 0.1`` for ``k = 1..5`` (paper App. C.5),
  selected when ``phi < 0``.

Randomness is one ``rng.uniform(0, 1, size=(n, K))`` draw, ``Y = U < T[y]``: the same
single call the reference makes after the long-tail shuffles.
"""

from __future__ import annotations

from typing import Literal, Sequence

import numpy as np

from pllzoo.data.cifar100_classes import CIFAR100_FINE_NAMES, CIFAR100_SUPERCLASSES
from pllzoo.errors import PLLZooError

CandidateKind = Literal["uniform", "hierarchical", "nonuniform"]

NONUNIFORM_RATES: tuple[float, ...] = (0.5, 0.4, 0.3, 0.2, 0.1)  # paper App. C.5, k = 1..5


def _check_phi(phi: float) -> None:
    if not 0.0 <= phi <= 1.0:
        raise PLLZooError(f"partial rate phi must be in [0, 1] (or < 0 for non-uniform), got {phi}")


def uniform_transition(K: int, phi: float) -> np.ndarray:
    """Return ``T = I + phi (11^T - I)``, float64 ``[K, K]``."""
    _check_phi(phi)
    return np.eye(K) + phi * (np.ones((K, K)) - np.eye(K))


def hierarchical_transition(
    phi: float, class_names: Sequence[str] = CIFAR100_FINE_NAMES
) -> np.ndarray:
    """Return the CIFAR-100-H matrix: ``phi`` within a superclass, 1 on the diagonal, else 0.

    :param class_names: the fine label names in the copy's index order.
    """
    _check_phi(phi)
    coarse_of = {fine: c for c, group in enumerate(CIFAR100_SUPERCLASSES.values()) for fine in group}
    unknown = [name for name in class_names if name not in coarse_of]
    if unknown:
        raise PLLZooError(
            f"hierarchical candidates need CIFAR-100 fine labels; unknown names: {unknown[:3]}"
        )
    coarse = np.array([coarse_of[name] for name in class_names])
    same = coarse[:, None] == coarse[None, :]  # [K, K]
    T = np.where(same, phi, 0.0)
    np.fill_diagonal(T, 1.0)
    return T


def nonuniform_transition(K: int) -> np.ndarray:
    """Return the paper's label-dependent matrix (App. C.5); needs ``K >= 6``."""
    if K <= len(NONUNIFORM_RATES):
        raise PLLZooError(f"the non-uniform candidate matrix needs at least 6 classes, got {K}")
    T = np.eye(K)
    rows = np.arange(K)
    for k, rate in enumerate(NONUNIFORM_RATES, start=1):
        T[rows, (rows + k) % K] = rate
    return T


def candidate_kind(phi: float, hierarchical: bool = False) -> CandidateKind:
    """Return which generator a (phi, hierarchical) pair selects."""
    if hierarchical:
        if phi < 0:
            raise PLLZooError("hierarchical candidates need a partial rate phi in [0, 1]")
        return "hierarchical"
    return "nonuniform" if phi < 0 else "uniform"


def transition_matrix(
    kind: CandidateKind, K: int, phi: float, class_names: Sequence[str] | None = None
) -> np.ndarray:
    """Return the transition matrix ``T[true, candidate]`` of the given generator."""
    if kind == "uniform":
        return uniform_transition(K, phi)
    if kind == "hierarchical":
        names = CIFAR100_FINE_NAMES if class_names is None else class_names
        if len(names) != K:
            raise PLLZooError(f"hierarchical candidates need {len(names)} classes, got K={K}")
        return hierarchical_transition(phi, names)
    if kind == "nonuniform":
        return nonuniform_transition(K)
    raise PLLZooError(f"unknown candidate generator {kind!r}")


def draw_candidates(labels: np.ndarray, T: np.ndarray, rng: np.random.RandomState) -> np.ndarray:
    """Draw candidate sets: ``Y[i, j] = U[i, j] < T[y_i, j]`` with one ``(n, K)`` uniform draw.

    :param labels: int ``[n]`` true labels.
    :param T: float ``[K, K]`` transition matrix with ones on the diagonal.
    :returns: bool ``[n, K]``; the true label is always set.
    """
    labels = np.asarray(labels, dtype=np.int64)
    U = rng.uniform(0, 1, size=(labels.shape[0], T.shape[0]))  # [n, K]
    Y = U < T[labels]
    Y[np.arange(labels.shape[0]), labels] = True  # already true since U < 1; kept explicit
    return Y


def expected_set_size(T: np.ndarray, labels: np.ndarray) -> float:
    """Return ``E|S|`` averaged over the given true labels: ``mean_i sum_j T[y_i, j]``."""
    return float(T.sum(axis=1)[np.asarray(labels, dtype=np.int64)].mean())


def generate_candidates(
    labels: np.ndarray,
    K: int,
    phi: float,
    rng: np.random.RandomState,
    hierarchical: bool = False,
    class_names: Sequence[str] | None = None,
) -> tuple[np.ndarray, CandidateKind]:
    """Pick the generator from ``(phi, hierarchical)`` and draw bool ``[n, K]`` candidates."""
    kind = candidate_kind(phi, hierarchical)
    T = transition_matrix(kind, K, phi, class_names)
    return draw_candidates(labels, T, rng), kind
