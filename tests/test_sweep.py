"""``pllzoo sweep``: seeded draws from a space, each trial a bench run, the winner by a selection rule."""

from __future__ import annotations

import ast
import json
import os
import socket
import re
from pathlib import Path

import pandas as pd
import pytest
from click.testing import CliRunner

from pllzoo.bench import parse_overrides, plan
from pllzoo.cli import cli
from pllzoo.data.base import DataOptions
from pllzoo.errors import PLLZooError
from pllzoo.search_space import Dimension, draw_trials, parse_dimension, parse_space
from pllzoo.sweep import plan_sweep

SPACE = ["train.lr=loguniform(1e-2,3e-1)", "train.batch_size=choice(32,64)"]
ARGS = ["sweep", "--methods", "proden", "--subset", "300", "--epochs", "2", "--trials", "3", "--device", "cpu",
        *[a for s in SPACE for a in ("--space", s)]]


def test_values_at_quantiles_by_hand():
    log = parse_dimension("train.lr=loguniform(1e-3,1e-1)")
    assert float(log.value(0.0)) == pytest.approx(1e-3) and float(log.value(0.5)) == pytest.approx(1e-2)
    uni = parse_dimension("loss.eta=uniform(0.5,1)")
    assert float(uni.value(0.25)) == 0.625
    ints = parse_dimension("train.epochs=randint(1,3)")
    assert [ints.value(u) for u in (0.0, 0.33, 0.34, 0.67, 0.999)] == ["1", "1", "2", "3", "3"]
    pick = parse_dimension("train.batch_size=choice(64, 128,256)")
    assert pick.args == ("64", "128", "256") and [pick.value(u) for u in (0.0, 0.5, 0.9)] == ["64", "128", "256"]
    assert parse_dimension("proden:train.lr=uniform(0.1,0.2)").key == "proden:train.lr"  # scoped like --hp


def test_draws_are_seeded_per_trial_and_key():
    space = parse_space(["train.lr=loguniform(1e-3,1e-1)", "train.batch_size=choice(64,128,256)"])
    a, b = draw_trials(space, 5, seed=0), draw_trials(space, 5, seed=0)
    assert a == b and draw_trials(space, 5, seed=1) != a
    assert draw_trials(space, 3, seed=0) == a[:3]  # more trials keep the drawn ones
    more = draw_trials([*space, parse_dimension("loss.eta=uniform(0,1)")], 5, seed=0)
    assert [{k: t[k] for k in a[0]} for t in more] == a  # a new dimension changes no other value
    assert all(1e-3 <= float(t["train.lr"]) < 1e-1 and t["train.batch_size"] in {"64", "128", "256"} for t in a)
    assert len({t["train.lr"] for t in a}) == 5
    assert all(float(repr(float(t["train.lr"]))) == float(t["train.lr"]) for t in a)  # the text is the float


@pytest.mark.parametrize("spec, message", [
    ("train.lr", "write key=distribution(args)"),
    ("train.lr=0.1", "must be a distribution"),
    ("train.lr=normal(0,1)", "unknown distribution 'normal'; valid: uniform, loguniform, randint, choice"),
    ("train.lr=uniform(1)", "uniform takes two bounds"),
    ("train.lr=uniform(0.2,0.1)", "low must be < high"),
    ("train.lr=uniform(a,b)", "bounds must be numbers"),
    ("train.lr=uniform(0,inf)", "must be finite"),
    ("train.lr=loguniform(0,1)", "loguniform needs 0 < low"),
    ("train.epochs=randint(1,2.5)", "bounds must be integers"),
    ("train.batch_size=choice()", "choice needs one or more non-empty values"),
    ("train.batch_size=choice(64,64)", "lists a value twice"),
])
def test_bad_space_specs_are_one_line_errors(spec, message, tmp_path: Path):
    with pytest.raises(PLLZooError, match=message.replace("(", r"\(").replace(")", r"\)")):
        parse_dimension(spec)
    res = CliRunner().invoke(cli, ["sweep", "--methods", "proden", "--space", spec, "--out", str(tmp_path / "o")])
    lines = [line for line in res.output.splitlines() if line.startswith("Error:")]
    assert res.exit_code == 1 and len(lines) == 1 and "Traceback" not in res.output, res.output
    assert spec in lines[0] and message in lines[0]
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("extra, code, message", [
    (["--space", "train.lr=uniform(0.1,0.2)", "--space", "train.lr=uniform(0.2,0.3)"], 1, "given twice"),
    (["--space", "train.momentum=uniform(0.5,1)"], 1,
     "--space train.momentum=uniform(0.5,1.0): bad value for train.momentum: 1.0; must be in [0, 1)"),
    (["--space", "loss.eta=uniform(0.5,1)"], 2, "unknown hyper-parameter 'loss.eta'; valid: label_update.mask"),
    (["--space", "train.batch_size=uniform(32,64)"], 1, "bad value for train.batch_size"),
    (["--space", "train.lr=uniform(0.1,0.2)", "--hp", "train.lr=0.1"], 1, "both fixed by --hp train.lr and searched"),
    # an outside review: said "--epochs 2 and --hp train.epochs=1 disagree", naming an --hp never given
    (["--space", "train.epochs=randint(1,3)", "--epochs", "2"], 1, "train.epochs is both fixed by --epochs 2 and "
     "searched by --space"),
    (["--space", "train.lr=uniform(0.1,0.2)", "--holdout", "0"], 1, "give --holdout > 0"),
    (["--space", "train.lr=uniform(0.1,0.2)", "--trials", "0"], 2, "'--trials': 0 is not in the range 1<=x<=1000"),
    # a typo: every trial is planned before any trains, and 100000000 of them filled the memory (outside review)
    (["--space", "train.lr=uniform(0.1,0.2)", "--trials", "100000000"], 2, "is not in the range 1<=x<=1000"),
    ([], 1, "no --space given"),
])
def test_spaces_the_fields_refuse_are_one_line_errors_before_anything_runs(extra, code, message, tmp_path: Path):
    out = tmp_path / "o"
    res = CliRunner().invoke(cli, ["sweep", "--methods", "proden", "--subset", "50", *extra, "--out", str(out)])
    lines = [line for line in res.output.splitlines() if line.startswith("Error:")]
    assert res.exit_code == code and len(lines) == 1 and "Traceback" not in res.output, res.output
    assert message in lines[0]
    assert not (out / "trials").exists()


