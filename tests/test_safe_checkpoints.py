"""Checkpoints load with ``weights_only=True``: a crafted pickle runs nothing, and a file that is not a
pllzoo checkpoint of this format (or does not fit the run) is refused by ``evaluate`` and ``bench --resume``
with one line, never a traceback (issue 13.1)."""

from __future__ import annotations

import json
import os
import pickle
from pathlib import Path

import pandas as pd
import pytest
import torch
from click.testing import CliRunner

from pllzoo import checkpoint
from pllzoo.cli import cli
from conftest import one_line_about

BENCH = ["bench", "--methods", "proden", "--dataset", "synthetic-lt", "--subset", "200", "--batch-size", "64",
         "--epochs", "2", "--seeds", "1", "--device", "cpu"]


FINISHED_ARGS = BENCH  # conftest.finished: one run; tests tamper with copies of it


def _run(out: Path) -> Path:
    (run,) = (out / "runs").iterdir()
    return run


class _Opens:
    """Unpickling it calls ``open(path, "w")``: the file appears if the loader runs code."""

    def __init__(self, path: Path) -> None:
        self.path = str(path)

    def __reduce__(self):
        return open, (self.path, "w")


class _Shell:
    """Unpickling it runs a shell command that creates ``path``."""

    def __init__(self, path: Path) -> None:
        self.path = str(path)

    def __reduce__(self):
        return os.system, (f"touch '{self.path}'",)


def _craft(how: str, target: Path, marker: Path) -> None:
    payload = {"format": checkpoint.FORMAT, "version": checkpoint.VERSION,
               "model": _Opens(marker) if how != "pickle-system" else _Shell(marker)}
    if how == "torch-open":
        torch.save(payload, target)  # a zip archive like a real checkpoint, its data.pkl poisoned
    else:
        target.write_bytes(pickle.dumps(payload))  # a bare pickle


def _records(run: Path) -> list[dict]:
    """The run's records without their timings."""
    return [{k: v for k, v in json.loads(line).items() if k != "wall_s"}
            for line in (run / "log.jsonl").read_text().splitlines()]


@pytest.mark.parametrize("how", ["torch-open", "pickle-open", "pickle-system"])
def test_the_crafted_payload_really_runs_under_plain_pickle(how, tmp_path):
    """The payloads below are live: plain unpickling creates the file (so the tests that follow can fail)."""
    target, marker = tmp_path / "c.pt", tmp_path / "made-by-pickle"
    _craft(how, target, marker)
    if how == "torch-open":
        torch.load(target, weights_only=False)
    else:
        pickle.loads(target.read_bytes())
    assert marker.exists()


@pytest.mark.parametrize("how", ["torch-open", "pickle-open", "pickle-system"])
def test_evaluate_refuses_a_crafted_pickle_and_runs_nothing(out, tmp_path, how):
    run, marker = _run(out), tmp_path / "pwned"
    _craft(how, run / "checkpoint.pt", marker)
    res = CliRunner().invoke(cli, ["evaluate", str(run), "--device", "cpu"])
    assert res.exit_code == 1
    line = one_line_about(res.output, "Error:", run)
    assert "not a pllzoo checkpoint" in line and "refused without running" in line
    assert not marker.exists()


@pytest.mark.parametrize("how", ["torch-open", "pickle-system"])
def test_resume_refuses_a_crafted_pickle_runs_nothing_and_retrains(out, tmp_path, how):
    run, marker = _run(out), tmp_path / "pwned"
    expected = _records(run)
    (run / "done").unlink()  # an unfinished run: --resume would load its checkpoint
    _craft(how, run / "checkpoint.pt", marker)
    res = CliRunner().invoke(cli, [*BENCH, "--out", str(out), "--resume"])
    assert res.exit_code == 0, res.output
    line = one_line_about(res.output, "Warning:", run)
    assert ("not a pllzoo checkpoint" in line or "damaged checkpoint" in line) and "retraining" in line
    assert not marker.exists()
    assert (run / "done").exists() and (run / "checkpoint.pt.damaged").exists()
    assert _records(run) == expected  # retrained from the start: the same records


def test_a_checkpoint_names_its_run(finished):
    run = _run(finished)
    assert checkpoint.read_checkpoint(run / "checkpoint.pt")["run"] == run.name


def test_a_checkpoint_loads_with_weights_only_and_carries_its_format(finished):
    ckpt = torch.load(_run(finished) / "checkpoint.pt", map_location="cpu", weights_only=True)
    assert (ckpt["format"], ckpt["version"]) == (checkpoint.FORMAT, checkpoint.VERSION)
    assert set(checkpoint.KEYS) <= set(ckpt) and ckpt["records"][-1]["epoch"] == 2


