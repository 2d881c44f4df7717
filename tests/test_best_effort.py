"""Standard error that stops taking writes (a `| tee` ended by the same Ctrl-C, a closed terminal under nohup, a
full disk, `2>&-`) ends no run, and the eager options and `--config -` say so in one line (an outside review of
terminals and exit codes: a broken stderr pipe turned a clean SIGINT stop into a failed run without checkpoint)."""

from __future__ import annotations

import io
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO
from pllzoo import bench, best_effort
from pllzoo.checkpoint import Stopped
from pllzoo.data.base import DataOptions
from pllzoo.registry import get_registry
from pllzoo.results import read_jsonl

LINUX_FDS = pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="needs /proc/self/fd (Linux)")


def _broken_pipe() -> int:
    """The write end of a pipe whose reader is gone (a write raises BrokenPipeError: Python ignores SIGPIPE)."""
    r, w = os.pipe()
    os.close(r)
    return w


class _Raising(io.StringIO):
    def write(self, text):
        raise OSError(28, "No space left on device")


def test_the_first_failed_write_ends_the_output_and_nothing_raises():
    stream = best_effort.BestEffort(_Raising(), fd=None)
    assert stream.write("epoch 1/4\n") == len("epoch 1/4\n")
    assert stream.failed.errno == 28
    stream.writelines(["a", "b"])
    stream.flush()
    print("after", file=stream, flush=True)  # what print and a progress line do: no error, nothing written


def test_a_stream_that_takes_writes_gets_them_and_its_own_attributes():
    inner = io.StringIO()
    stream = best_effort.BestEffort(inner, fd=None)
    print("one", file=stream, flush=True)
    assert inner.getvalue() == "one\n" and stream.failed is None
    assert stream.getvalue() == "one\n"  # anything else is the stream's own


def test_the_binary_buffer_is_guarded_and_fails_with_its_stream():
    """click writes UTF-8 bytes to the buffer of a stream whose encoding is ASCII (LC_ALL=C)."""
    raw = _Raising()
    raw.buffer = _Raising()
    stream = best_effort.BestEffort(raw, fd=None)
    assert stream.buffer.write(b"\xc3\xa9") == 2 and stream.failed.errno == 28
    assert stream.write("after") == 5 and stream.buffer.failed is stream.failed


@LINUX_FDS
def test_a_broken_pipe_points_the_descriptor_at_the_null_device():
    w = _broken_pipe()
    stream = best_effort.BestEffort(open(w, "w", closefd=False), fd=w)
    try:
        print("SIGINT received", file=stream, flush=True)
        assert isinstance(stream.failed, BrokenPipeError)
        assert os.readlink(f"/proc/self/fd/{w}") == os.devnull
        os.write(w, b"C code writing there: no error")
    finally:
        os.close(w)


@LINUX_FDS
def test_a_signal_handlers_notice_to_a_broken_pipe_is_dropped(monkeypatch):
    """The ``--jobs`` parent's SIGINT notice, written unbuffered from its signal handler, is the first write after
    a ``| tee`` ended (an outside review: it raised BrokenPipeError, and the bench exited 1, not 130)."""
    w = _broken_pipe()
    monkeypatch.setattr(best_effort, "STDERR", w)
    try:
        best_effort.notice("SIGINT received: the running runs stop")
        assert os.readlink(f"/proc/self/fd/{w}") == os.devnull
    finally:
        os.close(w)


def test_a_broken_stderr_during_training_is_a_clean_stop_with_a_checkpoint(tmp_path, monkeypatch):
    """The review's case in-process: stderr's reader gone, then SIGINT: the notice, the progress lines and the stop
    line go nowhere, and the run stops at the epoch boundary with its checkpoint, as on a working terminal."""
    if signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
        pytest.skip("SIGINT is handled by someone else here")
    w = _broken_pipe()
    stream = best_effort.BestEffort(open(w, "w", closefd=False), fd=None)
    monkeypatch.setattr(sys, "stderr", stream)
    registry = get_registry()
    (p,) = bench.plan(registry, ["proden"], "synthetic-lt", [1], DataOptions(), epochs=6, device="cpu")

    def interrupt_after_two(plan, record):
        print(f"epoch {record['epoch']}", file=sys.stderr, flush=True)  # as a progress line
        if record["epoch"] == 2:
            os.kill(os.getpid(), signal.SIGINT)

    try:
        with pytest.raises(Stopped) as stop:
            bench.execute(registry, [p], tmp_path, on_epoch=interrupt_after_two)
    finally:
        os.close(w)
    run = tmp_path / "runs" / p.run_id
    assert stop.value.exit_code == 130 and isinstance(stream.failed, BrokenPipeError)
    assert (run / "checkpoint.pt").is_file() and not (run / "error.txt").exists()
    assert [r["epoch"] for r in read_jsonl(run / "log.jsonl")] == [1, 2]


def _pllzoo(*args, **kw) -> subprocess.CompletedProcess:
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    return subprocess.run([sys.executable, "-m", "pllzoo", *args], cwd=REPO, env=env, text=True, timeout=300, **kw)


