"""A bench survives one bad method: the failed run is marked in the table and in results.csv (``status``,
``error``), its traceback is in ``runs/<id>/error.txt``, the others finish, the exit status is 1 with one
line, ``--resume`` reruns only the failed runs; ``--jobs 2`` writes the same rows."""

from __future__ import annotations

import jobs_plugin
import pandas as pd
import pytest
import torch
from click.testing import CliRunner

from pllzoo import Component, Method, bench, hookimpl
from pllzoo.cli import cli
from pllzoo.data.base import DataOptions
from pllzoo.jobs import RunsFailed
from pllzoo.plugins import make_plugin_manager
from pllzoo.registry import Registry
from pllzoo.results import RESULT_COLUMNS

TINY = ["--dataset", "synthetic-lt", "--seeds", "1", "--epochs", "2", "--subset", "200", "--batch-size", "64"]


class Flaky:
    """Whether the in-test components misbehave (a test lets them recover to check ``--resume``)."""

    broken = True


class Raises(Component):
    """A loss that raises on its first step while :attr:`Flaky.broken`, else cross-entropy on the candidates."""

    @hookimpl
    def pllzoo_loss(self, step, state):
        if Flaky.broken:
            raise ValueError("bad component\nsecond line that the report must not show")
        return -(step.batch.candidates * torch.log_softmax(step.logits, 1)).sum(1).mean()


class NaNLoss(Component):
    """A loss that is NaN (the trainer's non-finite-loss check, or the host's output checks, refuse it)."""

    @hookimpl
    def pllzoo_loss(self, step, state):
        return step.logits.sum() * float("nan")


class FailPlugin:
    @hookimpl
    def pllzoo_register_losses(self, register):
        register("failtest.raises", Raises)
        register("failtest.nan", NaNLoss)

    @hookimpl
    def pllzoo_register_methods(self, register):
        register(Method("failtest-raises", loss="failtest.raises"))
        register(Method("failtest-nan", loss="failtest.nan"))


@pytest.fixture
def fail_registry(monkeypatch):
    pm, infos = make_plugin_manager()
    pm.register(FailPlugin(), name="failtest")
    reg = Registry.build(pm, infos)
    monkeypatch.setattr("pllzoo.cli.bench.get_registry", lambda: reg)
    monkeypatch.setattr(Flaky, "broken", True)
    monkeypatch.setenv("COLUMNS", "200")  # rich: one table row per line
    return reg


@pytest.fixture(autouse=True)
def keep_threads():
    before = torch.get_num_threads()
    yield
    torch.set_num_threads(before)


def _plans(reg, methods):
    return bench.plan(reg, methods, "synthetic-lt", [1], DataOptions(subset=200), epochs=2, batch_size=64,
                      device="cpu")


def _bench(methods: str, out, *more):
    return CliRunner().invoke(cli, ["bench", "--methods", methods, *TINY, "--out", str(out), "--threads", "1", *more])


@pytest.mark.parametrize("method, reason", [("failtest-raises", "ValueError: bad component"),
                                            ("failtest-nan", "non-finite")])