def test_records_are_made_plain_for_the_safe_loader(tmp_path):
    import numpy as np

    model = torch.nn.Linear(2, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    from pllzoo.state import PLLState

    where = {"stage_index": 0, "epoch": 1, "epochs": 1}
    records = [{**where, "acc": np.float64(1.5), "n": np.int64(3), "path": Path("x"), "pair": (1, 2), "none": None}]
    checkpoint.save_checkpoint(tmp_path, 0, 0, model, opt, PLLState(), records)
    got = checkpoint.read_checkpoint(tmp_path / "checkpoint.pt")["records"]
    assert got == [{**where, "acc": 1.5, "n": 3, "path": "x", "pair": (1, 2), "none": None}]
    assert type(got[0]["acc"]) is float and type(got[0]["n"]) is int


def _rewrite(path: Path, change) -> None:
    ckpt = torch.load(path, map_location="cpu", weights_only=True)
    change(ckpt)
    torch.save(ckpt, path)


def _drop_marker(ckpt):
    del ckpt["format"], ckpt["version"]


def _other_model(ckpt):
    key = next(iter(ckpt["model"]))
    ckpt["model"][key] = torch.zeros(3, 1)


CASES = {
    "older pllzoo": (_drop_marker, "written by an older pllzoo (no format marker)"),
    "version": (lambda c: c.update(version=99), "checkpoint format version 99"),
    "missing keys": (lambda c: c.pop("optimizer"), "damaged checkpoint (missing optimizer)"),
    "not a dict": (lambda c: c.clear(), "not a pllzoo checkpoint (no format marker)"),
    "bad rng": (lambda c: c["rng"].update(torch=[1, 2]), "damaged checkpoint (bad rng.torch)"),
    # a uint8 state of another size: `evaluate` ended in torch's RuntimeError traceback (outside review)
    "rng of another size": (lambda c: c["rng"].update(torch=torch.zeros(5, dtype=torch.uint8)),
                            "damaged checkpoint (bad rng.torch)"),
    # records that are no log, or that end elsewhere than the checkpoint: --resume wrote them as the run's log
    "records without epochs": (lambda c: c.update(records=[{"a": 1}]), "damaged checkpoint (bad records)"),
    "records ending early": (lambda c: c.update(records=c["records"][:1]),
                             "damaged checkpoint (bad records: the last is not the checkpoint's epoch)"),
    "records repeated": (lambda c: c.update(records=c["records"] + c["records"][-1:]),
                         "damaged checkpoint (bad records)"),
    "another run": (_other_model, "checkpoint does not match this run"),
    # an AttributeError's own quotes were stripped with a KeyError's: "(str' object has no attribute 'to)"
    "state of another kind": (lambda c: c["state"].update(confidence="abc"),
                              "checkpoint does not match this run ('str' object has no attribute 'to')"),
    "another recipe's stage": (lambda c: [c.update(stage=5), *(r.update(stage_index=5) for r in c["records"])],
                               "this recipe has 1 stage(s)"),
    # a checkpoint copied from another run whose tensors fit (cc's, or another seed's): its records say whose it is
    "another run's, fitting": (lambda c: [r.update(method="cc", seed=2) for r in c["records"]],
                               "the checkpoint of another run (method 'cc', not 'proden'; seed 2, not 1)"),
    # the same method, dataset and seed with other hyper-parameters: the checkpoint names its run's id
    "another setting's": (lambda c: c.update(run="proden__synthetic-lt__s1-00000000"),
                          "the checkpoint of another run (run 'proden__synthetic-lt__s1-00000000', not 'proden__"),
}


#: what evaluate says first where it differs from what --resume says: it compares the checkpoint with the log
EVALUATE_SAYS = {"another recipe's stage": "not the run's final checkpoint (it ends at epoch 2, the log at 2)"}


@pytest.mark.parametrize("case", CASES)
def test_evaluate_refuses_a_checkpoint_that_does_not_fit(out, case):
    change, expected = CASES[case][0], EVALUATE_SAYS.get(case, CASES[case][1])
    run = _run(out)
    _rewrite(run / "checkpoint.pt", change)
    res = CliRunner().invoke(cli, ["evaluate", str(run), "--device", "cpu"])
    assert res.exit_code == 1
    assert expected in one_line_about(res.output, "Error:", run)


@pytest.mark.parametrize("case", ["older pllzoo", "version", "missing keys", "rng of another size",
                                  "records without epochs", "records ending early", "records repeated"])
def test_resume_retrains_a_run_whose_checkpoint_is_refused(out, case):
    change, expected = CASES[case]
    run = _run(out)
    records = _records(run)
    (run / "done").unlink()
    _rewrite(run / "checkpoint.pt", change)
    res = CliRunner().invoke(cli, [*BENCH, "--out", str(out), "--resume"])
    assert res.exit_code == 0, res.output
    line = one_line_about(res.output, "Warning:", run)
    assert expected in line and "retraining the run from the start" in line
    assert _records(run) == records


@pytest.mark.parametrize("case", ["another run", "another run's, fitting", "another setting's",
                                  "another recipe's stage"])
def test_resume_with_a_checkpoint_of_another_run_is_one_failed_run(out, case):
    change, expected = CASES[case]
    run = _run(out)
    (run / "done").unlink()
    _rewrite(run / "checkpoint.pt", change)
    res = CliRunner().invoke(cli, [*BENCH, "--out", str(out), "--resume"])
    assert res.exit_code == 1 and "Traceback" not in res.output
    assert expected in one_line_about(res.output, "Error:", run)
    assert "cc" not in set(pd.read_csv(out / "results.csv")["method"])


def test_a_checkpoint_without_the_runs_extra_modules_is_refused(tmp_path):
    """HTC's tail classifier and weighting module live beside the network (run.modules): a checkpoint that
    lacks them used to load, leaving them at their fresh initialisation and the scores changed."""
    out = tmp_path / "out"
    args = [*BENCH[:2], "htc", *BENCH[3:], "--out", str(out)]
    assert CliRunner().invoke(cli, args).exit_code == 0
    run = _run(out)
    _rewrite(run / "checkpoint.pt", lambda c: c.update(modules={}))
    res = CliRunner().invoke(cli, ["evaluate", str(run), "--device", "cpu"])
    assert res.exit_code == 1 and "Traceback" not in res.output
    assert "no saved state for module(s) loss.attention, loss.tail" in one_line_about(res.output, "Error:", run)


def test_random_bytes_are_a_damaged_checkpoint_not_a_foreign_pickle(tmp_path):
    """Neither a torch archive nor a pickle: damaged (torch's fallback pickle reader used to make it sound crafted)."""
    from pllzoo.checkpoint import CheckpointError, read_checkpoint

    path = tmp_path / "checkpoint.pt"
    path.write_bytes(bytes(range(7, 250)) * 8)
    with pytest.raises(CheckpointError, match=r"damaged checkpoint \(truncated or corrupt: neither a torch archive"):
        read_checkpoint(path)


def _flip_tensor_bytes(path) -> None:
    """XOR eight bytes inside the first tensor's data: the archive stays whole, torch's reader loads it."""
    import zipfile

    with zipfile.ZipFile(path) as z:
        info = next(i for i in z.infolist() if "/data/" in i.filename and i.file_size >= 8)
    raw = bytearray(path.read_bytes())
    off = info.header_offset  # the local header: 30 bytes, then the name and the extra field, then the data
    start = off + 30 + int.from_bytes(raw[off + 26:off + 28], "little") + int.from_bytes(raw[off + 28:off + 30], "little")
    raw[start:start + 8] = bytes(b ^ 0xFF for b in raw[start:start + 8])
    path.write_bytes(bytes(raw))


def test_flipped_bytes_inside_a_tensor_are_a_damaged_checkpoint(out):
    """An outside review: torch's reader does not check the archive's CRCs, so a checkpoint with changed bytes in
    its first layer's weights loaded, and evaluate re-scored the run at other accuracies, exit 0."""
    import torch

    run = _run(out)
    records = _records(run)
    _flip_tensor_bytes(run / "checkpoint.pt")
    torch.load(run / "checkpoint.pt", weights_only=True)  # what torch alone makes of it: no complaint
    res = CliRunner().invoke(cli, ["evaluate", str(run), "--device", "cpu"])
    assert res.exit_code == 1 and "Traceback" not in res.output
    assert "fails its CRC-32 check: bytes changed since it was written" in one_line_about(res.output, "Error:", run)
    (run / "done").unlink()  # unfinished: --resume keeps it aside and retrains, to the same numbers
    res = CliRunner().invoke(cli, [*BENCH, "--out", str(out), "--resume"])
    assert res.exit_code == 0, res.output
    line = one_line_about(res.output, "Warning:", run)
    assert "fails its CRC-32 check" in line and "retraining the run from the start" in line
    assert _records(run) == records
