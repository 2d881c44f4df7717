"""``--hp train.compile``: the network is compiled in place, CUDA-graph steps are marked, run ids of
runs that do not ask for it are unchanged."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from pllzoo import bench
from pllzoo.data.base import DataOptions
from pllzoo.run import TrainConfig
from pllzoo.trainer import Trainer

CFG = TrainConfig(model="mlp", epochs=1, lr=0.05, weight_decay=1e-4, batch_size=16)


def _fit(registry, data, cfg):
    comps = registry.build_components(registry.method("proden"))
    trainer = Trainer(data, comps, cfg, seed=1, device=torch.device("cpu"))
    return trainer, trainer.fit()


@pytest.mark.parametrize("mode", ["default", "reduce-overhead"])
def test_network_is_compiled_and_steps_marked(registry, tiny_data, monkeypatch, mode):
    calls, marks = [], []
    monkeypatch.setattr(torch.nn.Module, "compile", lambda self, **kw: calls.append((type(self).__name__, kw)))
    monkeypatch.setattr(torch.compiler, "cudagraph_mark_step_begin", lambda: marks.append(1))
    trainer, records = _fit(registry, tiny_data, dataclasses.replace(CFG, compile=mode))
    assert calls == [("PLLNet", {"mode": mode})]  # once per network built, in place
    steps = tiny_data.num_train // CFG.batch_size
    assert len(marks) == (steps if mode == "reduce-overhead" else 0)
    assert len(records) == 1


def test_graph_sizes_are_the_passes_of_fixed_shape():
    """Hand-computed: B = 256 of 12,406 rows (last batch 118), eval batches of 1,024 over 12,406 and 10,000
    rows (remainders 118 and 784)."""
    from pllzoo.devices import graph_sizes

    assert graph_sizes(256, 12406, False, 1024, (12406, 10000)) == {256, 512, 118, 236, 1024, 784}
    assert graph_sizes(256, 12406, True, 1024, (12406, 10000)) == {256, 512, 1024, 118, 784}
    assert graph_sizes(16, 64, False, 64, (64,)) == {16, 32, 64}  # no remainders


def test_reduce_overhead_runs_other_sizes_eager(monkeypatch):
    """Under ``reduce-overhead`` a pass of a listed size takes the compiled call, any other size (a mixup over
    the reliable rows) the eager module call; ``default`` compiles every size."""
    from pllzoo.devices import compile_model

    def fake_compile(self, **kw):  # what nn.Module.compile installs, without inductor
        self._compiled_call_impl = lambda x: "compiled"

    monkeypatch.setattr(torch.nn.Module, "compile", fake_compile)
    net = torch.nn.Linear(3, 2)
    compile_model(net, "reduce-overhead", frozenset({4, 8}))
    assert net(torch.zeros(4, 3)) == "compiled" and net(torch.zeros(8, 3)) == "compiled"
    eager = net(torch.ones(5, 3))
    torch.testing.assert_close(eager, torch.nn.functional.linear(torch.ones(5, 3), net.weight, net.bias))
    other = torch.nn.Linear(3, 2)
    compile_model(other, "default", frozenset({4}))
    assert other(torch.zeros(5, 3)) == "compiled"


def test_feature_passes_are_compiled_too(monkeypatch):
    """``forward_with_features`` (PiCO, RECORDS, HTC) is compiled like the network's call, sizes dispatched alike;
    the module's own method is untouched (components deep-copy the module)."""
    from pllzoo.devices import compile_features
    from pllzoo.models import build_model

    seen = []
    monkeypatch.setattr(torch, "compile", lambda fn, mode: (seen.append(mode), lambda x: "compiled")[1])
    net = build_model("mlp", 3, (4,))
    call = compile_features(net, "reduce-overhead", frozenset({8}))
    assert seen == ["reduce-overhead"] and call(torch.zeros(8, 4)) == "compiled"
    logits, feats = call(torch.zeros(5, 4))  # another size: the eager method
    assert logits.shape == (5, 3) and feats.shape == (5, net.feature_dim)
    assert compile_features(net, "default")(torch.zeros(5, 4)) == "compiled"
    assert "forward_with_features" not in vars(net)


