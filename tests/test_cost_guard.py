"""The cost guard of ``pllzoo bench``: the plan, the estimate, the warning, ``--dry-run``, and the progress.

Hand-computed cases for the arithmetic (:mod:`pllzoo.costs`, :class:`pllzoo.progress.Tracker`); the CLI
through click's CliRunner, whose output is not a terminal, so the progress is plain lines.  No test
asserts a measured time.
"""

from __future__ import annotations

import json
import os
import random
import re
from pathlib import Path

import pytest
import torch
from click.testing import CliRunner

from pllzoo import bench, costs
from pllzoo.cli import cli
from pllzoo.costs import RunCost
from pllzoo.data.base import DataOptions
from pllzoo.progress import BenchProgress, Tracker, clock_text
from pllzoo.timing import time_steps

TINY = ["--dataset", "synthetic-lt", "--seeds", "1", "--subset", "200", "--batch-size", "64", "--threads", "1",
        "--device", "cpu"]


def _cost(method="proden", seed=1, stages=(("train", 3),), model="mlp", device="cpu", steps=4, evals=100,
          reused=False) -> RunCost:
    return RunCost(method, seed, f"{method}-{seed}", model, device, tuple(stages), steps, evals, reused)


# ---------------------------------------------------------------------------------------------- arithmetic
def test_run_seconds_is_epochs_times_steps_and_evaluation():
    c = _cost(stages=(("pre-estimation", 2), ("train", 3)), steps=4, evals=100)
    assert c.epochs == 5 and c.stage_text() == "pre-estimation 2 + train 3 = 5 epochs"
    assert costs.run_seconds(c, step_s=0.5, eval_row_s=0.01) == pytest.approx(5 * (4 * 0.5 + 100 * 0.01))  # 15
    assert _cost().stage_text() == "train 3 epochs"


def test_bench_seconds_divides_by_the_runs_at_once():
    assert costs.bench_seconds([10.0, 20.0, 30.0]) == 60.0
    assert costs.bench_seconds([10.0, 20.0, 30.0], jobs=2) == 30.0
    assert costs.bench_seconds([10.0], jobs=4) == 10.0  # one run: no speed-up from idle jobs
    assert costs.bench_seconds([], jobs=2) == 0.0


@pytest.mark.parametrize("seconds, text", [(0.2, "<1s"), (45, "45s"), (720, "12m"), (3.4 * 3600, "3.4h"),
                                           (3 * 86400, "3.0 days")])
def test_duration(seconds, text):
    assert costs.duration(seconds) == text


def test_plan_lines_group_seeds_by_method():
    lines = costs.plan_lines([_cost("solar", 1, (("pre-estimation", 20), ("train", 40))), _cost("proden", 1),
                              _cost("solar", 2, (("pre-estimation", 20), ("train", 40)), reused=True),
                              _cost("proden", 2)], jobs=2)
    assert lines[0] == "plan: 4 run(s) = 2 method(s) x 2 seed(s) on cpu, 2 at once; 1 finished under --out, reused"
    assert re.fullmatch(r"  solar \s*seeds 1,2  model mlp  pre-estimation 20 \+ train 40 = 60 epochs, 4 steps each",
                        lines[1]), lines[1]
    assert "proden  seeds 1,2  model mlp  train 3 epochs" in lines[2]


# ---------------------------------------------------------------------------------------------- the warning
def test_resnet_on_the_cpu_for_many_epochs_is_warned_with_the_cpu_recipe():
    line = costs.cost_warning([_cost(model="resnet18", stages=(("train", 1000),))], total_s=None)
    assert line.startswith("Warning: ") and "\n" not in line
    assert "resnet18 for 1000 epochs on the CPU" in line and "benchmarks/cifar10lt-cpu/run.sh" in line
    assert "--hp train.model=cnn" in line
    # the name rule holds where no step is timed (--jobs, torchrun): WRN-28-2 too (an outside review)
    line = costs.cost_warning([_cost(model="wrn28-2", stages=(("train", 800),))], total_s=None)
    assert line is not None and "wrn28-2 for 800 epochs on the CPU" in line


def test_a_reasonable_plan_is_not_warned():
    assert costs.cost_warning([_cost(model="cnn", stages=(("train", 40),))], total_s=3600.0) is None
    assert costs.cost_warning([_cost(model="resnet18", stages=(("train", 100),))], total_s=None) is None  # at N
    assert costs.cost_warning([_cost(model="resnet18", stages=(("train", 1000),), device="cuda")], None) is None
    reused = _cost(model="resnet18", stages=(("train", 1000),), reused=True)
    assert costs.cost_warning([reused], total_s=None) is None  # nothing to train


