"""PiCO — Wang et al., "PiCO: Contrastive Label Disambiguation for Partial Label Learning", ICLR 2022
(official code: hbzju/PiCO, ``model.py``, ``train.py``, ``utils_loss.py``).

Algorithm (per mini-batch; q, k are L2-normalised 128-d projections of x^w and x^s):
  1. W_i ← s_i / |S_i|; prototypes μ_c ← 0; key encoder ← copy of (network + projection head)
  2. ŷ_i = argmax_j p_ij·Y_ij;  s_i = softmax(q_i · μᵀ) with the prototypes before this batch
  3. μ_ŷi ← normalise(m_p·μ_ŷi + (1 − m_p)·q_i), sample by sample in batch order (m_p = 0.99)
  4. key encoder ← 0.999·key + 0.001·query;  k = key(x^s)
  5. if epoch ≥ prot_start: W_i ← m·W_i + (1 − m)·onehot(argmax_j s_ij·Y_ij)    (before the loss)
  6. L = −mean_i Σ_j W_ij log p_ij + λ·L_cont, λ = 0.5, temperature 0.07, over [q; k; queue]:
     SupCon with positives of the same pseudo-label once epoch ≥ prot_start, MoCo InfoNCE before;
     then enqueue (k, ŷ)
  7. after each epoch: m ← 0.95 + (e/E)·(0.8 − 0.95)

Deviations:
  * no shuffle-BN (the key encoder sees the strong batch unshuffled; under torchrun use SyncBN,
    ``train.sync_bn``); ``concat_all_gather`` is ``step.dist.gather``, and the contrast set is built from
    the gathered q (with its gradient) and k, so a G-process run is the 1-process run with the global batch
    (upstream's contrast set holds the rank's own q and k and the queue); the queue is a ring buffer, so its length need not be a
    multiple of the batch size (upstream asserts it).
  * the sequential prototype update of line 3 is computed in closed form per class
    (μ ← m^n μ + (1−m)Σ_t m^(n−1−t) q_t) — identical, without a loop over samples.
    Test: tests/unit/test_pico.py::test_prototype_update_equals_sequential.
  * the key encoder and the projection head are offered through ``pllzoo_modules`` (checkpointed,
    head trained with the network); the confidence update runs inside ``pico.loss`` because it needs
    the projections computed with gradients there; ``pico.confidence`` owns W and hands W_idx to the
    other slots.
  * state: m of l.7 is not carried from one epoch to the next on the component (a resume reset it
    to 0.99, issue 12); ``pllzoo_on_epoch_start`` derives it from the epoch, with the same values.
    Everything else that changes in training is in the PLLState (W, prototypes, queue) or in the
    checkpointed modules (head, key encoder).  Test: tests/test_resume_every_method.py.
  * no consistency/mixup (the SoLar paper runs PiCO without them); PiCO's own SimAugment weak view is
    ``--hp train.weak_view=simaugment``.  The key encoder's view is PiCO's own strong view
    (``strong_view = "pico-strong"``: RandomResizedCrop((0.2, 1), to the image's size) → flip →
    RandAugment(3) → Cutout, PiCO's ``strong_transform``), not SoLar's, unless ``--hp train.strong_view``
    names another.  Only the key encoder sees it (``views = {"strong_input", ...}``), as in PiCO; runs recorded
    before ``loss.query_strong_pass`` existed also passed it through the trained network, unused but moving its
    BatchNorm statistics (an outside review: 8 BatchNorm updates in 4 steps, another test accuracy, 20–25 % more
    time an epoch); ``--hp loss.query_strong_pass=true`` is that, and their replays take it.  On tabular rows,
    which have no strong view (x^s = x), it stays on, so the recorded real-world runs keep their ids.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F

from pllzoo import Component, Method, PLLState, Run, Step, hookimpl, hp
from pllzoo.distributed import SINGLE, DistContext
from pllzoo.losses import soft_cross_entropy
from pllzoo.syncs import class_counts
from pllzoo_baselines.proden import Confidence


@dataclass(frozen=True)
class PiCOHParams:
    loss_weight: float = hp(0.5, "λ: weight of the contrastive loss", ge=0)
    temperature: float = hp(0.07, "contrastive temperature", gt=0)
    queue: int = hp(8192, "embedding queue length (any length: a ring buffer)", ge=1)
    low_dim: int = hp(128, "projection dimension", ge=1)
    moco_m: float = hp(0.999, "momentum of the key encoder", ge=0, le=1)
    proto_m: float = hp(0.99, "momentum m_p of the prototypes", ge=0, le=1)
    conf_ema_start: float = hp(0.95, "m at epoch 0 (the constructor's 0.99 applies before the first update)",
                                ge=0, le=1)
    conf_ema_end: float = hp(0.8, "m at the last epoch", ge=0, le=1)
    prot_start: int = hp(1, "epoch from which W follows the prototypes and SupCon replaces MoCo (run.sh: 1)", ge=0)
    query_strong_pass: bool = hp(False, "also pass the key's strong view through the trained network (unused; moves "
                                 "its BatchNorm statistics): runs recorded before this field", unnamed_when=True)


def prototype_update(protos: torch.Tensor, q: torch.Tensor, labels: torch.Tensor, m: float) -> torch.Tensor:
    """Sequential EMA μ_c ← m·μ_c + (1 − m)·q_i over the batch, in closed form; rows re-normalised."""
    k = protos.shape[0]
    order = torch.sort(labels, stable=True).indices
    counts = class_counts(labels, k)  # no host sync
    rank = torch.arange(labels.numel(), device=labels.device) - (torch.cumsum(counts, 0) - counts)[labels[order]]
    after = (counts[labels[order]] - 1 - rank).float()  # later samples of the same class
    contrib = torch.zeros_like(protos).index_add_(0, labels[order], (1 - m) * m ** after[:, None] * q[order])
    return F.normalize(m ** counts.float()[:, None] * protos + contrib, dim=1)


def contrastive_loss(q: torch.Tensor, k: torch.Tensor, queue: torch.Tensor, labels: torch.Tensor,
                     queue_labels: torch.Tensor, temperature: float, supervised: bool,
                     dist: DistContext = SINGLE) -> torch.Tensor:
    """SupCon over [q; k; queue] (positives share a pseudo-label, self excluded) or MoCo InfoNCE.

    Under G > 1 processes (D11) the anchors are this rank's q ``[b, d]`` and the contrast set is the global
    batch's: [q_G; k_G; queue] with q_G gathered with its gradient (:meth:`DistContext.gather_with_grad`),
    the positives from the gathered pseudo-labels and anchor i's own column g·b + i excluded; the mean over
    the local anchors, averaged by DDP, is the 1-process loss.  MoCo's InfoNCE needs only the local rows.
    """
    if not supervised:
        logits = torch.cat([(q * k).sum(1, keepdim=True), q @ queue.T], dim=1) / temperature
        return F.cross_entropy(logits, torch.zeros(q.shape[0], dtype=torch.long, device=q.device))
    labels_all = dist.gather(labels)
    feats, all_labels = torch.cat([dist.gather_with_grad(q), dist.gather(k), queue]), torch.cat(
        [labels_all, labels_all, queue_labels])
    logits = q @ feats.T / temperature  # [b, 2B + Q]
    rows, cols = torch.arange(q.shape[0], device=q.device), torch.arange(feats.shape[0], device=q.device)
    not_self = cols[None, :] != (dist.rank * q.shape[0] + rows)[:, None]  # [i, g·b + i]; no index_put_ (syncs on CUDA)
    positive = (labels[:, None] == all_labels[None, :]) & not_self
    log_prob = logits - torch.logsumexp(logits.masked_fill(~not_self, float("-inf")), dim=1, keepdim=True)
    return -((log_prob * positive).sum(1) / positive.sum(1)).mean()


class PiCOLoss(Component):
    """Classification on W plus prototype-based contrastive learning; updates W and the prototypes.

    Under G > 1 processes (D11): the prototypes are updated with the gathered q and pseudo-labels of the
    global batch in rank order and the queue takes the gathered keys, so both stay replicated and equal to the
    1-process ones; the key encoder's EMA reads the replicated network and head; the contrast set is the
    global batch's (:func:`contrastive_loss`); W is written at the batch rows (``pico.confidence``'s "rows").
    """

    distributed = True
    HParams = PiCOHParams
    needs = frozenset({"confidence"})  # W, updated in place from the prototypes (l.5)
    provides = frozenset({"pico_prototypes", "pico_queue", "pico_queue_labels", "pico_queue_ptr"})
    views = frozenset({"strong_input", "features"})  # x^s for the key encoder only (l.4), as PiCO
    strong_view = "pico-strong"  # PiCO's strong_transform for the key encoder, not SoLar's strong view
    # l.6 is a mean over the whole batch on W's rows (state.confidence), as the paper has no selection: a selection
    # in front of it would change nothing, and so is refused (`pllzoo check pico` found both undeclared)
    ignores = frozenset({"mask", "targets"})

    def __init__(self, hp: PiCOHParams | None = None) -> None:
        super().__init__(hp)
        if self.hp.query_strong_pass:  # the recorded runs' extra pass (module docstring)
            self.views = frozenset({"strong", "features"})

    @classmethod
    def dataset_defaults(cls, dataset: str, kind: str) -> dict[str, Any]:
        # tabular rows have no strong view (x^s = x): the extra pass repeats the weak batch, so the recorded
        # real-world runs keep their ids (a linear model has no BatchNorm: the same numbers either way)
        return {"query_strong_pass": True} if kind == "tabular" else {}

    @hookimpl
    def pllzoo_setup_stage(self, run: Run, state: PLLState) -> None:
        d, n = self.hp.low_dim, self.hp.queue
        state.pico_prototypes = torch.zeros(run.num_classes, d, device=run.device)  # l.1
        state.pico_queue = F.normalize(torch.randn(n, d, device=run.device), dim=0)  # upstream's dim-0 quirk
        state.pico_queue_labels = torch.full((n,), -1, dtype=torch.long, device=run.device)
        state.pico_queue_ptr = torch.zeros((), dtype=torch.long, device=run.device)
        # E of l.7: the stage's epochs (m itself is derived from the epoch, pllzoo_on_epoch_start).  The run's final
        # stage length would send m below 0 in a longer stage before it (pico+estimator=solar.prior+predict=solar.la's
        # pre-estimation: negative targets at its epoch 16; an outside review); one stage: the same E.
        self.epochs = run.stage.epochs or run.config.epochs

    @hookimpl
    def pllzoo_modules(self, run: Run) -> dict[str, torch.nn.Module]:
        f = run.model.feature_dim
        self.head = torch.nn.Sequential(torch.nn.Linear(f, f), torch.nn.ReLU(inplace=True), torch.nn.Linear(f, self.hp.low_dim))
        self.key = torch.nn.ModuleDict({"net": copy.deepcopy(run.model), "head": copy.deepcopy(self.head)})
        self.key.requires_grad_(False)
        self.query = torch.nn.ModuleDict({"net": run.model, "head": self.head})
        return {"head": self.head, "key": self.key}

    @hookimpl
    def pllzoo_on_epoch_start(self, epoch: int) -> None:
        """The epoch, and the m that upstream's after-epoch update (l.7) of epoch − 1 left (0.99 before any)."""
        self.epoch = epoch
        self.m = 0.99 if epoch == 0 else self.confidence_momentum(epoch - 1)

    def confidence_momentum(self, epoch: int) -> float:
        """m after epoch ``epoch`` (l.7): 0.95 + (e/E)·(0.8 − 0.95)."""
        return self.hp.conf_ema_start + (epoch / self.epochs) * (self.hp.conf_ema_end - self.hp.conf_ema_start)

    @hookimpl
    def pllzoo_loss(self, step: Step, state: PLLState) -> torch.Tensor:
        idx, cands, dist = step.batch.index, step.batch.candidates, step.dist
        q = F.normalize(self.head(step.features), dim=1)  # [b, d], with grad
        pseudo = (step.probs * cands).argmax(1)  # l.2
        with torch.no_grad():
            score = torch.softmax(q.detach() @ state.pico_prototypes.T, dim=1)
            pseudo_all = dist.gather(pseudo)  # [B]: the global batch in rank order (D11; SINGLE: itself)
            state.pico_prototypes = prototype_update(state.pico_prototypes, dist.gather(q.detach()), pseudo_all,
                                                     self.hp.proto_m)
            keys, queries = list(self.key.parameters()), [p.detach() for p in self.query.parameters()]
            torch._foreach_mul_(keys, self.hp.moco_m)  # l.4
            torch._foreach_add_(keys, queries, alpha=1 - self.hp.moco_m)
            k = F.normalize(self.key["head"](self.key["net"].features(step.batch.x_strong)), dim=1)
            supervised = self.epoch >= self.hp.prot_start
            if supervised:  # l.5
                onehot = torch.zeros_like(cands).scatter_(1, (score * cands).argmax(1, keepdim=True), 1.0)  # one_hot, no sync
                state.confidence[idx] = self.m * state.confidence[idx] + (1 - self.m) * onehot
        cont = contrastive_loss(q, k, state.pico_queue, pseudo, state.pico_queue_labels, self.hp.temperature,
                                supervised, dist)
        self._enqueue(state, dist.gather(k), pseudo_all)
        step.logs["contrastive"] = cont.detach()
        step.trained_targets = state.confidence[idx]  # W after l.5: what l.6 trains on (the training-label accuracy)
        return soft_cross_entropy(step.logits, step.trained_targets).mean() + self.hp.loss_weight * cont  # l.6

    @staticmethod
    def _enqueue(state: PLLState, k: torch.Tensor, labels: torch.Tensor) -> None:
        n = state.pico_queue.shape[0]
        rows = (state.pico_queue_ptr + torch.arange(k.shape[0], device=k.device)) % n
        # out of place: the contrastive loss of this step still holds the old queue for backward
        state.pico_queue = state.pico_queue.index_copy(0, rows, k)
        state.pico_queue_labels = state.pico_queue_labels.index_copy(0, rows, labels)
        state.pico_queue_ptr = (state.pico_queue_ptr + k.shape[0]) % n


