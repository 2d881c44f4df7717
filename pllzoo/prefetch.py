"""Strong views computed ahead of the training loop, by worker processes.

The strong views (RandAugment + Cutout, PiCO's SimCLR view) run on PIL images one sample at a
time (:mod:`pllzoo.augment`).  In the loop they are most of a GPU epoch: SoLar's ResNet-18 epoch on
an H200 took 7.7 s, PRODEN's without a strong view 1.4 s (``benchmarks/gpu``).  A
:class:`ViewPool` hands each batch's raw images to worker processes a few batches ahead, in chunks
of :data:`CHUNK` rows, so the loop waits only when the workers fall behind.

Randomness.  Chunk ``c`` of batch ``b`` is ``view(rows, torch.Generator().manual_seed(
derive_seed(seed, b, c)))``, with ``seed`` the trainer's per-(stage, epoch) view seed.  The output
depends on the seed, the epoch's permutation and :data:`CHUNK`, never on the number of workers or
on timing.  It is not the in-loop stream, which draws the strong view from the epoch generator in
between the weak view and the step's own draws: a pooled run and an in-loop run of one seed differ,
each reproducibly.  The run's config records which stream it used (``view_stream``).
"""

from __future__ import annotations

import importlib
import multiprocessing as mp
import os
from collections import deque
from collections.abc import Iterator
from concurrent.futures import Future, ProcessPoolExecutor

import numpy as np
import torch

from pllzoo import augment, interrupts
from pllzoo.components import STRONG_INPUT
from pllzoo.errors import PLLZooError
from pllzoo.seeding import derive_seed

CHUNK = 64  # rows per task: part of the stream's definition, do not change lightly
MAX_AUTO_WORKERS = 8


def uses_pool(kind: str, views: frozenset[str], strong_view: augment.View) -> bool:
    """Whether a run computes a per-sample host view at all: image data, a component asks for the strong view,
    and the view carries :func:`pllzoo.augment.pooled` (the built-in PIL views; "weak" is one tensor op).

    :param strong_view: the registered view itself (``registry.view(name)``), not its name: an outside copy of a
        built-in is pooled as the built-in is (a review: the names were compared)."""
    return kind == "image" and bool(views & STRONG_INPUT) and augment.is_pooled(strong_view)


def resolve_workers(requested: int | None, device: str) -> int:
    """``None`` (auto): 0 on CPU, where the cores already train; on CUDA one per spare core, at most 8."""
    if requested is not None:
        if requested < 0:
            raise ValueError(f"view workers must be ≥ 0, got {requested}")
        return requested
    if not device.startswith("cuda"):
        return 0
    return max(1, min(MAX_AUTO_WORKERS, (os.cpu_count() or 2) - 1))


def _start_worker() -> None:
    torch.set_num_threads(1)  # one core per worker; the pool is the parallelism
    interrupts.ignore()  # a terminal's Ctrl-C, a batch system's signal to the group: the trainer's (clean stop)


def view_reference(view: augment.View) -> tuple[str, str] | None:
    """``(module, qualified name)`` by which a worker process imports ``view``, or None where that does not find
    ``view`` itself (a lambda, a nested function, a callable object)."""
    module, qualname = getattr(view, "__module__", None), getattr(view, "__qualname__", None)
    if not isinstance(module, str) or not isinstance(qualname, str):
        return None
    try:
        return (module, qualname) if _imported((module, qualname)) is view else None
    except Exception:  # noqa: BLE001 (what an attribute lookup on a module may raise)
        return None


def _imported(reference: tuple[str, str]) -> object:
    found: object = importlib.import_module(reference[0])
    for part in reference[1].split("."):
        found = getattr(found, part)
    return found


def view_chunk(reference: tuple[str, str], who: str, rows: np.ndarray, seed: int) -> np.ndarray:
    """One task: the view at ``reference`` (:func:`view_reference`: imported here, so that a failing import is
    this task's exception, not a worker's death; no registry to build in the worker) on uint8
    ``rows [n, C, H, W]`` with a generator seeded by ``seed``, held to the view contract as in the loop."""
    view = augment.checked_view(_imported(reference), who)  # type: ignore[arg-type]
    return view(torch.from_numpy(rows), torch.Generator().manual_seed(seed)).numpy()


class ViewPool:
    """A process pool that yields one epoch's strong views, batch by batch, computed ahead."""

    def __init__(self, view: augment.View, who: str, workers: int) -> None:
        """:param view: a registered view marked :func:`~pllzoo.augment.pooled`; ``who`` names it in messages
        (``view 'strong' (plugin pllzoo)``).
        :raises PLLZooError: one line, for a view the workers cannot import (a lambda, a nested function)."""
        reference = view_reference(view)
        if reference is None:
            raise PLLZooError(f"{who} is marked pooled but the view worker processes cannot import it (not found "
                              f"as {getattr(view, '__module__', '?')}.{getattr(view, '__qualname__', '?')}): make "
                              "it a module-level function, or run with --view-workers 0")
        method = "forkserver" if "forkserver" in mp.get_all_start_methods() else "spawn"  # no fork: CUDA is live
        self.reference, self.who, self.workers = reference, who, workers
        self.executor = ProcessPoolExecutor(workers, mp_context=mp.get_context(method), initializer=_start_worker)

    def batches(self, x: torch.Tensor, perm: torch.Tensor, batch_size: int, n_batches: int, seed: int
                ) -> Iterator[torch.Tensor]:
        """Yield the view of ``x[perm[b·B:(b+1)·B]]`` for b = 0 … n_batches−1, uint8 on the CPU.

        :param x: uint8 [N, C, H, W] on the CPU (the raw training images).
        :param perm: the epoch's permutation of range(N), on the CPU.
        """
        x_np, perm_np = x.numpy(), perm.numpy()
        n_chunks = -(-batch_size // CHUNK)
        ahead = max(2, -(-2 * self.workers // n_chunks))  # enough tasks queued to keep every worker busy

        def submit(b: int) -> list[Future]:
            rows = x_np[perm_np[b * batch_size : (b + 1) * batch_size]]
            return [self.executor.submit(view_chunk, self.reference, self.who, rows[i : i + CHUNK],
                                         derive_seed(seed, b, i // CHUNK))
                    for i in range(0, len(rows), CHUNK)]

        pending = deque(submit(b) for b in range(min(ahead, n_batches)))
        for b in range(n_batches):
            futures = pending.popleft()
            if b + ahead < n_batches:
                pending.append(submit(b + ahead))
            yield torch.from_numpy(np.concatenate([self._result(f) for f in futures]))

    def _result(self, future: Future) -> np.ndarray:
        """A task's views; what failed in a worker is one line naming the view (its own one line as it is)."""
        try:
            return future.result()
        except PLLZooError:
            raise
        except Exception as exc:  # e.g. the worker could not import the view's module, or died
            from pllzoo.plugins import one_line

            raise PLLZooError(f"{self.who} failed in a view worker process: {one_line(exc)}") from exc

    def close(self) -> None:
        self.executor.shutdown(wait=True, cancel_futures=True)