def test_a_trial_is_the_bench_run_of_its_overrides(registry):
    options = DataOptions(holdout=0.1, subset=300)
    space = parse_space(SPACE)
    trials = plan_sweep(registry, ["proden"], "synthetic-lt", [1], options, space, 3, 0, epochs=2, device="cpu")
    again = plan_sweep(registry, ["proden"], "synthetic-lt", [1], options, space, 3, 0, epochs=2, device="cpu")
    assert [t.overrides for t in trials] == [t.overrides for t in again] == draw_trials(space, 3, 0)
    assert [p.run_id for t in trials for p in t.plans] == [p.run_id for t in again for p in t.plans]
    for t in trials:
        hp = parse_overrides([f"{k}={v}" for k, v in t.overrides.items()])
        (bench_plan,) = plan(registry, ["proden"], "synthetic-lt", [1], options, epochs=2, hp=hp, device="cpu")
        assert bench_plan.run_id == t.plans[0].run_id
        assert bench_plan.train.lr == float(t.overrides["train.lr"])
    assert len({t.plans[0].run_id for t in trials}) == 3


@pytest.fixture(scope="module")
def swept(tmp_path_factory) -> tuple[Path, str]:
    out = tmp_path_factory.mktemp("sweep") / "out"
    res = CliRunner().invoke(cli, [*ARGS, "--out", str(out)])
    assert res.exit_code == 0, res.output
    return out, res.output


def _best_epoch(log: Path, field: str) -> dict:
    recs = [json.loads(line) for line in log.read_text().splitlines()]
    return max(recs, key=lambda r: r[field])  # the earliest of equal scores (Python max, as PLENCH)


def test_the_sweep_selects_the_argmax_trial_of_the_logs(swept):
    out, output = swept
    manifest = json.loads((out / "sweep.json").read_text())
    assert [t["overrides"] for t in manifest["trials"]] == draw_trials(parse_space(SPACE), 3, 0)
    best = {}
    for t in manifest["trials"]:
        (run,) = t["runs"]
        run_dir = out / "trials" / f"{t['trial']:03d}" / "runs" / run
        config = json.loads((run_dir / "config.json").read_text())
        assert config["train"]["lr"] == float(t["overrides"]["train.lr"])
        assert config["train"]["batch_size"] == int(t["overrides"]["train.batch_size"])
        best[t["trial"]] = _best_epoch(run_dir / "log.jsonl", "val_approx")
    top = max(r["val_approx"] for r in best.values())
    winner = max(k for k, r in best.items() if r["val_approx"] == top)  # ties: the later trial, as PLENCH
    table = pd.read_csv(out / "sweep.csv")
    assert list(table["trial"]) == [0, 1, 2] and table["winner"].sum() == 1
    row = table[table["winner"]].iloc[0]
    assert row["trial"] == winner and row["epoch"] == best[winner]["epoch"]
    assert row["score"] == pytest.approx(top, abs=1e-4) and row["acc_all"] == pytest.approx(best[winner]["acc_all"],
                                                                                            abs=1e-4)
    for k, r in best.items():
        assert table.loc[table["trial"] == k, "score"].iloc[0] == pytest.approx(r["val_approx"], abs=1e-4)
    assert f"winner proden seed 1: trial {winner} (" in output
    assert f"test accuracy {best[winner]['acc_all']:.2f} (epoch {best[winner]['epoch']})" in output


