"""SoLar's Sinkhorn-Knopp label refinery (Wang et al., NeurIPS 2022, §3.2 and App. B/D; SoLar code: utils/utils_algo.py `sinkhorn`).

Problem: Ñ rows (queue rows + batch rows) with masked scores p ⊙ Y and a class prior r [K]. Find
Q = Ñ·diag(c)·M·diag(β) with M = (p ⊙ Y)^λ (λ = 3), every row summing to 1 and Q.sum(0) = Ñ·r.
Reference loop (``reference_sinkhorn``): c ← 1/Ñ; 50 × { β ← r ./ (Mᵀc); c ← (1/Ñ) ./ (Mβ) }.

``sinkhorn`` solves the same problem; it differs from the reference in these ways:
  * Input is log-scores (-inf outside candidates, see ``masked_log_softmax``). Each row is shifted by its
    max over candidates and each column by its max, in log space, before exponentiating. Row and column
    scalings leave the solution unchanged (they are absorbed into c and β), and the start c₀ is carried
    along, so the iterates stay the reference's. Afterwards every row and every non-empty column holds an
    entry 1. So p^3 cannot underflow to a zero row, and the reference's NaN → relaxed path is not taken
    for rows whose candidates all underflowed. The only exception: c₀ is clamped at e⁻⁶⁰ relative, for
    rows whose best candidate is below e⁻²⁰ of the best row's.
    Tests: test_stress_rows_whose_candidates_underflow, test_equals_reference_without_underflow.
  * Stopping: the L1 error of the column marginal, ‖Q.sum(0)/Ñ − r‖₁, checked every ``check_every`` = 10
    iterations, with the cap ``max_iter`` = 50. Rows are exact after each c update. The reference's
    err = Σc + Σβ never drops below 0.1, so it always runs 50 iterations; ``stop="fixed"`` restores
    that. Why tol = 1e-3: on the benchmark problems the reference's 50 iterations reach only 2e-3 to
    6e-3. At 1e-3, 0.04 % of the rows change their argmax against the fully converged Q (0.13 % to 0.5 %
    for the reference). With a cold start it needs 60 to 80 iterations, so the cap binds. With a warm
    start it is reached inside the cap on CIFAR-10-LT while the network is unsure (10 to 16 iterations a step on
    the CPU tier; 10 to 45 in the paper run's first 250 epochs), and the cap binds as it sharpens (49 to 50
    after train epoch 500: benchmarks/README.md, "Sinkhorn"); on the real-world
    sets, whose problems are mostly relaxed, the cap binds (50 a step in their logs), and the relaxed problem
    always starts cold (below), so there the warm start changes nothing (an outside review measured warm and
    cold equal on BirdSong's and MSRCv2's relaxed solves).
    Tests: test_marginals_at_convergence, test_tolerance_stop.
  * r is normalised to sum 1. Where r_j = 0, β_j = 0 rather than 0/0.
    Test: test_zero_prior_class_gets_no_mass.
  * Relaxed solution. It is used when the problem fails a necessary feasibility check, or when the
    scalings go non-finite (the reference's only trigger). The check fails when Ñ·r_j exceeds the number
    of rows that have j as a candidate (for example an empty column), when the rows whose only candidate
    is j exceed Ñ·r_j, or when a row has no candidate with r_j > 0. The relaxed path gives the
    non-candidates weight ``eps`` (1e-5, the paper's value) in the normalised kernel and solves that
    problem. It then zeroes the non-candidates and, unlike the reference, **re-normalises rows within
    candidates**, so rows still sum to 1. The reference adds 1e-5 to p before the power (1e-15 in M) and
    does not re-normalise. A row left with no candidate mass gets (p ⊙ Y)^λ normalised. The column error is
    reported, not hidden. Tests: test_infeasible_empty_column_relaxes, test_infeasible_singletons_relax,
    test_relaxed_row_without_mass.
    ``relax="reference"`` drops the feasibility check and relaxes where the reference's iterates go NaN: when
    its float32 β_j = r_j/(Mᵀc)_j overflows (an empty column of positive prior at the first iteration; a class
    whose few candidate rows cannot carry Ñ·r_j, whose β then grows until it does). Its unshifted iterates are
    the shifted ones times known factors (u^ref_j = u_j·e^(b_j + A), b the column shift, A the largest row
    shift), so the overflow is read from the shifted u without computing them; it is the reference's trigger
    up to the e⁻⁶⁰ clamp of c₀ and to the last bits of β near the float32 limit, and is exact for a cold start
    (``warm_start=false``, as the reference), except an empty column of prior 0: the reference's 0/0 is NaN,
    while β_j = 0 here (above) leaves it empty. ``relax="nan"`` (recorded runs) drops the check and relaxes only
    where pllzoo's shifted iterates go non-finite, which they do not on an empty column or an overflowing
    β: such problems run 50 iterations to the nearest reachable marginals, where the reference relaxes
    (test_relax_reference_relaxes_where_the_reference_goes_nan). The check can do worse than
    the reference: on an infeasible problem that stays finite, the reference's 50 iterations end at the
    nearest reachable marginals, while the relaxed problem's ε outweighs any candidate below 0.0215 of its
    row's best (0.0215³ ≈ 1e-5) and moves rows away from the prior
    (test_relax_nan_follows_the_reference_on_an_infeasible_problem). On the real-world sets, where the check
    fires, accuracy is the same with either (benchmarks/sinkhorn-relax/: paired All differences +0.03 points
    on average over 10 set × split cells; the one beyond its noise, Italian uniform, favours the check), so
    the default stays ``check``, the setting of the recorded runs.
  * Sparse path. When the candidate density is ≤ ``sparse_density`` (0.15, the measured CPU crossover),
    the two mat-vecs use CSR matrices (M and Mᵀ) at O(nnz) cost. On CPU this was ~10× faster than the
    padded [Ñ, s_max] gather/scatter_add layout. Test: test_dense_equals_sparse.
  * Warm start: ``log_beta`` is returned relative to the kernel (p ⊙ Y)^λ, with max 0. It is the log
    because β spans more than the float32 range. Pass it back as ``log_beta0``, and the first update is
    then c from β. Test: test_warm_start_needs_fewer_iterations, test_log_beta_reproduces_q.
    It pays because the prior moves little between solves (by γ per epoch). After a jump of a class from
    r_j ≈ 0 to a sizeable share (a prior set by hand between solves; no recipe does this) the warm start ends
    further from the solution than a cold one within the cap; ``warm_start=false`` is the safe choice there.
  * Kernel rows are built once per row (``kernel.py``: the row-normalised log-kernel and its
    statistics), so the refinery keeps its queue's rows (``kernel_queue.py``) and a step builds only
    its batch's. Tests: test_sinkhorn.py::test_prebuilt_kernel_*, test_solar_refinery.py::test_kernel_queue_*.
Host synchronisation (``pllzoo.syncs``): on the CPU a host read is free, so the solver stops at the
first check that passes, branches to the relaxed problem, and raises on invalid input. Elsewhere (and
under ``count_syncs()``) it reads nothing: it runs ``max_iter`` iterations with iterates frozen on the
device once the check passes (so the answer equals the tolerance stop), decides feasibility and the
relaxed problem with ``torch.where`` (on CUDA it stops queueing frozen iterations once a non-blocking copy
of the stop flag says so), always uses the dense mat-vecs unless ``sparse=True`` (whose CSR
index needs one sync), and does not validate its input (a NaN score shows as a NaN training loss).
Both give bit-identical results on the CPU (test_sync_free_equals_host_path). The iteration count,
the relaxed flag and the errors are 0-d device tensors.
"""

