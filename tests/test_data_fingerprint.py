"""A run records a fingerprint of its data (env.json ``data_sha256``): re-scoring or resuming it on other data
(another --data-dir copy with other features) is said in one warning, not silent."""

from __future__ import annotations

import dataclasses
import json

from click.testing import CliRunner

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
    import fake_clock
    import torch

    request.addfinalizer(lambda threads=torch.get_num_threads(): torch.set_num_threads(threads))
    fake_clock.install(monkeypatch)  # 10 s an epoch
    out = tmp_path / "out"
    args = ["bench", "--methods", "proden", "--dataset", "synthetic-lt", "--epochs", "5", "--out", str(out),
            "--threads", "1"]
    assert CliRunner().invoke(cli, [*args, "--time-limit", "0.5"]).exit_code == 75
    (run,) = (p for p in (out / "runs").iterdir() if p.is_dir())
    env = json.loads((run / "env.json").read_text())
    (run / "env.json").write_text(json.dumps({**env, "data_sha256": "0" * 16}))
    res = CliRunner().invoke(cli, [*args, "--resume"])
    assert res.exit_code == 0, res.output
    assert f"{run.name} trained on other data (fingerprint 0000000000000000, now {env['data_sha256']}" in res.output