def test_rerunning_the_sweep_trains_nothing_and_other_rules_reuse_the_trials(swept):
    out, output = swept
    logs = sorted(out.glob("trials/*/runs/*/log.jsonl"))
    stamps = [p.stat().st_mtime_ns for p in logs]
    res = CliRunner().invoke(cli, [*ARGS, "--out", str(out)])
    assert res.exit_code == 0, res.output
    assert res.output.count("proden seed 1 reused") == 3 and "started" not in res.output
    assert [p.stat().st_mtime_ns for p in logs] == stamps
    oracle = CliRunner().invoke(cli, [*ARGS, "--select", "oracle", "--out", str(out)])
    assert oracle.exit_code == 0 and "started" not in oracle.output
    assert "ORACLE winner proden seed 1" in oracle.output and "(ORACLE)" in oracle.output
    accs = {k: max(json.loads(x)["acc_all"] for x in log.read_text().splitlines())
            for k, log in enumerate(logs)}
    top = max(accs.values())
    assert f"trial {max(k for k, a in accs.items() if a == top)} (" in oracle.output.split("ORACLE winner")[1]
    last = CliRunner().invoke(cli, [*ARGS, "--select", "last", "--out", str(out)])
    assert last.exit_code == 0 and "winner proden seed 1" in last.output


def test_a_different_sweep_into_the_same_out_is_refused(swept):
    out, _ = swept
    res = CliRunner().invoke(cli, [*ARGS, "--draw-seed", "7", "--out", str(out)])
    lines = [line for line in res.output.splitlines() if line.startswith("Error:")]
    assert res.exit_code == 1 and len(lines) == 1 and "holds another sweep (draw_seed: 0 there, 7 now)" in lines[0]


def _damaged_copy(swept, tmp_path: Path, damage) -> Path:
    import shutil

    out = Path(shutil.copytree(swept[0], tmp_path / "out"))
    damage(out)
    return out


def _manifest(out: Path, value) -> None:
    path = out / "sweep.json"
    before = json.loads(path.read_text())
    path.write_text(json.dumps(value(before)))


@pytest.mark.parametrize("damage", [
    lambda out: _manifest(out, lambda m: []),
    lambda out: _manifest(out, lambda m: {**m, "trials": "oops"}),
    lambda out: _manifest(out, lambda m: {**m, "trials": [{"no": "trial"}]}),
    lambda out: (out / "sweep.json").write_text("{not json"),
], ids=["a list", "trials a string", "a trial without its index", "not json"])
def test_a_damaged_manifest_is_one_line(swept, tmp_path, damage):
    out = _damaged_copy(swept, tmp_path, damage)
    res = CliRunner().invoke(cli, [*ARGS, "--out", str(out)])
    assert res.exit_code == 1 and "Traceback" not in res.output
    assert res.output.strip().splitlines()[-1] == (
        f"Error: {out / 'sweep.json'} is not a sweep manifest (damaged, or another program's); pick another --out; if "
        "--out holds this same sweep, move sweep.json away and rerun: the sweep writes it again and reuses the finished "
        "runs of its trials")
    (out / "sweep.json").unlink()  # as the line says: the same sweep again, nothing retrained
    before = {p: p.stat().st_mtime_ns for p in out.glob("trials/*/runs/*/log.jsonl")}
    res = CliRunner().invoke(cli, [*ARGS, "--out", str(out)])
    assert res.exit_code == 0, res.output
    assert before and {p: p.stat().st_mtime_ns for p in out.glob("trials/*/runs/*/log.jsonl")} == before
    assert json.loads((out / "sweep.json").read_text())["trials"]


def test_a_trial_folder_that_cannot_be_written_is_one_line(swept, tmp_path):
    import shutil

    def block(out: Path) -> None:
        trial = next((out / "trials").iterdir())
        shutil.rmtree(trial / "runs")
        (trial / "runs").write_text("a file where the runs go")

    out = _damaged_copy(swept, tmp_path, block)
    res = CliRunner().invoke(cli, [*ARGS, "--out", str(out)])
    assert res.exit_code == 1 and "Traceback" not in res.output
    last = res.output.strip().splitlines()[-1]
    assert last.startswith(f"Error: cannot write the sweep under --out {out}: File exists"), last


def _top_level_imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    names = set()
    for node in tree.body:
        if isinstance(node, ast.Import):
            names |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            names.add(node.module)
    return names


