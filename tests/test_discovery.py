"""Discovery you can trust: atomic registration, shipped names kept, failures reported.

Outside plugins are installed as real distributions (a ``*.dist-info`` folder with
``entry_points.txt`` and a module, in a folder put first on ``sys.path``), so they go
through the ``pllzoo`` entry-point group exactly as a pip-installed plugin would, in
process and fast.  In-process plugins (``pm.register``) exercise the registry alone.
"""

from __future__ import annotations

import importlib.metadata as md
import sys
import textwrap
from dataclasses import dataclass

import pytest
from click.testing import CliRunner

from pllzoo import Component, Method, hookimpl
from pllzoo.builtin import SelectAll, SoftCrossEntropy
from pllzoo.cli import cli
from pllzoo.errors import UnknownNameError
from pllzoo.plugins import make_plugin_manager
from pllzoo.registry import Registry, get_registry, reset_registry

SHIPPED = "baselines,solar,ltpll"
BASELINE_METHODS = {"proden", "cc", "lws", "mse", "exp", "valen", "pico", "corr"}

IMPOSTOR = '''
from pllzoo import Method, hookimpl
from pllzoo.builtin import SelectAll

class Sel(SelectAll):
    pass

@hookimpl
def pllzoo_register_selections(register):
    register("impostor.sel", Sel)

@hookimpl
def pllzoo_register_methods(register):
    register(Method(name="impostor-own", loss="pllzoo.soft_ce"))
    register(Method(name="proden", loss="pllzoo.soft_ce", description="not PRODEN"))
'''

TYPO = '''
import torch
from pllzoo import Component, Method, hookimpl

class Sel(Component):
    @hookimpl
    def pllzoo_select(self, step):
        return torch.ones(step.batch.size, dtype=torch.bool)

    @hookimpl
    def pllzoo_on_epoch_ned(self, run, epoch, state):
        pass

@hookimpl
def pllzoo_register_selections(register):
    register("typo.sel", Sel)

@hookimpl
def pllzoo_register_methods(register):
    register(Method(name="typo-method", loss="pllzoo.soft_ce", selection="typo.sel"))
'''


@pytest.fixture
def install(tmp_path, monkeypatch):
    """``install(dist, version, ep, code)``: an installed distribution whose entry point ``ep`` names a new module."""
    site = tmp_path / "site"
    site.mkdir()
    modules: list[str] = []
    eps: list[str] = []
    monkeypatch.syspath_prepend(str(site))

    def _install(dist: str, version: str, ep: str, code: str) -> None:
        module = f"_pllzoo_test_{dist.replace('-', '_')}_{ep}"
        (site / f"{module}.py").write_text(textwrap.dedent(code))
        info = site / f"{dist.replace('-', '_')}-{version}.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: {version}\n")
        (info / "entry_points.txt").write_text(f"[pllzoo]\n{ep} = {module}\n")
        modules.append(module)
        eps.append(ep)
        monkeypatch.setenv("PLLZOO_LOAD_PLUGINS", ",".join([SHIPPED, *eps]))  # nothing else installed leaks in

    reset_registry()
    yield _install
    reset_registry()
    for module in modules:
        sys.modules.pop(module, None)


def _info(reg: Registry, name: str, dist: str | None = None):
    return next(p for p in reg.plugins if p.name == name and (dist is None or p.dist == dist))


def _names(reg: Registry, plugin: str) -> set[str]:
    tables = [*reg.components.values(), reg.methods, reg.datasets]
    return {n for table in tables for n, (_, p) in table.items() if p == plugin}


@pytest.mark.parametrize("ep", ["aaa", "zzz"])  # sorts before and after every shipped entry point
def test_outside_plugin_taking_proden_is_refused_whatever_the_order(install, ep):
    install("pllzoo-impostor", "6.6.6", ep, IMPOSTOR)
    reg = get_registry()
    base = md.version("pllzoo-baselines")
    assert _info(reg, ep).error == (
        f"method 'proden' is already registered by plugin 'baselines' (pllzoo-baselines {base}); "
        f"plugin '{ep}' (pllzoo-impostor 6.6.6) is refused as a whole")
    assert _names(reg, ep) == set()  # its own, valid names went with it
    assert reg.pm.get_plugin(ep) is None
    assert _info(reg, "baselines").error is None
    assert BASELINE_METHODS <= {n for n, (_, p) in reg.methods.items() if p == "baselines"}
    assert reg.methods["proden"][0].loss == "proden.loss"


