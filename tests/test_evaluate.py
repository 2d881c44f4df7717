"""``pllzoo evaluate``: a finished run's final model re-scored without training — as trained it
reproduces the last record, and SoLar-LA's ζ moves predictions as g − ζ·log r says."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from click.testing import CliRunner

from pllzoo.cli import cli
from pllzoo.errors import PLLZooError
from pllzoo.evaluate import rescore
from pllzoo.registry import get_registry


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("evaluate")
    result = CliRunner().invoke(cli, ["bench", "--methods", "solar", "--dataset", "synthetic-lt", "--seeds", "1",
                                      "--epochs", "2", "--hp", "estimator.est_epochs=1", "--device", "cpu",
                                      "--out", str(out)])
    assert result.exit_code == 0, result.output
    (run,) = (out / "runs").iterdir()
    return run


def _last(run: Path) -> dict:
    return json.loads((run / "log.jsonl").read_text().splitlines()[-1])


def test_as_trained_reproduces_the_last_record(run_dir):
    last = _last(run_dir)
    for got in (rescore(get_registry(), run_dir, {}, device="cpu"),
                rescore(get_registry(), run_dir, {"predict.zeta": "0"}, predict="solar.la", device="cpu")):
        for key in ("acc_all", "acc_many", "acc_medium", "acc_few", "class_acc"):
            assert got[key] == last[key], key


def test_large_zeta_predicts_the_rarest_estimated_class(run_dir):
    """ζ = 1e4 swamps the logits: argmax(g − ζ log r) = argmin r for every test row."""
    prior = torch.tensor(_last(run_dir)["prior"])
    got = rescore(get_registry(), run_dir, {"predict.zeta": "1e4"}, predict="solar.la", device="cpu")
    rarest = int(prior.argmin())
    assert got["method"] == "solar+predict=solar.la"
    assert [a for a in got["class_acc"]] == [100.0 if k == rarest else 0.0 for k in range(prior.numel())]


def test_errors(run_dir, tmp_path):
    with pytest.raises(PLLZooError, match="unknown hyper-parameter.*predict.zeta"):
        rescore(get_registry(), run_dir, {"predict.zeta": "1"}, device="cpu")  # plain solar has no predict slot
    unfinished = tmp_path / "run"
    unfinished.mkdir()
    with pytest.raises(PLLZooError, match="not a finished run"):
        rescore(get_registry(), unfinished, {}, device="cpu")
    (unfinished / "done").write_text("")
    with pytest.raises(PLLZooError, match="no checkpoint"):
        rescore(get_registry(), unfinished, {}, device="cpu")


def test_cli_prints_and_writes_rows(run_dir, tmp_path):
    out = tmp_path / "rows.csv"
    result = CliRunner().invoke(cli, ["evaluate", str(run_dir), "--predict", "solar.la", "--hp", "predict.zeta=1",
                                      "--device", "cpu", "--csv", str(out)])
    assert result.exit_code == 0, result.output
    assert "predict=solar.la, predict.zeta=1" in result.output and run_dir.name in result.output
    text = out.read_text()
    assert text.splitlines()[0].startswith("run,method,seed,overrides,acc_all") and "predict.zeta=1" in text


def test_cli_md_is_mean_and_sample_std_per_method(run_dir, tmp_path):
    # the same run twice: mean = its value, sample std = 0, n = 2, one row for the method
    out = tmp_path / "table.md"
    result = CliRunner().invoke(cli, ["evaluate", str(run_dir), str(run_dir), "--device", "cpu", "--md", str(out)])
    assert result.exit_code == 0, result.output
    last = _last(run_dir)
    rows = [line for line in out.read_text().splitlines() if line.startswith("| solar")]
    assert rows == [f"| solar | {last['acc_all']:.2f} ± 0.00 | {last['acc_many']:.2f} ± 0.00 | "
                    f"{last['acc_medium']:.2f} ± 0.00 | {last['acc_few']:.2f} ± 0.00 | 2 |"]
    assert out.read_text().startswith("### Re-scored: as trained")


def test_a_training_setting_is_refused_since_it_would_change_nothing(run_dir):
    with pytest.raises(PLLZooError, match=r"^selection.tau: evaluate re-scores the trained model, so only predict\.\* "):
        rescore(get_registry(), run_dir, {"selection.tau": "0.5"}, predict="solar.la", device="cpu")
