"""What the trainer does differently under G > 1 processes (``docs/distributed.md``): the rules in one place.

* :func:`check_ready` — before training: every component of the run opted in
  (``distributed = True``), its ``sync`` declarations are valid, and the batch splits into G
  equal slices; otherwise one :class:`~pllzoo.errors.PLLZooError` line naming what is not ready.
* :func:`rank_slice` — D1: rank g trains on the contiguous slice ``[g·b, (g+1)·b)`` of the global
  batch, so :meth:`~pllzoo.distributed.DistContext.gather` gives the 1-process batch in order.
* :class:`DataParallelNet` — the network's training passes (``forward``, ``forward_with_features``)
  through :class:`torch.nn.parallel.DistributedDataParallel` (gradients averaged over ranks: the
  gradient of the global-batch mean for per-sample-mean losses, D5), optionally with SyncBatchNorm.
* :func:`sync_rows` — D2: after ``pllzoo_post_step``, the rows of every ``"rows"`` table written at
  the ranks' batch indices are all-gathered and scattered into every replica.
* :func:`broadcast_modules`, :func:`average_grads` — the components' extra modules (``pllzoo_modules``:
  HTC's tail classifier and weighting module, ...) are not wrapped in DDP: they are called on
  features (outputs of the DDP network) several times a step and by the predictor, and one DDP
  wrapper per module would need one reducer each.  Instead the trainer does by hand what DDP does for
  the network: rank 0's parameters and buffers are broadcast when the stage's modules are collected,
  and after each backward their gradients are averaged over ranks (one all-reduce of all of them,
  flattened), before the optimizer step.  For per-sample-mean losses this is the gradient of the
  global-batch mean, as for the network (D5).  A parameter that no rank's backward reached keeps no
  gradient (as in one process, the optimizer skips it); a module that shares parameters with the
  network gets them averaged twice, which changes nothing (the ranks' gradients are already equal).
"""

from __future__ import annotations

from typing import Mapping

import torch

from pllzoo.components import SYNC_MODES, Component, is_distributed, label
from pllzoo.distributed import DistContext
from pllzoo.errors import PLLZooError
from pllzoo.run import TrainConfig
from pllzoo.state import PLLState


NOT_READY_ADVICE = ("run it in one process; a component correct under DDP says so with `distributed = True` on its "
                    "class (docs/distributed.md, 'For component authors', which also lists the methods that are)")


def not_ready(components: Mapping[str, Component]) -> str:
    """The components that have not opted in to DDP, ``"slot 'name' (plugin 'p')"`` joined by commas; '' if none."""
    return ", ".join(f"{slot} {label(c)!r}" for slot, c in components.items() if not is_distributed(c))


def check_ready(dist: DistContext, components: Mapping[str, Component], config: TrainConfig) -> None:
    """Refuse, before training, a run that would not be the 1-process run under ``dist.world`` processes.

    :raises PLLZooError: one line: components that did not opt in, a bad ``sync`` declaration, a
        batch size not divisible by the world size, or ``train.drop_last=false``.
    """
    if not dist.active:
        return
    g = dist.world
    if not_ready(components):
        raise PLLZooError(f"not ready for {g} processes (DDP): {not_ready(components)}; {NOT_READY_ADVICE}")
    for slot, comp in components.items():
        for key, mode in comp.sync.items():
            if mode not in SYNC_MODES or key not in comp.provides:
                raise PLLZooError(f"{slot} {label(comp)!r}: sync[{key!r}] = {mode!r}; declare a key it provides "
                                  f"with one of {', '.join(SYNC_MODES)}")
    if config.batch_size % g:
        raise PLLZooError(f"train.batch_size {config.batch_size} is not divisible by the {g} processes; "
                          f"pick a multiple of {g} (each process trains on batch_size / {g})")
    if not config.drop_last:
        raise PLLZooError(f"train.drop_last=false under {g} processes: the last, smaller batch would not split "
                          "into equal slices; keep drop_last=true")