def test_outside_entry_points_before_the_shipped_ones_cannot_take_their_module(install, tmp_path, monkeypatch):
    """``a0`` (an impostor proden) and ``aaa = pllzoo_baselines.plugin`` sort before ``baselines``: the shipped
    entry points still register first, so ``aaa`` is refused (one object, one plugin), the impostor is refused
    as a whole, and every baseline method stays."""
    install("pllzoo-impostor", "6.6.6", "a0", IMPOSTOR)
    info = tmp_path / "site" / "pllzoo_alias-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: pllzoo-alias\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("[pllzoo]\naaa = pllzoo_baselines.plugin\n")
    monkeypatch.setenv("PLLZOO_LOAD_PLUGINS", f"{SHIPPED},a0,aaa")
    reg = get_registry()
    base = md.version("pllzoo-baselines")
    assert _info(reg, "baselines").error is None
    assert _info(reg, "aaa").error == (f"ValueError: it names the object 'baselines' (pllzoo-baselines {base}) "
                                       "registered already; one object is one plugin")
    assert "is refused as a whole" in _info(reg, "a0").error
    assert BASELINE_METHODS <= {n for n, (_, p) in reg.methods.items() if p == "baselines"}
    assert reg.methods["proden"][0].loss == "proden.loss"


def test_a_plugin_for_another_pllzoo_is_refused_before_import(install, tmp_path, monkeypatch):
    """``Requires-Dist: pllzoo>=99``: one line, and its module is never imported (it may not even import)."""
    from pllzoo import __version__

    site = tmp_path / "site"
    (site / "_pllzoo_test_future.py").write_text("raise RuntimeError('imported')\n")
    info = site / "pllzoo_future-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: pllzoo-future\nVersion: 1.0\n"
                                   "Requires-Dist: torch\nRequires-Dist: pllzoo>=99\n")
    (info / "entry_points.txt").write_text("[pllzoo]\nfuture = _pllzoo_test_future\n")
    install("pllzoo-ok", "1.0", "fine", "")  # the fixture puts the site folder on the path
    monkeypatch.setenv("PLLZOO_LOAD_PLUGINS", f"{SHIPPED},fine,future")
    reg = get_registry()
    assert _info(reg, "future").error == (f"it requires pllzoo>=99, and this is pllzoo {__version__}; refused "
                                          "before import")
    assert "_pllzoo_test_future" not in sys.modules and _info(reg, "fine").error is None


def test_outside_entry_point_reusing_a_shipped_name_is_refused(install):
    install("pllzoo-impostor", "6.6.6", "baselines", IMPOSTOR)  # first on sys.path
    reg = get_registry()
    base = md.version("pllzoo-baselines")
    assert _info(reg, "baselines", "pllzoo-impostor").error == (
        f"entry point name 'baselines' is already used by 'baselines' (pllzoo-baselines {base}); "
        "'baselines' (pllzoo-impostor 6.6.6) is refused")
    assert _info(reg, "baselines", "pllzoo-baselines").error is None
    assert BASELINE_METHODS <= set(reg.methods) and "impostor.sel" not in reg.components["selection"]


class Good(SelectAll):
    pass


class Misspelled(SelectAll):
    @hookimpl
    def pllzoo_selct(self, step):
        return None


class UnknownArgument(SelectAll):
    @hookimpl
    def pllzoo_select(self, step, batch):
        return None


class NotADataclass(SelectAll):
    class HParams:
        keep = 0.5


class NoDefault(SelectAll):
    @dataclass(frozen=True)
    class HParams:
        keep: float


class Unmarked(Component):
    def pllzoo_select(self, step):
        return None


class UnmarkedPostStep(SelectAll):
    """An outside review: an undecorated hook other than the role's never ran, and the numbers were those of a
    method without it."""

    def pllzoo_post_step(self, step, state):
        return None


class MarkedStatic(SelectAll):
    """An outside review: @hookimpl over @staticmethod leaves the marker on the staticmethod object, which pluggy
    never reads, and the message said the decorator was missing although it is there."""

    @hookimpl
    @staticmethod
    def pllzoo_post_step(step):
        return None


class NotFrozen(SelectAll):
    @dataclass
    class HParams:
        keep: float = 0.5


