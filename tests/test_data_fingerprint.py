"""A run records a fingerprint of its data (env.json ``data_sha256``): re-scoring or resuming it on other data
(another --data-dir copy with other features) is said in one warning, not silent."""

from __future__ import annotations

import dataclasses
import json

import pytest
from click.testing import CliRunner

from conftest import stopped_run
from pllzoo.cli import cli
from pllzoo.data.base import fingerprint

FINISHED_ARGS = ["bench", "--methods", "proden", "--dataset", "synthetic-lt", "--subset", "200", "--batch-size", "64",
                 "--epochs", "1", "--seeds", "1", "--device", "cpu", "--threads", "1"]


def test_the_fingerprint_sees_every_part(tiny_data):
    assert fingerprint(tiny_data) == fingerprint(dataclasses.replace(tiny_data))
    cand = tiny_data.candidates.clone()
    cand[0] = ~cand[0]
    for changed in (dataclasses.replace(tiny_data, candidates=cand),
                    dataclasses.replace(tiny_data, x_test=tiny_data.x_test + 1e-3),
                    dataclasses.replace(tiny_data, y_train=tiny_data.y_train.flip(0))):
        assert fingerprint(changed) != fingerprint(tiny_data)


def test_evaluate_on_other_data_says_so(out):
    (run,) = (out / "runs").iterdir()
    env = json.loads((run / "env.json").read_text())
    assert len(env["data_sha256"]) == 16
    res = CliRunner().invoke(cli, ["evaluate", str(run), "--device", "cpu"])
    assert res.exit_code == 0 and "not the ones it trained on" not in res.output, res.output
    (run / "env.json").write_text(json.dumps({**env, "data_sha256": "0" * 16}))  # as if trained on another copy
    res = CliRunner().invoke(cli, ["evaluate", str(run), "--device", "cpu"])
    assert res.exit_code == 0, res.output
    assert "these data are not the ones it trained on (fingerprint 0000000000000000, now " in res.output


def test_resume_on_other_data_says_so(tmp_path, monkeypatch, request):
    args, run = stopped_run(tmp_path, monkeypatch, request)
    env = json.loads((run / "env.json").read_text())
    (run / "env.json").write_text(json.dumps({**env, "data_sha256": "0" * 16}))
    res = CliRunner().invoke(cli, [*args, "--resume"])
    assert res.exit_code == 0, res.output
    assert f"{run.name} trained on other data (fingerprint 0000000000000000, now {env['data_sha256']}" in res.output


def _mat(path, other: bool, k: int = 4):
    """A small PALM-layout .mat file; ``other`` squares one feature column (same name, shape and counts; a
    shift alone would not do: the loader z-scores the features)."""
    import numpy as np
    import scipy.io

    rng = np.random.RandomState(0)
    y = rng.randint(0, k, 200)
    x = rng.randn(200, 5) + y[:, None]
    if other:
        x[:, 0] = x[:, 0] ** 2
    target = np.zeros((k, 200))
    target[y, np.arange(200)] = 1
    partial = (rng.rand(k, 200) < 0.3) * 1.0
    partial[y, np.arange(200)] = 1
    path.parent.mkdir(parents=True, exist_ok=True)
    scipy.io.savemat(path, {"data": x, "target": target, "partial_target": partial})
    return path


