"""Hyper-parameters: frozen dataclasses declared next to the code that reads them.

Every field carries a default and a help string (``hp(default, "help")``), and
optionally ``choices=`` or a range (``ge=``/``gt=``/``le=``/``lt=``: ``hp(0.9, "m", ge=0, lt=1)``).
Overrides come as dotted ``slot.field=value`` strings and are checked against
the dataclass: an unknown key is an error that lists the valid keys, and a value
outside its choices or range is a one-line error naming the key, the value and
the range.  Choices and ranges are metadata only: they change no default and
nothing that names a run (:func:`as_dict` leaves metadata out).
"""

from __future__ import annotations

import dataclasses
import math
import re
import types
import typing
from pathlib import Path
from dataclasses import dataclass, field, fields
from typing import Any

from pllzoo.errors import PLLZooError, UnknownNameError

_ASCII_NUMBER = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)(e[+-]?\d+)?|[+-]?(inf|infinity|nan)", re.ASCII | re.IGNORECASE)


@dataclass(frozen=True)
class Range:
    """Bounds of a numeric hyper-parameter; ``None`` is unbounded, ``*_open`` excludes the bound itself."""

    low: float | None = None
    high: float | None = None
    low_open: bool = False
    high_open: bool = False

    def __contains__(self, value: Any) -> bool:
        if isinstance(value, tuple):  # a tuple field: every element
            return all(v in self for v in value)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            return False  # a bounded number is a finite one: inf passes "> 0" but trains nothing
        if self.low is not None and not (value > self.low if self.low_open else value >= self.low):
            return False
        return self.high is None or (value < self.high if self.high_open else value <= self.high)

    def __str__(self) -> str:
        """``> 0``, ``≥ 1``, ``≤ 1`` or an interval ``[0, 1)``."""
        if self.high is None:
            return f"{'>' if self.low_open else '≥'} {self.low:g}"
        if self.low is None:
            return f"{'<' if self.high_open else '≤'} {self.high:g}"
        return f"{'(' if self.low_open else '['}{self.low:g}, {self.high:g}{')' if self.high_open else ']'}"


def _caller() -> str:
    """`` in CLASS (FILE:LINE)`` of the class body that calls :func:`hp`, or empty where it cannot be told."""
    import sys

    try:
        frame = sys._getframe(2)
    except ValueError:
        return ""
    return f" in {frame.f_code.co_name} ({Path(frame.f_code.co_filename).name}:{frame.f_lineno})"


def hp(default: Any, help: str, *, ge: float | None = None, gt: float | None = None, le: float | None = None,
       lt: float | None = None, **metadata: Any) -> Any:
    """A dataclass field with a default and a help string (``choices=...``, search space, ...).

    ``ge``/``gt`` (≥ / >) and ``le``/``lt`` (≤ / <) bound a number (each element of a tuple), checked
    by :func:`override` and :func:`check`; at most one lower and one upper bound.
    """
    where = _caller()  # these fail at the plugin's import: the line says where (an outside review: it did not)
    if isinstance(default, (list, dict, set)):
        raise TypeError(f"hp({default!r}, {help!r}){where}: hyper-parameters must be immutable; use a tuple")
    if "choices" in metadata and default not in metadata["choices"]:
        raise TypeError(f"hp({default!r}, {help!r}){where}: the default is not one of its choices "
                        f"{tuple(metadata['choices'])!r}")
    if ge is not None and gt is not None or le is not None and lt is not None:
        raise TypeError(f"hp({default!r}, {help!r}){where}: give one lower bound (ge or gt) and one upper bound "
                        "(le or lt) at most")
    if any(b is not None for b in (ge, gt, le, lt)):
        bounds = Range(gt if gt is not None else ge, lt if lt is not None else le, gt is not None, lt is not None)
        if default is not None and default not in bounds:
            raise TypeError(f"hp({default!r}, {help!r}){where}: the default is outside its range {bounds}")
        metadata["range"] = bounds
    return field(default=default, metadata={"help": help, **metadata})


def range_of(f: dataclasses.Field) -> Range | None:
    """The declared :class:`Range` of a hyper-parameter field, or None."""
    return f.metadata.get("range")


@dataclass(frozen=True)
class NoHParams:
    """A component without hyper-parameters."""


