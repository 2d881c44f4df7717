"""``execute(time_limit=...)``: stop before the limit with a checkpoint; resumed parts equal one run.

Time comes from :mod:`fake_clock` (10 s per epoch, 1 s per checkpoint unless told), so every stop
decision is the same on any machine.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
import torch

import fake_clock
from pllzoo import bench
from pllzoo.checkpoint import TIME_LIMIT_EXIT, Stopped
from pllzoo.data.base import DataOptions
from pllzoo.errors import PLLZooError
from pllzoo.results import load, read_jsonl


def _plans(registry, methods, epochs):
    return bench.plan(registry, methods, "synthetic-lt", [1], DataOptions(), epochs=epochs, device="cpu")


def _records(run_dir):
    return [{k: v for k, v in r.items() if k != "wall_s"} for r in read_jsonl(run_dir / "log.jsonl")]


def _weights(run_dir):
    return torch.load(run_dir / "checkpoint.pt", weights_only=False)["model"]


def _assert_same_runs(out_a, out_b, plans):
    for p in plans:
        a, b = out_a / "runs" / p.run_id, out_b / "runs" / p.run_id
        assert (a / "done").exists() and (b / "done").exists()
        assert _records(a) == _records(b)
        wa, wb = _weights(a), _weights(b)
        assert wa.keys() == wb.keys() and all(torch.equal(wa[k], wb[k]) for k in wa)
    pd.testing.assert_frame_equal(pd.read_csv(out_a / "results.csv").drop(columns="wall_s"),
                                  pd.read_csv(out_b / "results.csv").drop(columns="wall_s"))


def test_three_time_boxed_parts_equal_one_run(registry, tmp_path, monkeypatch):
    clock = fake_clock.install(monkeypatch)
    plans = _plans(registry, ["proden"], epochs=9)
    bench.execute(registry, plans, tmp_path / "full")
    clock.saves.clear()
    out, run = tmp_path / "parts", tmp_path / "parts" / "runs" / plans[0].run_id
    stops = []
    for part in range(3):
        try:
            bench.execute(registry, plans, out, resume=part > 0, time_limit=35 / 60)
        except Stopped as exc:
            stops.append(exc)
            assert not (run / "done").exists() and load(out).empty  # nothing claims to be finished
            assert pd.read_csv(out / "results.csv").empty
            assert len(read_jsonl(run / "log.jsonl")) == 3 * (part + 1)
    assert [e.exit_code for e in stops] == [TIME_LIMIT_EXIT] * 2
    assert "proden seed 1: stopped after epoch 3/9 of stage 'train' to stay within the time limit" in str(stops[0])
    # each part: 3 epochs of 10 s fit in 35 s with a checkpoint, a 4th would not; the last part ends the stage
    assert clock.saves == [(0, 2), (0, 5), (0, 8)]
    _assert_same_runs(out, tmp_path / "full", plans)


def test_limit_covers_the_whole_bench_and_leaves_unstarted_runs(registry, tmp_path, monkeypatch):
    clock = fake_clock.install(monkeypatch, save_s=5.0)  # the final checkpoint is slower than first guessed
    plans = _plans(registry, ["proden", "cc"], epochs=3)
    out = tmp_path / "out"
    with pytest.raises(Stopped) as stop:
        bench.execute(registry, plans, out, time_limit=33 / 60)
    assert "cc seed 1: stopped before it started" in str(stop.value) and "1 of 2 runs finished" in str(stop.value)
    assert list(pd.read_csv(out / "results.csv")["method"]) == ["proden"]
    assert not (out / "runs" / plans[1].run_id).exists()
    clock.saves.clear()
    bench.execute(registry, plans, out, resume=True)  # no limit: proden is reused, cc trains
    assert clock.saves == [(0, 2)]
    clock.saves.clear()
    bench.execute(registry, plans, tmp_path / "full")
    _assert_same_runs(out, tmp_path / "full", plans)


def test_a_run_stopped_mid_way_resumes_in_the_next_bench(registry, tmp_path, monkeypatch):
    fake_clock.install(monkeypatch)
    plans = _plans(registry, ["proden", "cc"], epochs=3)
    out = tmp_path / "out"
    with pytest.raises(Stopped, match=r"cc seed 1: stopped after epoch 1/3 .*; 1 of 2 runs finished"):
        bench.execute(registry, plans, out, time_limit=45 / 60)
    cc_dir = out / "runs" / plans[1].run_id
    assert torch.load(cc_dir / "checkpoint.pt", weights_only=False)["epoch"] == 0
    env = json.loads((cc_dir / "env.json").read_text())
    assert env["bookkeeping"] == {"checkpoint_every": 0, "checkpoint_minutes": 10.0}
    bench.execute(registry, plans, out, resume=True, time_limit=45 / 60)
    bench.execute(registry, plans, tmp_path / "full")
    _assert_same_runs(out, tmp_path / "full", plans)


def test_offline_resumes_and_reuses_the_runs_a_bench_without_it_started(registry, tmp_path, monkeypatch):
    # an outside review: --offline is in the hashed config, so `--resume --offline` started the run over
    fake_clock.install(monkeypatch)
    online, offline, again, fresh = (
        bench.plan(registry, ["cc"], "synthetic-lt", [1], DataOptions(download=d, subset=256), epochs=3, device="cpu")
        for d in (True, False, False, False))
    assert offline[0].run_id != online[0].run_id  # recorded ids keep their names
    out, run = tmp_path / "out", tmp_path / "out" / "runs" / online[0].run_id
    with pytest.raises(Stopped, match="cc seed 1: stopped after epoch 2/3"):
        bench.execute(registry, online, out, time_limit=25 / 60)
    bench.execute(registry, offline, out, resume=True)
    assert [p.name for p in (out / "runs").iterdir() if p.is_dir()] == [run.name]
    assert [r["epoch"] for r in read_jsonl(run / "log.jsonl")] == [1, 2, 3]  # resumed, not started over
    assert offline[0].config["data"]["download"] is True  # as the run recorded
    finished = (run / "log.jsonl").stat().st_mtime_ns
    bench.execute(registry, again, out)
    assert (run / "log.jsonl").stat().st_mtime_ns == finished  # reused, not trained again
    bench.execute(registry, fresh, out, overwrite=True)  # a retrained run records how its data came now
    assert (out / "runs" / fresh[0].run_id).is_dir() and fresh[0].config["data"]["download"] is False


def test_time_limit_must_be_positive(registry, tmp_path):
    plans = _plans(registry, ["proden"], epochs=1)
    with pytest.raises(PLLZooError, match="must be > 0"):
        bench.execute(registry, plans, tmp_path, time_limit=0)


def test_the_plan_of_a_resumed_run_counts_only_the_epochs_left(registry, tmp_path, monkeypatch):
    """A paper run resumed after 322 of 1,100 epochs was planned and estimated as if it started afresh."""
    from pllzoo import costs
    from pllzoo.progress import Tracker

    fake_clock.install(monkeypatch)
    plans = _plans(registry, ["proden"], epochs=9)
    out = tmp_path / "out"
    with pytest.raises(Stopped):
        bench.execute(registry, plans, out, time_limit=35 / 60)  # 3 of 9 epochs, with a checkpoint
    (cost,) = costs.run_costs(registry, plans, out, resume=True)
    assert cost.done == 3 and not cost.reused
    assert costs.run_costs(registry, plans, out)[0].done == 0  # without --resume the run starts afresh
    assert costs.plan_lines([cost])[0].endswith("; 1 resumed (3 of 9 epochs done)")
    assert costs.run_seconds(cost, step_s=1.0, eval_row_s=0.0) == 6 * cost.steps_per_epoch
    tracker = Tracker([cost], estimates={cost.run_id: 60.0})  # 60 s for the 6 epochs left
    assert tracker.completed == 3 and tracker.run_eta(cost.run_id) == 60.0
    run_dir = out / "runs" / plans[0].run_id
    (run_dir / "log.jsonl").write_text("garbage\n")  # unreadable: counted as nothing done, the run says why
    assert costs.run_costs(registry, plans, out, resume=True)[0].done == 0


def test_every_part_makes_progress_even_when_no_epoch_fits(registry, tmp_path, monkeypatch):
    """An outside review: with a limit shorter than one epoch and its checkpoint, a resumed run (whose first
    estimate comes from its recorded epochs) stopped before training, part after part, while a fresh one
    trained an epoch; a retry loop on exit 75 never ended.  Now each part trains one epoch and stops; the
    parts add up to the uninterrupted run.  The limit counts from ``started`` (the command's start)."""
    clock = fake_clock.install(monkeypatch)  # epochs of 10 s
    plans = _plans(registry, ["proden"], epochs=3)
    out, run = tmp_path / "parts", tmp_path / "parts" / "runs" / plans[0].run_id
    for part in (1, 2):
        with pytest.raises(Stopped, match=f"stopped after epoch {part}/3 of stage 'train'"):
            bench.execute(registry, plans, out, resume=part > 1, time_limit=5 / 60, started=clock.t - 60)
        assert len(read_jsonl(run / "log.jsonl")) == part
    bench.execute(registry, plans, out, resume=True, time_limit=5 / 60, started=clock.t - 60)
    bench.execute(registry, plans, tmp_path / "full")
    _assert_same_runs(out, tmp_path / "full", plans)


def test_a_run_resumed_otherwise_keeps_its_earlier_parts_in_env_json(registry, tmp_path, monkeypatch):
    """An outside review: env.json, rewritten at each resume, described the last part only (a run of 4 epochs on
    1 thread and 196 on 2 said 2 threads, and a rerun with 2 gave other numbers; the git commit likewise)."""
    from pllzoo import bench as bench_lib

    fake_clock.install(monkeypatch)
    plans = _plans(registry, ["proden"], epochs=3)
    out, run = tmp_path / "out", tmp_path / "out" / "runs" / plans[0].run_id
    with pytest.raises(Stopped):
        bench.execute(registry, plans, out, time_limit=15 / 60, threads=1)
    env = json.loads((run / "env.json").read_text())
    assert env["torch_threads"] == 1 and "earlier_parts" not in env
    monkeypatch.setattr(bench_lib, "env_info", lambda device: {**env, "torch_threads": 3, "git_commit": "abc"})
    with pytest.raises(Stopped):
        bench.execute(registry, plans, out, resume=True, time_limit=15 / 60, threads=1)
    env2 = json.loads((run / "env.json").read_text())
    assert env2["torch_threads"] == 3
    (part1,) = env2["earlier_parts"]  # every value of the first part, the ones that differ among them
    assert part1["torch_threads"] == 1 and part1["git_commit"] == env["git_commit"] and part1["processes"] == 1
    assert part1["versions"] == env["versions"] and part1["data_sha256"] == env["data_sha256"]
    monkeypatch.setattr(bench_lib, "env_info", lambda device: {**env, "torch_threads": 3, "git_commit": "def"})
    bench.execute(registry, plans, out, resume=True, threads=1)  # a third part at another commit
    part1_, part2 = json.loads((run / "env.json").read_text())["earlier_parts"]
    assert part1_ == part1 and part2["git_commit"] == "abc" and part2["torch_threads"] == 3  # not "the same as now"


def test_resume_with_other_settings_says_it_starts_a_new_run(registry, tmp_path, monkeypatch):
    """An outside review: `--resume --epochs 30` after a stopped 25-epoch bench started a new run without a word."""
    fake_clock.install(monkeypatch)
    out = tmp_path / "out"
    (stopped,) = _plans(registry, ["proden"], epochs=3)
    with pytest.raises(Stopped):
        bench.execute(registry, [stopped], out, time_limit=15 / 60)
    (longer,) = _plans(registry, ["proden"], epochs=4)
    with pytest.warns(UserWarning, match=rf"proden seed 1: --resume starts a new run: .*{stopped.run_id} is an "
                                         r"unfinished run of it with other settings \(.*train.epochs=3"):
        bench.execute(registry, [longer], out, resume=True)
    import warnings

    with warnings.catch_warnings(record=True) as seen:  # resuming the stopped run itself: nothing said
        warnings.simplefilter("always")
        bench.execute(registry, [stopped], out, resume=True)
    assert not [w for w in seen if "starts a new run" in str(w.message)]


def test_the_continue_line_repeats_python_dash_m_when_started_so(tmp_path):
    """An outside review: started as `python -m pllzoo`, the stop line said `pllzoo bench ... --resume`, a script
    that may not be on PATH."""
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-m", "pllzoo", "bench", "--methods", "proden", "--subset", "300",
                           "--batch-size", "64", "--epochs", "100000", "--threads", "1", "--out", str(tmp_path / "o"),
                           "--time-limit", "0.02"], capture_output=True, text=True, timeout=600)
    assert done.returncode == 75, done.stderr[-2000:]
    line = next(x for x in done.stderr.splitlines() if "continue with:" in x)
    assert f"continue with: {Path(sys.executable).name} -m pllzoo bench --methods proden" in line
    assert line.endswith("--time-limit 0.02 --resume")