class IntOfAFloat(SelectAll):  # --hp selection.n=2 would deliver 2.0
    @dataclass(frozen=True)
    class HParams:
        n: int = 0.5


class BoolOfAStr(SelectAll):  # --hp selection.flag=false would deliver the truthy string 'false'
    @dataclass(frozen=True)
    class HParams:
        flag: bool = "yes"


class StrOfAnInt(SelectAll):
    @dataclass(frozen=True)
    class HParams:
        name: str = 5


class NoneOfAFloat(SelectAll):
    @dataclass(frozen=True)
    class HParams:
        tau: float = None


class NeedsAString(SelectAll):
    needs = "prior"  # a str: every letter would be a key


class MisspelledView(SelectAll):
    views = frozenset({"strnog"})  # would never get step.logits_strong


class UnknownIgnore(SelectAll):
    ignores = frozenset({"masks"})


class BadSync(SelectAll):
    provides = frozenset({"t"})
    sync = {"t": "row"}


class EmptyStrongView(SelectAll):
    strong_view = ""


class Wrapper(SelectAll):
    @hookimpl(wrapper=True)
    def pllzoo_post_step(self, step, state):
        return (yield)


class OldWrapper(SelectAll):
    @hookimpl(hookwrapper=True)
    def pllzoo_on_epoch_start(self, run, epoch, state):
        yield


def _registering(bad_slot: str, bad_name: str, bad) -> object:
    class P:
        @hookimpl
        def pllzoo_register_selections(self, register):
            register("t.good", Good)
            if bad_slot == "selection":
                register(bad_name, bad)

        @hookimpl
        def pllzoo_register_losses(self, register):
            if bad_slot == "loss":
                register(bad_name, bad)

        @hookimpl
        def pllzoo_register_methods(self, register):
            register(Method(name="t-method", loss="pllzoo.soft_ce", selection="t.good"))
            if bad_slot == "method":
                register(bad)

    return P()


@pytest.mark.parametrize("slot, name, bad, reason", [
    ("selection", "t.bad", Misspelled, "Misspelled.pllzoo_selct: 'pllzoo_selct' is not a run hook "
                                       "(did you mean pllzoo_select?)"),
    ("selection", "t.bad", UnknownArgument, "UnknownArgument.pllzoo_select: argument(s) 'batch' not in the spec "
                                            "pllzoo_select(step, state)"),
    ("selection", "t.bad", NotADataclass, "NotADataclass.HParams must be a dataclass"),
    ("selection", "t.bad", NoDefault, "NoDefault.HParams() fails with its defaults: TypeError"),
    ("selection", "t.bad", Unmarked, "Unmarked.pllzoo_select lacks @pllzoo.hookimpl"),
    ("selection", "t.bad", UnmarkedPostStep, "UnmarkedPostStep.pllzoo_post_step lacks @pllzoo.hookimpl, so pluggy "
                                             "would never call it"),
    ("selection", "t.bad", MarkedStatic, "MarkedStatic.pllzoo_post_step is a staticmethod; run hooks are plain "
                                         "methods (def pllzoo_post_step(self, ...))"),
    ("selection", "t.bad", NotFrozen, "NotFrozen.HParams is not frozen; declare it @dataclass(frozen=True)"),
    ("selection", "t.bad", IntOfAFloat, "IntOfAFloat.HParams field 'n': annotated int, but its default is 0.5 (float)"),
    ("selection", "t.bad", BoolOfAStr, "BoolOfAStr.HParams field 'flag': annotated bool, but its default is 'yes'"),
    ("selection", "t.bad", StrOfAnInt, "StrOfAnInt.HParams field 'name': annotated str, but its default is 5 (int)"),
    ("selection", "t.bad", NoneOfAFloat, "NoneOfAFloat.HParams field 'tau': default None, but its annotation float "
                                         "does not take None"),
    ("loss", "t.bad", SelectAll, "SelectAll does not implement pllzoo_loss, the role hook of slot 'loss'"),
    ("selection", "t+bad", Good, "bad selection name 't+bad'"),
    ("selection", "t.good", Good, "selection 't.good' is registered twice by plugin 'p0' (in-process)"),
    ("selection", "t.bad", object, "is not a pllzoo.Component subclass"),
    ("selection", "t.bad", SelectAll(), "an instance of SelectAll is not a pllzoo.Component subclass (register the "
                                        "class, not an instance)"),
    ("selection", "t.bad", NeedsAString, "NeedsAString.needs must be a set of names, e.g. frozenset({'prior'}); got "
                                         "the str 'prior'"),
    ("selection", "t.bad", MisspelledView, "MisspelledView.views: unknown view 'strnog' (did you mean 'strong'? "
                                           "known: features, joint, strong, strong_input)"),
    ("selection", "t.bad", UnknownIgnore, "UnknownIgnore.ignores: unknown ignore 'masks' (did you mean 'mask'?"),
    ("selection", "t.bad", BadSync, "BadSync.sync must map state keys to one of replicated, rows, got {'t': 'row'}"),
    ("selection", "t.bad", EmptyStrongView, "EmptyStrongView.strong_view must be a view's name or None, got ''"),
    ("selection", "t.bad", Wrapper, "Wrapper.pllzoo_post_step: pllzoo_post_step is a hook wrapper; run hooks take "
                                    "plain implementations"),
    ("selection", "t.bad", OldWrapper, "OldWrapper.pllzoo_on_epoch_start: pllzoo_on_epoch_start is a hook wrapper"),
    ("method", "", Method(name="proden+x", loss="pllzoo.soft_ce"), "bad method name 'proden+x'"),
    ("method", "", Method(name="a,b", loss="pllzoo.soft_ce"), "bad method name 'a,b'"),  # --methods a,b: two
    ("method", "", Method(name="pc:x", loss="pllzoo.soft_ce"), "bad method name 'pc:x'"),  # --hp pc:x:...
    ("method", "", "t-method", "a method must be a pllzoo.components.Method, got str"),
])
def test_a_plugin_with_one_bad_registration_leaves_nothing(slot, name, bad, reason):
    pm, infos = make_plugin_manager(load_entrypoints=False)
    pm.register(_registering(slot, name, bad), name="p0")
    reg = Registry.build(pm, infos)
    error = _info(reg, "p0").error
    assert reason in error and "\n" not in error
    assert _names(reg, "p0") == set() and "t.good" not in reg.components["selection"]
    with pytest.raises(UnknownNameError, match=r"unknown method 't-method'.*\(plugin p0 failed to load: .*"
                                               r"; `pllzoo plugins --debug`\)$"):
        reg.method("t-method")


