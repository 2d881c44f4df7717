"""The objects the trainer hands to component hooks: Run, Stage, Batch, Step, TrainConfig."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Literal

import torch

from pllzoo.distributed import SINGLE, DistContext
from pllzoo.hparams import hp

if TYPE_CHECKING:  # pragma: no cover
    from pllzoo.data.base import PLLData


@dataclass(frozen=True)
class TrainConfig:
    """Trainer hyper-parameters (``--hp train.<field>=value``); defaults come from the dataset."""

    model: str = hp("linear", "backbone: a registered model (pllzoo_register_models; `pllzoo plugins --json` lists them)")
    epochs: int = hp(10, "epochs of the final stage; also the LR-schedule horizon", ge=1)
    lr: float = hp(0.01, "SGD learning rate", gt=0)
    weight_decay: float = hp(1e-4, "SGD weight decay (all parameters, as the reference code)", ge=0)
    momentum: float = hp(0.9, "SGD momentum", ge=0, lt=1)
    batch_size: int = hp(256, "training batch size", ge=1)
    schedule: str = hp("constant", "LR schedule: constant | step | cosine",
                           choices=("constant", "step", "cosine"))
    milestones: tuple[int, ...] = hp((), "step schedule: decay by lr_decay after these epochs", ge=0)
    lr_decay: float = hp(0.1, "step schedule decay factor", gt=0)
    cosine_min_factor: float = hp(1e-3, "cosine schedule: lr_min = lr * factor (SoLar: 0.1**3)", ge=0, le=1)
    drop_last: bool = hp(True, "drop the last incomplete batch (the reference loaders do)")
    weak_view: str = hp("weak", "weak-view augmentation: a registered view (pllzoo_register_views)")
    strong_view: str = hp("strong", "strong-view augmentation, forwarded only if a component asks")
    eval_batch_size: int = hp(1024, "batch size of evaluation and estimation passes", ge=1)
    amp: bool = hp(True, "autocast the network on CUDA (label maths stays float32)")
    checkpoint_every: int = hp(0, "bookkeeping: checkpoint every N epochs (0: off); always at a stage's end", ge=0)
    checkpoint_minutes: float = hp(10.0, "bookkeeping: checkpoint once M minutes passed since the last one (0: off)",
                                  ge=0)
    compile: str = hp("none", "torch.compile the network: none | default | reduce-overhead (CUDA graphs per "
                      "fixed pass size: on a GPU 2-3x faster an epoch after 20-45 s of compiling, "
                      "benchmarks/gpu/README.md)", choices=("none", "default", "reduce-overhead"))
    mixup_rows: str = hp("auto", "mixup over a subset of the batch (SoLar's reliable rows): exact (a pass over the "
                         "subset's rows) | padded (a pass of the batch's fixed size, BatchNorm over the subset: "
                         "the same maths, no host read, CUDA-graph friendly) | auto (padded under "
                         "compile=reduce-overhead in one process)", choices=("auto", "exact", "padded"))
    view_batches: int = hp(0, "compute the training views of N batches in one call (on CUDA: fewer, larger "
                           "kernel launches); 0: 16 on CUDA, 1 on CPU; the view stream depends on N", ge=0)
    sync_bn: bool = hp(False, "under torchrun (G > 1 processes): BatchNorm statistics over the global batch "
                       "(SyncBatchNorm, CUDA only); no effect in one process")
    model_args: tuple[str, ...] = hp((), "the backbone's own arguments, NAME=VALUE each: set them with --hp "
                                     "model.NAME=VALUE (pllzoo.model_args)")


BOOKKEEPING_FIELDS = frozenset({"checkpoint_every", "checkpoint_minutes"})
"""TrainConfig fields that decide when checkpoints are written and never change a number: left out
of the hashed run config (:func:`pllzoo.bench.plan`, so ``--resume`` finds the run under any
setting) and recorded in the run's env.json instead."""

