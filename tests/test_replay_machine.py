"""``--from-run`` on CPU says when the machine differs from the record's in what picks a run's last bits (an
outside review replayed a recorded study on another CPU and got other numbers from epoch 1 without a word)."""

from __future__ import annotations

import importlib.metadata as md
import json

import torch
from click.testing import CliRunner

from pllzoo.cli import cli
from pllzoo.runfolders import machine_change
from pllzoo.results import env_info


def _here(threads: int = 1) -> dict:
    env = env_info("cpu")
    env["torch_threads"] = threads
    return env


def test_the_same_machine_says_nothing():
    assert machine_change(_here(1), 1) is None
    assert machine_change(None, 1) is None


def test_each_difference_is_named_with_both_values():
    env = _here(1) | {"cpu": "Intel Xeon", "cpu_capability": "AVX9"}
    env["versions"] = dict(env["versions"], torch="1.0.0")
    said = machine_change(env, 2)
    now = torch.backends.cpu.get_cpu_capability()
    assert said.startswith(f"recorded with CPU 'Intel Xeon', torch's AVX9 kernels, 1 torch thread, torch 1.0.0, "
                           f"replayed with CPU '{env_info('cpu')['cpu']}', torch's {now} kernels, 2 torch threads, "
                           f"torch {md.version('torch')}: a CPU run repeats bit for bit only"), said
    assert said.endswith("(--threads 1 repeats its thread count)")
    assert "--threads" not in machine_change(_here(1) | {"cpu": "Intel Xeon"}, 1)


def test_a_record_without_a_cpu_says_so():
    env = {k: v for k, v in _here(1).items() if k not in ("cpu", "cpu_capability")}
    said = machine_change(env, 1)
    assert said.startswith("the record names no CPU (made before env.json kept it): a CPU run repeats"), said
    said = machine_change(env, 3)
    assert "; recorded with 1 torch thread, replayed with 3 torch threads:" in said, said


def test_a_replay_on_another_cpu_warns(tmp_path):
    out = tmp_path / "out"
    args = ["bench", "--methods", "proden", "--dataset", "synthetic-lt", "--seeds", "1", "--epochs", "1",
            "--threads", "1", "--out", str(out)]
    assert CliRunner().invoke(cli, args).exit_code == 0
    (run,) = (p for p in (out / "runs").iterdir() if p.is_dir())
    replay = ["bench", "--from-run", str(run), "--threads", "1", "--out", str(tmp_path / "again"), "--dry-run"]
    res = CliRunner().invoke(cli, replay)
    assert res.exit_code == 0 and "torch's" not in res.output and "names no CPU" not in res.output, res.output
    env = json.loads((run / "env.json").read_text())
    (run / "env.json").write_text(json.dumps(env | {"cpu_capability": "AVX9"}))
    res = CliRunner().invoke(cli, replay)
    assert res.exit_code == 0, res.output
    assert f"--from-run {run}: recorded with torch's AVX9 kernels, replayed with torch's" in res.output, res.output


def test_a_run_resumed_in_parts_that_ran_otherwise_says_no_replay_repeats_it():
    """A review: only the last part was compared, so a replay at its thread count got no warning and differed,
    while one at the first part's count was told to use the last's."""
    env = _here(2) | {"earlier_parts": [{"torch_threads": 1, "cpu": env_info("cpu")["cpu"]}, {"torch_threads": 1}]}
    for threads in (1, 2):
        said = machine_change(env, threads)
        assert said == ("the run was resumed in parts that ran otherwise (1 torch thread then 2 torch threads; "
                        "env.json's earlier_parts), so no replay repeats it bit for bit; its numbers may differ "
                        "from the first epoch on"), said
    assert machine_change(env, 1, ("ran", "resumes"), every_part=False).startswith("ran with 2 torch threads, resumes with 1 torch")
    assert machine_change(_here(1) | {"earlier_parts": [{"torch_threads": 1}]}, 1) is None
