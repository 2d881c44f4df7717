"""Components and recipes: what a method is made of.

A :class:`Component` fills one *slot* of a recipe and implements the slot's role
hook from :class:`pllzoo.hookspecs.RunSpec` (plus any lifecycle hooks it needs):

=============  ========================  =================================================
slot           role hook                 contract
=============  ========================  =================================================
label_update   ``pllzoo_label_update``   targets ``[B, K]``, rows sum to 1 inside candidates
selection      ``pllzoo_select``         ``bool [B]`` or weights ``[B]``
loss           ``pllzoo_loss``           scalar
estimator      ``pllzoo_on_epoch_end``   epoch-end state updates (e.g. the class prior)
predict        ``pllzoo_predict``        adjusted test logits ``[M, K]``
=============  ========================  =================================================

A :class:`Method` names one component per slot.  A *method string* swaps slots
by name: ``proden+selection=pllzoo.all`` or
``solar+label_update=proden.confidence+predict=none`` — the base recipe, then
``+slot=component`` for each swap (``none`` empties an optional slot).  The
string is the method's name in tables and records.

Components declare what they read and write (``needs``/``provides``: state keys
such as ``"prior"`` or ``"confidence"``; ``views``: extra input views such as
``"strong"``).  :func:`check_compatible` refuses, before training, a recipe in
which something is needed that no component provides, or two components write
the same key or both plan training stages (:func:`stage_planner`), naming both sides.
"""

from __future__ import annotations

import dataclasses
import difflib
import inspect
import re
from types import MappingProxyType
from dataclasses import dataclass, field
from typing import Any, ClassVar, Collection, Mapping

from pllzoo.errors import PLLZooError, UnknownNameError
from pllzoo import hparams
from pllzoo.hparams import NoHParams

SLOTS: tuple[str, ...] = ("label_update", "selection", "loss", "estimator", "predict")
OPTIONAL_SLOTS: frozenset[str] = frozenset({"estimator", "predict"})
#: how a state key is kept equal across the processes of a DDP run (:attr:`Component.sync`)
SYNC_MODES: tuple[str, ...] = ("rows", "replicated")
#: what the host itself provides to every component
HOST_PROVIDES: frozenset[str] = frozenset({"logits", "probs", "candidates", "targets", "mask", "weak"})
#: the built-in selection every row passes (the default; ``neutral``, as a loss that ``ignores`` the mask asks)
SELECT_ALL = "pllzoo.all"
#: the built-in label update without disambiguation (the default; ``neutral``, as a loss that ``ignores`` the targets asks)
UNIFORM_TARGETS = "pllzoo.uniform"