from __future__ import annotations

import math
from functools import cached_property
from typing import Literal

import torch
from torch import Tensor

from pllzoo.syncs import host_reads_are_free, host_side
from pllzoo_solar.kernel import Kernel, MatVec, RowKernel, build_kernel, row_kernel, row_stats, _sparse_matvecs

__all__ = ["Kernel", "RowKernel", "SinkhornResult", "build_kernel", "masked_log_softmax", "reference_sinkhorn",
           "row_kernel", "row_stats", "sinkhorn", "solve"]


def masked_log_softmax(logits: Tensor, candidates: Tensor) -> Tensor:
    """Return log_softmax(logits) [Ñ, K] in float32 with -inf outside the (bool/0-1) candidate mask."""
    logp = torch.log_softmax(logits.float(), dim=1)
    return logp.masked_fill(~candidates.bool(), float("-inf"))


@torch.no_grad()
def reference_sinkhorn(scores: Tensor, r: Tensor, lam: float = 3.0, n_iter: int = 50) -> Tensor:
    """The reference maths without protection: scores = p ⊙ Y [Ñ, K], r [K] → Q [Ñ, K] float32."""
    m = scores.float().pow(lam).t()  # [K, Ñ]
    r = r.float().reshape(-1, 1)  # [K, 1]
    n = m.shape[1]
    c = torch.full((n, 1), 1.0 / n, device=m.device)  # [Ñ, 1]
    for _ in range(n_iter):
        beta = r / (m @ c)  # [K, 1]
        c = (1.0 / n) / (m.t() @ beta)  # [Ñ, 1]
    return n * c * m.t() * beta.t()  # [Ñ, K]


