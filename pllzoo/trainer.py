"""The one training loop.  It knows no method by name: components answer its hooks.

Per step: weak view (and strong view if a component asks) → network (autocast on
CUDA) → float32 softmax → ``pllzoo_label_update`` → ``pllzoo_select`` →
``pllzoo_loss`` → SGD step → ``pllzoo_post_step``.  A role hook is called on its
slot's component only, a lifecycle hook on every component that implements it
(in pluggy's order); answers are checked (:mod:`pllzoo.checks`) and an exception
inside a hook names its component.  Per epoch: LR from the
schedule, ``pllzoo_on_epoch_start``, the steps, ``pllzoo_on_epoch_end``,
evaluation (``pllzoo_predict``), one record, and a checkpoint when one is due
(``train.checkpoint_every`` epochs or ``train.checkpoint_minutes``, and at the end of
each stage).  Before each epoch a SIGINT/SIGTERM or a deadline the epoch would miss
stops the run cleanly with a checkpoint (:mod:`pllzoo.checkpoint`).

Randomness: every stream is derived from ``(seed, stage, epoch)`` and the run's
generators are checkpointed, so on CPU a run is bit-deterministic and a resumed
run equals an uninterrupted one.  With ``view_workers`` > 0 the strong view comes
from worker processes and its own stream (:mod:`pllzoo.prefetch`).  With ``train.view_batches``
N > 1 (the CUDA default, 16) the views of N batches are drawn in one call before their steps
(fewer, larger kernel launches; another stream than N = 1, the CPU default).

Under torchrun (``dist.world`` = G > 1, :mod:`pllzoo.distributed`, :mod:`pllzoo.ddp`): every rank
draws the epoch's permutation as one process does and trains on its contiguous slice of each global
batch of ``train.batch_size`` (B/G rows); the network's training passes go through DDP; after
``pllzoo_post_step`` the ``"rows"`` tables are synchronised; the components' extra modules start from
rank 0's values and their gradients are averaged over ranks after each backward; the epoch's loss and step logs are
averaged over ranks.  Evaluation runs on every rank over the full test set (identical replicas give
identical numbers, no collective).  Rank 0 alone writes checkpoints and calls ``on_epoch``/``on_resume``;
on resume it reads the checkpoint and broadcasts it, so G may differ from the run that wrote it.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import math
import time
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

import torch

from pllzoo import augment, ddp, distributed, masked_bn, prefetch
from pllzoo.checks import (check_grads, check_logits, check_loss, check_offset, check_selection, check_targets,
                           describe, epoch_logs, fails_on_one_row, one_row_error, one_row_step, reserved_clash,
                           step_log, step_logs)
from pllzoo.checkpoint import NAME as CHECKPOINT
from pllzoo.checkpoint import (Bookkeeper, CheckpointError, check_owner, lacks_momentum, load_checkpoint, restore_rng,
                               save_checkpoint, save_guess_s, signal_stop, stop_requested, stop_signals, time_stop)
from pllzoo.components import STRONG_INPUT, Component, is_neutral, single_answerers, views_of
from pllzoo.data.base import PLLData
from pllzoo.devices import compile_features, compile_model, graph_sizes
from pllzoo.errors import PLLZooError
from pllzoo.hookcalls import RunHooks, make_run_manager
from pllzoo.metrics import approximated_accuracy, covering_rate, evaluate, label_accuracy, label_tally, shot_groups
from pllzoo.models import build_model
from pllzoo.run import Batch, Run, Stage, Step, TrainConfig
from pllzoo.schedule import lr_at
from pllzoo.seeding import derive_seed
from pllzoo.state import PLLState, Scratch

if TYPE_CHECKING:  # pragma: no cover
    from pllzoo.registry import Registry


def _named(pairs: list[tuple[str, torch.Tensor | None]]) -> dict[str, torch.Tensor]:
    """``{name: tensor}`` for :attr:`pllzoo.hookcalls.RunHooks.inputs`: without the None ones, each tensor under
    its first name only (one change, one name)."""
    firsts: dict[int, tuple[str, torch.Tensor]] = {}
    for name, t in pairs:
        if t is not None:
            firsts.setdefault(id(t), (name, t))
    return dict(firsts.values())


class Trainer:
    """Trains one recipe on one dataset with one seed; ``fit()`` returns per-epoch records."""

    def __init__(
        self,
        data: PLLData,
        components: dict[str, Component],
        config: TrainConfig,
        seed: int,
        device: torch.device,
        run_dir: Path | None = None,
        record_base: dict[str, Any] | None = None,
        on_epoch: Callable[[list[dict[str, Any]]], None] | None = None,
        view_workers: int = 0,
        deadline: float | None = None,
        on_resume: Callable[[list[dict[str, Any]]], None] | None = None,
        check: bool = False,
        dist: distributed.DistContext | None = None,
        registry: Registry | None = None,
        run_id: str | None = None,
    ) -> None:
        # the processes training this run (None: this process's context, world 1 without torchrun)
        self.dist = dist if dist is not None else distributed.current()
        if self.dist.active and device.type == "cuda" and self.dist.device is not None:
            device = self.dist.device  # one GPU per rank: cuda:LOCAL_RANK
        ddp.check_ready(self.dist, components, config)
        self.row_keys = ddp.row_keys(components)  # "rows" tables synchronised after each step under G > 1
        # the run's own copy: a component that changes run.data or run.candidates in place (pruning candidates
        # through an alias, say) changes this run only, not the runs of a bench after it
        data = copy.deepcopy(data)
        self.data, self.config, self.seed, self.device = data, config, seed, device
        # bookkeeping (pllzoo.checkpoint): stop with a checkpoint before ``deadline`` (a checkpoint.clock() time);
        # ``on_resume(records)`` gets the checkpoint's records, as later ones are recomputed
        self.deadline, self.on_resume = deadline, on_resume
        self.components, self.pm = components, make_run_manager(components)
        self.hooks = self.pm.hook  # pluggy's callers (broadcast to every implementation)
        # who answers what (one stage planner, one logit offset, role hooks by their slot's component);
        # refused before training
        method = str((record_base or {}).get("method", "(unnamed)"))
        self.calls = RunHooks(self.pm, components, single_answerers(method, components))
        # check every step's answers on their values (the first step of each epoch is always checked):
        # result-neutral, but it reads device values on the host each step
        self.check = check
        self.run_dir, self.record_base, self.on_epoch = run_dir, dict(record_base or {}), on_epoch
        self.run_id = run_id  # written into each checkpoint: a checkpoint of another run is refused on resume
        self.views = views_of(components)
        self.strong_input = bool(self.views & STRONG_INPUT)  # batch.x_strong; forwarded only for "strong"
        self.image = data.kind == "image"
        self.x_train = data.x_train.to(device)
        self.x_test = data.x_test.to(device)
        self.y_train, self.y_test = data.y_train.to(device), data.y_test.to(device)
        self.candidates = data.candidates.to(device=device, dtype=torch.bool)
        self.x_val = data.x_val.to(device) if data.x_val is not None else None
        self.candidates_val = data.candidates_val.to(device, torch.bool) if data.candidates_val is not None else None
        self.groups = shot_groups(data.train_counts)
        # the targets' accuracy on the training rows (metrics.label_tally), where they are the method's own: not
        # the uniform targets of a method without a label update; those the loss trained on where it says
        # (step.trained_targets: PiCO's W after its loss's update, an outside review: one epoch behind otherwise)
        self.tally_labels = not is_neutral(components["label_update"])
        self.label_keys_own = False  # a component logs a label_acc* key itself (said once): its values stand
        self.epoch_tally: torch.Tensor | None = None  # [2, K] of the last training epoch, summed over ranks
        # backbone and views by name (None: the process-wide registry; a --jobs worker passes its own)
        self.registry = registry
        self.weak = augment.make_view(config.weak_view if self.image else "none", "train.weak_view", registry)
        strong = augment.registered_view(config.strong_view if self.image else "none", "train.strong_view", registry)
        self.strong = augment.checked_view(*strong)
        pooled = view_workers > 0 and prefetch.uses_pool(data.kind, self.views, strong[0])
        self.pooled_view = strong  # (view, its name in messages): what the pool's workers compute
        self.view_workers = view_workers if pooled else 0  # > 0: the strong view is computed ahead
        self.view_pool: prefetch.ViewPool | None = None
        self.amp = config.amp and device.type == "cuda"
        self.channels_last = self.image and device.type == "cuda"  # with bf16 autocast: tensor-core friendly
        if self.image:  # normalisation constants live on the device: no host copy per batch
            self.norm = (torch.tensor(data.mean, dtype=torch.float32).view(-1, 1, 1).to(device),
                         torch.tensor(data.std, dtype=torch.float32).view(-1, 1, 1).to(device))
        self.run = Run(data=data, candidates=self.candidates, config=config, device=device, seed=seed, dist=self.dist)
        self.run.predict_train, self.run.embed_train = self.predict_train, self.embed_train
        # what no hook may change in place (pllzoo.hookcalls.RunHooks.inputs): the data the run and the
        # evaluation read (on CPU the trainer's tensors are these very ones); each step adds its own
        self.run_inputs = _named([("run.candidates", self.candidates)] + [(f"run.data.{k}", getattr(data, k)) for k in (
            "x_train", "y_train", "candidates", "x_test", "y_test", "x_val", "candidates_val")] + [
            ("the trainer's x_train", self.x_train), ("the trainer's y_test", self.y_test),
            ("the trainer's x_test", self.x_test)])  # (its device copies; on CPU the same tensors: named once)
        self.calls.inputs = self.run_inputs
        self.state = PLLState()
        self.state.set_owners({k: (slot, describe(slot, c)) for slot, c in components.items() for k in c.provides},
                              {slot: c.needs for slot, c in components.items()})
        self.model: torch.nn.Module | None = None
        self.net: torch.nn.Module | None = None  # the training passes: the model, or DDP around it (G > 1)
        self.row_masks: masked_bn.RowMasks | None = None  # padded subset passes (train.mixup_rows)
        self._features_pass: Callable[[torch.Tensor], tuple[torch.Tensor, torch.Tensor]] | None = None  # compiled
        # alike the network's call (pllzoo.devices.compile_features)
        self.optimizer: torch.optim.Optimizer | None = None

    # ------------------------------------------------------------------ helpers
    def _autocast(self):
        if self.amp:
            return torch.autocast("cuda", dtype=torch.bfloat16)
        return contextlib.nullcontext()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        with self._autocast():
            return self.net(x).float()

    def forward_with_features(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        with self._autocast():
            logits, feats = self.net(x, features=True) if self.dist.active else self._features_pass(x)
        return logits.float(), feats.float()

    def _padded_rows(self) -> bool:
        """Whether subset passes run at the batch's fixed shape (``train.mixup_rows``; one process only: under
        torchrun a mixup over R mixes across ranks, :mod:`pllzoo.mixup`)."""
        mode = self.config.mixup_rows
        if mode == "auto":
            mode = "padded" if self.config.compile == "reduce-overhead" else "exact"
        return mode == "padded" and not self.dist.active

    def forward_padded(self, x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
        """Train-mode logits of ``x`` ``[B, ...]`` with BatchNorm's statistics over the rows of weight 1 (``Step.forward_padded``)."""
        with self.row_masks.applied(weight):
            return self.forward(x)

    def _views_forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Logits of a training view, and its features when a component asked for ``features``."""
        return self.forward_with_features(x) if "features" in self.views else (self.forward(x), None)

    def _normalize(self, x: torch.Tensor) -> torch.Tensor:
        """uint8 images → normalised float32 (channels-last on CUDA); tabular rows unchanged."""
        if not self.image:
            return x
        x = augment.normalize(x, *self.norm)
        return x.contiguous(memory_format=torch.channels_last) if self.channels_last else x

    def _prepare(self, x_raw: torch.Tensor, view: Callable, gen: torch.Generator) -> torch.Tensor:
        return self._normalize(view(x_raw, gen)) if self.image else x_raw

    @torch.no_grad()
    def _eval_logits(self, x: torch.Tensor, features: bool = False) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
        """Eval-mode logits of ``x`` ``[M, K]`` (and its features ``[M, F]`` when ``features``)."""
        self.model.eval()
        out = []
        for i in range(0, x.shape[0], self.config.eval_batch_size):
            xb = self._normalize(x[i : i + self.config.eval_batch_size])
            with self._autocast():
                if features:
                    logits, feats = self.model.forward_with_features(xb)
                    out.append((logits.float(), feats.float()))
                else:
                    out.append(self.model(xb).float())
        if features:
            return torch.cat([o[0] for o in out]), torch.cat([o[1] for o in out])
        return torch.cat(out)

    @torch.no_grad()
    def _predict_logits(self, x: torch.Tensor) -> torch.Tensor:
        """The deployed logits ``[M, K]``: the network's, or the method's adjusted ones (``pllzoo_predict``;
        with the features of ``x`` when the predict component declares ``views = {"features"}``)."""
        predictor = self.components.get("predict")
        if predictor is not None and "features" in predictor.views:
            logits, feats = self._eval_logits(x, features=True)
        else:
            logits, feats = self._eval_logits(x), None
        self.calls.inputs = {**self.run_inputs, **_named([("logits", logits), ("features", feats)])}  # (an answer
        # None means: the argmax of these logits)
        try:
            adjusted = self.calls.role("predict", logits=logits, state=self.state, features=feats)
        finally:
            self.calls.inputs = self.run_inputs
        if adjusted is None:  # no predict component (or it makes no adjustment)
            return logits
        check_logits("predict", self.components["predict"], adjusted, logits)
        return adjusted

    def _predict(self, x: torch.Tensor) -> torch.Tensor:
        """Predicted labels ``[M]``: the argmax of :meth:`_predict_logits`."""
        return self._predict_logits(x).argmax(dim=1)

    @torch.no_grad()
    def test_metrics(self) -> dict[str, Any]:
        """Accuracy (All/Many/Medium/Few, class-wise) of the current model on the test set, and, when there
        are held-out training rows, their covering rate ``val_covering`` and approximated accuracy
        ``val_approx`` (PLENCH's, from the deployed logits; both in %, from candidate sets only)."""
        metrics = evaluate(self._predict(self.x_test), self.y_test, self.groups)
        if self.x_val is not None:
            val_logits = self._predict_logits(self.x_val)
            metrics["val_covering"] = covering_rate(val_logits.argmax(dim=1), self.candidates_val)
            metrics["val_approx"] = approximated_accuracy(val_logits, self.candidates_val)
        return metrics

    def load_final(self, ckpt: dict[str, Any]) -> None:
        """Put the checkpointed model and method state of stage ``ckpt["stage"]`` in place (no training)."""
        stages = self.stages()
        if ckpt["stage"] >= len(stages):
            raise PLLZooError(f"checkpoint of stage {ckpt['stage']}, but this recipe has {len(stages)} stage(s): "
                              "it belongs to another run")
        self._enter_stage(stages[ckpt["stage"]])
        self._restore(ckpt)

    def predict_train(self) -> torch.Tensor:
        """Eval-mode softmax over the training set with the test transform, float32 ``[N, K]``."""
        return torch.softmax(self._eval_logits(self.x_train), dim=1)

    @torch.no_grad()
    def embed_train(self, train_mode: bool = False) -> torch.Tensor:
        """Encoder features of the training set (test transform), float32 ``[N, F]``.

        ``train_mode=True`` runs the network in train mode (BN batch statistics, as VALEN's
        official feature pass), in chunks of ``train.eval_batch_size`` rows (at least 2) where a last chunk of
        one row joins the one before (a one-row chunk made BatchNorm1d raise, an outside review); the network
        is left in eval mode either way.
        """
        self.model.train(train_mode)
        out, n = [], self.x_train.shape[0]
        size = max(self.config.eval_batch_size, 2 if train_mode else 1)  # train.eval_batch_size=1 too (a review)
        ends = list(range(size, n, size)) + [n]
        if train_mode and len(ends) > 1 and ends[-1] - ends[-2] == 1:
            del ends[-2]  # a one-row tail joins the chunk before: BatchNorm1d cannot normalise one row in train mode
        for i, j in zip([0] + ends[:-1], ends):
            xb = self._normalize(self.x_train[i:j])
            with self._autocast():
                out.append(self.model.features(xb).float())
        self.model.eval()
        return torch.cat(out)

    def stages(self) -> list[Stage]:
        plan = self.calls.stages(self.run) or [Stage()]
        return [dataclasses.replace(s, index=i) for i, s in enumerate(plan)]

    def _new_model(self, stage: Stage) -> None:
        if self.model is None or stage.reinit_model:
            torch.manual_seed(derive_seed(self.seed, "init", stage.index))
            self.model = build_model(self.config.model, self.data.num_classes, tuple(self.x_train.shape[1:]),
                                     self.registry, self.config.model_args)
            self.model.to(self.device)
            padded = self._padded_rows()
            self.row_masks = (masked_bn.install(self.model, self.config.batch_size)
                              if padded and masked_bn.supports(self.model) else None)
            if padded and self.row_masks is None and self.config.mixup_rows == "padded":
                warnings.warn(f"train.mixup_rows=padded: model {self.config.model!r} has normalisation layers other "
                              f"than BatchNorm1d/2d (pllzoo.masked_bn.supports); mixup over a subset runs exact",
                              stacklevel=2)
            if self.config.compile != "none":
                local = self.config.batch_size // self.dist.world
                evals = tuple(x.shape[0] for x in (self.x_train, self.x_test, self.x_val) if x is not None)
                sizes = graph_sizes(local, self.x_train.shape[0], self.config.drop_last, self.config.eval_batch_size,
                                    evals)
                compile_model(self.model, self.config.compile, sizes)
                self._features_pass = compile_features(self.model, self.config.compile, sizes)
            else:
                self._features_pass = self.model.forward_with_features
            self.net = (ddp.DataParallelNet(self.model, self.dist, self.config.sync_bn) if self.dist.active
                        else self.model)
        self.run.model = self.model

    def _collect_modules_and_optimizer(self) -> None:
        """Extra modules of the components (``pllzoo_modules``) join the optimizer and checkpoint."""
        self.modules: dict[str, torch.nn.Module] = {}
        owner = {id(p): "the network" for p in self.model.parameters()}
        for slot, offered in self.calls.all("pllzoo_modules", registration_order=True, run=self.run):
            who = describe(slot, self.components[slot])
            if not isinstance(offered, dict) or not all(
                    isinstance(k, str) and isinstance(m, torch.nn.Module) for k, m in offered.items()):
                other = " with other values" if isinstance(offered, dict) else ""
                raise PLLZooError(f"{who}: pllzoo_modules must return a dict of names to torch.nn.Module, got "
                                  f"{type(offered).__name__}{other}")
            for name, module in offered.items():
                shared = next((owner[id(p)] for p in module.parameters() if id(p) in owner), None)
                if shared is not None:  # the optimizer, DDP's averaging and weight decay would count them twice
                    raise PLLZooError(f"{who}: module {name!r} shares parameters with {shared}; offer modules of "
                                      "your own (use run.model to reach the network)")
                owner.update((id(p), f"module {slot}.{name}") for p in module.parameters())
                self.modules[f"{slot}.{name}"] = module.to(self.device)
        self.run.modules = dict(self.modules)  # any component may use another's module (HTC's ensemble)
        ddp.broadcast_modules(self.modules, self.dist)  # G > 1: rank 0's initial values (DDP does the network's)
        # G > 1: their gradients are averaged over ranks after each backward (pllzoo.ddp: not wrapped in DDP)
        self.module_params = [p for m in self.modules.values() for p in m.parameters() if p.requires_grad]
        params = list(self.model.parameters()) + [p for m in self.modules.values() for p in m.parameters()]
        # on CUDA one fused kernel updates every parameter: the foreach path's few dozen launches a step were
        # 1.6 ms of the launching thread in SoLar's graphed step (benchmarks/gpu/README.md, fourth session);
        # on the CPU torch's default, which the recorded CPU runs used
        self.optimizer = torch.optim.SGD(
            [p for p in params if p.requires_grad], lr=self.config.lr, momentum=self.config.momentum,
            weight_decay=self.config.weight_decay, fused=True if self.device.type == "cuda" else None,
        )

    # ------------------------------------------------------------------ the loop
    def fit(self, resume: bool = False) -> list[dict[str, Any]]:
        """Train (from the checkpoint when ``resume``); :class:`~pllzoo.checkpoint.Stopped` on a clean stop."""
        if self.view_workers:
            self.view_pool = prefetch.ViewPool(*self.pooled_view, self.view_workers)
        try:
            with stop_signals():
                return self._fit(resume)
        finally:
            if self.view_pool is not None:
                self.view_pool.close()
                self.view_pool = None

    def _enter_stage(self, stage: Stage) -> None:
        """A stage's fresh model (if it re-initialises), carried state, components' setup, optimizer."""
        self.run.stage = stage
        self._new_model(stage)
        self.state = self.state.keep(stage.carry)
        self.calls.all("pllzoo_setup_stage", run=self.run, state=self.state)
        self._collect_modules_and_optimizer()

    def _restore(self, ckpt: dict[str, Any]) -> None:
        """Model, optimizer, method state and extra modules from a checkpoint of the current stage.

        :raises PLLZooError: one line, when the checkpoint does not fit this run (another model, recipe, ...).
        """
        saved = set(ckpt.get("modules", {}))
        unknown, missing = sorted(saved - set(self.modules)), sorted(set(self.modules) - saved)
        try:
            if unknown:
                raise KeyError(f"extra module(s) {', '.join(unknown)}")
            if missing:  # else they would keep their fresh initialisation (HTC's tail classifier and A)
                raise KeyError(f"no saved state for module(s) {', '.join(missing)}")
            self.model.load_state_dict(ckpt["model"])
            self.optimizer.load_state_dict(ckpt["optimizer"])
            self.state.load_state_dict(ckpt["state"], self.device)
            for name, sd in ckpt.get("modules", {}).items():
                self.modules[name].load_state_dict(sd)
        except (RuntimeError, KeyError, ValueError, TypeError, AttributeError) as exc:
            text = str(exc.args[0]) if isinstance(exc, KeyError) and exc.args else str(exc)  # KeyError's repr quotes
            why = " ".join(line.strip() for line in text.splitlines() if line.strip())
            where = f"{self.run_dir / 'checkpoint.pt'}: " if self.run_dir is not None else ""
            raise PLLZooError(f"{where}checkpoint does not match this run ({why[:200] or type(exc).__name__}); "
                              "retrain the run") from None

    def _load(self, resume: bool) -> dict[str, Any] | None:
        """The checkpoint to resume from (RNG states restored): rank 0 reads it, the others receive it."""
        ckpt, refused = None, None
        if resume and self.run_dir is not None and self.dist.is_main:
            ckpt = load_checkpoint(self.run_dir)
            try:  # a checkpoint copied from another run is refused, not trained on
                if ckpt is not None:
                    check_owner(ckpt, self.run_dir / CHECKPOINT, run=self.run_id,
                                method=self.record_base.get("method"), dataset=self.record_base.get("dataset"),
                                seed=self.seed)
            except PLLZooError as exc:
                ckpt, refused = None, str(exc)
        if self.dist.active and resume:  # rank 0's checkpoint and verdict, so that every rank stops alike
            ckpt, refused = self.dist.broadcast_object((ckpt, refused))
            if ckpt is not None and not self.dist.is_main:
                restore_rng(ckpt)
        if refused is not None:
            raise CheckpointError(refused)
        return ckpt

    def _fit(self, resume: bool) -> list[dict[str, Any]]:
        ckpt = self._load(resume)
        records: list[dict[str, Any]] = list(ckpt["records"]) if ckpt else []
        if ckpt and self.on_resume:
            self.on_resume(records)
        keeper = Bookkeeper(self.config.checkpoint_every, self.config.checkpoint_minutes, self.deadline,
                            [r.get("wall_s", 0.0) for r in records])
        plan = self.stages()
        if ckpt and ckpt["stage"] >= len(plan):
            where = f"{Path(self.run_dir) / CHECKPOINT}: " if self.run_dir is not None else ""
            raise PLLZooError(f"{where}checkpoint of stage {ckpt['stage']}, but this recipe has {len(plan)} stage(s): "
                              "it belongs to another run")
        for stage in plan:
            if ckpt and stage.index < ckpt["stage"]:
                continue
            self._enter_stage(stage)
            n_epochs = stage.epochs if stage.epochs is not None else self.config.epochs
            start = 0
            restarted = False  # momentum restarts in this stage's first epoch after a slim checkpoint
            if ckpt and stage.index == ckpt["stage"]:
                self._restore(ckpt)
                restarted = lacks_momentum(ckpt) and ckpt["epoch"] + 1 < n_epochs
                if restarted and self.dist.is_main:
                    warnings.warn(f"resuming from a checkpoint without SGD momentum (slim): momentum restarts at "
                                  f"epoch {ckpt['epoch'] + 2} of stage {stage.name!r}, so this run no longer "
                                  "equals an uninterrupted one (its record says momentum_restarted)")
                start, ckpt = ckpt["epoch"] + 1, None
            for epoch in range(start, n_epochs):
                self._stop_if_asked(keeper, stage, epoch, records)
                keeper.epoch_started()
                record = self._epoch(stage, epoch, n_epochs, is_last=stage is plan[-1])
                if restarted:
                    record["momentum_restarted"] = True
                    restarted = False
                keeper.epoch_done()
                records.append(record)
                if keeper.due(stage_end=epoch == n_epochs - 1):
                    self._save(keeper, stage, epoch, records)
                if self.on_epoch and self.dist.is_main:
                    self.on_epoch(records)  # all records so far; the newest is records[-1]
        return records

    def _save(self, keeper: Bookkeeper, stage: Stage, epoch: int, records: list[dict[str, Any]]) -> None:
        if self.run_dir is not None and self.dist.is_main:  # rank 0 alone writes
            with keeper.saving():
                save_checkpoint(self.run_dir, stage.index, epoch, self.model, self.optimizer, self.state, records,
                                self.modules, run=self.run_id)

    def _stop_if_asked(self, keeper: Bookkeeper, stage: Stage, epoch: int, records: list[dict[str, Any]]) -> None:
        """Before an epoch: on a stop signal, or when it and a checkpoint would miss the deadline, checkpoint
        the boundary just reached (unless it is saved) and raise :class:`~pllzoo.checkpoint.Stopped`."""
        signum = stop_requested()
        parts = [self.model, self.optimizer, *self.modules.values()]
        asked = signum is not None or keeper.out_of_time(lambda: save_guess_s(*parts))
        # a collective decision: all ranks stop at the same boundary, and each says why
        votes, signalled, signums = self.dist.sum_ints([int(asked), int(signum is not None), signum or 0])
        if not votes:
            return
        if signum is None and signalled:  # another rank's signal (the same on each rank that got one)
            signum = signums // signalled
        if keeper.unsaved:  # epochs of this stage done since the last checkpoint: the boundary is epoch - 1
            self._save(keeper, stage, epoch - 1, records)
        last = records[-1] if records else None
        where = (f"after epoch {last['epoch']}/{last['epochs']} of stage {last['stage']!r}" if last
                 else "before the first epoch")
        raise signal_stop(where, signum) if signum is not None else time_stop(where)

    def _epoch(self, stage: Stage, epoch: int, n_epochs: int, is_last: bool) -> dict[str, Any]:
        t0 = time.perf_counter()
        torch.manual_seed(derive_seed(self.seed, "global", stage.index, epoch))
        lr = lr_at(self.config, epoch)
        for group in self.optimizer.param_groups:
            group["lr"] = lr
        self.calls.all("pllzoo_on_epoch_start", run=self.run, epoch=epoch, state=self.state)
        loss_sum, logs = self._train_epoch(stage, epoch)
        with torch.no_grad():
            extra: dict[str, Any] = {}
            logged_by: dict[str, str] = {}
            for slot, out in self.calls.all("pllzoo_on_epoch_end", run=self.run, epoch=epoch, state=self.state):
                out = epoch_logs(slot, self.components[slot], out)
                for key in out:
                    if key in logged_by:
                        raise PLLZooError(f"{describe(logged_by[key], self.components[logged_by[key]])} and "
                                          f"{describe(slot, self.components[slot])} both log {key!r} at epoch end")
                    logged_by[key] = slot
                extra.update(out)
            metrics = self.test_metrics()
            if self.epoch_tally is not None:  # before the test metrics in the record
                if not bool(torch.isfinite(self.epoch_tally).all()):  # (a review: a NaN record, its run "damaged")
                    raise PLLZooError(f"the training-label accuracy of {stage.name} epoch {epoch + 1} is not finite: "
                                      "the targets tallied (the label update's, or those a loss set in "
                                      "step.trained_targets) hold NaN or inf; rerun with --check to name the "
                                      "component")
                labels = label_accuracy(self.epoch_tally, self.groups)
                own = sorted(labels.keys() & (logs.keys() | extra.keys()))
                if own and not self.label_keys_own:  # logged before the trainer did: not a clash to refuse
                    self.label_keys_own = True
                    warnings.warn(f"{str(self.record_base.get('method', '(unnamed)'))}: a component logs {own[0]!r}, "
                                  "a key of the trainer's training-label accuracy; the record keeps the "
                                  "component's, and leaves the trainer's out", stacklevel=2)
                metrics = (labels if not own else {}) | metrics
        writers = {k: describe(s, self.components[s]) for k, s in logged_by.items()}
        reserved_clash({**logs, **extra}, {**metrics, **self.record_base}, writers,
                       str(self.record_base.get("method", "(unnamed)")))
        return {
            **self.record_base, "seed": self.seed, "stage": stage.name, "stage_index": stage.index,
            "epoch": epoch + 1, "epochs": n_epochs, "final_stage": is_last, "lr": lr,
            "loss": loss_sum, **logs, **extra, **metrics, "wall_s": round(time.perf_counter() - t0, 4),
        }

    def generators(self, stage: Stage, epoch: int) -> tuple[torch.Generator, torch.Generator]:
        """The epoch's ``(host, device)`` generators, both derived from ``(seed, stage, epoch)``.

        ``host`` is :attr:`Step.generator` (host-side draws such as a mixup coefficient); ``device``
        draws the permutation and the views.  On CPU they are one and the same generator, which
        keeps the recorded CPU stream; on CUDA ``device`` is a CUDA generator, so no random number
        is copied from the host during a step.
        """
        host = torch.Generator().manual_seed(derive_seed(self.seed, "epoch", stage.index, epoch))
        if self.device.type == "cpu":
            return host, host
        device = torch.Generator(device=self.device)
        return host, device.manual_seed(derive_seed(self.seed, "device-epoch", stage.index, epoch))

    def _train_epoch(self, stage: Stage, epoch: int) -> tuple[float, dict[str, float]]:
        self.model.train()
        gen, vgen = self.generators(stage, epoch)
        n, bs = self.x_train.shape[0], self.config.batch_size
        perm = torch.randperm(n, generator=vgen, device=vgen.device).to(self.device)  # [N], the same on every rank
        n_batches = n // bs if self.config.drop_last else math.ceil(n / bs)
        if n_batches == 0:
            raise PLLZooError(f"batch size {bs} exceeds the {n} training samples with drop_last; lower --batch-size")
        # this rank's rows of each global batch, in step order (all of perm in one process; D1)
        mine = perm if not self.dist.active else torch.cat(
            [ddp.rank_slice(perm[b * bs : (b + 1) * bs], self.dist) for b in range(n_batches)])
        lbs = bs // self.dist.world  # the local batch size b = B / G
        pooled = None
        if self.view_pool is not None and self.strong_input:
            seed = derive_seed(self.seed, "strong-view", stage.index, epoch)
            pooled = self.view_pool.batches(self.data.x_train, mine.cpu(), lbs, n_batches, seed)  # one read per epoch
        loss_sum = torch.zeros((), device=self.device)
        log_sums: dict[str, torch.Tensor] = {}
        tally = torch.zeros(2, self.data.num_classes, device=self.device) if self.tally_labels else None
        group, views = self._view_group(lbs), None
        for b in range(n_batches):
            x_strong = next(pooled) if pooled is not None else None
            if group > 1:  # the views of `group` batches in one call; this batch's rows of them
                if b % group == 0:
                    views = self._group_views(mine[b * lbs : (b + group) * lbs], vgen, with_strong=pooled is None)
                at = slice((b % group) * lbs, (b % group + 1) * lbs)
                step_views = (views[0][at], views[1][at] if views[1] is not None else None)
            try:
                step, loss = self.step(stage, epoch, mine[b * lbs : (b + 1) * lbs], gen, vgen, x_strong,
                                       check=self.check or b == 0, views=step_views if group > 1 else None)
            except ValueError as exc:  # torch's words name no setting (pllzoo bench refuses it before training)
                if fails_on_one_row(exc) and one_row_step(bs, n, self.config.drop_last):
                    raise one_row_error(bs, n, self.config.model) from exc
                raise
            loss_sum += loss.detach()
            if tally is not None:
                trained = step.targets if step.trained_targets is None else step.trained_targets
                label_tally(trained, step.batch.y_true, self.data.num_classes, out=tally)
            for key, value in step.logs.items():  # a later step's entries too: by their shape, no host read
                logged = step_log(key, value, str(self.record_base.get("method", "(unnamed)")))
                log_sums[key] = log_sums.get(key, 0.0) + logged
        if self.dist.active:  # the mean over ranks of equal slices' means: the global batches' mean
            keys = sorted(log_sums)
            total = self.dist.all_reduce_sum(  # logs of host floats are CPU tensors: one copy per epoch
                torch.stack([loss_sum.double(), *(log_sums[k].to(self.device) for k in keys)]))
            loss_sum = total[0] / self.dist.world
            reduced = {k: v / (1 if k.endswith("_count") else self.dist.world) for k, v in zip(keys, total[1:])}
            log_sums = {k: reduced[k] for k in log_sums}  # in the order logged, as in one process (sorted: the same
            # order on every rank for the all-reduce; an outside review found the record's keys reordered)
            tally = self.dist.all_reduce_sum(tally) if tally is not None else None
        self.epoch_tally = tally
        mean_loss = float(loss_sum) / n_batches  # one host sync per epoch
        if not math.isfinite(mean_loss):
            raise PLLZooError(f"non-finite training loss in stage {stage.name!r} epoch {epoch + 1} (a step after the "
                              "epoch's first, which is checked); rerun with --check to name the component that "
                              "first answers NaN or inf, or lower the LR")
        # step logs are averaged over the epoch; keys ending in "_count" are summed
        return mean_loss, {k: float(v) / (1 if k.endswith("_count") else n_batches) for k, v in log_sums.items()}

    VIEW_GROUP_BYTES = 512 * 2**20  # the most memory one call of grouped views may fill

    def _view_group(self, local_batch: int) -> int:
        """How many batches' views one call computes (``train.view_batches``; 0: 16 on CUDA, 1 on CPU), at most
        :data:`VIEW_GROUP_BYTES` of normalised views; 1 on tabular data (no views)."""
        if not self.image:
            return 1
        asked = self.config.view_batches or (16 if self.device.type == "cuda" else 1)
        per_batch = local_batch * self.x_train[0].numel() * 4 * (2 if self.strong_input else 1)  # float32
        return max(1, min(asked, self.VIEW_GROUP_BYTES // max(per_batch, 1)))

    def _group_views(self, rows: torch.Tensor, vgen: torch.Generator, with_strong: bool
                     ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """The weak views of the training ``rows`` (several batches' rows, in step order), then their strong views
        when a component asks and no view pool computes them: each one call, per-sample random from ``vgen``."""
        x_raw = self.x_train[rows]
        weak = self._prepare(x_raw, self.weak, vgen)
        strong = self._prepare(x_raw, self.strong, vgen) if with_strong and self.strong_input else None
        return weak, strong

    def step(self, stage: Stage, epoch: int, idx: torch.Tensor, gen: torch.Generator, vgen: torch.Generator,
             x_strong: torch.Tensor | None = None, check: bool | None = None,
             views: tuple[torch.Tensor, torch.Tensor | None] | None = None) -> tuple[Step, torch.Tensor]:
        """One training step on the rows ``idx`` (long [B] on the device); returns the step and its loss.

        Views → forward passes → label update → selection → loss → SGD step → post-step.  Nothing here
        reads a device value on the host (logs stay tensors until the epoch's one read) unless ``check``
        (default: the trainer's ``check``), which checks the answers' values (:mod:`pllzoo.checks`).
        ``x_strong`` (uint8, CPU) is a strong view computed ahead by the view pool; ``views`` the batch's weak
        (and strong, or None) views computed with other batches' (:meth:`_group_views`), normalised.
        """
        values = self.check if check is None else check
        if self.config.compile == "reduce-overhead":
            torch.compiler.cudagraph_mark_step_begin()
        x_raw = self.x_train[idx] if views is None else None
        batch = Batch(idx, self._prepare(x_raw, self.weak, vgen) if views is None else views[0],
                      self.candidates[idx].float(), self.y_train[idx])
        if x_strong is not None:
            batch.x_strong = self._normalize(x_strong.to(self.device, non_blocking=True))
        elif views is not None:
            batch.x_strong = views[1]
        elif self.strong_input:
            batch.x_strong = self._prepare(x_raw, self.strong, vgen)
        if batch.x_strong is not None and {"joint", "strong"} <= self.views:  # one pass: BN statistics over both views
            both, feats_both = self._views_forward(torch.cat([batch.x, batch.x_strong]))
            logits, logits_strong = both.split(batch.size)
            feats, feats_strong = feats_both.split(batch.size) if feats_both is not None else (None, None)
        else:
            logits, feats = self._views_forward(batch.x)
            logits_strong, feats_strong = (self._views_forward(batch.x_strong)  # "strong_input": not forwarded
                                           if batch.x_strong is not None and "strong" in self.views else (None, None))
        step = Step(
            batch=batch, logits=logits, features=feats, probs=torch.softmax(logits.detach(), dim=1),
            forward=self.forward, generator=gen, device_generator=vgen, epoch=epoch, stage=stage,
            nominal_batch_size=self.config.batch_size, logits_strong=logits_strong,
            features_strong=feats_strong, forward_with_features=self.forward_with_features, dist=self.dist,
            forward_padded=self.forward_padded if self.row_masks is not None else None, scratch=Scratch(self.state),
        )
        comps = self.components
        if values and not bool(torch.isfinite(logits.detach()).all()):  # before a component is blamed for them
            raise PLLZooError(f"the network (train.model={self.config.model}) gave non-finite logits (NaN or inf) "
                              f"in {stage.name} epoch {epoch + 1}: the backbone itself, or a run that diverged "
                              "(a lower train.lr?)")
        inputs = self.calls.inputs = {**self.run_inputs, **_named([  # what no hook may change in place (the
            ("step.batch.x", batch.x), ("step.batch.x_strong", batch.x_strong),  # answers given, once checked,
            ("step.batch.candidates", batch.candidates), ("step.batch.y_true", batch.y_true),  # are added below)
            ("step.batch.index", batch.index), ("step.logits", logits), ("step.logits_strong", logits_strong),
            ("step.features", feats), ("step.features_strong", feats_strong), ("step.probs", step.probs)])}
        try:
            with torch.no_grad():
                step.logit_offset = self.calls.role("logit_offset", step=step, state=self.state)
                if step.logit_offset is not None:
                    slot = self.calls.roles["logit_offset"][0]
                    check_offset(slot, comps[slot], step.logit_offset, logits, values)
                    inputs["step.logit_offset"] = step.logit_offset
                step.targets = self.calls.role("label_update", step=step, state=self.state)
                check_targets("label_update", comps["label_update"], step.targets, batch.candidates, values)
                inputs["step.targets"] = step.targets  # the loss must train on the answer the checks saw
                step.mask = self.calls.role("selection", step=step, state=self.state)
                check_selection("selection", comps["selection"], step.mask, batch.size, values, logits.device)
                inputs["step.mask"] = step.mask
            loss = self.calls.role("loss", step=step, state=self.state)
            check_loss("loss", comps["loss"], loss, values, logits.device)
            if step.trained_targets is not None:
                check_targets("loss", comps["loss"], step.trained_targets, batch.candidates, values,
                              "pllzoo_loss, in step.trained_targets,")
            self.optimizer.zero_grad(set_to_none=True)
            loss.backward()
            if values:
                check_grads("loss", comps["loss"], self.model)
            ddp.average_grads(self.module_params, self.dist)  # the extra modules' DDP (no-op in one process)
            self.optimizer.step()
            with torch.no_grad():
                self.calls.all("pllzoo_post_step", step=step, state=self.state)
        finally:
            self.calls.inputs = self.run_inputs
        if values:  # the first step of each epoch: what the epoch will average must be scalars
            step_logs(step.logs, str(self.record_base.get("method", "(unnamed)")))
        ddp.sync_rows(self.state, self.row_keys, idx, self.dist)  # no-op in one process
        return step, loss
