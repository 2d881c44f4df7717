"""``--jobs N`` (pllzoo.jobs): the runs of ``--jobs 1`` in worker processes, with the same records and rows;
a failing run is one line and the others finish; an interrupt in the parent stops the workers."""

from __future__ import annotations

import multiprocessing as mp
import signal
import subprocess
import sys
import time

import jobs_plugin
import pandas as pd
import pytest
import torch
from click.testing import CliRunner

from pllzoo import bench, checkpoint
from pllzoo.cli import cli
from pllzoo.data.base import DataOptions
from pllzoo.errors import PLLZooError
from pllzoo.plugins import make_plugin_manager
from pllzoo.registry import Registry
from pllzoo.results import read_jsonl

TINY = ["--dataset", "synthetic-lt", "--seeds", "1", "--epochs", "2", "--subset", "200", "--batch-size", "64"]


@pytest.fixture
def keep_threads():
    """execute() sets the process's torch threads on the sequential path; put them back."""
    before = torch.get_num_threads()
    yield
    torch.set_num_threads(before)


@pytest.fixture
def boom_registry():
    """The project's plugins plus ``tests/jobs_plugin.py``, registered in-process as a test would."""
    pm, infos = make_plugin_manager()
    pm.register(jobs_plugin, name="jobtest")
    return Registry.build(pm, infos)


NO_PERIODIC_CHECKPOINTS = {"train.checkpoint_every": "0", "train.checkpoint_minutes": "0"}  # only stage end, stop


def _plans(reg, methods, epochs=2, hp=None):
    return bench.plan(reg, methods, "synthetic-lt", [1], DataOptions(subset=200), epochs=epochs, batch_size=64,
                      device="cpu", hp=hp)


def _strip(records):
    return [{k: v for k, v in r.items() if k != "wall_s"} for r in records]


def _run(reg, plans, out, jobs_n):
    seen: dict[str, list] = {}
    rows = bench.execute(reg, plans, out, jobs=jobs_n, threads=1,
                         on_run=lambda p, s: seen.setdefault(p.run_id, []).append(s),
                         on_epoch=lambda p, rec: seen.setdefault(p.run_id, []).append(rec))
    return rows, seen


def test_two_jobs_give_the_records_and_rows_of_one(registry, keep_threads, tmp_path):
    """One torch thread on both paths: the count may change a float sum (pllzoo.threads)."""
    plans = _plans(registry, ["solar", "proden"])  # solar: two stages, and slower, so likely to finish last
    rows1, seen1 = _run(registry, plans, tmp_path / "j1", 1)
    rows2, seen2 = _run(registry, plans, tmp_path / "j2", 2)
    for p in plans:
        calls1, calls2 = seen1[p.run_id], seen2[p.run_id]
        assert calls2[0] == calls1[0] == "started"
        assert len(calls2) == len(calls1) > 2 and _strip(calls2[1:]) == _strip(calls1[1:])
        log1, log2 = (read_jsonl(tmp_path / j / "runs" / p.run_id / "log.jsonl") for j in ("j1", "j2"))
        assert _strip(log2) == _strip(log1) == _strip(calls1[1:])
        assert (tmp_path / "j2" / "runs" / p.run_id / "done").exists()
    csv1, csv2 = (pd.read_csv(tmp_path / j / "results.csv").drop(columns="wall_s") for j in ("j1", "j2"))
    assert list(csv2["run"]) == [p.run_id for p in plans]  # plan order, whatever order the workers finished in
    pd.testing.assert_frame_equal(csv2, csv1)
    pd.testing.assert_frame_equal(rows2.drop(columns="wall_s"), rows1.drop(columns="wall_s"))


