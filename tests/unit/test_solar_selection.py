"""SoLar's reliable-sample selection (pllzoo_solar.selection) against hand-computed cases (SoLar code: train.py `train_loop`)."""

from __future__ import annotations

import math
import sys
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from pllzoo import PLLState, Stage
from pllzoo.run import Batch, Step
from pllzoo_solar.selection import (
    ClasswiseSelection,
    SelectionHParams,
    classwise_quota,
    confidence_score,
    global_small_loss_mask,
    small_loss_mask,
)

# ---------------------------------------------------------------------------------------------- quota


def test_quota_by_hand():
    # K = 4, nominal B = 8, ρ = 0.5; class 2 is absent from the batch.
    pseudo = torch.tensor([0, 0, 0, 0, 0, 1, 1, 3])  # |B_j| = (5, 2, 0, 1)
    prior = torch.tensor([0.5, 0.25, 0.125, 0.125])
    # ⌈B·r·ρ⌉ = ⌈(2, 1, 0.5, 0.5)⌉ = (2, 1, 1, 1); class 2 absent → 0
    assert classwise_quota(pseudo, prior, 0.5, 8).tolist() == [2, 1, 0, 1]
    assert classwise_quota(pseudo, prior, 0.5, 8).dtype == torch.long


def test_quota_exceeding_class_size_is_clamped():
    pseudo = torch.tensor([0, 0, 0, 0, 0, 1, 1, 3])  # |B_j| = (5, 2, 0, 1)
    prior = torch.tensor([0.125, 0.5, 0.25, 0.125])
    # ⌈8·r·1⌉ = (1, 4, 2, 1) → min with |B_j| = (1, 2, 0, 1); the absent class stays 0 despite wanting 2
    assert classwise_quota(pseudo, prior, 1.0, 8).tolist() == [1, 2, 0, 1]


def test_quota_at_least_one_for_present_classes():
    # r_j = 0 (or B·r_j·ρ rounding up to 0) still selects one sample of a non-empty class (the code's max(·, 1))
    pseudo = torch.tensor([0, 0, 0, 0, 1, 1, 2])  # |B_j| = (4, 2, 1)
    prior = torch.tensor([1.0, 0.0, 0.0])
    # ⌈7·(1, 0, 0)·0.5⌉ = (4, 0, 0) → max(min(·, |B_j|), 1) = (4, 1, 1)
    assert classwise_quota(pseudo, prior, 0.5, 7).tolist() == [4, 1, 1]


def test_quota_paper_rule_without_at_least_one():
    # the paper's k_j = min(⌈B·r_j·ρ⌉, |B_j|): a present class with a zero budget selects nobody
    pseudo = torch.tensor([0, 0, 0, 0, 1, 1, 2])  # |B_j| = (4, 2, 1)
    prior = torch.tensor([1.0, 0.0, 0.0])
    assert classwise_quota(pseudo, prior, 0.5, 7, at_least_one=False).tolist() == [4, 0, 0]
    pseudo = torch.tensor([0, 0, 0, 0, 0, 1, 1, 3])
    prior = torch.tensor([0.125, 0.5, 0.25, 0.125])
    assert classwise_quota(pseudo, prior, 1.0, 8, at_least_one=False).tolist() == [1, 2, 0, 1]


def test_quota_uses_nominal_batch_size_not_rows():
    # B in the budget is the nominal batch size, whatever the number of rows in this batch
    pseudo = torch.tensor([0, 0, 0, 0, 1, 1, 1, 1])
    prior = torch.tensor([0.5, 0.5])
    assert classwise_quota(pseudo, prior, 0.25, 8).tolist() == [1, 1]  # ⌈8·0.5·0.25⌉ = 1
    assert classwise_quota(pseudo, prior, 0.25, 256).tolist() == [4, 4]  # ⌈32⌉ clamped to |B_j| = 4


# ---------------------------------------------------------------------------------------------- small loss


def test_small_loss_mask_by_hand_with_ties():
    pseudo = torch.tensor([0, 1, 0, 0, 1, 2, 0])
    loss = torch.tensor([0.5, 0.2, 0.1, 0.5, 0.3, 0.9, 0.5])
    # class 0 = {0:.5, 2:.1, 3:.5, 6:.5} → by (loss, index): 2, 0, 3, 6; class 1 = {1:.2, 4:.3}; class 2 = {5}
    mask = small_loss_mask(pseudo, loss, torch.tensor([2, 1, 1]))
    assert mask.dtype == torch.bool
    assert mask.tolist() == [True, True, True, False, False, True, False]  # tie 0/3/6: index 0 wins
    mask = small_loss_mask(pseudo, loss, torch.tensor([3, 2, 0]))
    assert mask.tolist() == [True, True, True, True, True, False, False]  # tie: 0 and 3 before 6
    mask = small_loss_mask(pseudo, loss, torch.tensor([0, 0, 0]))
    assert not mask.any()