def test_the_command_file_imports_torch_and_pandas_inside_the_command_only():
    root = Path(__file__).resolve().parents[1] / "pllzoo"
    assert _top_level_imports(root / "cli" / "sweep.py") <= {
        "__future__", "pathlib", "shlex", "click", "pllzoo.atomic", "pllzoo.cli", "pllzoo.cli.bench", "pllzoo.cli.options",
        "pllzoo.errors", "pllzoo.model_selection"}
    assert not {"torch", "pandas"} & _top_level_imports(root / "model_selection.py")


def test_dimension_text_round_trips():
    assert str(parse_dimension("train.lr=loguniform(1e-3, 1e-1)")) == "train.lr=loguniform(0.001,0.1)"
    assert Dimension("k", "choice", ("a", "b")).support() == ("a", "b")


def _trial_records(with_val: bool = True) -> pd.DataFrame:
    rows = []
    for trial, epochs in enumerate([[(50, 30), (70, 40)], [(70, 60), (60, 65)], [(40, 90), (45, 20)]]):
        rows += [dict(trial=trial, method="proden", seed=1, run=f"r{trial}", final_stage=True, epoch=e + 1,
                      val_approx=float(aa), acc_all=float(acc)) for e, (aa, acc) in enumerate(epochs)]
    df = pd.DataFrame(rows)
    return df if with_val else df.drop(columns="val_approx")


@pytest.mark.parametrize("rule, trial, epoch, score, acc", [
    ("approx", 1, 1, 70.0, 60.0),  # trials 0 and 1 tie at 70: the later trial (PLENCH)
    ("last", 0, 2, 70.0, 40.0),  # last epochs: 70, 60, 45
    ("oracle", 2, 1, 90.0, 90.0),  # by test accuracy: an upper bound
])
def test_trial_selection_by_hand(rule, trial, epoch, score, acc):
    from pllzoo.trial_selection import score_trials, winners

    (best,) = winners(score_trials(_trial_records(), rule)).itertuples()
    assert (best.trial, best.epoch, best.score, best.acc_all) == (trial, epoch, score, acc)


def test_ranking_last_epochs_needs_held_out_rows():
    from pllzoo.trial_selection import score_trials

    with pytest.raises(PLLZooError, match="ranks trials by 'val_approx' of the last epoch.*--holdout 0.1"):
        score_trials(_trial_records(with_val=False), "last")


def test_a_winner_names_only_the_overrides_that_reached_its_run(tmp_path: Path):
    """A key of one method's components (RECORDS' momentum) does not reach another method (HTC has none):
    HTC's winner and rows say so, not the trial's whole draw."""
    out = tmp_path / "o"
    res = CliRunner().invoke(cli, ["sweep", "--methods", "htc,corr-records", "--space",
                                   "estimator.momentum=uniform(0.1,0.9)", "--trials", "1", "--subset", "300",
                                   "--epochs", "1", "--batch-size", "64", "--device", "cpu", "--out", str(out)])
    assert res.exit_code == 0, res.output
    assert re.search(r"^winner htc seed 1: trial 0 \(defaults\)", res.output, re.M), res.output
    assert re.search(r"^winner corr-records seed 1: trial 0 \(estimator\.momentum=0\.\d+\)", res.output, re.M)
    rows = pd.read_csv(out / "sweep.csv").set_index("method")
    assert rows.loc["htc", "overrides"] == "defaults" and rows.loc["corr-records", "overrides"].startswith(
        "estimator.momentum=")


@pytest.mark.parametrize("started", ["script", "python -m"])
@pytest.mark.parametrize("stop, code", [("signal", 130), ("ctrl-c", 130)])
def test_a_stopped_sweep_exits_with_the_stop_status_and_says_how_to_continue(stop, code, started, tmp_path,
                                                                            monkeypatch):
    """A stop is no error: the stop's exit status and the command that continues (the same: finished runs are
    reused, unfinished ones resume), not "Error:" and exit 1; started as `python -m pllzoo`, it says so (an outside
    review: it said `pllzoo sweep`, a script that may not be on PATH, as bench's once did)."""
    import shlex
    import sys

    from pllzoo import checkpoint
    from pllzoo import sweep as sw

    def stopped(*args, **kwargs):
        raise checkpoint.signal_stop("after epoch 3/9 of stage 'train'", 2) if stop == "signal" else KeyboardInterrupt

    monkeypatch.setattr(sw, "run_sweep", stopped)
    if started == "python -m":
        monkeypatch.setattr(sys, "argv", [str(Path("site") / "pllzoo" / "__main__.py"), "sweep"])
    head = [Path(sys.executable).name, "-m", "pllzoo"] if started == "python -m" else ["pllzoo"]
    args = ["sweep", "--methods", "proden", "--trials", "2", "--space", "train.lr=uniform(0.01,0.1)", "--subset", "200",
            "--batch-size", "50", "--epochs", "1", "--out", str(tmp_path / "sw")]
    res = CliRunner().invoke(cli, args)
    assert res.exit_code == code, res.output
    last = res.output.strip().splitlines()[-1]
    assert "Error" not in res.output and "the sweep continues where it stopped with the same command: " in last
    assert shlex.split(last.split("same command: ")[1]) == [*head, *args]


