"""Method strings, slot swaps, compatibility checks and name collisions."""

from __future__ import annotations

import pytest

from pllzoo import Component, Method, hookimpl
from pllzoo.builtin import SelectAll
from pllzoo.components import parse_method_string
from pllzoo.errors import PLLZooError, UnknownNameError
from pllzoo.plugins import make_plugin_manager
from pllzoo.registry import Registry


class NeedsPrior(SelectAll):
    needs = frozenset({"prior"})


class WritesConfidence(SelectAll):
    provides = frozenset({"confidence"})


class _Plugin:
    @hookimpl
    def pllzoo_register_selections(self, register):
        register("t.needs_prior", NeedsPrior)
        register("t.writes_conf", WritesConfidence)


def _registry(*plugins):
    pm, infos = make_plugin_manager(load_entrypoints=False)
    for i, p in enumerate(plugins):
        pm.register(p, name=f"p{i}")
    return Registry.build(pm, infos)


def test_parse_method_string():
    assert parse_method_string("proden") == ("proden", {})
    assert parse_method_string(" proden + selection=a.b + predict=none ") == (
        "proden", {"selection": "a.b", "predict": None})
    for bad in ["proden+selection", "proden+bogus=a", "proden+loss=none", "+selection=a"]:
        with pytest.raises(PLLZooError):
            parse_method_string(bad)
    with pytest.raises(PLLZooError, match=r"^slot 'selection' is swapped twice in .*; swap each slot once$"):
        parse_method_string("proden+selection=solar.classwise+selection=pllzoo.all")  # the first swap is not dropped


def test_swap_is_a_first_class_method(registry):
    m = registry.method("proden+label_update=pllzoo.uniform")
    assert m.name == "proden+label_update=pllzoo.uniform"
    assert (m.label_update, m.selection, m.loss) == ("pllzoo.uniform", "pllzoo.all", "proden.loss")


def test_a_swapped_slot_drops_the_recipes_values_for_the_component_it_replaced(registry):
    """solar-no-smallloss sets selection.mode for SoLar's selection: swapped for another selection, the value
    goes with the replaced component (it used to be applied to the new one, which refused it); swapped for
    the same component, it stays."""
    other = registry.method("solar-no-smallloss+selection=pllzoo.all")
    assert "selection.mode" not in other.hparams and other.hparams.keys() == {
        k for k in registry.method("solar-no-smallloss").hparams if not k.startswith("selection.")}
    assert set(registry.build_components(other)) >= {"label_update", "selection", "loss"}
    same = registry.method("solar-no-smallloss+selection=solar.classwise")
    assert same.hparams["selection.mode"] == "confidence"
    assert registry.build_components(same)["selection"].hp.mode == "confidence"


def test_unknown_names_list_valid_ones(registry):
    with pytest.raises(UnknownNameError, match=r"unknown method 'nope'; valid: .*proden"):
        registry.method("nope")
    with pytest.raises(UnknownNameError, match=r"unknown selection component 'x.y'; valid: .*pllzoo.all"):
        registry.method("proden+selection=x.y")
    with pytest.raises(UnknownNameError, match=r"unknown dataset 'nope'; valid: .*"):
        registry.dataset("nope")


def test_incompatible_mix_names_both_components():
    reg = _registry(_Plugin())
    reg.methods["m"] = (Method("m", loss="pllzoo.soft_ce"), "p0")
    with pytest.raises(PLLZooError, match=r"selection 't.needs_prior' needs 'prior'.*label_update 'pllzoo.uniform'"):
        reg.build_components(reg.method("m+selection=t.needs_prior"))


def test_two_writers_of_one_key_are_refused():
    class Writer(Component):
        provides = frozenset({"confidence"})

        @hookimpl
        def pllzoo_label_update(self, step):
            return None

    class P:
        @hookimpl
        def pllzoo_register_label_updates(self, register):
            register("t.writer", Writer)

    reg = _registry(_Plugin(), P())
    reg.methods["m"] = (Method("m", loss="pllzoo.soft_ce", label_update="t.writer"), "p0")
    with pytest.raises(PLLZooError, match=r"label_update 't.writer' and selection 't.writes_conf' both write"):
        reg.build_components(reg.method("m+selection=t.writes_conf"))


def test_duplicate_names_name_both_plugins():
    reg = _registry(_Plugin(), _Plugin())
    p1 = next(p for p in reg.plugins if p.name == "p1")
    assert p1.error == ("selection 't.needs_prior' is already registered by plugin 'p0' (in-process); "
                        "plugin 'p1' (in-process) is refused as a whole")
    assert {p for _, p in reg.components["selection"].values()} == {"pllzoo.builtin", "p0"}
    assert reg.pm.get_plugin("p1") is None  # unregistered: nothing of it reaches --jobs workers either


def test_component_must_implement_its_role():
    class Bad:
        @hookimpl
        def pllzoo_register_losses(self, register):
            register("t.bad", SelectAll)  # a selection offered as a loss

    reg = _registry(Bad())
    assert "does not implement pllzoo_loss" in next(p.error for p in reg.plugins if p.name == "p0")


def test_hparam_overrides_are_checked(registry):
    m = registry.method("proden")
    comps = registry.build_components(m, {"label_update.mask": "candidates"})
    assert comps["label_update"].hp.mask == "candidates"
    with pytest.raises(UnknownNameError, match="valid: label_update.mask"):
        registry.build_components(m, {"label_update.nope": "1"})
    with pytest.raises(PLLZooError, match="valid: support, candidates"):
        registry.build_components(m, {"label_update.mask": "bogus"})


def test_a_recipe_needing_a_plugin_not_loaded_says_so_in_listing_and_error(monkeypatch):
    """An outside review: a solar-only install listed ``proden-s-cpe`` (PRODEN's label update, from
    pllzoo-baselines) as any other method, then refused it without a word of what to install."""
    from pllzoo.cli.plugins import _slot_cell

    monkeypatch.delenv("PLLZOO_LOAD_PLUGINS", raising=False)  # a plain install (``only``: which ones are loaded)
    solar_only = Registry.build(*make_plugin_manager(only={"solar"}))
    assert _slot_cell(solar_only, "proden.confidence") == "proden.confidence (not loaded)"
    assert _slot_cell(solar_only, "solar.sinkhorn") == "solar.sinkhorn" and _slot_cell(solar_only, None) == "–"
    with pytest.raises(UnknownNameError) as err:
        solar_only.method("proden-s-cpe")
    assert str(err.value).endswith("No loaded plugin registers proden.* components: install the plugin that "
                                   "provides them (`pllzoo plugins` lists those loaded)")
    with pytest.raises(UnknownNameError) as err:  # a misspelt component of a loaded plugin: no such sentence
        Registry.build(*make_plugin_manager(only={"solar", "baselines"})).method("proden+selection=solar.clswise")
    assert "No loaded plugin" not in str(err.value)
    bare = Registry.build(*make_plugin_manager(only=set()))
    with pytest.raises(UnknownNameError, match=r"No plugin provides methods: install one, e\.g\. pllzoo-solar"):
        bare.method("solar")
    # where PLLZOO_LOAD_PLUGINS holds them back, installing is not the remedy (a second review)
    monkeypatch.setenv("PLLZOO_LOAD_PLUGINS", "solar")
    with pytest.raises(UnknownNameError, match="let PLLZOO_LOAD_PLUGINS load the plugin that provides them"):
        solar_only.method("proden-s-cpe")
    with pytest.raises(UnknownNameError) as err:
        bare.method("solar")
    assert "No plugin provides methods" not in str(err.value)
