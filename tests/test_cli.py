"""The CLI through click's CliRunner: bench, plugins, methods, datasets, and bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
import scipy.io
import torch
from click.testing import CliRunner

from pllzoo.cli import cli


@pytest.fixture
def runner(registry):
    return CliRunner()


def _bench(runner, *args):
    return runner.invoke(cli, ["bench", *args], catch_exceptions=False)


def test_bench_birdsong_writes_table_and_files(runner, shared_data, tmp_path):
    out = tmp_path / "out"
    res = _bench(runner, "--methods", "proden,proden+label_update=pllzoo.uniform", "--dataset", "birdsong",
                 "--data-dir", str(shared_data), "--seeds", "1,2", "--epochs", "3", "--out", str(out))
    assert res.exit_code == 0, res.output
    assert "proden+label_update=pllzoo.uniform" in res.output and "Few" in res.output
    df = pd.read_csv(out / "results.csv")
    assert list(df.columns[:8]) == ["method", "dataset", "seed", "epoch", "acc_all", "acc_many", "acc_medium", "acc_few"]
    assert len(df) == 4 and set(df["epoch"]) == {3} and set(df["seed"]) == {1, 2}
    runs = sorted((out / "runs").iterdir())
    assert len(runs) == 4
    for run in runs:
        cfg = json.loads((run / "config.json").read_text())
        env = json.loads((run / "env.json").read_text())
        assert cfg["recipe"]["label_update"] in {"proden.confidence", "pllzoo.uniform"}
        assert "torch" in env["versions"] and "pillow" in env["versions"] and "git_commit" in env
        assert env["cpu"] and env["cpu_capability"] == torch.backends.cpu.get_cpu_capability()  # the CPU's kernels
        assert len((run / "log.jsonl").read_text().splitlines()) == 3 and (run / "done").exists()


def test_resume_reuses_finished_runs(runner, tmp_path):
    out = tmp_path / "out"
    args = ["--methods", "proden", "--dataset", "synthetic-lt", "--epochs", "2", "--out", str(out)]
    assert _bench(runner, *args).exit_code == 0
    first = pd.read_csv(out / "results.csv")
    res = _bench(runner, *args, "--resume")
    assert res.exit_code == 0 and "reused" in res.output
    pd.testing.assert_frame_equal(pd.read_csv(out / "results.csv"), first)


def test_plugins_json_lists_components_and_recipes(runner):
    res = runner.invoke(cli, ["plugins", "--json"])
    assert res.exit_code == 0
    rows = {r["name"]: r for r in json.loads(res.output)}
    assert "proden" in rows["baselines"]["methods"] and rows["baselines"]["version"] == "0.2.0"
    assert "proden.confidence" in rows["baselines"]["components"]["label_update"]
    assert rows["pllzoo.builtin"]["builtin"] and "pllzoo_register_datasets" in rows["pllzoo.builtin"]["hooks"]


def test_plugins_lists_all_eight_methods(runner):
    rows = json.loads(runner.invoke(cli, ["plugins", "--json"]).output)
    methods = {m for r in rows for m in r["methods"]}
    assert {"solar", "proden", "cc", "lws", "mse", "exp", "valen", "pico"} <= methods
    assert all(r["error"] is None for r in rows)


def test_plugins_table_and_methods_and_datasets(runner):
    assert "baselines" in runner.invoke(cli, ["plugins"]).output
    out = runner.invoke(cli, ["methods", "--hparams"]).output
    assert "proden.confidence" in out and "mask" in out
    out = runner.invoke(cli, ["datasets"]).output
    assert all(name in out for name in ["cifar10lt", "cifar100lt-h", "birdsong", "synthetic-lt"])


@pytest.mark.parametrize("args,pattern", [
    (["--methods", "nope"], "unknown method 'nope'; valid: "),
    (["--methods", "proden+selection=x.y"], "unknown selection component 'x.y'; valid: "),
    (["--methods", "proden", "--dataset", "nope"], "unknown dataset 'nope'; valid: "),
    (["--methods", "proden", "--hp", "loss.nope=1"], "unknown hyper-parameter 'loss.nope'; valid: "),
])
def test_unknown_names_exit_2_with_one_line(runner, tmp_path, args, pattern):
    out = tmp_path / "out"
    res = runner.invoke(cli, ["bench", *args, "--out", str(out)])
    assert res.exit_code == 2
    error_lines = [line for line in res.output.splitlines() if line.startswith("Error:")]
    assert len(error_lines) == 1 and pattern in error_lines[0]
    assert "Traceback" not in res.output and not out.exists()


def _bad_mat(tmp_path, kind):
    path = tmp_path / f"{kind}.mat"
    x = [[0.0, 1.0], [1.0, 0.0], [0.5, 0.5]]
    target = [[1, 0, 0], [0, 1, 1]]  # labels x examples
    cand = [[1, 1, 0], [0, 1, 1]]
    if kind == "not_a_mat":
        path.write_text("hello")
    elif kind == "missing_fields":
        scipy.io.savemat(path, {"data": x})
    elif kind == "mismatched":
        scipy.io.savemat(path, {"data": x[:2], "target": target, "partial_target": cand})
    elif kind == "empty_row":
        scipy.io.savemat(path, {"data": x, "target": target, "partial_target": [[1, 0, 0], [0, 1, 0]]})
    elif kind == "nan":
        scipy.io.savemat(path, {"data": [[float("nan"), 1.0], [1, 0], [0, 1]], "target": target,
                                "partial_target": cand})
    elif kind == "out_of_range":
        scipy.io.savemat(path, {"data": x, "target": [[1, 2, 7]], "partial_target": cand})
    return path


@pytest.mark.parametrize("kind,pattern", [
    ("not_a_mat", "not a readable .mat"), ("missing_fields", "missing"), ("mismatched", "rows"),
    ("empty_row", "empty candidate sets"), ("nan", "NaN"), ("out_of_range", "label indices outside"), ("missing_path", "no such file"),
])
def test_bad_input_one_line_error_nothing_written(runner, tmp_path, kind, pattern):
    path = tmp_path / "nowhere.mat" if kind == "missing_path" else _bad_mat(tmp_path, kind)
    out = tmp_path / "out"
    res = runner.invoke(cli, ["bench", "--methods", "proden", "--dataset", str(path), "--out", str(out)])
    assert res.exit_code != 0 and "Traceback" not in res.output
    lines = [line for line in res.output.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("Error:"), res.output
    assert pattern.lower() in lines[0].lower(), lines[0]
    assert not out.exists()


def test_true_label_outside_candidates_is_a_counted_warning(runner, tmp_path):
    path = tmp_path / "w.mat"
    rng = __import__("numpy").random.RandomState(0)
    n, k = 60, 3
    y = rng.randint(0, k, n)
    cand = (rng.rand(k, n) < 0.5).astype(float)
    cand[y, range(n)] = 1
    cand[(y[:4] + 1) % k, range(4)] = 1
    cand[y[:4], range(4)] = 0  # 4 rows lose their true label
    target = __import__("numpy").eye(k)[y].T
    scipy.io.savemat(path, {"data": rng.randn(n, 4), "target": target, "partial_target": cand})
    res = runner.invoke(cli, ["bench", "--methods", "proden", "--dataset", str(path), "--epochs", "1",
                              "--batch-size", "8", "--out", str(tmp_path / "o")])
    assert res.exit_code == 0, res.output
    assert "4" in next(line for line in res.output.splitlines() if line.startswith("Warning:"))


def test_a_stopped_bench_keeps_the_summary_of_runs_finished_before(runner, tmp_path, monkeypatch, request):
    """A stop used to delete summary.csv/md, the record of every finished run under --out (committed study
    tables among them); now they are rebuilt from the finished runs, as results.csv is."""
    import fake_clock
    import torch

    request.addfinalizer(lambda threads=torch.get_num_threads(): torch.set_num_threads(threads))
    out = tmp_path / "out"
    common = ["--dataset", "synthetic-lt", "--subset", "300", "--batch-size", "50", "--out", str(out), "--threads", "1"]
    res = runner.invoke(cli, ["bench", "--methods", "cc", "--epochs", "1", *common])
    assert res.exit_code == 0, res.output
    fake_clock.install(monkeypatch)  # 10 s per epoch
    res = runner.invoke(cli, ["bench", "--methods", "proden", "--epochs", "5", "--time-limit", "0.5", *common])
    assert res.exit_code == 75, res.output
    assert list(pd.read_csv(out / "summary.csv")["method"]) == ["cc"] and "| cc |" in (out / "summary.md").read_text()


def test_a_stopped_overwrite_does_not_offer_a_refused_resume(runner, tmp_path, monkeypatch, request):
    """--overwrite and --resume exclude each other, so the stop line of an --overwrite gives the command itself."""
    import fake_clock
    import torch

    request.addfinalizer(lambda threads=torch.get_num_threads(): torch.set_num_threads(threads))
    args = ["bench", "--methods", "proden", "--dataset", "synthetic-lt", "--subset", "300", "--batch-size", "50",
            "--epochs", "5", "--out", str(tmp_path / "out"), "--threads", "1"]
    assert runner.invoke(cli, args).exit_code == 0
    fake_clock.install(monkeypatch)
    res = runner.invoke(cli, [*args, "--overwrite", "--time-limit", "0.5"])
    assert res.exit_code == 75, res.output
    last = res.output.strip().splitlines()[-1]
    assert "an --overwrite starts each run it retrains over" in last and "--resume" not in last
    import shlex

    assert shlex.split(last.split("rerun it with room for whole runs: ")[1]) == [
        "pllzoo", *args, "--overwrite", "--time-limit", "0.5"]


def test_time_limit_exits_75_with_the_command_that_continues(runner, tmp_path, monkeypatch, request):
    import shlex

    import fake_clock
    import torch

    request.addfinalizer(lambda threads=torch.get_num_threads(): torch.set_num_threads(threads))  # --threads 1
    fake_clock.install(monkeypatch)  # 10 s per epoch, 1 s per checkpoint
    out = tmp_path / "out"
    args = ["--methods", "proden", "--dataset", "synthetic-lt", "--epochs", "5", "--out", str(out),
            "--time-limit", "0.5", "--threads", "1"]
    res = runner.invoke(cli, ["bench", *args])
    assert res.exit_code == 75, res.output
    last = res.output.strip().splitlines()[-1]
    assert last.startswith("proden seed 1: stopped after epoch 2/5 of stage 'train' to stay within the time limit")
    assert "Traceback" not in res.output and "Error" not in res.output
    command = last.split("continue with: ")[1]
    assert shlex.split(command) == ["pllzoo", "bench", *args, "--resume"]
    assert pd.read_csv(out / "results.csv").empty and pd.read_csv(out / "summary.csv").empty  # no finished run
    columns = {name: list(pd.read_csv(out / name).columns) for name in ("results.csv", "summary.csv")}
    res = runner.invoke(cli, shlex.split(command)[1:])
    assert res.exit_code == 75 and "after epoch 4/5" in res.output.splitlines()[-1]
    res = runner.invoke(cli, shlex.split(command)[1:])
    assert res.exit_code == 0, res.output
    assert list(pd.read_csv(out / "results.csv")["epoch"]) == [5] and (out / "summary.csv").exists()
    # an empty summary has the columns of one with runs (an outside review: files concatenated across studies
    # came out ragged); results.csv's leading and last columns too
    assert columns["summary.csv"] == list(pd.read_csv(out / "summary.csv").columns)
    full = list(pd.read_csv(out / "results.csv").columns)
    assert columns["results.csv"] == [*full[:8], "run", *full[-3:]] and "run" in full
    env = json.loads(next((out / "runs").glob("*/env.json")).read_text())
    assert env["torch_threads"] == 1


def test_interrupt_exits_130_with_one_line(runner, tmp_path, monkeypatch):
    from pllzoo import bench as bench_lib

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(bench_lib, "execute", interrupted)
    res = runner.invoke(cli, ["bench", "--methods", "proden", "--out", str(tmp_path / "o")])
    assert res.exit_code == 130
    lines = [line for line in res.output.splitlines() if line.strip()]
    assert lines[-1].startswith("interrupted; each unfinished run continues from its last checkpoint; continue with: "
                                "pllzoo bench --methods proden --out ")
    assert lines[-1].endswith(" --resume") and "Traceback" not in res.output


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="no /dev/full on this system")
@pytest.mark.parametrize("args", [["methods"], ["datasets"], ["plugins", "--json"]])
def test_a_full_disk_under_stdout_is_one_line_not_a_traceback(args):
    """`pllzoo methods > /dev/full` used to end in an OSError traceback."""
    import subprocess
    import sys

    with open("/dev/full", "w") as full:
        res = subprocess.run([sys.executable, "-m", "pllzoo", *args], stdout=full, stderr=subprocess.PIPE, text=True,
                             timeout=120)
    assert res.returncode == 1 and "Traceback" not in res.stderr, res.stderr
    assert res.stderr.strip().splitlines() == ["Error: cannot write: No space left on device (standard output?)"]


def test_an_os_error_no_command_expected_is_one_line(runner, tmp_path, monkeypatch):
    """e.g. `pllzoo archive` on a read-only results folder (it used to be a traceback)."""
    import errno

    from pllzoo import archive as arc

    def read_only(*args, **kwargs):
        raise OSError(errno.EROFS, "Read-only file system", str(tmp_path / "runs.jsonl.xz.tmp"))

    monkeypatch.setattr(arc, "write", read_only)
    res = runner.invoke(cli, ["archive", str(tmp_path)])
    assert res.exit_code == 1 and "Traceback" not in res.output
    assert res.output.strip() == f"Error: cannot write: Read-only file system ({tmp_path / 'runs.jsonl.xz.tmp'})"