def test_the_sweep_shows_the_plan_the_estimate_and_each_trials_progress_as_bench_does(swept):
    """Issue 16 items 1 and 6: each trial is a bench run, so the sweep has bench's cost guard before anything
    trains (it used to print one "started" line, then nothing for hours) and its progress, each run named by its
    trial."""
    _, output = swept
    lines = output.splitlines()
    head = next(i for i, line in enumerate(lines) if line.startswith("plan: "))
    assert lines[head] == "plan: 3 trial(s) x 1 method(s) x 1 seed(s) = 3 run(s) on cpu"
    draws = draw_trials(parse_space(SPACE), 3, 0)
    for k, draw in enumerate(draws):
        label = " ".join(f"{key}={value}" for key, value in draw.items())
        assert lines[head + 1 + k].startswith(f"  trial {k} ({label}): proden  seeds 1  model mlp  train 2 epochs, ")
        assert f"trial {k} proden seed 1 [train 1/1] epoch 2/2 (run 2/2) loss " in output
    assert lines[head + 4].startswith("estimate: ") and "timing of the first steps of proden seed 1" in lines[head + 4]
    assert output.index("estimate: ") < output.index("trial 0 proden seed 1 started")


def test_a_dry_run_sweep_writes_nothing_and_threads_reach_the_runs(tmp_path):
    args = ["sweep", "--methods", "proden", "--trials", "2", "--space", "train.lr=uniform(0.01,0.1)", "--subset",
            "200", "--batch-size", "50", "--epochs", "1", "--threads", "1", "--out", str(tmp_path / "sw")]
    res = CliRunner().invoke(cli, [*args, "--dry-run"])
    assert res.exit_code == 0, res.output
    assert "plan: 2 trial(s) x 1 method(s)" in res.output and "dry run: nothing trained or written" in res.output
    assert not (tmp_path / "sw").exists()
    res = CliRunner().invoke(cli, args)
    assert res.exit_code == 0, res.output
    envs = [json.loads(p.read_text()) for p in (tmp_path / "sw").glob("trials/*/runs/*/env.json")]
    assert len(envs) == 2 and {e["torch_threads"] for e in envs} == {1}


def test_a_sweep_under_torchrun_is_refused_with_one_line(tmp_path, monkeypatch):
    """An outside review: under torchrun each process ran the whole sweep into one --out (one of them then
    hit the other's lock and ended with a launcher traceback)."""
    monkeypatch.setenv("WORLD_SIZE", "2")
    res = CliRunner().invoke(cli, ["sweep", "--methods", "proden", "--space", "train.lr=loguniform(1e-3,1e-1)",
                                   "--out", str(tmp_path / "s")])
    assert res.exit_code == 1 and "Traceback" not in res.output
    assert "pllzoo sweep runs in one process; under torchrun (WORLD_SIZE=2)" in res.output
    assert not (tmp_path / "s").exists()


def test_a_run_held_by_another_sweep_leaves_its_trial_and_the_others_train(tmp_path):
    """Two copies of one sweep on one --out (an outside review): the second stopped at the first trial whose run
    the other held; now it trains every trial it can and names the held ones at the end (a clean stop, 75)."""
    import os

    from pllzoo import checkpoint
    from pllzoo.registry import get_registry
    from pllzoo.sweep import run_sweep, trial_dir

    reg = get_registry()
    trials = plan_sweep(reg, ["proden"], "synthetic-lt", [1], DataOptions(subset=200, holdout=0.1),
                        parse_space(["train.lr=uniform(0.01,0.1)"]), 3, 0, epochs=1, batch_size=50, device="cpu")
    (held,) = trials[1].plans
    lock = trial_dir(tmp_path, 1) / "runs" / f"{held.run_id}.lock"
    lock.parent.mkdir(parents=True)
    lock.write_text(f"{os.getppid()}\n")  # a live process that is not this one
    with pytest.raises(checkpoint.Skipped, match=r"^trial\(s\) 1 left runs in use by another sweep or bench") as info:
        run_sweep(reg, trials, tmp_path, threads=1)
    assert info.value.exit_code == checkpoint.TIME_LIMIT_EXIT
    for t in (0, 2):  # the trials after the held one trained too
        (run,) = trials[t].plans
        assert (trial_dir(tmp_path, t) / "runs" / run.run_id / "done").exists()
    assert not (trial_dir(tmp_path, 1) / "runs" / held.run_id).exists()


