"""PLENCH's approximated accuracy on held-out partially labelled rows, and ``--select approx``: by hand."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd
import pytest
import torch
from click.testing import CliRunner

from pllzoo.cli import cli
from pllzoo.data.holdout import hold_out
from pllzoo.errors import PLLZooError
from pllzoo.metrics import approximated_accuracy, covering_rate
from pllzoo.model_selection import select_epochs
from pllzoo.run import TrainConfig
from pllzoo.trainer import Trainer
from conftest import make_tiny_data


def _logits(*probs: list[float]) -> torch.Tensor:
    """Logits whose softmax is each row of ``probs`` (log p)."""
    return torch.tensor(probs, dtype=torch.float32).log()


def _plench(logits: torch.Tensor, cand: torch.Tensor) -> float:
    """PLENCH lib/misc.py ``val_approximated_accuracy``, row by row in float64, in %."""
    total = 0.0
    for z, y in zip(logits.double().tolist(), cand.tolist()):
        m = max(z)
        e = [math.exp(v - m) for v in z]
        p = [v / sum(e) for v in e]
        conf = [pj * yj for pj, yj in zip(p, y)]
        base = sum(conf) + 1e-12
        pred = z.index(max(z))
        total += 1.0 - sum(c / base for j, c in enumerate(conf) if j != pred)
    return 100.0 * total / len(cand)


def test_approximated_accuracy_by_hand():
    logits = _logits([0.5, 0.3, 0.2], [0.6, 0.3, 0.1], [0.2, 0.2, 0.6])
    cand = torch.tensor([[1, 1, 0], [0, 1, 1], [0, 0, 1]], dtype=torch.bool)
    # row 1: ŷ = 0 ∈ S, c = (0.5, 0.3)/0.8 → 1 − 0.375 = 0.625
    # row 2: ŷ = 0 ∉ S, c = (0.75, 0.25) on classes 1, 2 → 1 − 1 = 0
    # row 3: S = {2} = {ŷ} → 1
    assert approximated_accuracy(logits, cand) == pytest.approx(100 * (0.625 + 0 + 1) / 3, abs=1e-5)
    assert covering_rate(logits.argmax(1), cand) == pytest.approx(100 * 2 / 3)  # the coarser score


def test_a_row_whose_candidate_probabilities_underflow_scores_one_as_in_plench():
    # ŷ = 0 is not a candidate, but p_1 = e^-200 underflows to 0 in float32: c = 0 and the row scores 1
    logits = torch.tensor([[0.0, -200.0], [0.0, -1.0]])
    cand = torch.tensor([[0, 1], [0, 1]], dtype=torch.bool)
    assert approximated_accuracy(logits, cand) == pytest.approx(100 * (1 + 0) / 2)


def test_approximated_accuracy_is_the_mean_renormalised_confidence_of_the_prediction():
    g = torch.Generator().manual_seed(0)
    logits = 3 * torch.randn(50, 6, generator=g)
    cand = torch.rand(50, 6, generator=g) < 0.4
    cand[torch.arange(50), torch.randint(0, 6, (50,), generator=g)] = True
    p = torch.softmax(logits.double(), 1) * cand
    c = p / p.sum(1, keepdim=True)
    expected = 100 * float(c.gather(1, logits.argmax(1, keepdim=True)).mean())
    assert approximated_accuracy(logits, cand) == pytest.approx(expected, abs=1e-4)
    assert approximated_accuracy(logits, cand) == pytest.approx(_plench(logits, cand), abs=1e-4)


def _records(score: str = "val_approx") -> pd.DataFrame:
    rows = [dict(run="a", final_stage=False, epoch=1, acc_all=99.0, val_approx=99.0, val_covering=99.0)]
    rows += [dict(run="a", final_stage=True, epoch=e, acc_all=acc, val_approx=aa, val_covering=cr)
             for e, acc, aa, cr in [(1, 50.0, 40.0, 80.0), (2, 70.0, 60.0, 90.0), (3, 60.0, 60.0, 90.0)]]
    rows += [dict(run="b", final_stage=True, epoch=e, acc_all=acc, val_approx=aa, val_covering=cr)
             for e, acc, aa, cr in [(1, 40.0, 70.0, 95.0), (2, 30.0, 50.0, 60.0), (3, 45.0, 65.0, 70.0)]]
    return pd.DataFrame(rows)


def test_select_approx_takes_the_best_final_stage_epoch_earliest_on_ties():
    out = select_epochs(_records(), "approx")
    assert dict(zip(out["run"], out["epoch"])) == {"a": 2, "b": 1}  # a: 60 at epochs 2 and 3 → 2
    assert dict(zip(out["run"], out["acc_all"])) == {"a": 70.0, "b": 40.0}
    heldout = select_epochs(_records(), "heldout")  # the covering rate's ties (90 at epochs 2, 3) too: earliest
    assert dict(zip(heldout["run"], heldout["epoch"])) == {"a": 2, "b": 1}


def test_select_approx_without_the_score_says_how_to_get_it():
    with pytest.raises(PLLZooError, match=r"needs 'val_approx' .* missing in a, b .*--holdout 0.1"):
        select_epochs(_records().drop(columns="val_approx"), "approx")


def _trainer(method: str, registry, epochs: int = 2) -> tuple[Trainer, list[dict]]:
    data = hold_out(make_tiny_data(n=96), 0.25, seed=1)
    comps = registry.build_components(registry.method(method), {}, dataset=(data.name, data.kind))
    cfg = TrainConfig(model="linear", epochs=epochs, lr=0.1, weight_decay=0.0, batch_size=16)
    trainer = Trainer(data, comps, cfg, seed=1, device=torch.device("cpu"))
    return trainer, trainer.fit()


def test_the_trainer_records_the_approximated_accuracy_of_the_held_out_rows(registry, one_torch_thread):
    trainer, records = _trainer("proden", registry)
    assert all(0.0 <= r["val_approx"] <= 100.0 for r in records) and len(records) == 2
    trainer.model.eval()
    with torch.no_grad():
        logits = trainer.model(trainer.x_val).float()  # tabular: no normalisation; proden adjusts nothing
    assert records[-1]["val_approx"] == pytest.approx(_plench(logits, trainer.candidates_val), abs=1e-4)
    assert records[-1]["val_covering"] == covering_rate(logits.argmax(1), trainer.candidates_val)


def test_the_approximated_accuracy_scores_the_deployed_prediction(registry, one_torch_thread):
    """SoLar-LA adjusts its logits at test time (pllzoo_predict): the score is of the adjusted ones."""
    trainer, records = _trainer("solar-la", registry, epochs=1)
    raw = trainer._eval_logits(trainer.x_val)
    adjusted = trainer._predict_logits(trainer.x_val)
    assert not torch.equal(raw, adjusted)
    assert records[-1]["val_approx"] == pytest.approx(_plench(adjusted, trainer.candidates_val), abs=1e-4)


FINISHED_ARGS = ["bench", "--methods", "proden", "--subset", "300", "--epochs", "3", "--holdout", "0.2",
                 "--seeds", "1", "--device", "cpu", "--hp", "train.batch_size=32"]


def test_report_select_approx_reports_the_argmax_epoch_of_the_log(finished: Path, tmp_path: Path):
    (log,) = finished.glob("runs/*/log.jsonl")
    recs = [json.loads(line) for line in log.read_text().splitlines()]
    best = max(recs, key=lambda r: r["val_approx"])  # Python max: the earliest of equal scores, as PLENCH
    res = CliRunner().invoke(cli, ["report", str(finished), "--select", "approx", "--csv", str(tmp_path / "s.csv")])
    assert res.exit_code == 0, res.output
    assert "the best approximated accuracy (PLENCH)" in " ".join(res.output.split())  # the caption says so
    row = pd.read_csv(tmp_path / "s.csv").iloc[0]
    assert row["acc_all_mean"] == pytest.approx(best["acc_all"], abs=1e-4)


def test_report_select_approx_on_runs_without_a_holdout_is_one_line(tmp_path: Path):
    out = tmp_path / "out"
    args = ["bench", "--methods", "proden", "--subset", "100", "--epochs", "1", "--device", "cpu",
            "--hp", "train.batch_size=32", "--out", str(out)]
    assert CliRunner().invoke(cli, args).exit_code == 0
    res = CliRunner().invoke(cli, ["report", str(out), "--select", "approx"])
    assert res.exit_code == 1 and "Traceback" not in res.output
    errors = [line for line in res.output.splitlines() if line.startswith("Error:")]
    assert len(errors) == 1 and "val_approx" in errors[0] and "--holdout 0.1" in errors[0]


def test_select_heldout_with_a_score_missing_at_one_epoch_says_the_log_was_changed():
    """An outside review: a null covering rate in a run trained with --holdout was answered with 'rerun with
    --holdout 0.1'."""
    recs = _records()
    recs.loc[(recs["run"] == "a") & (recs["epoch"] == 2), "val_covering"] = None
    with pytest.raises(PLLZooError, match=r"needs 'val_covering' in every epoch record; a logged it at other epochs "
                                          r"but not at epoch 2 \(a damaged or edited log.jsonl\)"):
        select_epochs(recs, "heldout")


