"""Backbones and views from plugins (``pllzoo_register_models``/``pllzoo_register_views``): the built-ins register
through the same hooks, ``--hp train.model``/``train.weak_view``/``train.strong_view`` take a plugin's names, an
unknown name is one line listing the valid ones, and a name two plugins register refuses the second, naming both."""

from __future__ import annotations

import json
import math

import pytest
import torch
from click.testing import CliRunner
from torch import nn

from pllzoo import DatasetSpec, PLLNet, PLLZooError, UnknownNameError, bench, hookimpl
from pllzoo.augment import VIEWS, make_view
from pllzoo.cli import cli
from pllzoo.data.base import DataOptions
from pllzoo.models import MODELS, build_model, resnet18
from pllzoo.plugins import make_plugin_manager
from pllzoo.registry import Registry

from conftest import make_fake_images

VIEW_CALLS: list[tuple[int, ...]] = []


def tinynet(num_classes: int, input_shape: tuple[int, ...]) -> PLLNet:
    """Flatten → Linear(d, 8) → ReLU; a Linear(8, K) head."""
    encoder = nn.Sequential(nn.Flatten(1), nn.Linear(math.prod(input_shape), 8), nn.ReLU())
    return PLLNet(encoder, nn.Linear(8, num_classes))


def invert(x: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
    """``255 - x``; records each batch's shape."""
    VIEW_CALLS.append(tuple(x.shape))
    return 255 - x


class _Vision:
    @hookimpl
    def pllzoo_register_models(self, register):
        register("t.tinynet", tinynet)
        register("t.bad", lambda num_classes, input_shape: nn.Linear(3, num_classes))  # not a PLLNet

    @hookimpl
    def pllzoo_register_views(self, register):
        register("t.invert", invert)

    @hookimpl
    def pllzoo_register_datasets(self, register):
        register(DatasetSpec("t.images", lambda opts: make_fake_images(n=32, k=4, seed=opts.seed), "random images"))


@pytest.fixture
def reg() -> Registry:
    pm, infos = make_plugin_manager()  # the shipped plugins (conftest's PLLZOO_LOAD_PLUGINS), for proden
    pm.register(_Vision(), name="t")
    reg = Registry.build(pm, infos)
    assert not reg.failures(), [p.error for p in reg.failures()]
    return reg


def test_hook_pllzoo_register_models(reg):
    assert reg.models["t.tinynet"] == (tinynet, "t")
    net = build_model("t.tinynet", 4, (3, 8, 8), reg)
    assert isinstance(net, PLLNet) and net(torch.zeros(2, 3, 8, 8)).shape == (2, 4) and net.feature_dim == 8


def test_hook_pllzoo_register_views(reg):
    assert reg.views["t.invert"] == (invert, "t")
    x = torch.full((1, 3, 2, 2), 5, dtype=torch.uint8)
    assert torch.equal(make_view("t.invert", registry=reg)(x, torch.Generator()), torch.full_like(x, 250))


def test_builtins_register_through_the_same_hooks(reg):
    assert {n for n, (_, p) in reg.models.items() if p == "pllzoo.builtin"} == set(MODELS)
    assert {n for n, (_, p) in reg.views.items() if p == "pllzoo.builtin"} == set(VIEWS)
    assert {"wrn28-2", "resnet18-imagenet", "resnet18", "cnn", "linear", "mlp"} <= set(MODELS)
    assert {"none", "weak", "strong", "simaugment", "strong-batched", "simaugment-batched", "pico-strong",
            "pico-strong-batched"} == set(VIEWS)


def test_a_builtin_backbone_is_the_same_network_through_the_registry(reg):
    torch.manual_seed(0)
    via_registry = build_model("resnet18", 10, (3, 32, 32), reg).state_dict()
    torch.manual_seed(0)
    direct = resnet18(10, (3, 32, 32)).state_dict()
    assert via_registry.keys() == direct.keys() and all(torch.equal(via_registry[k], direct[k]) for k in direct)


def test_bench_trains_with_a_plugin_backbone_and_view(reg, tmp_path):
    VIEW_CALLS.clear()
    hp = {"train.model": "t.tinynet", "train.weak_view": "t.invert", "train.batch_size": "16"}
    plans = bench.plan(reg, ["proden"], "t.images", [1], DataOptions(), epochs=1, hp=hp, device="cpu")
    rows = bench.execute(reg, plans, tmp_path, threads=1)
    assert list(rows["status"]) == ["ok"] and rows["acc_all"].notna().all()
    assert VIEW_CALLS and all(shape == (16, 3, 32, 32) for shape in VIEW_CALLS)  # the weak view of every batch
    (run,) = (tmp_path / "runs").iterdir()
    assert json.loads((run / "config.json").read_text())["train"]["model"] == "t.tinynet"
    env = json.loads((run / "env.json").read_text())
    assert env["trainer"]["model"] == {"name": "t.tinynet", "plugin": "t", "dist": "in-process", "version": "unknown"}
    assert env["trainer"]["weak_view"]["plugin"] == "t" and env["trainer"]["strong_view"]["plugin"] == "pllzoo.builtin"


def test_plugin_training_is_deterministic_on_cpu(reg, tmp_path):
    hp = {"train.model": "t.tinynet", "train.weak_view": "weak", "train.batch_size": "16"}
    finals = []
    for out in ("a", "b"):
        plans = bench.plan(reg, ["proden"], "t.images", [3], DataOptions(), epochs=2, hp=hp, device="cpu")
        finals.append(bench.execute(reg, plans, tmp_path / out, threads=1)[["acc_all", "loss"]].to_dict())
    assert finals[0] == finals[1]


@pytest.mark.parametrize("what,name,valid", [("model", "nope", ["t.tinynet", "wrn28-2", "cnn"]),
                                             ("view", "nope", ["t.invert", "weak", "none"])])
def test_an_unknown_name_is_one_line_listing_the_valid_ones(reg, what, name, valid):
    with pytest.raises(UnknownNameError) as info:
        getattr(reg, what)(name)
    message = str(info.value)
    assert "\n" not in message and f"unknown {what} 'nope'" in message and all(v in message for v in valid)


def test_an_unknown_train_model_or_view_fails_the_plan(reg):
    for key in ("train.model", "train.strong_view"):
        with pytest.raises(UnknownNameError, match=rf"{key}: unknown .* 'nope'( \(did you mean .*\))?; valid: .*"):
            bench.plan(reg, ["proden"], "t.images", [1], DataOptions(), epochs=1, hp={key: "nope"}, device="cpu")


def test_a_factory_that_returns_no_pllnet_is_one_line(reg):
    with pytest.raises(PLLZooError, match=r"model 't.bad' \(plugin t\) returned a Linear, not a pllzoo.PLLNet"):
        build_model("t.bad", 3, (3, 8, 8), reg)


class _Twin:
    """Takes a name the plugin ``t`` holds (a model) and a built-in one (a view)."""

    def __init__(self, model: str, view: str) -> None:
        self.model, self.view = model, view

    @hookimpl
    def pllzoo_register_models(self, register):
        register(self.model, tinynet)

    @hookimpl
    def pllzoo_register_views(self, register):
        register(self.view, invert)


@pytest.mark.parametrize("model,view,holder", [("t.tinynet", "t.other", "'t' (in-process)"),
                                               ("t.other", "weak", "'pllzoo.builtin' (pllzoo")])
def test_a_name_two_plugins_register_refuses_the_second_naming_both(model, view, holder):
    pm, infos = make_plugin_manager(load_entrypoints=False)
    pm.register(_Vision(), name="t")
    pm.register(_Twin(model, view), name="twin")
    reg = Registry.build(pm, infos)
    (failed,) = reg.failures()
    assert failed.name == "twin" and "\n" not in failed.error
    assert "is already registered by plugin " + holder in failed.error and "'twin' (in-process)" in failed.error
    assert "t.other" not in reg.models and "t.other" not in reg.views  # all or nothing
    assert reg.models["t.tinynet"][1] == "t" and reg.views["weak"][1] == "pllzoo.builtin"


def test_bad_registrations_are_refused():
    class Bad:
        @hookimpl
        def pllzoo_register_models(self, register):
            register("has blank", tinynet)

    class NotCallable:
        @hookimpl
        def pllzoo_register_views(self, register):
            register("t.view", "weak")

    pm, infos = make_plugin_manager(load_entrypoints=False)
    pm.register(Bad(), name="bad")
    pm.register(NotCallable(), name="notcallable")
    errors = {p.name: p.error for p in Registry.build(pm, infos).failures()}
    assert "bad model name 'has blank'" in errors["bad"]
    assert "view 't.view': expected a callable, got str" in errors["notcallable"]


def test_plugins_json_lists_models_and_views(registry):
    rows = {r["name"]: r for r in json.loads(CliRunner().invoke(cli, ["plugins", "--json"]).output)}
    assert rows["pllzoo.builtin"]["models"] == sorted(MODELS)
    assert "weak" in rows["pllzoo.builtin"]["views"] and rows["baselines"]["models"] == []