def test_a_failing_run_is_one_line_and_the_other_finishes(boom_registry, monkeypatch, tmp_path):
    monkeypatch.setattr("pllzoo.cli.bench.get_registry", lambda: boom_registry)
    out = tmp_path / "out"
    args = ["bench", "--methods", "jobtest-boom,proden", *TINY, "--jobs", "2", "--out", str(out)]
    res = CliRunner().invoke(cli, args)
    assert res.exit_code == 1 and "Traceback" not in res.output and "second line" not in res.output
    errors = [line for line in res.output.splitlines() if line.startswith("Error:")]
    assert len(errors) == 1 and "1 of 2 runs failed: jobtest-boom seed 1 (" in errors[0]
    assert "failed in pllzoo_loss: RuntimeError: boom" in errors[0]  # the component and its hook are named
    assert "jobtest-boom seed 1 failed: " in res.output  # its progress line
    assert "Warning: jobtest-boom seed 1: about to fail" in res.output  # a worker's warning, shown by the parent
    boom, proden = _plans(boom_registry, ["jobtest-boom", "proden"])
    assert (out / "runs" / proden.run_id / "done").exists()
    assert len(read_jsonl(out / "runs" / proden.run_id / "log.jsonl")) == 2
    assert not (out / "runs" / boom.run_id / "done").exists()
    assert "in pllzoo_loss" in (out / "runs" / boom.run_id / "error.txt").read_text()
    rows = pd.read_csv(out / "results.csv")  # as with --jobs 1: both runs, the failed one marked
    assert list(rows["method"]) == ["jobtest-boom", "proden"] and list(rows["status"]) == ["failed", "ok"]
    assert "RuntimeError: boom" in rows["error"][0] and list(rows.columns[-2:]) == ["status", "error"]
    statuses = []  # --resume keeps the finished run, and only the failed one runs again (and fails again)
    with pytest.raises(PLLZooError, match=r"^1 of 1 runs failed: jobtest-boom seed 1 \(.*RuntimeError: boom\)"):
        bench.execute(boom_registry, [boom, proden], out, resume=True, jobs=2,
                      on_run=lambda p, s: statuses.append((p.method.name, s)))
    assert statuses[:2] == [("proden", "reused"), ("jobtest-boom", "started")] and len(statuses) == 3
    assert statuses[2][0] == "jobtest-boom" and statuses[2][1].startswith("failed: ") and "RuntimeError: boom" in statuses[2][1]


def test_a_worker_that_dies_without_a_word_is_reported(boom_registry, tmp_path):
    with pytest.raises(PLLZooError, match=r"jobtest-die seed 1 \(worker exited with code 3 and no report"):
        bench.execute(boom_registry, _plans(boom_registry, ["jobtest-die"]), tmp_path, jobs=2, threads=1)


def test_an_interrupt_in_the_parent_stops_the_workers(registry, tmp_path):
    plans = _plans(registry, ["proden"], epochs=100_000, hp=NO_PERIODIC_CHECKPOINTS)

    def interrupt(p, rec):
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        bench.execute(registry, plans, tmp_path, jobs=2, on_epoch=interrupt)
    assert not [c for c in mp.active_children() if c.name.startswith("pllzoo-job-")]
    run = tmp_path / "runs" / plans[0].run_id  # stopped cleanly: its epoch ended with the one checkpoint
    assert (run / "checkpoint.pt").exists() and not (run / "done").exists()


ORPHAN = """
import os, sys
from pllzoo import bench, checkpoint
from pllzoo.data.base import DataOptions
from pllzoo.registry import get_registry
reg = get_registry()
plans = bench.plan(reg, ["proden"], "synthetic-lt", [1], DataOptions(subset=200), epochs=3000, batch_size=64,
                   device="cpu", hp={"train.checkpoint_every": "0", "train.checkpoint_minutes": "0"})
bench.execute(reg, plans, sys.argv[1], jobs=2, threads=1, on_epoch=lambda p, rec: os._exit(0))  # dies, no cleanup
"""


def test_workers_stop_themselves_when_the_parent_dies(tmp_path):
    """No periodic checkpoints: one appears when the worker notices and stops cleanly, a few epochs in (or,
    were it to go on, only after all 3000 epochs)."""
    subprocess.run([sys.executable, "-c", ORPHAN, str(tmp_path)], check=True, timeout=300)
    run = next((tmp_path / "runs").iterdir())
    give_up = time.monotonic() + 120
    while not (run / "checkpoint.pt").exists() and time.monotonic() < give_up:
        time.sleep(0.2)
    assert (run / "checkpoint.pt").exists() and len(read_jsonl(run / "log.jsonl")) < 1000


