"""HTC — Jia, Peng, Wang & Zhang, "Long-Tailed Partial Label Learning by Head Classifier and Tail
Classifier Cooperation", AAAI 2024 (official code: pruirui/HTC-LTPLL, ``train.py`` ``train_loop``,
``get_loss``, ``get_high_confidence``; ``resnet.py`` ``DHNet_Atten``; ``utils/utils_loss.py``).

One backbone f, two linear classifiers on its features: the head classifier z^H (the network's own
head) and the tail classifier z^T (``loss.tail``), fused by a weighting module A (``loss.attention``).
W ∈ R^{N×K} holds the confidences; t = W[idx] are the batch's stored targets.

  1. W ← Y/|S|                                                                  → ``htc.confidence``
  each epoch e (lin(e, n) = min(e/n, 1)):                                            → ``htc.loss``
  2. η_e = η·lin(e, 50), α_e = α_s + (α_end − α_s)·lin(e, 50), ω_e = 0.5·lin(e, E);
     π^H = W.sum(0)/W.sum() (once per epoch), π^T = 1/K
  each batch (weak view x^w, strong view x^s):                                       → ``htc.loss``
  3. head: L_H = get_loss(z^H_w, z^H_s, u = t, π^H)
  4. tail: ỹ = softmax(z^H_w − τ·log π^H) (detached, not masked by Y);
           L_T = get_loss(z^T_w, z^T_s, u = ỹ, π^T)
  5. fusion: p^F = ens(z^H_w, z^T_w, π^H), both detached; L_F = −mean_i Σ_j t_ij log(p^F_ij + 1e−8)
  6. L = L_H + L_T + ω_e·L_F; SGD step on f, both classifiers and A
  7. W[idx] ← (1 − μ)·W[idx] + μ·normalise(softmax(z^T_w) ⊙ Y), pre-step z^T_w, μ = 0.6
                                                                               → ``htc.confidence``
  8. predict argmax ens(z^H, z^T, π_now), π_now = W.sum(0)/W.sum()                 → ``htc.ensemble``

  get_loss(z_w, z_s, u, π):  ℓ_i = CE(z_w,i, u_i);  L_pseu = mean_i CE(z_w,i, t_i)  (stored W, both heads);
    R = per class j = argmax u_i, the k_j = max(min(⌈B·π_j·α_e⌉, |B_j|), 1) smallest ℓ_i;
    e < 1 or R = ∅: L_pseu;  else η_e·(L_mix + L_cr) + L_pseu with L_cr = mean_{i∈R} CE(z_s,i, u_i) and
    L_mix = CE(z(l·x^w_R + (1−l)·x^w_R[σ]), l·u_R + (1−l)·u_R[σ]), l = max(l', 1−l'), l' ~ Beta(4, 4),
    σ a permutation of R, z the branch's own classifier on an extra train-mode forward pass
    (four forwards per step)
  ens(z^H, z^T, π):  q1 = softmax(z^H − log(π + 1e−5)), q2 = softmax(z^T), a = softmax(leaky_relu(A[q1; q2])),
    (w1, w2) = a/‖a‖₂, output softmax(w1·q1 + w2·q2)                                       (:func:`ensemble`)

Hook mapping: the selection slot is ``pllzoo.all``: each head selects its own rows with its own targets
and prior inside the loss (the shared :mod:`pllzoo.selection` routine), which one mask cannot express.
The tail classifier and A are the loss's extra modules (``pllzoo_modules``): in the network's SGD
optimizer (same LR and weight decay, as the code's single optimizer) and checkpointed; the predictor
reads them from ``run.modules``.  The loss hands the pre-step z^T_w to the post-step update through
``step.scratch["htc_tail_logits"]``.

Host synchronisation: none in epoch 0; from epoch 1 one read per step, |R| of both heads together (each
mixup pass runs the network on exactly the R mixed rows: its shape, BatchNorm's statistics and the
number of draws for σ depend on |R|).  Selection and the update of W read nothing.

Deviations:
  * Shot groups: pllzoo reports Many/Medium/Few in its own grouping (CIFAR-10: 3/4/3 classes); HTC's
    code uses 4/3/3 for CIFAR-10 (33/34/33 for CIFAR-100, as pllzoo).
    Test: tests/unit/test_htc.py::test_shot_split_is_pllzoos_not_htcs
  * Step 7 divides by the masked sum (``pllzoo.losses.normalize_masked``); a row whose candidates'
    probabilities all underflow is the softmax over the candidates of the logits instead (the same
    weights exactly; seen on Italian, where it summed to 0.9975 before); the code divides unguarded
    (0/0 = NaN).
    Test: tests/unit/test_htc.py::test_post_step_moves_w_towards_the_pre_step_tail_prediction
  * Step 4 takes log π^H of π^H clamped at 1e-12 (the code: log π^H, so a class without any candidate
    mass would give −∞ and NaN targets); identical otherwise.  Such a class is no sample's label, and the
    clamp gives it e^z/1e-24: all of ỹ, in every row.  Italian has 11 labels that are no candidate of any
    training row, so there the tail branch trains towards them all run; ``loss.zero_prior=exclude`` leaves
    them out of ỹ instead (the same bits where every class has candidate mass).  Measured in
    benchmarks/realworld/README.md ("HTC's classes of prior 0").  Test: ::test_tail_target_by_hand
  * The ensemble that predicts (l.8) leaves the classes of prior 0 out (``predict.zero_prior=exclude``, the
    default): the code's log(π + 1e-5) gives such a class +11.5 nats of head input, against 1–2 for the others,
    so it took most predictions although it is no training sample's label (Italian: 11 of 90 labels; FG-NET
    and one Lost split: 1–2).  Where every class has candidate mass the prediction is the same bits; the code
    itself cannot train on such data (its tail target is NaN, step 4).  Measured against ``adjust`` (the code's
    formula) on the affected real-world sets: benchmarks/realworld/README.md ("HTC's classes of prior 0").
    The fusion term L_F, which trains A, keeps the code's formula.  A class whose estimated prior is small but not 0
    (a label that is no training sample's but some rows' candidate: Lost's uniform split has two) keeps the code's
    formula too and gets several nats (−log(π + 1e-5) ≈ 6.8 at π ≈ 1e-3): an outside review found HTC on Lost
    predicting them for most test rows after 3 epochs (all of them at 2–3 epochs, seed 1) and a quarter after 30.
    Only a prior of exactly 0 is left out.
    Test: tests/unit/test_htc.py::test_ensemble_with_a_class_of_prior_zero_by_hand
  * A branch with one selected row skips L_mix.  The code mixes that row with itself, i.e. adds
    η·CE(f(x_i), u_i) from a forward of one row, whose BatchNorm statistics are that one sample's (and
    BatchNorm1d, pllzoo's MLP, refuses one row in train mode).  |R| is at least the number of distinct
    pseudo-labels in the batch, so this happens only in degenerate batches.
    Test: ::test_one_selected_row_skips_mixup
  * The post-step update reads softmax(z^T_w) through ``step.label_probs_of``: the code's softmax, or,
    in a recipe with a logit offset (``+estimator=records.prior``), its debiased form.
  * Randomness: l from the run's host generator (NumPy's Beta), σ from the on-device generator
    (:mod:`pllzoo.mixup`); the code uses the global NumPy and torch streams.  Ties of ℓ keep batch
    order (stable sort; tests/unit/test_solar_selection.py), the code's sort is unstable.
  * Evaluation: the record is the final model's (or pllzoo's model selection), not the best test-set
    ensemble checkpoint; head-only and tail-only accuracies: ``--hp predict.output=head|tail``.
  * On tabular data the "strong" view is the un-augmented input; HTC is published for images only.

Under torchrun (G > 1, D10): W rows synchronised (``"rows"``), so π^H (from the replicated W) is the same
on every rank; each head's R is selected over the global batch (ℓ and argmax u gathered, budgets from the
global B, the shared :mod:`pllzoo.selection` routines; the rank keeps its slice), so |R_G| and the
"epoch 0 / R = ∅" and "|R| = 1" branches are the same on every rank; L_cr and L_mix are means over R_G
(local G·Σ_{R_loc}/|R_G|, D5); L_mix mixes over the global R (weak images and u gathered, one l and one σ
on every rank: :mod:`pllzoo.mixup`); the tail classifier and A get rank 0's initial values and their
gradients averaged over ranks (:mod:`pllzoo.ddp`).  The mixup passes run on every rank, on its share of
R (possibly no row).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch
import torch.nn.functional as F

from pllzoo import Component, Method, PLLState, PLLZooError, Run, Step, hookimpl, hp
from pllzoo.ddp import rank_slice
from pllzoo.distributed import SINGLE, DistContext
from pllzoo.losses import masked_mean, normalize_masked, normalize_rows, soft_cross_entropy
from pllzoo.mixup import draw_mixup
from pllzoo.selection import classwise_quota, small_loss_mask

BranchLogits = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]  # (logits, features) -> a branch's logits


def lin(epoch: int, n: int) -> float:
    """min(e/n, 1), the code's ``linear_rampup``; 1 when n = 0."""
    return 1.0 if n <= 0 else min(epoch / n, 1.0)


