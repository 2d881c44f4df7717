"""A run recorded with another version of a plugin than the one installed (env.json's ``components`` and
``trainer`` parts) is reused, resumed, replayed and re-scored with one warning naming the versions
(:func:`pllzoo.runfolders.version_change`): a component's numbers may change from one version to the next under
one run id.  An outside review: HTC runs recorded before its ensemble's default for classes of prior 0 changed
kept their ids, were reused and averaged with new ones, and re-scored to other numbers, all without a word."""

from __future__ import annotations

import json

from click.testing import CliRunner

from conftest import stopped_run
from pllzoo.cli import cli
from pllzoo.runfolders import version_change

FINISHED_ARGS = ["bench", "--methods", "proden", "--dataset", "synthetic-lt", "--subset", "200", "--batch-size", "64",
                 "--epochs", "1", "--seeds", "1", "--device", "cpu", "--threads", "1"]


def _part(name: str, dist: str, version: str, key: str = "component") -> dict:
    return {key: name, "plugin": dist, "dist": dist, "version": version}


def test_each_distribution_is_named_once_with_its_components():
    was = {"components": {"label_update": _part("htc.confidence", "pllzoo-ltpll", "0.1.0"),
                          "selection": _part("pllzoo.all", "pllzoo", "0.4.0"),
                          "predict": _part("htc.ensemble", "pllzoo-ltpll", "0.1.0")},
           "trainer": {"model": _part("mlp", "pllzoo", "0.3.0", "name"),
                       "weak_view": _part("weak", "pllzoo", "0.3.0", "name")}}
    now = {"components": {"label_update": _part("htc.confidence", "pllzoo-ltpll", "0.2.0"),
                          "selection": _part("pllzoo.all", "pllzoo", "0.4.0"),
                          "predict": _part("htc.ensemble", "pllzoo-ltpll", "0.2.0")},
           "trainer": {"model": _part("mlp", "pllzoo", "0.4.0", "name"),
                       "weak_view": _part("weak", "pllzoo", "0.4.0", "name")}}
    assert version_change(was, now) == ("pllzoo-ltpll 0.1.0 (htc.confidence, htc.ensemble), now 0.2.0; "
                                        "pllzoo 0.3.0 (mlp, weak), now 0.4.0")
    assert version_change(was, now, frozenset({"predict", "model"})) == ("pllzoo-ltpll 0.1.0 (htc.ensemble), now "
                                                                         "0.2.0; pllzoo 0.3.0 (mlp), now 0.4.0")
    assert version_change(was, now, frozenset({"selection"})) is None
    assert version_change(now, now) is None and version_change(None, now) is None
    other = {"components": {"predict": _part("htc.ensemble", "my-fork", "9.0")}}  # another plugin: not a version
    assert version_change(was, other) is None  # (supplier_change's, which retrains)
    older = {"versions": {"pllzoo-ltpll": "0.1.0", "pllzoo": "0.4.0"}}  # recorded before the supplier parts
    assert version_change(older, now) == "pllzoo-ltpll 0.1.0 (htc.confidence, htc.ensemble), now 0.2.0"
    assert version_change({**older, "trainer": was["trainer"]}, now) == (
        "pllzoo-ltpll 0.1.0 (htc.confidence, htc.ensemble), now 0.2.0; pllzoo 0.3.0 (mlp, weak), now 0.4.0")


def _recorded_with(run, slot_or_key: str, version: str, part: str = "components") -> str:
    env = json.loads((run / "env.json").read_text())
    entry = env[part][slot_or_key]
    was = entry["version"]
    entry["version"] = version
    (run / "env.json").write_text(json.dumps(env))
    return was


def test_reuse_resume_replay_and_evaluate_say_which_versions(out, tmp_path):
    (run,) = (p for p in (out / "runs").iterdir() if p.is_dir())
    args = [*FINISHED_ARGS, "--out", str(out)]
    same = CliRunner().invoke(cli, args)
    assert same.exit_code == 0 and "recorded with" not in same.output, same.output
    now = _recorded_with(run, "loss", "0.0.1")
    for extra in ([], ["--resume"]):  # under --resume the plain "reusing" line is not said; this one is
        res = CliRunner().invoke(cli, [*args, *extra])
        assert res.exit_code == 0, res.output
        assert (f"proden seed 1: finished run {run.name} was recorded with pllzoo-baselines 0.0.1 (proden.loss), now "
                f"{now}; reused as it is (its numbers are that version's): --overwrite retrains it with these"
                in res.output), res.output
    res = CliRunner().invoke(cli, ["evaluate", str(run), "--device", "cpu"])
    assert res.exit_code == 0 and "recorded with" not in res.output, res.output  # the loss does not re-score
    host = _recorded_with(run, "model", "0.0.2", "trainer")
    res = CliRunner().invoke(cli, ["evaluate", str(run), "--device", "cpu"])
    assert res.exit_code == 0, res.output
    assert (f"{run.name}: recorded with pllzoo 0.0.2 (mlp), now {host}; re-scored with these, so its numbers may "
            "differ from its log's") in res.output, res.output
    res = CliRunner().invoke(cli, ["bench", "--from-run", str(run), "--threads", "1", "--out", str(tmp_path / "again"),
                                   "--dry-run"])
    assert res.exit_code == 0, res.output
    assert (f"--from-run {run}: recorded with pllzoo-baselines 0.0.1 (proden.loss), now {now}; pllzoo 0.0.2 (mlp), "
            f"now {host}; replayed with these, whose numbers may differ") in res.output, res.output


def test_a_resumed_run_says_which_versions_trained_it_so_far(tmp_path, monkeypatch, request):
    args, run = stopped_run(tmp_path, monkeypatch, request)
    now = _recorded_with(run, "label_update", "0.0.1")
    res = CliRunner().invoke(cli, [*args, "--resume"])
    assert res.exit_code == 0, res.output
    assert (f"{run.name} was trained so far with pllzoo-baselines 0.0.1 (proden.confidence), now {now}; it "
            "continues with these") in res.output, res.output