def test_a_failing_method_is_marked_and_the_others_finish(fail_registry, tmp_path, method, reason):
    out = tmp_path / "out"
    res = _bench(f"{method},proden", out)
    assert res.exit_code == 1 and "Traceback" not in res.output and "second line" not in res.output
    errors = [line for line in res.output.splitlines() if line.startswith("Error:")]
    assert len(errors) == 1 and errors[0].startswith(f"Error: 1 of 2 runs failed: {method} seed 1 (")
    assert reason in errors[0] and "--resume" in errors[0]
    rows = pd.read_csv(out / "results.csv")
    assert list(rows.columns[:len(RESULT_COLUMNS)]) == list(RESULT_COLUMNS)
    assert list(rows.columns[-3:]) == ["setting", "status", "error"]
    assert list(rows["method"]) == [method, "proden"] and list(rows["status"]) == ["failed", "ok"]
    assert list(rows["setting"]) == ["synthetic-lt φ=0.5 γ=100 subset=200"] * 2
    assert reason in rows["error"][0] and pd.isna(rows["error"][1]) and pd.isna(rows["acc_all"][0])
    assert rows["acc_all"][1] > 0 and rows["epoch"][1] == 2
    bad, good = _plans(fail_registry, [method, "proden"])
    assert "Traceback" in (out / "runs" / bad.run_id / "error.txt").read_text()
    assert not (out / "runs" / bad.run_id / "done").exists() and (out / "runs" / good.run_id / "done").exists()
    table = [line for line in res.output.splitlines() if line.startswith("│ ")]
    assert any(method in line and "failed" in line and "0 (1 failed)" in line for line in table)
    assert any("proden" in line and "failed" not in line for line in table)
    summary = pd.read_csv(out / "summary.csv")
    assert list(summary["method"]) == [method, "proden"] and list(summary["failed"]) == [1, 0]
    # report says the failure as the bench did (an outside review: it left the run out without a word, and
    # --methods naming it said "no runs of")
    for args in ([], ["--methods", f"{method},proden"]):
        res = CliRunner().invoke(cli, ["report", str(out), *args, "--csv", str(tmp_path / "r.csv")])
        assert res.exit_code == 0 and "unfinished" not in res.output, res.output
        table = [line for line in res.output.splitlines() if line.startswith("│ ")]
        assert any(method in line and "0 (1 failed)" in line for line in table), res.output
        pd.testing.assert_frame_equal(pd.read_csv(tmp_path / "r.csv"), summary)


def test_resume_reruns_only_the_failed_run(fail_registry, tmp_path):
    out = tmp_path / "out"
    assert _bench("proden,failtest-raises", out).exit_code == 1
    good, bad = _plans(fail_registry, ["proden", "failtest-raises"])
    assert (out / "runs" / bad.run_id / "error.txt").exists()
    Flaky.broken = False  # the cause is fixed
    statuses = []
    rows = bench.execute(fail_registry, [good, bad], out, resume=True, threads=1,
                         on_run=lambda p, s: statuses.append((p.method.name, s)))
    assert statuses == [("proden", "reused"), ("failtest-raises", "started")]
    assert list(rows["status"]) == ["ok", "ok"] and list(pd.read_csv(out / "results.csv")["status"]) == ["ok", "ok"]
    assert not (out / "runs" / bad.run_id / "error.txt").exists() and (out / "runs" / bad.run_id / "done").exists()


def test_every_run_failing_still_writes_the_rows(fail_registry, tmp_path):
    plans = _plans(fail_registry, ["failtest-nan", "failtest-raises"])
    with pytest.raises(RunsFailed, match=r"^2 of 2 runs failed: failtest-nan seed 1 \(.*\); failtest-raises seed 1 "
                                         r"\(.*ValueError: bad component\)\. tracebacks") as err:
        bench.execute(fail_registry, plans, tmp_path, threads=1)
    assert [(p.method.name, why.count("\n")) for p, why in err.value.failed] == [("failtest-nan", 0),
                                                                                  ("failtest-raises", 0)]
    rows = pd.read_csv(tmp_path / "results.csv")
    assert list(rows["status"]) == ["failed", "failed"]
    assert list(rows["run"]) == [p.run_id for p in plans]  # (a second review: the column was dropped)
    res = _bench("failtest-nan", tmp_path / "cli")
    assert res.exit_code == 1 and "failed" in res.output and len(res.output.strip().splitlines()[-1]) > 0
    assert res.output.strip().splitlines()[-1].startswith("Error: 1 of 1 runs failed: failtest-nan seed 1 (")


@pytest.fixture
def boom_registry():
    pm, infos = make_plugin_manager()
    pm.register(jobs_plugin, name="jobtest")  # a module: --jobs workers import it
    return Registry.build(pm, infos)


def test_jobs_writes_the_rows_of_the_sequential_path(boom_registry, tmp_path):
    plans = _plans(boom_registry, ["jobtest-boom", "proden"])
    messages = []
    for jobs in (1, 2):
        with pytest.raises(RunsFailed) as err:
            bench.execute(boom_registry, plans, tmp_path / f"j{jobs}", jobs=jobs, threads=1)
        messages.append(str(err.value).replace(f"j{jobs}", "J"))
        assert "Traceback" in (tmp_path / f"j{jobs}" / "runs" / plans[0].run_id / "error.txt").read_text()
    assert messages[0] == messages[1]
    one, two = (pd.read_csv(tmp_path / f"j{j}" / "results.csv").drop(columns="wall_s") for j in (1, 2))
    pd.testing.assert_frame_equal(one, two)
    assert list(one["status"]) == ["failed", "ok"]


