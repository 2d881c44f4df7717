"""Runs of one method and setting trained with other settings (a smoke run beside the real one, another
--hp) are other experiments, not more seeds: report, bench's table and results.csv keep them apart and say
what differs."""

from __future__ import annotations

import pandas as pd
from click.testing import CliRunner

from pllzoo.cli import cli

BENCH = ["bench", "--methods", "proden", "--dataset", "synthetic-lt", "--subset", "200", "--batch-size", "64",
         "--device", "cpu", "--threads", "1"]


def test_runs_with_other_settings_are_not_averaged_as_seeds(tmp_path):
    out = tmp_path / "out"
    for epochs in ("1", "2"):
        res = CliRunner().invoke(cli, [*BENCH, "--epochs", epochs, "--out", str(out)])
        assert res.exit_code == 0, res.output
    res = CliRunner().invoke(cli, [*BENCH, "--epochs", "2", "--seeds", "2", "--out", str(out)])
    assert res.exit_code == 0, res.output
    res = CliRunner().invoke(cli, ["report", str(out), "--csv", str(tmp_path / "s.csv")])
    assert res.exit_code == 0, res.output
    summ = pd.read_csv(tmp_path / "s.csv")
    base = "synthetic-lt φ=0.5 γ=100 subset=200"
    assert dict(zip(summ["setting"], summ["n"])) == {f"{base} [train.epochs=1]": 1, f"{base} [train.epochs=2]": 2}
    assert "[train.epochs=1]" in res.output  # rich shows it as text, not as a markup tag
    md = (out / "summary.md").read_text()
    assert f"### {base} [train.epochs=2]" in md and f"### {base} [train.epochs=1]" in md