def test_a_fetch_twin_kept_only_in_the_archive_is_reused(registry, tmp_path, monkeypatch):
    """A run finished without --offline, archived and its folder pruned (``pllzoo archive --prune``), is the
    finished run of a bench with --offline: reused from runs.jsonl.xz under its recorded id, not trained again
    (an outside mutation audit: a twin was looked for among the run folders only)."""
    from pllzoo import archive
    from pllzoo.cli.archive import prune
    from pllzoo.trainer import Trainer

    online, offline = (bench.plan(registry, ["cc"], "synthetic-lt", [1], DataOptions(download=d, subset=128),
                                  epochs=1, batch_size=64, device="cpu") for d in (True, False))
    out = tmp_path / "out"
    bench.execute(registry, online, out, threads=1)
    (out / "runs" / online[0].run_id / "checkpoint.pt").unlink()
    archive.write(out)
    assert prune(out)[0] == 1 and not (out / "runs" / online[0].run_id).exists()
    monkeypatch.setattr(Trainer, "fit", lambda *a, **k: pytest.fail("the archived twin was trained again"))
    seen = []
    with pytest.warns(UserWarning, match=rf"reusing finished run {online[0].run_id} \(from runs.jsonl.xz\)"):
        rows = bench.execute(registry, offline, out, threads=1, on_run=lambda p, what: seen.append(what))
    assert seen == ["reused"] and offline[0].run_id == online[0].run_id and list(rows["status"]) == ["ok"]
    assert not [p for p in (out / "runs").iterdir() if p.is_dir()]