def test_all_tied_losses_keep_batch_order():
    pseudo = torch.tensor([1, 0, 1, 0, 1, 0, 1])
    loss = torch.full((7,), 0.25)
    mask = small_loss_mask(pseudo, loss, torch.tensor([2, 2]))
    assert mask.tolist() == [True, True, True, True, False, False, False]


def test_selected_count_per_class_equals_quota():
    g = torch.Generator().manual_seed(0)
    k, b = 7, 64
    pseudo = torch.randint(0, k - 1, (b,), generator=g)  # class k-1 absent
    loss = torch.rand(b, generator=g)
    prior = torch.rand(k, generator=g)
    prior = prior / prior.sum()
    for rho in (0.05, 0.2, 0.5, 1.0):
        quota = classwise_quota(pseudo, prior, rho, b)
        mask = small_loss_mask(pseudo, loss, quota)
        assert torch.equal(torch.bincount(pseudo[mask], minlength=k), quota)
        assert quota[k - 1] == 0


def _naive_quota(pseudo: list[int], prior: np.ndarray, rho: float, b: int, k: int) -> list[int]:
    """The reference's per-class loop; B·r_j·ρ in float32 like the reference (r is a float32 tensor)."""
    out = []
    for j in range(k):
        n_j = sum(1 for y in pseudo if y == j)
        if n_j == 0:
            out.append(0)
            continue
        budget = float(np.float32(b) * np.float32(prior[j]) * np.float32(rho))
        out.append(max(min(math.ceil(budget), n_j), 1))
    return out


def _naive_mask(pseudo: list[int], loss: list[float], quota: list[int], k: int) -> list[bool]:
    """For j in 0..K-1: the quota[j] members of B_j with the smallest loss, ties by batch index."""
    keep = [False] * len(pseudo)
    for j in range(k):
        members = [i for i, y in enumerate(pseudo) if y == j]
        for i in sorted(members, key=lambda i: (loss[i], i))[: quota[j]]:
            keep[i] = True
    return keep


@pytest.mark.parametrize("seed", range(40))
def test_matches_naive_per_class_loop(seed):
    g = torch.Generator().manual_seed(1000 + seed)
    k = int(torch.randint(2, 398, (1,), generator=g))  # K up to 397
    b = int(torch.randint(1, 257, (1,), generator=g))
    # long-tailed pseudo-labels over a random subset of classes
    weights = torch.rand(k, generator=g) ** 4
    pseudo = torch.multinomial(weights, b, replacement=True, generator=g)
    # coarse losses so that ties are frequent
    loss = torch.randint(0, 6, (b,), generator=g).float() / 4
    prior = torch.rand(k, generator=g) ** 2
    prior = (prior / prior.sum()).float()
    rho = float(torch.rand((), generator=g))
    quota = classwise_quota(pseudo, prior, rho, b)
    assert quota.tolist() == _naive_quota(pseudo.tolist(), prior.numpy(), rho, b, k)
    mask = small_loss_mask(pseudo, loss, quota)
    assert mask.tolist() == _naive_mask(pseudo.tolist(), loss.tolist(), quota.tolist(), k)


def _line_events(fn, *args) -> int:
    """Python line events executed inside ``fn``'s own code object (a per-class loop would scale with K)."""
    code, count = fn.__code__, 0

    def tracer(frame, event, arg):
        nonlocal count
        if frame.f_code is code:
            if event == "line":
                count += 1
            return tracer
        return None

    old = sys.gettrace()
    sys.settrace(tracer)
    try:
        fn(*args)
    finally:
        sys.settrace(old)
    return count


def test_k397_on_b256_has_no_class_loop():
    g = torch.Generator().manual_seed(3)
    b = 256
    events = {}
    for k in (4, 397):
        pseudo = torch.randint(0, k, (b,), generator=g)
        loss = torch.rand(b, generator=g)
        prior = torch.full((k,), 1.0 / k)
        quota = classwise_quota(pseudo, prior, 0.5, b)
        mask = small_loss_mask(pseudo, loss, quota)
        assert torch.equal(torch.bincount(pseudo[mask], minlength=k), quota)
        if k == 397:  # ⌈256·ρ/397⌉ = 1 for every present class
            assert torch.equal(quota, (torch.bincount(pseudo, minlength=k) > 0).long())
        events[k] = (_line_events(classwise_quota, pseudo, prior, 0.5, b),
                     _line_events(small_loss_mask, pseudo, loss, quota))
    assert events[4] == events[397]  # the same Python work for 4 and 397 classes