def test_a_scoped_space_key_labels_the_trials_of_its_method(tmp_path):
    """An outside review: `--space "proden:train.lr=..."` labelled every trial "defaults" (sweep.csv and the
    winner line lost the value); a key scoped to another method still does not reach a run."""
    from pllzoo.registry import get_registry

    reg = get_registry()
    trials = plan_sweep(reg, ["proden", "cc"], "synthetic-lt", [1], DataOptions(subset=200, holdout=0.1),
                        parse_space(["proden:train.lr=uniform(0.01,0.1)"]), 1, 0, epochs=1, batch_size=50,
                        device="cpu")
    (t,) = trials
    proden, cc = t.plans
    (key,) = t.overrides
    assert t.label_of(proden) == f"{key}={t.overrides[key]}" and t.label_of(cc) == "defaults"


def test_trials_that_train_the_same_run_keep_their_rows_and_the_later_tie(tmp_path):
    """An outside review: two trials of equal draws (or a method a scoped key leaves alone) share a run id, and the
    selection pooled them: rows went missing, trial 0 won an exact tie, the title counted 1 trial."""
    out = tmp_path / "out"
    res = CliRunner().invoke(cli, ["sweep", "--methods", "proden", "--trials", "3", "--space",
                                   "train.batch_size=choice(64)", "--epochs", "1", "--subset", "300", "--holdout",
                                   "0.1", "--threads", "1", "--out", str(out)])
    assert res.exit_code == 0, res.output
    rows = pd.read_csv(out / "sweep.csv")
    assert list(rows["trial"]) == [0, 1, 2] and rows["run"].nunique() == 1
    assert list(rows["winner"]) == [False, False, True]  # identical scores: the later trial
    assert "Sweep: 3 trial(s)" in (out / "sweep.md").read_text() and "winner proden seed 1: trial 2" in res.output
    # a second review: the run trained three times; now once, its folder copied into the other trials
    assert "2 reused (finished under --out, or the same run as another trial's: trained once)" in res.output
    assert "trial 0 proden seed 1 started" in res.output and "trial 1 proden seed 1 reused" in res.output \
        and "trial 2 proden seed 1 reused" in res.output
    logs = {(out / "trials" / f"00{k}" / "runs" / rows["run"][0] / "log.jsonl").read_text() for k in range(3)}
    assert len(logs) == 1


def test_a_method_no_key_reaches_trains_once_and_each_trial_is_labelled_per_method(tmp_path):
    """A review: with a key scoped to proden, cc trained the same run in every trial, and the plan labelled the cc
    line of each trial with proden's value."""
    out = tmp_path / "out"
    res = CliRunner().invoke(cli, ["sweep", "--methods", "proden,cc", "--trials", "2", "--space",
                                   "proden:train.lr=uniform(0.01,0.1)", "--epochs", "1", "--subset", "300",
                                   "--holdout", "0.1", "--threads", "1", "--out", str(out)])
    assert res.exit_code == 0, res.output
    assert "trial 0 cc seed 1 started" in res.output and "trial 1 cc seed 1 reused" in res.output
    assert "trial 1 proden seed 1 started" in res.output
    said = " ".join(res.output.split())
    assert "trial 0 (defaults): cc" in said and "trial 0 (proden:train.lr=" in said
    rows = pd.read_csv(out / "sweep.csv")
    assert rows[rows["method"] == "cc"]["run"].nunique() == 1 and len(rows) == 4


@pytest.mark.parametrize("args, says", [
    (["--space", "train.lr=uniform(0.3,0.4)", "--hp", "proden:train.lr=0.1"],
     "train.lr is both fixed by --hp proden:train.lr and searched by --space; keep one"),
    (["--space", "proden:train.lr=uniform(0.3,0.4)", "--space", "train.lr=uniform(0.1,0.2)"],
     "--space searches train.lr and proden:train.lr, one field for a method; keep one"),
])
def test_a_scoped_key_is_the_same_field_as_the_unscoped_one(tmp_path, args, says):
    """An outside review: a scoped --hp of a searched key won over every draw, silently."""
    res = CliRunner().invoke(cli, ["sweep", "--methods", "proden", "--trials", "2", "--epochs", "1", "--subset",
                                   "300", "--holdout", "0.1", "--threads", "1", "--dry-run", "--out",
                                   str(tmp_path / "o"), *args])
    assert res.exit_code == 1 and says in " ".join(res.output.split()), res.output