class Component:
    """Base class of all components; subclasses implement hooks with ``@pllzoo.hookimpl``.

    Class attributes:

    * ``HParams`` — a frozen dataclass of hyper-parameters (see :mod:`pllzoo.hparams`);
      the instance gets the resolved values as ``self.hp``.
    * ``needs`` / ``provides`` — state keys read / written.
    * ``reads`` — what it reads when the recipe has it, without needing it: ``"logit_offset"`` for a label
      update that reads ``step.label_probs``/``label_probs_of`` (debiased by the run's logit offset),
      ``"targets"`` for a selection, estimator or predictor that reads ``step.targets``, or a state key
      another component may provide.  A component that offsets the logits
      (``pllzoo_logit_offset``) in a recipe where nothing reads the offset, and nothing needs or reads
      what it provides either, is refused: it would change nothing (:func:`check_compatible`).
    * ``ignores`` — inputs of its slot that it does not honour: ``"mask"`` for a loss that makes its
      own selection (HTC's), so that a recipe swapping in a selection that is not ``neutral`` is
      refused rather than run unchanged; ``"targets"`` for a loss that never reads ``step.targets``
      (CC's, MSE's, EXP's read the candidate rows), so that a label update that is not ``neutral``
      in front of it is refused unless another component reads ``"targets"`` (SoLar's selection)
      or uses what the label update provides.  Only the shipped components' ``reads`` are taken as
      complete: beside an outside one (which may read ``step.targets`` undeclared) nothing is refused.
    * ``neutral`` — ``True`` for a slot's do-nothing component: a selection that passes every row
      (``pllzoo.all``), a label update that does not disambiguate (targets uniform over the candidates,
      ``pllzoo.uniform``).  It may stand in front of a loss that ``ignores`` its output, and a neutral label
      update's targets are not tallied as training labels (no ``label_acc*`` columns: their argmax is a tie).
      The host asks this attribute, never a component's name, so a copy of a built-in is treated as the built-in;
      a subclass that implements a hook of its own is not neutral unless it declares so (:func:`is_neutral`).
    * ``views`` — input views beyond the weak one that the trainer must forward
      (``{"strong"}`` gives ``step.logits_strong``, ``{"strong_input"}`` the strong view's input alone, for a
      network of the component's own (PiCO's key encoder), ``{"features"}`` the encoder outputs;
      ``"joint"`` with ``"strong"`` forwards the weak and strong views as one batch).
    * ``strong_view`` — the registered view its paper makes ``step.batch.x_strong`` with (PiCO:
      ``"pico-strong"``), or None (the default) for the trainer's ``train.strong_view``.  The run uses it
      unless ``--hp train.strong_view`` names a view; two components of one recipe that declare different
      ones are refused.
    * ``name`` / ``slot`` — set by the registry on registration.
    * ``distributed`` — ``True`` once the component is correct under DDP (G > 1 processes with
      the trainer's contiguous slices of each global batch, ``docs/distributed.md``): the trainer refuses,
      before training, a multi-process run with a component that has not opted in.  Declared on the
      class itself (a subclass does not inherit it: it may change what is synchronised) or set on the
      instance from ``self.hp`` (:func:`is_distributed`).
    * ``sync`` — ``{state key: mode}`` for the keys it ``provides``, how the key stays equal on
      every rank (only read under G > 1):

      - ``"rows"``: a per-sample table ``[N, ...]`` whose rows at the step's ``batch.index`` (and
        only those) are written during the step (label update, loss or post-step); after
        ``pllzoo_post_step`` the trainer all-gathers those rows and their indices from every rank
        and scatters them into every replica (:func:`pllzoo.ddp.sync_rows`);
      - ``"replicated"`` (the default for undeclared keys): computed identically on every rank
        from synchronised inputs (replicated tables, the model, global batch statistics through
        ``step.dist``/``run.dist``, e.g. :meth:`~pllzoo.distributed.DistContext.batch_mean`):
        nothing to do.

      A component that forms a statistic over the batch (a mean, a count, a quota) must form it
      over the *global* batch through ``step.dist``; a per-sample-mean loss over the local slice
      is already right (DDP averages the gradients of equal slices), a mean over a subset is not
      (``masked_mean(values, mask, step.dist)`` scales it, ``docs/distributed.md``), and mixup pairs over
      the global batch (:mod:`pllzoo.mixup`).

    Construction: the registry calls ``cls(hp)`` with the resolved ``HParams`` instance (``self.hp``); a
    subclass that overrides ``__init__`` takes ``hp`` and calls ``super().__init__(hp)``.  Attributes set on
    ``self`` are not checkpointed: what must survive ``--resume`` (a step counter, a running mean) lives in the
    state (a key it ``provides``), which is; ``provides`` is also what the ownership and DDP checks know of a key.
    """

    HParams: ClassVar[type] = NoHParams
    needs: ClassVar[frozenset[str]] = frozenset()
    provides: ClassVar[frozenset[str]] = frozenset()
    reads: ClassVar[frozenset[str]] = frozenset()
    ignores: ClassVar[frozenset[str]] = frozenset()
    views: ClassVar[frozenset[str]] = frozenset()
    strong_view: ClassVar[str | None] = None
    neutral: ClassVar[bool] = False
    distributed: ClassVar[bool] = False
    sync: ClassVar[Mapping[str, str]] = MappingProxyType({})
    name: ClassVar[str] = ""
    slot: ClassVar[str] = ""

    def __init__(self, hp: Any | None = None) -> None:
        self.hp = hp if hp is not None else self.HParams()

    @classmethod
    def dataset_defaults(cls, dataset: str, kind: str) -> dict[str, Any]:
        """Hyper-parameter defaults for a dataset (``{"field": value}``), e.g. a released recipe's.

        Applied over the dataclass defaults and under the recipe's and the user's overrides.
        """
        return {}

    def __repr__(self) -> str:
        return f"<{self.slot} {self.name!r}>"