@pytest.mark.slow
def test_records_methods_train_compiled(registry):
    """The fourth H100 session's failure, reproduced by inductor on the CPU (~40 s): a RECORDS method's feature
    pass ran eager before a compiled pass, whose functionalised BatchNorm update broke the eager pass's
    backward.  With both passes compiled it trains."""
    from conftest import make_fake_images

    data = make_fake_images(n=64, k=4)
    comps = registry.build_components(registry.method("proden-records"), {}, dataset=(data.name, data.kind))
    cfg = TrainConfig(model="cnn", epochs=2, lr=0.01, weight_decay=0.0, batch_size=16, compile="default")
    records = Trainer(data, comps, cfg, seed=1, device=torch.device("cpu")).fit()
    assert all(torch.isfinite(torch.tensor(r["loss"])) for r in records)


def test_not_compiled_by_default(registry, tiny_data, monkeypatch):
    calls = []
    monkeypatch.setattr(torch.nn.Module, "compile", lambda self, **kw: calls.append(kw))
    _fit(registry, tiny_data, CFG)
    assert calls == []


def test_run_id_names_compile_only_when_set(registry):
    plain, = bench.plan(registry, ["proden"], "synthetic-lt", [1], DataOptions(), epochs=1, device="cpu")
    graphs, = bench.plan(registry, ["proden"], "synthetic-lt", [1], DataOptions(), epochs=1, device="cpu",
                         hp={"train.compile": "reduce-overhead"})
    assert "compile" not in plain.config["train"]  # recorded runs keep their ids
    assert graphs.config["train"]["compile"] == "reduce-overhead" and graphs.run_id != plain.run_id


def test_unknown_compile_mode_is_refused(registry):
    from pllzoo.errors import PLLZooError

    with pytest.raises(PLLZooError, match="compile"):
        bench.plan(registry, ["proden"], "synthetic-lt", [1], DataOptions(), epochs=1, device="cpu",
                   hp={"train.compile": "max-speed"})


@pytest.mark.slow
def test_compiled_network_trains_and_resumes(registry, tiny_data, tmp_path):
    """A real ``torch.compile`` (inductor on the CPU; ~20 s): finite losses, and the checkpoint of the
    compiled network resumes into a fresh one (state-dict keys unchanged by in-place compile)."""
    cfg = dataclasses.replace(CFG, epochs=2, compile="default", checkpoint_every=1)
    comps = registry.build_components(registry.method("proden"))
    first = Trainer(tiny_data, comps, dataclasses.replace(cfg, epochs=1), seed=1, device=torch.device("cpu"),
                    run_dir=tmp_path)
    first.fit()
    comps = registry.build_components(registry.method("proden"))
    records = Trainer(tiny_data, comps, cfg, seed=1, device=torch.device("cpu"), run_dir=tmp_path).fit(resume=True)
    assert [r["epoch"] for r in records] == [1, 2]
    assert all(torch.isfinite(torch.tensor(r["loss"])) for r in records)


def test_reduce_overhead_on_a_torch_without_step_marks_is_one_line(registry, tiny_data, monkeypatch):
    """torch 2.1 (the declared floor) has no ``cudagraph_mark_step_begin`` (torch 2.2 on): an outside review saw
    every step fail with an AttributeError; the run is refused at set-up in one line, ``default`` still works."""
    from pllzoo.errors import PLLZooError

    monkeypatch.delattr(torch.compiler, "cudagraph_mark_step_begin")
    monkeypatch.setattr(torch.nn.Module, "compile", lambda self, **kw: None)
    with pytest.raises(PLLZooError, match=r"reduce-overhead needs torch>=2\.2.*train\.compile=default"):
        _fit(registry, tiny_data, dataclasses.replace(CFG, compile="reduce-overhead"))
    assert len(_fit(registry, tiny_data, dataclasses.replace(CFG, compile="default"))[1]) == 1