#: log of float32's largest finite value: where the reference's unshifted float32 β_j = r_j/(Mᵀc)_j overflows
_LOG_F32_MAX = math.log(torch.finfo(torch.float32).max)


def _scale(mv: MatVec, rmv: MatVec, r: Tensor, c: Tensor, max_iter: int, tol: float, check_every: int,
           fixed: bool, host: bool, active: Tensor | None = None,
           overflow: tuple[Tensor, Tensor] | None = None) -> tuple[Tensor, Tensor, Tensor]:
    """Sinkhorn iterations from c [Ñ]: β ← r/(Mᵀc), c ← (1/Ñ)/(Mβ). Returns (β [K], iterations, finite).

    ``overflow`` ([K], [Ñ]) (``relax="reference"``): log u_j below the first means the reference's unshifted
    float32 β_j = r_j/u_j^ref is +inf, after which its next c is NaN (0·inf on the rows without candidate j);
    log (Mβ)_i below the second, that its c_i is +inf, after which its next u is NaN. Such an iteration ends
    the solve as not finite.

    ``host``: stop at the first check that passes (a host read per check). Otherwise run ``max_iter``
    iterations and freeze the iterates on the device once a check passes (or from the start where
    ``active`` is False), which gives the same β: the chunk of iterations after a passed check is dropped
    at its end (one ``where`` per chunk, not per iteration). On CUDA the stop flag is also copied to pinned host
    memory without waiting (:class:`_DoneWatch`): once that copy has landed and says "done", no more
    (frozen) iterations are queued. The host never waits, and the answer is the same.
    """
    tiny, n = torch.finfo(r.dtype).tiny, c.shape[0]
    u = rmv(c)  # [K] = Mᵀc
    beta = r
    iters = torch.full((), max_iter, dtype=torch.long, device=r.device)
    finite = torch.ones((), dtype=torch.bool, device=r.device)
    done = torch.zeros((), dtype=torch.bool, device=r.device) if active is None else ~active
    watch = None if host else _watch(done)
    beta0, u0 = beta, u  # the iterates at the start of the chunk of iterations between two checks
    over = None if overflow is None else torch.zeros((), dtype=torch.bool, device=r.device)
    for t in range(1, max_iter + 1):
        if watch is not None and watch.known_done():  # done was posted at a check, i.e. before this chunk began
            beta, u = beta0, u0
            break
        # [K]; r_j = 0 → β_j = 0. "reference": unclamped, so that β keeps the reference's growth (u^ref ≤ u, as b, A ≤
        # 0: the test below fires at or before the iteration where this β overflows)
        beta = r / u.clamp_min(tiny) if over is None else torch.where(r > 0, r / u, 0.0)
        mass = mv(beta)  # [Ñ] = 1/(Ñ·c)
        if over is not None:  # the reference's β or c of this iteration is +inf: its iterates go NaN from here
            over = over | (((u.log() < overflow[0]).any() | (mass.log() < overflow[1]).any()) & ~done)
        u = rmv((1.0 / n) / mass)  # [K]; rows of Q sum to 1; column marginal / Ñ is β ⊙ u
        end = t % check_every == 0 or t == max_iter
        if over is not None and end:
            if host:
                if bool(over):
                    return beta, iters.fill_(t), finite.fill_(False)
            else:
                iters = torch.where(over & ~done, t, iters)
                finite = finite & ~over
                done = done | over
        if not host and end:  # frozen once done: done changes only at checks, so a chunk is kept or dropped whole
            beta, u = torch.where(done, beta0, beta), torch.where(done, u0, u)  # two launches a chunk, not two an iteration
        if not fixed and end:
            err = (beta * u - r).abs().sum()
            if host:
                err_f = float(err)
                if err_f != err_f or abs(err_f) == float("inf"):
                    return beta, iters.fill_(t), finite.fill_(False)
                if err_f <= tol:
                    return beta, iters.fill_(t), finite
            else:
                stop = ~done & (~torch.isfinite(err) | (err <= tol))
                iters = torch.where(stop, t, iters)
                finite = finite & ~(stop & ~torch.isfinite(err))
                done = done | stop
                if watch is not None:
                    watch.post(done)
        if end:
            beta0, u0 = beta, u
    return beta, iters, finite