def test_a_long_estimate_is_warned_on_a_gpu_with_gpu_advice():
    line = costs.cost_warning([_cost(device="cuda")], total_s=2 * 86400.0)
    assert "estimated at ~2.0 days" in line and "--shard" in line and "cifar10lt-cpu" not in line


def test_a_long_tabular_plan_on_the_cpu_is_not_sent_to_the_cifar_recipe():
    """An outside review: an MLP on synthetic-lt for 3,000,000 epochs was told to use the CIFAR CNN recipe."""
    line = costs.cost_warning([_cost(model="mlp")], total_s=2 * 86400.0)
    assert "estimated at ~2.0 days" in line and "cifar10lt-cpu" not in line and "fewer epochs or seeds" in line


def test_a_long_eager_gpu_bench_gets_the_cuda_graphs_tip_once():
    line = costs.graphs_tip([_cost(device="cuda")], compiled=False, total_s=3600.0)
    assert line.startswith("Tip: ") and "--hp train.compile=reduce-overhead" in line and "\n" not in line
    assert costs.graphs_tip([_cost(device="cuda")], compiled=True, total_s=3600.0) is None  # already graphed
    assert costs.graphs_tip([_cost(device="cuda")], compiled=False, total_s=60.0) is None  # short
    assert costs.graphs_tip([_cost(device="cpu")], compiled=False, total_s=3600.0) is None  # no graphs on a CPU
    assert costs.graphs_tip([_cost(device="cuda")], compiled=False, total_s=None) is None  # no estimate


# ---------------------------------------------------------------------------------------------- progress
def test_tracker_positions_and_etas_by_hand():
    a = _cost("solar", 1, (("pre", 2), ("train", 3)))  # 5 epochs
    b = _cost("proden", 1, (("train", 4),))  # 4 epochs
    t = Tracker([a, b], estimates={"proden-1": 8.0}, jobs=1)
    assert t.total == 9 and t.completed == 0
    assert t.position("solar-1", {"stage_index": 1, "epoch": 2}) == 4
    assert t.run_eta("solar-1") is None and t.eta() is None  # nothing known of solar yet
    t.epoch_done("solar-1", {"stage_index": 0, "epoch": 1, "wall_s": 1.0})
    t.epoch_done("solar-1", {"stage_index": 0, "epoch": 2, "wall_s": 3.0})
    assert t.run_eta("solar-1") == 2.0 * 3  # mean 2 s x 3 epochs left
    assert t.run_eta("proden-1") == 8.0  # its estimate: 2 s per epoch x 4
    assert t.eta() == 14.0 and t.completed == 2
    t.jobs = 2
    assert t.eta() == 7.0
    t.run_done("solar-1")
    assert t.run_eta("solar-1") == 0.0 and t.eta() == 8.0  # one run left: jobs do not divide it


def test_tracker_uses_another_seed_of_the_same_method_before_the_estimate():
    t = Tracker([_cost("proden", 1), _cost("proden", 2)], estimates={"proden-2": 300.0})
    t.epoch_done("proden-1", {"epoch": 1, "wall_s": 2.0})
    assert t.run_eta("proden-2") == 6.0  # 2 s per epoch seen on seed 1, not 100 s from the estimate


def test_reused_runs_count_as_done():
    t = Tracker([_cost(reused=True), _cost("cc")], estimates={"cc-1": 3.0})
    assert t.completed == 3 and t.eta() == 3.0


def _record(epoch, epochs=5, stage="train", stage_index=0, final=True, wall_s=2.0):
    return {"epoch": epoch, "epochs": epochs, "stage": stage, "stage_index": stage_index, "final_stage": final,
            "loss": 0.5, "acc_all": 61.25, "wall_s": wall_s}


class _Plan:
    run_id, method, seed = "proden-1", None, 1


def test_plain_lines_one_per_epoch_at_most_one_every_n_seconds():
    now = [100.0]
    lines: list[str] = []
    p = BenchProgress([_cost(stages=(("train", 5),))], jobs=1, live=False, write=lines.append, every_s=10.0,
                      clock=lambda: now[0])
    with p:
        p.on_run(_Plan, "started")
        for epoch, at in zip(range(1, 6), (102.0, 104.0, 113.0, 115.0, 117.0)):
            now[0] = at
            p.on_epoch(_Plan, _record(epoch))
    assert lines[0] == "proden seed 1 started (train 5 epochs)"
    epochs = [int(re.search(r"epoch (\d)/5", line).group(1)) for line in lines[1:]]
    assert epochs == [1, 3, 5]  # 2 is 2 s after 1, 4 is 2 s after 3; the stage's last always shows
    assert lines[2] == ("proden seed 1 [train 1/1] epoch 3/5 (run 3/5) loss 0.5000 acc 61.25 elapsed 0:00:13 "
                        "ETA run 0:00:04, all 0:00:04")
    assert lines[-1].endswith("ETA run 0:00:00, all 0:00:00")


