"""benchmarks/gpu/paper_queue.py: the paper runs in order within a device call, each carried or finished.

``run.py run`` is replaced by a fake that finishes a run (a ``done`` marker) or leaves the real run folder of
a bench stopped by ``--time-limit`` (exit 75), and advances a fake clock: the queue's own logic (skip, unpack
by label, finals.tgz, pack with a label, the minutes left) is what is tested, against real packed runs.
"""

from __future__ import annotations

import json
import shutil
import sys
import tarfile
from pathlib import Path

import pytest
import torch
from click.testing import CliRunner

from pllzoo.checkpoint import NAME
from pllzoo.cli import cli

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks" / "gpu"))
import carry_run  # noqa: E402
import paper_queue  # noqa: E402


@pytest.fixture(scope="module")
def stopped(tmp_path_factory):
    """A real proden bench folder stopped by --time-limit after epoch 2 of 5 (fake clock: 10 s an epoch)."""
    import fake_clock

    threads = torch.get_num_threads()
    mp = pytest.MonkeyPatch()
    try:
        fake_clock.install(mp)
        out = tmp_path_factory.mktemp("stopped") / "out"
        res = CliRunner().invoke(cli, ["bench", "--methods", "proden", "--dataset", "synthetic-lt", "--epochs", "5",
                                       "--out", str(out), "--threads", "1", "--time-limit", "0.5"])
        assert res.exit_code == 75, res.output
    finally:
        mp.undo()
        torch.set_num_threads(threads)
    return out


class FakeRuns:
    """Stands in for ``subprocess.call(run.py run NAME ... --out FOLDER ...)``: ``outcome[NAME]`` is "finish"
    (a done run of seed 1) or "stop" (the stopped bench folder, exit 75); each call takes ``minutes``."""

    def __init__(self, stopped: Path, outcome: dict[str, str], minutes: float = 3.0):
        self.stopped, self.outcome, self.minutes, self.now, self.calls = stopped, outcome, minutes, 0.0, []

    def clock(self) -> float:
        return self.now

    def call(self, cmd, stdout=None, stderr=None) -> int:
        name, folder = cmd[3], Path(cmd[cmd.index("--out") + 1])
        self.calls.append((name, float(cmd[cmd.index("--time-limit") + 1]), folder.exists()))
        self.now += 60 * self.minutes
        if self.outcome[name] == "stop":
            if not folder.exists():
                shutil.copytree(self.stopped, folder)
            return 75
        run = folder / "runs" / f"m__d__s1-{name[-4:]}"
        run.mkdir(parents=True, exist_ok=True)
        (run / "log.jsonl").write_text('{"epoch": 1}\n')
        (run / NAME).write_bytes(b"weights")
        (run / "done").write_text("ok\n")
        return 0


def _fake_run_py(tmp: Path, monkeypatch) -> None:
    """``run.py run NAME --seeds S --out DIR --dry-run EXTRA``: the bench command of the stopped fixture's recipe
    (proden on synthetic-lt, 5 epochs), as the real run.py prints a recipe's."""
    script = tmp / "run.py"
    script.write_text(
        "import shlex, sys\n"
        "a = sys.argv[1:]\n"
        "out = a[a.index('--out') + 1]\n"
        "extra = [x for x in a[a.index('--dry-run') + 1:]]\n"
        "print(shlex.join([sys.executable, '-m', 'pllzoo', 'bench', '--methods', 'proden', '--dataset', "
        "'synthetic-lt', '--epochs', '5', '--seeds', '1', '--out', out, '--resume', *extra]))\n")
    monkeypatch.setattr(paper_queue, "RUN_PY", script)


def _queue(tmp, fake, *args):
    return paper_queue.main(["--dest", str(tmp / "dest"), "--work", str(tmp / "work"), "--finished",
                             str(tmp / "committed"), "--carried", str(tmp / "carried"), *args], clock=fake.clock)


