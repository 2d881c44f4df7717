"""Checkpoint cadence, clean stops on SIGINT/SIGTERM, result-neutral bookkeeping, torch threads."""

from __future__ import annotations

import dataclasses
import io
import json
import os
import signal
import sys
import time
from pathlib import Path

import pytest
import torch

import fake_clock
from conftest import REPO, shared_data_dir
from pllzoo import bench, checkpoint, interrupts, threads
from pllzoo.checkpoint import Stopped
from pllzoo.data.base import DataOptions
from pllzoo.registry import get_registry
from pllzoo.results import read_jsonl, run_id
from pllzoo.run import BOOKKEEPING_FIELDS, TrainConfig
from pllzoo.trainer import Trainer

CFG = TrainConfig(model="mlp", epochs=4, lr=0.05, weight_decay=1e-4, batch_size=16)


def _strip(records):
    return [{k: v for k, v in r.items() if k != "wall_s"} for r in records]


def _trainer(data, run_dir=None, cfg=CFG, method="proden", overrides=None, **kwargs):
    reg = get_registry()
    comps = reg.build_components(reg.method(method), overrides or {})
    if run_dir is not None:
        run_dir.mkdir(exist_ok=True)
    return Trainer(data, comps, cfg, seed=3, device=torch.device("cpu"), run_dir=run_dir, **kwargs)