# ---------------------------------------------------------------------------------------------- global, confidence


@pytest.mark.parametrize("b,rho,expected", [(10, 0.25, 3), (10, 0.5, 5), (8, 0.01, 1), (8, 1.0, 8), (6, 0.4, 3)])
def test_global_small_loss_mask_counts(b, rho, expected):
    loss = torch.randperm(b).float()
    mask = global_small_loss_mask(loss, rho)
    assert int(mask.sum()) == expected
    assert mask.tolist() == (loss < expected).tolist()  # the ⌈B·ρ⌉ smallest


def test_confidence_score_dot_and_cosine_by_hand():
    q = torch.tensor([[0.5, 0.5, 0.0], [0.0, 0.0, 1.0]])
    p = torch.tensor([[0.6, 0.2, 0.2], [0.1, 0.1, 0.8]])
    # dot: 0.5·0.6 + 0.5·0.2 = 0.4; 0.8
    torch.testing.assert_close(confidence_score(q, p, "dot"), torch.tensor([0.4, 0.8]))
    # cosine: 0.4 / (√0.5 · √0.44); 0.8 / (1 · √0.66)
    expected = torch.tensor([0.4 / (math.sqrt(0.5) * math.sqrt(0.44)), 0.8 / math.sqrt(0.66)])
    torch.testing.assert_close(confidence_score(q, p, "cosine"), expected)


# ---------------------------------------------------------------------------------------------- the component

# K = 3, nominal B = 6; one-hot targets Q, so ℓ_i = −log p_{i,ŷ_i} and e_i = p_{i,ŷ_i}
Q = torch.eye(3)[[0, 0, 0, 1, 1, 1]]
P = torch.tensor([
    [0.7, 0.2, 0.1],  # ŷ 0, ℓ 0.357, e 0.7
    [0.9, 0.05, 0.05],  # ŷ 0, ℓ 0.105, e 0.9
    [0.5, 0.3, 0.2],  # ŷ 0, ℓ 0.693, e 0.5
    [0.0005, 0.999, 0.0005],  # ŷ 1, ℓ 0.001, e 0.999
    [0.003, 0.995, 0.002],  # ŷ 1, ℓ 0.005, e 0.995
    [0.2, 0.6, 0.2],  # ŷ 1, ℓ 0.511, e 0.6
])
Y_TRUE = torch.tensor([0, 0, 1, 1, 2, 2])  # logging only
TRAIN_COUNTS = torch.tensor([30, 20, 10])  # shot groups (M = F = 1): many {0}, medium {1}, few {2}


def _run():
    return SimpleNamespace(data=SimpleNamespace(train_counts=TRAIN_COUNTS), device=torch.device("cpu"))


def _step():
    batch = Batch(index=torch.arange(6), x=torch.zeros(6, 1), candidates=torch.ones(6, 3), y_true=Y_TRUE)
    return Step(batch=batch, logits=P.log(), probs=P, forward=None, generator=None, epoch=0, stage=Stage(),
                nominal_batch_size=6, targets=Q)


def _select(epoch: int, prior=(0.5, 0.25, 0.25), **hp):
    comp = ClasswiseSelection(SelectionHParams(**{"rho_start": 0.2, "rho_end": 0.6, "warmup_epochs": 4, **hp}))
    comp.pllzoo_setup_stage(_run())
    comp.pllzoo_on_epoch_start(epoch)
    step = _step()
    mask = comp.pllzoo_select(step, PLLState({"prior": torch.tensor(prior)}))
    return comp, step, mask


def test_rho_ramp():
    comp = ClasswiseSelection(SelectionHParams(rho_start=0.2, rho_end=0.6, warmup_epochs=4))
    for epoch, rho in [(0, 0.2), (1, 0.3), (2, 0.4), (4, 0.6), (10, 0.6)]:
        comp.pllzoo_on_epoch_start(epoch)
        assert comp.rho == pytest.approx(rho)


