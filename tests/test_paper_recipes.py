"""benchmarks/paper: every recipe is a valid ``pllzoo bench`` call, cells agree with the paper's LaTeX.

The fast tests parse each run's arguments with the bench command's own parser and route its
``--hp`` keys without loading data; the slow test trains the Table 1 CIFAR-10-LT φ=0.5 γ=100
SoLar run for 1 + 1 epochs on 256 images through ``run.py``.
"""

from __future__ import annotations

import importlib.util
import json
import math
import re
import subprocess
import sys

import pandas as pd
import pytest
from click.testing import CliRunner

from conftest import REPO, shared_data_dir

PAPER_DIR = REPO / "benchmarks" / "paper"
TEX = REPO.parent / "shared" / "spec" / "solar-paper.tex"


def _load_run_py():
    spec = importlib.util.spec_from_file_location("paper_run", PAPER_DIR / "run.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


paper = _load_run_py()
CELLS = paper.load_recipes()
RUNS = paper.runs(CELLS)


def test_cells_are_unique_and_complete():
    assert CELLS["cell"].is_unique
    assert set(CELLS["table"]) == set(paper.TABLES)
    assert set(CELLS["metric"]) <= {"all", "many", "medium", "few"}
    blocked = CELLS[CELLS["method"] == ""]
    assert (blocked["note"] != "").all() and (blocked["args"] == "").all() and (blocked["run"] == "").all()
    assert (paper.runnable(CELLS)["run"] != "").all()


def test_runnable_paper_values_are_numbers():
    published = paper.runnable(CELLS)
    published = published[published["table"] != "H"]  # HTC: no published number (its README gives none)
    for value in published["paper"]:
        assert re.fullmatch(r"\d+\.\d\d", value), value
        assert math.isfinite(float(value))
    htc = CELLS[CELLS["table"] == "H"]
    assert (htc["paper"] == "").all() and htc["note"].str.contains("no published number").all()


def test_cells_sharing_a_run_share_method_and_args():
    shared = paper.runnable(CELLS).groupby("run")[["method", "args"]].nunique()
    assert (shared == 1).all().all(), shared[(shared > 1).any(axis=1)]


@pytest.mark.skipif(not TEX.is_file(), reason=f"{TEX} is absent")
def test_paper_values_are_printed_in_their_latex_table():
    tex = TEX.read_text()
    for table, spec in paper.TABLES.items():
        if spec.label is None:
            continue
        label = spec.label
        at = tex.index(f"\\label{{{label}}}")
        body = tex[tex.rindex("\\begin{table", 0, at): tex.index("\\end{table", at)]
        for _, c in CELLS[CELLS["table"] == table].iterrows():
            std = rf"\}}?\s*\\tiny\{{\$\\pm\$\s*{re.escape(c['paper_std'])}(?!\d)" if c["paper_std"] else r"\}?(?![\d.])"
            assert re.search(rf"(?<![\d.]){re.escape(c['paper'])}{std}", body), (c["cell"], label)


SPEC = REPO.parent / "shared" / "spec" / "beyond.md"


@pytest.mark.skipif(not SPEC.is_file(), reason=f"{SPEC} is absent")
def test_records_values_are_the_readme_rows():
    """Each RECORDS cell is in its row of the README's tables (as the maintainers' notes in ../shared/spec quote them), in its column."""
    text = SPEC.read_text()
    section = text[text.index("### 1.8"):text.index("### 1.9")]
    c10, c100 = section.split("CIFAR-100-LT")[0], section.split("CIFAR-100-LT")[1]
    columns = {("0.3", "50"): 0, ("0.5", "50"): 1, ("0.7", "50"): 2, ("0.3", "100"): 3, ("0.5", "100"): 4,
               ("0.7", "100"): 5, ("0.03", "50"): 0, ("0.05", "50"): 1, ("0.07", "50"): 2, ("0.03", "100"): 3,
               ("0.05", "100"): 4, ("0.07", "100"): 5}
    rec = CELLS[CELLS["table"] == "R"]
    assert len(rec) == 6
    for _, c in rec.iterrows():
        phi, imb = re.search(r"φ=([\d.]+) γ=(\d+)", c["setting"]).groups()
        block = c100 if c["setting"].startswith("CIFAR100") else c10
        row = next(line for line in block.splitlines() if line.startswith(f"| {c['row']} |"))
        values = [v.strip() for v in row.strip("|").split("|")[1:]]
        assert values[columns[(phi, imb)]] == c["paper"], (c["cell"], row)


@pytest.mark.parametrize("run", RUNS.to_dict("records"), ids=list(RUNS["run"]))
def test_run_is_a_valid_bench_call(run, registry, tmp_path):
    from pllzoo.bench import _route, parse_overrides
    from pllzoo.cli.bench import bench

    argv = paper.bench_argv(pd.Series(run), "1,2,3", tmp_path / run["run"])
    params = bench.make_context("bench", argv).params  # the command's own parser: option names and types
    method = registry.method(params["methods"])
    registry.dataset(params["dataset"])
    _, per_method = _route(parse_overrides(params["hps"]), [method], registry)
    registry.build_components(method, per_method[method.name], (params["dataset"], "image"))
    assert params["resume"] and params["seeds"] == "1,2,3"


def test_dry_run_prints_the_bench_command():
    result = CliRunner().invoke(paper.main, ["run", "t2-c10-phi0.5-g100-solar-few", "--dry-run", "--seeds", "1",
                                             "--device", "cuda"])
    assert result.exit_code == 0, result.output
    assert "-m pllzoo bench --methods solar --dataset cifar10lt --phi 0.5 --imb 100 --seeds 1" in result.output
    assert "results/c10-phi0.5-g100-solar --resume --device cuda" in result.output


def test_table_reads_whatever_results_exist(tmp_path):
    for seed, acc in [(1, 70.0), (2, 72.0)]:  # two finished runs as pllzoo bench leaves them
        run = tmp_path / "c10-phi0.5-g100-solar" / "runs" / f"solar__cifar10lt__s{seed}"
        run.mkdir(parents=True)
        (run / "config.json").write_text(json.dumps({"dataset": "cifar10lt", "data": {"phi": 0.5, "imb": 100}}))
        records = [{"method": "solar", "dataset": "cifar10lt", "seed": seed, "stage": "train", "stage_index": 0,
                    "epoch": e, "epochs": 1000, "final_stage": True, "acc_all": acc, "acc_many": 90.0,
                    "acc_medium": 70.0, "acc_few": 50.0} for e in range(1, 1001)]  # a whole log: a cut one is damaged
        (run / "log.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
        (run / "done").write_text("ok\n")
    text = paper.markdown_tables(CELLS, tmp_path)
    assert "| `t1-c10-phi0.5-g100-solar` | SoLar (ours) | CIFAR10-LT φ=0.5 γ=100 | all | 74.16 ± 3.03 | 71.00 ± 1.41 (n=2) |" in text
    assert "| few | 49.34 | 50.00 ± 0.00 (n=2) |" in text
    assert "| `t1-c10-phi0.5-g50-solar` | SoLar (ours) | CIFAR10-LT φ=0.5 γ=50 | all | 81.38 ± 2.84 | not run |" in text
    assert "not runnable: no SUN397 loader" in text
    for seed in (1, 2):  # the same runs, as the GPU machines train them: the JPEG copy, CUDA with bf16
        config = tmp_path / "c10-phi0.5-g100-solar" / "runs" / f"solar__cifar10lt__s{seed}" / "config.json"
        config.write_text(json.dumps({"dataset": "cifar10lt", "device": "cuda", "train": {"amp": True},
                                      "data": {"phi": 0.5, "imb": 100, "source": "jpeg"}}))
    text = paper.markdown_tables(CELLS, tmp_path)
    assert "| 74.16 ± 3.03 | 71.00 ± 1.41 (n=2) [JPEG copy, bf16] |" in text
    assert "A cell marked [JPEG copy] was trained on the lossy JPEG copy of CIFAR-10" in text
    runs = tmp_path / "c10-phi0.5-g100-solar" / "runs"
    (runs / "solar__cifar10lt__s1" / "config.json").write_text('{"data": ')  # damaged: load() leaves it out
    (runs / "solar__cifar10lt__s2" / "config.json").write_text(json.dumps(  # a CPU run on torchvision's copy
        {"dataset": "cifar10lt", "device": "cpu", "data": {"phi": 0.5, "imb": 100, "source": "torchvision"}}))
    (runs / "solar__cifar10lt__s9").mkdir()  # unfinished, on the JPEG copy: not in the numbers, not in the mark
    (runs / "solar__cifar10lt__s9" / "config.json").write_text(json.dumps({"device": "cuda", "data": {"source": "jpeg"}}))
    with pytest.warns(UserWarning, match="damaged run"):
        text = paper.markdown_tables(CELLS, tmp_path)  # written, no traceback
    assert "| 74.16 ± 3.03 | 72.00 (n=1) |" in text


@pytest.mark.slow
def test_table1_solar_run_trains_through_run_py(tmp_path):
    data = shared_data_dir()
    if not (data / "cifar10_jpeg").is_dir():
        pytest.skip(f"{data / 'cifar10_jpeg'} is absent (the offline CIFAR-10 copy)")
    out = tmp_path / "out"
    cmd = [sys.executable, str(PAPER_DIR / "run.py"), "run", "c10-phi0.5-g100-solar", "--seeds", "1", "--out", str(out),
           "--device", "cpu", "--subset", "256", "--epochs", "1", "--hp", "solar:estimator.est_epochs=1",
           "--data-dir", str(data), "--offline"]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=1800)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    rows = pd.read_csv(out / "results.csv")
    assert len(rows) == 1 and rows["method"].iloc[0] == "solar"
    accs = rows[["acc_all", "acc_many", "acc_medium", "acc_few"]].to_numpy()
    assert all(math.isfinite(a) for a in accs.ravel())
    (log,) = (out / "runs").glob("*/log.jsonl")
    records = [json.loads(line) for line in log.read_text().splitlines() if line.strip()]
    assert len(records) == 2 and [r["stage"] for r in records] == ["pre-estimation", "train"]
    # the recipe as run.py table resolves it (without the images) is the bench's own: only what was given beside it
    # is marked (--epochs is said by the cell itself)
    recipe = RUNS[RUNS["run"] == "c10-phi0.5-g100-solar"].iloc[0]
    assert paper.differences(out, {log.parent.name}, recipe) == "JPEG copy, --subset 256, estimator.est_epochs=1"


def test_differences_name_a_momentum_restart_a_subset_and_another_model(tmp_path):
    """An outside review: a carried run resumed with its SGD momentum restarted, and a smoke run on --subset 512 with
    a small CNN, showed in TABLES.md as the paper cell with no mark of either."""
    import json

    run = tmp_path / "runs" / "solar__cifar10lt__s1-x"
    run.mkdir(parents=True)
    config = {"device": "cuda", "train": {"amp": True, "model": "cnn"}, "data": {"source": "jpeg", "subset": 512}}
    (run / "config.json").write_text(json.dumps(config))
    (run / "log.jsonl").write_text('{"epoch": 1}\n{"epoch": 2, "momentum_restarted": true}\n')
    assert paper.differences(tmp_path, {run.name}) == \
        "JPEG copy, bf16, SGD momentum restarted, --subset 512, model cnn"
    (run / "log.jsonl").write_text('{"epoch": 1}\n')
    config.update(train={"amp": False, "model": "resnet18"}, data={"source": "torchvision", "subset": None})
    (run / "config.json").write_text(json.dumps(config))
    assert paper.differences(tmp_path, {run.name}) == ""


def _finished(folder, name: str, config: dict, acc: float) -> None:
    run = folder / "runs" / name
    run.mkdir(parents=True)
    (run / "config.json").write_text(json.dumps({"method": "solar", "dataset": "cifar10lt", "seed": 1, **config}))
    records = [{"method": "solar", "dataset": "cifar10lt", "seed": 1, "stage": "train", "stage_index": 0,
                "epoch": e, "epochs": 2, "final_stage": True, "acc_all": acc, "acc_many": 90.0,
                "acc_medium": 70.0, "acc_few": 50.0} for e in (1, 2)]
    (run / "log.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    (run / "done").write_text("ok\n")


def test_differences_name_every_setting_given_beside_the_recipe(tmp_path):
    """An outside review: a run given --hp train.lr=0.5 --hp train.schedule=cosine showed in its paper cell with
    no mark; only the JPEG copy, bf16, momentum restarts, --subset and the model were looked for."""
    recipe = RUNS[RUNS["run"] == "c10-phi0.5-g100-solar"].iloc[0]
    own = paper.recipe_sections(recipe, "cpu")
    assert own["train"]["milestones"] == [700, 800, 900] and own["hparams"]["estimator"]["est_epochs"] == 100
    assert own["data"]["phi"] == 0.5 and own["data"]["imb"] == 100
    config = {"device": "cpu", **json.loads(json.dumps(own))}
    _finished(tmp_path, "a", config, 70.0)
    # pllzoo's own Sinkhorn defaults differ from the released command's 50 cold iterations: always said (an
    # outside review: TABLES.md promised the mark and never gave it)
    sinkhorn = "Sinkhorn tol 0.001, warm starts, feasibility check"
    assert paper.differences(tmp_path, {"a"}, recipe) == sinkhorn
    config["train"].update(lr=0.5, schedule="cosine", epochs=1)  # epochs: the cell says it in its own words
    config["hparams"]["estimator"]["est_epochs"] = 1
    config["hparams"]["label_update"]["warm_start"] = False
    config["data"]["phi"] = 0.3
    _finished(tmp_path, "b", config, 70.0)
    assert paper.differences(tmp_path, {"b"}, recipe) == \
        "Sinkhorn tol 0.001, feasibility check, label_update.warm_start=false, estimator.est_epochs=1, " \
        "train.lr=0.5, train.schedule=cosine, phi=0.3"
    cuda = {"device": "cuda", **json.loads(json.dumps(paper.recipe_sections(recipe, "cuda")))}
    assert cuda["train"]["strong_view"] == "strong-batched"  # the GPU's own views: the recipe's there, no mark
    _finished(tmp_path, "c", cuda, 70.0)
    assert paper.differences(tmp_path, {"c"}, recipe) == f"bf16, {sinkhorn}"
    # under CUDA graphs: the compile setting (left out of the recipe's sections: a default names no other run) and
    # the padded mixup pass it brings; the reference's Sinkhorn given with --hp: no Sinkhorn mark
    cuda["train"]["compile"] = "reduce-overhead"
    cuda["hparams"]["label_update"].update(stop="fixed", warm_start=False, relax="reference")
    _finished(tmp_path, "d", cuda, 70.0)
    assert paper.differences(tmp_path, {"d"}, recipe) == \
        "bf16, padded mixup pass, label_update.stop=fixed, label_update.warm_start=false, " \
        "label_update.relax=reference, train.compile=reduce-overhead"
    cuda["train"]["mixup_rows"] = "exact"
    _finished(tmp_path, "e", {**cuda, "dataset": "synthetic-lt"}, 70.0)  # another dataset than the recipe's
    said = paper.differences(tmp_path, {"e"}, recipe)
    assert "padded" not in said and "dataset synthetic-lt" in said and "train.mixup_rows=exact" in said


def test_a_solar_la_cell_takes_the_solar_model_rescored(tmp_path):
    """Table 6 from the SoLar model itself: the paper queue leaves la-zZ.csv (pllzoo evaluate --predict solar.la)
    beside the SoLar run; a SoLar-LA cell without its own run is filled from it, marked, mean ± std over its rows."""
    own = json.loads(json.dumps(paper.recipe_sections(RUNS[RUNS["run"] == "c10-phi0.5-g100-solar"].iloc[0], "cpu")))
    base = tmp_path / "c10-phi0.5-g100-solar"
    _finished(base, "a", {"device": "cpu", **own}, 70.0)
    # only the SoLar cell's own run, at this file's ζ, with numbers (a second review: other rows were averaged in)
    (base / "la-z1.csv").write_text("run,acc_all,acc_many,acc_medium,acc_few,overrides\n"
                                    "a,77.0,90.0,70.0,60.0,predict.zeta=1\nzz,79.0,92.0,72.0,64.0,predict.zeta=1\n"
                                    "a,99.0,99.0,99.0,99.0,predict.zeta=2\n")
    text = paper.markdown_tables(CELLS, tmp_path)
    line = next(x for x in text.splitlines() if x.startswith("| `t6-c10-phi0.5-g100-solar-la-z1-few`"))
    assert "| 60.00 (n=1) [2 epochs, not 1000] [the SoLar model re-scored (pllzoo evaluate --predict " \
           "solar.la), Sinkhorn tol 0.001, warm starts, feasibility check] | – |" in line
    (base / "la-z1.csv").write_text("run,acc_all,acc_many,acc_medium,acc_few,overrides\na,n/a,,,,predict.zeta=1\n")
    line = next(x for x in paper.markdown_tables(CELLS, tmp_path).splitlines()
                if x.startswith("| `t6-c10-phi0.5-g100-solar-la-z1-all`"))
    assert "| not run | – |" in line  # no number: not a cell
    line = next(x for x in text.splitlines() if x.startswith("| `t6-c10-phi0.5-g100-solar-la-z2-all`"))
    assert "| not run | – |" in line  # no la-z2.csv


def test_a_cell_whose_folder_mixes_settings_is_not_summarised(tmp_path):
    """An outside review: the first setting's runs were shown as the cell's, the recipe's own left out."""
    recipe = RUNS[RUNS["run"] == "c10-phi0.5-g100-solar"].iloc[0]
    own = {"device": "cpu", **paper.recipe_sections(recipe, "cpu")}
    folder = tmp_path / "c10-phi0.5-g100-solar"
    _finished(folder, "solar__cifar10lt__s1-a", own, 70.0)
    other = json.loads(json.dumps(own))
    other["train"].update(lr=0.5, schedule="cosine")
    _finished(folder, "solar__cifar10lt__s1-b", other, 10.0)
    text = paper.markdown_tables(CELLS, tmp_path)
    line = next(l for l in text.splitlines() if l.startswith("| `t1-c10-phi0.5-g100-solar` |"))
    assert "not summarised: its folder holds runs of several settings (" in line and "train.lr=0.5" in line, line
    assert "10.00" not in line and "70.00" not in line


def test_table_out_that_cannot_be_written_is_one_line(tmp_path):
    """An outside review: a folder, /dev/full or a read-only file as --out was a traceback."""
    res = CliRunner().invoke(paper.main, ["table", "--results", str(tmp_path), "--out", str(tmp_path)])
    assert res.exit_code == 2 and "is a directory" in res.output and "Traceback" not in res.output
    if __import__("os").path.exists("/dev/full"):
        res = CliRunner().invoke(paper.main, ["table", "--results", str(tmp_path), "--out", "/dev/full"])
        assert res.exit_code == 1 and "Error: cannot write /dev/full: No space left on device" in res.output
