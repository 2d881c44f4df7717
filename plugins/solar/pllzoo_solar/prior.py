"""SoLar's class-prior estimation and its two training stages (paper Alg. 1, Eq. 4; SoLar code: train.py `Trainer.train`, the prior estimation).

Algorithm (``solar.prior``, slot ``estimator``):
  1. r ← 1/K (uniform; or Cand-Est r_j ∝ Σ_i 1[j ∈ S_i]; or the oracle training prior;
     or Cand-MLE, ours, below)
  2. stage 1, pre-estimation: ``est_epochs`` epochs, updating r with γ1
  3. stage 2: model, optimizer and all other state re-initialised; only r carries over; γ2
  4. after every epoch: z_j = (1/N)·#{i : argmax_j p_ij·Y_ij = j}, with p from an eval-mode pass
     over the training set (test transform)
  5. r ← γ·z + (1−γ)·r    (γ is the weight of the *new* estimate, as the code; the paper's Eq. 4
     writes it the other way round, a paper ↔ code difference)

Deviations:
  * ``mode="online"`` counts argmax(p⊙Y) of the weak-view training predictions during the epoch
    instead of the extra pass: the paper's SUN397 mode (App. C), which the released code never
    implemented. Ours. Test: tests/unit/test_solar_prior.py::test_online_counts_batches.
  * The released SUN397 loader leaks true labels into the estimation pass (SoLar code: utils/sun397.py, ``MySUN397``'s ``est=True`` dataset); not reproduced.
  * ``init="cand-mle"`` (ours) starts from the maximum-likelihood prior of the candidate sets alone
    (:func:`candidate_mle`).  Why: with a weak network the argmax votes z over-weight the tail
    (a head image mis-ranked within its candidates votes for a tail class, and Sinkhorn then trains
    on labels that follow r), so on the CPU tier SoLar's prior ends at TV 0.17; and the paper's
    Cand-Est r_j ∝ Σ_i 1[j ∈ S_i] is shrunk towards uniform (E[c_j]/N = φ + (1−φ)·π_j under
    uniform flipping; TV 0.45 there).  Under the assumption SoLar already makes when it masks
    p by Y — P(S | x, y) is the same for every y ∈ S — the likelihood of the sets is
    Π_i Σ_{j∈S_i} π_j, whose maximiser is consistent; on the CPU tier it is at TV 0.027 before
    any training.  It needs no network and no true label.  Tests:
    tests/unit/test_solar_prior.py::test_candidate_mle_*; benchmark: benchmarks/cifar10lt-cpu/.
  * ``init="oracle"`` keeps the oracle prior fixed (γ = 0), our reading of "trains from the real
    class prior". Test: tests/unit/test_solar_prior.py::test_oracle_is_fixed.

Under torchrun (G > 1, ``docs/distributed.md``): the prior is ``"replicated"``.  Offline votes come from the
evaluation pass over the whole training set that every rank makes with its identical replica (no
collective; the votes are the same integers on every rank); online votes of each step are counted on
the rank's slice and all-reduced (K integer-valued counts, exact), so ``prior_votes`` stays equal on every
rank.  Both stages run under DDP: the final stage re-initialises the network from the same seed on every
rank (DDP broadcasts rank 0's weights anyway) and carries only r.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from pllzoo import Component, PLLState, Run, Stage, Step, hookimpl, hp
from pllzoo.syncs import class_counts
from pllzoo_solar import defaults


@dataclass(frozen=True)
class PriorHParams:
    est_epochs: int = hp(20, "epochs of the pre-estimation stage (0: none); README: 100 on CIFAR-10, 20 else", ge=0)
    gamma1: float = hp(0.1, "moving-average weight of the new estimate in pre-estimation (CIFAR-100: 0.05)", ge=0, le=1)
    gamma2: float = hp(0.01, "moving-average weight of the new estimate in the final stage", ge=0, le=1)
    init: str = hp("uniform", "initial prior", choices=("uniform", "candidates", "cand-mle", "oracle"))
    mode: str = hp("offline", "offline: extra eval pass per epoch (code); online: count during the epoch (ours)",
                   choices=("offline", "online"))


VOTE_ROWS = 8192
"""Rows per block of the epoch-end vote (an outside review: the whole-set product held ~3 copies of an [N, K]
table, 611 MB more at N = 50,000, K = 1,000); the counts are the same integers whatever the blocks."""


def count_argmax(probs: torch.Tensor, candidates: torch.Tensor) -> torch.Tensor:
    """Votes ``[K]``: how many rows have each class as argmax of ``probs ⊙ candidates``."""
    return class_counts((probs * candidates).argmax(dim=1), probs.shape[1]).float()  # no sync (online mode: per step)


def moving_average(prior: torch.Tensor, estimate: torch.Tensor, gamma: float) -> torch.Tensor:
    """``γ·z + (1−γ)·r`` (Alg. 1 l. 5, the code's direction)."""
    return gamma * estimate + (1.0 - gamma) * prior


def candidate_mle(candidates: torch.Tensor, tol: float = 1e-8, max_iter: int = 5000) -> torch.Tensor:
    """Maximum-likelihood class prior ``[K]`` from the candidate sets alone (ours).

    Model: P(S_i) = Σ_{j∈S_i} π_j · P(S_i | y = j), with P(S | y) equal for every y ∈ S (uniform
    flipping and the superclass-wise flipping of CIFAR-100-H satisfy it; the label-dependent matrix
    of ``--phi < 0`` and real-world sets need not), so the log-likelihood is
    Σ_i log Σ_{j∈S_i} π_j up to a constant.  EM for the mixture weights: the E-step gives each row
    the posterior w_ij ∝ π_j·1[j ∈ S_i], the M-step sets π to their mean.  Identical rows are
    merged first (at most 2^K − 1 patterns), so one iteration costs O(#patterns · K); where that
    is large (many classes: few rows are then identical) the iteration runs on the patterns'
    candidates alone, O(nnz), the same update in another summation order (an outside review: at
    K = 200, 50,000 rows, 0.5 s an iteration over ~800 iterations; :data:`SPARSE_EM_ENTRIES`).  Stops
    when an update changes π by less than ``tol`` in L1, or after ``max_iter`` iterations; float64
    inside, float32 out.
    """
    patterns, counts = torch.unique(candidates.to(torch.uint8), dim=0, return_counts=True)
    weight = counts.double() / counts.sum()
    k = candidates.shape[1]
    pi = torch.full((k,), 1.0 / k, dtype=torch.float64, device=candidates.device)
    if patterns.numel() > SPARSE_EM_ENTRIES:
        rows, cols = patterns.nonzero(as_tuple=True)

        def update(pi: torch.Tensor) -> torch.Tensor:
            mass = torch.zeros_like(weight).index_add_(0, rows, pi[cols])  # [P] Σ_{j∈S_i} π_j
            share = weight / mass.clamp_min(1e-30)  # [P]
            return pi * torch.zeros_like(pi).index_add_(0, cols, share[rows])
    else:
        dense = patterns.double()

        def update(pi: torch.Tensor) -> torch.Tensor:
            post = dense * pi
            return weight @ (post / post.sum(1, keepdim=True).clamp_min(1e-30))
    for _ in range(max_iter):
        new = update(pi)
        done = float((new - pi).abs().sum()) < tol
        pi = new
        if done:
            break
    return pi.float()


SPARSE_EM_ENTRIES = 2**22
"""Above this many pattern entries (#patterns · K) :func:`candidate_mle` iterates over candidates only."""


def initial_prior(init: str, candidates: torch.Tensor, true_counts: torch.Tensor) -> torch.Tensor:
    """Uniform, Cand-Est (r_j ∝ #rows with j as candidate), Cand-MLE (:func:`candidate_mle`) or
    the oracle training prior, ``[K]``."""
    k = candidates.shape[1]
    if init == "uniform":
        return torch.full((k,), 1.0 / k, device=candidates.device)
    if init == "cand-mle":
        return candidate_mle(candidates)
    counts = candidates.float().sum(0) if init == "candidates" else true_counts.float().to(candidates.device)
    return counts / counts.sum()


class PriorEstimator(Component):
    """Estimates the class prior r between epochs and plans SoLar's two stages."""

    HParams = PriorHParams
    provides = frozenset({"prior", "prior_votes"})
    # G > 1: "replicated" — offline votes from the evaluation pass every rank makes over the whole training set
    # with identical replicas (no collective); online votes all-reduced per step (K integer counts)
    distributed = True

    @classmethod
    def dataset_defaults(cls, dataset: str, kind: str) -> dict[str, Any]:
        return defaults.for_dataset("prior", dataset)

    @hookimpl
    def pllzoo_stages(self, run: Run) -> list[Stage]:
        oracle = self.hp.init == "oracle"
        final = Stage("train", carry=("prior",), params={"gamma": 0.0 if oracle else self.hp.gamma2})
        if self.hp.est_epochs <= 0 or oracle:
            return [final]
        return [Stage("pre-estimation", epochs=self.hp.est_epochs, params={"gamma": self.hp.gamma1}), final]

    @hookimpl
    def pllzoo_setup_stage(self, run: Run, state: PLLState) -> None:
        if "prior" not in state:  # Alg. 1 l. 1; later stages carry it
            state.prior = initial_prior(self.hp.init, run.candidates, run.data.train_counts)
        state.prior_votes = torch.zeros(run.num_classes, device=run.device)
        self._true = (run.data.train_counts.float() / run.num_train).to(run.device)  # logging only

    @hookimpl
    def pllzoo_post_step(self, step: Step, state: PLLState) -> None:
        if self.hp.mode == "online":  # G > 1: the votes of the global batch (the ranks' counts summed, exact)
            state.prior_votes += step.dist.all_reduce_sum(count_argmax(step.probs, step.batch.candidates))

    @hookimpl
    def pllzoo_on_epoch_end(self, run: Run, state: PLLState) -> dict[str, Any]:
        if self.hp.mode == "offline":  # Alg. 1 l. 4
            probs = run.predict_train()  # [N, K]; the masked product by row blocks, not two more [N, K] copies
            votes = sum(count_argmax(p, c.float())
                        for p, c in zip(probs.split(VOTE_ROWS), run.candidates.split(VOTE_ROWS)))
        else:
            votes, state.prior_votes = state.prior_votes, torch.zeros_like(state.prior_votes)
        z = votes / votes.sum().clamp_min(1.0)
        state.prior = moving_average(state.prior, z, run.stage.params.get("gamma", self.hp.gamma2))
        return {
            "prior_tv": 0.5 * float((state.prior - self._true).abs().sum()),
            "prior": [round(float(v), 6) for v in state.prior],
        }