def _same_weights(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


# ---------------------------------------------------------------------- cadence
@pytest.mark.parametrize("changes,saves", [
    ({"epochs": 5, "checkpoint_every": 2}, [(0, 1), (0, 3), (0, 4)]),  # every 2 epochs and at the end
    ({"epochs": 7, "checkpoint_minutes": 0.5}, [(0, 2), (0, 5), (0, 6)]),  # 10 s epochs: every 3rd, and the end
    ({"epochs": 7}, [(0, 6)]),  # defaults: a run shorter than 10 minutes saves at its end only
])
def test_checkpoint_cadence(tiny_data, tmp_path, monkeypatch, changes, saves):
    clock = fake_clock.install(monkeypatch)
    _trainer(tiny_data, tmp_path / "run", dataclasses.replace(CFG, **changes)).fit()
    assert clock.saves == saves


def test_a_checkpoint_ends_every_stage(tiny_data, tmp_path, monkeypatch):
    clock = fake_clock.install(monkeypatch)
    solar = {"estimator.est_epochs": 2, "label_update.queue_length": 2}
    _trainer(tiny_data, tmp_path / "run", method="solar", overrides=solar).fit()
    assert clock.saves == [(0, 1), (1, 3)]


def test_resume_between_checkpoints_recomputes_and_rewrites_the_log(tiny_data, tmp_path):
    cfg = dataclasses.replace(CFG, epochs=5, checkpoint_every=2)
    full = _trainer(tiny_data, tmp_path / "full", cfg)
    full_records = full.fit()

    class Crash(Exception):
        pass

    def crash_after_three(records):
        if len(records) == 3:  # a checkpoint holds 2 epochs; the 3rd is lost
            raise Crash

    with pytest.raises(Crash):
        _trainer(tiny_data, tmp_path / "cut", cfg, on_epoch=crash_after_three).fit()
    seen = []
    resumed = _trainer(tiny_data, tmp_path / "cut", cfg, on_resume=lambda records: seen.append(len(records)))
    assert _strip(resumed.fit(resume=True)) == _strip(full_records)
    assert seen == [2]
    assert _same_weights(resumed.model.state_dict(), full.model.state_dict())


def test_bench_log_matches_the_checkpoint_after_a_resume(registry, tmp_path, monkeypatch):
    """A resume that stops at once leaves log.jsonl at the checkpoint's records, not the lost ones."""
    fake_clock.install(monkeypatch)
    (p,) = bench.plan(registry, ["proden"], "synthetic-lt", [1], DataOptions(), epochs=6, device="cpu",
                      hp={"train.checkpoint_every": "2"})
    run_dir = tmp_path / "runs" / p.run_id

    def crash_after_three(plan, record):
        if record["epoch"] == 3:
            raise checkpoint.Abandoned(signal.SIGINT)  # as a second Ctrl-C in the middle of epoch 4

    with pytest.raises(checkpoint.Abandoned):
        bench.execute(registry, [p], tmp_path, on_epoch=crash_after_three)
    assert len(read_jsonl(run_dir / "log.jsonl")) == 3
    with pytest.raises(Stopped):  # 1 s left: no epoch fits, so it stops after the one every part trains
        bench.execute(registry, [p], tmp_path, resume=True, time_limit=1 / 60)
    log = read_jsonl(run_dir / "log.jsonl")  # epoch 3 retrained from the checkpoint of epoch 2, not the lost one
    assert [r["epoch"] for r in log] == [1, 2, 3]
    assert torch.load(run_dir / "checkpoint.pt", weights_only=False)["records"] == log


def test_the_log_grows_by_one_appended_line_an_epoch(registry, tmp_path, monkeypatch):
    """log.jsonl is written whole at the first epoch (a failed earlier part's lines go) and at the end, appended
    to in between (an outside review: rewritten whole each epoch, a 1,100-epoch run's log cost grew with the
    epoch number); after each epoch it holds exactly the records so far."""
    (p,) = bench.plan(registry, ["proden"], "synthetic-lt", [1], DataOptions(), epochs=4, device="cpu",
                      hp={"train.checkpoint_every": "0"})
    run_dir = tmp_path / "runs" / p.run_id
    run_dir.mkdir(parents=True)
    (run_dir / "log.jsonl").write_text('{"epoch": 9, "epochs": 9}\n' * 5)  # a failed part without a checkpoint
    calls, seen = [], []
    for name in ("write_jsonl", "append_jsonl"):
        real = getattr(bench, name)
        monkeypatch.setattr(bench, name, lambda path, x, real=real, name=name: calls.append((name, path))
                            or real(path, x))

    def logged(plan, record):
        seen.append(read_jsonl(calls[-1][1]))  # the folder it trains in

    bench.execute(registry, [p], tmp_path, on_epoch=logged)
    assert [c for c, _ in calls] == ["write_jsonl", "append_jsonl", "append_jsonl", "append_jsonl", "write_jsonl"]
    records = read_jsonl(run_dir / "log.jsonl")
    assert [r["epoch"] for r in records] == [1, 2, 3, 4] and seen == [records[:n] for n in range(1, 5)]


# ---------------------------------------------------------------------- signals
@pytest.fixture
def default_signals():
    if signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL or signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
        pytest.skip("SIGINT/SIGTERM are handled by someone else here")


@pytest.mark.parametrize("sig", interrupts.STOP_SIGNALS)  # SIGHUP, SIGUSR1/2 killed the run (an outside review)
def test_a_signal_stops_at_the_epoch_boundary_with_a_checkpoint(tiny_data, tmp_path, default_signals, sig):
    full = _trainer(tiny_data, tmp_path / "full")
    full_records = full.fit()

    def signal_after_two(records):
        if len(records) == 2:
            os.kill(os.getpid(), sig)

    with pytest.raises(Stopped) as stop:
        _trainer(tiny_data, tmp_path / "cut", on_epoch=signal_after_two).fit()
    assert stop.value.exit_code == 128 + sig
    assert str(stop.value) == f"stopped by {sig.name} after epoch 2/4 of stage 'train'"
    assert torch.load(tmp_path / "cut" / "checkpoint.pt", weights_only=False)["epoch"] == 1
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL  # handlers are given back
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    assert signal.getsignal(sig) in (signal.SIG_DFL, signal.default_int_handler)
    resumed = _trainer(tiny_data, tmp_path / "cut")
    assert _strip(resumed.fit(resume=True)) == _strip(full_records)
    assert _same_weights(resumed.model.state_dict(), full.model.state_dict())


def test_a_second_signal_abandons_the_epoch(tiny_data, tmp_path, default_signals, monkeypatch):
    monkeypatch.setattr("pllzoo.checkpoint.REPEAT_S", 0.0)  # the second counts however soon it comes

    def twice(records):
        os.kill(os.getpid(), signal.SIGINT)
        os.kill(os.getpid(), signal.SIGINT)

    with pytest.raises(checkpoint.Abandoned) as abandoned:
        _trainer(tiny_data, tmp_path / "cut", on_epoch=twice).fit()
    assert abandoned.value.exit_code == 130 and str(abandoned.value) == "SIGINT"
    assert not (tmp_path / "cut" / "checkpoint.pt").exists()  # no boundary was saved before the first epoch's end
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_a_repeat_within_a_second_is_the_same_stop(tiny_data, tmp_path, default_signals):
    """``timeout`` (without --foreground) sends its signal to the process, then to its group: the process gets
    it twice at once, which is one stop with a checkpoint, not "abandon the epoch"."""
    def twice(records):
        os.kill(os.getpid(), signal.SIGTERM)
        os.kill(os.getpid(), signal.SIGTERM)

    with pytest.raises(Stopped, match="stopped by SIGTERM after epoch 1/"):
        _trainer(tiny_data, tmp_path / "cut", on_epoch=twice).fit()
    assert (tmp_path / "cut" / "checkpoint.pt").exists()


def test_the_stop_notice_does_not_touch_sys_stderr(tiny_data, tmp_path, default_signals, capfd, monkeypatch):
    """The handler's notice is one write to descriptor 2: a signal landing inside the loop's own write to
    sys.stderr (here: a stream that is busy) must not raise "reentrant call" into the run (it printed there)."""
    class Busy(io.StringIO):
        def write(self, text):
            raise RuntimeError("reentrant call inside <_io.BufferedWriter name='<stderr>'>")

    def signal_now(records):
        with monkeypatch.context() as m:
            m.setattr(sys, "stderr", Busy())
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(0.01)  # the handler runs here, while the stream is busy

    with pytest.raises(Stopped, match="stopped by SIGTERM after epoch 1/"):
        _trainer(tiny_data, tmp_path / "cut", on_epoch=signal_now).fit()
    assert "SIGTERM received: stopping with a checkpoint after the current epoch" in capfd.readouterr().err


def test_a_handler_someone_installed_is_left_alone(tiny_data):
    def mine(signum, frame):
        pass

    previous = signal.signal(signal.SIGTERM, mine)
    try:
        _trainer(tiny_data, on_epoch=lambda records: os.kill(os.getpid(), signal.SIGTERM)).fit()  # no stop
        assert signal.getsignal(signal.SIGTERM) is mine
    finally:
        signal.signal(signal.SIGTERM, previous)


# ---------------------------------------------------------------------- run ids
def test_bookkeeping_stays_out_of_the_run_id(registry, tmp_path, restore_threads):
    hp = {"train.checkpoint_every": "3", "train.checkpoint_minutes": "1.5"}
    (plain,) = bench.plan(registry, ["proden"], "synthetic-lt", [1], DataOptions(), epochs=2, device="cpu")
    (kept,) = bench.plan(registry, ["proden"], "synthetic-lt", [1], DataOptions(), epochs=2, device="cpu", hp=hp)
    assert kept.run_id == plain.run_id and kept.config == plain.config
    assert (kept.train.checkpoint_every, kept.train.checkpoint_minutes) == (3, 1.5)
    assert not BOOKKEEPING_FIELDS & set(plain.config["train"])
    bench.execute(registry, [kept], tmp_path, threads=1)
    env = json.loads((tmp_path / "runs" / kept.run_id / "env.json").read_text())
    assert env["bookkeeping"] == {"checkpoint_every": 3, "checkpoint_minutes": 1.5} and env["torch_threads"] == 1


def test_bad_cadence_is_a_one_line_error(registry):
    with pytest.raises(bench.PLLZooError, match=r"^bad value for train.checkpoint_every: -1; must be ≥ 0$"):
        bench.plan(registry, ["proden"], "synthetic-lt", [1], DataOptions(), hp={"train.checkpoint_every": "-1"})


def test_plan_reproduces_a_committed_run_id(registry):
    """``bench.plan`` of the recorded command gives the committed run's config and id (it keeps resuming), the
    run read from ``runs/`` or from the archive; one recorded under its old id (with machine paths) gives the
    path-free config and id it migrates to (pllzoo.migrate)."""
    from pllzoo import archive
    from pllzoo.portable import portable

    out = REPO / "benchmarks" / "cifar10lt-cpu" / "results-phi0.5"
    recorded = {r.run: r.config for r in archive.read(out).values()}
    recorded.update({c.parent.name: json.loads(c.read_text()) for c in out.glob("runs/*/config.json")})
    runs = {name: config for name, config in recorded.items() if name.startswith("cc__cifar10lt__s1-")}
    if not runs or not shared_data_dir().is_dir():
        pytest.skip("committed CIFAR-10-LT CPU run or offline data absent")
    opts = DataOptions(data_dir=shared_data_dir(), phi=0.5, imb=100.0)
    hp = {"train.model": "cnn", "train.lr": "0.05", "train.schedule": "cosine", "train.weight_decay": "5e-4"}
    (p,) = bench.plan(registry, ["cc"], "cifar10lt", [1], opts, epochs=40, hp=hp, device="cpu")
    config = json.loads(json.dumps(p.config, default=str))
    assert any(config == portable(rec) and p.run_id == run_id(portable(rec)) and run_id(rec) == name
               for name, rec in runs.items())


# ---------------------------------------------------------------------- threads
@pytest.fixture
def restore_threads():
    before = torch.get_num_threads()
    yield
    torch.set_num_threads(before)


def test_default_threads_never_exceed_the_cpus_or_torch(monkeypatch):
    monkeypatch.setattr(threads, "available_cpus", lambda: 2)
    monkeypatch.setattr(threads, "TORCH_DEFAULT", 64)  # torch counted the host's cores
    assert [threads.default_threads(j) for j in (1, 2, 4)] == [2, 1, 1]
    monkeypatch.setattr(threads, "available_cpus", lambda: 16)
    monkeypatch.setattr(threads, "TORCH_DEFAULT", 8)  # e.g. OMP_NUM_THREADS=8
    assert [threads.default_threads(j) for j in (1, 2, 3)] == [8, 4, 2]


@pytest.mark.parametrize("files,cpus", [
    ({"cpu.max": "150000 100000\n"}, 2), ({"cpu.max": "max 100000\n"}, None),
    ({"cpu/cpu.cfs_quota_us": "400000\n", "cpu/cpu.cfs_period_us": "100000\n"}, 4),
    ({"cpu/cpu.cfs_quota_us": "-1\n", "cpu/cpu.cfs_period_us": "100000\n"}, None), ({}, None),
])
def test_cgroup_quota(tmp_path, files, cpus):
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    assert threads.cgroup_quota(tmp_path) == cpus


def test_resuming_with_other_threads_warns(registry, tmp_path, restore_threads):
    (p,) = bench.plan(registry, ["proden"], "synthetic-lt", [1], DataOptions(), epochs=2, device="cpu")
    run_dir = Path(tmp_path) / "runs" / p.run_id
    bench.execute(registry, [p], tmp_path, threads=1)
    (run_dir / "done").unlink()  # as if it had stopped after its last checkpoint
    with pytest.warns(UserWarning, match="ran with 1 torch thread, resumes with 2 torch threads: a CPU run repeats bit for bit only"):
        bench.execute(registry, [p], tmp_path, resume=True, threads=2)


def test_a_checkpoint_from_a_machine_with_more_gpus_restores_the_states_there_are(monkeypatch):
    """An outside review: set_rng_state_all raised IndexError (a traceback) resuming on fewer GPUs than the
    checkpoint saw, e.g. a run begun on 8 GPUs and continued on a lent single one (issue 11)."""
    import torch

    from pllzoo.checkpoint import restore_rng

    calls = []
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    monkeypatch.setattr(torch.cuda, "set_rng_state", lambda state, device: calls.append((int(state[0]), device)))
    cpu = torch.get_rng_state()
    restore_rng({"rng": {"torch": cpu, "cuda": [torch.full((8,), 7, dtype=torch.uint8),
                                                torch.full((8,), 9, dtype=torch.uint8)]}})
    assert calls == [(7, 0)] and torch.equal(torch.get_rng_state(), cpu)


def test_an_append_cut_short_by_a_full_disk_leaves_the_log_whole(tmp_path, monkeypatch):
    """A full disk part-way through an epoch's line: the log is cut back to its last whole line (``--resume`` and
    ``report`` read every line; a torn one would be a damaged run)."""
    import errno

    from pllzoo import results

    log = tmp_path / "log.jsonl"
    results.write_jsonl(log, [{"epoch": 1, "epochs": 3}])
    real = os.write

    def half(fd, data):
        real(fd, bytes(data[:5]))
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(results.os, "write", half)
    with pytest.raises(OSError):
        results.append_jsonl(log, {"epoch": 2, "epochs": 3})
    monkeypatch.undo()
    assert read_jsonl(log) == [{"epoch": 1, "epochs": 3}]
    results.append_jsonl(log, {"epoch": 2, "epochs": 3})
    assert [r["epoch"] for r in read_jsonl(log)] == [1, 2]
