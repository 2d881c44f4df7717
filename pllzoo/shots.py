"""The many / medium / few shot-grouping rule on training class counts (:mod:`pllzoo.metrics` says where it
comes from), in plain Python: ``pllzoo report`` captions its tables without importing torch (2.4 s of every
report's 4.7 s); :func:`pllzoo.metrics.shot_groups` builds a run's class masks from the same thresholds."""

from __future__ import annotations

from typing import Sequence


def thresholds(counts: Sequence[int], m: int | None = None, f: int | None = None) -> tuple[int, int, int, int]:
    """``(many_thr, few_thr, M, F)`` for training class counts ``[K]``: Many = count > many_thr, Few = count <
    few_thr, ``M = F = K // 3`` unless given; ``few_thr`` at least 1 (classes without training rows are Few)."""
    k = len(counts)
    m = k // 3 if m is None else m
    f = k // 3 if f is None else f
    s = sorted(int(c) for c in counts)
    many_thr = s[k - m - 1] if k - m - 1 >= 0 else s[-1]
    few_thr = s[f] if f < k else s[0]
    return many_thr, max(few_thr, 1), m, f


def caption(many: int, medium: int, few: int, many_thr: int, few_thr: int, m: int) -> str:
    """The rule in words, with the thresholds and each group's number of classes."""
    return (f"Many: train count > {many_thr} ({many} {'class' if many == 1 else 'classes'}), "
            f"Few: < {few_thr} ({few}), Medium: the rest ({medium}); "
            f"thresholds from sorted training counts with M = F = {m}, as in SoLar's code")


def caption_of(counts: Sequence[int]) -> str:
    """:func:`caption` of the groups of ``counts``."""
    many_thr, few_thr, m, _ = thresholds(counts)
    many, few = sum(int(c) > many_thr for c in counts), sum(int(c) < few_thr for c in counts)
    return caption(many, len(counts) - many - few, few, many_thr, few_thr, m)