def test_a_wrapped_discovery_hook_is_refused_not_silently_empty():
    """An outside review: ``@hookimpl(wrapper=True)`` on a registration hook loaded "fine" with no component (the
    registry calls the function, which only made a generator)."""
    class P:
        @hookimpl(wrapper=True)
        def pllzoo_register_selections(self, register):
            register("t.sel", SelectAll)
            return (yield)

    pm, infos = make_plugin_manager(load_entrypoints=False)
    pm.register(P(), name="p0")
    reg = Registry.build(pm, infos)
    assert _info(reg, "p0").error == ("pllzoo_register_selections is a hook wrapper; discovery hooks take plain "
                                      "implementations (drop wrapper=True)")
    assert "t.sel" not in reg.components["selection"]


def test_a_shipped_class_registered_again_under_another_name_keeps_its_own(monkeypatch):
    """A plugin may reuse pllzoo's select-all class as ``t.all``: the new name goes on a subclass, so the shipped
    class keeps ``pllzoo.all`` (which ``htc``'s compatibility check compares with) and messages name it."""
    monkeypatch.setenv("PLLZOO_LOAD_PLUGINS", SHIPPED)

    class P:
        @hookimpl
        def pllzoo_register_selections(self, register):
            register("t.all", SelectAll)

    pm, infos = make_plugin_manager()
    pm.register(P(), name="p0")
    reg = Registry.build(pm, infos)
    assert _info(reg, "p0").error is None
    assert SelectAll.name == "pllzoo.all" and reg.components["selection"]["pllzoo.all"][0] is SelectAll
    alias = reg.components["selection"]["t.all"][0]
    assert alias.name == "t.all" and issubclass(alias, SelectAll) and alias is not SelectAll
    comps = reg.build_components(reg.method("htc"), {})  # refused before: "selection 't.all' would change nothing"
    assert comps["selection"].name == "pllzoo.all"
    comps = reg.build_components(reg.method("htc+selection=t.all"), {})  # the copy, named: neutral as the built-in
    assert comps["selection"].name == "t.all"  # (the check compared names and refused it: a review)
    from pllzoo.components import is_distributed

    assert is_distributed(comps["selection"])  # DDP opt-in kept by the copy (not inherited: it was refused)
    assert Registry.build(*make_plugin_manager()).components["selection"]["pllzoo.all"][0] is SelectAll  # rebuilt