def test_the_program_stops_cleanly_when_its_stderr_pipe_is_closed(tmp_path):
    """`pllzoo bench ... 2>&1 | tee log`, then Ctrl-C: tee ends first, pllzoo's notice meets a closed pipe; with
    ``--jobs 2``, whose parent writes its notice from the signal handler (one bench in-process above)."""
    out = tmp_path / "out"
    proc = subprocess.Popen([sys.executable, "-m", "pllzoo", "bench", "--methods", "proden,cc", "--epochs", "400",
                             "--threads", "1", "--jobs", "2", "--out", str(out)], cwd=REPO, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True, env={**os.environ, "OMP_NUM_THREADS": "1"})
    try:
        started = set()  # both runs past their first epoch (one run alone was flaky under load: the other
        for line in proc.stderr:  # had no checkpoint yet)
            if "epoch 1/" in line:
                started.add(line.split()[0])
            if started == {"proden", "cc"}:
                break
        proc.stderr.close()  # the reader is gone
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=300) == 130
    finally:
        proc.kill()
    runs = sorted((out / "runs").iterdir())
    assert len(runs) == 2 and all((r / "checkpoint.pt").is_file() and not (r / "error.txt").exists() for r in runs)


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")
@pytest.mark.parametrize("option", ["--version", "--help"])
def test_eager_options_to_a_full_disk_are_one_line(option):
    with open("/dev/full", "w") as full:
        res = _pllzoo(option, stdout=full, stderr=subprocess.PIPE)
    assert res.returncode == 1 and res.stderr == "Error: cannot write: No space left on device (standard output?)\n"


@pytest.mark.skipif(os.name != "posix", reason="closes a descriptor in the child")
def test_config_on_a_closed_stdin_is_one_line(tmp_path):
    res = _pllzoo("bench", "--config", "-", "--out", str(tmp_path / "x"), stdin=subprocess.DEVNULL,
                  capture_output=True, preexec_fn=lambda: os.close(0))
    assert res.returncode == 1, res.stderr
    assert res.stderr == "Error: --config -: standard input is closed; give the TOML on it, or --config FILE\n"


@pytest.mark.slow
@pytest.mark.skipif(os.name != "posix", reason="closes a descriptor in the child")
def test_a_bench_with_stderr_closed_runs(tmp_path):
    """`2>&-`: the plan, progress and table's notes have nowhere to go; the run and its files do not depend on them."""
    res = _pllzoo("bench", "--methods", "proden", "--epochs", "1", "--threads", "1", "--out", str(tmp_path),
                  stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, preexec_fn=lambda: os.close(2))
    assert res.returncode == 0 and "proden" in res.stdout
    assert (tmp_path / "results.csv").is_file()


@pytest.mark.skipif(os.name != "posix", reason="closes a descriptor in the child")
@pytest.mark.parametrize("args", [("methods",)])
def test_a_listing_to_a_closed_stdout_is_one_line(args):
    """`pllzoo methods >&-`: the listing, the command's output, went nowhere and the exit was 0 (an outside review);
    now its first write fails, as under a full disk."""
    res = _pllzoo(*args, stdin=subprocess.DEVNULL, stderr=subprocess.PIPE, preexec_fn=lambda: os.close(1))
    assert res.returncode == 1 and res.stderr == "Error: cannot write: standard output is closed\n", res.stderr


@pytest.mark.skipif(not hasattr(signal, "SIGUSR1"), reason="POSIX signals")
@pytest.mark.parametrize("name, sigint", [("SIGTERM", "default"), ("SIGHUP", "default"), ("SIGUSR1", "default"),
                                          ("SIGTERM", "ignored")])
def test_a_stop_signal_outside_a_run_ends_the_program_in_one_line(name, sigint):
    """An outside review: SIGTERM while a bench loaded or planned ended the program with no word (exit 143), and
    SIGHUP/SIGUSR1 (a closed ssh session, `#SBATCH --signal=USR1@60`) killed it even while a run trained.  Also
    where SIGINT is ignored (`cmd &` in a batch script; a review found SIGTERM silent there)."""
    script = ("import os, signal, sys, time\n"
              + ("signal.signal(signal.SIGINT, signal.SIG_IGN)\n" if sigint == "ignored" else "")
              + "from pllzoo.cli import cli, main\n"
              "@cli.command()\n"
              "def poke():\n"
              f"    os.kill(os.getpid(), signal.{name})\n"
              "    time.sleep(5)\n"
              "    print('not stopped')\n"
              "sys.argv = ['pllzoo', 'poke']\n"
              "main()\n")
    res = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=REPO, timeout=120)
    assert res.returncode == 128 + getattr(signal, name), (res.returncode, res.stderr)
    assert res.stderr == f"stopped by {name}\n" and res.stdout == "", res.stderr


@pytest.mark.slow
@pytest.mark.skipif(os.name != "posix", reason="closes a descriptor in the child")
def test_a_bench_whose_table_cannot_be_printed_says_its_runs_are_done(tmp_path):
    """`pllzoo bench ... >&-`: the runs train and their results are written; the line that ends the command
    (exit 1: its output, the table, is lost) says so (a review: it named standard output only)."""
    res = _pllzoo("bench", "--methods", "proden", "--epochs", "1", "--subset", "300", "--threads", "1", "--out",
                  str(tmp_path), stdin=subprocess.DEVNULL, stderr=subprocess.PIPE, preexec_fn=lambda: os.close(1))
    assert res.returncode == 1 and res.stderr.splitlines()[-1] == (
        f"Error: cannot print the table (standard output is closed); the runs are done: {tmp_path / 'results.csv'} "
        "and summary.md hold them"), res.stderr
    assert (tmp_path / "summary.md").is_file()