def test_a_space_file_with_a_byte_order_mark_or_no_spec(tmp_path):
    from pllzoo.errors import PLLZooError
    from pllzoo.search_space import read_space_file

    path = tmp_path / "space.txt"
    path.write_bytes(b"\xef\xbb\xbftrain.lr=uniform(0.01,0.1)\n")
    assert read_space_file(path) == ["train.lr=uniform(0.01,0.1)"]
    path.write_text("# nothing yet\n\n")
    with pytest.raises(PLLZooError, match="holds no spec"):
        read_space_file(path)


def test_the_same_space_in_another_order_is_the_same_sweep(tmp_path):
    """An outside review: a rerun with its --space options reordered was refused as "another sweep", although each
    dimension draws by its own key."""
    out = tmp_path / "out"
    base = ["sweep", "--methods", "proden", "--trials", "2", "--epochs", "1", "--subset", "300", "--holdout", "0.1",
            "--threads", "1", "--out", str(out)]
    a, b = ["--space", "train.lr=uniform(0.01,0.1)"], ["--space", "train.batch_size=choice(32,64)"]
    assert CliRunner().invoke(cli, [*base, *a, *b]).exit_code == 0
    res = CliRunner().invoke(cli, [*base, *b, *a])
    assert res.exit_code == 0 and "another sweep" not in res.output, res.output


def test_a_signal_in_a_trials_last_epoch_stops_the_sweep_before_the_next_trial(tmp_path):
    """An outside review: a Ctrl-C in a trial's last epoch said "stopping" and the sweep trained every other trial
    (each trial's bench forgot the request), exit 0."""
    import signal

    from pllzoo import checkpoint
    from pllzoo.registry import get_registry
    from pllzoo.sweep import run_sweep, trial_dir

    reg = get_registry()
    trials = plan_sweep(reg, ["proden"], "synthetic-lt", [1], DataOptions(subset=200, holdout=0.1),
                        parse_space(["train.lr=uniform(0.01,0.1)"]), 3, 0, epochs=2, batch_size=50, device="cpu")

    def epoch(t, p, record):
        if record["epoch"] == 2:  # the last epoch of trial 0's only run
            checkpoint.request_stop(signal.SIGINT)

    with pytest.raises(checkpoint.Stopped, match=r"^stopped by SIGINT before trial 1$") as info:
        run_sweep(reg, trials, tmp_path, threads=1, on_epoch=epoch)
    assert info.value.exit_code == 128 + signal.SIGINT
    assert (trial_dir(tmp_path, 0) / "runs" / trials[0].plans[0].run_id / "done").exists()
    assert not (trial_dir(tmp_path, 1) / "runs").exists()
    assert run_sweep(reg, trials, tmp_path, threads=1) == {}  # the same command continues where it stopped


def test_a_shared_run_that_failed_is_not_trained_again_by_later_trials(tmp_path):
    """A review: cc, which no key of a proden-scoped space reaches, failed in trial 0 and trained (and failed)
    again in every later trial."""
    out = tmp_path / "out"
    res = CliRunner().invoke(cli, ["sweep", "--methods", "proden,cc", "--trials", "2", "--space",
                                   "proden:train.lr=uniform(0.01,0.1)", "--hp", "cc:train.lr=1e30", "--epochs", "1",
                                   "--subset", "300", "--holdout", "0.1", "--threads", "1", "--out", str(out)])
    assert "Traceback" not in res.output, res.output
    assert "trial 0 cc seed 1 started" in res.output and "trial 1 cc seed 1 started" not in res.output, res.output
    assert "trial 1 proden seed 1 started" in res.output


def test_a_backbone_value_of_the_space_is_checked_before_anything_is_written(tmp_path):
    """A review: `model.hidden=choice(16,abc)` trained when no trial drew `abc`, and named no spec when one did."""
    said = {}
    for draw in ("0", "2"):  # draw seed 0's trial draws abc; 2's draws 16, and abc is checked all the same
        out = tmp_path / draw
        res = CliRunner().invoke(cli, ["sweep", "--methods", "proden", "--trials", "1", "--space",
                                       "model.hidden=choice(16,abc)", "--draw-seed", draw, "--epochs", "1", "--subset",
                                       "300", "--holdout", "0.1", "--threads", "1", "--out", str(out)])
        assert res.exit_code != 0 and "Traceback" not in res.output and not out.exists(), res.output
        said[draw] = " ".join(res.output.split())
    assert "Error: trial 0 (model.hidden=abc): bad value for model.hidden of model 'mlp'" in said["0"]
    assert "Error: --space model.hidden=choice(16,abc): bad value for model.hidden of model 'mlp'" in said["2"]


