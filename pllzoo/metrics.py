"""Accuracy overall, per class, and per many/medium/few shot group.

Shot groups follow the SoLar code (train.py `test`, utils/utils_algo.py `AccurracyShot`): sort the *training* class
counts ascending into ``s``; ``many_thr = s[K - M - 1]``, ``few_thr = s[F]``;
Many = counts > many_thr, Few = counts < few_thr, Medium = the rest, with
``M = F = K // 3`` (3/3 on CIFAR-10, 33/33 on CIFAR-100, 66 on CUB, 132 on SUN —
the reference's values).  A group's accuracy is the mean of its classes'
accuracies; classes without test samples are left out; an empty group gives None
(the reference prints 0, which reads as a real accuracy).

Training labels (:func:`label_tally`, :func:`label_accuracy`): how often the label update's targets (or those
the loss says it trained on, ``step.trained_targets``: PiCO's W after its loss's update) put their largest weight
on the hidden true label (a tie counting its share), over every row of the epoch's batches, a selection's
unselected rows too, as SoLar's release counts them (``train.drop_last`` leaves a last partial batch out),
overall and per shot group (the release of SoLar logs it as its pseudo-labels' accuracy, ``acc_sink``;
long-tailed PLL is about classic methods disambiguating towards the head, which this shows on the training set
itself).

One departure: when more than F classes have no training rows (a ``--subset`` smoke run, more
classes than rows), the reference's ``few_thr`` is 0, Few is empty ("Few: < 0 (0)") and the
untrained classes fall into Medium; here ``few_thr`` is at least 1, so Few holds them.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from pllzoo import shots


@dataclass(frozen=True)
class ShotGroups:
    many: torch.Tensor  # bool [K]
    medium: torch.Tensor  # bool [K]
    few: torch.Tensor  # bool [K]
    many_thr: int
    few_thr: int
    m: int
    f: int

    @property
    def caption(self) -> str:
        return shots.caption(int(self.many.sum()), int(self.medium.sum()), int(self.few.sum()), self.many_thr,
                             self.few_thr, self.m)


def shot_groups(train_counts: torch.Tensor, m: int | None = None, f: int | None = None) -> ShotGroups:
    """Many/medium/few class masks from training class counts ``[K]``."""
    counts = train_counts.long().cpu()
    many_thr, few_thr, m, f = shots.thresholds(counts.tolist(), m, f)  # few_thr ≥ 1: see the module doc
    many = counts > many_thr
    few = counts < few_thr
    return ShotGroups(many, ~(many | few), few, many_thr, few_thr, m, f)


def class_accuracy(pred: torch.Tensor, target: torch.Tensor, num_classes: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-class accuracy in % (NaN where a class has no test sample) and test counts ``[K]``."""
    target = target.long().cpu()
    correct = torch.bincount(target[pred.cpu() == target], minlength=num_classes).double()
    total = torch.bincount(target, minlength=num_classes).double()
    acc = torch.where(total > 0, 100.0 * correct / total.clamp_min(1), torch.full_like(total, float("nan")))
    return acc, total.long()


def _group_mean(acc: torch.Tensor, mask: torch.Tensor) -> float | None:
    vals = acc[mask & ~torch.isnan(acc)]
    return float(vals.mean()) if vals.numel() else None


def evaluate(pred: torch.Tensor, target: torch.Tensor, groups: ShotGroups) -> dict[str, object]:
    """``acc_all`` (top-1 over all test samples), ``acc_many/medium/few``, ``class_acc``."""
    k = groups.many.numel()
    acc, _ = class_accuracy(pred, target, k)
    return {
        "acc_all": float(100.0 * (pred.cpu() == target.cpu()).double().mean()),
        "acc_many": _group_mean(acc, groups.many),
        "acc_medium": _group_mean(acc, groups.medium),
        "acc_few": _group_mean(acc, groups.few),
        "class_acc": [None if torch.isnan(a) else round(float(a), 4) for a in acc],
    }