@pytest.mark.parametrize("value, says", [('"94.0"', "'94.0', not a finite number or null"),
                                         ("1e999", "inf, not a finite number or null"),
                                         ("true", "True, not a finite number or null"),
                                         ("140.0", "140.0, not a percentage")])
def test_report_leaves_out_a_run_whose_held_out_score_is_not_a_number(out: Path, value: str, says: str):
    """An outside review: a string score was a pandas traceback, an infinite one chose its epoch silently."""
    (log,) = out.glob("runs/*/log.jsonl")
    lines = log.read_text().splitlines()
    rec = json.loads(lines[1])
    lines[1] = json.dumps(rec).replace(f'"val_covering": {json.dumps(rec["val_covering"])}', f'"val_covering": {value}')
    log.write_text("\n".join(lines) + "\n")
    res = CliRunner().invoke(cli, ["report", str(out), "--select", "heldout"])
    assert "Traceback" not in res.output, res.output
    warning = next((line for line in res.output.splitlines() if "damaged run" in line), res.output)
    assert f"log.jsonl's val_covering at epoch 2 is {says}" in " ".join(res.output.split()), warning


def test_a_score_rounded_just_below_zero_is_the_trainers_own_not_damage(out: Path):
    """An outside review: float32 put a held-out approximated accuracy at -5.96e-06, and the check that followed
    the first review called the run damaged, so every bench retrained it, forever."""
    (log,) = out.glob("runs/*/log.jsonl")
    lines = log.read_text().splitlines()
    rec = json.loads(lines[0])
    rec["val_approx"] = -5.9604644775390625e-06
    lines[0] = json.dumps(rec)
    log.write_text("\n".join(lines) + "\n")
    res = CliRunner().invoke(cli, ["report", str(out), "--select", "approx"])
    assert res.exit_code == 0 and "damaged" not in res.output, res.output
