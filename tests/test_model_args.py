"""A backbone's own arguments (``--hp model.NAME=VALUE``, pllzoo.model_args): parsed by the factory's signature,
recorded once per value, refused in one line, and built by the trainer, evaluate and a replay alike."""

from __future__ import annotations

import pytest
import torch
from click.testing import CliRunner

from pllzoo import model_args
from pllzoo.cli import cli
from pllzoo.data.base import DataOptions
from pllzoo.errors import PLLZooError, UnknownNameError
from pllzoo.models import build_model, cnn, mlp
from pllzoo.planning import plan
from pllzoo.pllnet import PLLNet
from pllzoo.registry import get_registry


def factory(num_classes, input_shape, width: int = 8, scale: float = 1.0, act: str = "relu", bias: bool = True,
            sizes: tuple[int, ...] = (4,), weights=None, *, depth=2, **rest) -> PLLNet:
    return PLLNet(torch.nn.Flatten(1), torch.nn.Linear(input_shape[0], num_classes, bias=bias))


def test_the_settable_parameters_are_the_typed_ones_with_defaults():
    assert list(model_args.parameters(factory)) == ["width", "scale", "act", "bias", "sizes", "depth"]
    assert list(model_args.parameters(mlp)) == ["hidden"] and list(model_args.parameters(cnn)) == ["widths"]


def test_values_parse_by_the_signature_and_render_back():
    who = "model 'f' (plugin p)"
    got = model_args.parse(who, factory, ["width=16", "scale=2", "act=gelu", "bias=off", "sizes=1,2,3", "depth=5"])
    assert got == {"width": 16, "scale": 2.0, "act": "gelu", "bias": False, "sizes": (1, 2, 3), "depth": 5}
    assert model_args.canonical(who, factory, ["width=016", "bias=0", "sizes=[1;2]", "scale=1e-1"]) == (
        "bias=false", "scale=0.1", "sizes=1,2", "width=16")  # sorted, each as it parses back
    assert model_args.canonical(who, factory, ["sizes=(1, 2)"]) == ("sizes=1,2",)  # as Python shows a tuple
    assert model_args.parse(who, factory, model_args.canonical(who, factory, ["sizes=1,2", "scale=0.1"])) == {
        "sizes": (1, 2), "scale": 0.1}


@pytest.mark.parametrize("entry, error, why", [
    ("height=3", UnknownNameError, r"^model 'f' \(plugin p\) takes no argument 'height' \(--hp model.height\); it "
                                   r"takes model.width \(default 8\), model.scale \(default 1.0\)"),
    ("num_classes=3", UnknownNameError, "takes no argument 'num_classes'"),  # the trainer's own
    ("weights=x", UnknownNameError, "takes no argument 'weights'"),  # no settable type
    ("width=2.5", PLLZooError, r"^bad value for model.width of model 'f' \(plugin p\): expected a whole number"),
    ("bias=maybe", PLLZooError, "expected a boolean, got 'maybe'"),
])
def test_a_wrong_argument_is_one_line(entry, error, why):
    with pytest.raises(error, match=why) as err:
        model_args.parse("model 'f' (plugin p)", factory, [entry])
    assert "\n" not in str(err.value)


def test_a_factory_without_arguments_says_so():
    with pytest.raises(UnknownNameError, match=r"model 'linear' \(plugin pllzoo.builtin\) takes no argument 'x' "
                                               r"\(--hp model.x\); it takes none$"):
        build_model("linear", 3, (4,), args=("x=1",))


@pytest.mark.parametrize("name, shape, entry, why", [
    ("cnn", (3, 8, 8), "widths=", r"widths must be one or more positive channel counts, got \(\)$"),
    ("cnn", (3, 8, 8), "widths=8,0", r"got \(8, 0\)$"),
    ("mlp", (5,), "hidden=0", "hidden must be a positive width, got 0$"),
])
def test_a_built_in_backbone_refuses_sizes_that_leave_no_layer(name, shape, entry, why):
    with pytest.raises(PLLZooError, match=rf"^model '{name}' \(plugin pllzoo.builtin\) failed to build: ValueError: .*{why}"):
        build_model(name, 3, shape, args=(entry,))


def _plan(hp, methods=("proden",)):
    return plan(get_registry(), list(methods), "synthetic-lt", [1], DataOptions(), epochs=1, hp=hp, device="cpu")


