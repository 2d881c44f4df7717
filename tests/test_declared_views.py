"""A component's own strong view (``Component.strong_view``): PiCO's key encoder sees PiCO's strong_transform,
not SoLar's strong view, unless ``--hp train.strong_view`` names one; tabular runs are untouched."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from pllzoo import Component, PLLZooError
from pllzoo.cli import cli
from pllzoo.components import declared_strong_view
from pllzoo.data.base import DataOptions
from pllzoo.planning import plan
from pllzoo.registry import get_registry

CIFAR = ["--dataset", "cifar10lt", "--offline", "--subset", "96", "--batch-size", "32", "--epochs", "1",
         "--hp", "train.model=cnn", "--threads", "1"]


def _views(shared_data, methods, hp=None, dataset="cifar10lt"):
    opts = DataOptions(data_dir=shared_data, download=False, subset=96 if dataset == "cifar10lt" else None)
    plans = plan(get_registry(), methods, dataset, [1], opts, epochs=1, batch_size=32, hp=hp or {})
    return {p.method.name: p.train.strong_view for p in plans}


def test_pico_plans_its_own_strong_view_and_an_explicit_one_wins(shared_data):
    assert _views(shared_data, ["pico", "proden", "pico+label_update=proden.confidence"]) == {  # pico.loss's own
        "pico": "pico-strong", "proden": "strong", "pico+label_update=proden.confidence": "pico-strong"}
    assert _views(shared_data, ["pico", "proden"], {"pico:train.strong_view": "strong"}) == {
        "pico": "strong", "proden": "strong"}
    assert _views(shared_data, ["pico"], {"train.strong_view": "simaugment"}) == {"pico": "simaugment"}
    assert _views(shared_data, ["pico"], dataset="lost") == {"pico": "strong"}  # tabular: the run id stands


def test_two_components_declaring_different_views_are_refused():
    class A(Component):
        strong_view = "strong"

    class B(Component):
        strong_view = "pico-strong"

    assert declared_strong_view("m", {"loss": B(), "selection": Component()}) == "pico-strong"
    assert declared_strong_view("m", {"loss": Component()}) is None
    with pytest.raises(PLLZooError, match=r"method 'm': its components declare different strong views .*"
                                          r"choose one with --hp train.strong_view=NAME"):
        declared_strong_view("m", {"label_update": A(), "loss": B()})


def test_pico_trains_with_its_view_and_records_it(shared_data, tmp_path):
    out = tmp_path / "out"
    res = CliRunner().invoke(cli, ["bench", "--methods", "pico", *CIFAR, "--data-dir", str(shared_data),
                                   "--hp", "loss.queue=64", "--out", str(out)])
    assert res.exit_code == 0, res.output
    (run,) = (p for p in (out / "runs").iterdir() if p.is_dir())
    assert json.loads((run / "config.json").read_text())["train"]["strong_view"] == "pico-strong"
    pooled = tmp_path / "pooled"  # the PIL view computed ahead by a worker process, as the other PIL views
    res = CliRunner().invoke(cli, ["bench", "--methods", "pico", *CIFAR, "--data-dir", str(shared_data),
                                   "--hp", "loss.queue=64", "--view-workers", "1", "--out", str(pooled)])
    assert res.exit_code == 0, res.output
    (run,) = (p for p in (pooled / "runs").iterdir() if p.is_dir())
    assert json.loads((run / "config.json").read_text())["view_stream"] == "pooled"


def test_tabular_runs_on_a_gpu_keep_the_view_names(monkeypatch):
    """An outside review: on CUDA a tabular run recorded train.strong_view 'strong-batched', a view it never builds
    (the swap for the GPU's batched twins is for images only)."""
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    plans = plan(get_registry(), ["solar", "pico"], "synthetic-lt", [1], DataOptions(subset=200), epochs=1,
                 batch_size=32, device="cuda")
    assert [(p.train.weak_view, p.train.strong_view) for p in plans] == [("weak", "strong")] * 2