@dataclass(frozen=True)
class Method:
    """A named recipe: one component name per slot, plus default hyper-parameters.

    ``loss`` is required; ``label_update`` defaults to ``pllzoo.uniform`` (targets uniform over the
    candidates, never updated), ``selection`` to ``pllzoo.all`` (every sample), ``estimator`` and
    ``predict`` to none (no prior; argmax of the logits).  ``hparams`` holds recipe-level defaults as dotted
    keys (``"loss.eta": 0.5``), applied before the user's ``--hp`` overrides.  ``description`` (one line)
    and ``citation`` (the paper) are listed by ``pllzoo methods --json``.
    """

    name: str
    loss: str
    label_update: str = "pllzoo.uniform"
    selection: str = SELECT_ALL
    estimator: str | None = None
    predict: str | None = None
    hparams: Mapping[str, Any] = field(default_factory=dict)
    description: str = ""
    citation: str = ""

    def slots(self) -> dict[str, str | None]:
        return {s: getattr(self, s) for s in SLOTS}


def scope_name(method: str) -> str:
    """A method string as ``Registry.method`` names it (``proden + selection = x`` → ``proden+selection=x``): what
    an ``--hp`` scope and ``report --methods`` are compared with."""
    return re.sub(r"\s*([+=])\s*", r"\1", method.strip())


def parse_method_string(text: str) -> tuple[str, dict[str, str | None]]:
    """Split ``base+slot=component+...`` into the base name and the slot swaps."""
    parts = [p.strip() for p in text.strip().split("+")]
    base, swaps = parts[0], {}
    if not base:
        raise PLLZooError(f"empty method name in {text!r}")
    for part in parts[1:]:
        slot, eq, comp = part.partition("=")
        slot, comp = slot.strip(), comp.strip()
        if not eq or not comp:
            raise PLLZooError(f"bad swap {part!r} in {text!r}; write +slot=component, slots: {', '.join(SLOTS)}")
        if slot not in SLOTS:  # an unknown name, as an unknown method or component: exit 2 (README)
            near = difflib.get_close_matches(slot, SLOTS, n=1)
            raise UnknownNameError(f"unknown slot {slot!r} in {text!r}{f' (did you mean {near[0]}?)' if near else ''}; "
                                   f"slots: {', '.join(SLOTS)}")
        if slot in swaps:
            raise PLLZooError(f"slot {slot!r} is swapped twice in {text!r}; swap each slot once")
        if comp == "none" and slot not in OPTIONAL_SLOTS:
            raise PLLZooError(f"slot {slot!r} cannot be empty; only {', '.join(sorted(OPTIONAL_SLOTS))} can be none")
        swaps[slot] = None if comp == "none" else comp
    return base, swaps


def is_distributed(comp: Component) -> bool:
    """Whether ``comp`` opted in to DDP: its instance's ``distributed``, else its own class's (not inherited)."""
    if "distributed" in vars(comp):
        return bool(comp.distributed)
    return bool(vars(type(comp)).get("distributed", False))


def is_neutral(comp: Component) -> bool:
    """Whether ``comp`` is its slot's do-nothing component (:attr:`Component.neutral`): declared on its class, or
    inherited through classes that implement no hook of their own (a copy registered under another name is
    neutral; a subclass of ``SelectAll`` that selects, by a ``pllzoo_select`` of its own, is not unless it says so)."""
    for cls in type(comp).__mro__:
        if "neutral" in vars(cls):
            return vars(cls)["neutral"] is True
        if any(isinstance(getattr(v, "pllzoo_impl", None), dict) for v in vars(cls).values()):
            return False
    return False


def label(comp: Component) -> str:
    """The name a component is registered under, else its class name (a subclass does not inherit a name)."""
    return vars(type(comp)).get("name") or type(comp).__qualname__


def implemented_hooks(comp: Component) -> frozenset[str]:
    """The hooks ``comp`` implements (its ``@pllzoo.hookimpl`` methods, ``specname`` honoured)."""
    found = set()
    for attr in dir(type(comp)):
        opts = getattr(getattr(type(comp), attr, None), "pllzoo_impl", None)
        if isinstance(opts, dict):
            found.add(opts.get("specname") or attr)
    return frozenset(found)