def test_the_run_records_and_builds_its_arguments_and_keeps_its_id_without():
    plain = _plan({})[0]
    assert "model_args" not in plain.config["train"] and plain.train.model == "mlp"  # recorded runs keep their ids
    p = _plan({"model.hidden": "64"})[0]
    assert p.train.model_args == ("hidden=64",) and p.config["train"]["model_args"] == ("hidden=64",)
    assert p.run_id != plain.run_id and _plan({"model.hidden": "0064"})[0].run_id == p.run_id
    assert _plan({"model.hidden": "500"})[0].run_id != plain.run_id  # given, even at the default: named
    net = build_model(p.train.model, p.data.num_classes, tuple(p.data.x_train.shape[1:]), args=p.train.model_args)
    assert net.head.in_features == 64
    # a method's own value over the shared one; a method whose backbone takes none is refused for that method
    two = _plan({"model.hidden": "64", "cc:model.hidden": "32"}, ("proden", "cc"))
    assert [q.train.model_args for q in two] == [("hidden=64",), ("hidden=32",)]
    with pytest.raises(UnknownNameError, match=r"model 'linear' \(plugin pllzoo.builtin\) takes no argument 'hidden'"):
        _plan({"train.model": "linear", "model.hidden": "64"})
    with pytest.raises(PLLZooError, match="set the backbone's arguments one by one, --hp model.NAME=VALUE"):
        _plan({"train.model_args": "hidden=64"})


def test_train_evaluate_and_replay_build_the_same_backbone(tmp_path):
    out = tmp_path / "r"
    res = CliRunner().invoke(cli, ["bench", "--methods", "proden", "--dataset", "synthetic-lt", "--epochs", "1",
                                   "--hp", "model.hidden=24", "--out", str(out), "--threads", "1"])
    assert res.exit_code == 0, res.output
    (run,) = (out / "runs").iterdir()
    state = torch.load(run / "checkpoint.pt", weights_only=False)
    weights = state["model"] if "model" in state else state
    assert weights["head.weight"].shape[1] == 24
    res = CliRunner().invoke(cli, ["evaluate", str(run), "--device", "cpu"])
    assert res.exit_code == 0 and run.name in res.output, res.output
    res = CliRunner().invoke(cli, ["bench", "--from-run", str(run), "--out", str(tmp_path / "again"), "--threads", "1"])
    assert res.exit_code == 0, res.output
    assert [d.name for d in (tmp_path / "again" / "runs").iterdir()] == [run.name]


def test_plugins_lists_each_backbones_arguments():
    import json

    res = CliRunner().invoke(cli, ["plugins", "--json"])
    rows = {r["name"]: r for r in json.loads(res.output)}
    assert rows["pllzoo.builtin"]["model_args"]["mlp"] == {"hidden": "500"}
    assert rows["pllzoo.builtin"]["model_args"]["cnn"] == {"widths": "32,64,128"}
    assert rows["pllzoo.builtin"]["model_args"]["linear"] == {}


def test_memory_floor_is_the_built_models_own_sizes():
    """The meta-device measure equals the real build's parameter and buffer bytes and its largest module output."""
    from pllzoo.models import memory_floor

    held, per_row = memory_floor("cnn", 10, (3, 16, 16), None, ("widths=4,8",))
    net = build_model("cnn", 10, (3, 16, 16), None, ("widths=4,8",))
    assert held == sum(t.numel() * t.element_size() for t in [*net.parameters(), *net.buffers()])
    outs = []
    hooks = [m.register_forward_hook(lambda m, i, o: outs.append(o.numel() * o.element_size())) for m in net.modules()]
    with torch.no_grad():
        net.eval()(torch.zeros(1, 3, 16, 16))
    for h in hooks:
        h.remove()
    assert per_row == max(outs) == 4 * 16 * 16 * 4  # the first block's conv output: 4 channels of 16 × 16 floats


def test_sizes_past_the_memory_available_are_refused_before_any_is_allocated(monkeypatch):
    """An outside review: --hp model.widths=4,100000000 had the kernel kill the process while it built the model."""
    import pllzoo.planning as planning

    monkeypatch.setattr(planning, "available_memory", lambda: 2**20)  # 1 MiB
    args = ["bench", "--methods", "proden", "--dataset", "synthetic-lt", "--epochs", "1", "--threads", "1",
            "--dry-run", "--out", "unused"]
    res = CliRunner().invoke(cli, [*args, "--hp", "model.hidden=4096"])
    assert res.exit_code == 1 and "Traceback" not in res.output, res.output
    assert ("Error: model 'mlp' (plugin pllzoo.builtin) with hidden=4096 needs at least " in res.output
            and "more than the 0.0 GiB of memory available here; give it smaller sizes" in res.output), res.output
    assert CliRunner().invoke(cli, [*args, "--hp", "model.hidden=8"]).exit_code == 0
    assert CliRunner().invoke(cli, args).exit_code == 0  # the default sizes are not measured