def test_a_plugin_workers_cannot_import_is_refused_before_anything_runs(tmp_path):
    class Local:  # a local class: pickle cannot name it
        pass

    pm, infos = make_plugin_manager()
    pm.register(Local(), name="local")
    reg = Registry.build(pm, infos)
    with pytest.raises(PLLZooError, match="plugin 'local' cannot be sent to --jobs worker processes"):
        bench.execute(reg, _plans(reg, ["proden"]), tmp_path, jobs=2)
    assert not list((tmp_path / "runs").iterdir())


@pytest.mark.parametrize("value", ["0", "-1", "two"])
def test_jobs_option_is_a_positive_integer(value, tmp_path):
    args = ["bench", "--methods", "proden", *TINY, "--jobs", value, "--out", str(tmp_path / "o")]
    res = CliRunner().invoke(cli, args)
    errors = [line for line in res.output.splitlines() if line.startswith("Error:")]
    assert res.exit_code == 2 and len(errors) == 1 and "--jobs" in errors[0]
    assert not (tmp_path / "o").exists()


def test_jobs_help_says_when_it_pays():
    out = CliRunner().invoke(cli, ["bench", "--help"]).output
    assert "--jobs" in out and "GPU" in out


def test_time_limit_with_jobs_stops_each_run_and_resume_finishes_them(registry, tmp_path, monkeypatch, keep_threads):
    """``--time-limit`` with ``--jobs``: a run whose worker reaches the deadline stops with a checkpoint
    (exit 75, no result row), after the one epoch each worker trains in a part (every part makes progress: a
    limit shorter than a worker's start stopped each run before its first epoch, for ever); ``--resume``
    finishes them, equal to ``--jobs 1``.  The parent's clock is frozen at 0, so the parent starts both runs;
    the workers read the real ``time.monotonic`` (far past the tiny deadline)."""
    from pllzoo import checkpoint

    plans = _plans(registry, ["proden", "cc"], epochs=3)
    out = tmp_path / "jobs"
    monkeypatch.setattr(checkpoint, "clock", lambda: 0.0)
    for part in (1, 2):
        with pytest.raises(checkpoint.Stopped) as stop:
            bench.execute(registry, plans, out, resume=part > 1, jobs=2, threads=1, time_limit=1e-9)
        assert stop.value.exit_code == checkpoint.TIME_LIMIT_EXIT
        assert "to stay within the time limit" in str(stop.value) and "0 of 2 runs finished" in str(stop.value)
        assert pd.read_csv(out / "results.csv").empty
        for p in plans:  # one epoch more in each part
            assert [r["epoch"] for r in read_jsonl(out / "runs" / p.run_id / "log.jsonl")] == list(range(1, part + 1))
    monkeypatch.undo()
    bench.execute(registry, plans, out, resume=True, jobs=2, threads=1, time_limit=60)
    bench.execute(registry, plans, tmp_path / "one", jobs=1, threads=1)
    for p in plans:
        assert _strip(read_jsonl(out / "runs" / p.run_id / "log.jsonl")) == \
            _strip(read_jsonl(tmp_path / "one" / "runs" / p.run_id / "log.jsonl"))
    assert len(pd.read_csv(out / "results.csv")) == 2


@pytest.mark.parametrize("name, whom", [  # the parent's cases with -m slow: each runs a --jobs 2 bench
    ("SIGTERM", "group"), pytest.param("SIGTERM", "parent", marks=pytest.mark.slow),
    pytest.param("SIGINT", "parent", marks=pytest.mark.slow)])