def test_classwise_union_high_confidence_by_hand():
    # epoch 2: ρ = 0.4; quota ⌈6·(0.5, 0.25, 0.25)·0.4⌉ = (2, 1, ·), class 2 absent
    # small loss: class 0 → rows 1, 0; class 1 → row 3; high confidence (e > 0.99): rows 3, 4
    comp, step, mask = _select(epoch=2)
    assert mask.tolist() == [True, True, False, True, True, False]
    # logs: many = rows {0, 1} → 2/2, medium = rows {2, 3} → 1/2, few = rows {4, 5} → 1/2
    assert float(step.logs["selected_many"]) == pytest.approx(1.0)
    assert float(step.logs["selected_medium"]) == pytest.approx(0.5)
    assert float(step.logs["selected_few"]) == pytest.approx(0.5)
    assert float(step.logs["selected"]) == pytest.approx(4 / 6)


def test_tau_is_strict_and_configurable():
    _, _, mask = _select(epoch=2, tau=0.996)  # only row 3 (0.999) stays high-confidence
    assert mask.tolist() == [True, True, False, True, False, False]
    _, _, mask = _select(epoch=2, tau=0.999)  # e = 0.999 is not > τ
    assert mask.tolist() == [True, True, False, True, False, False]  # row 3 still small-loss in class 1
    _, _, mask = _select(epoch=2, tau=1.0)
    assert mask.tolist() == [True, True, False, True, False, False]
    # high confidence alone (no small-loss rows), where only τ decides row 3 (a review: ">=" passed the above)
    _, _, mask = _select(epoch=2, mode="confidence", tau=0.999)
    assert mask.tolist() == [False] * 6
    _, _, mask = _select(epoch=2, mode="confidence", tau=0.998)
    assert mask.tolist() == [False, False, False, True, False, False]


def test_rho_ramp_drives_the_quota():
    # epoch 0: ρ = 0.2 → quota ⌈(0.6, 0.3)⌉ = (1, 1): rows 1 and 3, plus high-confidence rows 3, 4
    _, _, mask = _select(epoch=0)
    assert mask.tolist() == [False, True, False, True, True, False]
    # epoch 4: ρ = 0.6 with prior (0.25, 0.5, 0.25) → quota ⌈(0.9, 1.8)⌉ = (1, 2): row 1; rows 3, 4
    _, _, mask = _select(epoch=4, prior=(0.25, 0.5, 0.25))
    assert mask.tolist() == [False, True, False, True, True, False]
    # the prior moves the budget: (0.75, 0.125, 0.125) at ρ = 0.6 → ⌈(2.7, 0.45)⌉ = (3, 1)
    _, _, mask = _select(epoch=4, prior=(0.75, 0.125, 0.125))
    assert mask.tolist() == [True, True, True, True, True, False]


def test_at_least_one_switch_in_the_component():
    # prior (1, 0, 0) at ρ = 0.4: budgets ⌈(2.4, 0, 0)⌉ = (3, 0, ·)
    _, _, mask = _select(epoch=2, prior=(1.0, 0.0, 0.0), tau=1.0)
    assert mask.tolist() == [True, True, True, True, False, False]  # class 1 keeps its best row (3)
    _, _, mask = _select(epoch=2, prior=(1.0, 0.0, 0.0), tau=1.0, at_least_one=False)
    assert mask.tolist() == [True, True, True, False, False, False]


def test_global_mode_by_hand():
    # ρ = 0.4 → ⌈6·0.4⌉ = 3 smallest losses overall: rows 3 (.001), 4 (.005), 1 (.105); ∪ high-confidence {3, 4}
    _, _, mask = _select(epoch=2, mode="global")
    assert mask.tolist() == [False, True, False, True, True, False]


def test_confidence_mode_dot_and_cosine():
    _, _, mask = _select(epoch=2, mode="confidence")
    assert mask.tolist() == [False, False, False, True, True, False]
    # cosine: row 1 = 0.9/√(0.81+0.0025+0.0025) = 0.9969 > 0.99 joins; row 0 = 0.7/√0.54 = 0.953 does not
    _, _, mask = _select(epoch=2, mode="confidence", confidence="cosine")
    assert mask.tolist() == [False, True, False, True, True, False]


def test_dataset_defaults_and_needs():
    assert ClasswiseSelection.dataset_defaults("cifar10lt", "image") == {"rho_end": 0.6}
    assert ClasswiseSelection.dataset_defaults("cifar100lt", "image") == {"rho_end": 0.5}
    assert ClasswiseSelection.dataset_defaults("tiny", "tabular") == {}
    assert "prior" in ClasswiseSelection.needs
