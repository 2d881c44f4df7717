"""Finished runs are never lost (issue 13.2): a bench without ``--resume`` reuses a finished run with a note,
``--overwrite`` retrains it into a temporary folder swapped in only on success, ``results.csv`` and
``summary.*`` cover every finished run under ``--out``, and a run locked by another live bench is skipped."""

from __future__ import annotations

import os
import shutil
import signal
import threading
from pathlib import Path

import pandas as pd
import pytest
from click.testing import CliRunner

from pllzoo.checkpoint import Abandoned
from pllzoo.cli import cli
from pllzoo.trainer import Trainer

BENCH = ["bench", "--dataset", "synthetic-lt", "--subset", "200", "--batch-size", "64", "--epochs", "1",
         "--seeds", "1", "--device", "cpu", "--threads", "1"]


def _bench(out: Path, *args: str):
    return CliRunner().invoke(cli, [*BENCH, "--out", str(out), *args])


FINISHED_ARGS = [*BENCH, "--methods", "proden"]  # conftest.finished / out


def _run(out: Path) -> Path:
    (run,) = [p for p in (out / "runs").iterdir() if p.is_dir()]
    return run


def _snapshot(run: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(run.iterdir())}


def test_second_bench_reuses_the_finished_run_with_a_note(out, monkeypatch):
    run, before = _run(out), _snapshot(_run(out))
    rows = pd.read_csv(out / "results.csv")
    monkeypatch.setattr(Trainer, "fit", lambda *a, **k: pytest.fail("a finished run was retrained"))
    res = _bench(out, "--methods", "proden")
    assert res.exit_code == 0, res.output
    notes = [line for line in res.output.splitlines() if "reusing finished run" in line]
    assert notes == [f"Warning: reusing finished run {run.name}; --overwrite retrains it"]
    assert _snapshot(run) == before and "Traceback" not in res.output
    pd.testing.assert_frame_equal(pd.read_csv(out / "results.csv"), rows)


def test_overwrite_retrains_and_a_failure_keeps_the_old_run(out, monkeypatch):
    run, before = _run(out), _snapshot(_run(out))
    inode = os.stat(run).st_ino
    seen = []

    def fail(self, resume=False):
        seen.append(self.run_dir)
        assert self.run_dir.name.startswith(f".{run.name}.tmp-") and self.run_dir.exists()
        raise RuntimeError("injected failure")

    with monkeypatch.context() as m:
        m.setattr(Trainer, "fit", fail)
        res = _bench(out, "--methods", "proden", "--overwrite")
    assert res.exit_code == 1 and len(seen) == 1, res.output
    assert "injected failure" in res.output and "the earlier finished run is kept" in res.output
    assert "retrain them with --overwrite and their --methods and --seeds alone (--resume would keep the earlier " \
           "finished runs" in res.output
    assert "Traceback" not in res.output
    assert _snapshot(run) == before and sorted(p.name for p in (out / "runs").iterdir()) == [run.name]
    rows = pd.read_csv(out / "results.csv")
    assert list(rows["status"]) == ["ok"] and list(rows["run"]) == [run.name]

    res = _bench(out, "--methods", "proden", "--overwrite")  # now it trains: the new run replaces the old
    assert res.exit_code == 0 and "reusing" not in res.output, res.output
    assert (run / "done").exists() and sorted(p.name for p in (out / "runs").iterdir()) == [run.name]
    assert os.stat(run).st_ino != inode  # another folder, swapped in
    assert list(pd.read_csv(out / "results.csv")["status"]) == ["ok"]


def test_unfinished_run_is_retrained_not_deleted_first(out, monkeypatch):
    run = _run(out)
    (run / "done").unlink()
    before = _snapshot(run)
    with monkeypatch.context() as m:
        m.setattr(Trainer, "fit", lambda self, resume=False: (_ for _ in ()).throw(Abandoned(signal.SIGINT)))
        res = _bench(out, "--methods", "proden")
    assert res.exit_code == 130, res.output
    assert _snapshot(run) == before and sorted(p.name for p in (out / "runs").iterdir()) == [run.name]
    res = _bench(out, "--methods", "proden")
    assert res.exit_code == 0 and (run / "done").exists(), res.output
    assert sorted(p.name for p in (out / "runs").iterdir()) == [run.name]