def ensemble(attention: torch.nn.Module, z_head: torch.Tensor, z_tail: torch.Tensor, prior: torch.Tensor,
             eps: float = 1e-5, zero_prior: str = "adjust") -> torch.Tensor:
    """ens(z^H, z^T, π) → probabilities ``[B, K]`` (``DHNet_Atten.ensemble``).

    A class of prior π_j = 0 (no candidate mass in any training row: no sample's label) gets −log ε ≈ +11.5
    nats in the head's input under the code's formula (``zero_prior="adjust"``), against −log π_j ≈ 1–2 for
    the others, so the ensemble predicts it for most rows.  ``"exclude"`` leaves such classes out of both
    inputs (probability 0 in q1 and q2, so never the argmax); with no such class the two are the same bits."""
    z_head = z_head - torch.log(prior + eps)  # head logit-adjusted by π
    if zero_prior == "exclude":
        absent = prior <= 0  # [K]
        z_head, z_tail = z_head.masked_fill(absent, float("-inf")), z_tail.masked_fill(absent, float("-inf"))
    q1 = torch.softmax(z_head, dim=1)  # [B, K]
    q2 = torch.softmax(z_tail, dim=1)  # [B, K]
    a = torch.softmax(F.leaky_relu(attention(torch.cat([q1, q2], dim=1))), dim=1)  # [B, 2]
    w = F.normalize(a, p=2, dim=1)  # (w1, w2) with w1² + w2² = 1
    return torch.softmax(w[:, :1] * q1 + w[:, 1:] * q2, dim=1)