#: run hooks answered by at most one component of a run, in any slot: {hook: (what it decides, what a run has one of)}
SINGLE_HOOKS: dict[str, tuple[str, str]] = {
    "pllzoo_stages": ("plan training stages", "plan"),
    "pllzoo_logit_offset": ("offset the logits that label updates read", "offset"),
}


def single_answerers(method_name: str, components: Mapping[str, Component]) -> dict[str, str]:
    """``{hook: slot}`` of the one component implementing each of :data:`SINGLE_HOOKS`.

    The rule: a run follows one stage plan and one logit offset.  Stages re-initialise the model,
    optimizer and state, so two plans (VALEN's warm-up, SoLar's pre-estimation) cannot be merged
    without changing either method; two offsets (two prior estimates) would each debias the other.
    A recipe in which two components implement one of them is refused, naming both.
    """
    found = {}
    for hook, (what, one) in SINGLE_HOOKS.items():
        owners = [(slot, c) for slot, c in components.items() if hook in implemented_hooks(c)]
        if len(owners) > 1:
            (s1, c1), (s2, c2) = owners[:2]
            raise PLLZooError(
                f"incompatible recipe {method_name!r}: {s1} {label(c1)!r} and {s2} {label(c2)!r} both {what} "
                f"({hook}); a run follows one {one}"
            )
        if owners:
            found[hook] = owners[0][0]
    return found


def stage_planner(method_name: str, components: Mapping[str, Component]) -> str | None:
    """The slot of the one component that plans stages (implements ``pllzoo_stages``), or None
    (:func:`single_answerers`)."""
    return single_answerers(method_name, components).get("pllzoo_stages")


def check_compatible(method_name: str, components: Mapping[str, Component], training: bool = True,
                     complete: Collection[str] | None = None) -> None:
    """Raise ``PLLZooError`` unless every ``need`` is provided, no key has two writers, at most one
    component answers each of :data:`SINGLE_HOOKS` (:func:`single_answerers`), and (``training``) no component
    would change nothing: a logit offset that nothing reads from a component whose outputs nothing uses, a
    component (of shipped components only: an estimator, VALEN's loss) whose outputs nothing reads and that plans
    stages of its own, a
    selection in front of a loss that ``ignores`` the mask, or a label update in front of a loss that ``ignores``
    the targets when nothing else reads them or what the label update provides.  ``training=False`` (``pllzoo
    evaluate``, which only re-scores a trained model) leaves that last check out: there the recipe's other
    components have already acted, and e.g. ``cc-records`` with ``--predict none`` is its model unadjusted.
    ``complete``: the slots whose components' ``reads`` are known to be complete (the shipped ones; default: every
    slot).  A component outside it may read ``step.targets`` without declaring it (the README's example selection
    did), so it keeps a label update in front of a loss that ignores the targets."""
    answerers = single_answerers(method_name, components)
    writers: dict[str, Component] = {}
    for comp in components.values():
        for key in comp.provides:
            other = writers.get(key)
            if other is not None:
                raise PLLZooError(
                    f"incompatible recipe {method_name!r}: {other.slot} {other.name!r} and "
                    f"{comp.slot} {comp.name!r} both write {key!r}"
                )
            writers.setdefault(key, comp)
    for comp in components.values():
        for key in sorted(comp.needs - HOST_PROVIDES - writers.keys()):
            others = ", ".join(f"{c.slot} {c.name!r}" for c in components.values() if c is not comp)
            raise PLLZooError(
                f"incompatible recipe {method_name!r}: {comp.slot} {comp.name!r} needs {key!r}, "
                f"which none of the other components provides ({others})"
            )
    if training:
        _check_effective(method_name, components, answerers.get("pllzoo_logit_offset"),
                         components.keys() if complete is None else complete)


