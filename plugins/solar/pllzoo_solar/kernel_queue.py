"""The refinery's queue kept as Sinkhorn kernel rows, so a step builds only its batch's rows.

Sinkhorn's problem at a step is [queue; batch] (Ñ = queue_length·B + B rows). Everything the solver
needs per row is independent of the other rows (:func:`pllzoo_solar.kernel.row_kernel`): the
row-normalised log-kernel v, its exponential, the row shift, and three per-class counts (rows having
j as a candidate, rows whose only candidate is j, rows attaining their max at j). A
:class:`KernelQueue` keeps them in ring buffers next to the queue's log-scores, in the same slots, and
keeps the counts of the queue's rows as running sums (the rows written added, the rows overwritten
subtracted; integers, so exact). With a full queue a column's max is 0 as soon as one row attains its
max there, so the kernel is the stored exp(v) and no O(ÑK) pass runs before the iterations
(:func:`pllzoo_solar.kernel.build_kernel`).

Also kept per slot: the candidate mask (bool, and as float 1 − mask for the relaxed kernel, so that no
O(ÑK) bool pass runs per step), each row's share of the counts (subtracted when the row leaves; uint8, as
they are 0 or 1), and on the CPU, where the CSR mat-vecs run, each row's candidate classes (padded to the
most candidates a row had so far), from which a step lists the problem's entries in O(Ñ·s_max), not O(ÑK)
(an outside review: at K = 1000 the scan was most of a SoLar step).  Rows are listed when a solve first takes
the sparse path (``unlisted`` marks those not listed yet), once each: a batch listed for its solve is copied
into its queue slots by the push.  A dense problem (CIFAR at φ = 0.5: density ≈ 0.55) lists nothing (a speed
review: listing every batch twice a step, for a list the dense path never reads, was ~10 % of a SoLar epoch on
synthetic-lt).

Layout: each buffer has ``rows + B`` rows; the queue's slots come first and the current batch is
written after them, so the problem [queue; batch] is the contiguous view ``[:rows + b]`` and needs no
copy. ``logc[:rows]`` is the refinery's ``state.queue``.

The number of rows written so far is kept on the host too (``filled``), so "is the queue full?" reads
nothing from the device; it is read from ``state.queue_filled`` once when a queue is restored.
"""

from __future__ import annotations

import weakref

import torch
from torch import Tensor

from pllzoo.syncs import host_reads_are_free
from pllzoo_solar.kernel import Kernel, RowKernel, build_kernel, candidate_entries, row_kernel, row_stats