def test_a_plugin_that_raises_while_registering_is_reported():
    class P:
        @hookimpl
        def pllzoo_register_losses(self, register):
            register("t.loss", SoftCrossEntropy)

        @hookimpl
        def pllzoo_register_datasets(self, register):
            raise ValueError("no data here\nsecond line")

    pm, infos = make_plugin_manager(load_entrypoints=False)
    pm.register(P(), name="p0")
    reg = Registry.build(pm, infos)
    info = _info(reg, "p0")
    assert info.error == "pllzoo_register_datasets: ValueError: no data here"
    assert "no data here" in info.traceback and "Traceback" in info.traceback
    assert _names(reg, "p0") == set()


def test_plugins_reports_a_misspelled_hook_one_line_or_traceback_with_debug(install, monkeypatch):
    install("pllzoo-typo", "1.2.3", "typo", TYPO)
    line = ("plugin 'typo' (pllzoo-typo 1.2.3) failed to load: selection 'typo.sel': Sel.pllzoo_on_epoch_ned: "
            "'pllzoo_on_epoch_ned' is not a run hook (did you mean pllzoo_on_epoch_end?)")
    monkeypatch.delenv("PLLZOO_DEBUG", raising=False)
    res = CliRunner().invoke(cli, ["plugins"])
    assert res.exit_code == 0, res.output
    assert line in res.output.splitlines() and "Traceback" not in res.output
    for args, env in [(["plugins", "--debug"], None), (["plugins"], "1")]:
        if env:
            monkeypatch.setenv("PLLZOO_DEBUG", env)
        res = CliRunner().invoke(cli, args)
        assert res.exit_code == 0 and line in res.output.splitlines()
        assert "Traceback (most recent call last)" in res.output and "register(\"typo.sel\", Sel)" in res.output


def test_bench_warns_and_an_unknown_method_names_the_failed_plugin(install, tmp_path):
    install("pllzoo-typo", "1.2.3", "typo", TYPO)
    res = CliRunner().invoke(cli, ["bench", "--methods", "typo-method", "--out", str(tmp_path / "out")])
    assert res.exit_code == 2
    warnings = [ln for ln in res.stderr.splitlines() if ln.startswith("Warning:")]
    assert warnings == ["Warning: plugin 'typo' (pllzoo-typo 1.2.3) failed to load: selection 'typo.sel': "
                        "Sel.pllzoo_on_epoch_ned: 'pllzoo_on_epoch_ned' is not a run hook (did you mean "
                        "pllzoo_on_epoch_end?); `pllzoo plugins --debug`"]
    assert "unknown method 'typo-method'; valid: " in res.stderr
    assert "(plugin typo failed to load: selection 'typo.sel'" in res.stderr and "Traceback" not in res.stderr


def test_shipped_plugins_pass_the_checks(registry):
    assert registry.failures() == []
    assert {p.name for p in registry.plugins if p.shipped} == {"pllzoo.builtin", "baselines", "solar", "ltpll"}


def test_a_plugin_that_exits_at_import_is_one_line_and_stops_nothing(install):
    install("pllzoo-quitter", "0.1", "quitter", "import sys\nsys.exit(3)\n")
    for args in (["plugins"], ["methods"], ["datasets"]):
        res = CliRunner().invoke(cli, args)
        assert res.exit_code == 0 and "Traceback" not in res.output, (args, res.output)
    res = CliRunner().invoke(cli, ["plugins"])
    assert "plugin 'quitter' (pllzoo-quitter 0.1) failed to load: SystemExit: 3" in res.output.splitlines()
    assert "proden" in CliRunner().invoke(cli, ["methods"]).output  # the others load as before