HASHED_UNLESS_DEFAULT = frozenset({"compile", "sync_bn", "mixup_rows", "view_batches", "model_args"})
"""TrainConfig fields added after runs were recorded: part of the run id only when set to something
other than their default, so the recorded runs keep their ids (:func:`pllzoo.bench.plan`)."""


@dataclass(frozen=True)
class Stage:
    """One training stage; each re-initialises model, optimizer and state except ``carry``.

    A component plans stages with ``pllzoo_stages``; without a plan a run has one stage, ``train``.
    """

    name: str = "train"  # shown in records and logs
    epochs: int | None = None  # None: run.config.epochs
    carry: tuple[str, ...] = ()  # state keys kept from the previous stage
    params: dict[str, Any] = field(default_factory=dict)  # per-stage method parameters
    reinit_model: bool = True  # False: the network keeps the previous stage's weights
    index: int = 0  # set by the trainer


@dataclass
class Batch:
    """One training batch (``step.batch``).  ``y_true`` is for logging only; learning must not read it."""

    index: torch.Tensor  # long [B] positions in the training set
    x: torch.Tensor  # float [B, ...] weak view, normalised
    candidates: torch.Tensor  # float32 [B, K] 0/1
    y_true: torch.Tensor  # long [B] true labels, for logging only: learning must not read them
    x_strong: torch.Tensor | None = None  # float [B, ...] strong view when asked for

    @property
    def size(self) -> int:
        """B, the number of samples in the batch."""
        return int(self.index.shape[0])


@dataclass
class Step:
    """Everything one training step shares between the components of a run (the ``step`` argument).

    The trainer fills it before ``pllzoo_label_update`` and adds ``targets`` and ``mask`` as the roles
    answer.  Views beyond the weak one cost a forward pass, so they are computed only when a component
    of the run asks for them: ``views = frozenset({"strong", "features"})`` on the class (or on the
    instance, e.g. from ``self.hp``) gives ``batch.x_strong``, ``logits_strong`` and ``features``.
    """

    batch: Batch  # the batch (below)
    logits: torch.Tensor  # [B, K] weak view, with grad (float32)
    probs: torch.Tensor  # float32 [B, K] softmax(logits), detached
    forward: Callable[[torch.Tensor], torch.Tensor]  # logits [B, K] of another input (train mode, with grad)
    generator: torch.Generator  # the run's host RNG stream for in-step randomness (mixup, ...)
    epoch: int  # epoch within the stage, from 0
    stage: Stage  # the current stage (as run.stage)
    nominal_batch_size: int  # train.batch_size (the last batch may be smaller without drop_last)
    logits_strong: torch.Tensor | None = None  # [B, K] when a component declared views={"strong"}
    features: torch.Tensor | None = None  # [B, F] encoder output of the weak view (views={"features"})
    targets: torch.Tensor | None = None  # set after pllzoo_label_update
    trained_targets: torch.Tensor | None = None  # float [B, K], set by a loss that trains on other targets than
    # ``targets`` (PiCO's W after the update its loss makes): the epoch's training-label accuracy tallies these in
    # their place (as it does the targets: only where the label update is not neutral); checked as targets
    mask: torch.Tensor | None = None  # set after pllzoo_select
    scratch: dict[str, torch.Tensor] = field(default_factory=dict)  # this step's values shared between hooks;
    # a key one component writes and another reads is declared in provides/needs like a state key
    device_generator: torch.Generator | None = None  # on-device stream (draws that stay on the device);
    # the same object as ``generator`` on CPU, a CUDA generator on CUDA
    logs: dict[str, torch.Tensor | float] = field(default_factory=dict)  # scalars: epoch mean ("*_count": sum)
    features_strong: torch.Tensor | None = None  # [B, F] encoder output of the strong view (views "strong" and
    # "features" both declared)
    forward_with_features: Callable[[torch.Tensor], tuple[torch.Tensor, torch.Tensor]] | None = None  # x ->
    # (logits [B, K], features [B, F]) of another input, train mode, with grad (e.g. a second head on mixup)
    logit_offset: torch.Tensor | None = None  # float [K] or [B, K]: what ``pllzoo_logit_offset`` answered
    dist: DistContext = SINGLE  # the processes training the run (pllzoo.distributed): under torchrun the batch
    # is this rank's slice of the global batch; form batch statistics over the global one (dist.batch_mean)
    forward_padded: Callable[[torch.Tensor, torch.Tensor], torch.Tensor] | None = None  # (x [B, ...], row
    # weights float [B] 0/1) -> logits [B, K], train mode, with grad, BatchNorm statistics over the weighted rows
    # only (pllzoo.masked_bn): a subset's pass at the batch's fixed shape.  None unless train.mixup_rows asks
    # for it (one process); pllzoo.mixup.mixup_loss uses it over ``rows``

    def label_probs_of(self, logits: torch.Tensor) -> torch.Tensor:
        """The probabilities a label update reads for ``logits`` of this batch: ``softmax(z − offset)``
        with the run's logit offset (RECORDS' ``log π̂``), ``softmax(z)`` without one; detached, float32."""
        return torch.softmax(self._label_logits(logits), dim=1)

    def _label_logits(self, logits: torch.Tensor) -> torch.Tensor:
        """``logits`` detached, float32, minus the run's logit offset when it has one."""
        z = logits.detach().float()
        return z if self.logit_offset is None else z - self.logit_offset

    def label_log_probs_of(self, logits: torch.Tensor) -> torch.Tensor:
        """``log`` of :meth:`label_probs_of`, as a log-softmax (finite where the probabilities underflow)."""
        return torch.log_softmax(self._label_logits(logits), dim=1)

    @property
    def label_probs(self) -> torch.Tensor:
        """:meth:`label_probs_of` the weak view: ``step.probs`` itself when the run has no logit offset."""
        return self.probs if self.logit_offset is None else self.label_probs_of(self.logits)