class KernelQueue:
    """Ring buffers of kernel rows mirroring a queue of log-scores (``rows`` slots, batches ≤ ``batch``)."""

    def __init__(self, rows: int, batch: int, k: int, lam: float, device: torch.device,
                 queue: Tensor | None = None, filled: int = 0) -> None:
        self.rows, self.lam, self.filled = rows, lam, filled
        size = (rows + batch, k)
        self.logc = torch.full(size, float("-inf"), device=device)  # log-scores; [:rows] is the queue
        self.v = torch.full(size, float("-inf"), device=device)  # row-normalised log-kernel
        self.e = torch.zeros(size, device=device)  # exp(v)
        self.cand = torch.zeros(size, dtype=torch.bool, device=device)  # isfinite(v): candidates
        self.noncand = torch.ones(size, device=device)  # 1.0 outside the candidates (the relaxed kernel)
        self.shift = torch.full((size[0],), float("-inf"), device=device)  # row shifts
        self.stats = torch.zeros(3, k, dtype=torch.long, device=device)  # RowKernel.stats of the queue rows
        self.shares = torch.zeros(rows, 3, k, dtype=torch.uint8, device=device)  # each slot's share of them
        self.queue = self.logc[:rows]  # the queue's log-scores [rows, K], one view object: ``state.queue``
        self._lent: weakref.ref[Kernel] | None = None  # the last kernel over the buffers, while alive
        # each row's candidate classes, ascending, padded (CPU only: the sparse path is the host's)
        self.listed = host_reads_are_free(torch.device(device))
        self.classes = torch.zeros(size[0], 1, dtype=torch.long, device=device)  # [rows + B, s_max]
        self.count = torch.zeros(size[0], dtype=torch.long, device=device)  # [rows + B] candidates per row
        self.unlisted = torch.zeros(size[0], dtype=torch.bool, device=device)  # rows whose classes are not listed
        self._staged = False  # kernel() wrote the batch the push takes next at [rows : rows + b]
        if queue is not None:  # a restored queue: its rows once (unwritten rows stay empty)
            self.logc[:rows] = queue
            rk = row_kernel(queue, lam, check=False, shares=True)
            v = torch.where(torch.isnan(rk.v), float("-inf"), rk.v)  # unwritten rows: -inf - (-inf)
            self.v[:rows], self.e[:rows], self.shift[:rows], self.cand[:rows] = v, v.exp(), rk.shift, v.isfinite()
            self.noncand[:rows] = (~v.isfinite()).float()
            self.shares = row_stats(v).to(torch.uint8)
            self.stats = self.shares.sum(0)
            self.unlisted[:rows] = True

    @property
    def full(self) -> bool:
        return self.filled >= self.rows

    def batch_rows(self, log_c: Tensor, check: bool) -> tuple[RowKernel, Tensor]:
        """The batch's kernel rows and their exp."""
        rk = row_kernel(log_c, self.lam, check=check, shares=True)
        return rk, rk.v.exp()

    def kernel(self, log_c: Tensor, rk: RowKernel, e: Tensor, r: Tensor, host: bool) -> tuple[Tensor, Kernel]:
        """The problem [queue; batch] if the queue is full, else the batch alone → (log-scores, kernel)."""
        if not self.full:
            return log_c, build_kernel(rk, r, m=e, host=host)
        lo, hi = self.rows, self.rows + log_c.shape[0]
        self.logc[lo:hi], self.v[lo:hi], self.e[lo:hi], self.shift[lo:hi] = log_c, rk.v, e, rk.shift
        self.cand[lo:hi], self.noncand[lo:hi] = rk.shares[:, 0], 1 - rk.shares[:, 0]
        entries = None
        if self._listing(host):
            self.unlisted[lo:hi] = True
            self._staged = True
            entries = lambda: self._entries(hi)  # noqa: E731  (listed only if the solve takes the sparse path)
        rows = RowKernel(self.v[:hi], self.shift[:hi], self.stats + rk.stats)
        kernel = build_kernel(rows, r, m=self.e[:hi], cand=self.cand[:hi], noncand=self.noncand[:hi],
                              entries=entries, host=host)
        self._lent = weakref.ref(kernel)
        return self.logc[:hi], kernel

    def push(self, log_c: Tensor, rk: RowKernel, e: Tensor, slots: Tensor) -> None:
        """Write the batch's rows into ``slots`` (long ``[b']``, the last b' rows of the batch).

        A kernel handed out by :meth:`kernel` views these buffers; if it is still referenced (a caller
        kept its result), it gets its own copy first.  The refinery drops its references before the push.
        """
        b = slots.shape[0]
        lent = self._lent() if self._lent is not None else None
        if lent is not None:  # a result that outlives its step (tests keep them) keeps its rows
            lent.freeze()
        log_c, v, e, shift = log_c[-b:], rk.v[-b:], e[-b:], rk.shift[-b:]
        shares = rk.shares[-b:].to(torch.uint8)  # [b, 3, K]
        self.stats += shares.sum(0) - self.shares.index_select(0, slots).sum(0)  # the rows overwritten leave
        for buf, rows in ((self.logc, log_c), (self.v, v), (self.e, e), (self.shift, shift), (self.shares, shares),
                          (self.cand, shares[:, 0].bool()), (self.noncand, (1 - shares[:, 0]).float())):
            buf.index_copy_(0, slots, rows)
        staged, self._staged = self._staged, False
        if self._listing(host_reads_are_free(log_c.device)):
            if staged:  # these rows, as kernel() wrote them after the queue's
                hi = self.rows + log_c.shape[0]
                src = torch.arange(hi - b, hi, device=slots.device)
                for buf in (self.classes, self.count, self.unlisted):
                    buf.index_copy_(0, slots, buf.index_select(0, src))
            else:
                self.unlisted.index_fill_(0, slots, True)
        self.filled = min(self.filled + b, self.rows)

    def _listing(self, host: bool) -> bool:
        """Whether to keep listing the candidates: while host reads are free (the list's width is read on the host);
        once they are not (a device, ``pllzoo.syncs.count_syncs``), never again, as rows went unlisted."""
        self.listed = self.listed and host
        return self.listed

    def _list(self, cand: Tensor, slots: Tensor) -> None:
        """Write the candidate classes of rows ``cand`` (bool [b, K]) into ``slots`` of :attr:`classes`, widening
        it when a row has more candidates than any before (O(bK))."""
        count = cand.sum(1)  # [b]
        width = int(count.max()) if count.numel() else 0
        if width > self.classes.shape[1]:
            wider = self.classes.new_zeros(self.classes.shape[0], width)
            wider[:, :self.classes.shape[1]] = self.classes
            self.classes = wider
        row, col = candidate_entries(cand)
        place = torch.arange(row.numel(), device=row.device) - (torch.cumsum(count, 0) - count)[row]
        padded = self.classes.new_zeros(cand.shape[0], self.classes.shape[1])
        padded[row, place] = col
        self.classes.index_copy_(0, slots, padded)
        self.count.index_copy_(0, slots, count)

    def _entries(self, hi: int) -> tuple[Tensor, Tensor]:
        """The candidates of rows ``:hi`` as (row, class) pairs sorted by (row, class) (O(hi·s_max)), listing
        first the rows not listed yet."""
        todo = self.unlisted[:hi].nonzero().view(-1)
        if todo.numel():
            self._list(self.cand.index_select(0, todo), todo)
            self.unlisted[todo] = False
        count = self.count[:hi]
        listed = torch.arange(self.classes.shape[1], device=count.device) < count[:, None]  # [hi, s_max]
        rows = torch.repeat_interleave(torch.arange(hi, device=count.device), count)
        return rows, self.classes[:hi][listed]