def test_no_registered_method_says_why_the_list_is_empty(monkeypatch, tmp_path):
    monkeypatch.setenv("PLLZOO_LOAD_PLUGINS", "no-such-plugin")  # only the built-in plugin loads: no method
    reset_registry()
    try:
        res = CliRunner().invoke(cli, ["bench", "--methods", "proden", "--out", str(tmp_path / "out")])
    finally:
        monkeypatch.delenv("PLLZOO_LOAD_PLUGINS")
        reset_registry()
    assert res.exit_code == 2 and "Traceback" not in res.output
    assert ("unknown method 'proden'; valid: (none registered; PLLZOO_LOAD_PLUGINS=no-such-plugin limits the "
            "plugins loaded)") in res.output


CHATTY = '''
print("chatty: imported")
from pllzoo import Method, hookimpl
from pllzoo.builtin import SoftCrossEntropy


class Loud(SoftCrossEntropy):
    @hookimpl
    def pllzoo_loss(self, step, state):
        print("chatty: a step")
        return super().pllzoo_loss(step, state)


@hookimpl
def pllzoo_register_losses(register):
    print("chatty: registering")
    register("chatty.loud", Loud)


@hookimpl
def pllzoo_register_methods(register):
    register(Method(name="chatty", loss="chatty.loud"))
'''


def test_what_a_plugin_prints_goes_to_stderr_not_into_the_results(install, tmp_path):
    """stdout carries results only: ``--json`` listings parse and the bench's table is whole, whatever a plugin
    prints at import, at registration or while it trains (it goes to stderr)."""
    import json

    install("pllzoo-chatty", "1.0", "chatty", CHATTY)
    res = CliRunner().invoke(cli, ["plugins", "--json"])
    assert res.exit_code == 0, res.output
    assert any(p["name"] == "chatty" for p in json.loads(res.stdout))
    assert "chatty: imported" in res.stderr and "chatty: registering" in res.stderr
    res = CliRunner().invoke(cli, ["bench", "--methods", "chatty", "--dataset", "synthetic-lt", "--subset", "200",
                                   "--epochs", "1", "--batch-size", "100", "--threads", "1", "--out",
                                   str(tmp_path / "out")])
    assert res.exit_code == 0, res.output
    assert "chatty: a step" in res.stderr and "chatty" not in res.stdout.replace("│ chatty ", "")


SLOT_SQUATTER = '''
from pllzoo import Component, Method, hookimpl


class Sel(Component):
    @hookimpl
    def pllzoo_select(self, step):
        return None


@hookimpl
def pllzoo_register_selections(register):
    register("proden.confidence", Sel)  # PRODEN's label update's name, in another slot
'''


def test_an_outside_component_taking_a_shipped_name_in_another_slot_is_refused(install):
    """``proden.confidence`` means PRODEN's label update: a selection of that name would make
    ``+selection=proden.confidence`` read as PRODEN's, so the plugin is refused as a whole."""
    install("pllzoo-squat", "1.0", "squat", SLOT_SQUATTER)
    reg = get_registry()
    base = md.version("pllzoo-baselines")
    assert _info(reg, "squat").error == (
        "selection 'proden.confidence': the name of label_update component 'proden.confidence' of plugin "
        f"'baselines' (pllzoo-baselines {base}); plugin 'squat' (pllzoo-squat 1.0) is refused as a whole")
    assert "proden.confidence" not in reg.components["selection"]


def test_two_outside_plugins_cannot_share_a_name_across_slots():
    """docs/hooks.md: a name another plugin holds refuses the whole plugin; across slots too (an outside review:
    only shipped names were checked across slots, so two outside plugins could both hold ``x.sharpen``)."""
    class First:
        @hookimpl
        def pllzoo_register_selections(self, register):
            register("x.sharpen", SelectAll)

    class Second:
        @hookimpl
        def pllzoo_register_losses(self, register):
            register("x.sharpen", SoftCrossEntropy)

    pm, infos = make_plugin_manager(load_entrypoints=False)
    pm.register(First(), name="p1")
    pm.register(Second(), name="p2")
    reg = Registry.build(pm, infos)
    assert _info(reg, "p1").error is None and "x.sharpen" in reg.components["selection"]
    assert _info(reg, "p2").error.startswith("loss 'x.sharpen': the name of selection component 'x.sharpen' of "
                                             "plugin 'p1'")
    assert "x.sharpen" not in reg.components["loss"]