def test_a_finished_run_reused_on_other_data_says_so(tmp_path):
    """The run id names a user's .mat file by its name, shape and counts: a finished run of another file of the
    same name is reused (nothing is lost) with one warning that names both fingerprints, from the run folder,
    under --resume, and from the archive; the same file again is reused with the plain line."""
    a, b = _mat(tmp_path / "A" / "set.mat", False), _mat(tmp_path / "B" / "set.mat", True)
    out = tmp_path / "out"
    args = ["bench", "--methods", "proden", "--seeds", "1", "--epochs", "1", "--threads", "1", "--out", str(out)]
    assert CliRunner().invoke(cli, [*args, "--dataset", str(a)]).exit_code == 0
    (run,) = (p for p in (out / "runs").iterdir() if p.is_dir())
    was = json.loads((run / "env.json").read_text())["data_sha256"]
    same = CliRunner().invoke(cli, [*args, "--dataset", str(a)])
    assert same.exit_code == 0 and f"reusing finished run {run.name}; --overwrite retrains it" in same.output
    assert "other data" not in same.output, same.output
    for extra in ([], ["--resume"]):
        res = CliRunner().invoke(cli, [*args, "--dataset", str(b), *extra])
        assert res.exit_code == 0, res.output
        assert (f"finished run {run.name} was trained on other data than these (fingerprint {was}, now "
                in res.output), res.output
        assert "reused as it is: --overwrite retrains it on these" in res.output
    replay = ["bench", "--from-run", str(run), "--threads", "1", "--out", str(tmp_path / "again")]
    res = CliRunner().invoke(cli, [*replay, "--dataset", str(b)])
    assert res.exit_code == 0, res.output
    assert f"--from-run {run}: the recorded run trained on other data than these (fingerprint {was}" in res.output
    res = CliRunner().invoke(cli, ["bench", "--from-run", str(run / "config.json"), "--threads", "1", "--out",
                                   str(tmp_path / "again"), "--dataset", str(b), "--dry-run"])
    assert res.exit_code == 0 and "the recorded run trained on other data than these" in res.output, res.output
    res = CliRunner().invoke(cli, [*replay, "--dataset", str(a), "--overwrite"])
    assert res.exit_code == 0 and "other data" not in res.output, res.output
    assert CliRunner().invoke(cli, ["archive", "--prune", str(out)]).exit_code == 0
    (run / "checkpoint.pt").unlink()
    assert CliRunner().invoke(cli, ["archive", "--prune", str(out)]).exit_code == 0
    assert not run.exists()
    res = CliRunner().invoke(cli, [*args, "--dataset", str(b)])
    assert res.exit_code == 0 and f"finished run {run.name} (from runs.jsonl.xz) was trained on other data" in res.output
    res = CliRunner().invoke(cli, [*replay, "--dataset", str(b), "--dry-run"])  # replayed from the archive alone
    assert res.exit_code == 0, res.output
    assert f"--from-run {run}: the recorded run trained on other data than these (fingerprint {was}" in res.output
    res = CliRunner().invoke(cli, [*args, "--dataset", str(b), "--overwrite"])
    assert res.exit_code == 0 and "other data" not in res.output, res.output
    assert json.loads((run / "env.json").read_text())["data_sha256"] != was  # retrained on B


def test_runs_of_one_seed_on_other_data_of_one_name_are_not_pooled(tmp_path):
    """Two files named set.mat (2 and 4 classes), seed 1 each, under one --out: the report shows them as two
    settings told apart by their data (n = 1 each), not as 2 seeds of one; the figure, which draws one dataset,
    refuses them in one line."""
    pytest.importorskip("matplotlib")
    out = tmp_path / "out"
    args = ["bench", "--methods", "proden", "--seeds", "1", "--epochs", "1", "--threads", "1", "--out", str(out)]
    for d, k in (("A", 2), ("B", 4)):
        res = CliRunner().invoke(cli, [*args, "--dataset", str(_mat(tmp_path / d / "set.mat", False, k))])
        assert res.exit_code == 0, res.output
    res = CliRunner().invoke(cli, ["report", str(out), "--csv", str(tmp_path / "t.csv")])
    assert res.exit_code == 0, res.output
    import pandas as pd

    table = pd.read_csv(tmp_path / "t.csv")
    assert len(table) == 2 and set(table["n"]) == {1}, table
    assert all("[data." in s and "data.train_counts=#" in s for s in table["setting"]), table["setting"].tolist()
    res = CliRunner().invoke(cli, ["plot", str(out), "--out", str(tmp_path / "f.png")])
    assert res.exit_code == 1 and "have different numbers of classes" in res.output, res.output
    assert "2 classes" in res.output and "4 classes" in res.output and "Traceback" not in res.output


def test_evaluate_of_a_users_file_named_like_a_builtin_says_to_pass_it(tmp_path, shared_data):
    """A run of the user's own birdsong.mat (7 features) re-scored without --dataset loads the built-in BirdSong
    (38 features): one line saying the data differ and to pass the file, not "retrain the run"."""
    mat = _mat(tmp_path / "D" / "birdsong.mat", False, k=13)
    out = tmp_path / "out"
    res = CliRunner().invoke(cli, ["bench", "--methods", "proden", "--seeds", "1", "--epochs", "1", "--threads", "1",
                                   "--dataset", str(mat), "--out", str(out)])
    assert res.exit_code == 0, res.output
    (run,) = (p for p in (out / "runs").iterdir() if p.is_dir())
    res = CliRunner().invoke(cli, ["evaluate", str(run), "--data-dir", str(shared_data), "--device", "cpu"])
    assert res.exit_code == 1 and "Traceback" not in res.output, res.output
    assert (f"Error: {run.name} trained on other data than 'birdsong' loads here (fingerprint " in res.output
            and "pass it with --dataset PATH" in res.output), res.output
    res = CliRunner().invoke(cli, ["evaluate", str(run), "--dataset", str(mat), "--device", "cpu"])
    assert res.exit_code == 0 and "other data" not in res.output, res.output
    res = CliRunner().invoke(cli, ["bench", "--from-run", str(run), "--data-dir", str(shared_data), "--threads", "1",
                                   "--out", str(tmp_path / "again")])
    assert res.exit_code == 1 and "was it trained on a file of your own of that name (pass it with --dataset PATH)" \
        in res.output, res.output
    # as that line says (an outside review: --dataset PATH was refused as a change of the replayed run)
    res = CliRunner().invoke(cli, ["bench", "--from-run", str(run), "--dataset", str(mat), "--threads", "1",
                                   "--out", str(tmp_path / "again")])
    assert res.exit_code == 0, res.output
    assert [p.name for p in (tmp_path / "again" / "runs").iterdir() if p.is_dir()] == [run.name]
    res = CliRunner().invoke(cli, ["bench", "--from-run", str(run), "--dataset", "lost", "--threads", "1",
                                   "--out", str(tmp_path / "other")])
    assert res.exit_code == 1 and "--dataset would change the run that --from-run replays" in res.output