def test_a_call_finishes_the_carried_run_then_carries_the_next(stopped, tmp_path, monkeypatch, capsys):
    carry_run.pack(stopped, tmp_path / "carried", part_mib=0.2)  # unlabelled: packed before labels
    fake = FakeRuns(stopped, {"a-solar": "finish", "b-proden": "stop", "c-cc": "finish"})
    monkeypatch.setattr(paper_queue.subprocess, "call", fake.call)
    _fake_run_py(tmp_path, monkeypatch)
    monkeypatch.setattr(paper_queue, "UNLABELLED", "a-solar")  # the run an unlabelled carry belongs to
    rc = _queue(tmp_path, fake, "--minutes", "9", "--queue", "a-solar,b-proden,c-cc", "--part-mib", "0.2")
    assert rc == 75
    assert fake.calls == [("a-solar", 9.0, True), ("b-proden", 6.0, False)]  # a-solar unpacked before it ran
    with tarfile.open(tmp_path / "dest" / "finals.tgz") as tar:
        names = tar.getnames()
    assert "a-solar/runs/m__d__s1-olar/done" in names and not any(n.endswith(".pt") for n in names)
    manifest = json.loads((tmp_path / "dest" / "carry.json").read_text())
    assert manifest["label"] == "b-proden" and len(manifest["parts"]) > 1
    out = capsys.readouterr().out
    assert "a-solar: finished, in finals.tgz" in out and "b-proden: packed runs/proden__synthetic-lt__s1-" in out
    assert "c-cc" not in out  # the queue ends with the carried run


def test_the_next_session_skips_the_committed_run_and_resumes_the_labelled_one(stopped, tmp_path, monkeypatch,
                                                                                 capsys):
    carry_run.pack(stopped, tmp_path / "carried", part_mib=0.2, label="b-proden")
    committed = tmp_path / "committed" / "a-solar"  # as git keeps it: runs.jsonl.xz, no runs/
    shutil.copytree(stopped, committed)
    run = next(committed.glob("runs/*"))
    (run / NAME).unlink()
    (run / "done").write_text("ok\n")
    records = [json.loads(line) for line in (run / "log.jsonl").read_text().splitlines()]
    (run / "log.jsonl").write_text("".join(json.dumps({**r, "epochs": 2}) + "\n" for r in records))  # whole, as done
    res = CliRunner().invoke(cli, ["archive", str(committed)])
    assert res.exit_code == 0 and (committed / "runs.jsonl.xz").exists(), res.output
    shutil.rmtree(committed / "runs")
    fake = FakeRuns(stopped, {"b-proden": "finish", "c-cc": "finish"}, minutes=4)
    monkeypatch.setattr(paper_queue.subprocess, "call", fake.call)
    _fake_run_py(tmp_path, monkeypatch)
    rc = _queue(tmp_path, fake, "--minutes", "5.5", "--queue", "a-solar,b-proden,c-cc")
    assert rc == 0
    assert fake.calls == [("b-proden", 5.5, True)]  # unpacked before it ran; 1.5 min are too few for c-cc
    run = next((tmp_path / "work" / "paper-b-proden").glob("runs/proden__*"))
    assert (run / NAME).exists()  # the carried checkpoint, rebuilt from its parts
    out = capsys.readouterr().out
    assert "a-solar seed 1: finished before" in out and "c-cc: not started, 1.50 min left (2 needed)" in out
    assert not (tmp_path / "dest" / "carry.json").exists()  # nothing left to carry


def test_two_runs_finished_in_one_call_share_finals_tgz(stopped, tmp_path, monkeypatch):
    fake = FakeRuns(stopped, {"a-solar": "finish", "b-proden": "finish"}, minutes=1)
    monkeypatch.setattr(paper_queue.subprocess, "call", fake.call)
    assert _queue(tmp_path, fake, "--minutes", "9", "--queue", "a-solar,b-proden") == 0
    with tarfile.open(tmp_path / "dest" / "finals.tgz") as tar:
        tops = {n.split("/")[0] for n in tar.getnames()}
    assert tops == {"a-solar", "b-proden"}
    assert sorted(p.name for p in (tmp_path / "dest").iterdir()) == ["finals.tgz", "paper.log"]


def test_a_carried_run_the_queues_command_would_not_resume_stops_the_call_before_training(stopped, tmp_path,
                                                                                         monkeypatch, capsys):
    """An outside review: after a hyper-parameter was added between sessions, the carried run's id was no longer the
    one ``run.py run`` planned; the call trained a new run from epoch 0 for all its minutes and carried nothing
    back.  The queue now plans its very command (``run.py run NAME --dry-run`` and this call's bench arguments,
    ``--dry-run --jobs 2``) and stops at once when it would not resume the carried run: here the call's arguments
    change a hyper-parameter (as a COMPILE other than the last session's would)."""
    carry_run.pack(stopped, tmp_path / "carried", part_mib=0.2, label="b-proden")
    fake = FakeRuns(stopped, {"b-proden": "finish"})
    monkeypatch.setattr(paper_queue.subprocess, "call", fake.call)
    _fake_run_py(tmp_path, monkeypatch)
    rc = _queue(tmp_path, fake, "--minutes", "9", "--queue", "b-proden", "--", "--threads", "1", "--hp", "train.lr=0.07")
    assert rc == 3 and fake.calls == []  # nothing trained
    out = capsys.readouterr().out
    assert "b-proden: the carried run proden__synthetic-lt__s1-" in out and \
        "would not resume: the queue's command plans proden__synthetic-lt__s1-" in out
    shutil.rmtree(tmp_path / "work")  # the same call's arguments as the carried run's: it resumes
    assert _queue(tmp_path, fake, "--minutes", "9", "--queue", "b-proden", "--", "--threads", "1") == 0
    assert [c[0] for c in fake.calls] == ["b-proden"]