def _watch(done: Tensor) -> _DoneWatch | None:
    """The stop-flag watch of a sync-free solve: on CUDA only (tests put in one that lets a CPU solve break as a
    CUDA one may)."""
    return _DoneWatch(done) if done.device.type == "cuda" else None


class _DoneWatch:
    """A device flag mirrored into pinned host memory by non-blocking copies; read only once a copy has
    landed (``Event.query``), so the host never waits. The flag only goes from False to True."""

    def __init__(self, done: Tensor) -> None:
        self.flag = torch.zeros((), dtype=torch.bool, pin_memory=True)
        self.event: torch.cuda.Event | None = None
        self.post(done)

    def post(self, done: Tensor) -> None:
        self.flag.copy_(done, non_blocking=True)
        self.event = torch.cuda.Event()
        self.event.record()

    def known_done(self) -> bool:
        if self.event is None or not self.event.query():
            return False
        with host_side():  # pinned host memory the copy has reached: no device is involved
            return bool(self.flag)


class SinkhornResult:
    """A solution: q [Ñ, K] (built on first access), log_beta, iters, errors, relaxed, sparse."""

    def __init__(self, kern: Kernel, beta: Tensor, beta_rows: Tensor, mass: Tensor, iters: Tensor,
                 relaxed: Tensor) -> None:
        self._kern, self._beta_rows, self._mass = kern, beta_rows, mass
        self._exact_zeros = kern.host and not bool(relaxed)  # entries off the candidates are already 0
        self.iters = iters  # 0-d long: (β, c) iterations of the solve that produced q
        self.relaxed = relaxed  # 0-d bool: the relaxed (ε) problem was solved, see module docstring
        self.sparse = kern.sparse and not bool(relaxed) if kern.host else kern.sparse  # CSR mat-vecs solved q
        log_beta = beta.log() - kern.col_shift  # [K] w.r.t. (p ⊙ Y)^λ
        self.log_beta = log_beta - torch.where(torch.isfinite(log_beta), log_beta, float("-inf")).max()  # max 0

    def _entries(self, start: int) -> Tensor:
        """Rows ``start:`` of Q in the compute dtype."""
        kern, sl = self._kern, slice(start, None)
        b = self._beta_rows if self._beta_rows.dim() == 1 else self._beta_rows[sl]
        w = kern.m[sl] * b / self._mass[sl, None]  # [R, K] entries of Q
        if self._exact_zeros:  # m = 0 there, β finite (r_j ≤ 1 over at least tiny), mass finite and > 0
            return w
        return w.masked_fill(~torch.isfinite(kern.v[sl]), 0.0)  # zero outside candidates

    def rows(self, start: int) -> Tensor:
        """Rows ``start:`` of q, float32: rows sum to 1, zero outside candidates."""
        return self._entries(start).float()

    @cached_property
    def q(self) -> Tensor:  # [Ñ, K] float32 pseudo-labels
        return self.rows(0)

    @cached_property
    def row_err(self) -> Tensor:  # 0-d: Σ_i |Σ_j Q_ij − 1| / Ñ (compute dtype)
        w = self._entries(0)
        return (w.sum(1) - 1).abs().sum() / w.shape[0]

    @cached_property
    def col_err(self) -> Tensor:  # 0-d: Σ_j |Σ_i Q_ij / Ñ − r_j| (compute dtype)
        w = self._entries(0)
        return (w.sum(0) / w.shape[0] - self._kern.r).abs().sum()


