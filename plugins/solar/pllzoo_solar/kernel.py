"""The normalised transport kernel of SoLar's Sinkhorn problem, built row by row (see ``sinkhorn.py``).

Everything the solver needs per row is independent of the other rows (:func:`row_kernel`): the
row-normalised log-kernel v = λ·log p − max, the row shift, and three per-class counts (rows having j
as a candidate, rows whose only candidate is j, rows attaining their max at j). :func:`build_kernel`
then normalises the columns (not at all when every non-empty column has a row at its max, the usual
case with a full queue), checks feasibility from the counts and chooses dense or CSR mat-vecs. So a
caller that keeps rows (``kernel_queue.py``) builds a step's kernel from its new rows only.
Tests: tests/unit/test_sinkhorn.py::test_prebuilt_kernel_rows_and_exp_hint,
test_solar_refinery.py::test_kernel_queue_equals_solving_from_scratch.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from functools import cached_property
from typing import Callable

import torch
from torch import Tensor

from pllzoo.syncs import host_reads_are_free

MatVec = Callable[[Tensor], Tensor]


@dataclass
class RowKernel:
    """Kernel rows built from log-scores, independent of the other rows (λ·log p minus the row max)."""

    v: Tensor  # [R, K] row-normalised log-kernel: max 0 per row, -inf outside candidates
    shift: Tensor  # [R] the row max removed (λ · max candidate log-score)
    stats: Tensor  # long [3, K]: rows having j as candidate, rows whose only candidate is j, rows with v_j = 0
    shares: Tensor | None = None  # long [R, 3, K]: each row's share of stats (``row_stats``)


def row_kernel(log_scores: Tensor, lam: float, dtype: torch.dtype = torch.float32, check: bool = True,
               shares: bool = False) -> RowKernel:
    """Kernel rows of log_scores [R, K]; ``check`` raises on NaN/+inf scores or a row without candidates;
    ``shares`` keeps each row's share of the statistics (for a queue that later removes the row)."""
    x = log_scores.detach().to(dtype)  # [R, K]
    v = lam * x
    shift = v.amax(1)  # [R]
    v = v - shift[:, None]
    if check and bool(torch.isnan(v).any()):  # NaN or +inf scores, or a row of -inf, leave a NaN in v
        raise ValueError("log_scores has NaN/+inf or a row without candidates")
    if shares:
        per_row = row_stats(v)
        return RowKernel(v, shift, per_row.sum(0), per_row)
    return RowKernel(v, shift, row_stats(v, summed=True))


def row_stats(v: Tensor, summed: bool = False) -> Tensor:
    """Each row's share of RowKernel.stats, for kernel rows v [R, K] → long [R, 3, K] (a row of NaN or
    -inf counts nowhere); ``summed``: their sum [3, K]."""
    cand = torch.isfinite(v)  # [R, K]
    only = cand & (cand.sum(1, keepdim=True) == 1)  # [R, K]
    if summed:
        return torch.stack([cand.sum(0), only.sum(0), (v == 0).sum(0)])  # [3, K]
    return torch.stack([cand, only, v == 0], dim=1).long()  # [R, 3, K]


def _csr(counts: Tensor, cols: Tensor, vals: Tensor, shape: tuple[int, int]) -> Tensor:
    """CSR matrix from per-row entry counts and the entries sorted by row."""
    crow = torch.cat([counts.new_zeros(1), counts.cumsum(0)])
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*Sparse CSR tensor support is in beta.*")
        return torch.sparse_csr_tensor(crow, cols, vals, shape, check_invariants=False)


Entries = Callable[[], tuple[Tensor, Tensor]]
"""The candidates of a kernel as (row, class) index pairs sorted by (row, class): long [nnz] each."""


def candidate_entries(cand: Tensor) -> tuple[Tensor, Tensor]:
    """``cand`` bool [Ñ, K] as :data:`Entries` (one O(ÑK) pass)."""
    return torch.nonzero(cand, as_tuple=True)  # row-major: sorted by (row, class)


def _sparse_matvecs(cand: Tensor, m: Tensor, per_class: Tensor, entries: Entries | None = None
                    ) -> tuple[MatVec, MatVec]:
    """(β ↦ Mβ, c ↦ Mᵀc) through CSR copies of M and Mᵀ (entries in row-major order of each); Mᵀ is built
    on its first use (the relaxed problem never needs it), by a stable sort of the entries by class: O(nnz log
    nnz), not the O(ÑK) transposed copies it was (an outside review: at K = 1000 building the two CSR copies
    was ~90% of a SoLar step).  ``entries``: the candidates as a queue keeps them (:class:`KernelQueue`), which
    spares the O(ÑK) scan of ``cand`` too; the matrices are the same, entry for entry and in the same order."""
    n, k = m.shape
    rows, cols = entries() if entries is not None else candidate_entries(cand)
    if rows.numel() != int(per_class.sum()):  # a list out of step with the mask: an error, not a crash in the CSR
        # product (the matrices are built unchecked; a mutation audit's queue that lost its list segfaulted)
        raise RuntimeError(f"SoLar kernel: {rows.numel()} listed candidates, the mask has {int(per_class.sum())}")
    vals = m[rows, cols]  # [nnz]
    m_r = _csr(torch.bincount(rows, minlength=n), cols, vals, (n, k))
    m_t: list[Tensor] = []

    def rmv(c: Tensor) -> Tensor:
        if not m_t:
            order = torch.sort(cols, stable=True).indices  # by (class, row): rows stay in order within a class
            m_t.append(_csr(per_class, rows.index_select(0, order), vals.index_select(0, order), (k, n)))
        return m_t[0] @ c

    return (lambda b: m_r @ b), rmv


