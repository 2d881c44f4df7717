"""An outside plugin, pip-installed, is listed and run by ``pllzoo`` with no change to pllzoo.

``tests/thirdparty/pllzoo-example`` is a separate distribution.  The test builds and
installs it with pip (offline: no index, no build isolation) into a private folder,
then runs the real ``pllzoo`` command in a subprocess with that folder on the path,
so discovery goes through the ``pllzoo`` entry-point group exactly as for a user.
A second, broken distribution (its entry point names a module that fails to import)
is reported by ``pllzoo plugins`` and does not stop the others.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pandas as pd
import pytest

from plugin_site import install, run_pllzoo



@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    target = install("pllzoo-example", tmp_path_factory)
    broken = target / "pllzoo_broken-0.0.1.dist-info"  # an installed distribution whose plugin cannot import
    broken.mkdir()
    (broken / "METADATA").write_text("Metadata-Version: 2.1\nName: pllzoo-broken\nVersion: 0.0.1\n")
    (broken / "entry_points.txt").write_text("[pllzoo]\nbroken = pllzoo_broken_missing_module\n")
    return target


def _pllzoo(site: Path, *args: str) -> subprocess.CompletedProcess:
    return run_pllzoo(site, *args)


def test_installed_plugin_is_listed_and_broken_one_reported(site):
    proc = _pllzoo(site, "plugins", "--json")
    assert proc.returncode == 0, proc.stderr
    rows = {r["name"]: r for r in json.loads(proc.stdout)}
    assert rows["example"]["version"] == "0.3.0" and rows["example"]["error"] is None
    assert rows["example"]["components"] == {"selection": ["example.smallloss"]}
    assert rows["example"]["methods"] == ["example-smallloss"]
    assert "ModuleNotFoundError" in rows["broken"]["error"]
    assert rows["baselines"]["error"] is None and "proden" in rows["baselines"]["methods"]


def test_installed_plugin_runs_in_bench_and_mixes(site, tmp_path):
    out = tmp_path / "out"
    proc = _pllzoo(site, "bench", "--methods", "example-smallloss,proden+selection=example.smallloss,proden",
                   "--dataset", "synthetic-lt", "--epochs", "2", "--out", str(out),
                   "--hp", "selection.keep=0.25")
    assert proc.returncode == 0, proc.stderr
    df = pd.read_csv(out / "results.csv")
    assert list(df["method"]) == ["example-smallloss", "proden+selection=example.smallloss", "proden"]
    cfg = json.loads(next((out / "runs").glob("proden+selection*/config.json")).read_text())
    assert cfg["recipe"]["selection"] == "example.smallloss" and cfg["hparams"]["selection"] == {"keep": 0.25}
    env = json.loads(next((out / "runs").glob("proden+selection*/env.json")).read_text())  # who supplied what
    assert env["components"]["selection"] == {"component": "example.smallloss", "plugin": "example",
                                              "dist": "pllzoo-example", "version": "0.3.0"}
    assert env["components"]["label_update"]["dist"] == "pllzoo-baselines"
    plugins = {p["name"]: p for p in env["plugins"]}
    assert (plugins["example"]["dist"], plugins["example"]["version"], plugins["example"]["error"]) == \
        ("pllzoo-example", "0.3.0", None)
    assert plugins["broken"]["dist"] == "pllzoo-broken" and "ModuleNotFoundError" in plugins["broken"]["error"]


def test_installed_plugin_passes_pllzoo_check(site):
    """The contract check of an installed outside recipe, and of a mix of its component with a shipped one."""
    proc = _pllzoo(site, "check", "example-smallloss,proden+selection=example.smallloss", "--json")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rows = json.loads(proc.stdout)
    assert {r["method"] for r in rows} == {"example-smallloss", "proden+selection=example.smallloss"}
    assert {r["status"] for r in rows} == {"ok"}, rows