def solve(kern: Kernel, *, max_iter: int = 50, tol: float = 1e-3, stop: Literal["tol", "fixed"] = "tol",
          check_every: int = 10, log_beta0: Tensor | None = None, eps: float = 1e-5,
          relax: Literal["check", "nan", "reference"] = "check") -> SinkhornResult:
    """Solve the problem of a :func:`build_kernel` kernel (parameters as :func:`sinkhorn`).

    Explicit CSR off the CPU takes the host path: its index needed a sync anyway.
    """
    m, r, fixed = kern.m, kern.r, stop == "fixed"
    infeasible = kern.infeasible if relax == "check" else torch.zeros_like(kern.infeasible)
    # relax="reference": log u_j below this is the reference's float32 β_j = +inf (its u^ref = u·e^(b_j + A),
    # with b the column shift and A the largest row shift, c₀ being the reference's 1/Ñ scaled by e^(a_i − A))
    # and log (Mβ)_i below the second is the reference's c_i = (1/Ñ)/(M^ref β^ref)_i = +inf (a row whose candidates all
    # have a vanishing β; (M^ref β^ref)_i = (Mβ)_i·e^(a_i − A)).  torch evaluates a Python float over a tensor as
    # the tensor's reciprocal times the float, so it is 1/(M^ref β^ref)_i that overflows, not (1/Ñ)/(...): no log Ñ
    # (an outside review found 6 of 348 problems where the reference went NaN through that band and ours did not)
    overflow = None
    if relax == "reference":
        top = kern.row_shift.max()
        overflow = (r.log() - _LOG_F32_MAX - kern.col_shift - top, -_LOG_F32_MAX + top - kern.row_shift)
    host, n = kern.host or kern.sparse, m.shape[0]
    mv, rmv = _sparse_matvecs(kern.cand, m, kern.per_class, kern.entries) if kern.sparse else (
        (lambda b: m @ b), (lambda c: c @ m))  # the candidate kernel
    a = kern.row_shift  # c₀: the reference's c = 1/Ñ carried through the row normalisation, clamped at e⁻⁶⁰
    cold = (a - a.max()).clamp_min(-60.0).exp() / n  # relative so that underflowing rows cannot empty a column
    c0 = cold
    if log_beta0 is not None:
        lb = log_beta0.to(device=r.device, dtype=r.dtype) + kern.col_shift  # [K] normalised kernel
        c0 = (1.0 / n) / mv((lb - lb.max()).clamp_min(-60.0).exp())
    opts = (max_iter, tol, check_every, fixed, host)
    m_eps = None
    if host:
        relaxed = bool(infeasible)
        if not relaxed:
            beta, iters, finite = _scale(mv, rmv, r, c0, *opts, overflow=overflow)
            mass = mv(beta)  # [Ñ] = 1/(Ñ·c): the final c update
            relaxed = not (bool(finite) and bool((torch.isfinite(mass) & (mass > 0)).all()))
        if relaxed:  # relaxed problem: non-candidates weigh eps in the normalised kernel
            m_eps = kern.relaxed_kernel(eps)  # [Ñ, K]
            beta, iters, _ = _scale(lambda b: m_eps @ b, lambda c: c @ m_eps, r, cold, *opts)
            mass = mv(beta)  # [Ñ] candidate mass: the non-candidate mass is dropped, rows re-normalised
        relaxed_t = torch.tensor(relaxed, device=r.device)
    else:  # the first solve is the relaxed one if infeasible; a second runs frozen unless the first failed
        m_eps = kern.relaxed_kernel(eps)  # [Ñ, K]
        m1 = torch.where(infeasible, m_eps, m)  # equal to m (or m_eps) entry by entry
        beta1, iters1, finite1 = _scale(lambda b: m1 @ b, lambda c: c @ m1, r,
                                        torch.where(infeasible, cold, c0), *opts, overflow=overflow)
        mass1 = mv(beta1)
        ok = ~infeasible & finite1 & (torch.isfinite(mass1) & (mass1 > 0)).all()
        second = ~ok & ~infeasible
        beta2, iters2, _ = _scale(lambda b: m_eps @ b, lambda c: c @ m_eps, r, cold, *opts, active=second)
        beta, iters = torch.where(second, beta2, beta1), torch.where(second, iters2, iters1)
        mass = torch.where(second, mv(beta2), mass1)
        relaxed, relaxed_t = True, ~ok  # the row fix below is a no-op where the problem was not relaxed
    beta_rows = beta
    if relaxed:  # rows left without candidate mass get (p ⊙ Y)^λ normalised
        bad = ~(torch.isfinite(mass) & (mass > 0))  # [Ñ]
        flat_beta = kern.col_shift.exp()  # [K] β with M·diag(β) = (p ⊙ Y)^λ up to row scaling
        beta_rows = torch.where(bad[:, None], flat_beta, beta)  # [Ñ, K]
        mass = torch.where(bad, mv(flat_beta), mass)  # [Ñ]
    return SinkhornResult(kern, beta, beta_rows, mass, iters, relaxed_t)