def test_adopting_a_run_is_one_line_on_failure_and_leaves_nothing_behind(tmp_path, monkeypatch):
    """A review: two sweep copies shared one temporary folder (one deleted the other's copy), and copytree's error
    list reached the user whole, the partial copy left on the full disk."""
    import shutil

    from pllzoo.sweep import Trial, adopt_finished, trial_dir

    run_id = "cc__synthetic-lt__s1-00000000"
    done = trial_dir(tmp_path, 0) / "runs" / run_id
    done.mkdir(parents=True)
    (done / "done").write_text("ok\n")
    (done / "log.jsonl").write_text("{}\n")
    t = Trial(1, {})
    t.plans = [type("P", (), {"run_id": run_id})()]
    runs = trial_dir(tmp_path, 1) / "runs"
    runs.mkdir(parents=True)
    (runs / f"{run_id}.lock").write_text(f"{os.getppid()} {socket.gethostname()}\n")  # another live process holds it
    assert adopt_finished(tmp_path, t) == [] and not (runs / run_id).exists()
    (runs / f"{run_id}.lock").unlink()

    def full(src, dst, **kw):
        Path(dst).mkdir()
        (Path(dst) / "log.jsonl").write_text("partial")
        raise shutil.Error([(str(src), str(dst), "[Errno 28] No space left on device")])

    monkeypatch.setattr(shutil, "copytree", full)
    with pytest.raises(PLLZooError, match=rf"^cannot copy finished run {run_id} from .*000 into trial 1: \[Errno 28\] "
                                          r"No space left on device; free the space or path, then rerun$"):
        adopt_finished(tmp_path, t)
    assert sorted(p.name for p in runs.iterdir()) == []  # no partial copy, no lock
    monkeypatch.undo()
    assert adopt_finished(tmp_path, t) == [run_id] and (runs / run_id / "done").exists()
    assert sorted(p.name for p in runs.iterdir()) == [run_id]


def test_an_adopted_run_shares_its_checkpoint_and_copies_the_rest(tmp_path):
    """An outside review: a 6-trial sweep held 12 checkpoints of 3 runs.  The checkpoint, only ever replaced
    whole, is a hard link; the other files are copies (a later append to one must not reach the other)."""
    from pllzoo.sweep import Trial, adopt_finished, trial_dir

    run_id = "cc__synthetic-lt__s1-00000000"
    done = trial_dir(tmp_path, 0) / "runs" / run_id
    done.mkdir(parents=True)
    for name, text in (("done", "ok\n"), ("log.jsonl", "{}\n"), ("checkpoint.pt", "weights")):
        (done / name).write_text(text)
    t = Trial(1, {})
    t.plans = [type("P", (), {"run_id": run_id})()]
    assert adopt_finished(tmp_path, t) == [run_id]
    copy = trial_dir(tmp_path, 1) / "runs" / run_id
    assert os.path.samefile(copy / "checkpoint.pt", done / "checkpoint.pt")
    assert (copy / "log.jsonl").read_text() == "{}\n" and not os.path.samefile(copy / "log.jsonl", done / "log.jsonl")


def test_an_adopted_run_keeps_its_links_as_links(tmp_path):
    """A linked file in a run another trial adopts stays a link (an outside review: the copy made a linked env.json
    a file of the trial, its outside content and all, which archive then packed): archive refuses it, as it
    refuses the original."""
    from pllzoo.sweep import Trial, adopt_finished, trial_dir

    run_id = "cc__synthetic-lt__s1-00000000"
    done = trial_dir(tmp_path, 0) / "runs" / run_id
    done.mkdir(parents=True)
    (done / "done").write_text("ok\n")
    outside = tmp_path / "outside.json"
    outside.write_text('{"secret": 1}')
    (done / "env.json").symlink_to(outside)
    t = Trial(1, {})
    t.plans = [type("P", (), {"run_id": run_id})()]
    assert adopt_finished(tmp_path, t) == [run_id]
    copy = trial_dir(tmp_path, 1) / "runs" / run_id / "env.json"
    assert copy.is_symlink() and os.path.samefile(copy, outside)


def test_the_claim_of_a_folder_reads_and_writes_sweep_json_under_its_lock(tmp_path, monkeypatch):
    """An outside review: two different sweeps started together into one --out both passed the check before
    either wrote sweep.json, and both trained into it.  The check and the write happen under sweep.json.lock."""
    from pllzoo import sweep

    seen = []
    real = sweep.check_claim

    def check(out, ident):
        lock = tmp_path / "sweep.json.lock"
        seen.append(lock.read_text().split()[0] if lock.exists() else None)
        return real(out, ident)

    monkeypatch.setattr(sweep, "check_claim", check)
    sweep.claim(tmp_path, {"space": ["a"]}, [])
    assert seen == [str(os.getpid())] and not (tmp_path / "sweep.json.lock").exists()
    assert json.loads((tmp_path / "sweep.json").read_text())["space"] == ["a"]