def tail_target(z_head: torch.Tensor, prior: torch.Tensor, tau: float, zero_prior: str = "clamp") -> torch.Tensor:
    """ỹ = softmax(z^H − τ·log π^H), detached, over all K classes (Alg. l.4).

    A class of head prior π^H_j = 0 has no candidate mass in any row (W's update is masked by Y), so it is no
    sample's label; the formula gives it +∞ (the code: NaN targets).  ``zero_prior="clamp"`` takes π^H clamped at
    1e-12, which puts (almost) all of ỹ on those classes; ``"exclude"`` leaves them out of the softmax.  With no
    such class the two are the same bits."""
    z = z_head.detach().float() - tau * torch.log(prior.clamp_min(1e-12))
    if zero_prior == "exclude":
        z = z.masked_fill(prior <= 0, float("-inf"))
    return torch.softmax(z, dim=1)


def fusion_loss(targets: torch.Tensor, p_fused: torch.Tensor) -> torch.Tensor:
    """L_F = −mean_i Σ_j t_ij log(p^F_ij + 1e−8) (Alg. l.5; a log of probabilities, as the code)."""
    return -(targets * torch.log(p_fused + 1e-8)).sum(1).mean()


def select(z_w: torch.Tensor, u: torch.Tensor, prior: torch.Tensor, alpha: float, batch_size: int,
           dist: DistContext = SINGLE) -> torch.Tensor:
    """R of get_loss: per class j = argmax u_i, the k_j smallest ℓ_i = CE(z_w,i, u_i) → bool ``[B]``.

    Over the *global* batch (D4): under G > 1 each rank's ℓ and argmax ``[b]`` are gathered, and every rank
    computes the same global mask ``[B]`` (``batch_size`` = the global B); its slice is the rank's R.
    """
    pseudo = dist.gather(u.argmax(1))  # [B]
    loss = dist.gather(soft_cross_entropy(z_w.detach(), u))  # ℓ, [B]
    quota = classwise_quota(pseudo, prior, alpha, batch_size)  # k_j = max(min(⌈B π_j α⌉, |B_j|), 1)
    return small_loss_mask(pseudo, loss, quota)