def describe(cls: type) -> list[tuple[str, Any, str]]:
    """``(name, default, help)`` for every field of a hyper-parameter dataclass; the help ends with
    the field's range or choices when it declares them (``pllzoo methods --hparams``)."""
    out = []
    for f in fields(cls):
        help_, bounds, choices = f.metadata.get("help", ""), range_of(f), f.metadata.get("choices")
        if bounds is not None:
            help_ += f" (range: {bounds})"
        if choices is not None:
            help_ += f" (one of: {', '.join(map(str, choices))})"
        out.append((f.name, f.default, help_))
    return out


_BASIC = {"int": int, "float": float, "bool": bool, "str": str}


def _type_parts(text: str) -> list[str]:
    """The types of a postponed annotation's text other than None: ``X | None``, ``Optional[X]`` and
    ``Union[X, None]`` (``typing.`` or not) are ``[X]``; commas and bars inside brackets stay (a review:
    ``Optional[int]`` and ``Union[tuple[int, ...], None]`` took any text as a string)."""
    text = text.strip()
    wrapped = re.fullmatch(r"(?:typing\.)?(Optional|Union)\[(.*)\]", text)
    body, seps = (wrapped.group(2), ",|") if wrapped else (text, "|")
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(body):
        depth += ch == "["
        depth -= ch == "]"
        if depth == 0 and ch in seps:
            parts.append(body[start:i])
            start = i + 1
    parts.append(body[start:])
    return [p.strip() for p in parts if p.strip() not in ("None", "NoneType", "")]


def basic_type(annotation: Any) -> type | None:
    """``int``, ``float``, ``bool`` or ``str`` when ``annotation`` is one of them, optionally ``| None`` (also as
    a postponed annotation's text), else None."""
    if isinstance(annotation, str):
        kinds = [_BASIC.get(t) for t in _type_parts(annotation)]
        return kinds[0] if len(kinds) == 1 else None
    if annotation in _BASIC.values():
        return annotation
    args = [a for a in typing.get_args(annotation) if a is not type(None)]
    if typing.get_origin(annotation) in (typing.Union, types.UnionType) and len(args) == 1 \
            and args[0] in _BASIC.values():
        return args[0]
    return None


def declaration_error(cls: type) -> str | None:
    """What is wrong with a hyper-parameter dataclass's declaration, or None: it must be frozen (a run's
    settings cannot change under it), and a field annotated ``int``, ``float``, ``bool`` or ``str`` needs a
    default of that type (``float`` takes an int; ``X | None`` takes None), as ``--hp`` parses by the
    annotation."""
    if not cls.__dataclass_params__.frozen:
        return "is not frozen; declare it @dataclass(frozen=True)"
    for f in fields(cls):
        if f.default is dataclasses.MISSING:
            continue
        if f.default is None and basic_type(f.type) is not None and not _takes_none(f.type):
            return f"field {f.name!r}: default None, but its annotation {f.type} does not take None"
        wrong = type_error(f, f.default)
        if wrong is not None:
            return f"field {f.name!r}: annotated {wrong}, but its default is {f.default!r} ({type(f.default).__name__})"
    return None


def _takes_none(annotation: Any) -> bool:
    return "None" in str(annotation) or "Optional" in str(annotation)


def type_error(f: dataclasses.Field, value: Any) -> str | None:
    """The type ``f`` is annotated with (``int``, ``float``, ``bool`` or ``str``, optionally ``| None``), when
    ``value`` is not of it (``float`` takes an int; bool is no number), else None."""
    kind = basic_type(f.type)
    if kind is None or value is None and _takes_none(f.type):
        return None
    ok = (isinstance(value, bool) if kind is bool else
          isinstance(value, int) and not isinstance(value, bool) if kind is int else
          isinstance(value, (int, float)) and not isinstance(value, bool) if kind is float else
          isinstance(value, str))
    return None if ok else kind.__name__


_TUPLE_TEXT = re.compile(r"(?:typing\.)?(?:tuple|Tuple)(?:\[\s*(\w+)\s*,\s*\.\.\.\s*\])?")