def test_another_method_adds_rows(out):
    first = pd.read_csv(out / "results.csv")
    res = _bench(out, "--methods", "cc")
    assert res.exit_code == 0, res.output
    rows = pd.read_csv(out / "results.csv")
    assert list(rows["method"]) == ["cc", "proden"] and set(rows["status"]) == {"ok"}
    pd.testing.assert_frame_equal(rows[rows["method"] == "proden"].reset_index(drop=True), first,
                                  check_dtype=False)
    summary = pd.read_csv(out / "summary.csv")
    assert set(summary["method"]) == {"cc", "proden"}


def test_a_held_lock_skips_the_run_with_one_line(out):
    run = _run(out)
    shutil.rmtree(run)  # a run the other bench is training
    lock = out / "runs" / f"{run.name}.lock"
    lock.write_text(f"{os.getppid()}\n")  # a live process that is not this one
    res = _bench(out, "--methods", "proden")
    assert res.exit_code == 75 and "Traceback" not in res.output, res.output  # not done: no success for a script
    lines = [line for line in res.output.splitlines() if "in use by another bench" in line]
    assert len(lines) == 2 and f"pid {os.getppid()}" in lines[0] and \
        "skipped (if no bench runs it, remove the lock file)" in lines[0]
    assert lines[1].startswith("1 run(s) skipped, in use by another bench (proden seed 1); 0 of 1 runs finished; "
                               "once that bench is done, they can be trained; continue with: pllzoo bench ")
    assert not run.exists() and lock.read_text() == f"{os.getppid()}\n"  # not touched
    assert pd.read_csv(out / "results.csv").empty


def test_a_stale_lock_is_taken_over(out):
    run = _run(out)
    lock = out / "runs" / f"{run.name}.lock"
    dead = os.fork() if hasattr(os, "fork") else None
    if dead == 0:
        os._exit(0)
    os.waitpid(dead, 0)
    lock.write_text(f"{dead}\n")
    res = _bench(out, "--methods", "proden")
    assert res.exit_code == 0 and "reusing finished run" in res.output, res.output
    assert not lock.exists()


def test_a_lock_of_another_host_is_held_not_taken_over(out):
    """A shared --out across nodes (a SLURM array): a dead PID here says nothing about a process there."""
    import socket

    from pllzoo.runfolders import lock_holder, take_lock

    run = _run(out)
    shutil.rmtree(run)
    lock = out / "runs" / f"{run.name}.lock"
    start = open(f"/proc/{os.getpid()}/stat").read().rsplit(")", 1)[1].split()[19]
    assert take_lock(lock) is None and lock.read_text() == f"{os.getpid()} {socket.gethostname()} {start}\n"
    lock.write_text("3999999 node-elsewhere\n")  # no such PID here
    assert lock_holder(lock) == "3999999 on node-elsewhere"
    res = _bench(out, "--methods", "proden")
    line, last = [x for x in res.output.splitlines() if "in use by another bench" in x]
    assert "pid 3999999 on node-elsewhere" in line and not run.exists()
    assert res.exit_code == 75 and last.startswith("1 run(s) skipped")
    lock.write_text(f"3999999 {socket.gethostname()}\n")  # this host's, dead: stale
    assert lock_holder(lock) is None


@pytest.mark.skipif(not os.path.exists("/proc/self/stat"), reason="process start times are read from /proc")
def test_a_live_pid_that_started_after_the_lock_is_not_its_holder(out):
    """An outside review: a bench killed with -9 left its lock, its PID was reused (a container's PID 1, a later
    process), and every rerun skipped the run for good.  The lock records its process's start; a live process
    of that PID with another start is not the bench that wrote it."""
    import socket

    from pllzoo.runfolders import lock_holder

    run = _run(out)
    lock = out / "runs" / f"{run.name}.lock"
    parent = os.getppid()
    start = open(f"/proc/{parent}/stat").read().rsplit(")", 1)[1].split()[19]
    lock.write_text(f"{parent} {socket.gethostname()} {start}\n")  # that process itself: held
    assert lock_holder(lock) == parent
    lock.write_text(f"{parent} {socket.gethostname()} {int(start) + 1}\n")  # the PID, not the process
    assert lock_holder(lock) is None
    lock.write_text(f"{parent} {socket.gethostname()}\n")  # an older lock, without the start: held, as before
    assert lock_holder(lock) == parent
    lock.write_text(f"{parent} {socket.gethostname()} {int(start) + 1}\n")
    res = _bench(out, "--methods", "proden")
    assert res.exit_code == 0 and "reusing finished run" in res.output, res.output
    assert not lock.exists()