@dataclass(frozen=True)
class PiCOConfidenceHParams:
    # PRODEN's field, kept with its one value so that recorded PiCO runs keep their ids: PiCO's W is never
    # re-normalised (it moves with the prototypes, in pico.loss), so "candidates" would retrain the same run
    mask: str = hp("support", "not used by PiCO (W is not re-normalised); kept for recorded runs' ids",
                   choices=("support",))


class PiCOConfidence(Confidence):
    """PiCO's W (initialised uniform on the candidates, updated by ``pico.loss``), as targets."""

    HParams = PiCOConfidenceHParams
    distributed = True  # W is written at the batch rows by pico.loss: "rows" (inherited sync)
    # W moves only in pico.loss (l.5), whose prototypes it follows: in front of another loss it would stay the uniform
    # targets under PiCO's name (an outside review: bit-identical to +label_update=pllzoo.uniform)
    needs = frozenset({"pico_prototypes"})
    reads = frozenset()  # W moves with the prototypes, never from step.label_probs: a logit offset changes nothing

    @hookimpl
    def pllzoo_post_step(self) -> None:
        """PiCO's W moves with the prototypes inside the loss, not from the softmax."""


PICO = Method(
    name="pico",
    label_update="pico.confidence",
    loss="pico.loss",
    description="PiCO: contrastive label disambiguation with class prototypes",
    citation="Wang et al., ICLR 2022",
)