def tuple_element(annotation: Any, default: Any) -> type | None:
    """The element type of a ``tuple[X, ...]`` field (also ``| None`` or ``Optional[...]``, and as a postponed
    annotation's text): X when it is ``int``, ``float``, ``bool`` or ``str``, else the default's first element's
    type (float for an empty one); None when the field is no tuple (neither its annotation nor its default)."""
    fallback = type(default[0]) if isinstance(default, tuple) and default else float
    if isinstance(annotation, str):
        parts = _type_parts(annotation)
        found = _TUPLE_TEXT.fullmatch(parts[0]) if len(parts) == 1 else None
        if found is None:
            return fallback if isinstance(default, tuple) else None
        return _BASIC.get(found.group(1) or "", fallback)
    args = [a for a in typing.get_args(annotation) if a is not type(None)]
    if typing.get_origin(annotation) in (typing.Union, types.UnionType) and len(args) == 1:
        annotation = args[0]
    if annotation is tuple or typing.get_origin(annotation) is tuple:
        first = typing.get_args(annotation)[:1]
        return first[0] if first and first[0] in _BASIC.values() else fallback
    return fallback if isinstance(default, tuple) else None


def parse_value(text: str, annotation: Any, default: Any) -> Any:
    """Parse a command-line string to the type of a field: its annotation's when that is ``int``, ``float``,
    ``bool`` or ``str`` (:func:`basic_type`), else its default's.  ``none`` gives None for an ``X | None`` field;
    a tuple's items (``700,800``, also in brackets or parentheses) are parsed as its annotation's element type."""
    if _takes_none(annotation) and text.strip().lower() in {"none", "null"}:
        return None
    elem = tuple_element(annotation, default)
    if elem is not None:
        body = text.strip()
        if body[:1] + body[-1:] in ("[]", "()"):  # [700,800], as a config file's; (700, 800), as Python shows it
            body = body[1:-1]
        items = [t for t in body.replace(";", ",").split(",") if t.strip()]
        return tuple(parse_value(t, elem, None) for t in items)
    kind = basic_type(annotation) or (type(default) if default is not None else annotation)
    if isinstance(kind, str):  # postponed annotations
        kind = _BASIC.get(kind.split("|")[0].strip(), str)
    if kind is bool:
        low = text.strip().lower()
        if low in {"1", "true", "yes", "on"}:
            return True
        if low in {"0", "false", "no", "off"}:
            return False
        raise ValueError(f"expected a boolean, got {text!r}")
    if kind in (int, float) and not _ASCII_NUMBER.fullmatch(text.strip()):  # not int's 1_000 or other scripts'
        raise ValueError(f"expected a {'whole ' if kind is int else ''}number, got {text!r}")  # digits
    if kind is int:
        try:
            return int(text)
        except ValueError:
            raise ValueError(f"expected a whole number, got {text!r}") from None
    if kind is float:
        try:
            return float(text)
        except ValueError:
            raise ValueError(f"expected a number, got {text!r}") from None
    return text


class WrongType(ValueError):
    """A typed value of another type than its field's: ``kind``, the type (a tuple field's element type), and
    ``many``, whether the field is a tuple."""

    def __init__(self, kind: str, many: bool) -> None:
        super().__init__(kind)
        self.kind, self.many = kind, many


def typed_value(f: dataclasses.Field, value: Any, default: Any) -> Any:
    """A typed value for field ``f`` (a replayed record's, a dataset's default) as :func:`parse_value` would give it
    from text: an int for a float that float, a list for a tuple a tuple of the element type (an outside review: a
    hand-edited record's ``[1.5]`` milestones passed, ``1`` failed in the run), None where the field takes it.
    :raises WrongType: another type."""
    if value is None and _takes_none(f.type):
        return None
    kind = tuple_element(f.type, default)
    if kind is not None:
        if not (isinstance(value, (list, tuple)) and all(
                isinstance(v, bool) if kind is bool else not isinstance(v, bool) and
                isinstance(v, (int, float) if kind is float else kind) for v in value)):
            raise WrongType(kind.__name__, many=True)
        return tuple(float(v) if kind is float else v for v in value)
    wrong = type_error(f, value)
    if wrong is not None:
        raise WrongType(wrong, many=False)
    return float(value) if basic_type(f.type) is float and value is not None else value


