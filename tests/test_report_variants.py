"""Runs of one method and setting trained with other settings (a smoke run beside the real one, another
--hp) are other experiments, not more seeds: report, bench's table and results.csv keep them apart and say
what differs."""

from __future__ import annotations

import pandas as pd
from click.testing import CliRunner

from pllzoo.cli import cli

BENCH = ["bench", "--dataset", "synthetic-lt", "--subset", "200", "--batch-size", "64", "--device", "cpu",
         "--threads", "1"]


def test_runs_with_other_settings_are_not_averaged_as_seeds(tmp_path):
    out = tmp_path / "out"
    for epochs in ("1", "2"):
        res = CliRunner().invoke(cli, [*BENCH, "--methods", "proden", "--epochs", epochs, "--out", str(out)])
        assert res.exit_code == 0, res.output
    res = CliRunner().invoke(cli, [*BENCH, "--methods", "proden", "--epochs", "2", "--seeds", "2", "--out", str(out)])
    assert res.exit_code == 0, res.output
    res = CliRunner().invoke(cli, ["report", str(out), "--csv", str(tmp_path / "s.csv")])
    assert res.exit_code == 0, res.output
    summ = pd.read_csv(tmp_path / "s.csv")
    base = "synthetic-lt φ=0.5 γ=100 subset=200"
    assert dict(zip(summ["setting"], summ["n"])) == {f"{base} [train.epochs=1]": 1, f"{base} [train.epochs=2]": 2}
    assert "[train.epochs=1]" in res.output  # rich shows it as text, not as a markup tag
    md = (out / "summary.md").read_text()
    assert f"### {base} [train.epochs=2]" in md and f"### {base} [train.epochs=1]" in md


def test_a_field_left_out_at_its_recorded_value_is_shown_with_it(tmp_path):
    """SoLar's ``label_update.relax`` is left out of a config at "check" (``unnamed_when``): the split label shows
    check, not a blank, beside an explicit nan."""
    out = tmp_path / "out"
    for hp in ([], ["--hp", "label_update.relax=nan"]):
        res = CliRunner().invoke(cli, [*BENCH, "--methods", "solar", "--epochs", "1", "--out", str(out), *hp])
        assert res.exit_code == 0, res.output
    res = CliRunner().invoke(cli, ["report", str(out), "--csv", str(tmp_path / "s.csv")])
    assert res.exit_code == 0, res.output
    settings = set(pd.read_csv(tmp_path / "s.csv")["setting"])
    assert settings == {"synthetic-lt φ=0.5 γ=100 subset=200 [label_update.relax=check]",
                        "synthetic-lt φ=0.5 γ=100 subset=200 [label_update.relax=nan]"}


def test_a_folder_given_twice_counts_once_and_paper_needs_wide(tmp_path):
    out = tmp_path / "out"
    res = CliRunner().invoke(cli, [*BENCH, "--methods", "proden", "--epochs", "1", "--out", str(out)])
    assert res.exit_code == 0, res.output
    res = CliRunner().invoke(cli, ["report", str(out), str(tmp_path / "." / "out"), "--csv", str(tmp_path / "s.csv")])
    assert res.exit_code == 0, res.output
    assert "is given twice" in res.stderr and "a copy" not in res.output  # not "the same run as ... (a copy)"
    assert list(pd.read_csv(tmp_path / "s.csv")["n"]) == [1]
    paper = tmp_path / "paper.csv"
    paper.write_text("method,setting,paper\nproden,x,50\n")
    res = CliRunner().invoke(cli, ["report", str(out), "--paper", str(paper)])
    assert res.exit_code == 1 and "--paper goes with --wide" in res.output


def test_a_method_trained_at_one_of_the_settings_is_labelled_with_it(tmp_path):
    """An outside review: proden at 1 and 2 epochs were split as [train.epochs=1] and [train.epochs=2], and cc,
    trained at 2 epochs only, stood alone under the plain label, apart from the runs it is compared with."""
    out = tmp_path / "out"
    for methods, epochs in (("proden", "1"), ("proden,cc", "2")):
        res = CliRunner().invoke(cli, [*BENCH, "--methods", methods, "--epochs", epochs, "--out", str(out)])
        assert res.exit_code == 0, res.output
    res = CliRunner().invoke(cli, ["report", str(out), "--csv", str(tmp_path / "s.csv")])
    assert res.exit_code == 0, res.output
    summ = pd.read_csv(tmp_path / "s.csv")
    base = "synthetic-lt φ=0.5 γ=100 subset=200"
    assert sorted(zip(summ["setting"], summ["method"])) == [(f"{base} [train.epochs=1]", "proden"),
                                                           (f"{base} [train.epochs=2]", "cc"),
                                                           (f"{base} [train.epochs=2]", "proden")]


def test_a_pipe_or_newline_in_a_markdown_cell_keeps_the_columns():
    # an outside review: a dataset file `a|b.mat` gave a wide table's header a cell more than its rule row
    from pllzoo.report import Report, to_markdown

    text = to_markdown(Report("t", ["Method", "a|b uniform"], [["x|y", "1\n2"]], "cap"))
    rows = [line for line in text.splitlines() if line.startswith("|")]
    assert rows == ["| Method | a\\|b uniform |", "|---|---|", "| x\\|y | 1 2 |"]