def test_overwrite_with_offline_trains_the_offline_run_and_records_it(tmp_path):
    """``--overwrite`` retrains what it plans and takes no fetch twin: after a bench without --offline,
    ``bench --offline --overwrite`` trains the --offline run under its own id, which records ``download: false``,
    and leaves the earlier run as it was (an outside mutation audit: the CLI took the twin all the same, so the
    retrained run recorded the download that had not happened)."""
    from click.testing import CliRunner

    from pllzoo.cli import cli

    out = tmp_path / "out"
    args = ["bench", "--methods", "cc", "--dataset", "synthetic-lt", "--seeds", "1", "--subset", "128", "--epochs",
            "1", "--batch-size", "64", "--threads", "1", "--out", str(out)]
    res = CliRunner().invoke(cli, args)
    assert res.exit_code == 0, res.output
    (online,) = [p for p in (out / "runs").iterdir() if p.is_dir()]
    finished = (online / "log.jsonl").read_bytes()
    res = CliRunner().invoke(cli, [*args, "--offline", "--overwrite"])
    assert res.exit_code == 0, res.output
    trained = [p for p in (out / "runs").iterdir() if p.is_dir() and p != online]
    assert len(trained) == 1, "the --offline run was not trained under its own id"
    offline = trained[0]
    downloads = {p: json.loads((p / "config.json").read_text())["data"]["download"] for p in (online, offline)}
    assert downloads == {online: True, offline: False}
    assert (online / "log.jsonl").read_bytes() == finished


def test_a_run_whose_first_epoch_would_miss_the_limit_is_not_started(registry, tmp_path, monkeypatch):
    """An outside review: a run begun 0.55 s before the limit trained a whole epoch past it (53 % over).  The
    first epoch of the method's last run here (10 s on the fake clock, and its checkpoint: it ends the stage) says
    the next one would not fit."""
    clock = fake_clock.install(monkeypatch)
    plans = bench.plan(registry, ["proden"], "synthetic-lt", [1, 2], DataOptions(), epochs=1, device="cpu")
    out = tmp_path / "out"
    with pytest.raises(Stopped) as stop:
        bench.execute(registry, plans, out, time_limit=16 / 60)
    assert ("proden seed 2: stopped before it started (the first epoch of proden's last run here took 11.0 s) to "
            "stay within the time limit; 1 of 2 runs finished") in str(stop.value), str(stop.value)
    assert clock() - 1000 <= 16 and not (out / "runs" / plans[1].run_id).exists()
    bench.execute(registry, plans, out, resume=True, time_limit=16 / 60)  # the next part trains it
    bench.execute(registry, plans, tmp_path / "full")
    _assert_same_runs(out, tmp_path / "full", plans)