def mixup_term(step: Step, rows: torch.Tensor, n_rows: int, u: torch.Tensor, mixup_alpha: float,
               logits_of: BranchLogits) -> torch.Tensor:
    """L_mix over the ``n_rows`` selected weak images (of the global batch): one extra train-mode forward pass.

    l = max(l', 1 − l'), l' ~ Beta(α, α), σ a permutation of R (:func:`pllzoo.mixup.draw_mixup`: under G > 1
    the same l and σ on every rank, the weak images and u of the batch gathered, each rank mixing its share
    of R and scaling its sum by G/|R_G|, D5/D7).
    """
    m = draw_mixup(step, mixup_alpha, rows, n_rows)
    x, a = m.take(step.batch.x), m.take(u)  # [|R|, ...]
    logits, feats = step.forward_with_features(m.mix(x))
    a_own, a_partner = m.pair(a)
    return m.mean(soft_cross_entropy(logits_of(logits, feats), m.lam * a_own + (1 - m.lam) * a_partner))


def branch_loss(step: Step, z_w: torch.Tensor, z_s: torch.Tensor, u: torch.Tensor, rows: torch.Tensor,
                n_rows: int | None, eta: float, mixup_alpha: float, logits_of: BranchLogits) -> torch.Tensor:
    """get_loss of one branch given its selection ``rows`` (``n_rows`` = |R|; None: the first epoch).

    Under G > 1 ``rows`` is this rank's slice of the global R and ``n_rows`` = |R_G|, so the branches taken
    are the same on every rank; the means over R are the global ones (D5), L_pseu a full-batch mean.
    """
    pseu = soft_cross_entropy(z_w, step.targets).mean()  # L_pseu on the stored W
    if not n_rows:  # e < 1, or R = ∅
        return pseu
    cr = masked_mean(soft_cross_entropy(z_s, u), rows, step.dist)  # L_cr, strong view
    mix = mixup_term(step, rows, n_rows, u, mixup_alpha, logits_of) if n_rows > 1 else 0.0
    return eta * (mix + cr) + pseu


# ---------------------------------------------------------------------- label update
@dataclass(frozen=True)
class ConfidenceHParams:
    mu: float = hp(0.6, "μ: W ← (1 − μ)·W + μ·(tail prediction on Y) after each step (code: mu=0.6, fixed)",
                   ge=0, le=1)


class HTCConfidence(Component):
    """W: the stored targets of both heads, moved towards the tail's pre-step prediction (l.1, l.7)."""

    HParams = ConfidenceHParams
    provides = frozenset({"confidence"})
    needs = frozenset({"htc_tail_logits"})  # z^T_w of this step, from htc.loss
    reads = frozenset({"logit_offset"})  # l.7 through step.label_probs_of: debiased by a logit offset
    distributed = True
    sync = {"confidence": "rows"}  # l.7 writes the batch rows only

    @hookimpl
    def pllzoo_setup_stage(self, run: Run, state: PLLState) -> None:
        state.confidence = normalize_rows(run.candidates.float())  # l.1, [N, K]

    @hookimpl
    def pllzoo_label_update(self, step: Step, state: PLLState) -> torch.Tensor:
        return state.confidence[step.batch.index]  # t, [B, K]

    @hookimpl
    def pllzoo_post_step(self, step: Step, state: PLLState) -> None:
        idx, mu = step.batch.index, self.hp.mu
        z_tail = step.scratch["htc_tail_logits"]
        tail = normalize_masked(step.label_probs_of(z_tail), step.batch.candidates, step.label_log_probs_of(z_tail))
        state.confidence[idx] = (1 - mu) * state.confidence[idx] + mu * tail  # l.7


