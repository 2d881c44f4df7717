"""A plugin's own exception while its component is built (e.g. its check of a hyper-parameter value)
is one ``Error:`` line naming the component and its plugin; ``PLLZOO_DEBUG=1`` prints the traceback."""

from __future__ import annotations

import sys
import types
from dataclasses import dataclass

import pytest
from click.testing import CliRunner

from pllzoo import Component, Method, hookimpl, hp
from pllzoo.cli import cli
from pllzoo.plugins import make_plugin_manager
from pllzoo.registry import Registry


@dataclass(frozen=True)
class PickyHParams:
    level: int = hp(1, "must be odd (this plugin's own rule)")


class Picky(Component):
    HParams = PickyHParams

    def __init__(self, hp=None):
        super().__init__(hp)
        if self.hp.level % 2 == 0:
            raise ValueError(f"level must be odd, got {self.hp.level}")

    @hookimpl
    def pllzoo_loss(self, step, state):
        raise AssertionError("never reached")


def _registry_with(monkeypatch, name: str, loss: type[Component]) -> Registry:
    """The shipped plugins and plugin ``name``, which registers ``loss`` as ``NAME.loss`` and a method ``NAME`` of it;
    the registry bench and check use."""
    plugin = types.ModuleType(f"{name}_plugin")
    plugin.pllzoo_register_losses = hookimpl(lambda register: register(f"{name}.loss", loss))
    plugin.pllzoo_register_methods = hookimpl(lambda register: register(Method(name, loss=f"{name}.loss")))
    monkeypatch.setitem(sys.modules, f"{name}_plugin", plugin)
    pm, infos = make_plugin_manager()
    pm.register(plugin, name=name)
    reg = Registry.build(pm, infos)
    monkeypatch.setattr("pllzoo.cli.bench.get_registry", lambda: reg)
    monkeypatch.setattr("pllzoo.registry.get_registry", lambda: reg)
    return reg


@pytest.fixture
def picky_registry(monkeypatch):
    return _registry_with(monkeypatch, "picky", Picky)


ARGS = ["bench", "--methods", "picky", "--hp", "loss.level=2", "--epochs", "1"]


def test_a_plugins_own_error_is_one_line_naming_it(picky_registry, tmp_path, monkeypatch):
    monkeypatch.delenv("PLLZOO_DEBUG", raising=False)
    res = CliRunner().invoke(cli, [*ARGS, "--out", str(tmp_path)])
    assert res.exit_code == 1 and "Traceback" not in res.output
    (line,) = [x for x in res.output.splitlines() if x.startswith("Error:")]
    assert "loss component 'picky.loss' (plugin 'picky'" in line and "ValueError: level must be odd, got 2" in line


def test_debug_shows_the_traceback_and_its_cause(picky_registry, tmp_path, monkeypatch):
    monkeypatch.setenv("PLLZOO_DEBUG", "1")
    res = CliRunner().invoke(cli, [*ARGS, "--out", str(tmp_path)])
    assert res.exit_code == 1 and "Traceback" in res.output and "raise ValueError" in res.output
    assert res.output.rstrip().splitlines()[-1].startswith("Error:")


class Boom(Component):
    """A loss whose hook raises while the run trains."""

    @hookimpl
    def pllzoo_loss(self, step, state):
        raise RuntimeError("boom inside the hook")


@pytest.fixture
def boom_registry(monkeypatch):
    return _registry_with(monkeypatch, "boom", Boom)


@pytest.mark.parametrize("debug", [False, True])
@pytest.mark.parametrize("command", [
    ["bench", "--methods", "boom", "--dataset", "synthetic-lt", "--subset", "256", "--batch-size", "32", "--epochs", "1",
     "--threads", "1"],
    ["check", "boom"],
])
def test_debug_shows_where_a_hook_raised_in_a_run(boom_registry, tmp_path, monkeypatch, command, debug):
    """An outside review: with PLLZOO_DEBUG=1, a bench printed only its own RunsFailed traceback and check none;
    the hook's frame was in runs/<id>/error.txt only.  Without it, still no traceback."""
    if debug:
        monkeypatch.setenv("PLLZOO_DEBUG", "1")
    else:
        monkeypatch.delenv("PLLZOO_DEBUG", raising=False)
    args = [*command, "--out", str(tmp_path)] if command[0] == "bench" else command
    res = CliRunner().invoke(cli, args)
    assert res.exit_code != 0, res.output
    assert "boom inside the hook" in res.output
    hook_frame = 'raise RuntimeError("boom inside the hook")' in res.output
    assert hook_frame == debug and ("Traceback" in res.output) == debug, res.output
