"""A backbone's own arguments: ``--hp model.NAME=VALUE``.

A model factory (``pllzoo_register_models``) takes ``num_classes`` and ``input_shape`` and may declare
more keyword parameters with defaults, e.g. ``mlp(num_classes, input_shape, hidden=500)``; each one whose
annotation (or default) is ``int``, ``float``, ``bool``, ``str`` or a tuple of one of them can be set from the
command line, a config file or a sweep's ``--space`` as ``model.NAME``, parsed as ``--hp`` parses a field
(:func:`pllzoo.hparams.parse_value`).  A run records them in ``TrainConfig.model_args`` as ``NAME=VALUE`` texts,
sorted and re-rendered from the parsed values (``hidden=0256`` and ``hidden=256`` are one run), and they name
the run only when given (``pllzoo.run.HASHED_UNLESS_DEFAULT``), so runs without them keep their ids.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable
from typing import Any

from pllzoo.errors import PLLZooError, UnknownNameError
from pllzoo.hparams import basic_type, parse_value, tuple_element

RESERVED = ("num_classes", "input_shape")  # what the trainer passes itself


def parameters(factory: Callable[..., Any]) -> dict[str, inspect.Parameter]:
    """The keyword parameters of ``factory`` a user can set: named, with a default of a settable type."""
    try:
        params = inspect.signature(factory).parameters.values()
    except (TypeError, ValueError):  # a builtin or C callable: nothing to inspect
        return {}
    kinds = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    return {p.name: p for p in params
            if p.name not in RESERVED and p.kind in kinds and p.default is not p.empty and _settable(p)}


def _annotation(p: inspect.Parameter) -> Any:
    return p.annotation if p.annotation is not p.empty else type(p.default)


def _settable(p: inspect.Parameter) -> bool:
    annotation = _annotation(p)
    return basic_type(annotation) is not None or tuple_element(annotation, p.default) is not None


def render(value: Any) -> str:
    """The text that parses back to ``value`` (``true``/``false``, ``1,2,3`` for a tuple, ``none``), except a tuple's
    str item holding a comma, which no ``--hp`` text can give either (its items are split at commas)."""
    if value is None:
        return "none"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, tuple):
        return ",".join(render(v) for v in value)
    return repr(value) if isinstance(value, float) else str(value)


def parse(who: str, factory: Callable[..., Any], entries: Iterable[str]) -> dict[str, Any]:
    """``NAME=VALUE`` entries → the factory's keyword arguments, typed.

    :param who: the backbone as messages name it, e.g. ``model 'mlp' (plugin builtin)``.
    :raises UnknownNameError: a name the factory does not declare (one line listing those it does).
    :raises PLLZooError: a value its type does not parse (one line)."""
    params, out = parameters(factory), {}
    for entry in entries:
        name, eq, text = str(entry).partition("=")
        name = name.strip()
        if not eq:  # only a recorded entry can lack it (--hp splits at "="): a hand-edited config.json
            raise PLLZooError(f"bad value for model.{name} of {who}: {str(entry)!r} is no NAME=VALUE")
        if name not in params:
            takes = ", ".join(f"model.{n} (default {render(p.default)})" for n, p in params.items())
            raise UnknownNameError(f"{who} takes no argument {name!r} (--hp model.{name}); "
                                   f"{'it takes ' + takes if takes else 'it takes none'}")
        p = params[name]
        try:
            out[name] = parse_value(text, _annotation(p), p.default)
        except ValueError as exc:
            raise PLLZooError(f"bad value for model.{name} of {who}: {exc}") from None
    return out


def canonical(who: str, factory: Callable[..., Any], entries: Iterable[str]) -> tuple[str, ...]:
    """``entries`` as a run records them: parsed (:func:`parse`), sorted by name, each rendered again."""
    return tuple(f"{k}={render(v)}" for k, v in sorted(parse(who, factory, entries).items()))


def as_entry(name: str, value: Any) -> str:
    """``--hp model.NAME=VALUE`` (text, or a config file's typed value) as a ``NAME=VALUE`` entry."""
    return f"{name}={value if isinstance(value, str) else render(value)}"