def _dead_pid() -> int:
    dead = os.fork()
    if dead == 0:
        os._exit(0)
    os.waitpid(dead, 0)
    return dead


@pytest.mark.skipif(not hasattr(os, "fork"), reason="forks")
def test_a_stale_lock_broken_by_another_process_keeps_that_ones_new_lock(tmp_path):
    """An outside review: two processes that both read a lock as stale both got it (the second removed the
    first's new lock and made its own).  A stale lock is removed only under LOCK.break, after looking again."""
    import socket

    from pllzoo.runfolders import _break_stale, lock_holder, take_lock

    lock = tmp_path / "run.lock"
    lock.write_text(f"{_dead_pid()} {socket.gethostname()}\n")
    assert lock_holder(lock) is None  # process A reads it as stale ...
    _break_stale(lock)  # ... process B breaks it and takes it (here: this process)
    assert not lock.exists() and take_lock(lock) is None
    _break_stale(lock)  # A, late, breaks what it read as stale: B's live lock stays
    assert lock_holder(lock) == os.getpid() and take_lock(lock) == os.getpid()
    assert not (tmp_path / "run.lock.break").exists()
    (tmp_path / "run.lock.break").write_text("")  # left by a process that died breaking it: waited on, then
    os.utime(tmp_path / "run.lock.break", (0, 0))  # taken over once older than BREAK_S
    lock.write_text(f"{_dead_pid()} {socket.gethostname()}\n")
    assert take_lock(lock) is None and lock_holder(lock) == os.getpid()


@pytest.mark.skipif(not hasattr(os, "fork"), reason="forks")
def test_two_processes_taking_over_one_stale_lock_at_once_one_gets_it(tmp_path):
    import socket

    from pllzoo.runfolders import take_lock

    lock, both = tmp_path / "run.lock", 0
    for _ in range(15):  # (the old code: both got it in ~1 of 6)
        lock.unlink(missing_ok=True)
        lock.write_text(f"{_dead_pid()} {socket.gethostname()}\n")
        go_r, go_w = os.pipe()
        kids = []
        for _ in range(2):
            pid = os.fork()
            if pid == 0:  # wait for the start, take the lock, say whether it was taken (exit 0) or not (1)
                os.close(go_w)
                os.read(go_r, 1)
                os._exit(0 if take_lock(lock) is None else 1)
            kids.append(pid)
        os.close(go_r)
        os.write(go_w, b"go")
        os.close(go_w)
        codes = [os.waitstatus_to_exitcode(os.waitpid(k, 0)[1]) for k in kids]
        assert sorted(codes) in ([0, 1], [1, 1]), codes  # both children dead: the lock may be stale at the end
        both += codes == [0, 0]
    assert both == 0


def test_a_lock_joined_by_a_live_process_is_held_after_its_taker_died(tmp_path):
    """A --jobs worker joins its run's lock: a parent bench killed with -9 left a lock naming a dead PID, which
    a new bench took over while the worker still trained and wrote into the folder (an outside review)."""
    import socket

    from pllzoo.runfolders import join_lock, lock_holder, take_lock

    lock = tmp_path / "run.lock"
    parent = os.getppid()  # a live process as the taker, which then dies: rewritten below with a dead PID
    lock.write_text(f"{parent} {socket.gethostname()}\n")
    join_lock(lock)
    lines = lock.read_text().splitlines()
    assert len(lines) == 2 and lines[1].split()[:2] == [str(os.getpid()), socket.gethostname()]
    dead = f"{_dead_pid()} {socket.gethostname()}" if hasattr(os, "fork") else f"3999999 {socket.gethostname()}"
    lock.write_text(f"{dead}\n{lines[1]}\n")
    assert lock_holder(lock) == os.getpid() and take_lock(lock) == os.getpid()
    lock.write_text(f"{dead}\n")
    assert lock_holder(lock) is None


