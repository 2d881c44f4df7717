"""The plugin contract of pllzoo: every hook a plugin or a component may implement.

Three groups of specs, all with the project name ``"pllzoo"`` (so one
:data:`pllzoo.hookimpl` marker serves them all):

* **Discovery** (:class:`DiscoverySpec`) — implemented by plugin *modules* found
  through the ``pllzoo`` entry-point group.  Called once, when the registry is
  built.  Each hook receives a ``register`` callback; the host owns storage,
  name collisions and listing (the shape of ``llm``'s hookspecs).

* **Run** (:class:`RunSpec`) — implemented by *component instances*.  For each
  training run the host makes a fresh :class:`pluggy.PluginManager` holding
  exactly the components of the run's recipe (one per slot), so a hook call
  reaches only the components of that run.  Who answers (each spec's
  "Answered by"; enforced by the trainer, ``pllzoo/trainer.py``):

  - *role hooks* — :meth:`~RunSpec.pllzoo_label_update`, :meth:`~RunSpec.pllzoo_select`,
    :meth:`~RunSpec.pllzoo_loss`, :meth:`~RunSpec.pllzoo_predict` — are answered by the
    component in the matching slot only; the same hook on another slot's component
    is never called.  Their answers are checked (:mod:`pllzoo.checks`);
  - :meth:`~RunSpec.pllzoo_stages` and :meth:`~RunSpec.pllzoo_logit_offset` are each answered
    by the one component (in any slot) that implements it; a recipe with two is refused before
    training, naming both;
  - *lifecycle hooks* — setup, modules, epoch start/end, post-step — are broadcast
    to every component that implements them, last registered first (predict,
    estimator, loss, selection, label_update); their answers are combined as each
    spec says.

  An exception raised inside any run hook becomes a one-line
  :class:`pllzoo.checks.ComponentError` naming the component (chained to the cause).

* **Observers** (:class:`ObserverSpec`) — implemented by *observer instances*, which any plugin
  offers through :meth:`~DiscoverySpec.pllzoo_register_observers` and the user selects by name
  (``pllzoo bench --observe NAME``; ``--tensorboard DIR`` for the built-in one).  They see each
  run's start, every epoch's record and its end, and change nothing: a failing observer is one
  warning and is disabled for the rest of the run (:mod:`pllzoo.observers`).

Call order within one run (the trainer, ``pllzoo/trainer.py``)::

    plan = pllzoo_stages(run) or [one stage]
    for stage in plan:                       # model/optimizer/state re-initialised,
        pllzoo_setup_stage(run, state)       # ... except state.carry keys
        pllzoo_modules(run)                  # extra modules join the optimizer and checkpoint
        for epoch in stage:
            pllzoo_on_epoch_start(run, epoch, state)
            for batch:                       # forward pass(es) by the trainer
                offset  = pllzoo_logit_offset(step, state)     # the one implementer, if any
                targets = pllzoo_label_update(step, state)     # slot label_update
                mask    = pllzoo_select(step, state)           # slot selection
                loss    = pllzoo_loss(step, state)             # slot loss
                backward; optimizer step
                pllzoo_post_step(step, state)
            pllzoo_on_epoch_end(run, epoch, state)
            evaluate: logits -> pllzoo_predict(logits, state, features) -> argmax

Under torchrun (G > 1 processes, ``docs/distributed.md``) every hook runs on every process, the
``step`` hooks on this process's slice of the global batch.  Only components that opted in
(``distributed = True`` on their class) may run; they declare per provided state key how it stays
equal across processes (``sync``: ``"rows"`` tables are all-gathered at the batch indices and
scattered after :meth:`~RunSpec.pllzoo_post_step`; ``"replicated"`` keys are computed identically
everywhere) and form batch statistics over the global batch through ``step.dist``/``run.dist``
(:class:`pllzoo.distributed.DistContext`; the identity in one process).

Arguments are passed by keyword, so an implementation may accept any subset of
a spec's arguments (pluggy's opt-in arguments).  Specs gain arguments over time;
they are never renamed or reordered.

Heavy imports sit under ``TYPE_CHECKING``: this module costs nothing to import.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

import pluggy

if TYPE_CHECKING:  # pragma: no cover - typing only
    import torch

    from pllzoo.components import Component, Method
    from pllzoo.data.base import DatasetSpec
    from pllzoo.observers import Observer, RunInfo, RunSummary
    from pllzoo.run import Run, Stage, Step
    from pllzoo.state import PLLState

PROJECT = "pllzoo"
hookspec = pluggy.HookspecMarker(PROJECT)


class DiscoverySpec:
    """Hooks implemented by plugin modules; called once when the registry is built."""

    # ------------------------------------------------------------------ components
    @hookspec
    def pllzoo_register_label_updates(self, register: Callable[[str, type[Component]], None]) -> None:
        """Offer label-update components (slot ``label_update``).

        Called: once, when the registry is first built.

        :param register: call ``register(name, cls)`` per component; ``name`` is
            qualified by the plugin (``proden.confidence``); ``cls`` subclasses
            :class:`pllzoo.components.Component` and implements
            :meth:`RunSpec.pllzoo_label_update`.
        :returns: None.
        Raises: the registry raises ``PLLZooError`` naming both plugins when a name is taken.

        Example::

            @hookimpl
            def pllzoo_register_label_updates(register):
                register("example.targets", ExampleTargets)  # ExampleTargets(Component)

        .. versionadded:: 0.1
        """

    @hookspec
    def pllzoo_register_selections(self, register: Callable[[str, type[Component]], None]) -> None:
        """Offer sample-selection components (slot ``selection``).

        Called: once, when the registry is first built.

        :param register: call ``register(name, cls)``; ``cls`` implements
            :meth:`RunSpec.pllzoo_select`.
        :returns: None.

        Example::

            @hookimpl
            def pllzoo_register_selections(register):
                register("example.confident", Confident)

        .. versionadded:: 0.1
        """

    @hookspec
    def pllzoo_register_losses(self, register: Callable[[str, type[Component]], None]) -> None:
        """Offer loss components (slot ``loss``).

        Called: once, when the registry is first built.

        :param register: call ``register(name, cls)``; ``cls`` implements
            :meth:`RunSpec.pllzoo_loss`.
        :returns: None.

        Example::

            @hookimpl
            def pllzoo_register_losses(register):
                register("example.ce", MaskedCE)

        .. versionadded:: 0.1
        """

    @hookspec
    def pllzoo_register_estimators(self, register: Callable[[str, type[Component]], None]) -> None:
        """Offer estimator components (slot ``estimator``): epoch-end state updates.

        An estimator re-estimates global state between epochs, e.g. SoLar's class
        prior, and may plan training stages (:meth:`RunSpec.pllzoo_stages`).

        Called: once, when the registry is first built.

        :param register: call ``register(name, cls)``; ``cls`` implements
            :meth:`RunSpec.pllzoo_on_epoch_end`.
        :returns: None.

        Example::

            @hookimpl
            def pllzoo_register_estimators(register):
                register("example.prior", PriorEMA)

        .. versionadded:: 0.1
        """

    @hookspec
    def pllzoo_register_predictors(self, register: Callable[[str, type[Component]], None]) -> None:
        """Offer test-time prediction adjustments (slot ``predict``), e.g. logit adjustment.

        Called: once, when the registry is first built.

        :param register: call ``register(name, cls)``; ``cls`` implements
            :meth:`RunSpec.pllzoo_predict`.
        :returns: None.

        Example::

            @hookimpl
            def pllzoo_register_predictors(register):
                register("example.adjust", LogitAdjust)

        .. versionadded:: 0.1
        """

    # ------------------------------------------------------------------ recipes, data
    @hookspec
    def pllzoo_register_methods(self, register: Callable[[Method], None]) -> None:
        """Offer named recipes: a :class:`pllzoo.components.Method` fills the slots by name.

        Called: once, when the registry is first built.

        :param register: call ``register(method)`` per recipe; the method's
            components may come from any plugin (they are resolved lazily).  A
            :class:`~pllzoo.components.Method` has the fields ``name``, ``loss`` (required),
            ``label_update`` (default ``"pllzoo.uniform"``), ``selection`` (``"pllzoo.all"``),
            ``estimator`` and ``predict`` (None: none), ``hparams`` (the recipe's defaults as dotted
            keys, ``{"loss.eta": 0.5}``, under the user's ``--hp``), ``description`` (one line) and
            ``citation`` (both listed by ``pllzoo methods --json``).
        :returns: None.

        Example::

            @hookimpl
            def pllzoo_register_methods(register):
                register(Method(name="example", label_update="example.targets", loss="pllzoo.soft_ce",
                                estimator="solar.prior", hparams={"estimator.est_epochs": 10},
                                description="Example: debiased confidences", citation="A. Author, 2026"))

        .. versionadded:: 0.1
        """

    @hookspec
    def pllzoo_register_datasets(self, register: Callable[[DatasetSpec], None]) -> None:
        """Offer datasets by name.

        Called: once, when the registry is first built.

        :param register: call ``register(spec)`` with a
            :class:`pllzoo.data.base.DatasetSpec`; its ``load(options)`` returns a
            :class:`pllzoo.data.base.PLLData` or raises ``PLLZooError``.
        :returns: None.

        Example::

            @hookimpl
            def pllzoo_register_datasets(register):
                register(DatasetSpec(name="example.blobs", load=load_blobs,  # load(options) -> PLLData
                                     description="Gaussian blobs with random candidate sets"))

        .. versionadded:: 0.1
        """

    # ------------------------------------------------------------------ backbones, views
    @hookspec
    def pllzoo_register_models(self, register: Callable[[str, Callable[..., torch.nn.Module]], None]) -> None:
        """Offer backbones by name, for ``--hp train.model=NAME``.

        Called: once, when the registry is first built.  The built-in plugin registers ``linear``,
        ``mlp``, ``cnn``, ``resnet18``, ``wrn28-2`` and ``resnet18-imagenet`` through this hook.

        :param register: call ``register(name, factory)`` per backbone; ``factory(num_classes: int,
            input_shape: tuple[int, ...], **own) -> pllzoo.PLLNet`` builds a fresh network (``input_shape``
            has no batch dimension, e.g. ``(3, 32, 32)``); its own keyword parameters with defaults, typed
            ``int``, ``float``, ``bool``, ``str`` or a tuple of one of them, are set with ``--hp
            model.NAME=VALUE`` (:mod:`pllzoo.model_args`) and recorded with the run.  It is called at the
            start of every stage that re-initialises the model, after torch's global RNG was seeded from the
            run seed, so it must draw its initial weights from that RNG only (CPU runs stay deterministic);
            once more while the bench plans (``--dry-run`` too), unseeded, torch's RNG restored after, so
            that a backbone that cannot be built refuses the bench before any run starts; and, where the bench
            times a method's first steps for its estimate (one run per method, not with ``--jobs``, torchrun or
            ``train.compile``), once for that, seeded as training, every random state restored after
            (:mod:`pllzoo.timing`).  It raises
            ``PLLZooError`` (one line) for inputs it cannot take.
        :returns: None.
        Raises: the registry raises ``PLLZooError`` naming both plugins when a name is taken.

        Example::

            @hookimpl
            def pllzoo_register_models(register):
                register("example.tinynet", tinynet)  # tinynet(num_classes, input_shape, width: int = 8) -> PLLNet

        .. versionadded:: 0.3
        """

    @hookspec
    def pllzoo_register_views(
        self, register: Callable[[str, Callable[[torch.Tensor, torch.Generator], torch.Tensor]], None]
    ) -> None:
        """Offer input views (augmentations) by name, for ``--hp train.weak_view=NAME`` / ``train.strong_view``.

        Called: once, when the registry is first built.  The built-in plugin registers ``none``,
        ``weak`` (a batched tensor op on every device), and ``strong``, ``simaugment`` and ``pico-strong``
        (PIL, per image) with their ``-batched`` GPU twins through this hook.

        :param register: call ``register(name, view)`` per view; ``view(x, gen) -> x'`` takes uint8
            images ``[B, C, H, W]`` on the run's device and returns uint8 images of the same shape on the same
            device (the network is built for, and tested on, the data's H×W), drawing all its randomness from
            the ``torch.Generator`` ``gen`` (never torch's global RNG), so the same generator state gives the
            same output.  Views run on image data only.  An exception inside a view (its own ``PLLZooError``
            too), or another dtype, shape or device, fails the run with one line naming the view and its plugin.
            A view that works on host images one sample at a time (PIL, as ``strong``) may be marked with
            :func:`pllzoo.augment.pooled`: as the strong view of a run with ``--view-workers N`` > 0 (the default
            on CUDA) it is then computed ahead by worker processes, which import it by module and name.
        :returns: None.
        Raises: the registry raises ``PLLZooError`` naming both plugins when a name is taken.

        Example::

            @hookimpl
            def pllzoo_register_views(register):
                register("example.vflip", lambda x, gen: x.flip(2))  # uint8 [B,C,H,W] -> same

        .. versionadded:: 0.3
        """


    # ------------------------------------------------------------------ observers
    @hookspec
    def pllzoo_register_observers(self, register: Callable[[str, type[Observer]], None]) -> None:
        """Offer run observers: experiment trackers, dashboards, notifiers (:class:`ObserverSpec`).

        Any plugin may offer observers; none is active until the user picks it by name:
        ``pllzoo bench --observe NAME[=ARG]`` (repeatable; ``PLLZOO_OBSERVE="NAME[=ARG] ..."`` sets a
        default), e.g. ``--observe pllzoo.tensorboard=DIR``, which ``--tensorboard DIR`` abbreviates.
        An unknown name, or an ``ARG`` the class's :meth:`pllzoo.Observer.check` refuses, is a
        one-line error before any run starts.

        Called: once, when the registry is first built.

        :param register: call ``register(name, cls)`` per observer; ``cls`` subclasses
            :class:`pllzoo.Observer` and implements at least one observer hook with ``@hookimpl``.
            For each run that selects it, ``cls(arg)`` is made in the process that trains the run
            (``arg``: the text after ``=``, else ``None``).
        :returns: None.
        Raises: the registry refuses the plugin as a whole (one line) for a taken name, a class that is
            no ``Observer`` or a misspelled observer hook.

        Example::

            @hookimpl
            def pllzoo_register_observers(register):
                register("example.printer", EpochPrinter)  # EpochPrinter(Observer)

        .. versionadded:: 0.3
        """


class RunSpec:
    """Hooks implemented by component instances; called by the trainer during a run.

    What a hook is given is read-only: the run's data (``run.data.*``, ``run.candidates``), the step's
    batch, logits, features, probabilities and the answers already given (``step.targets``,
    ``step.mask``), and ``pllzoo_predict``'s logits.  A hook that changes one of them in place fails its
    run with one line naming the component and what it changed (work on a ``.clone()``); the check reads
    version counters, no device value (a write through ``.data``, which torch does not count, escapes it).  A component changes only its own state keys (and those it lists in
    ``needs``).  The answers of the hooks called under ``no_grad`` must not require grad.
    """

    # ------------------------------------------------------------------ stages
    @hookspec(firstresult=True)
    def pllzoo_stages(self, run: Run) -> list[Stage] | None:
        """Plan the training stages of this run (multi-stage re-initialisation).

        Called: once, before training (and again on resume), outside ``no_grad``
        concerns.

        Answered by: the one component of the run, in any slot, that implements it.
        Plans are not merged: a recipe in which two components implement it (e.g.
        ``valen+estimator=solar.prior``) is refused before training with a message
        naming both (:func:`pllzoo.components.check_compatible`).

        :param run: the run: ``run.config`` (resolved training config, including
            ``epochs`` for the final stage), ``run.data`` (sizes, class counts).
        :returns: a list of :class:`pllzoo.run.Stage` — each re-initialises model,
            optimizer and state except the keys in ``stage.carry`` (a tuple of state keys some component of
            the recipe provides) — or ``None`` (or an empty list) for the default single stage of
            ``run.config.epochs`` epochs.  A stage's
            ``epochs`` is None or an int ≥ 0, and the last stage's is not 0 (the run's record is
            its final stage's); anything else is one line naming the component.

        Example::

            class WarmUpLoss(Component):
                @hookimpl
                def pllzoo_stages(self, run):
                    return [Stage("warm-up", epochs=5, params={"warmup": True}),
                            Stage("train", carry=("confidence",), reinit_model=False)]

        .. versionadded:: 0.1
        """

    @hookspec
    def pllzoo_setup_stage(self, run: Run, state: PLLState) -> None:
        """Allocate per-sample and global state for a new stage (per-stage setup).

        Called: at the start of every stage, after the trainer re-initialised the
        model and optimizer and cleared ``state`` except ``run.stage.carry``; also
        before a resumed stage's checkpointed state is loaded over it.

        Answered by: every component that implements it, last registered first
        (predict, estimator, loss, selection, label_update).

        :param run: ``run.stage`` (name, index, epochs, params), ``run.candidates``
            (bool ``[N, K]`` on ``run.device``), ``run.num_classes``, ``run.data`` (the
            dataset as loaded: its tensors stay on the CPU), ``run.config``.
        :param state: the run's :class:`pllzoo.state.PLLState`; write tensors
            only (e.g. ``state.confidence = ...  # [N, K] float32``).
        :returns: None.

        Example::

            class Confidence(Component):
                provides = frozenset({"confidence"})

                @hookimpl
                def pllzoo_setup_stage(self, run, state):
                    c = run.candidates.float()  # [N, K] on run.device
                    state.confidence = c / c.sum(1, keepdim=True)

        .. versionadded:: 0.1
        """

    @hookspec
    def pllzoo_modules(self, run: Run) -> dict[str, torch.nn.Module] | None:
        """Offer extra modules for this stage (a projection head, an encoder/decoder, an EMA copy).

        Called: at the start of every stage, right after :meth:`pllzoo_setup_stage`
        (``run.model`` is the stage's freshly built network).  The trainer moves every
        module to ``run.device``, adds the parameters that require grad to the SGD
        optimizer (same LR schedule and weight decay as the network), saves all of
        them in each checkpoint and restores them on resume.  Under torchrun (G > 1) they are not
        wrapped in DDP: the trainer broadcasts rank 0's values once and averages their gradients
        over the processes after each backward (:mod:`pllzoo.ddp`).

        Answered by: every component that implements it (called in slot order); all
        offers are kept, named ``<slot>.<name>``.

        :returns: ``{name: module}`` (names unique within the component) or ``None``.
            A module must not share parameters with the network or another module
            (reach the network through ``run.model``): one line naming the component.

        Example::

            class ProjectionLoss(Component):
                views = frozenset({"features"})

                @hookimpl
                def pllzoo_modules(self, run):
                    self.proj = torch.nn.Linear(run.model.feature_dim, 128)
                    return {"proj": self.proj}  # trained, checkpointed, restored

        .. versionadded:: 0.1
        """

    @hookspec
    def pllzoo_on_epoch_start(self, run: Run, epoch: int, state: PLLState) -> None:
        """Compute per-epoch schedules (ramps, thresholds).

        Called: at the start of every epoch, ``epoch`` counting from 0 within the stage.

        Answered by: every component that implements it, last registered first.

        :returns: None.

        Example::

            class RampedLoss(Component):
                @hookimpl
                def pllzoo_on_epoch_start(self, run, epoch):
                    # derived from the epoch, so it is right again after a resume
                    self.weight = min(1.0, (epoch + 1) / run.config.epochs)

        .. versionadded:: 0.1
        """

    # ------------------------------------------------------------------ the three roles
    @hookspec(firstresult=True)
    def pllzoo_logit_offset(self, step: Step, state: PLLState) -> torch.Tensor | None:
        """Offset the logits that label updates read, e.g. by a running estimate of the training prior.

        Called: every training step, after the forward pass(es) and before
        :meth:`pllzoo_label_update`, under ``torch.no_grad()``; also the place to update, from this
        step, what the offset is estimated from (RECORDS' momentum feature mean).

        Answered by: the one component of the run, in any slot, that implements it; a recipe in
        which two components implement it is refused before training, naming both.  Checked:
        float ``[K]`` or ``[B, K]`` every step; finite on the first step of each epoch, and every
        step under ``check``.

        The answer is kept as ``step.logit_offset``; ``step.label_probs`` is then
        ``softmax(step.logits − offset)`` and ``step.label_probs_of(z)`` the same for another view's
        logits.  Label updates that read those (PRODEN's and CORR's confidences) are debiased;
        ``step.probs``, the selection and the loss are not.

        :returns: float ``[K]`` or ``[B, K]``, or ``None`` for no offset this step.

        The example below, registered with ``pllzoo_register_estimators`` as ``my.prior``, runs as
        ``proden+estimator=my.prior`` (PRODEN's label update reads ``step.label_probs``).

        Example::

            class FeaturePrior(Component):  # RECORDS (Hong et al., 2023), in short; slot "estimator"
                views = frozenset({"features"})
                provides = frozenset({"mu", "prior"})

                @hookimpl
                def pllzoo_setup_stage(self, run, state):
                    self.head = run.model.head                                # the classifier
                    state.mu = torch.zeros(run.model.feature_dim, device=run.device)

                @hookimpl
                def pllzoo_logit_offset(self, step, state):
                    state.mu = 0.9 * state.mu + 0.1 * step.features.mean(0)   # [F]
                    state.prior = torch.softmax(self.head(state.mu), dim=0)   # [K], pre-step head
                    return torch.log(state.prior + 1e-9)

                @hookimpl
                def pllzoo_on_epoch_end(self, run, state):                    # the estimator's role hook
                    state.prior = torch.softmax(self.head(state.mu), dim=0)   # the head after the epoch

        .. versionadded:: 0.2
        """

    @hookspec(firstresult=True)
    def pllzoo_label_update(self, step: Step, state: PLLState) -> torch.Tensor:
        """Produce the training targets of this batch (slot ``label_update``).

        Called: every training step, after the forward pass(es), under
        ``torch.no_grad()``.

        Answered by: the ``label_update`` slot's component only.  Checked: a float
        ``[B, K]`` tensor every step; finite, non-negative, 0 outside the candidate
        set and rows summing to 1 (within 1e-3) on the first step of each epoch, and
        every step under ``check``.

        :param step: ``step.batch`` (``index`` long ``[B]``, ``candidates`` float
            ``[B, K]``), ``step.logits`` ``[B, K]``, ``step.probs`` float32
            ``[B, K]`` (softmax of the weak view, detached), ``step.scratch``.
        :param state: the run's state.
        :returns: targets float32 ``[B, K]``: each row sums to 1 and is 0 outside
            the candidate set.  (The host checks a floating-point dtype and casts nothing: another
            float dtype passes the checks but carries its precision into the loss.)

        Example::

            class ConfidenceTargets(Component):
                needs = frozenset({"confidence"})

                @hookimpl
                def pllzoo_label_update(self, step, state):
                    return state.confidence[step.batch.index]  # [B, K]

        .. versionadded:: 0.1
        """

    @hookspec(firstresult=True)
    def pllzoo_select(self, step: Step, state: PLLState) -> torch.Tensor:
        """Choose the reliable samples of this batch (slot ``selection``).

        Called: every training step, after :meth:`pllzoo_label_update` (so
        ``step.targets`` is set), under ``torch.no_grad()``.

        Answered by: the ``selection`` slot's component only.  Checked: ``[B]``,
        bool or float, every step; float weights finite and in [0, 1] on the first
        step of each epoch, and every step under ``check``.

        :returns: ``bool [B]`` (True = reliable) or float weights ``[B]`` in [0, 1].  A selection that reads
            ``step.targets`` declares ``reads = frozenset({"targets"})``: beside a loss that ignores the targets
            (CC's), that is what makes a swapped label update count.

        Example::

            class Confident(Component):
                @hookimpl
                def pllzoo_select(self, step):
                    top = (step.probs * step.batch.candidates).amax(1)  # [B]
                    return top >= 0.5  # bool [B]

        .. versionadded:: 0.1
        """

    @hookspec(firstresult=True)
    def pllzoo_loss(self, step: Step, state: PLLState) -> torch.Tensor:
        """Compute the training loss of this batch (slot ``loss``).

        Called: every training step, after selection (``step.targets`` and
        ``step.mask`` set), with autograd on.  May run extra forward passes with
        ``step.forward(x)`` (e.g. mixup) and log scalars into ``step.logs``.

        Answered by: the ``loss`` slot's component only.  Checked: a 0-dim float
        tensor with grad every step; finite on the first step of each epoch, and
        every step under ``check``.

        :returns: a scalar tensor to minimise.  Honour ``step.mask`` (bool: the samples kept; float:
            their weights), or declare ``ignores = frozenset({"mask"})`` for a loss that selects its own
            samples (HTC's): then a recipe with another selection is refused.  A loss that does neither
            makes every selection swapped in a silent no-op, which the host cannot tell from its outputs
            (``pllzoo check METHOD`` trains it with half of each batch dropped and tells).
            Likewise ``ignores = frozenset({"targets"})`` for a loss that never reads ``step.targets``.

        Example::

            class MaskedCE(Component):
                @hookimpl
                def pllzoo_loss(self, step):
                    ce = -(step.targets * step.logits.log_softmax(1)).sum(1)  # [B]
                    step.logs["ce_all"] = ce.detach().mean()
                    w = step.mask.float()
                    return (ce * w).sum() / w.sum().clamp_min(1.0)

        .. versionadded:: 0.1
        """

    # ------------------------------------------------------------------ lifecycle
    @hookspec
    def pllzoo_post_step(self, step: Step, state: PLLState) -> None:
        """Update state after the optimizer step (e.g. PRODEN's confidences).

        Called: every training step, after ``optimizer.step()``, under
        ``torch.no_grad()``; ``step.probs`` still holds the pre-step predictions,
        and ``step.forward`` gives a fresh forward with the updated weights.

        Answered by: every component that implements it, last registered first.

        :returns: None.

        Example::

            class ProdenUpdate(Component):
                needs = frozenset({"confidence"})

                @hookimpl
                def pllzoo_post_step(self, step, state):
                    p = step.probs * step.batch.candidates  # pre-step predictions
                    state.confidence[step.batch.index] = p / p.sum(1, keepdim=True)

        .. versionadded:: 0.1
        """

    @hookspec
    def pllzoo_on_epoch_end(self, run: Run, epoch: int, state: PLLState) -> dict[str, float] | None:
        """Update global state between epochs (e.g. class-prior estimation).

        Called: after the last step of every epoch and before evaluation, under
        ``torch.no_grad()``.  ``run.predict_train()`` gives eval-mode softmax
        predictions ``[N, K]`` over the training set (test transform).

        Answered by: every component that implements it, last registered first.
        The dicts are merged into the epoch's record; a key returned by two
        components is an error naming both.  It is the ``estimator`` slot's role hook,
        but a component of any slot may implement it, e.g. a label update that keeps a
        prior of its own (declared in its ``provides``) and updates it here.

        :returns: optional values to log for this epoch: ``{name: v}`` with ``v`` a number,
            a string, None, or a list of them (e.g. a prior vector; nested lists too);
            tensors and numpy values are read as numbers and lists, NaN and inf as null
            (JSON has neither).  A name of the record itself (``seed``,
            ``method``, ``epoch``, the ``acc_*`` metrics, ...) is refused: it would
            relabel the run.  Two names are read by pllzoo's tools: ``prior``, an
            estimated class prior (a list of K numbers), is what ``pllzoo plot`` draws
            beside the true prior (panel b), and ``prior_tv``, its total variation from
            the true training prior, is the "prior TV" of the paper tables
            (``benchmarks/paper``).

        Example::

            class PriorEMA(Component):
                provides = frozenset({"prior"})

                @hookimpl
                def pllzoo_setup_stage(self, run, state):
                    state.prior = torch.full((run.num_classes,), 1.0 / run.num_classes, device=run.device)

                @hookimpl
                def pllzoo_on_epoch_end(self, run, state):
                    votes = (run.predict_train() * run.candidates).sum(0)  # [K]
                    state.prior = 0.9 * state.prior + 0.1 * votes / votes.sum()
                    return {"prior_max": float(state.prior.max())}

        .. versionadded:: 0.1
        """

    @hookspec(firstresult=True)
    def pllzoo_predict(self, logits: torch.Tensor, state: PLLState,
                       features: torch.Tensor | None) -> torch.Tensor | None:
        """Adjust test-time logits (slot ``predict``, e.g. ``g - zeta * log r``).

        Called: at every evaluation, on float32 logits ``[M, K]``, under ``no_grad``;
        ``features`` are the eval-mode encoder features ``[M, F]`` of the same inputs when the
        component declares ``views = frozenset({"features"})`` (e.g. to run a second head on
        them, as HTC's ensemble), else ``None``.  (``features`` added in 0.2.)

        Answered by: the ``predict`` slot's component only; with the slot empty
        (or a ``None`` answer) the prediction is the argmax of ``logits``.
        Checked at every evaluation: float, ``[M, K]``, finite.

        :returns: adjusted logits ``[M, K]`` (argmax is the prediction), or ``None``.

        Example::

            class LogitAdjust(Component):
                needs = frozenset({"prior"})

                @hookimpl
                def pllzoo_predict(self, logits, state):
                    return logits - state.prior.clamp_min(1e-12).log()  # [M, K]

        .. versionadded:: 0.1
        """


class ObserverSpec:
    """Hooks implemented by observer instances (:meth:`DiscoverySpec.pllzoo_register_observers`).

    One instance per run and selected observer, made in the process that trains the run: the bench
    process, each ``--jobs`` worker for its own runs, and rank 0 only under torchrun (the other ranks
    make none).  Runs reused as finished are not observed.  Observers see what the run records and
    change nothing: an exception inside one becomes one ``Warning:`` line naming the observer, the
    hook and the run, and that observer is disabled for the rest of the run (its run end is still called
    once, for clean-up); training, the exit status and the run's files are unaffected
    (``KeyboardInterrupt`` is not caught).
    """

    @hookspec
    def pllzoo_observe_run_start(self, run: RunInfo) -> None:
        """Open what the observer needs for this run (a writer, a tracking run).

        Called: once per run, in the process that trains it, after ``config.json`` and ``env.json`` are
        written and before the components are built; ``run.resumed`` says whether training continues
        from a checkpoint (``--resume``).

        :param run: :class:`pllzoo.RunInfo`: ``run_id``, ``method``, ``dataset``, ``seed``, ``run_dir``,
            ``config`` (``config.json``'s content), ``env`` (``env.json``'s), ``resumed``.
        :returns: None.

        Example::

            class EpochPrinter(Observer):
                @hookimpl
                def pllzoo_observe_run_start(self, run):
                    print(f"{run.run_id}: {run.method} seed {run.seed}")

        .. versionadded:: 0.3
        """

    @hookspec
    def pllzoo_observe_epoch(self, run: RunInfo, record: dict[str, Any], step: int) -> None:
        """Log one finished epoch.

        Called: after every epoch the run trains, once its record is appended to ``log.jsonl``
        (the same dict; every stage's epochs, ``record["stage"]`` names it).  On resume the epochs
        up to the checkpoint are not replayed; epochs the interrupted process trained after its last
        checkpoint are trained again and observed again with the same ``step`` (write by step,
        overwriting).

        :param run: the run's :class:`pllzoo.RunInfo`.
        :param record: the epoch's record: ``method``, ``seed``, ``stage``, ``epoch`` (1-based within
            the stage), ``epochs``, ``lr``, ``loss``, the components' logs, ``acc_all``,
            ``acc_many``/``acc_medium``/``acc_few``, ``class_acc``, ``wall_s`` and the like.
        :param step: the record's 1-based position in ``log.jsonl``: increases over stages, equal for a
            re-trained epoch.
        :returns: None.

        Example::

            class EpochPrinter(Observer):
                @hookimpl
                def pllzoo_observe_epoch(self, record, step):
                    print(f"step {step}: acc {record['acc_all']:.1f}")

        .. versionadded:: 0.3
        """

    @hookspec
    def pllzoo_observe_run_end(self, run: RunInfo, summary: RunSummary) -> None:
        """Close what :meth:`pllzoo_observe_run_start` opened; called even when the run failed or stopped.

        Called: once per run that started, last: after ``log.jsonl`` and ``done`` are written for a
        finished run, after the failure for a failed one, at the clean stop (time limit, signal) for a
        stopped one; not on an observer that an earlier failure disabled for the run.

        :param run: the run's :class:`pllzoo.RunInfo`.
        :param summary: :class:`pllzoo.RunSummary`: ``status`` (``"finished"``, ``"failed"`` or
            ``"stopped"``), ``records`` (every record of the run so far, checkpointed ones included),
            ``final`` (the last record or ``None``), ``error`` (one line, or ``None``).
        :returns: None.

        Example::

            class EpochPrinter(Observer):
                @hookimpl
                def pllzoo_observe_run_end(self, summary):
                    print(f"{summary.status}: {summary.final and summary.final['acc_all']}")

        .. versionadded:: 0.3
        """


#: the role hook each slot's component must implement
SLOT_HOOKS: dict[str, str] = {
    "label_update": "pllzoo_label_update",
    "selection": "pllzoo_select",
    "loss": "pllzoo_loss",
    "estimator": "pllzoo_on_epoch_end",
    "predict": "pllzoo_predict",
}

#: the discovery hook that registers each slot's components
SLOT_REGISTER_HOOKS: dict[str, str] = {
    "label_update": "pllzoo_register_label_updates",
    "selection": "pllzoo_register_selections",
    "loss": "pllzoo_register_losses",
    "estimator": "pllzoo_register_estimators",
    "predict": "pllzoo_register_predictors",
}