@dataclass
class Run:
    """The run as components see it (the ``run`` argument): data, config, device, current stage and helpers."""

    data: PLLData  # the dataset: x_train, candidates, train_counts, num_classes, kind (y_train: evaluation only)
    candidates: torch.Tensor  # bool [N, K] on device
    config: TrainConfig  # the resolved trainer hyper-parameters (``--hp train.<field>=value``)
    device: torch.device  # where the model, the state and every batch live
    seed: int  # the run's seed; derive any component randomness from it (pllzoo.seeding.derive_seed)
    stage: Stage = field(default_factory=Stage)  # the current stage (its index set)
    model: torch.nn.Module | None = None  # the current stage's network, a pllzoo.models.PLLNet: .encoder,
    # .head (Linear F -> K), .feature_dim (F), .features(x) [B, F], .forward_with_features(x) (logits, features)
    predict_train: Callable[[], torch.Tensor] = lambda: torch.empty(0)  # () -> eval-mode softmax [N, K] over the
    # training set (test transform), float32
    embed_train: Callable[..., torch.Tensor] = lambda train_mode=False: torch.empty(0)  # (train_mode=False) ->
    # encoder features [N, F] of the training set (test transform), float32
    modules: dict[str, torch.nn.Module] = field(default_factory=dict)  # the stage's extra modules
    # (``pllzoo_modules``), named "<slot>.<name>", set right after that hook: a predict component may use
    # a head the loss trains (run.modules["loss.tail"])
    dist: DistContext = SINGLE  # the processes training the run (pllzoo.distributed); world 1 without torchrun

    @property
    def num_classes(self) -> int:
        """K, the number of classes."""
        return self.data.num_classes

    @property
    def num_train(self) -> int:
        """N, the number of training samples (the rows of per-sample state tables)."""
        return self.data.num_train

    @property
    def kind(self) -> Literal["image", "tabular"]:
        """``"image"`` or ``"tabular"`` (tabular data has no strong view)."""
        return self.data.kind
