"""Many/medium/few grouping (SoLar code: train.py `test`, utils/utils_algo.py `AccurracyShot`) and group accuracies by hand."""

from __future__ import annotations

import pytest
import torch

from pllzoo.metrics import evaluate, label_accuracy, label_tally, shot_groups

C10_G100 = torch.tensor([5000, 2997, 1796, 1077, 645, 387, 232, 139, 83, 50])


def test_cifar10_lt_groups_match_the_reference_thresholds():
    g = shot_groups(C10_G100)
    assert (g.many_thr, g.few_thr) == (1077, 232)
    assert g.many.nonzero().flatten().tolist() == [0, 1, 2]
    assert g.medium.nonzero().flatten().tolist() == [3, 4, 5, 6]
    assert g.few.nonzero().flatten().tolist() == [7, 8, 9]


def test_cifar100_lt_groups_are_33_34_33():
    counts = torch.tensor([int(500 * (1 / 20) ** (j / 99)) for j in range(100)])
    g = shot_groups(counts)
    assert (int(g.many.sum()), int(g.medium.sum()), int(g.few.sum())) == (33, 34, 33)
    assert g.many[:33].all() and g.few[67:].all()


def test_step_profile_ties_put_everything_in_medium():
    g = shot_groups(torch.tensor([500] * 5 + [5] * 5))
    assert bool(g.medium.all()) and not g.many.any() and not g.few.any()


def test_group_accuracy_is_mean_of_class_accuracies():
    g = shot_groups(torch.tensor([100, 50, 10]), m=1, f=1)  # many {0}, medium {1}, few {2}
    y = torch.tensor([0, 0, 0, 0, 1, 1, 2])
    pred = torch.tensor([0, 0, 0, 1, 1, 0, 1])
    out = evaluate(pred, y, g)
    assert out["acc_all"] == pytest.approx(100 * 4 / 7)
    assert (out["acc_many"], out["acc_medium"], out["acc_few"]) == (75.0, 50.0, 0.0)
    assert out["class_acc"] == [75.0, 50.0, 0.0]


def test_class_without_test_samples_is_left_out():
    g = shot_groups(torch.tensor([100, 50, 10]), m=1, f=1)
    out = evaluate(torch.tensor([0, 1]), torch.tensor([0, 1]), g)
    assert out["class_acc"][2] is None and out["acc_few"] is None


def test_label_tally_and_accuracy_by_hand():
    """Targets' largest weight against the true labels, per true class; a tie of m classes counts 1/m (row 2:
    0.5 for class 1, where argmax would give 0)."""
    targets = torch.tensor([[0.7, 0.2, 0.1], [0.1, 0.8, 0.1], [0.5, 0.5, 0.0], [0.0, 0.4, 0.6]])
    y = torch.tensor([0, 0, 1, 2])
    tally = label_tally(targets, y, 3)
    assert tally.dtype == torch.float32 and tally.tolist() == [[1, 0.5, 1], [2, 1, 1]]
    groups = shot_groups(torch.tensor([5, 3, 1]), m=1, f=1)  # Many {0}, Medium {1}, Few {2}
    assert label_accuracy(tally, groups) == {"label_acc": 62.5, "label_acc_many": 50.0, "label_acc_medium": 50.0,
                                             "label_acc_few": 100.0}
    # summed over steps; a class with no row so far is left out of its group (None when the group has no other)
    two = label_tally(targets[:2], y[:2], 3) + label_tally(targets[2:3], y[2:3], 3)
    assert label_accuracy(two, groups) == {"label_acc": 50.0, "label_acc_many": 50.0, "label_acc_medium": 50.0,
                                           "label_acc_few": None}
    uniform = torch.tensor([[1 / 3, 1 / 3, 0, 1 / 3], [0.5, 0, 0, 0.5]])  # no disambiguation yet: 1/|S| a row
    assert label_tally(uniform, torch.tensor([3, 3]), 4)[0].tolist() == pytest.approx([0, 0, 0, 1 / 3 + 1 / 2])


def test_few_holds_the_untrained_classes_when_more_than_f_have_no_rows():
    """The module's one departure: with more than F classes without training rows the reference's few_thr is 0 and
    Few empty; here it is at least 1, so Few holds them (K = 9, F = 3, four classes of 0 rows)."""
    groups = shot_groups(torch.tensor([0, 0, 0, 0, 5, 5, 10, 10, 10]))
    assert groups.few_thr == 1 and groups.few.tolist() == [True] * 4 + [False] * 5


@pytest.mark.parametrize("counts", [[5000, 2997, 1796, 1077, 645, 387, 232, 139, 83, 50], [500] * 5 + [5] * 5,
                                    [0, 0, 0, 0, 5, 5, 10, 10, 10], [7], [3, 1]])
def test_the_report_caption_is_the_run_groups_caption_without_torch(counts):
    """``pllzoo report`` captions with :mod:`pllzoo.shots` alone (no torch): the same words and numbers as a run's
    :func:`shot_groups` (CIFAR-10-LT γ = 100: Many > 1077 (3 classes), Few < 232 (3), Medium 4)."""
    from pllzoo import shots

    assert shots.caption_of(counts) == shot_groups(torch.tensor(counts)).caption
    if len(counts) == 10 and counts[0] == 5000:
        assert shots.caption_of(counts).startswith("Many: train count > 1077 (3 classes), Few: < 232 (3), "
                                                   "Medium: the rest (4)")