def _check_effective(method_name: str, components: Mapping[str, Component], offset_slot: str | None,
                     complete: Collection[str]) -> None:
    """Refuse a component that a recipe would carry without effect (see :func:`check_compatible`)."""
    if offset_slot is not None:
        comp = components[offset_slot]
        others = [c for c in components.values() if c is not comp]
        used = set().union(*(c.needs | c.reads for c in others))
        if "logit_offset" not in used and not comp.provides & used:
            listed = ", ".join(f"{c.slot} {c.name!r}" for c in others)
            raise PLLZooError(
                f"incompatible recipe {method_name!r}: {comp.slot} {comp.name!r} offsets the logits that label "
                f"updates read, but none of the others reads them or uses what it provides ({listed}); it would "
                f"change nothing (a component that reads the offset declares reads = {{'logit_offset'}})")
    for slot, comp in components.items():  # a component that plans stages to make what nothing reads
        if slot == offset_slot or not comp.provides or not components.keys() <= set(complete) or \
                not _plans_extra_stages(comp):  # (an outside component may read a key it does not declare)
            continue
        others = [c for c in components.values() if c is not comp]
        if not comp.provides & set().union(*(c.needs | c.reads for c in others)):
            listed = ", ".join(f"{c.slot} {c.name!r}" for c in others)
            hint = ("e.g. +predict=pllzoo.logit_adjust reads the prior; set up to plan no stage of its own, it is "
                    "kept: it then only logs its estimate" if slot == "estimator" else
                    "the label update of its own recipe reads it")
            raise PLLZooError(  # outside reviews: proden+estimator=solar.prior trained 20 pre-estimation epochs for
                # a prior nothing read; proden+loss=valen.loss trained VALEN's encoder and decoder for a Dirichlet
                # nothing read (its alpha, beta, gamma, knn changed no number): each differed by its stages alone
                f"incompatible recipe {method_name!r}: {slot} {comp.name!r} provides "
                f"{', '.join(map(repr, sorted(comp.provides)))}, which none of the others reads ({listed}); "
                f"it would change nothing but its own stages ({hint})")
    loss, selection = components.get("loss"), components.get("selection")
    if loss is not None and selection is not None and "mask" in loss.ignores and not is_neutral(selection):
        raise PLLZooError(
            f"incompatible recipe {method_name!r}: loss {loss.name!r} does not read the selection's mask (it makes "
            f"its own selection, or none), so selection {selection.name!r} would change nothing")
    update = components.get("label_update")
    if loss is not None and update is not None and "targets" in loss.ignores and not is_neutral(update):
        readers = {slot: c for slot, c in components.items() if c is not update and c is not loss}
        used = set().union(*(c.needs | c.reads for c in readers.values()))  # what the others read
        if readers.keys() <= set(complete) and "targets" not in used and not update.provides & (
                used | loss.needs | loss.reads):
            raise PLLZooError(
                f"incompatible recipe {method_name!r}: loss {loss.name!r} reads the candidate rows, not the label "
                f"update's targets, and no other component reads them or what it provides, so label update "
                f"{update.name!r} would change nothing (a component that reads step.targets declares "
                "reads = {'targets'})")


def _plans_extra_stages(comp: Component) -> bool:
    """Whether ``comp`` (a shipped component) plans stages before the final one: its ``pllzoo_stages`` answer for
    its hyper-parameters alone (an answer that needs the run counts as yes).  An estimator whose estimate nothing
    reads and that plans none only logs it (``prior_tv``), a measurement (an outside review), and is kept."""
    planner = getattr(comp, "pllzoo_stages", None)
    if planner is None:
        return False
    try:
        planned = planner(None)
    except Exception:  # noqa: BLE001 - it reads the run: assume it plans stages
        return True
    return not isinstance(planned, list) or len(planned) > 1


def declared_strong_view(method: str, components: Mapping[str, Component]) -> str | None:
    """The strong view a run's components declare (:attr:`Component.strong_view`), or None.

    :raises PLLZooError: two components declare different views.
    """
    declared = {c.strong_view: slot for slot, c in components.items() if c.strong_view is not None}
    if len(declared) > 1:
        shown = ", ".join(f"{slot} {label(components[slot])!r}: {view!r}" for view, slot in declared.items())
        raise PLLZooError(f"method {method!r}: its components declare different strong views ({shown}); "
                          "choose one with --hp train.strong_view=NAME")
    return next(iter(declared), None)


def views_of(components: Mapping[str, Component]) -> frozenset[str]:
    """The extra input views (beyond the weak one) that any of a run's components asks for."""
    return frozenset().union(*(c.views for c in components.values()))