def test_a_jobs_worker_joins_the_lock_of_its_run(registry, tmp_path):
    from pllzoo import bench, jobs
    from pllzoo.data.base import DataOptions
    from pllzoo.runfolders import take_lock

    (plan,) = bench.plan(registry, ["proden"], "synthetic-lt", [1], DataOptions(subset=200), epochs=1,
                         batch_size=64, device="cpu")
    runs = tmp_path / "runs"
    runs.mkdir()
    lock = runs / f"{plan.run_id}.lock"
    assert take_lock(lock) is None
    finals, failed = jobs.run_parallel(registry, [plan], runs, False, [0], 1, threads=1)
    assert not failed and list(finals) == [0]
    lines = lock.read_text().splitlines()
    assert len(lines) == 2 and lines[0].split()[0] == str(os.getpid()) and lines[1].split()[0] != str(os.getpid())


def test_results_lock_refuses_with_one_line(out):
    from pllzoo import bench
    from pllzoo.errors import PLLZooError

    (out / "results.lock").write_text(f"{os.getppid()}\n")
    with pytest.raises(PLLZooError, match="held by another bench") as info:
        with bench.results_lock(out, wait_s=0.2):
            pass
    assert "\n" not in str(info.value)


def test_overwrite_with_jobs_swaps_in_the_worker_runs(out):
    run = _run(out)
    inode, rows = os.stat(run).st_ino, pd.read_csv(out / "results.csv")
    res = _bench(out, "--methods", "proden", "--seeds", "1,2", "--overwrite", "--jobs", "2")
    assert res.exit_code == 0 and "Traceback" not in res.output, res.output
    names = sorted(p.name for p in (out / "runs").iterdir())
    assert len(names) == 2 and run.name in names and not any(n.startswith(".") or n.endswith(".lock") for n in names)
    assert os.stat(run).st_ino != inode and (run / "done").exists()
    new = pd.read_csv(out / "results.csv")
    assert list(new["seed"]) == [1, 2]  # seed 1 retrained the same way (one thread): the same numbers
    acc = ["acc_all", "acc_many", "acc_medium", "acc_few", "run"]
    pd.testing.assert_frame_equal(new.iloc[:1][acc], rows[acc], check_dtype=False)


def _selection_of(plugin: str, keep_every: int):
    """A registry whose in-process plugin ``plugin`` registers selection ``t.sel`` (every ``keep_every``-th row) and
    method ``t-sel``: two of them supply a component of the same name, as two installed distributions might."""
    import torch

    from pllzoo import Method, hookimpl
    from pllzoo.builtin import SelectAll
    from pllzoo.plugins import make_plugin_manager
    from pllzoo.registry import Registry

    class Sel(SelectAll):
        @hookimpl
        def pllzoo_select(self, step):
            return torch.arange(step.batch.size) % keep_every == 0

    class P:
        @hookimpl
        def pllzoo_register_selections(self, register):
            register("t.sel", Sel)

        @hookimpl
        def pllzoo_register_methods(self, register):
            register(Method("t-sel", loss="proden.loss", label_update="proden.confidence", selection="t.sel"))

    pm, infos = make_plugin_manager()
    pm.register(P(), name=plugin)
    return Registry.build(pm, infos)


@pytest.mark.parametrize("resume", [False, True])
def test_a_finished_run_of_another_plugins_component_is_retrained_not_reused(tmp_path, resume):
    """The run id names components, not who supplies them: a finished run made with plugin pa's ``t.sel`` used
    to be reused, as "finished", for plugin pb's ``t.sel``."""
    import warnings

    from pllzoo import bench
    from pllzoo.data.base import DataOptions
    from pllzoo.results import read_jsonl

    def run(reg, **kw):
        plans = bench.plan(reg, ["t-sel"], "synthetic-lt", [1], DataOptions(subset=128), epochs=1, batch_size=32,
                           device="cpu")
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            bench.execute(reg, plans, tmp_path, threads=1, **kw)
        return plans[0], [str(w.message) for w in caught]

    first, _ = run(_selection_of("pa", 1))
    log = read_jsonl(tmp_path / "runs" / first.run_id / "log.jsonl")
    again, said = run(_selection_of("pa", 1), resume=resume)  # the same plugin: reused
    assert again.run_id == first.run_id and read_jsonl(tmp_path / "runs" / first.run_id / "log.jsonl") == log
    second, said = run(_selection_of("pb", 2), resume=resume)
    assert second.run_id == first.run_id
    assert any(f"finished run {first.run_id} was trained with selection 't.sel' of plugin 'pa' (in-process), now "
               "of plugin 'pb' (in-process); it is retrained" in m for m in said), said
    env = (tmp_path / "runs" / first.run_id / "env.json").read_text()
    assert '"plugin": "pb"' in env and read_jsonl(tmp_path / "runs" / first.run_id / "log.jsonl") != log