def covering_rate(pred: torch.Tensor, candidates: torch.Tensor) -> float:
    """% of rows whose predicted label is one of their candidates (PLENCH's model-selection score).

    Needs only partial labels, so it can rank epochs on held-out *training* rows.
    """
    hit = candidates.bool().gather(1, pred.long().view(-1, 1)).squeeze(1)  # [V]
    return float(100.0 * hit.double().mean())


def approximated_accuracy(logits: torch.Tensor, candidates: torch.Tensor) -> float:
    """PLENCH's approximated accuracy (``val_approximated_accuracy``, lib/misc.py) of ``logits [V, K]`` on rows
    with candidate sets ``candidates [V, K]``, in %; needs no true label.

    With p_i = softmax(z_i), c_i = p_i ⊙ Y_i / (Σ_j p_ij Y_ij + 1e-12) and ŷ_i = argmax_j z_ij over all K
    classes: AA = 100 · (1/V) Σ_i (1 − Σ_{j ≠ ŷ_i} c_ij).  A prediction outside S_i scores 0, one inside
    scores the model's own confidence in it renormalised over S_i.  PLENCH's quirk is kept: a row whose
    candidate probabilities all underflow (c_i = 0) scores 1.  Softmax and c in float32 like the reference;
    the sum over rows in float64.
    """
    z = logits.float()
    y = candidates.to(z.dtype)
    conf = torch.softmax(z, dim=1) * y  # [V, K]
    conf = conf / (conf.sum(dim=1, keepdim=True) + 1e-12)
    risk = torch.ones_like(conf)
    risk.scatter_(1, z.argmax(dim=1, keepdim=True), 0.0)  # 1 off the prediction, 0 on it
    per_row = 1.0 - (risk * conf).sum(dim=1)  # [V]
    return float(100.0 * per_row.double().mean())


def label_tally(targets: torch.Tensor, y_true: torch.Tensor, num_classes: int,
                out: torch.Tensor | None = None) -> torch.Tensor:
    """``float32 [2, K]`` on ``targets``' device: per true class, the rows whose target ``[B, K]`` is largest at
    their true label ``y_true [B]`` (row 0), a row whose largest weight is shared by m classes counting 1/m
    (SoLar's code takes ``argmax``, the lowest index: an outside review saw the uniform targets of a first epoch
    scored by class order, the head first), and the rows (row 1); added into ``out`` when given (the trainer's
    epoch tally: no new [2, K] a step).  No host read.

    It runs every training step, so it is kept to a dozen small ops (an outside review measured the earlier
    one-hot form at 8–14 % of a CPU epoch of PRODEN on ``lost``); row 0 sums the same [B, K] values over the
    batch as that form did (bit for bit), row 1 counts rows (integers, exact in any order)."""
    y = y_true.long().view(-1, 1)
    top = targets == targets.amax(dim=1, keepdim=True)  # [B, K] the classes of each row's largest weight
    hit = top.gather(1, y) / top.sum(1, keepdim=True)  # [B, 1] in [0, 1]
    if out is None:
        out = torch.zeros(2, num_classes, device=targets.device)
    out[0] += torch.zeros_like(targets, dtype=torch.float32).scatter_(1, y, hit.float()).sum(0)
    out[1].index_add_(0, y.view(-1), torch.ones_like(hit.view(-1), dtype=torch.float32))
    return out


def label_accuracy(tally: torch.Tensor, groups: ShotGroups) -> dict[str, float | None]:
    """``label_acc`` (% of the tallied rows, :func:`label_tally`) and ``label_acc_many/medium/few`` (the mean of
    the group's classes' accuracies, classes without rows left out, as :func:`evaluate`'s groups)."""
    hits, rows = tally.double().cpu()
    acc = torch.where(rows > 0, 100.0 * hits / rows.clamp_min(1), torch.full_like(rows, float("nan")))
    return {"label_acc": float(100.0 * hits.sum() / rows.sum()) if rows.sum() > 0 else None,
            "label_acc_many": _group_mean(acc, groups.many), "label_acc_medium": _group_mean(acc, groups.medium),
            "label_acc_few": _group_mean(acc, groups.few)}