def test_a_slow_plugin_import_is_named_by_pllzoo_plugins(install, monkeypatch):
    """A plugin that takes seconds to import slows every command; `pllzoo plugins` says which (the clock is
    faked: each entry point here "takes" 2.5 s, above SLOW_IMPORT_S)."""
    import itertools
    import json

    import pllzoo.plugins as plugins_module

    install("pllzoo-slowpoke", "1.0", "slowpoke", "")
    monkeypatch.setenv("PLLZOO_LOAD_PLUGINS", "slowpoke")
    ticks = itertools.count(0.0, 2.5)
    monkeypatch.setattr(plugins_module, "_clock", lambda: next(ticks))
    reset_registry()
    res = CliRunner().invoke(cli, ["plugins"])
    assert res.exit_code == 0, res.output
    assert "plugin 'slowpoke' (pllzoo-slowpoke 1.0) takes 2.5 s to import; every pllzoo command" in res.output
    res = CliRunner().invoke(cli, ["plugins", "--json"])
    rows = {r["name"]: r for r in json.loads(res.output)}
    assert rows["slowpoke"]["import_s"] == 2.5 and rows["pllzoo.builtin"]["import_s"] is None


def test_a_name_in_pllzoo_load_plugins_that_no_plugin_has_is_said(monkeypatch):
    """A typo there loaded nothing of it, and methods and plugins listed less without a word."""
    monkeypatch.setenv("PLLZOO_LOAD_PLUGINS", f"{SHIPPED},baselinez")
    reset_registry()
    try:
        for args in (["plugins"], ["methods"]):
            res = CliRunner().invoke(cli, args)
            assert res.exit_code == 0, res.output
            assert "PLLZOO_LOAD_PLUGINS names 'baselinez', which no installed plugin is (installed: " in res.output
    finally:
        reset_registry()


@pytest.mark.parametrize("ep", ["aaa", "zzz"])
def test_leaving_the_shipped_plugin_out_does_not_free_its_names(install, monkeypatch, ep):
    """``PLLZOO_LOAD_PLUGINS`` without ``baselines``: ``proden`` stays PRODEN's name, so an outside plugin that
    registers it is refused as a whole (and ``--methods proden`` is an unknown name, not the impostor)."""
    install("pllzoo-impostor", "6.6.6", ep, IMPOSTOR)
    monkeypatch.setenv("PLLZOO_LOAD_PLUGINS", f"solar,{ep}")
    reset_registry()
    reg = get_registry()
    base = md.version("pllzoo-baselines")
    assert _info(reg, ep).error == (
        f"method 'proden' is a name of plugin 'baselines' (pllzoo-baselines {base}), shipped with pllzoo and left "
        f"out by PLLZOO_LOAD_PLUGINS; plugin '{ep}' (pllzoo-impostor 6.6.6) is refused as a whole")
    assert "proden" not in reg.methods and reg.pm.get_plugin(ep) is None
    assert {n for n, (_, p) in reg.methods.items() if p == "solar"} >= {"solar"}  # the loaded shipped plugin


def test_an_outside_plugin_with_its_own_names_loads_beside_a_left_out_shipped_one(install, monkeypatch):
    install("pllzoo-own", "1.0", "own", '''
from pllzoo import Method, hookimpl

@hookimpl
def pllzoo_register_methods(register):
    register(Method(name="own-method", loss="pllzoo.soft_ce"))
''')
    monkeypatch.setenv("PLLZOO_LOAD_PLUGINS", "own")
    reset_registry()
    reg = get_registry()
    assert _info(reg, "own").error is None and "own-method" in reg.methods
    assert "proden" not in reg.methods  # the reservation registers nothing