LONG = ["--epochs", "6", "--hp", "train.checkpoint_every=1"]  # a checkpoint at every epoch


def _stop_after(epochs: int):
    """Trainer.fit that trains ``epochs`` epochs (checkpointed) and then stops as a SIGINT's clean stop does."""
    from pllzoo.checkpoint import Stopped

    real = Trainer._epoch

    def epoch(self, stage, e, *args, **kwargs):
        if e >= epochs:
            raise Stopped(f"stopped by SIGINT after epoch {e}/6 of stage 'train'", 130)
        return real(self, stage, e, *args, **kwargs)

    return epoch


def _lines(run: Path) -> int:
    return len((run / "log.jsonl").read_text().splitlines())


@pytest.mark.parametrize("damage", ["unfinished", "damaged checkpoint", "damaged log"])
def test_a_plain_bench_says_what_it_retrains_and_an_early_stop_keeps_the_further_folder(tmp_path, monkeypatch,
                                                                                       damage):
    """An outside review lost runs this way: a bench without --resume over an unfinished run (or a finished one
    whose checkpoint or log was damaged) retrained it silently, and a Ctrl-C after a few epochs replaced the folder
    with the shorter retraining.  Now one line says what it does, and the folder that got further stays."""
    out = tmp_path / "o"
    with monkeypatch.context() as m:
        if damage == "unfinished":
            m.setattr(Trainer, "_epoch", _stop_after(4))
        res = _bench(out, "--methods", "proden", *LONG)
    run = _run(out)
    if damage == "unfinished":
        assert res.exit_code == 130 and _lines(run) == 4 and not (run / "done").exists()
        says = "unfinished, 4 epoch(s) with a checkpoint; retraining it from the start without --resume"
    elif damage == "damaged checkpoint":
        data = (run / "checkpoint.pt").read_bytes()
        (run / "checkpoint.pt").write_bytes(data[: len(data) // 2])
        says = "checkpoint.pt: damaged checkpoint"
    else:
        text = (run / "log.jsonl").read_text().splitlines()
        (run / "log.jsonl").write_text("\n".join(text[:-1]) + "\n")
        says = "log.jsonl ends at epoch 5 of 6"
    before = _snapshot(run)
    with monkeypatch.context() as m:
        m.setattr(Trainer, "_epoch", _stop_after(2))
        res = _bench(out, "--methods", "proden", *LONG)
    assert res.exit_code == 130, res.output
    notes = [line for line in res.output.splitlines() if line.startswith("Warning: proden seed 1: ")]
    assert len(notes) == 1 and says in notes[0] and "the folder stays until the new run gets further" in notes[0]
    assert any("kept as it was" in line and "after 2 did not get as far" in line for line in res.output.splitlines())
    assert _snapshot(run) == before and sorted(p.name for p in (out / "runs").iterdir()) == [run.name]
    res = _bench(out, "--methods", "proden", *LONG, "--resume")  # and what was kept is what --resume uses
    assert res.exit_code == 0 and (run / "done").exists() and _lines(run) == 6, res.output


@pytest.mark.parametrize("new_done", [True, False])
def test_a_swap_killed_between_its_renames_is_put_right_by_the_next_bench(out, new_done):
    """``--overwrite`` swaps a retrained run in with two renames; a kill between them left the run folder missing
    (report and evaluate lost it) and both copies hidden for good.  The next bench holding the run's lock puts
    the finished new copy in place, else the old one, and removes the leftovers."""
    run = _run(out)
    old = out / "runs" / f".{run.name}.old-99999"
    new = out / "runs" / f".{run.name}.tmp-99999"
    shutil.copytree(run, new)
    if not new_done:
        (new / "done").unlink()
    (new / "marker").write_text("new")
    os.replace(run, old)
    res = _bench(out, "--methods", "proden")
    assert res.exit_code == 0, res.output
    assert f"put back from {(new if new_done else old).name}" in res.output
    assert sorted(p.name for p in (out / "runs").iterdir()) == [run.name] and (run / "done").exists()
    assert (run / "marker").exists() == new_done
    assert "reusing finished run" in res.output  # the put-back run is the finished run, reused


@pytest.mark.parametrize("flag", [[], ["--resume"], ["--overwrite"]])
def test_a_file_where_the_run_folder_goes_is_refused_not_replaced(out, flag):
    """An outside review: a file at runs/<run id> was set aside as runs/.<id>.old-<pid>, which nothing could
    remove, and the bench said nothing."""
    run = _run(out)
    shutil.rmtree(run)
    run.write_text("mine\n")
    res = _bench(out, "--methods", "proden", *flag)
    assert res.exit_code == 1 and "Traceback" not in res.output, res.output
    assert f"cannot write the results under --out {out}: {run} is a file, where pllzoo keeps a folder; move it " \
           "away" in " ".join(res.output.split())
    assert run.read_text() == "mine\n" and not list(run.parent.glob(".*old-*"))


def test_report_names_a_run_left_aside_by_a_killed_swap(out):
    """An outside review: killed between the two renames of a swap, the run lies in runs/.<id>.old-<pid> and
    report left it out without a word."""
    run = _run(out)
    aside = run.parent / f".{run.name}.old-4242"
    os.replace(run, aside)
    res = CliRunner().invoke(cli, ["report", str(out)])
    assert "Traceback" not in res.output, res.output
    line = " ".join(res.output.split())
    assert f"{run}: missing; a bench killed while it swapped the run in left it as {aside.name} (left out here): " \
           f"the next pllzoo bench on {out} puts it back (unless another bench holds runs/{run.name}.lock)" in line
    assert line.count("missing; a bench killed") == 1
    res = _bench(out, "--methods", "proden", "--resume")
    assert res.exit_code == 0 and run.is_dir() and not aside.exists(), res.output
    assert "missing; a bench killed" not in CliRunner().invoke(cli, ["report", str(out)]).output


@pytest.mark.parametrize("left", ["old", "tmp"])
def test_a_bench_of_other_runs_puts_a_run_left_aside_back_before_its_tables(out, left):
    """An outside review: killed between a swap's two renames, the run lay aside, and a later bench of *other*
    runs into the same --out rebuilt results.csv and summary.* without it ("cover every finished run under OUT")."""
    run = _run(out)
    aside = run.parent / f".{run.name}.{left}-4242"
    os.replace(run, aside)
    res = _bench(out, "--methods", "cc")
    assert res.exit_code == 0, res.output
    assert run.is_dir() and not aside.exists() and f"put back from {aside.name}" in res.output
    assert "missing; a bench killed" not in res.output
    rows = pd.read_csv(out / "results.csv")
    assert sorted(rows["method"]) == ["cc", "proden"] and run.name in set(rows["run"])


def test_a_live_benchs_swap_is_left_alone(out):
    """A run whose folder is missing while its lock is held (a live bench between its renames) is not touched."""
    run = _run(out)
    aside = run.parent / f".{run.name}.old-{os.getpid()}"
    os.replace(run, aside)
    lock = run.parent / f"{run.name}.lock"
    lock.write_text(f"{os.getpid()}\n")  # held by this live process
    try:
        from pllzoo.runfolders import recover_abandoned

        assert recover_abandoned(run.parent) == [] and aside.exists() and not run.exists()
    finally:
        lock.unlink()


def test_windows_liveness_asks_the_kernel_not_os_kill(monkeypatch):
    """On Windows ``os.kill(pid, 0)`` sends CTRL_C_EVENT and a dead PID is a plain OSError (an outside review: a
    dead bench's lock would hold its run for good): there a PID is alive when its handle opens with no exit code
    yet, or is refused (another user's)."""
    from pllzoo import runfolders

    class Kernel32:  # the three calls, for processes {pid: exit code (259: STILL_ACTIVE) or "denied"}
        def __init__(self, procs):
            self.procs, self.closed, self.error = procs, [], 0

        def OpenProcess(self, access, inherit, pid):  # noqa: N802 (the Win32 names)
            state = self.procs.get(pid)
            self.error = 5 if state == "denied" else 87
            return 0 if state in (None, "denied") else 1000 + pid

        def GetExitCodeProcess(self, handle, ref):  # noqa: N802
            ref._obj.value = self.procs[handle - 1000]
            return 1

        def CloseHandle(self, handle):  # noqa: N802
            self.closed.append(handle)

    k = Kernel32({11: 259, 12: 0, 13: "denied"})
    alive = {pid: runfolders._windows_pid_alive(pid, k, lambda: k.error) for pid in (11, 12, 13, 14)}
    assert alive == {11: True, 12: False, 13: True, 14: False} and k.closed == [1011, 1012]
    calls = []
    monkeypatch.setattr(runfolders.os, "name", "nt")
    monkeypatch.setattr(runfolders, "_windows_pid_alive", lambda pid: calls.append(pid) or False)
    monkeypatch.setattr(runfolders.os, "kill", lambda *a: pytest.fail("os.kill on Windows"))
    assert runfolders.pid_alive(4321) is False and calls == [4321]


@pytest.mark.parametrize("finished_run", [True, False])
def test_a_checkpoint_the_system_will_not_read_is_left_alone(out, monkeypatch, finished_run):
    """An outside review: a checkpoint.pt with mode 000 (or an I/O error, a stale network handle) was taken for a
    damaged file: put aside as checkpoint.pt.damaged and the run retrained from the start, exit 0.  Now one line
    naming the file and the cause, exit 1, and the run folder as it was; report, which does not read it, reads
    the run."""
    import zipfile

    import torch

    run = _run(out)
    ckpt = run / "checkpoint.pt"
    assert ckpt.is_file()
    if not finished_run:
        (run / "done").unlink()  # --resume reads the whole checkpoint to continue the run
    before = _snapshot(run)
    real_zip, real_load = zipfile.ZipFile, torch.load

    def refuse(real):
        def opened(path, *args, **kwargs):
            if str(path) == str(ckpt):
                raise PermissionError(13, "Permission denied", str(path))
            return real(path, *args, **kwargs)
        return opened

    monkeypatch.setattr(zipfile, "ZipFile", refuse(real_zip))
    monkeypatch.setattr(torch, "load", refuse(real_load))
    res = _bench(out, "--methods", "proden", "--resume")
    assert res.exit_code == 1, res.output
    assert res.output.strip().splitlines()[-1] == (f"Error: cannot read {ckpt}: Permission denied; it is left as it "
                                                   "is: fix its permissions or the disk, then run again")
    assert _snapshot(run) == before
    if finished_run:
        assert CliRunner().invoke(cli, ["report", str(out)]).exit_code == 0


def test_a_full_disk_under_a_checkpoint_names_the_file_and_the_cause(tmp_path, monkeypatch):
    """An outside review: a full disk while torch.save wrote the checkpoint failed the run as "RuntimeError:
    [enforce fail at inline_container.cc:672] . unexpected pos 125248 vs 125176" (torch's, wrapping the
    OSError), naming neither the file nor the cause; `archive` on a full disk blamed standard output."""
    import errno

    import torch

    def full(obj, f, *args, **kwargs):
        try:
            raise OSError(errno.ENOSPC, "No space left on device")
        except OSError:
            raise RuntimeError("[enforce fail at inline_container.cc:672] . unexpected pos 125248 vs 125176")

    monkeypatch.setattr(torch, "save", full)
    res = _bench(tmp_path / "out", "--methods", "proden")
    assert res.exit_code == 1, res.output
    (run,) = (p for p in (tmp_path / "out" / "runs").iterdir() if p.is_dir())
    assert f"No space left on device: '{run / 'checkpoint.pt'}'" in res.output, res.output
    assert "inline_container" not in res.output and not list(run.glob("*.tmp"))
    from pllzoo.atomic import write_atomic

    def closed_on_a_full_disk(f):
        raise OSError(errno.ENOSPC, "No space left on device")  # said when the file is closed: no file named

    with pytest.raises(OSError) as info:
        write_atomic(tmp_path / "runs.jsonl.xz", closed_on_a_full_disk)
    assert info.value.filename == str(tmp_path / "runs.jsonl.xz") and info.value.errno == errno.ENOSPC


def test_a_lock_of_another_host_left_untouched_is_stale_and_a_held_lock_is_touched(tmp_path, monkeypatch):
    """An outside review: a bench killed by a scheduler's SIGKILL on node A left a lock that a requeue on node B
    skipped for good (exit 75 every time).  A holder touches its locks every HEARTBEAT_S; another host's lock
    untouched for REMOTE_STALE_S is stale."""
    import time

    from pllzoo import runfolders
    from pllzoo.runfolders import REMOTE_STALE_S, lock_holder, take_lock

    lock = tmp_path / "run.lock"
    lock.write_text("3999999 node-elsewhere 123\n")
    assert lock_holder(lock) == "3999999 on node-elsewhere"
    old = time.time() - REMOTE_STALE_S - 60
    os.utime(lock, (old, old))
    assert lock_holder(lock) is None and take_lock(lock) is None  # taken over
    monkeypatch.setattr(runfolders, "HEARTBEAT_S", 0.05)
    runfolders._hold(lock)  # (a thread already sleeping its minute is joined by a new one only if it died)
    if runfolders._beat is not None and runfolders._beat.is_alive():
        beat = threading.Thread(target=runfolders._heartbeat, daemon=True)
        beat.start()
    os.utime(lock, (old, old))
    deadline = time.time() + 10
    while lock.stat().st_mtime < time.time() - 60 and time.time() < deadline:
        time.sleep(0.05)
    assert lock.stat().st_mtime > time.time() - 60  # touched again: its holder lives
    lock.unlink()
    time.sleep(0.2)
    assert lock not in runfolders._held  # released: forgotten


def test_a_wait_for_the_results_lock_is_said_once(tmp_path, monkeypatch):
    """An outside review: a bench waited two minutes for OUT/results.lock without a word."""
    import socket
    import warnings

    from pllzoo import runfolders

    (tmp_path / "results.lock").write_text(f"{os.getppid()} {socket.gethostname()}\n")
    monkeypatch.setattr(runfolders, "SAY_WAIT_S", 0.1)
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        with pytest.raises(runfolders.ResultsBusy, match="held by another bench"):
            with runfolders.results_lock(tmp_path, wait_s=0.5):
                pass
    lines = [str(w.message) for w in said]
    assert lines == [f"waiting for {tmp_path / 'results.lock'}, held by another bench (pid {os.getppid()}) "
                     "rebuilding the tables, up to 0.5 s"], lines


def test_a_truncated_checkpoint_is_damaged_not_unreadable(tmp_path):
    """A review: torch's reader says EINVAL (an OSError) for a checkpoint cut short, which was taken for a read
    the system refused, so --resume never got past it.  Every cut is damage."""
    import torch

    from pllzoo.checkpoint import read_checkpoint
    from pllzoo.checkpoint_file import CheckpointError, CheckpointUnreadable

    path = tmp_path / "checkpoint.pt"
    torch.save({"w": torch.zeros(20_000)}, path)
    whole = path.read_bytes()
    for cut in range(64, len(whole), len(whole) // 40):
        path.write_bytes(whole[:cut])
        with pytest.raises(CheckpointError) as info:
            read_checkpoint(path)
        assert not isinstance(info.value, CheckpointUnreadable), cut


def test_a_lock_line_of_odd_bytes_or_pid_0_is_garbage(tmp_path):
    """A review: bytes that are not UTF-8 were a UnicodeDecodeError traceback, and `0 HOST` (os.kill(0, 0)
    signals the group, so it "lives") held the run for good."""
    import socket
    import time

    from pllzoo.runfolders import lock_holder, take_lock

    lock = tmp_path / "run.lock"
    for text in (b"\xff\xfe 12\n", f"0 {socket.gethostname()}\n".encode()):
        lock.write_bytes(text)
        assert lock_holder(lock) == "unknown"  # fresh: its writer may be about to write it
        old = time.time() - 60
        os.utime(lock, (old, old))
        assert lock_holder(lock) is None and take_lock(lock) is None
        lock.unlink()
