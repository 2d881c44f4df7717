"""Damaged run folders are found, said in one line naming the run, and treated as unfinished (issue 13.3):
a truncated, empty or garbage ``log.jsonl``, a log missing its last epochs, a truncated or empty checkpoint.

``report`` leaves such a run out with one warning, ``evaluate`` refuses it with one error, and
``bench --resume`` resumes it from its checkpoint (which holds every record) or retrains it, with one note.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pandas as pd
import pytest
import torch
from click.testing import CliRunner

from pllzoo.cli import cli
from conftest import DATA_NOTE, one_line_about

BENCH = ["bench", "--methods", "proden", "--dataset", "synthetic-lt", "--subset", "200", "--batch-size", "64",
         "--epochs", "2", "--seeds", "1,2", "--device", "cpu", "--threads", "1"]  # one thread: --jobs runs match


FINISHED_ARGS = BENCH  # conftest.finished: two runs (seeds 1 and 2); tests damage copies of the first


def _first(out: Path) -> Path:
    return sorted((out / "runs").iterdir())[0]


def _lines(run: Path) -> list[str]:
    return (run / "log.jsonl").read_text().splitlines()


def _cut_log(run: Path) -> None:
    text = (run / "log.jsonl").read_bytes()
    (run / "log.jsonl").write_bytes(text[: len(text) - 40])  # the last record cut mid-way


def _drop_last_epoch(run: Path) -> None:
    (run / "log.jsonl").write_text("\n".join(_lines(run)[:-1]) + "\n")


def _cut_checkpoint(run: Path) -> None:
    data = (run / "checkpoint.pt").read_bytes()
    (run / "checkpoint.pt").write_bytes(data[: len(data) // 2])


def _edit(key: str, value: str):
    """Set ``key`` of the last record to the JSON text ``value`` (NaN and Infinity too, as Python reads them)."""
    def damage(run: Path) -> None:
        lines = _lines(run)
        rec = json.loads(lines[-1])
        rec[key] = "\0"
        lines[-1] = json.dumps(rec).replace('"\\u0000"', value)
        (run / "log.jsonl").write_text("\n".join(lines) + "\n")
    return damage


def _every(key: str, value: str):
    """Set ``key`` of every record to the JSON text ``value``."""
    def damage(run: Path) -> None:
        recs = [{**json.loads(line), key: json.loads(value)} for line in _lines(run)]
        (run / "log.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    return damage


# name → (damage, what the one line says, what bench --resume then does)
DAMAGE = {
    "truncated log": (_cut_log, "log.jsonl line 2 is not a JSON record", "resuming it from its checkpoint"),
    "empty log": (lambda r: (r / "log.jsonl").write_bytes(b""), "log.jsonl is empty",
                  "resuming it from its checkpoint"),
    "garbage log": (lambda r: (r / "log.jsonl").write_bytes(b"\x00\xff garbage \x13\n{]"),
                    "log.jsonl unreadable", "resuming it from its checkpoint"),
    "text garbage log": (lambda r: (r / "log.jsonl").write_text("hello\nworld\n"),
                         "log.jsonl line 1 is not a JSON record", "resuming it from its checkpoint"),
    "last epoch missing": (_drop_last_epoch, "log.jsonl ends at epoch 1 of 2", "resuming it from its checkpoint"),
    "no log": (lambda r: (r / "log.jsonl").unlink(), "no log.jsonl", "resuming it from its checkpoint"),
    "garbage config": (lambda r: (r / "config.json").write_text("garbage{"), "not a pllzoo run config",
                       "resuming it from its checkpoint"),
    "no config": (lambda r: (r / "config.json").unlink(), "config.json is missing",  # it was reused silently
                  "resuming it from its checkpoint"),
    "no config, no env": (  # an outside review: taken for a run from before configs, its copy counted twice
        lambda r: [(r / n).unlink() for n in ("config.json", "env.json")], "config.json is missing",
        "resuming it from its checkpoint"),
    # hand-edited values of the wrong type (each used to be a traceback, a NaN averaged away or a seed "x")
    "method a number": (_edit("method", "5"), "log.jsonl's method at epoch 2 is 5, not a string",
                        "resuming it from its checkpoint"),
    "seed a string": (_edit("seed", '"x"'), "log.jsonl's seed at epoch 2 is 'x', not a whole number",
                      "resuming it from its checkpoint"),
    "accuracy NaN": (_edit("acc_all", "NaN"), "log.jsonl's acc_all at epoch 2 is nan, not a finite number or null",
                     "resuming it from its checkpoint"),
    "accuracy infinite": (_edit("acc_few", "1e999"), "log.jsonl's acc_few at epoch 2 is inf, not a finite number",
                          "resuming it from its checkpoint"),
    "label accuracy a string": (_edit("label_acc", '"abc"'), "log.jsonl's label_acc at epoch 2 is 'abc', not a "
                                "finite number or null", "resuming it from its checkpoint"),  # (a report traceback)
    "class accuracies not a list": (_edit("class_acc", '"x"'), "log.jsonl's class_acc at epoch 2 is 'x', not a list",
                                    "resuming it from its checkpoint"),
    # parseable, of the right types, and still not this run's (an outside review: averaged as a second seed)
    "a line of another method": (_edit("method", '"cc"'), "log.jsonl's method at epoch 2 is 'cc', its first "
                                 "epoch's 'proden': lines of two runs", "resuming it from its checkpoint"),
    "accuracy above 100": (_edit("acc_all", "420.3"), "log.jsonl's acc_all at epoch 2 is 420.3, not a percentage",
                           "resuming it from its checkpoint"),
    "label accuracy above 100": (_edit("label_acc_few", "420.3"), "log.jsonl's label_acc_few at epoch 2 is 420.3, "
                                 "not a percentage", "resuming it from its checkpoint"),
    "the log of another seed": (_every("seed", "9"), "log.jsonl's seed is 9, config.json's 1: the log of another run",
                                "resuming it from its checkpoint"),
    "records without their method": (  # an outside review: report's traceback, and bench's table without the run
        lambda r: (r / "log.jsonl").write_text("".join(json.dumps({k: v for k, v in json.loads(line).items()
                                                                   if k != "method"}) + "\n" for line in _lines(r))),
        "log.jsonl's record at epoch 1 has no method", "resuming it from its checkpoint"),
    "truncated checkpoint": (_cut_checkpoint, "truncated or corrupt", "retraining the run from the start"),
    "empty checkpoint": (lambda r: (r / "checkpoint.pt").write_bytes(b""), "empty, 0 bytes",
                         "retraining the run from the start"),
}


def _records(run: Path) -> list[dict]:
    return [{k: v for k, v in json.loads(line).items() if k != "wall_s"} for line in _lines(run)]


@pytest.mark.parametrize("case", DAMAGE)
def test_report_leaves_a_damaged_run_out_withone_line_about(out, tmp_path, case):
    damage, says, _ = DAMAGE[case]
    run = _first(out)
    damage(run)
    res = CliRunner().invoke(cli, ["report", str(out), "--csv", str(tmp_path / "s.csv")])
    assert res.exit_code == 0, res.output
    line = one_line_about(res.output, "Warning:", run)
    assert "left out" in line and "damaged run" in line and says in line
    assert list(pd.read_csv(tmp_path / "s.csv")["n"]) == [1]  # the other seed only


@pytest.mark.parametrize("case", DAMAGE)
def test_evaluate_refuses_a_damaged_run_withone_line_about(out, case):
    damage, says, _ = DAMAGE[case]
    run = _first(out)
    damage(run)
    res = CliRunner().invoke(cli, ["evaluate", str(run), "--device", "cpu"])
    assert res.exit_code == 1
    assert says in one_line_about(res.output, "Error:", run)


@pytest.mark.parametrize("case", DAMAGE)
def test_resume_redoes_a_damaged_finished_run_with_one_note(out, case):
    damage, says, then = DAMAGE[case]
    run = _first(out)
    before, rows = _records(run), pd.read_csv(out / "results.csv")
    ckpt_before = (run / "checkpoint.pt").read_bytes()
    damage(run)
    res = CliRunner().invoke(cli, [*BENCH, "--out", str(out), "--resume"])
    assert res.exit_code == 0, res.output
    line = one_line_about(res.output, "Warning:", run)
    assert says in line and then in line
    assert (run / "done").exists() and _records(run) == before
    acc = ["method", "seed", "epoch", "acc_all", "acc_many", "acc_medium", "acc_few"]
    pd.testing.assert_frame_equal(pd.read_csv(out / "results.csv")[acc], rows[acc])
    if then.startswith("resuming"):  # the records come from the checkpoint, timings and all
        assert (run / "checkpoint.pt").read_bytes() == ckpt_before
    else:
        assert (run / "checkpoint.pt.damaged").exists()
    again = CliRunner().invoke(cli, [*BENCH, "--out", str(out), "--resume"])  # whole again: reused, no note
    notes = [line for line in again.output.splitlines()
             if line.startswith("Warning:") and not line.startswith(DATA_NOTE)]
    assert again.exit_code == 0 and not notes and "reused" in again.output


def test_resume_of_a_finished_run_with_its_log_and_checkpoint_damaged_retrains(out):
    run = _first(out)
    before = _records(run)
    _cut_log(run)
    _cut_checkpoint(run)
    res = CliRunner().invoke(cli, [*BENCH, "--out", str(out), "--resume"])
    assert res.exit_code == 0, res.output
    line = one_line_about(res.output, "Warning:", run)
    assert "is not a JSON record" in line and "checkpoint is unusable too: retraining it" in line
    assert (run / "done").exists() and _records(run) == before


@pytest.mark.parametrize("case", ["truncated checkpoint", "empty checkpoint"])
def test_resume_of_an_unfinished_run_with_a_damaged_checkpoint_retrains(out, case):
    damage, says, _ = DAMAGE[case]
    run = _first(out)
    before = _records(run)
    (run / "done").unlink()
    damage(run)
    res = CliRunner().invoke(cli, [*BENCH, "--out", str(out), "--resume"])
    assert res.exit_code == 0, res.output
    assert says in one_line_about(res.output, "Warning:", run)
    assert (run / "done").exists() and _records(run) == before


def test_evaluate_refuses_a_checkpoint_that_is_not_the_final_one(out):
    run = _first(out)
    ckpt = torch.load(run / "checkpoint.pt", weights_only=True)
    ckpt["records"], ckpt["epoch"] = ckpt["records"][:1], 0
    torch.save(ckpt, run / "checkpoint.pt")
    res = CliRunner().invoke(cli, ["evaluate", str(run), "--device", "cpu"])
    assert res.exit_code == 1
    assert "not the run's final checkpoint" in one_line_about(res.output, "Error:", run)


@pytest.mark.parametrize("command", ["report", "evaluate"])
def test_a_garbage_config_is_a_damaged_run(out, command):
    run = _first(out)
    (run / "config.json").write_text("{not json")
    res = CliRunner().invoke(cli, [command, str(out if command == "report" else run)])
    assert res.exit_code == (0 if command == "report" else 1), res.output
    line = one_line_about(res.output, "Warning:" if command == "report" else "Error:", run)
    assert "config.json" in line and "damaged run" in line


@pytest.mark.parametrize("name", ["config.json", "env.json"])
def test_archive_refuses_a_run_whose_config_is_json_but_no_object(out, name):
    """An outside review: config.json ``[]`` went into the archive, which no command could read after, and
    ``archive --rebuild`` rewrote the same unreadable file."""
    run = _first(out)
    (run / name).write_text("[]")
    res = CliRunner().invoke(cli, ["archive", str(out)])
    assert res.exit_code == 1
    assert f"damaged run ({name} is not a JSON object); fix or remove the folder" in \
        one_line_about(res.output, "Error:", run)
    assert not (out / "runs.jsonl.xz").exists()


def test_with_jobs_the_damage_is_found_before_the_workers_start(out):
    run = _first(out)
    before = _records(run)
    _drop_last_epoch(run)
    res = CliRunner().invoke(cli, [*BENCH, "--out", str(out), "--resume", "--jobs", "2"])
    assert res.exit_code == 0, res.output
    assert "ends at epoch 1 of 2" in one_line_about(res.output, "Warning:", run)
    assert (run / "done").exists() and _records(run) == before


def test_a_copied_run_folder_counts_once(out, tmp_path):
    """report and bench read each run once: a copy of a run folder (its config hashes to the same run id) is
    left out with one line, not counted as another seed."""
    import shutil

    run = _first(out)
    shutil.copytree(run, out / "runs" / "a-copy-of-run")  # sorts before the original
    res = CliRunner().invoke(cli, ["report", str(out), "--csv", str(tmp_path / "s.csv")])
    assert res.exit_code == 0, res.output
    line = one_line_about(res.output, "Warning:", out / "runs" / "a-copy-of-run")
    assert line.startswith(f"Warning: left out {out / 'runs' / 'a-copy-of-run'}: the same run as {run} (a copy")
    assert list(pd.read_csv(tmp_path / "s.csv")["n"]) == [2]  # seeds 1 and 2, once each
    res = CliRunner().invoke(cli, [*BENCH, "--out", str(out), "--resume"])
    assert res.exit_code == 0, res.output
    rows = pd.read_csv(out / "results.csv")
    assert sorted(zip(rows["method"], rows["seed"])) == [("proden", 1), ("proden", 2)]
    assert run.name in set(rows["run"]) and "a-copy-of-run" not in set(rows["run"])


def test_a_run_trained_apart_under_the_same_id_is_not_called_a_copy(out, tmp_path):
    """The same run id trained apart (here: its records edited, as under torchrun, whose run ids do not depend on
    the number of processes) counts once too, and the warning does not call it a copy."""
    import shutil

    run = _first(out)
    other = out / "runs" / "a-rerun"
    shutil.copytree(run, other)
    recs = [json.loads(line) for line in (other / "log.jsonl").read_text().splitlines()]
    recs[-1]["acc_all"] = recs[-1]["acc_all"] / 2
    (other / "log.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    res = CliRunner().invoke(cli, ["report", str(out), "--csv", str(tmp_path / "s.csv")])
    assert res.exit_code == 0, res.output
    line = one_line_about(res.output, "Warning:", other)
    assert f"the same run id as {run}, trained apart with other records" in line and "a copy" not in line
    assert list(pd.read_csv(tmp_path / "s.csv")["n"]) == [2]


def test_an_edited_config_is_not_taken_for_an_old_run_id(out):
    """A path-free config.json edited by hand (another method) is not "moved to its new id": the run stays, is
    reused, and counts once."""
    run = _first(out)
    names = sorted(p.name for p in (out / "runs").iterdir())
    config = json.loads((run / "config.json").read_text())
    (run / "config.json").write_text(json.dumps({**config, "method": "cc"}))
    res = CliRunner().invoke(cli, [*BENCH, "--out", str(out), "--resume"])
    assert res.exit_code == 0, res.output
    assert "old run ids" not in res.output and sorted(p.name for p in (out / "runs").iterdir()) == names
    rows = pd.read_csv(out / "results.csv")
    assert sorted(zip(rows["method"], rows["seed"])) == [("proden", 1), ("proden", 2)]


def test_report_of_runs_that_all_failed_says_so(tmp_path):
    """Every run failed before its first epoch (here: a non-finite loss from a huge step size): not "no runs"."""
    out = tmp_path / "out"
    res = CliRunner().invoke(cli, ["bench", "--methods", "proden,cc", "--dataset", "synthetic-lt", "--subset", "300",
                                   "--batch-size", "100", "--hp", "train.lr=1e30", "--epochs", "1", "--threads", "1",
                                   "--out", str(out)])
    assert res.exit_code == 1 and "2 of 2 runs failed" in res.output
    res = CliRunner().invoke(cli, ["report", str(out), "--csv", str(tmp_path / "s.csv")])  # their rows, as the
    assert res.exit_code == 0 and "Traceback" not in res.output, res.output  # bench's table (an outside review)
    summary = pd.read_csv(tmp_path / "s.csv")
    assert sorted(summary["method"]) == ["cc", "proden"] and set(summary["n"]) == {0} and set(summary["failed"]) == {1}
    for config in (out / "runs").glob("*/config.json"):
        config.unlink()
    res = CliRunner().invoke(cli, ["report", str(out)])  # no readable failed run left: the error says what is there
    assert res.exit_code == 1 and "Traceback" not in res.output
    last = res.output.strip().splitlines()[-1]
    assert last.startswith(f"Error: no finished runs under {out}: 2 failed, e.g. cc__synthetic-lt__s1-"), last


def test_report_of_runs_that_are_all_damaged_says_so(out):
    for run in (out / "runs").iterdir():
        (run / "log.jsonl").write_text("garbage\n")
    res = CliRunner().invoke(cli, ["report", str(out)])
    assert res.exit_code == 1 and "Traceback" not in res.output
    assert res.output.count("Warning: left out") == 2
    last = res.output.strip().splitlines()[-1]
    assert last == (f"Error: no usable runs under {out}: 2 damaged (above); bench --resume with their settings "
                    "repairs them"), last


def test_a_run_trained_again_with_the_same_numbers_is_said_so(out, tmp_path):
    """The same run trained again, here or on a machine alike, differs in its wall times only: the warning says
    so, rather than "trained apart with other records" (an outside review: it named another machine)."""
    import shutil

    run = _first(out)
    other = out / "runs" / "trained-again"
    shutil.copytree(run, other)
    recs = [json.loads(line) for line in (other / "log.jsonl").read_text().splitlines()]
    (other / "log.jsonl").write_text("".join(json.dumps({**r, "wall_s": r["wall_s"] + 1.5}) + "\n" for r in recs))
    res = CliRunner().invoke(cli, ["report", str(out), "--csv", str(tmp_path / "s.csv")])
    assert res.exit_code == 0, res.output
    line = one_line_about(res.output, "Warning:", other)
    assert f"the same run as {run}, trained again with the same results (only the wall times differ)" in line
    assert list(pd.read_csv(tmp_path / "s.csv")["n"]) == [2]


@pytest.mark.parametrize("case", [c for c in DAMAGE if "checkpoint" not in c])
def test_archive_prune_keeps_every_run_folder_the_readers_would_leave_out(out, case):
    """An outside review: a finished run whose log held a NaN accuracy, or whose config named no method, was
    archived and its folder deleted by --prune, after which report left it out as damaged: nothing was left to fix.
    What report leaves out, archive refuses (or, with nothing to keep, leaves alone), and its folder stays."""
    damage, says, _ = DAMAGE[case]
    run = _first(out)
    damage(run)
    res = CliRunner().invoke(cli, ["archive", str(out), "--prune"])
    assert run.is_dir(), res.output
    from pllzoo import archive

    if res.exit_code == 1:
        assert "damaged run" in one_line_about(res.output, "Error:", run)
    else:  # no log or no config: nothing to keep, so it is not archived
        assert res.exit_code == 0 and run.name not in archive.read(out), res.output


def test_archive_prune_leaves_a_run_another_process_holds(out):
    """An outside review: `archive --prune` while a bench trained a run (no checkpoint yet, its log archived as it
    stood) deleted its folder, and the bench failed at its next epoch.  A locked run is kept, and said so; once
    its lock is gone it is pruned, and prune leaves no lock of its own behind."""
    import socket

    for run in (out / "runs").iterdir():
        (run / "checkpoint.pt").unlink(missing_ok=True)
    run = _first(out)
    lock = run.with_name(f"{run.name}.lock")
    lock.write_text(f"{os.getppid()} {socket.gethostname()}\n")  # a live process of this host holds it
    res = CliRunner().invoke(cli, ["archive", str(out), "--prune"])
    assert res.exit_code == 0 and run.is_dir(), res.output
    assert "kept 1: 1 with a run another process is training (runs/<id>.lock)" in res.output, res.output
    lock.unlink()
    res = CliRunner().invoke(cli, ["archive", str(out), "--prune"])
    assert res.exit_code == 0 and not run.exists() and not any(out.glob("runs/*.lock")), res.output
