"""The benchmark tables are generated, never typed: the README blocks equal the generated files,
and re-running the table scripts on the committed raw results reproduces those files exactly."""

from __future__ import annotations

import filecmp
import importlib.util
import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("sync_readme", ROOT / "benchmarks" / "sync_readme.py")
sync = importlib.util.module_from_spec(spec)
spec.loader.exec_module(sync)

MARKDOWN = [ROOT / "README.md", *sorted((ROOT / "benchmarks").glob("*/README.md"))]


@pytest.mark.parametrize("path", MARKDOWN, ids=lambda p: str(p.relative_to(ROOT)))
def test_readme_blocks_equal_their_files(path):
    assert sync.stale(path.read_text()) == [], "run: python benchmarks/sync_readme.py " + str(path)


def test_sync_rewrites_a_block_from_its_file(tmp_path):
    (tmp_path / "t.md").write_text("| a |\n")
    text = "x\n<!-- begin: t.md -->\nold\n<!-- end -->\ny\n"
    assert sync.stale(text, tmp_path) == ["t.md"]
    new = sync.render(text, tmp_path)
    assert new == "x\n<!-- begin: t.md -->\n| a |\n<!-- end -->\ny\n" and sync.stale(new, tmp_path) == []


@pytest.mark.skipif(shutil.which("pllzoo") is None, reason="the pllzoo command is not installed")
@pytest.mark.parametrize("study, files", [
    # the real-world study's four reports read ~550 archived runs each (the longest default test): -m slow
    pytest.param("realworld", ["table-uniform.md", "table-uniform.csv", "table-balanced.md", "shots-uniform.md"],
                 marks=pytest.mark.slow),
    ("cifar10lt-cpu", ["results-phi0.5/table.md", "results-phi0.5/table.csv"]),
    ("gpu", ["results/table-resnet18.md", "results/table-resnet18.csv", "results/table-cnn.md"]),
    ("composition", ["table.md", "table.csv", "table-cpu.md", "table-cpu.csv"]),
    ("momentum-restart", ["table-restarted.md", "table-restarted.csv", "table-uninterrupted.md",
                          "table-uninterrupted.csv"]),
])
def test_table_scripts_reproduce_committed_tables(study, files, tmp_path):
    here = ROOT / "benchmarks" / study
    committed = [f for f in files if (here / f).exists()]
    if not committed:
        pytest.skip(f"no committed tables in benchmarks/{study} yet")
    env = {**os.environ, "TABLES_OUT": str(tmp_path)}
    subprocess.run(["bash", str(here / "tables.sh")], check=True, env=env, capture_output=True)
    for f in committed:  # the same relative names under TABLES_OUT
        assert filecmp.cmp(here / f, tmp_path / f, shallow=False), f