def rank_slice(global_idx: torch.Tensor, dist: DistContext) -> torch.Tensor:
    """This rank's contiguous slice ``[g·b, (g+1)·b)`` of the global batch's indices ``[B]`` → ``[b]`` (D1)."""
    if not dist.active:
        return global_idx
    b = global_idx.shape[0] // dist.world
    return global_idx[dist.rank * b : (dist.rank + 1) * b]


def row_keys(components: Mapping[str, Component]) -> list[str]:
    """The state keys declared ``"rows"`` by a run's components, sorted (the same order on every rank)."""
    return sorted(k for c in components.values() for k, mode in c.sync.items() if mode == "rows")


@torch.no_grad()
def sync_rows(state: PLLState, keys: list[str], idx: torch.Tensor, dist: DistContext) -> None:
    """Scatter every rank's rows ``state[key][idx]`` into every replica of ``state[key]`` (D2).

    Within a step the ranks' indices are disjoint (D1), so the order of the scatter does not matter;
    one gather of the indices ``[B]`` and one of the rows ``[B, ...]`` per key.  A key the state does not hold
    in this stage (VALEN's d during its warm-up) is skipped; the state's keys are the same on every rank.
    """
    if not dist.active or not keys:
        return
    idx_all = dist.gather(idx)  # [B]
    for key in keys:
        if key not in state:
            continue
        table = getattr(state, key)  # [N, ...]
        table[idx_all] = dist.gather(table[idx])


@torch.no_grad()
def broadcast_modules(modules: Mapping[str, torch.nn.Module], dist: DistContext) -> None:
    """Rank 0's parameters and buffers of the extra modules on every rank (as DDP does for the network)."""
    if not dist.active:
        return
    for name in sorted(modules):  # the same order on every rank
        for tensor in modules[name].state_dict().values():
            tensor.copy_(dist.broadcast(tensor))


@torch.no_grad()
def average_grads(params: list[torch.nn.Parameter], dist: DistContext) -> None:
    """Every parameter's gradient averaged over ranks, in place: one all-reduce of the flattened gradients
    and a reached-flag per parameter (a parameter no rank's backward reached keeps ``grad = None``)."""
    if not dist.active or not params:
        return
    grads = [p.grad.reshape(-1).float() if p.grad is not None else p.new_zeros(p.numel(), dtype=torch.float32)
             for p in params]
    reached = torch.tensor([float(p.grad is not None) for p in params], device=grads[0].device)
    total = dist.all_reduce_sum(torch.cat([*grads, reached]))
    sizes = [p.numel() for p in params]
    summed, flags = total[: sum(sizes)].split(sizes), total[sum(sizes):]
    for p, g, flag in zip(params, summed, flags.tolist()):
        p.grad = (g / dist.world).view_as(p).to(p.dtype) if flag > 0 else None


class DataParallelNet(torch.nn.Module):
    """A :class:`~pllzoo.models.PLLNet`'s training passes under DDP: ``net(x)`` → logits,
    ``net(x, features=True)`` → ``(logits, features)``, each through DDP's forward, so its gradient
    hooks fire once per backward however many passes a step makes.  Evaluation uses the bare network.
    """

    class _Passes(torch.nn.Module):
        def __init__(self, model: torch.nn.Module) -> None:
            super().__init__()
            self.model = model

        def forward(self, x: torch.Tensor, features: bool = False):
            return self.model.forward_with_features(x) if features else self.model(x)

    def __init__(self, model: torch.nn.Module, dist: DistContext, sync_bn: bool = False) -> None:
        super().__init__()
        if sync_bn:
            torch.nn.SyncBatchNorm.convert_sync_batchnorm(model)  # in place for the BN layers' replacements
        ids = [dist.device.index] if dist.device is not None and dist.device.type == "cuda" else None
        self.ddp = torch.nn.parallel.DistributedDataParallel(self._Passes(model), device_ids=ids)

    def forward(self, x: torch.Tensor, features: bool = False):
        return self.ddp(x, features=features)
