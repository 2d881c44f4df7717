"""The contract stays documented: typed specs, docstrings, docs/hooks.md in sync, a test per hook."""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest

from pllzoo import hookspecs

REPO = Path(__file__).resolve().parents[1]
SPECS = [
    (name, fn)
    for cls in (hookspecs.DiscoverySpec, hookspecs.RunSpec, hookspecs.ObserverSpec)
    for name, fn in cls.__dict__.items()
    if name.startswith("pllzoo_")
]


def _signature(fn) -> str:
    args = [p for p in inspect.signature(fn).parameters if p != "self"]
    return f"{fn.__name__}({', '.join(args)})"


@pytest.mark.parametrize("name,fn", SPECS, ids=[s[0] for s in SPECS])
def test_spec_is_typed_and_documented(name, fn):
    sig = inspect.signature(fn)
    for p in list(sig.parameters.values())[1:]:
        assert p.annotation is not inspect.Parameter.empty, f"{name}: argument {p.name} has no type"
    assert sig.return_annotation is not inspect.Signature.empty, f"{name}: no return type"
    doc = inspect.getdoc(fn) or ""
    for part in ("Called:", ":returns:", "Example::", "versionadded"):
        assert part in doc, f"{name}: docstring lacks {part!r}"


@pytest.mark.parametrize("name,fn", SPECS, ids=[s[0] for s in SPECS])
def test_spec_is_in_docs(name, fn):
    assert f"### {_signature(fn)}" in (REPO / "docs" / "hooks.md").read_text()


@pytest.mark.parametrize("name,fn", SPECS, ids=[s[0] for s in SPECS])
def test_every_hook_has_a_test(name, fn):
    text = "\n".join(p.read_text() for p in (REPO / "tests").rglob("test_*.py"))
    assert f"def test_hook_{name}(" in text, f"write tests/...::test_hook_{name}"


def test_every_slot_has_a_role_and_a_register_hook():
    from pllzoo.components import SLOTS

    assert set(hookspecs.SLOT_HOOKS) == set(SLOTS) == set(hookspecs.SLOT_REGISTER_HOOKS)