def test_clock_text():
    assert clock_text(None) == "-:--:--" and clock_text(3725.4) == "1:02:05"


# ---------------------------------------------------------------------------------------------- timing
def test_timing_leaves_the_random_states_as_they_were(registry):
    (p,) = bench.plan(registry, ["solar"], "synthetic-lt", [1], DataOptions(subset=200), epochs=1, batch_size=64,
                      device="cpu")
    torch.manual_seed(7)
    random.seed(7)
    before = torch.get_rng_state(), random.getstate()
    t = time_steps(registry, p, max_steps=3, budget_s=60.0)
    assert torch.equal(torch.get_rng_state(), before[0]) and random.getstate() == before[1]
    assert t.steps == 3 and t.step_s > 0 and t.eval_row_s > 0


# ---------------------------------------------------------------------------------------------- the CLI
def test_dry_run_prints_the_plan_and_the_configs_bench_writes(tmp_path):
    out = tmp_path / "out"
    args = ["bench", "--methods", "solar,proden", *TINY, "--epochs", "2", "--hp", "solar:estimator.est_epochs=3",
            "--out", str(out)]
    res = CliRunner().invoke(cli, [*args, "--dry-run"])
    assert res.exit_code == 0, res.output
    assert not out.exists()  # nothing written
    assert "plan: 2 run(s) = 2 method(s) x 1 seed(s) on cpu" in res.stderr
    assert "pre-estimation 3 + train 2 = 5 epochs" in res.stderr and "train 2 epochs" in res.stderr
    assert re.search(r"^estimate: ~?\S+ in all \(solar ~?\S+, proden ~?\S+ per run\)", res.stderr, re.M), res.stderr
    planned = json.loads(res.stdout)  # stdout is the JSON alone
    assert [r["config"]["method"] for r in planned] == ["solar", "proden"]
    assert "solar" not in res.stdout.split("[", 1)[0] and "Traceback" not in res.output
    trained = CliRunner().invoke(cli, args)  # the real bench writes exactly those configs
    assert trained.exit_code == 0, trained.output
    for r in planned:
        assert json.loads((out / "runs" / r["run"] / "config.json").read_text()) == r["config"]
        assert r["folder"] == str(out / "runs" / r["run"])
    # off a terminal: plain progress lines, one per epoch (these runs are far faster than the throttle)
    assert re.search(r"^proden seed 1 \[train 1/1\] epoch 2/2 \(run 2/2\) loss \d+\.\d{4} acc \d+\.\d\d "
                     r"elapsed \d+:\d\d:\d\d ETA run \d+:\d\d:\d\d, all \d+:\d\d:\d\d$", trained.output, re.M)
    assert re.search(r"^solar seed 1 \[pre-estimation 1/2\] epoch 1/3 \(run 1/5\)", trained.output, re.M)
    assert re.search(r"^solar seed 1 \[train 2/2\] epoch 2/2 \(run 5/5\)", trained.output, re.M)
    again = CliRunner().invoke(cli, [*args, "--dry-run"])  # finished runs are reused: nothing left to time
    assert again.exit_code == 0 and "2 finished under --out, reused" in again.stderr, again.output


def test_dry_run_needs_no_writable_out(monkeypatch, tmp_path):
    """A dry run writes nothing, so a read-only --out (or one where nothing can be made) is fine; a real bench
    onto it is still refused before it trains."""
    out = tmp_path / "ro"
    out.mkdir()
    real = os.access  # root ignores a chmod'ed folder: fake the permission check, as tests/test_bad_inputs.py does
    monkeypatch.setattr(os, "access", lambda p, mode, **kw: (
        False if Path(p) == out and mode & os.W_OK else real(p, mode, **kw)))
    args = ["bench", "--methods", "proden", *TINY, "--epochs", "1"]
    for where in (out, Path("/proc/pllzoo-nope/out")):
        res = CliRunner().invoke(cli, [*args, "--dry-run", "--out", str(where)])
        assert res.exit_code == 0 and "plan: 1 run(s)" in res.stderr, res.output
    res = CliRunner().invoke(cli, [*args, "--out", str(out)])
    assert res.exit_code == 1 and "is not writable" in res.stderr and not list(out.iterdir()), res.output
    (tmp_path / "file").write_text("")
    res = CliRunner().invoke(cli, [*args, "--dry-run", "--out", str(tmp_path / "file")])
    assert res.exit_code == 1 and "is a file; pass a folder" in res.stderr, res.output