def test_a_run_before_the_carried_part_is_skipped_not_trained_again(stopped, tmp_path, monkeypatch, capsys):
    """An outside review: with the part of a later run carried (SoLar ended in an earlier call, its finals not yet
    in --finished), the queue trained SoLar again from epoch 0 and its pack replaced the carried part."""
    carry_run.pack(stopped, tmp_path / "carried", part_mib=0.2, label="b-proden")
    fake = FakeRuns(stopped, {"a-solar": "finish", "b-proden": "finish"}, minutes=1)
    monkeypatch.setattr(paper_queue.subprocess, "call", fake.call)
    _fake_run_py(tmp_path, monkeypatch)
    assert _queue(tmp_path, fake, "--minutes", "9", "--queue", "a-solar,b-proden") == 0
    assert [c[0] for c in fake.calls] == ["b-proden"]
    out = capsys.readouterr().out
    assert "a-solar seed 1: skipped, the carried part is b-proden's, later in the queue" in out


def test_a_finished_solar_run_is_rescored_with_logit_adjustment_before_its_model_is_gone(tmp_path, capsys,
                                                                                          monkeypatch):
    """An outside review: Table 6's route (``pllzoo evaluate --predict solar.la``) needs the SoLar model, which only
    the device had: the queue re-scores it at each ζ and adds the CSVs to finals.tgz (two of the three ζ here: one
    ``pllzoo evaluate`` process each)."""
    assert paper_queue.LA_ZETAS == ("0.5", "1", "2")  # Table 6's
    monkeypatch.setattr(paper_queue, "LA_ZETAS", ("0.5", "2"))
    folder = tmp_path / "paper-solar"
    res = CliRunner().invoke(cli, ["bench", "--methods", "solar", "--dataset", "synthetic-lt", "--subset", "300",
                                   "--batch-size", "64", "--epochs", "2", "--hp", "estimator.est_epochs=1",
                                   "--out", str(folder), "--threads", "1"])
    assert res.exit_code == 0, res.output
    finals, log = tmp_path / "finals.tgz", tmp_path / "paper.log"
    paper_queue.add_final(folder, "s", finals)
    paper_queue.add_la(folder, "s", finals, ["--device", "cpu", "--offline"], log, lambda: 1000.0)
    with tarfile.open(finals) as tar:
        names = tar.getnames()
        rows = {z: tar.extractfile(f"s/la-z{z}.csv").read().decode() for z in paper_queue.LA_ZETAS}
    assert "s/results.csv" in names and not any(n.endswith(".pt") for n in names)
    for zeta, text in rows.items():
        header, line = text.splitlines()[:2]
        assert header.startswith("run,") and "acc_all" in header and f"predict.zeta={zeta}" in line
    assert "--device cpu" in log.read_text() and "--offline" not in log.read_text()
    assert capsys.readouterr().out.count("SoLar-LA zeta") == 2
    paper_queue.add_la(folder, "s", finals, [], log, lambda: 10.0)  # too little time: said, nothing added
    assert "SoLar-LA zeta 0.5 not scored, 10 s left (40 needed)" in capsys.readouterr().out
    with tarfile.open(finals) as tar:
        assert tar.getnames() == names


def test_rescoring_may_use_the_packing_grace_and_no_run_starts_in_it(stopped, tmp_path, monkeypatch, capsys):
    """A finished run is not packed, so re-scoring it may use the caller's packing reserve (--grace-s); the next
    run still needs MIN_MINUTES before the deadline itself."""
    fake = FakeRuns(stopped, {"a-solar": "finish", "b-proden": "finish"}, minutes=2.5)
    monkeypatch.setattr(paper_queue.subprocess, "call", fake.call)
    seen = []
    monkeypatch.setattr(paper_queue, "add_la", lambda *a: seen.append(a[-1]()))
    assert _queue(tmp_path, fake, "--minutes", "3", "--grace-s", "30", "--queue", "a-solar,b-proden") == 0
    assert seen == [pytest.approx(60.0)]  # 0.5 min before the deadline, and 30 s of grace
    assert "b-proden: not started, 0.50 min left" in capsys.readouterr().out
