"""`pllzoo report`: the numbers against results.csv by hand, the three model-selection rules,
wide tables with the paper's numbers, and the files it writes."""

from __future__ import annotations

import io
import json
import math
import shutil

import pandas as pd
import pytest
from click.testing import CliRunner

from pllzoo import report as rep
from pllzoo.cli import cli
from pllzoo.results import load


@pytest.fixture(scope="module")
def bench_out(tmp_path_factory):
    """Two methods × two seeds on synthetic-lt, 3 epochs, 10 % held out (a few seconds)."""
    out = tmp_path_factory.mktemp("bench")
    res = CliRunner().invoke(cli, ["bench", "--methods", "proden,cc", "--dataset", "synthetic-lt", "--seeds", "1,2",
                                   "--epochs", "3", "--holdout", "0.1", "--out", str(out)], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    return out


def _report(*args):
    return CliRunner().invoke(cli, ["report", *map(str, args)], catch_exceptions=False)


def test_report_last_matches_results_csv_by_hand(bench_out, tmp_path):
    res = _report(bench_out, "--csv", tmp_path / "s.csv", "--md", tmp_path / "s.md", "--methods", "cc,proden")
    assert res.exit_code == 0, res.output
    raw = pd.read_csv(bench_out / "results.csv")
    summ = pd.read_csv(tmp_path / "s.csv")
    assert list(summ["method"]) == ["cc", "proden"]  # the --methods order
    for _, row in summ.iterrows():
        accs = raw.loc[raw["method"] == row["method"], "acc_all"].tolist()
        mean = sum(accs) / 2
        std = math.sqrt(sum((a - mean) ** 2 for a in accs) / 1)  # sample std, n - 1 = 1
        assert row["acc_all_mean"] == pytest.approx(mean, abs=1e-4) and row["n"] == 2
        assert row["acc_all_std"] == pytest.approx(std, abs=1e-4)
    md = (tmp_path / "s.md").read_text()
    assert "| Method | All | Many | Medium | Few | n |" in md and "Model selection: last epoch" in md
    assert f"| cc | {rep.fmt(summ['acc_all_mean'][0], summ['acc_all_std'][0])} |" in md
    assert "holdout=0.1" in md  # the setting says the training set lost 10 %


def test_oracle_is_labelled_and_never_below_last(bench_out, tmp_path):
    _report(bench_out, "--csv", tmp_path / "last.csv")
    res = _report(bench_out, "--select", "oracle", "--csv", tmp_path / "oracle.csv")
    assert "ORACLE" in res.output
    last, oracle = pd.read_csv(tmp_path / "last.csv"), pd.read_csv(tmp_path / "oracle.csv")
    assert (oracle["acc_all_mean"] >= last["acc_all_mean"] - 1e-9).all()
    # the CSV says the rule too: it has no caption (an outside review: an oracle CSV read as a result)
    assert set(last["select"]) == {"last"} and set(oracle["select"]) == {"oracle"}
    assert list(oracle.columns[:3]) == ["setting", "method", "select"]


def test_heldout_selection_runs_on_covering_rate(bench_out):
    res = _report(bench_out, "--select", "heldout")
    assert res.exit_code == 0 and "covering rate" in res.output


def test_heldout_without_holdout_runs_is_one_line_error(tmp_path):
    out = tmp_path / "b"
    CliRunner().invoke(cli, ["bench", "--methods", "proden", "--dataset", "synthetic-lt", "--epochs", "1",
                             "--out", str(out)], catch_exceptions=False)
    res = CliRunner().invoke(cli, ["report", str(out), "--select", "heldout"])
    assert res.exit_code == 1 and "--holdout" in res.output and "Traceback" not in res.output


def test_wide_report_puts_paper_numbers_beside_ours(bench_out, tmp_path):
    setting = pd.read_csv(bench_out / "summary.csv")["setting"][0]
    paper = tmp_path / "paper.csv"
    pd.DataFrame({"method": ["proden"], "setting": [setting], "paper": ["71.81 ± 1.52"]}).to_csv(paper, index=False)
    res = _report(bench_out, "--wide", "--paper", paper, "--md", tmp_path / "w.md", "--methods", "proden,cc")
    assert res.exit_code == 0, res.output
    lines = (tmp_path / "w.md").read_text().splitlines()
    assert lines[2] == f"| Method | {setting} | paper |"
    assert lines[4].startswith("| proden | ") and lines[4].endswith(" | 71.81 ± 1.52 |")
    assert lines[5].endswith(" |  |")  # cc: no paper number
    assert "Many" not in lines[-2]  # All: no shot grouping to state
    # one shot group: its caption says which classes it holds, and the CSV which accuracy "paper" is of
    res = _report(bench_out, "--wide", "--metric", "acc_few", "--paper", paper, "--md", tmp_path / "f.md",
                  "--csv", tmp_path / "f.csv")
    assert res.exit_code == 0, res.output
    summ = rep.summary(load(bench_out))
    shots = rep.shot_caption([c for lst in summ["train_counts"] for c in lst])
    assert (tmp_path / "f.md").read_text().rstrip().endswith(f"{shots}.")
    assert set(pd.read_csv(tmp_path / "f.csv")["paper_metric"]) == {"acc_few"}


@pytest.mark.parametrize("rows, message", [
    ([("proden", "{s}", "71.81"), ("proden", "{s}", "70.00")],
     "proden at setting '{s}' is given more than once (lines 2, 3); keep one"),
    ([("proden", "{s}", "71.81"), ("cc", "{s}", "")], "line 3: empty paper; give each cell, or leave the row out"),
    ([("", "{s}", "71.81")], "line 2: empty method; give each cell"),
])
def test_a_paper_file_with_a_cell_twice_or_empty_is_one_line(bench_out, tmp_path, rows, message):
    """Neither is shown silently: one of two numbers for a cell, or "nan"."""
    setting = pd.read_csv(bench_out / "summary.csv")["setting"][0]
    paper = tmp_path / "paper.csv"
    pd.DataFrame([(m, st.format(s=setting), v) for m, st, v in rows], columns=["method", "setting", "paper"]
                 ).to_csv(paper, index=False)
    res = CliRunner().invoke(cli, ["report", str(bench_out), "--wide", "--paper", str(paper)])
    assert res.exit_code == 1 and "Traceback" not in res.output, res.output
    assert message.format(s=setting) in res.output, res.output


def test_a_paper_file_whose_settings_match_none_of_ours_is_said(bench_out, tmp_path):
    """Spelled otherwise, they used to leave the paper column out without a word; a file that also holds other
    tables' settings (the real-world study's, both splits in one) stays quiet while some match."""
    setting = pd.read_csv(bench_out / "summary.csv")["setting"][0]
    paper = tmp_path / "paper.csv"
    pd.DataFrame({"method": ["proden", "cc"], "setting": ["CIFAR-10-LT", "CIFAR-10-LT"], "paper": ["1", "2"]}).to_csv(
        paper, index=False)
    res = CliRunner().invoke(cli, ["report", str(bench_out), "--wide", "--paper", str(paper)])
    assert res.exit_code == 0, res.output
    assert f"Warning: {paper}: none of its settings ('CIFAR-10-LT') is a setting of these runs ('{setting}'); no " \
           "paper numbers are shown" in res.output
    pd.DataFrame({"method": ["proden", "cc"], "setting": [setting, "CIFAR-10-LT"], "paper": ["1", "2"]}).to_csv(
        paper, index=False)
    res = CliRunner().invoke(cli, ["report", str(bench_out), "--wide", "--paper", str(paper)])
    assert res.exit_code == 0 and "Warning" not in res.output, res.output


def test_fmt_and_shot_caption():
    assert rep.fmt(71.104, 0.1414) == "71.10 ± 0.14"
    assert rep.fmt(71.1, float("nan")) == "71.10" and rep.fmt(None, None) == "–"
    # a mean that is a decimal half rounds up whichever side of it the float landed (an outside review: the CPU
    # tier's corr printed 30.96 for (31.37 + 30.56) / 2 = 30.965, htc 31.07 for 31.075, another 53.73 for 53.725)
    assert f"{(31.37 + 30.56) / 2:.2f}" == "30.96" and rep.fmt((31.37 + 30.56) / 2, 0.57) == "30.97 ± 0.57"
    assert rep.fmt((31.025 + 31.125) / 2, None) == "31.08" and rep.two_places(53.725) == "53.73"
    assert rep.two_places(2.675) == "2.68" and rep.two_places(-2.675) == "-2.68"  # away from zero both ways
    # a paired difference that sums to exactly zero is -1e-15 in floats: no sign on a printed zero
    assert rep.fmt(-1.4e-15, 0.88) == "0.00 ± 0.88" and rep.two_places(-0.004) == "0.00"
    assert rep.two_places(-0.005) == "-0.01" and rep.two_places(float("inf")) == "inf"
    assert rep.two_places(1.5e300) == f"{1.5e300:.2f}"  # past Decimal's 28 digits: as f"{x:.2f}"
    assert "Many: train count > 1077 (3 classes)" in rep.shot_caption(
        [(5000, 2997, 1796, 1077, 645, 387, 232, 139, 83, 50)] * 2)
    assert "differ between seeds" in rep.shot_caption([(5, 3, 1), (4, 3, 2)])


def test_report_on_empty_folder_is_an_error(tmp_path):
    res = CliRunner().invoke(cli, ["report", str(tmp_path)])
    assert res.exit_code == 1 and "no runs" in res.output


def test_unfinished_runs_are_left_out_with_a_warning(bench_out, tmp_path):
    import shutil

    copy = tmp_path / "copy"
    shutil.copytree(bench_out, copy)
    run = sorted((copy / "runs").iterdir())[0]
    (run / "done").unlink()  # as if still training
    res = CliRunner().invoke(cli, ["report", str(copy), "--csv", str(tmp_path / "s.csv")])
    assert res.exit_code == 0 and "left out 1 unfinished run" in res.output
    assert sorted(pd.read_csv(tmp_path / "s.csv")["n"]) == [1, 2]


def test_seeds_keeps_only_those_seeds(bench_out, tmp_path):
    """--seeds 2: n = 1 per method and the numbers of seed 2 alone (results.csv by hand)."""
    res = _report(bench_out, "--seeds", "2", "--csv", tmp_path / "s.csv")
    assert res.exit_code == 0, res.output
    got = pd.read_csv(tmp_path / "s.csv")
    rows = pd.read_csv(bench_out / "results.csv")
    for method in ("proden", "cc"):
        mine = got[got["method"] == method]
        assert int(mine["n"].iloc[0]) == 1
        want = rows[(rows["method"] == method) & (rows["seed"] == 2)]["acc_all"].iloc[0]
        assert mine["acc_all_mean"].iloc[0] == pytest.approx(want, abs=1e-6)


@pytest.mark.parametrize("seeds,message", [("7", "no runs of these seeds; found seeds 1, 2"), ("x", "bad --seeds")])
def test_seeds_without_runs_or_malformed_is_one_line(bench_out, seeds, message):
    res = CliRunner().invoke(cli, ["report", str(bench_out), "--seeds", seeds])
    assert res.exit_code != 0 and message in res.output and "Traceback" not in res.output


def _records(rows):
    """Final records (rule "last") of hand-made runs: (method, seed, epochs, acc_many or None)."""
    return pd.DataFrame([{"setting": "toy", "method": m, "run": f"{m}-{s}", "dataset": "toy", "seed": s, "epoch": e,
                          "epochs": e,
                          "stage_index": 0, "final_stage": True, "acc_all": 50.0 + s, "acc_many": many,
                          "acc_medium": 40.0, "acc_few": 10.0, "train_counts": (3, 2, 1)}
                         for m, s, e, many in rows])


def test_a_cell_with_fewer_seeds_than_n_says_its_own_count():
    """An outside review: a shot group without test examples in one seed's split averaged one seed under n = 2,
    shown as a plain number, which the caption reads as a two-seed mean."""
    summ = rep.summary(_records([("cc", 1, 5, 100.0), ("cc", 2, 5, None)]))
    (report,) = rep.long_reports(summ, "last")
    (row,) = report.rows
    assert row[2] == "100.00 (n=1)" and row[1] == "51.50 ± 0.71" and row[-1] == "2"
    (csv_row,) = pd.read_csv(io.StringIO(rep.to_csv(summ, "last"))).to_dict("records")  # the CSV says it too (a later
    assert csv_row["n"] == 2 and csv_row["acc_many_count"] == 1 and csv_row["acc_all_count"] == 2  # review)
    assert csv_row["epochs"] == 5 and "paper_metric" not in csv_row


def test_methods_of_other_training_lengths_in_one_table_are_said():
    """An outside review: `report A B` put 30-epoch PRODEN beside 3-epoch CC in one table with nothing saying so."""
    summ = rep.summary(_records([("proden", 1, 30, 90.0), ("cc", 1, 3, 80.0)]))
    (report,) = rep.long_reports(summ, "last")
    assert report.caption.endswith("Not one training length: epochs of the final stage: cc 3, proden 30.")
    assert "Not one training length" in rep.wide_report(summ, "last").caption
    same = rep.summary(_records([("proden", 1, 30, 90.0), ("cc", 1, 30, 80.0)]))
    assert "training length" not in rep.long_reports(same, "last")[0].caption
    assert list(pd.read_csv(io.StringIO(rep.to_csv(same, "last")))["epochs"]) == [30, 30]
    assert list(pd.read_csv(io.StringIO(rep.to_csv(summ, "last")))["epochs"]) == [3, 30]  # each row its own length


def test_empty_seeds_says_no_seed_given(tmp_path):
    """An outside review: ``report OUT --seeds ""`` said "--seeds : no runs of these seeds"; bench says this."""
    from click.testing import CliRunner

    from pllzoo.cli import cli

    out = tmp_path / "out"
    assert CliRunner().invoke(cli, ["bench", "--methods", "cc", "--dataset", "synthetic-lt", "--subset", "300",
                                    "--epochs", "1", "--batch-size", "64", "--threads", "1", "--out",
                                    str(out)]).exit_code == 0
    res = CliRunner().invoke(cli, ["report", str(out), "--seeds", ""])
    assert res.exit_code == 1 and "Error: no seed given; try --seeds 1,2,3" in res.output


def test_a_folder_of_unfinished_runs_alone_says_so(tmp_path):
    """An outside review: report said "left out 1 unfinished run(s)", then "no runs under X (expected
    RESULTS/runs/*/log.jsonl ...)" although the log was there."""
    out = tmp_path / "out"
    res = CliRunner().invoke(cli, ["bench", "--methods", "proden", "--subset", "300", "--batch-size", "64",
                                   "--epochs", "1", "--threads", "1", "--out", str(out)])
    assert res.exit_code == 0, res.output
    (done,) = out.glob("runs/*/done")
    done.unlink()
    res = CliRunner().invoke(cli, ["report", str(out)])
    text = " ".join(res.output.split())
    assert res.exit_code == 1 and f"no finished runs under {out}: 1 unfinished (above); bench --resume with their " \
        "settings finishes them" in text and "no runs under" not in text, res.output


def test_a_sweeps_folder_points_at_its_trials(tmp_path):
    """An outside review: ``report OUT`` of a sweep said "no runs under OUT" without a word of OUT/trials/*."""
    from pllzoo.sweep import MANIFEST

    (tmp_path / MANIFEST).write_text("{}")
    res = CliRunner().invoke(cli, ["report", str(tmp_path)])
    text = " ".join(res.output.split())
    assert res.exit_code == 1 and f"{tmp_path} is a sweep's folder: report its trials, {tmp_path / 'trials' / '*'}" \
        in text, res.output


def test_a_wide_table_of_training_label_accuracy_by_hand(bench_out, tmp_path):
    """--metric label_acc*: the mean ± sample std of the last epoch's label accuracies from the logs; cc, whose
    targets are the uniform ones, logs none: its cell is "–"."""
    res = _report(bench_out, "--wide", "--metric", "label_acc_many", "--csv", tmp_path / "w.csv")
    assert res.exit_code == 0, res.output
    last = load(bench_out).sort_values("epoch").groupby(["method", "seed"]).tail(1)
    vals = last.loc[last["method"] == "proden", "label_acc_many"].tolist()
    assert len(vals) == 2 and last.loc[last["method"] == "cc", "label_acc_many"].isna().all()
    mean = sum(vals) / 2
    std = math.sqrt(sum((v - mean) ** 2 for v in vals))
    out = " ".join(res.output.split())
    assert f"proden │ {rep.fmt(mean, std)} │" in out and "cc │ – │" in out, res.output
    assert "Training-label Many accuracy (%)" in out and "hidden true label" in out, res.output
    summ = pd.read_csv(tmp_path / "w.csv")
    assert summ.loc[summ["method"] == "proden", "label_acc_many_mean"].item() == pytest.approx(mean, abs=1e-4)


def test_a_label_metric_no_run_logged_is_one_line(bench_out):
    res = _report(bench_out, "--wide", "--metric", "label_acc", "--methods", "cc")
    assert res.exit_code == 1 and "Traceback" not in res.output, res.output
    assert "Error: --metric label_acc: no run shown here has a value of it" in res.output, res.output


def test_a_label_metric_logged_null_says_a_group_may_have_no_training_rows(bench_out, tmp_path):
    """An outside review: every proden run logged label_acc_few as null (a --subset left Few without training
    rows), and the error said no run logged it."""
    out = tmp_path / "out"
    shutil.copytree(bench_out, out)
    for log in out.glob("runs/*/log.jsonl"):
        recs = [{**json.loads(line), **({"label_acc_few": None} if "label_acc_few" in line else {})}
                for line in log.read_text().splitlines()]
        log.write_text("".join(json.dumps(r) + "\n" for r in recs))
    res = _report(out, "--wide", "--metric", "label_acc_few")
    assert res.exit_code == 1 and "Traceback" not in res.output, res.output
    assert "a shot group without training rows in the selected epoch logs null" in " ".join(res.output.split())
    res = _report(bench_out, "--wide", "--metric", "label_acc_few")
    assert res.exit_code == 0 and "where none of a cell's runs logged it" in " ".join(res.output.split())


@pytest.mark.parametrize("args, says", [(["--metric", "label_acc"], "--metric goes with --wide"),
                                        (["--title", "T"], "--title goes with --wide"),
                                        (["--metric", "acc_few", "--title", "T"], "--metric and --title go with")])
def test_metric_and_title_without_wide_are_refused(bench_out, args, says):
    """An outside review: ``report OUT --metric label_acc`` printed the test-accuracy tables, exit 0."""
    res = _report(bench_out, *args)
    assert res.exit_code == 1 and says in res.output, res.output


def test_methods_may_be_spaced_as_bench_takes_them(tmp_path):
    """An outside review: ``report --methods 'proden + selection=…'`` found no runs of the name bench recorded."""
    out = tmp_path / "out"
    mixed = "proden+selection=solar.classwise+estimator=solar.prior"
    res = CliRunner().invoke(cli, ["bench", "--methods", mixed, "--dataset", "synthetic-lt", "--subset", "200",
                                   "--batch-size", "64", "--epochs", "1", "--threads", "1", "--hp",
                                   "estimator.est_epochs=0", "--out", str(out)])
    assert res.exit_code == 0, res.output
    res = _report(out, "--methods", " proden + selection = solar.classwise + estimator=solar.prior ")
    assert res.exit_code == 0 and mixed in " ".join(res.output.split()), res.output