# ---------------------------------------------------------------------- registration checks
_IMPL_ATTR = "pllzoo_impl"  # set by ``pllzoo.hookimpl`` (pluggy's marker of project "pllzoo")
_SPEC_ATTR = "pllzoo_spec"  # set by ``hookspecs.hookspec``


def _spec_args(spec_class: type) -> dict[str, tuple[str, ...]]:
    """``{hook name: argument names}`` of the specs declared on ``spec_class``."""
    return {
        name: tuple(list(inspect.signature(fn).parameters)[1:])
        for name, fn in vars(spec_class).items() if getattr(fn, _SPEC_ATTR, None) is not None
    }


def _impl_params(cls: type, attr: str, fn: Any) -> tuple[list[str], list[str]]:
    """(required positional arguments, required keyword-only arguments) of a hookimpl, without ``self``."""
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return [], []
    if params and not isinstance(inspect.getattr_static(cls, attr, None), (staticmethod, classmethod)):
        params = params[1:]  # the instance argument
    required = [p for p in params if p.default is inspect.Parameter.empty]
    positional = [p.name for p in required if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    return positional, [p.name for p in required if p.kind is p.KEYWORD_ONLY]


def check_name(what: str, name: Any) -> None:
    """A registered name must be usable in a method string and on the command line: no ``+``, ``=`` (method
    strings), ``,`` (``--methods a,b``), ``:`` (``--hp METHOD:key=value``), blanks, and not ``none``."""
    if not isinstance(name, str) or not name or name == "none" or any(c in name for c in "+=,: \t\n"):
        raise PLLZooError(f"bad {what} name {name!r}: a non-empty string without '+', '=', ',', ':' or blanks, "
                          "not 'none'")


#: the values a component may declare in ``views`` and ``ignores`` (what the trainer and the checks act on)
KNOWN_VIEWS: frozenset[str] = frozenset({"strong", "strong_input", "features", "joint"})
STRONG_INPUT: frozenset[str] = frozenset({"strong", "strong_input"})
"""The views that give ``step.batch.x_strong``; only ``"strong"`` also forwards it through the trained network."""
KNOWN_IGNORES: frozenset[str] = frozenset({"mask", "targets"})
SYNC_MODES: frozenset[str] = frozenset({"rows", "replicated"})


def _check_declarations(cls: type[Component], label: str) -> None:
    """The class attributes the host reads (``needs``, ``provides``, ``reads``, ``ignores``, ``views``,
    ``strong_view``, ``neutral``, ``sync``) have the declared types, and ``views``/``ignores`` hold values the host
    acts on: a string where a set is expected (``needs = "prior"``) or a misspelled view (``"strnog"``, which would leave
    ``step.logits_strong`` unset all run) is one line when the plugin registers, not a failure in a run."""
    for attr in ("needs", "provides", "reads", "ignores", "views"):
        value = getattr(cls, attr)
        if not isinstance(value, (frozenset, set, tuple, list)) or not all(isinstance(v, str) for v in value):
            shown = f"the str {value!r}" if isinstance(value, str) else repr(value)
            raise PLLZooError(f"{label}.{attr} must be a set of names, e.g. frozenset({{'prior'}}); got {shown}")
    for attr, known in (("views", KNOWN_VIEWS), ("ignores", KNOWN_IGNORES)):
        for value in sorted(set(getattr(cls, attr)) - known):
            near = difflib.get_close_matches(value, sorted(known), n=1)
            hint = f"did you mean {near[0]!r}? " if near else ""
            raise PLLZooError(f"{label}.{attr}: unknown {attr[:-1]} {value!r} ({hint}known: {', '.join(sorted(known))})")
    if not isinstance(cls.neutral, bool):
        raise PLLZooError(f"{label}.neutral must be True or False, got {cls.neutral!r}")
    if cls.strong_view is not None and not (isinstance(cls.strong_view, str) and cls.strong_view):
        raise PLLZooError(f"{label}.strong_view must be a view's name or None, got {cls.strong_view!r}")
    sync = cls.sync
    if not isinstance(sync, Mapping) or not all(isinstance(k, str) and v in SYNC_MODES for k, v in sync.items()):
        raise PLLZooError(f"{label}.sync must map state keys to one of {', '.join(sorted(SYNC_MODES))}, got {sync!r}")


def check_component(cls: Any, slot: str) -> None:
    """Raise ``PLLZooError`` (one line) unless ``cls`` is a valid component for ``slot``.

    Checked when a plugin registers it, so ``pllzoo plugins`` reports the plugin as failed and
    no run starts with it: a :class:`Component` subclass; every ``@hookimpl`` names a run hook
    (a misspelled hook would otherwise be found only when a run starts) and asks only for
    arguments that hook's spec has, and none is a hook wrapper; the slot's role hook is implemented
    with ``@hookimpl``; the declared attributes have their types (:func:`_check_declarations`);
    ``HParams`` is a dataclass whose defaults construct it.
    """
    from pllzoo import hookspecs  # the specs import nothing at run time; deferred to keep this module light

    if not (isinstance(cls, type) and issubclass(cls, Component)):
        what = f"an instance of {type(cls).__qualname__}" if isinstance(cls, Component) else repr(cls)
        raise PLLZooError(f"{what} is not a pllzoo.Component subclass (register the class, not an instance)")
    label = cls.__qualname__
    run_specs = _spec_args(hookspecs.RunSpec)
    discovery = _spec_args(hookspecs.DiscoverySpec)
    implemented: set[str] = set()
    for attr in sorted(dir(cls)):
        fn = getattr(cls, attr, None)
        opts = getattr(fn, _IMPL_ATTR, None)
        if not isinstance(opts, dict) or not callable(fn):
            continue
        hook = opts.get("specname") or attr
        if hook in discovery:
            raise PLLZooError(f"{label}.{attr}: {hook} is a discovery hook; implement it on the plugin module")
        if hook not in run_specs:
            near = difflib.get_close_matches(hook, run_specs, n=1)
            hint = f" (did you mean {near[0]}?)" if near else f"; run hooks: {', '.join(sorted(run_specs))}"
            raise PLLZooError(f"{label}.{attr}: {hook!r} is not a run hook{hint}")
        positional, kwonly = _impl_params(cls, attr, fn)
        unknown = [a for a in positional if a not in run_specs[hook]]
        if unknown:
            raise PLLZooError(
                f"{label}.{attr}: argument(s) {', '.join(map(repr, unknown))} not in the spec "
                f"{hook}({', '.join(run_specs[hook])})")
        if kwonly:
            raise PLLZooError(f"{label}.{attr}: required keyword-only argument(s) {', '.join(map(repr, kwonly))} "
                              f"are never passed; make them positional ({hook}({', '.join(run_specs[hook])}))")
        if opts.get("wrapper") or opts.get("hookwrapper"):
            raise PLLZooError(f"{label}.{attr}: {hook} is a hook wrapper; run hooks take plain implementations")
        implemented.add(hook)
    _check_declarations(cls, label)
    role = hookspecs.SLOT_HOOKS[slot]
    if role not in implemented and not callable(getattr(cls, role, None)):
        raise PLLZooError(f"{label} does not implement {role}, the role hook of slot {slot!r}")
    for hook in sorted(run_specs):  # any run hook, not only the role's: an undecorated pllzoo_post_step never ran,
        if hook not in implemented and callable(getattr(cls, hook, None)):  # silently (an outside review)
            raw = inspect.getattr_static(cls, hook)
            if isinstance(raw, (staticmethod, classmethod)):  # pluggy reads the marker off the class's attribute
                raise PLLZooError(f"{label}.{hook} is a {type(raw).__name__}; run hooks are plain methods "
                                  f"(def {hook}(self, ...)), which pluggy finds @pllzoo.hookimpl on")
            raise PLLZooError(f"{label}.{hook} lacks @pllzoo.hookimpl, so pluggy would never call it")
    hp_cls = getattr(cls, "HParams", None)
    if not (isinstance(hp_cls, type) and dataclasses.is_dataclass(hp_cls)):
        raise PLLZooError(f"{label}.HParams must be a dataclass (see pllzoo.hp), got {hp_cls!r}")
    wrong = hparams.declaration_error(hp_cls)
    if wrong is not None:
        raise PLLZooError(f"{label}.HParams {wrong}")
    try:
        hp_cls()
    except Exception as exc:
        first = (str(exc).strip().splitlines() or [""])[0]
        raise PLLZooError(f"{label}.HParams() fails with its defaults: {type(exc).__name__}: {first}") from None