@pytest.mark.parametrize("change, said", [
    ("torch.set_default_dtype(torch.float64)", "default dtype (torch.float64; torch.set_default_dtype)"),
    ("torch.set_default_device('meta')", "default device (meta; torch.set_default_device)"),
    ("torch.set_grad_enabled(False)", "grad mode (False; torch.set_grad_enabled)"),  # an outside review: every
    # method then failed with "proden.loss returned a loss without grad", naming no plugin
    ("torch.use_deterministic_algorithms(True)",
     "deterministic algorithms (True; torch.use_deterministic_algorithms)"),
    ("torch.set_float32_matmul_precision('medium')",
     "float32 precision (TF32) (cuda.matmul.fp32_precision=tf32, mkldnn.matmul.fp32_precision=bf16; "
     "torch.set_float32_matmul_precision, allow_tf32 or torch.backends.*.fp32_precision)"),
    # the API torch recommends: the legacy getter then raises (an outside review: every command failed)
    ("torch.backends.cuda.matmul.fp32_precision = 'tf32'",
     "float32 precision (TF32) (cuda.matmul.fp32_precision=tf32; torch.set_float32_matmul_precision, allow_tf32 or "
     "torch.backends.*.fp32_precision)"),
    ("torch.set_grad_enabled(False); torch.backends.cudnn.benchmark = True",
     "grad mode (False; torch.set_grad_enabled), cuDNN benchmark (True; torch.backends.cudnn.benchmark)"),
])
def test_a_plugin_that_changes_torchs_settings_at_import_is_refused(install, change, said):
    """Its import made every shipped method compute in float64 (PRODEN then failed in a matmul, naming no
    plugin); now the plugin is refused, named, and torch's settings are put back."""
    import torch

    from pllzoo.isolation import torch_settings

    before = torch_settings()
    install("pllzoo-dtype", "1.0", "dtype", f"import torch\n{change}\n")
    reg = get_registry()
    assert _info(reg, "dtype").error == (f"RuntimeError: its import changes torch's {said}, which every run would "
                                         "compute with; set them inside your own code, not at import")
    assert torch_settings() == before and torch.empty(1).device.type == "cpu"
    assert torch._C._len_torch_function_stack() == 0  # torch's own default, not a "cpu" device mode on every call
    assert _info(reg, "baselines").error is None


def test_what_a_failed_import_changed_goes_back_too(install):
    """An outside review: a plugin that turned grad mode off and then failed its import (an optional dependency
    missing) was refused, but grad mode stayed off and every method failed naming a shipped loss."""
    from pllzoo.isolation import torch_settings

    before = torch_settings()
    install("pllzoo-halfway", "1.0", "halfway", "import torch\ntorch.set_grad_enabled(False)\n"
            "torch.backends.cuda.matmul.fp32_precision = 'tf32'\nraise ImportError('optional dep missing')\n")
    reg = get_registry()
    assert _info(reg, "halfway").error == "ImportError: optional dep missing"
    assert torch_settings() == before and _info(reg, "baselines").error is None


def test_a_misspelled_discovery_hook_says_the_near_name(install):
    """An outside review: pluggy's "unknown hook ... in plugin <module ...>" named neither the hook meant nor the
    hooks there are."""
    install("pllzoo-dtypo", "1.0", "dtypo", '''
        from pllzoo import hookimpl
        from pllzoo.builtin import SelectAll

        @hookimpl
        def pllzoo_register_selection(register):
            register("dtypo.sel", SelectAll)
        ''')
    (info,) = [p for p in Registry.build(*make_plugin_manager()).plugins if p.name == "dtypo"]
    assert info.error.startswith("ValueError: unknown hook pllzoo_register_selection (did you mean "
                                 "pllzoo_register_selections?); a plugin module implements discovery hooks: ")
    assert "pllzoo_register_methods" in info.error and "\n" not in info.error


def test_an_unknown_name_says_the_near_one_and_many_failed_plugins_stay_one_short_line(install, monkeypatch):
    """An outside review: `PRODEN` got no hint, and with 17 failed plugins the unknown-name line listed every
    reason (2,852 characters); past two, it names them and points to `pllzoo plugins --debug`."""
    monkeypatch.setenv("PLLZOO_LOAD_PLUGINS", f"{SHIPPED},b1,b2,b3")
    for n in (1, 2, 3):
        install(f"pllzoo-broken{n}", "1.0", f"b{n}", f"raise ImportError('broken {n} ' + 'x' * 300)\n")
    reg = Registry.build(*make_plugin_manager())
    with pytest.raises(UnknownNameError) as info:
        reg.method("PRODEN")
    text = str(info.value)
    assert text.startswith("unknown method 'PRODEN' (did you mean 'proden'?); valid: ")
    assert text.endswith("(3 plugins failed to load: b1, b2, b3; `pllzoo plugins --debug` says why)")
    assert "xxx" not in text
    with pytest.raises(UnknownNameError, match=r"unknown loss component 'proden.los' \(did you mean 'proden.loss'\?\)"):
        reg.method("proden+loss=proden.los")
    with pytest.raises(UnknownNameError, match=r"^unknown dataset 'Lost' \(did you mean 'lost'\?\); valid: "):
        reg.dataset("Lost")
