"""An outside plugin, pip-installed, adds a backbone, a view and an image dataset, and ``pllzoo bench`` runs with them.

``tests/thirdparty/pllzoo-vision-example`` is a separate distribution, installed offline into a private
folder (as in tests/test_thirdparty.py) and found through the ``pllzoo`` entry-point group.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pandas as pd
import torch
import pytest

from plugin_site import install, run_pllzoo



@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    return install("pllzoo-vision-example", tmp_path_factory)


def _pllzoo(site: Path, *args: str) -> subprocess.CompletedProcess:
    return run_pllzoo(site, *args, load="baselines,vision")


def test_the_plugin_lists_its_backbone_view_and_dataset(site):
    proc = _pllzoo(site, "plugins", "--json")
    assert proc.returncode == 0, proc.stderr
    row = {r["name"]: r for r in json.loads(proc.stdout)}["vision"]
    assert (row["dist"], row["error"]) == ("pllzoo-vision-example", None)
    assert (row["models"], row["views"], row["datasets"]) == (["vision.tinynet"], ["vision.invert"], ["vision.tiles"])


def test_bench_runs_with_the_plugin_backbone_view_and_dataset(site, tmp_path):
    out = tmp_path / "out"
    proc = _pllzoo(site, "bench", "--methods", "proden", "--dataset", "vision.tiles", "--epochs", "1", "--threads", "1",
                   "--hp", "train.model=vision.tinynet", "--hp", "train.weak_view=vision.invert",
                   "--hp", "train.batch_size=16", "--hp", "model.width=4", "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    rows = pd.read_csv(out / "results.csv")
    assert list(rows["status"]) == ["ok"] and list(rows["dataset"]) == ["vision.tiles"] and rows["acc_all"].notna().all()
    (run,) = (out / "runs").iterdir()
    cfg = json.loads((run / "config.json").read_text())
    assert (cfg["train"]["model"], cfg["train"]["weak_view"]) == ("vision.tinynet", "vision.invert")
    assert cfg["train"]["model_args"] == ["width=4"]  # the plugin backbone's own argument (pllzoo.model_args)
    weights = torch.load(run / "checkpoint.pt", weights_only=False)
    assert (weights["model"] if "model" in weights else weights)["head.weight"].shape[1] == 4
    env = json.loads((run / "env.json").read_text())
    assert env["trainer"]["model"] == {"name": "vision.tinynet", "plugin": "vision", "dist": "pllzoo-vision-example",
                                       "version": "0.1.0"}
    assert env["trainer"]["weak_view"]["dist"] == "pllzoo-vision-example"
    assert env["trainer"]["dataset"] == {"name": "vision.tiles", "plugin": "vision", "dist": "pllzoo-vision-example",
                                         "version": "0.1.0"}  # an outside review: the dataset's plugin was unrecorded