@torch.no_grad()
def sinkhorn(
    log_scores: Tensor,
    r: Tensor,
    *,
    lam: float = 3.0,
    max_iter: int = 50,
    tol: float = 1e-3,
    stop: Literal["tol", "fixed"] = "tol",
    check_every: int = 10,
    log_beta0: Tensor | None = None,
    eps: float = 1e-5,
    relax: Literal["check", "nan", "reference"] = "check",
    sparse: bool | None = None,
    sparse_density: float = 0.15,
    dtype: torch.dtype = torch.float32,
    kernel: Kernel | None = None,
) -> SinkhornResult:
    """Solve SoLar's transport problem for log_scores [Ñ, K] (-inf = non-candidate) and prior r [K].

    :param lam: the power λ of the kernel (p ⊙ Y)^λ.
    :param max_iter: the iteration cap; with ``stop="fixed"`` exactly this many iterations run.
    :param tol: stop once ‖Q.sum(0)/Ñ − r‖₁ ≤ tol at a check (every ``check_every`` iterations).
    :param log_beta0: the ``log_beta`` of a previous result (warm start).
    :param eps: the relaxed path's weight of non-candidates in the normalised kernel.
    :param relax: when the relaxed problem is solved: ``check`` also when the feasibility check fails (see the
        module doc), ``nan`` only when pllzoo's shifted scalings go non-finite, ``reference`` when the
        reference's unshifted float32 ones would (its one trigger, module doc).
    :param sparse: CSR mat-vecs; None chooses them when the candidate density is ≤ ``sparse_density``
        (on the CPU; elsewhere None means dense).
    :param dtype: compute dtype (float64 for tight tests); q is returned in float32.
    :param kernel: the kernel of exactly these log_scores, prebuilt (``KernelQueue.kernel``); then
        ``lam``, ``sparse``, ``sparse_density`` and ``dtype`` were the builder's, and log_scores is not read.
    :returns: SinkhornResult. Rows of q sum to 1 and are 0 outside candidates; no NaN.
    :raises ValueError: a row without candidates, NaN/+inf scores, or a negative prior (CPU only).
    """
    with torch.autocast(device_type=log_scores.device.type, enabled=False):
        if kernel is None:
            host = host_reads_are_free(log_scores.device)
            rows = row_kernel(log_scores, lam, dtype, check=host)
            kernel = build_kernel(rows, r, sparse=sparse, sparse_density=sparse_density, host=host)
        return solve(kernel, max_iter=max_iter, tol=tol, stop=stop, check_every=check_every,
                     log_beta0=log_beta0, eps=eps, relax=relax)