def as_declared(value: Any, default: Any) -> Any:
    """``value``, or ``default`` itself where they are the same number and the default an int on a float field
    (an outside plugin may declare ``hp(1)`` for a float: its runs record ``1``, and ``--hp x=1`` or a replay of
    such a run, which give ``1.0``, must name the same run, an outside review)."""
    if type(default) is int and type(value) is float and value == default:
        return default
    return value


def override(obj: Any, changes: dict[str, str], where: str) -> Any:
    """Return ``dataclasses.replace(obj, **parsed changes)``; unknown keys are errors."""
    if not changes:
        return obj
    by_name = {f.name: f for f in fields(obj)}
    parsed: dict[str, Any] = {}
    for key, text in changes.items():
        if key not in by_name:
            valid = ", ".join(f"{where}.{n}" for n in sorted(by_name)) or "(none)"  # as the key is named
            raise UnknownNameError(f"unknown hyper-parameter {where}.{key}; valid: {valid}")
        f = by_name[key]
        if not isinstance(text, str):  # a typed value (a replayed record): of the field's type, as text parses it
            try:
                parsed[key] = as_declared(typed_value(f, text, getattr(obj, key)), getattr(obj, key))
            except WrongType as exc:
                raise PLLZooError(f"bad value for {where}.{key}: {text!r} ({type(text).__name__}); expected "
                                  f"{'a list of ' if exc.many else ''}{exc.kind}") from None
            continue
        try:
            parsed[key] = as_declared(parse_value(text, f.type, getattr(obj, key)), getattr(obj, key))
        except ValueError as exc:
            raise PLLZooError(f"bad value for {where}.{key}: {exc}") from None
    return check(dataclasses.replace(obj, **parsed), where, keys=parsed)


def check(obj: Any, where: str, keys: typing.Iterable[str] | None = None) -> Any:
    """``obj`` if each field (of ``keys``, default all) is within its declared choices and range.

    :raises PLLZooError: one line naming the first offending key, its value and what is allowed.
    """
    wanted = None if keys is None else set(keys)
    for f in fields(obj):
        if wanted is not None and f.name not in wanted:
            continue
        value, choices, bounds = getattr(obj, f.name), f.metadata.get("choices"), range_of(f)
        if choices is not None and value not in choices:
            raise PLLZooError(f"bad value for {where}.{f.name}: {value!r}; valid: {', '.join(map(str, choices))}")
        if bounds is not None and value is not None and value not in bounds:
            shown = value if isinstance(value, tuple) else f"{value!r}"
            raise PLLZooError(f"bad value for {where}.{f.name}: {shown}; must be {_phrase(bounds)}")
        if any(isinstance(v, int) and not isinstance(v, bool) and not -2 ** 63 <= v < 2 ** 63
               for v in (value if isinstance(value, tuple) else (value,))):  # torch's int64 (an outside review:
            # an int past it passed the range check and failed in the run, OverflowError)
            raise PLLZooError(f"bad value for {where}.{f.name}: {value!r}; must fit in 64 bits (-2**63 to 2**63-1)")
    return obj


def _phrase(bounds: Range) -> str:
    text = str(bounds)
    return f"in {text}" if text[0] in "[(" else text


def as_dict(obj: Any) -> dict[str, Any]:
    return dataclasses.asdict(obj) if dataclasses.is_dataclass(obj) else {}


def unnamed_values(cls: type) -> dict[str, Any]:
    """``{field: V}`` for each field of the hyper-parameter dataclass ``cls`` declared ``unnamed_when=V``: the
    value a recorded config without the field ran with."""
    return {f.name: f.metadata["unnamed_when"] for f in fields(cls) if "unnamed_when" in f.metadata} \
        if dataclasses.is_dataclass(cls) else {}


def named(obj: Any) -> dict[str, Any]:
    """:func:`as_dict` for a run's config (its run id): without each field declared with
    ``hp(..., unnamed_when=V)`` while it holds ``V``.  A field added after runs were recorded declares the
    value those runs ran with, so their ids stand; any other value names a new run.  (A config without
    the field reads as ``V``: keep ``V`` the default, or fill it in where recorded configs are read.)"""
    d = as_dict(obj)
    if not dataclasses.is_dataclass(obj):
        return d
    for f in fields(obj):
        if "unnamed_when" in f.metadata and d.get(f.name) == f.metadata["unnamed_when"]:
            del d[f.name]
    return d
