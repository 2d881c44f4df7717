"""SoLar's label update: the Sinkhorn label refinery over [queue; batch] (paper §3.2; spec §1.3–1.5).

Algorithm (``solar.sinkhorn``, slot ``label_update``; per mini-batch):
  1. C = p(x^w) ⊙ Y_B, masked predictions of the weak view (detached)
  2. once the queue of ``queue_length × B`` rows is full: S = [queue; C], else S = C
  3. Q = Sinkhorn(S^λ; rows → 1, columns → Ñ·r) with λ = 3 and the current prior r; the
     batch's pseudo-labels are its own rows of Q; ŷ_i = argmax_j Q_ij ∈ S_i
  4. push C into the queue
  5. after the step: conf_i ← p_i ⊙ Y_i / Σ_j p_ij Y_ij (the targets of the re-normalised loss
     on unreliable samples, from the pre-step predictions, for every batch row)

Deviations (each a hyper-parameter where it can change results):
  * the queue is a ring buffer holding log C (−inf outside candidates), not a shifted copy of C;
    row order does not change the Sinkhorn solution. Test: test_solar_refinery.py::test_queue_ring_buffer
  * the solver stops on the real marginal error (``stop="tol"``) instead of always 50 iterations
    (``stop="fixed"``), is warm-started from the previous step's class scalings, and never yields
    zero rows or NaN (see ``sinkhorn.py``). Tests: tests/unit/test_sinkhorn.py
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from pllzoo import Component, PLLState, Run, Step, hookimpl, hp
from pllzoo.losses import normalize_rows
from pllzoo_solar.sinkhorn import masked_log_softmax, sinkhorn


@dataclass(frozen=True)
class RefineryHParams:
    lam: float = hp(3.0, "λ: power of the masked predictions in the transport kernel")
    queue_length: int = hp(64, "queue rows as a multiple of the batch size (CUB: 8, SUN397: 16)")
    max_iter: int = hp(50, "Sinkhorn iteration cap (the reference always runs 50)")
    stop: str = hp("tol", "tol: stop on the marginal error; fixed: exactly max_iter (reference)",
                   choices=("tol", "fixed"))
    tol: float = hp(1e-3, "L1 error of the column marginal at which Sinkhorn stops")
    eps: float = hp(1e-5, "weight of non-candidates in the relaxed problem (paper: 1e-5 added to M)")
    warm_start: bool = hp(True, "start each solve from the previous step's class scalings (stop=tol only)")


class SinkhornRefinery(Component):
    """Pseudo-labels whose class marginals follow the estimated prior."""

    HParams = RefineryHParams
    needs = frozenset({"prior"})
    provides = frozenset({"confidence"})

    @hookimpl
    def pllzoo_setup_stage(self, run: Run, state: PLLState) -> None:
        k, rows = run.num_classes, self.hp.queue_length * run.config.batch_size
        state.confidence = normalize_rows(run.candidates.float())  # [N, K] re-normalised targets
        state.queue = torch.full((rows, k), float("-inf"), device=run.device)  # log C of past batches
        state.queue_ptr = torch.zeros((), dtype=torch.long, device=run.device)  # next row to write
        state.queue_filled = torch.zeros((), dtype=torch.long, device=run.device)  # rows written so far
        state.sinkhorn_log_beta = torch.zeros(0, device=run.device)  # empty: the first solve starts cold

    @hookimpl
    def pllzoo_label_update(self, step: Step, state: PLLState) -> torch.Tensor:
        log_c = masked_log_softmax(step.logits.detach(), step.batch.candidates)  # Alg. l.1, [B, K]
        b, rows = log_c.shape[0], state.queue.shape[0]
        full = int(state.queue_filled) >= rows
        scores = torch.cat([state.queue, log_c]) if full else log_c  # l.2, [Ñ, K]
        result = sinkhorn(
            scores, state.prior, lam=self.hp.lam, max_iter=self.hp.max_iter, tol=self.hp.tol, stop=self.hp.stop,
            eps=self.hp.eps, log_beta0=self._warm(state),
        )  # l.3
        state.sinkhorn_log_beta = result.log_beta
        self._push(state, log_c)  # l.4
        q = result.q[-b:]
        step.logs["sinkhorn_relaxed_count"] = float(result.relaxed)
        step.logs["sinkhorn_iters"] = float(result.iters)
        step.logs["pseudo_acc"] = (q.argmax(1) == step.batch.y_true).float().mean()  # logging only
        return q

    @staticmethod
    def _push(state: PLLState, log_c: torch.Tensor) -> None:
        """Write the batch rows into the ring buffer at its pointer, wrapping around."""
        rows = state.queue.shape[0]
        log_c = log_c[-rows:]
        state.queue[(state.queue_ptr + torch.arange(log_c.shape[0], device=log_c.device)) % rows] = log_c
        state.queue_ptr = (state.queue_ptr + log_c.shape[0]) % rows
        state.queue_filled = (state.queue_filled + log_c.shape[0]).clamp(max=rows)

    def _warm(self, state: PLLState) -> torch.Tensor | None:
        """The previous solve's class scalings, unless cold starts are asked for (or faithful fixed-50 runs)."""
        use = self.hp.warm_start and self.hp.stop == "tol" and state.sinkhorn_log_beta.numel() > 0
        return state.sinkhorn_log_beta if use else None

    @hookimpl
    def pllzoo_post_step(self, step: Step, state: PLLState) -> None:
        state.confidence[step.batch.index] = normalize_rows(step.probs * step.batch.candidates)  # l.5
