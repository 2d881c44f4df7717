"""VALEN — Xu et al., "Instance-Dependent Partial Label Learning", NeurIPS 2021 (official code:
palm-ml/valen, valen-conference/main.py, utils/utils_loss.py, utils_graph.py, models/VGAE.py).
x: flattened input, Y: candidates, z = f(x): the net's logits, p = softmax(z).

Algorithm:
  0. warm-up (``warm_up`` epochs), PRODEN: o ← Y/|S|; L = −Σ o log p; o ← row-norm(1[o>0] ⊙ p)  → ``valen.targets``
  1. A = D⁻¹(A_kNN + I) on the warmed net's features (train mode), k = ``knn``, self excluded  → ``knn_adjacency``;
     d ← o; enc ← copy of the net; dec: K → dim x → dim x                                    → ``make_decoder``
  2. a = enc(x); s = softmax(a) ⊙ 1[o>0] / sg(Σ ·) + 0.01; d̃ ~ Dir(s), reparameterised        → ``concentration``
  3. L_d = −Σ o log softmax(a);  L_KL = KL(Dir(α̂) ‖ Dir(1)), α̂ = clamp(exp(a/4), 0.01, 30)  → ``dirichlet_kl_uniform``
  4. L_rec = 0.01·MSE(dec(d̃), x) + 0.01·BCE-logits(d̃, Y) + MSE(softmax(σ(d̃ d̃ᵀ)), A[B, B]) → ``graph_decode``
  5. L_o = −Σ d log p;  L = α L_rec + β L_KL + γ L_d + θ L_o; one SGD step over net, enc, dec → ``valen.loss``
  6. after the step: d ← correct·row-norm(1[o>0] ⊙ d̃) + (1−correct)·o;  o ← row-norm(1[d>0] ⊙ p) (pre-step p)
Defaults: random partial labels, README benchmark-random CIFAR-10 (γ 10, β 0.1, correct 1, enc from the net's
initial weights); tabular: the README real-world commands (γ 20, β 0.01, L_x without the 0.01, graph on the input;
Soccer Player and Yahoo! News: correct 0.2, as their commands).  Not followed there: main.py trains those two by
another loop (train_realworld2: full-batch Adam, the 0.01 on L_x); pllzoo trains them as the other real-world sets.

Deviations (tests in tests/unit/test_valen.py):
  * SoLar protocol (``cr``, ``mixup``; off on tabular, which is then the conference code): the θ term is the
    protocol's loss with targets d (weak + strong view + mixup), the warm-up's likewise with o; steps 2–4 use
    the weak view only (main_aug.py also sums L_d over enc's views). Ours. Test: test_image_run_with_protocol.
  * enc and dec read the weak view, not an un-augmented x (the batch has none; equal on tabular). Same test.
  * A is sparse, built on the device in row blocks (cdist + topk: ties by topk order, not argmin's first), not
    cached on disk (the code's cache is keyed by dataset name only), and kept in the state, so a resumed run
    equals an uninterrupted one. Tests: test_knn_adjacency_by_hand, test_resume_equals_uninterrupted.
  * d̃ comes from torch's sampler seeded from the run's generator, not the global RNG.
    Test: test_concentration_and_dirichlet_draw_follows_generator.
  * Step 6's row-norms are guarded (``pllzoo.losses.normalize_masked``, as PRODEN's update): where every kept
    p (or d̃) underflows to 0 the code's row becomes 0 for good (1[o>0] is then empty) and the sample drops out
    of L_o and L_d; here it is the softmax over the kept labels of log p (d̃: uniform over the kept labels).
    The p read is ``step.label_probs`` (RECORDS' debiased p with ``estimator=records.prior``, p itself
    otherwise).  Ours. Test: test_step6_rows_stay_distributions.
  * Step 6 keeps d̃ on 1[o>0]; the code keeps it on 1[new_d>0] (``revised_target``): o's support less the labels
    on which enc's float32 softmax is exactly 0 (a logit gap above ~100), so such a label leaves d, and then o,
    for good.  Here it stays: an underflow is not evidence against a label.  Rows with some kept label, and
    any row with a kept mass a normal float, are otherwise the code's, bit for bit.  Ours (an outside review
    found the difference). Paired runs, benchmarks/valen-forms/ (``code-mask``): the same accuracy on
    synthetic-lt and Lost; on MSRCv2 the code's mask empties a row (NaN targets) in every seed.
  * L_d with log-softmax, not log(softmax + 1e-12): the same values and gradients while every weighted p_j is
    well above 1e-12 (float32: the two agree to the last bits above ~1e-5).  Below, the code's term saturates
    near −log 1e-12 ≈ 27.6 with a vanishing gradient, so a row whose o sits where enc gives ~0 stops pulling
    enc; here it keeps pulling at full strength.  Ours (no log of a softmax anywhere in pllzoo; an outside
    review found the difference). Paired runs, benchmarks/valen-forms/ (``code-ld``): the code's form is 1.9 ±
    1.4 points of All lower on synthetic-lt (every seed), even on MSRCv2, the same runs on Lost.
  * Step 2's s: the code's s / sg(Σ s) bit for bit while Σ s (enc's kept mass) is a normal float; below it (the
    code: 0/0, a NaN concentration) the same ratio from log-probabilities (``concentration``).  Ours. Test:
    test_concentration_is_the_codes_until_the_kept_mass_underflows.
  * α̂ = exp(clamp(a/4, ln 0.01, ln 30)): the code's hardtanh(exp(a/4)) in value and gradient, no overflow.
    Test: test_alpha_hat_and_kl_closed_form.
  * The trainer's SGD and LR schedule, the warm-up included (the code: constant LR; old main.py: Adam on CIFAR).
  * Testing in eval mode, as every method here: the released code never calls ``.eval()``, so its test pass
    normalises BatchNorm with each test batch's own statistics (transductive) and never uses the running
    ones; on a linear or BatchNorm-free network the two are equal.  The graph's feature pass runs in train mode
    as the code's does, in batches of ``train.eval_batch_size`` rows in index order (the code: its training
    loader's batches), so with BatchNorm its batch statistics, and the kNN graph, differ slightly.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from pllzoo import Method, PLLState, Run, Stage, Step, hookimpl, hp
from pllzoo.distributed import SINGLE, DistContext
from pllzoo.losses import masked_mean, normalize_masked, soft_cross_entropy
from pllzoo.seeding import derive_seed
from pllzoo.syncs import host_side
from pllzoo_baselines.proden import Confidence, ConfidenceHParams, ProdenLoss
from pllzoo_baselines.protocol import ProtocolHParams


def knn_adjacency(feats: torch.Tensor, k: int) -> torch.Tensor:
    """A = D⁻¹(A_kNN + I), sparse ``[N, N]``, directed as the code: row i holds i and its k nearest, 1/(k+1) each."""
    n = feats.shape[0]
    k = min(k, n - 1)
    rows = torch.arange(n, device=feats.device)
    block, nbrs = max(1, 2**24 // n), []  # ≤ 2^24 distances (64 MB) at a time
    for i in range(0, n, block):
        dist = torch.cdist(feats[i : i + block], feats)  # [b, N]
        r = rows[i : i + block]
        dist[r - i, r] = float("inf")  # self excluded from the k
        nbrs.append(dist.topk(k, dim=1, largest=False).indices)  # [b, k]
    cols = torch.cat([rows[:, None], torch.cat(nbrs)], dim=1)  # [N, k+1]: self loop first
    index = torch.stack([rows.repeat_interleave(k + 1), cols.reshape(-1)])  # [2, N(k+1)]
    values = torch.full((n * (k + 1),), 1.0 / (k + 1), device=feats.device)  # every degree is k+1
    return torch.sparse_coo_tensor(index, values, (n, n), check_invariants=True).coalesce()


def adjacency_block(adj: torch.Tensor, idx: torch.Tensor, cols: torch.Tensor | None = None) -> torch.Tensor:
    """The batch sub-block A[idx][:, cols] (``cols`` = ``idx`` by default), densified at ``[B, B]`` only.

    Under G > 1 processes ``idx`` is the rank's slice and ``cols`` the global batch's indices: ``[b, B]``.

    Host syncs: two per step on CUDA (each sparse ``index_select`` sizes its output from the data); the
    sync-free alternative, a dense [N, N] adjacency, does not fit memory at CIFAR scale.
    Test: tests/test_sync_free.py."""
    return adj.index_select(0, idx).index_select(1, idx if cols is None else cols).to_dense()


def concentration(a: torch.Tensor, keep: torch.Tensor) -> torch.Tensor:
    """Dirichlet concentration ``[B, K]`` (l.2): softmax(a) on ``keep``, over its detached sum, + 0.01.

    The code's ``s / s.sum().detach()`` bit for bit wherever the kept mass Σ is a normal float (≥ 2⁻¹²⁶ in
    float32); below it (every kept softmax entry underflowed: the code's ratio is then 0/0, or denormal/denormal)
    the same ratio from log-probabilities, exp(log p − sg(logsumexp_kept log p)): the same value and gradient, as
    d(p_j/sg(Σ)) = (p_j/Σ)·d log p_j.  ``keep`` has a 1 in every row (o's support is never empty)."""
    s = torch.softmax(a, dim=1) * keep
    total = s.sum(1, keepdim=True).detach()  # [B, 1]
    tiny = torch.finfo(s.dtype).tiny
    log_p = torch.log_softmax(a, dim=1).masked_fill(keep == 0, -math.inf)
    exact = (log_p - torch.logsumexp(log_p, dim=1, keepdim=True).detach()).exp()  # finite: keep is never empty
    return torch.where(total >= tiny, s / total.clamp_min(tiny), exact) + 0.01  # rsample needs s > 0


def dirichlet_rsample(s: torch.Tensor, generator: torch.Generator, dist: DistContext = SINGLE) -> torch.Tensor:
    """d̃ ~ Dir(s) ``[B, K]``, reparameterised; torch's sampler reads the global RNG: seeded from ``generator``.

    Under G > 1 processes ``s`` is the rank's slice ``[b, K]``: every rank draws the global batch's d̃ from the
    gathered s (its own rows with their gradient, the others' detached) with the same seed, and keeps its rows —
    the 1-process draw (the sampler's draws depend on the whole tensor); row i of d̃ depends on s_i only, so
    no gradient needs to cross ranks.
    """
    if dist.active:
        b, g = s.shape[0], dist.rank
        s_all = dist.gather(s.detach())
        d_all = dirichlet_rsample(torch.cat([s_all[: g * b], s, s_all[(g + 1) * b :]]), generator)
        return d_all[g * b : (g + 1) * b]
    with host_side():  # a CPU generator's draw
        seed = int(torch.randint(2**62, (1,), generator=generator))
    with torch.random.fork_rng(devices=[s.device] if s.device.type == "cuda" else []):
        torch.manual_seed(seed)
        return torch.distributions.Dirichlet(s, validate_args=False).rsample()  # s > 0 by construction; checking syncs


def alpha_hat(a: torch.Tensor) -> torch.Tensor:
    """α̂ = clamp(exp(a/4), 0.01, 30) ``[B, K]`` (l.3), clamped before exp: same values and gradients."""
    return torch.exp(torch.clamp(a / 4, math.log(0.01), math.log(30.0)))


def dirichlet_kl_uniform(alpha: torch.Tensor) -> torch.Tensor:
    """KL(Dir(α) ‖ Dir(1, …, 1)) per row ``[B]`` (l.3, closed form)."""
    a0 = alpha.sum(1)  # [B]
    return (torch.lgamma(a0) - torch.lgamma(alpha).sum(1) - math.lgamma(alpha.shape[1])
            + ((alpha - 1) * (torch.digamma(alpha) - torch.digamma(a0)[:, None])).sum(1))


def graph_decode(d: torch.Tensor, d_all: torch.Tensor | None = None) -> torch.Tensor:
    """Â = row-softmax(σ(d̃ d̃ᵀ)) ``[B, B]`` (l.4); under G > 1 processes the rank's rows against the global batch's
    d̃ (``d_all``, gathered with its gradient): ``[b, B]``."""
    return torch.softmax(torch.sigmoid(d @ (d if d_all is None else d_all).T), dim=1)


def make_decoder(k: int, dim: int, generator: torch.Generator) -> nn.Sequential:
    """dec: K → dim → dim (Linear, ReLU, Linear), xavier-normal weights, biases 0.01 (VGAE.py)."""
    dec = nn.Sequential(nn.Linear(k, dim), nn.ReLU(), nn.Linear(dim, dim))
    for layer in (dec[0], dec[2]):
        nn.init.xavier_normal_(layer.weight, generator=generator)
        nn.init.constant_(layer.bias, 0.01)
    return dec


def _warm(stage: Stage) -> bool:
    return bool(stage.params.get("warmup", False))


@dataclass(frozen=True)
class TargetsHParams(ConfidenceHParams):
    correct: float = hp(1.0, "d ← correct·d̃ + (1−correct)·o: 1 for random partial labels, 0.2 instance-dependent",
                        ge=0, le=1)


class Targets(Confidence):
    """o (PRODEN's table ``state.confidence``, warmed up by PRODEN) and d (``state.valen_d``), the targets."""

    distributed = True  # both tables are written at the batch rows (l.0, l.6)
    sync = {"confidence": "rows", "valen_d": "rows"}
    HParams = TargetsHParams
    needs = frozenset({"valen_dirichlet"})
    provides = frozenset({"confidence", "valen_d"})

    @classmethod
    def dataset_defaults(cls, dataset: str, kind: str) -> dict[str, Any]:
        # the README's Soccer Player (spd) and Yahoo! News (LYN) commands add --correct 0.2 (outside reviews); no
        # recorded run has either set
        correct = {"correct": 0.2} if dataset in ("soccer", "yahoo") else {}
        return {**super().dataset_defaults(dataset, kind), **correct}

    @hookimpl
    def pllzoo_setup_stage(self, run: Run, state: PLLState) -> None:
        if _warm(run.stage) or "confidence" not in state:  # no warm-up, or a resume (checkpoint loads over it)
            super().pllzoo_setup_stage(run, state)  # l.0: o ← Y/|S|
        if not _warm(run.stage):
            state.valen_d = state.confidence.clone()  # l.1: d ← o

    @hookimpl
    def pllzoo_label_update(self, step: Step, state: PLLState) -> torch.Tensor:
        if _warm(step.stage):
            return super().pllzoo_label_update(step, state)  # o
        return state.valen_d[step.batch.index]  # d, the targets of L_o (l.5)

    @hookimpl
    def pllzoo_post_step(self, step: Step, state: PLLState) -> None:
        if _warm(step.stage):
            return super().pllzoo_post_step(step, state)  # PRODEN's update of o (l.0)
        idx, cands = step.batch.index, step.batch.candidates
        o, d = state.confidence[idx], state.valen_d[idx]  # [B, K] before the update
        dirichlet = step.scratch["valen_dirichlet"]
        tiny = torch.finfo(dirichlet.dtype).tiny  # a row whose kept draws all underflow: uniform over the kept
        d_new = normalize_masked(dirichlet, self._keep(o, cands), dirichlet.clamp_min(tiny).log())  # l.6
        state.valen_d[idx] = self.hp.correct * d_new + (1 - self.hp.correct) * o
        state.confidence[idx] = normalize_masked(step.label_probs, self._keep(d, cands),  # pre-step p, old d
                                                 step.label_log_probs_of(step.logits))


@dataclass(frozen=True)
class VALENHParams(ProtocolHParams):
    warm_up: int = hp(10, "PRODEN warm-up epochs before the graph is built (args.py)", ge=0)
    knn: int = hp(3, "k of the kNN graph", ge=1)
    graph: str = hp("features", "kNN on the warmed net's features (benchmark) or the raw input (real-world)",
                    choices=("features", "input"))
    enc_init: str = hp("initial", "enc starts from the net's initial weights (random partial labels) or the warmed "
                       "net (the code's instance-dependent cifar10/kmnist path)", choices=("initial", "warmed"))
    alpha: float = hp(1.0, "α: weight of L_rec", ge=0)
    beta: float = hp(0.1, "β: weight of L_KL (README; args.py default 1)", ge=0)
    gamma: float = hp(10.0, "γ: weight of L_d (README CIFAR-10; args.py default 1; real-world 20)", ge=0)
    theta: float = hp(1.0, "θ: weight of L_o", ge=0)
    rec_x: float = hp(0.01, "weight of the input reconstruction in L_rec (benchmark 0.01; real-world 1)", ge=0)


class VALENLoss(ProdenLoss):
    """PRODEN's loss in the warm-up; α L_rec + β L_KL + γ L_d + θ L_o after it.  Plans the two stages.

    Under G > 1 processes: the kNN graph A is built on every rank over the whole training set from identical
    inputs (replicated); d̃ is the 1-process draw of the global batch (:func:`dirichlet_rsample`); the graph term
    compares the rank's rows of Â, against the global batch's d̃ gathered with its gradient, with A[idx, idx_G]
    (a mean over b×B entries, which DDP averages to the B×B mean); enc and dec are extra modules (averaged).
    """

    distributed = True
    HParams = VALENHParams
    needs = frozenset({"confidence"})
    provides = frozenset({"valen_dirichlet", "valen_adj"})

    @classmethod
    def dataset_defaults(cls, dataset: str, kind: str) -> dict[str, Any]:
        tabular = {"gamma": 20.0, "beta": 0.01, "rec_x": 1.0, "graph": "input"} if kind == "tabular" else {}
        return {**super().dataset_defaults(dataset, kind), **tabular}

    @hookimpl
    def pllzoo_stages(self, run: Run) -> list[Stage]:
        train = Stage("train", carry=("confidence",), reinit_model=False)  # the net keeps its warmed weights
        warm_up = Stage("warm-up", epochs=self.hp.warm_up, params={"warmup": True})
        return [warm_up, train] if self.hp.warm_up > 0 else [train]

    @hookimpl
    def pllzoo_setup_stage(self, run: Run, state: PLLState) -> None:
        if _warm(run.stage):
            self.initial = copy.deepcopy(run.model.state_dict())  # enc's start for random partial labels
            return
        x = run.data.x_train
        raw = self.hp.graph == "input"
        feats = x.to(run.device).flatten(1).float() if raw else run.embed_train(train_mode=True)  # [N, F]
        state.valen_adj = knn_adjacency(feats, self.hp.knn)  # l.1
        self.enc = copy.deepcopy(run.model).train()
        if self.hp.enc_init == "initial" and getattr(self, "initial", None) is not None:  # None: resume, no warm-up
            self.enc.load_state_dict(self.initial)
        gen = torch.Generator().manual_seed(derive_seed(run.seed, "valen.dec"))
        self.dec = make_decoder(run.num_classes, math.prod(x.shape[1:]), gen)
        self.amp = run.config.amp and run.device.type == "cuda"  # enc under the trainer's autocast

    @hookimpl
    def pllzoo_modules(self, run: Run) -> dict[str, nn.Module] | None:
        return None if _warm(run.stage) else {"enc": self.enc, "dec": self.dec}

    @hookimpl
    def pllzoo_loss(self, step: Step, state: PLLState) -> torch.Tensor:
        l_o = super().pllzoo_loss(step, state)  # −Σ t log p (+ protocol): t = o in the warm-up, d after (l.5)
        if _warm(step.stage):
            return l_o
        x, cands, idx = step.batch.x, step.batch.candidates, step.batch.index
        o = state.confidence[idx]  # [B, K]
        with torch.autocast(x.device.type, dtype=torch.bfloat16, enabled=self.amp):
            a = self.enc(x).float()  # l.2: [B, K]
        dist = step.dist
        d = dirichlet_rsample(concentration(a, (o > 0).float()), step.generator, dist)  # l.2: [B, K]
        step.scratch["valen_dirichlet"] = d.detach()
        l_d = masked_mean(soft_cross_entropy(a, o), step.mask, dist)  # l.3
        l_kl = masked_mean(dirichlet_kl_uniform(alpha_hat(a)), step.mask, dist)
        d_all, idx_all = (dist.gather_with_grad(d), dist.gather(idx)) if dist.active else (None, None)
        l_rec = (self.hp.rec_x * F.mse_loss(self.dec(d), x.flatten(1))  # l.4
                 + 0.01 * F.binary_cross_entropy_with_logits(d, cands)
                 + F.mse_loss(graph_decode(d, d_all), adjacency_block(state.valen_adj, idx, idx_all)))
        step.logs.update(valen_rec=l_rec.detach(), valen_kl=l_kl.detach(), valen_ld=l_d.detach(),
                         valen_lo=l_o.detach())
        return self.hp.alpha * l_rec + self.hp.beta * l_kl + self.hp.gamma * l_d + self.hp.theta * l_o


VALEN = Method(name="valen", label_update="valen.targets", selection="pllzoo.all", loss="valen.loss",
               description="VALEN: variational label enhancement over a kNN graph, after a PRODEN warm-up",
               citation="Xu et al., NeurIPS 2021")