# ---------------------------------------------------------------------- loss
@dataclass(frozen=True)
class HTCLossHParams:
    eta: float = hp(0.9, "η: final weight of the selected-sample terms L_mix + L_cr (code: --eta)", ge=0)
    ramp_epochs: int = hp(50, "epochs of the linear η and α ramps (code: --e)", ge=0)
    alpha_start: float = hp(0.2, "α at epoch 0: selection ratio of the class-wise budget (code: --alpha_range)",
                            ge=0, le=1)
    alpha_end: float = hp(0.6, "α after the ramp (code: --alpha_range 0.2,0.6)", ge=0, le=1)
    tau: float = hp(2.0, "τ of the tail target softmax(z^H − τ·log π^H) (code: --t)", ge=0)
    mixup_alpha: float = hp(4.0, "Beta(α, α) of the mixup coefficient", gt=0)
    fusion_weight: float = hp(0.5, "final weight ω of the fusion loss, ramped over all epochs", ge=0)
    weight_eps: float = hp(1e-5, "ε in log(π^H + ε) of the ensemble's head input (> 0: a class of prior 0 "
                                 "would give NaN)", gt=0)
    zero_prior: str = hp("clamp", "classes of head prior 0 (no sample's candidate) in the tail target: clamp "
                         "(π^H at 1e-12: they take the target's mass) | exclude (left out; the code: NaN)",
                         choices=("clamp", "exclude"), unnamed_when="clamp")


class HTCLoss(Component):
    """L_H + L_T + ω_e·L_F: head, tail and fusion terms (l.2–6); owns the tail classifier and A."""

    HParams = HTCLossHParams
    needs = frozenset({"confidence"})
    provides = frozenset({"htc_tail_logits"})  # step.scratch: the pre-step z^T_w for l.7
    ignores = frozenset({"mask"})  # R, its own class-wise small-loss selection (l.3), not the selection slot's
    views = frozenset({"strong", "features"})
    distributed = True  # R over the global batch (D4), subset means scaled (D5), global mixup (D7); modules: pllzoo.ddp

    @hookimpl
    def pllzoo_modules(self, run: Run) -> dict[str, torch.nn.Module]:
        f, k = run.model.feature_dim, run.num_classes
        self.tail = torch.nn.Linear(f, k)  # fc_tail
        self.attention = torch.nn.Linear(2 * k, 2)  # A
        return {"tail": self.tail, "attention": self.attention}

    @hookimpl
    def pllzoo_on_epoch_start(self, run: Run, epoch: int, state: PLLState) -> None:
        r = lin(epoch, self.hp.ramp_epochs)  # l.2
        self.epoch, self.eta = epoch, self.hp.eta * r
        self.alpha = self.hp.alpha_start + (self.hp.alpha_end - self.hp.alpha_start) * r
        self.omega = self.hp.fusion_weight * lin(epoch, run.config.epochs)
        w = state.confidence
        self.prior_head = w.sum(0) / w.sum()  # π^H, [K]
        self.prior_tail = torch.full_like(self.prior_head, 1.0 / run.num_classes)  # π^T

    @hookimpl
    def pllzoo_loss(self, step: Step, state: PLLState) -> torch.Tensor:
        t, z_hw, z_hs = step.targets, step.logits, step.logits_strong
        z_tw, z_ts = self.tail(step.features), self.tail(step.features_strong)  # [B, K]
        step.scratch["htc_tail_logits"] = z_tw.detach()
        y_tail = tail_target(z_hw, self.prior_head, self.hp.tau, self.hp.zero_prior)  # l.4
        batch = step.batch.size * step.dist.world  # B: the global batch's size (code: X_w.shape[0])
        rows_h = select(z_hw, t, self.prior_head, self.alpha, batch, step.dist)  # [B], the same on every rank
        rows_t = select(z_tw, y_tail, self.prior_tail, self.alpha, batch, step.dist)
        counts = [None, None]
        if self.epoch >= 1:  # the step's one host read: |R| of both heads (see the module docstring)
            counts = torch.stack([rows_h.sum(), rows_t.sum()]).tolist()
        beta = self.hp.mixup_alpha
        mine_h, mine_t = rank_slice(rows_h, step.dist), rank_slice(rows_t, step.dist)  # this rank's rows [b]
        loss_h = branch_loss(step, z_hw, z_hs, t, mine_h, counts[0], self.eta, beta, lambda z, _: z)  # l.3
        loss_t = branch_loss(step, z_tw, z_ts, y_tail, mine_t, counts[1], self.eta, beta,
                             lambda _, feats: self.tail(feats))  # l.4
        p_fused = ensemble(self.attention, z_hw.detach(), z_tw.detach(), self.prior_head, self.hp.weight_eps)
        fusion = fusion_loss(t, p_fused)  # l.5: only A gets gradients
        step.logs.update({
            "loss_head": loss_h.detach(), "loss_tail": loss_t.detach(), "loss_fusion": fusion.detach(),
            "selected_head": rows_h.float().mean(), "selected_tail": rows_t.float().mean(),
            "eta": self.eta, "alpha": self.alpha, "omega": self.omega,
        })
        return loss_h + loss_t + self.omega * fusion  # l.6


