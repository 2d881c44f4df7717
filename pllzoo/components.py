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
which something is needed that no component provides, naming both sides.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar, Mapping

from pllzoo.errors import PLLZooError
from pllzoo.hparams import NoHParams

SLOTS: tuple[str, ...] = ("label_update", "selection", "loss", "estimator", "predict")
OPTIONAL_SLOTS: frozenset[str] = frozenset({"estimator", "predict"})
#: what the host itself provides to every component
HOST_PROVIDES: frozenset[str] = frozenset({"logits", "probs", "candidates", "targets", "mask", "weak"})


class Component:
    """Base class of all components; subclasses implement hooks with ``@pllzoo.hookimpl``.

    Class attributes:

    * ``HParams`` — a frozen dataclass of hyper-parameters (see :mod:`pllzoo.hparams`);
      the instance gets the resolved values as ``self.hp``.
    * ``needs`` / ``provides`` — state keys read / written.
    * ``views`` — input views beyond the weak one that the trainer must forward
      (``{"strong"}`` gives ``step.logits_strong``).
    * ``name`` / ``slot`` — set by the registry on registration.
    """

    HParams: ClassVar[type] = NoHParams
    needs: ClassVar[frozenset[str]] = frozenset()
    provides: ClassVar[frozenset[str]] = frozenset()
    views: ClassVar[frozenset[str]] = frozenset()
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

    ``hparams`` holds recipe-level defaults as dotted keys (``"loss.eta": 0.5``),
    applied before the user's ``--hp`` overrides.
    """

    name: str
    loss: str
    label_update: str = "pllzoo.uniform"
    selection: str = "pllzoo.all"
    estimator: str | None = None
    predict: str | None = None
    hparams: Mapping[str, Any] = field(default_factory=dict)
    description: str = ""
    citation: str = ""

    def slots(self) -> dict[str, str | None]:
        return {s: getattr(self, s) for s in SLOTS}


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
        if slot not in SLOTS:
            raise PLLZooError(f"unknown slot {slot!r} in {text!r}; slots: {', '.join(SLOTS)}")
        if comp == "none" and slot not in OPTIONAL_SLOTS:
            raise PLLZooError(f"slot {slot!r} cannot be empty; only {', '.join(sorted(OPTIONAL_SLOTS))} can be none")
        swaps[slot] = None if comp == "none" else comp
    return base, swaps


def check_compatible(method_name: str, components: Mapping[str, Component]) -> None:
    """Raise ``PLLZooError`` unless every ``need`` is provided and no key has two writers."""
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


def views_of(components: Mapping[str, Component]) -> frozenset[str]:
    """The extra input views (beyond the weak one) that any of a run's components asks for."""
    return frozenset().union(*(c.views for c in components.values()))
