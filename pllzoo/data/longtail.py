"""Long-tailed subsampling of a balanced labelled set, as SoLar does it.

The SoLar code (utils/utils_data.py ``get_img_num_per_cls``, ``gen_imbalanced_data``):
class 0 is the head and class K-1 the tail; the imbalance ratio is
``gamma = n_0 / n_{K-1}``.  The per-class counts are truncated with ``int`` and the
kept examples are the first ``n_j`` of an in-place shuffle of each class's indices,
classes visited in ascending order.  Called on a ``RandomState`` seeded with the run
seed, this consumes the RNG exactly as the reference does with ``np.random``.
"""

from __future__ import annotations

from typing import Literal, Sequence

import numpy as np

from pllzoo.errors import PLLZooError

ImbType = Literal["exp", "step"]


def img_num_per_cls(n_max: float, K: int, imb: float, imb_type: ImbType = "exp") -> list[int]:
    """Return the number of examples to keep per class, head (class 0) first.

    ``exp``: ``n_j = int(n_max * (1/imb) ** (j / (K-1)))``.
    ``step``: the first ``K//2`` classes keep ``int(n_max)``, the others ``int(n_max / imb)``
    (for odd K the middle class joins the tail; the reference only handles even K).

    Like the reference, the factor is computed as ``n_max * (1/imb)``, not ``n_max / imb``,
    so truncation matches it bit for bit.
    """
    if K < 1:
        raise PLLZooError(f"the number of classes must be at least 1, got {K}")
    if not imb >= 1.0:
        raise PLLZooError(f"the imbalance ratio must be >= 1 (head/tail), got {imb}")
    factor = 1.0 / imb
    if imb_type == "exp":
        if K == 1:
            return [int(n_max)]
        return [int(n_max * (factor ** (j / (K - 1.0)))) for j in range(K)]
    if imb_type == "step":
        head = K // 2
        return [int(n_max)] * head + [int(n_max * factor)] * (K - head)
    raise PLLZooError(f"unknown imbalance type {imb_type!r}; use 'exp' or 'step'")


def shortfall(labels: np.ndarray, counts: Sequence[int]) -> tuple[int, int, int] | None:
    """The first class with fewer examples in ``labels`` than ``counts`` asks, as (class, its examples, how many
    classes are short), or None."""
    available = np.bincount(np.asarray(labels), minlength=len(counts))
    short = np.flatnonzero(available[: len(counts)] < np.asarray(counts))
    return (int(short[0]), int(available[short[0]]), int(short.size)) if short.size else None


def longtail_indices(
    labels: np.ndarray, counts: Sequence[int], rng: np.random.RandomState
) -> np.ndarray:
    """Return the indices of a long-tailed subset, concatenated class by class.

    For each class ``j`` in ascending order: take the indices with ``labels == j``,
    shuffle them in place with ``rng.shuffle`` and keep the first ``counts[j]``.
    The per-class loop is deliberate: it fixes the RNG call order of the reference.

    :param labels: int array ``[N]`` with values in ``0..len(counts)-1``.
    :param counts: examples to keep per class.
    :param rng: the run's ``RandomState``; it is advanced by one shuffle per class.
    :returns: int64 ``[sum(counts)]``.
    """
    labels = np.asarray(labels)
    short = shortfall(labels, counts)
    if short is not None:
        j, has, n_short = short
        raise PLLZooError(
            f"class {j} has {has} examples but {counts[j]} were requested "
            f"({n_short} classes short); lower the per-class maximum"
        )
    kept = []
    for j, n_j in enumerate(counts):
        idx = np.flatnonzero(labels == j)
        rng.shuffle(idx)
        kept.append(idx[:n_j])
    return np.concatenate(kept).astype(np.int64) if kept else np.zeros(0, np.int64)