# ---------------------------------------------------------------------- prediction
@dataclass(frozen=True)
class EnsembleHParams:
    output: str = hp("ensemble", "what predicts: the ensemble (HTC), or the head or tail classifier alone",
                     choices=("ensemble", "head", "tail"))
    weight_eps: float = hp(1e-5, "ε in log(π_now + ε) of the ensemble's head input (as loss.weight_eps)", gt=0)
    zero_prior: str = hp("exclude", "classes of prior 0 (no training row's candidate: no sample's label) in the "
                         "ensemble: exclude (left out of both inputs, never predicted) | adjust (the code's "
                         "log(π + ε): +11.5 nats, they take most predictions)", choices=("exclude", "adjust"),
                         unnamed_when="exclude")


class HTCEnsemble(Component):
    """argmax ens(z^H, z^T, π_now) with the loss's tail classifier and A (l.8)."""

    HParams = EnsembleHParams
    needs = frozenset({"confidence"})
    views = frozenset({"features"})
    distributed = True  # the replicated W and modules: the same prediction on every rank
    MODULES = ("loss.tail", "loss.attention")

    def __init__(self, hp: EnsembleHParams | None = None) -> None:
        super().__init__(hp)
        if self.hp.output != "head":  # the ensemble and the tail need the tail classifier and A that htc.loss
            # trains (run.modules): needing htc.loss's own key refuses a recipe without it before training
            self.needs = frozenset({"confidence", "htc_tail_logits"})

    @hookimpl
    def pllzoo_setup_stage(self, run: Run) -> None:
        self.run = run  # run.modules is filled after setup (pllzoo_modules): read it when needed

    def _modules(self) -> tuple[torch.nn.Module | None, torch.nn.Module | None]:
        """(tail classifier, A) from ``run.modules``; (None, None) for the head alone."""
        if self.hp.output == "head":
            return None, None
        missing = [m for m in self.MODULES if m not in self.run.modules]
        if missing:
            raise PLLZooError(
                f"htc.ensemble predicts with the tail classifier and the weighting module that htc.loss trains, "
                f"but this run has no {', '.join(missing)} "
                f"(its modules: {', '.join(sorted(self.run.modules)) or 'none'}); use loss=htc.loss, or "
                "--hp predict.output=head")
        return self.run.modules["loss.tail"], self.run.modules["loss.attention"]

    @hookimpl
    def pllzoo_predict(self, logits: torch.Tensor, state: PLLState, features: torch.Tensor | None) -> torch.Tensor:
        tail, attention = self._modules()
        if self.hp.output == "head":
            return logits
        z_tail = tail(features.to(tail.weight.dtype)).float()  # [M, K]
        if self.hp.output == "tail":
            return z_tail
        w = state.confidence
        p = ensemble(attention, logits, z_tail, w.sum(0) / w.sum(), self.hp.weight_eps, self.hp.zero_prior)  # π_now
        return torch.log(p)  # [M, K], finite: a softmax of values in [0, √2]


HTC = Method(
    name="htc",
    label_update="htc.confidence",
    selection="pllzoo.all",
    loss="htc.loss",
    predict="htc.ensemble",
    description="HTC: head and tail classifiers on one backbone, fused by a learned weighting",
    citation="Jia et al., AAAI 2024",
)