@dataclass
class Kernel:
    """The normalised kernel of one problem and what the solver needs to know about it."""

    v: Tensor  # [Ñ, K] row-normalised log-kernel
    m: Tensor  # [Ñ, K] exp(v − col_shift): entries in (0, 1], a 1 in every row and non-empty column
    row_shift: Tensor  # [Ñ] log factor removed from each row
    col_shift: Tensor  # [K] log factor removed from each column (0 for an empty column)
    r: Tensor  # [K] prior, normalised to sum 1
    infeasible: Tensor  # 0-d bool: a necessary feasibility condition fails
    per_class: Tensor  # long [K] rows having j as a candidate
    host: bool  # decisions are read on the host (see the module docstring)
    sparse: bool  # CSR mat-vecs
    cand_rows: Tensor | None = None  # bool [Ñ, K] candidate mask, if the builder keeps one
    noncand: Tensor | None = None  # float [Ñ, K]: 1 outside the candidates, 0 on them, if the builder keeps one
    entries: Entries | None = None  # the candidates as (row, class) pairs, if the builder keeps them

    def relaxed_kernel(self, eps: float) -> Tensor:
        """[Ñ, K] the normalised kernel with ``eps`` outside the candidates (m is 0 there, so m + eps·1 is exact)."""
        if self.noncand is not None:
            return torch.add(self.m, self.noncand, alpha=eps)  # a float pass; bool-mask ops are slow on CPU
        return torch.where(self.cand, self.m, eps)

    @cached_property
    def cand(self) -> Tensor:  # bool [Ñ, K]
        return self.cand_rows if self.cand_rows is not None else torch.isfinite(self.v)

    def freeze(self) -> None:
        """Own copies of the rows, for a kernel whose rows are views of buffers about to change."""
        self.v, self.m, self.row_shift = self.v.clone(), self.m.clone(), self.row_shift.clone()
        self.__dict__.pop("cand", None)
        self.cand_rows = self.noncand = self.entries = None


def build_kernel(rows: RowKernel, r: Tensor, *, m: Tensor | None = None, cand: Tensor | None = None,
                 noncand: Tensor | None = None, entries: Entries | None = None, sparse: bool | None = None,
                 sparse_density: float = 0.15, host: bool | None = None) -> Kernel:
    """Column-normalise kernel rows [Ñ, K] and check feasibility.

    :param rows: the problem's rows (``stats`` summed over all of them).
    :param m: exp(rows.v) if the caller keeps it; used when every non-empty column already has an entry
        1 (the usual case with a full queue), which spares the O(ÑK) column max and exp.
    :param cand: isfinite(rows.v) if the caller keeps it; ``noncand``: the float complement; ``entries``: its
        (row, class) pairs (for the CSR mat-vecs).
    """
    v, (per_class, forced, at_max) = rows.v, rows.stats
    n, k = v.shape
    host = host_reads_are_free(v.device) if host is None else host
    r = r.detach().to(device=v.device, dtype=v.dtype).reshape(-1)
    if host and not bool(torch.isfinite(r).all()):  # NaN fails `r >= 0` too, under the wrong name (an outside review)
        raise ValueError("r has a non-finite entry (NaN or inf)")
    if host and not bool((r >= 0).all()):
        raise ValueError("r has a negative entry")
    r = r / r.sum()  # [K]
    need = n * r
    infeasible = ((need > per_class.to(v.dtype)) | (forced.to(v.dtype) > need)).any()
    pos = r > 0
    if not host or not bool(pos.all()):  # a row without a candidate of positive prior
        infeasible = infeasible | ~(torch.isfinite(v) & pos).any(1).all()
    shifted = (at_max == 0) & (per_class > 0)  # [K] non-empty columns whose max is below 0
    if m is not None and host and not bool(shifted.any()):
        col_shift = torch.zeros(k, dtype=v.dtype, device=v.device)
    else:
        col_max = v.amax(0) if host else v.t().amax(1)  # [K]; same values (the transposed reduction is faster off CPU)
        col_shift = torch.where(torch.isfinite(col_max), col_max, torch.zeros_like(col_max))
        m = (v - col_shift).exp()
    use_sparse = bool(per_class.sum() <= sparse_density * n * k) if (sparse is None and host) else bool(sparse)
    return Kernel(v, m, rows.shift, col_shift, r, infeasible, per_class, host, use_sparse, cand, noncand, entries)