def test_runs_that_differ_only_in_how_the_data_came_count_once(tmp_path, shared_data):
    """--offline changes the run id (data.download is recorded) but not the data: a bench into the same OUT reuses
    the run trained without it (bench.take_fetch_twins); run into another OUT, it has no "[data.download=...]"
    setting of its own, and the seed with two such runs counts once, with a warning naming the one left out."""
    out, other = tmp_path / "out", tmp_path / "other"
    args = ["bench", "--methods", "proden", "--dataset", "lost", "--data-dir", str(shared_data), "--epochs", "1",
            "--threads", "1"]
    assert CliRunner().invoke(cli, [*args, "--seeds", "1,2", "--out", str(out)]).exit_code == 0
    res = CliRunner().invoke(cli, [*args, "--seeds", "1", "--offline", "--out", str(out)])  # OUT's run: reused
    assert res.exit_code == 0 and "reusing finished run" in res.output and len(list(out.glob("runs/*/"))) == 2, \
        res.output
    assert CliRunner().invoke(cli, [*args, "--seeds", "1", "--offline", "--out", str(other)]).exit_code == 0
    res = CliRunner().invoke(cli, ["report", str(out), str(other), "--csv", str(tmp_path / "t.csv")])
    assert res.exit_code == 0, res.output
    import pandas as pd

    table = pd.read_csv(tmp_path / "t.csv")
    assert list(table["setting"]) == ["lost uniform"] and list(table["n"]) == [2]  # seeds 1 and 2, each once
    assert "the same setting, seed and data as" in res.output
    assert "which differs only in how the data came (e.g. --offline); each run counts once" in res.output


def test_runs_of_other_seeds_on_other_data_are_not_pooled_either(tmp_path, shared_data):
    """An outside review: the PALM lost.mat (seed 1) and the PRODEN-layout copy of it (seed 2) were averaged as
    two seeds of "lost uniform", and so were a step-profile run and an exp one of synthetic-lt.  What the data
    are and does not move with the seed (the layout, the long-tail profile) now makes a setting of its own, while
    an explicit --imb-type exp is the default's setting."""
    import pandas as pd

    out = tmp_path / "out"
    args = ["bench", "--methods", "proden", "--epochs", "1", "--threads", "1", "--out", str(out)]
    proden_copy = shared_data / "pll" / "variants_proden_format" / "lost.mat"
    if not proden_copy.exists():
        pytest.skip(f"{proden_copy} is absent")
    for extra in (["--dataset", "lost", "--data-dir", str(shared_data), "--seeds", "1"],
                  ["--dataset", str(proden_copy), "--seeds", "2"],
                  ["--dataset", "synthetic-lt", "--subset", "300", "--imb-type", "step", "--seeds", "1"],
                  ["--dataset", "synthetic-lt", "--subset", "300", "--imb-type", "exp", "--seeds", "2"],
                  ["--dataset", "synthetic-lt", "--subset", "300", "--seeds", "3"]):
        res = CliRunner().invoke(cli, [*args, *extra])
        assert res.exit_code == 0, res.output
    res = CliRunner().invoke(cli, ["report", str(out), "--csv", str(tmp_path / "t.csv")])
    assert res.exit_code == 0, res.output
    table = pd.read_csv(tmp_path / "t.csv")
    assert dict(zip(table["setting"], table["n"])) == {
        "lost uniform [data.layout=palm]": 1, "lost uniform [data.layout=proden]": 1,
        "synthetic-lt φ=0.5 γ=100 step subset=300": 1, "synthetic-lt φ=0.5 γ=100 subset=300": 2}