def test_a_plan_over_the_limit_is_warned_in_one_line(monkeypatch, tmp_path):
    monkeypatch.setattr(costs, "LONG_HOURS", 1e-9)
    res = CliRunner().invoke(cli, ["bench", "--methods", "proden", *TINY, "--epochs", "1", "--dry-run",
                                   "--out", str(tmp_path / "out")])
    assert res.exit_code == 0, res.output
    warned = [line for line in res.stderr.splitlines() if line.startswith("Warning: this bench looks too long")]
    assert len(warned) == 1 and "fewer epochs or seeds" in warned[0]  # tabular: not the CIFAR CPU recipe


def test_jobs_skip_the_timing_and_say_so(tmp_path):
    res = CliRunner().invoke(cli, ["bench", "--methods", "proden,cc", *TINY, "--epochs", "1", "--jobs", "2",
                                   "--dry-run", "--out", str(tmp_path / "out")])
    assert res.exit_code == 0, res.output
    assert "plan: 2 run(s) = 2 method(s) x 1 seed(s) on cpu, 2 at once" in res.stderr
    assert "estimate: from the first epochs" in res.stderr


def test_compiled_runs_skip_the_timing_and_say_why(tmp_path):
    """Timed, a compiled run's first step is its compilation: the sixth session's H100 paper run was estimated at
    12.8 days for ~25 minutes of training. No timing (so no compiling here) and the reason, in one line."""
    res = CliRunner().invoke(cli, ["bench", "--methods", "proden,cc", *TINY, "--epochs", "1", "--hp",
                                   "cc:train.compile=default", "--dry-run", "--out", str(tmp_path / "out")])
    assert res.exit_code == 0, res.output
    line, = [x for x in res.stderr.splitlines() if x.startswith("estimate:")]
    assert line.startswith("estimate: none, cc compiles its network (train.compile=default)"), line
    assert "ETA from the first epochs" in line and "looks too long" not in res.stderr
    plain = CliRunner().invoke(cli, ["bench", "--methods", "proden,cc", *TINY, "--epochs", "1", "--dry-run",
                                     "--out", str(tmp_path / "out")])
    assert re.search(r"^estimate: ~?\S+ in all", plain.stderr, re.M), plain.stderr  # eager runs are still timed


def test_a_dry_run_whose_timing_fails_is_an_error(tmp_path):
    """An outside review: --dry-run as a pre-flight check exited 0 for a plan whose first steps already failed
    (an image model on tabular data), with the cost warning's advice beside it."""
    res = CliRunner().invoke(cli, ["bench", "--methods", "proden", "--subset", "200", "--batch-size", "50",
                                   "--epochs", "2", "--threads", "1", "--hp", "train.model=resnet18", "--dry-run",
                                   "--out", str(tmp_path / "o")])
    assert res.exit_code == 1 and "Traceback" not in res.output, res.output
    # since a review, a backbone that cannot be built for the data refuses the bench while it plans, before timing
    assert res.output.startswith("Error: model 'resnet18' needs image input (C, H, W), got input shape (16,)")
    assert not (tmp_path / "o").exists()
    res = CliRunner().invoke(cli, ["bench", "--methods", "proden", "--subset", "200", "--batch-size", "50",
                                   "--epochs", "1", "--threads", "1", "--tensorboard", "", "--out", str(tmp_path / "t")])
    assert res.exit_code == 2 and "'--tensorboard': is empty; give a folder" in res.output  # not the current folder


def test_epochs_done_counts_the_checkpoint_not_the_log(tmp_path):
    """An outside review: with train.checkpoint_every=4 a run killed after epoch 7 resumes after epoch 4, but the
    plan said "7 of 20 epochs done" (it counted the log).  The checkpoint's records are what a resume keeps."""
    from pllzoo.costs import epochs_done

    run = tmp_path / "run"
    run.mkdir()
    assert epochs_done(run) == 0  # no checkpoint: nothing to resume from
    records = [{"stage_index": 0, "epoch": e, "epochs": 20} for e in range(1, 8)]
    (run / "log.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    torch.save({"records": records[:4], "model": {"w": torch.zeros(3)}}, run / "checkpoint.pt")
    assert epochs_done(run) == 4
    (run / "checkpoint.pt").write_bytes(b"not a checkpoint")
    assert epochs_done(run) == 7  # unreadable: the log's count, as before (the resume says what is wrong)