def test_a_failed_run_is_labelled_as_its_setting_among_runs_of_other_settings(fail_registry, tmp_path):
    """A folder holding the method's runs of another length: the failed run's row carries the label that tells
    the two apart (``[train.epochs=2]``), as it would had it finished, not the bare setting of neither."""
    out = tmp_path / "out"
    Flaky.broken = False
    short = [*TINY[:TINY.index("--epochs")], "--epochs", "1", *TINY[TINY.index("--epochs") + 2:]]
    res = CliRunner().invoke(cli, ["bench", "--methods", "failtest-raises", *short, "--out", str(out),
                                   "--threads", "1"])
    assert res.exit_code == 0, res.output
    Flaky.broken = True
    assert _bench("failtest-raises", out).exit_code == 1
    summary = pd.read_csv(out / "summary.csv")
    base = "synthetic-lt φ=0.5 γ=100 subset=200"
    got = {s: (n, f) for s, n, f in zip(summary["setting"], summary["n"], summary["failed"])}
    assert got == {f"{base} [train.epochs=1]": (1, 0), f"{base} [train.epochs=2]": (0, 1)}
    # results.csv tells the two runs of one method and seed apart the same way (an outside review: only the run
    # id did, so grouping its rows by method pooled the settings)
    rows = pd.read_csv(out / "results.csv")
    assert sorted(zip(rows["setting"], rows["status"])) == [(f"{base} [train.epochs=1]", "ok"),
                                                             (f"{base} [train.epochs=2]", "failed")]


def test_report_keeps_failures_after_archive_prune_and_drops_one_finished_elsewhere(fail_registry, tmp_path):
    """A second review: after `pllzoo archive --prune` the failed rows left report (the archive keeps their
    error), and a run that failed in one folder but finished in another read "1 failed" beside n = 2."""
    import shutil

    out = tmp_path / "out"
    assert _bench("failtest-raises,proden", out).exit_code == 1
    res = CliRunner().invoke(cli, ["archive", str(out), "--prune"])
    assert res.exit_code == 0, res.output
    assert "no log.jsonl to archive" in res.output  # failed before its first epoch: its config.json is there
    res = CliRunner().invoke(cli, ["report", str(out), "--csv", str(tmp_path / "r.csv")])
    assert res.exit_code == 0 and "unfinished" not in res.output, res.output
    summary = pd.read_csv(tmp_path / "r.csv").set_index("method")
    assert summary.loc["failtest-raises", "failed"] == 1 and summary.loc["failtest-raises", "n"] == 0
    res = CliRunner().invoke(cli, ["report", str(out), "--wide", "--md", str(tmp_path / "w.md")])
    assert res.exit_code == 0, res.output  # the wide cell says failed, not "–", and n counts finished runs
    text = (tmp_path / "w.md").read_text()
    assert "| failtest-raises | failed |" in text and "n = 1 seeds per cell" in text and "failed: runs" in text
    # proden "failed" in another folder, finished here: not a failure
    (good,) = _plans(fail_registry, ["proden"])
    other = tmp_path / "other" / "runs" / good.run_id
    other.mkdir(parents=True)
    fresh = tmp_path / "fresh"
    assert _bench("proden", fresh).exit_code == 0
    shutil.copy(fresh / "runs" / good.run_id / "config.json", other / "config.json")
    (other / "error.txt").write_text("Traceback: boom\n")
    res = CliRunner().invoke(cli, ["report", str(fresh), str(tmp_path / "other"), "--csv", str(tmp_path / "s.csv")])
    assert res.exit_code == 0, res.output
    row = pd.read_csv(tmp_path / "s.csv").set_index("method").loc["proden"]
    assert row["n"] == 1 and ("failed" not in row or row["failed"] == 0)
