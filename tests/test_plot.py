"""``pllzoo plot``: the drawn lines are the logged numbers (true prior from the training counts,
SoLar's last-epoch prior estimate, class-wise accuracy), over one or several results folders."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from click.testing import CliRunner

from pllzoo import archive
from pllzoo.cli import cli
from pllzoo.plot import figure

RESULTS = Path(__file__).resolve().parents[1] / "benchmarks" / "gpu" / "results"
SOLAR, PRODEN = RESULTS / "resnet18-solar", RESULTS / "resnet18-proden"


def _run(folder: Path) -> tuple[dict, dict]:
    """The config and last record of the folder's one run, read from its archive (git keeps no runs/)."""
    (run,) = archive.read(folder).values()
    return run.config, run.records[-1]


def test_lines_are_the_logged_numbers():
    config, solar_last = _run(SOLAR)
    _, proden_last = _run(PRODEN)
    fig = figure(SOLAR, PRODEN, methods=["solar", "proden"])
    ax_b, ax_c = fig.axes
    true_line, est_line = ax_b.lines
    counts = np.asarray(config["data"]["train_counts"], dtype=float)
    np.testing.assert_allclose(true_line.get_ydata(), counts / counts.sum())
    np.testing.assert_allclose(est_line.get_ydata(), solar_last["prior"])  # PRODEN logs no prior: no line
    assert [line.get_label() for line in ax_c.lines] == ["solar", "proden"]
    np.testing.assert_allclose(ax_c.lines[1].get_ydata(), proden_last["class_acc"])


def test_cli_writes_png_from_several_folders(tmp_path):
    out = tmp_path / "fig.png"
    result = CliRunner().invoke(cli, ["plot", str(SOLAR), str(PRODEN), "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_cli_rejects_unknown_method(tmp_path):
    result = CliRunner().invoke(cli, ["plot", str(SOLAR), "--methods", "nope", "--out", str(tmp_path / "f.png")])
    assert result.exit_code != 0 and "no finished runs" in result.output


def test_runs_without_class_accuracy_are_one_line(tmp_path):
    """A log whose records hold class_acc null (allowed by the record checks) is one line, not a traceback."""
    import json

    out = tmp_path / "out"
    res = CliRunner().invoke(cli, ["bench", "--methods", "proden", "--dataset", "synthetic-lt", "--subset", "200",
                                   "--batch-size", "50", "--epochs", "1", "--threads", "1", "--out", str(out)])
    assert res.exit_code == 0, res.output
    (run,) = (p for p in (out / "runs").iterdir() if p.is_dir())
    log = run / "log.jsonl"
    records = [{**json.loads(line), "class_acc": None} for line in log.read_text().splitlines() if line.strip()]
    log.write_text("".join(json.dumps(r) + "\n" for r in records))
    res = CliRunner().invoke(cli, ["plot", str(out), "--out", str(tmp_path / "f.png")])
    assert res.exit_code == 1 and "record no class-wise accuracy" in res.output and "Traceback" not in res.output


def test_runs_of_other_settings_are_refused_not_averaged(tmp_path):
    """Two imbalance ratios (the same 10 classes), or one method trained for other epochs, are other
    experiments: one line over them would be a mean of both (outside review); the refusal names each setting
    with its methods.  The runs of one setting are drawn, and the true prior is their mean."""
    common = ["bench", "--dataset", "synthetic-lt", "--subset", "200", "--batch-size", "50", "--threads", "1"]

    def bench(out, *extra):
        res = CliRunner().invoke(cli, [*common, "--out", str(tmp_path / out), *extra])
        assert res.exit_code == 0, res.output
        return tmp_path / out

    g100 = bench("g100", "--methods", "proden,cc", "--epochs", "1")
    g10 = bench("g10", "--methods", "proden", "--epochs", "1", "--imb", "10")
    longer = bench("long", "--methods", "proden", "--epochs", "2")
    for other, says in ((g10, "γ=10 subset=200: proden"), (longer, "[train.epochs=2]: proden")):
        res = CliRunner().invoke(cli, ["plot", str(g100), str(other), "--out", str(tmp_path / "f.png")])
        assert res.exit_code == 1 and "settings (" in res.output and says in res.output, res.output
        assert "Traceback" not in res.output and not (tmp_path / "f.png").exists()
    fig = figure(g100, longer, methods=["cc"])  # one setting left: drawn
    assert [line.get_label() for line in fig.axes[1].lines] == ["cc"]


def test_classes_run_from_head_to_tail_with_their_labels_as_ticks():
    """An outside review: on a real-world set (labels not in frequency order) the axis said "0 = head" under a
    zig-zag prior; the classes are now drawn by training count, ties in label order, each tick its label."""
    folder = Path(__file__).resolve().parents[1] / "benchmarks" / "realworld" / "results" / "msrcv2-uniform"
    runs = [r for r in archive.read(folder).values() if r.config["method"] == "proden" and r.done]
    fig = figure(folder, methods=["proden"])
    ax_b, ax_c = fig.axes
    counts = np.mean([np.asarray(r.config["data"]["train_counts"], float) / sum(r.config["data"]["train_counts"])
                      for r in runs], axis=0)
    order = sorted(range(len(counts)), key=lambda c: (-counts[c], c))
    assert list(counts) != sorted(counts, reverse=True)  # MSRCv2's labels are not in frequency order
    np.testing.assert_allclose(ax_b.lines[0].get_ydata(), counts[order])
    assert [t.get_text() for t in ax_b.get_xticklabels()] == [str(c) for c in order]
    accs = np.nanmean([[np.nan if a is None else a for a in r.records[-1]["class_acc"]] for r in runs], axis=0)
    np.testing.assert_allclose(ax_c.lines[0].get_ydata(), accs[order])  # NaN (no test row) where the plot has a gap
    assert ax_b.get_xlabel() == "class, by training count (head first)"
