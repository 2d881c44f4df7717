"""Hyper-parameters: frozen dataclasses declared next to the code that reads them.

Every field carries a default and a help string (``hp(default, "help")``).
Overrides come as dotted ``slot.field=value`` strings and are checked against
the dataclass: an unknown key is an error that lists the valid keys.
"""

from __future__ import annotations

import dataclasses
import typing
from dataclasses import dataclass, field, fields
from typing import Any

from pllzoo.errors import PLLZooError, UnknownNameError


def hp(default: Any, help: str, **metadata: Any) -> Any:
    """A dataclass field with a default and a help string (``choices=...``, search space, ...)."""
    if isinstance(default, (list, dict, set)):
        raise TypeError("hyper-parameters must be immutable; use a tuple")
    return field(default=default, metadata={"help": help, **metadata})


@dataclass(frozen=True)
class NoHParams:
    """A component without hyper-parameters."""


def describe(cls: type) -> list[tuple[str, Any, str]]:
    """``(name, default, help)`` for every field of a hyper-parameter dataclass."""
    return [(f.name, f.default, f.metadata.get("help", "")) for f in fields(cls)]


def parse_value(text: str, annotation: Any, default: Any) -> Any:
    """Parse a command-line string to the type of a field."""
    kind = type(default) if default is not None else annotation
    if isinstance(kind, str):  # postponed annotations
        kind = {"int": int, "float": float, "bool": bool, "str": str}.get(kind.split("|")[0].strip(), str)
    origin = typing.get_origin(kind)
    if kind is bool:
        low = text.strip().lower()
        if low in {"1", "true", "yes", "on"}:
            return True
        if low in {"0", "false", "no", "off"}:
            return False
        raise ValueError(f"expected a boolean, got {text!r}")
    if kind is int:
        return int(text)
    if kind is float:
        return float(text)
    if kind is tuple or origin is tuple:
        items = [t for t in text.replace(";", ",").split(",") if t.strip()]
        elem = type(default[0]) if default else float
        return tuple(elem(t) for t in items)
    return text


def override(obj: Any, changes: dict[str, str], where: str) -> Any:
    """Return ``dataclasses.replace(obj, **parsed changes)``; unknown keys are errors."""
    if not changes:
        return obj
    by_name = {f.name: f for f in fields(obj)}
    parsed: dict[str, Any] = {}
    for key, text in changes.items():
        if key not in by_name:
            valid = ", ".join(sorted(by_name)) or "(none)"
            raise UnknownNameError(f"unknown hyper-parameter {where}.{key}; valid: {valid}")
        f = by_name[key]
        if not isinstance(text, str):
            parsed[key] = text
            continue
        try:
            parsed[key] = parse_value(text, f.type, getattr(obj, key))
        except ValueError as exc:
            raise PLLZooError(f"bad value for {where}.{key}: {exc}") from None
    for key, value in parsed.items():
        choices = by_name[key].metadata.get("choices")
        if choices is not None and value not in choices:
            raise PLLZooError(f"bad value for {where}.{key}: {value!r}; valid: {', '.join(map(str, choices))}")
    return dataclasses.replace(obj, **parsed)


def as_dict(obj: Any) -> dict[str, Any]:
    return dataclasses.asdict(obj) if dataclasses.is_dataclass(obj) else {}
