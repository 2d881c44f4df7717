"""SoLar's label update: the Sinkhorn label refinery over [queue; batch] (paper §3.2; SoLar code: train.py `train_loop`, utils/utils_algo.py `sinkhorn`).

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
  * the queue is also kept as Sinkhorn kernel rows (``kernel_queue.py``), so a step builds only the
    batch's rows; the solution is that of the solver on [queue; C] built from scratch (bitwise on CPU).
    Tests: test_solar_refinery.py::test_kernel_queue_equals_solving_from_scratch,
    test_kernel_queue_rebuilt_after_a_restore
  * the re-normalised confidence (l.5) of a row whose candidates' probabilities all underflow is their softmax of
    the logits (``pllzoo.losses.normalize_masked``), where the code writes 0/0; every other row is the code's,
    bit for bit.  Test: test_solar_refinery.py::test_post_step_never_writes_a_zero_row_when_the_candidates_underflow

Under torchrun (G > 1 processes, the replicated design): the masked log-probabilities
log C of the ranks' slices are gathered (B×K numbers per step, rank order = the one-process batch);
every rank builds the kernel rows of the global batch, solves the same Sinkhorn problem over
[queue; C_G] with the same prior and warm start, keeps its rows g·b … (g+1)·b − 1 of the batch's
solution as its targets and pushes C_G into its queue, so the queue, its pointer and the warm start
stay identical on every rank (``"replicated"``) and equal the one-process ones.  The solver itself calls
no collective, so no branch inside it can make ranks wait for each other; on identical inputs on one
kind of device it takes the same branches.  The confidences of l.5 are written at the rank's batch
rows and synchronised by the trainer (``"rows"``).  ``sinkhorn_relaxed_count`` is reported by rank 0
alone (the trainer sums ``*_count`` logs over ranks).
Test: tests/test_distributed.py::test_sinkhorn_rows_on_two_ranks_equal_one_process (bitwise).

Host synchronisation: none per step. "Is the queue full?" is a host count (read from
``state.queue_filled`` once after a restore); the solver's decisions stay on the device off the CPU;
``sinkhorn_iters`` and ``sinkhorn_relaxed_count`` are logged as device tensors. Test: tests/test_sync_free.py.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from pllzoo import Component, PLLState, Run, Step, hookimpl, hp
from pllzoo.ddp import rank_slice
from pllzoo.losses import normalize_masked, normalize_rows
from pllzoo.syncs import host_reads_are_free
from pllzoo_solar.kernel_queue import KernelQueue
from pllzoo_solar.kernel import RowKernel
from pllzoo_solar.sinkhorn import masked_log_softmax, sinkhorn


@dataclass(frozen=True)
class RefineryHParams:
    lam: float = hp(3.0, "λ: power of the masked predictions in the transport kernel", gt=0)
    queue_length: int = hp(64, "queue rows as a multiple of the batch size (CUB: 8, SUN397: 16)", ge=1)
    max_iter: int = hp(50, "Sinkhorn iteration cap (the reference always runs 50)", ge=1)
    stop: str = hp("tol", "tol: stop on the marginal error; fixed: exactly max_iter (reference)",
                   choices=("tol", "fixed"))
    tol: float = hp(1e-3, "L1 error of the column marginal at which Sinkhorn stops", ge=0)
    eps: float = hp(1e-5, "weight of non-candidates in the relaxed problem (paper: 1e-5 added to M)", ge=0)
    warm_start: bool = hp(True, "start each solve from the previous step's class scalings (stop=tol only)")
    # added after the recorded runs, which all ran "check": the run id names it only when it is not "check"
    relax: str = hp("check", "solve the relaxed problem also when a feasibility check fails (check), only where "
                    "the reference's float32 scalings overflow to NaN (reference), or only where pllzoo's shifted "
                    "ones go non-finite (nan: never on an empty column)", choices=("check", "reference", "nan"),
                    unnamed_when="check")


class SinkhornRefinery(Component):
    """Pseudo-labels whose class marginals follow the estimated prior."""

    HParams = RefineryHParams
    needs = frozenset({"prior"})
    provides = frozenset({"confidence", "queue", "queue_ptr", "queue_filled", "sinkhorn_log_beta"})
    distributed = True  # the replicated Sinkhorn over [queue; global batch] (D3); the rest: "replicated"
    sync = {"confidence": "rows"}  # l.5 writes the batch rows only

    def __init__(self, hp=None) -> None:
        super().__init__(hp)
        self._kq: KernelQueue | None = None

    @hookimpl
    def pllzoo_setup_stage(self, run: Run, state: PLLState) -> None:
        k, rows = run.num_classes, self.hp.queue_length * run.config.batch_size
        state.confidence = normalize_rows(run.candidates.float())  # [N, K] re-normalised targets
        self._kq = KernelQueue(rows, run.config.batch_size, k, self.hp.lam, run.device)
        state.queue = self._kq.queue  # log C of past batches (a view of the kernel queue's buffer)
        state.queue_ptr = torch.zeros((), dtype=torch.long, device=run.device)  # next row to write
        state.queue_filled = torch.zeros((), dtype=torch.long, device=run.device)  # rows written so far
        state.sinkhorn_log_beta = torch.zeros(0, device=run.device)  # empty: the first solve starts cold

    def _kernels(self, state: PLLState, batch: int) -> KernelQueue:
        """The kernel rows of ``state.queue``; rebuilt when the queue was replaced (a restored checkpoint:
        the one host read of ``queue_filled`` then)."""
        if self._kq is None or state.queue is not self._kq.queue:
            rows, k = state.queue.shape
            self._kq = KernelQueue(rows, batch, k, self.hp.lam, state.queue.device, queue=state.queue,
                                   filled=int(state.queue_filled))
            state.queue = self._kq.queue
        return self._kq

    @hookimpl
    def pllzoo_label_update(self, step: Step, state: PLLState) -> torch.Tensor:
        dist = step.dist
        # Alg. l.1 over the global batch: [B, K] (G > 1: the ranks' rows gathered in rank order, D3)
        log_c = dist.gather(masked_log_softmax(step.logits.detach(), step.batch.candidates))
        kq = self._kernels(state, step.nominal_batch_size)
        rk, e = kq.batch_rows(log_c, check=host_reads_are_free(log_c.device))  # the queue's rows are kept
        q, iters, relaxed = self._solve(state, kq, log_c, rk, e)  # l.2–3, the same problem on every rank
        self._push(state, kq, log_c, rk, e)  # l.4: the global batch, into the identical queue
        q = rank_slice(q, dist)  # this rank's rows of the solution [b, K]
        # device tensors: read once per epoch; a count is summed over ranks, so rank 0 alone reports it
        step.logs["sinkhorn_relaxed_count"] = relaxed if dist.is_main else torch.zeros_like(relaxed)
        step.logs["sinkhorn_iters"] = iters
        step.logs["pseudo_acc"] = (q.argmax(1) == step.batch.y_true).float().mean()  # logging only
        return q

    def _solve(self, state: PLLState, kq: KernelQueue, log_c: torch.Tensor, rk: RowKernel, e: torch.Tensor):
        """Sinkhorn over [queue; C] once the queue is full, else over C → (the batch's rows of Q, iterations,
        relaxed); returns no reference to the kernel, whose rows the push then overwrites."""
        scores, kernel = kq.kernel(log_c, rk, e, state.prior, host_reads_are_free(log_c.device))  # l.2
        result = sinkhorn(
            scores, state.prior, lam=self.hp.lam, max_iter=self.hp.max_iter, tol=self.hp.tol, stop=self.hp.stop,
            eps=self.hp.eps, relax=self.hp.relax, log_beta0=self._warm(state), kernel=kernel,
        )  # l.3
        state.sinkhorn_log_beta = result.log_beta
        return result.rows(scores.shape[0] - log_c.shape[0]), result.iters, result.relaxed

    @staticmethod
    def _push(state: PLLState, kq: KernelQueue, log_c: torch.Tensor, rk: RowKernel, e: torch.Tensor) -> None:
        """Write the batch rows into the ring buffer at its pointer, wrapping around."""
        rows = state.queue.shape[0]
        b = min(log_c.shape[0], rows)
        kq.push(log_c, rk, e, (state.queue_ptr + torch.arange(b, device=log_c.device)) % rows)
        state.queue_ptr = (state.queue_ptr + b) % rows
        state.queue_filled = (state.queue_filled + b).clamp(max=rows)

    def _warm(self, state: PLLState) -> torch.Tensor | None:
        """The previous solve's class scalings, unless cold starts are asked for (or faithful fixed-50 runs)."""
        use = self.hp.warm_start and self.hp.stop == "tol" and state.sinkhorn_log_beta.numel() > 0
        return state.sinkhorn_log_beta if use else None

    @hookimpl
    def pllzoo_post_step(self, step: Step, state: PLLState) -> None:
        # l.5; a row whose candidates' probabilities all underflow is their softmax of the logits, not a zero row
        # (which dropped the sample from ℓ_rn; an outside review), bit for bit the same elsewhere (Deviations)
        state.confidence[step.batch.index] = normalize_masked(step.probs, step.batch.candidates, step.logits.float())