def test_sigterm_to_the_bench_or_its_group_stops_every_run_cleanly(tmp_path, name, whom):
    """``--jobs 2`` and SIGTERM to the bench's process (``kill``) or its whole group (``timeout``, a batch
    system): one line says so, each running run ends its epoch with a checkpoint, none starts after,
    results.csv is written, no lock stays, exit 143 with one continue line.  (The parent used to die at once
    with neither, and a group signal abandoned the epochs of workers that got it twice.)  Ctrl-C (SIGINT) too,
    exit 130: an outside review found it ended the bench without the clean stop, as the CLI's own Ctrl-C watch
    held SIGINT and the stop took over only default handlers."""
    import os
    import signal

    out = tmp_path / "out"
    cmd = [sys.executable, "-m", "pllzoo", "bench", "--methods", "proden,cc", "--seeds", "1,2", "--dataset",
           "synthetic-lt", "--subset", "300", "--epochs", "100000", "--batch-size", "100", "--threads", "1",
           "--jobs", "2", "--hp", "train.checkpoint_every=0", "--hp", "train.checkpoint_minutes=0", "--out", str(out)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    give_up = time.monotonic() + 240
    logs = lambda: [p for p in out.glob("runs/*/log.jsonl") if len(p.read_text().splitlines()) >= 2]  # noqa: E731
    while len(logs()) < 2 and time.monotonic() < give_up and proc.poll() is None:
        time.sleep(0.2)
    assert len(logs()) == 2, "the two first runs did not train"
    sig = getattr(signal, name)
    os.killpg(proc.pid, sig) if whom == "group" else proc.send_signal(sig)
    stdout, stderr = proc.communicate(timeout=240)
    assert proc.returncode == 128 + sig, stderr[-2000:]
    assert stderr.count(f"{name} received") == 1 and "Traceback" not in stderr
    last = stderr.strip().splitlines()[-1]
    assert f"stopped by {name} after epoch" in last and f"not started (stopped by {name})" in last
    assert last.endswith("--out " + str(out) + " --resume") or "continue with:" in last
    assert (out / "results.csv").exists() and not list(out.glob("runs/*.lock"))
    stopped = [p.parent for p in out.glob("runs/*/log.jsonl") if len(p.read_text().splitlines()) >= 2]
    assert len(stopped) == 2 and all((r / "checkpoint.pt").exists() for r in stopped)


@pytest.mark.parametrize("jobs_n", [1, 2])
def test_a_keyboardinterrupt_a_plugin_raises_fails_its_run_only(boom_registry, keep_threads, tmp_path, jobs_n):
    """No signal came: the run whose loss raised ``KeyboardInterrupt`` fails with a reason that says so (a
    worker used to exit 130 with no report; ``--jobs 1`` used to end the bench), the other run finishes."""
    ctrlc, proden = _plans(boom_registry, ["jobtest-ctrlc", "proden"])
    with pytest.raises(PLLZooError, match=r"^1 of 2 runs failed: jobtest-ctrlc seed 1 \(.*KeyboardInterrupt"):
        bench.execute(boom_registry, [ctrlc, proden], tmp_path, jobs=jobs_n, threads=1)
    assert (tmp_path / "runs" / proden.run_id / "done").exists()
    rows = pd.read_csv(tmp_path / "results.csv")
    assert list(rows["method"]) == ["jobtest-ctrlc", "proden"] and list(rows["status"]) == ["failed", "ok"]


@pytest.mark.parametrize("jobs_n", [1, 2])
def test_an_abandon_still_writes_results_csv_with_the_runs_so_far(boom_registry, keep_threads, tmp_path, jobs_n):
    """A second stop signal (here raised where the parent hears of an epoch, as its handler would) abandons
    the epochs, with the second signal's exit status; results.csv still lists the runs finished or failed
    before it (it used to keep the previous bench's)."""
    boom, quick = _plans(boom_registry, ["jobtest-boom", "proden"])
    (slow,) = _plans(boom_registry, ["cc"], epochs=100_000, hp=NO_PERIODIC_CHECKPOINTS)
    failed: list[str] = []

    def abandon(p, rec):
        if p.run_id == slow.run_id and failed and (tmp_path / "runs" / quick.run_id / "done").exists():
            raise checkpoint.Abandoned(signal.SIGTERM)
        assert rec["epoch"] < 10_000, "never abandoned"

    with pytest.raises(checkpoint.Abandoned) as exc:
        bench.execute(boom_registry, [boom, quick, slow], tmp_path, jobs=jobs_n, threads=1, on_epoch=abandon,
                      on_run=lambda p, s: failed.append(p.method.name) if s.startswith("failed") else None)
    assert exc.value.exit_code == 143
    rows = pd.read_csv(tmp_path / "results.csv")
    assert list(rows["method"]) == ["jobtest-boom", "proden"] and list(rows["status"]) == ["failed", "ok"]
    assert not list(tmp_path.glob("runs/*.lock"))


def test_an_abandon_exits_with_the_second_signal_and_one_line(monkeypatch, tmp_path):
    def abandoned(*args, **kwargs):
        raise checkpoint.Abandoned(signal.SIGTERM)

    monkeypatch.setattr(bench, "execute", abandoned)
    res = CliRunner().invoke(cli, ["bench", "--methods", "proden", "--out", str(tmp_path / "o")])
    assert res.exit_code == 143 and "Traceback" not in res.output
    last = res.output.strip().splitlines()[-1]
    assert last.startswith("abandoned by a second SIGTERM; each unfinished run continues from its last checkpoint; "
                           "continue with: pllzoo bench --methods proden --out ") and last.endswith(" --resume")


def test_a_keyboardinterrupt_a_plugin_raises_while_the_bench_times_its_steps_fails_its_run_only(
        boom_registry, keep_threads, tmp_path, monkeypatch):
    """Through the CLI, whose cost estimate times each method's first steps before any run starts (outside the
    trainer's clean-stop window): the plugin's ``KeyboardInterrupt`` used to end the whole bench as Ctrl-C
    (exit 130, nothing written); now its run fails and PRODEN trains (:mod:`pllzoo.interrupts`)."""
    import signal as signal_module

    from click.testing import CliRunner

    import pllzoo.registry as registry_module
    from pllzoo.cli import cli

    if signal_module.getsignal(signal_module.SIGINT) is not signal_module.default_int_handler:
        pytest.skip("SIGINT is handled by someone else here (nohup ignores it)")
    monkeypatch.setattr(registry_module, "_REGISTRY", boom_registry)
    res = CliRunner().invoke(cli, ["bench", "--methods", "jobtest-ctrlc,proden", "--dataset", "synthetic-lt",
                                   "--subset", "200", "--epochs", "2", "--batch-size", "64", "--threads", "1",
                                   "--out", str(tmp_path)])
    assert res.exit_code == 1, res.output
    assert "interrupted" not in res.output and "Traceback" not in res.output
    assert "1 of 2 runs failed: jobtest-ctrlc seed 1" in res.output
    rows = pd.read_csv(tmp_path / "results.csv")
    assert list(rows["status"]) == ["failed", "ok"]
    assert signal_module.getsignal(signal_module.SIGINT) is signal_module.default_int_handler  # put back


def test_ctrl_c_while_the_bench_plans_still_ends_it(boom_registry, keep_threads, tmp_path, monkeypatch):
    """A real SIGINT before training (here while the data loads) ends the command with 130, as before."""
    import os
    import signal as signal_module

    from click.testing import CliRunner

    import pllzoo.registry as registry_module
    from pllzoo import planning
    from pllzoo.cli import cli

    if signal_module.getsignal(signal_module.SIGINT) is not signal_module.default_int_handler:
        pytest.skip("SIGINT is handled by someone else here (nohup ignores it)")
    monkeypatch.setattr(registry_module, "_REGISTRY", boom_registry)
    real_load = planning.load

    def load_then_ctrl_c(*args, **kwargs):
        os.kill(os.getpid(), signal_module.SIGINT)
        return real_load(*args, **kwargs)

    monkeypatch.setattr(planning, "load", load_then_ctrl_c)
    res = CliRunner().invoke(cli, ["bench", "--methods", "proden", "--dataset", "synthetic-lt", "--subset", "200",
                                   "--epochs", "2", "--batch-size", "64", "--threads", "1", "--out", str(tmp_path)])
    assert res.exit_code == 130 and "interrupted (Ctrl-C)" in res.output, res.output
