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
