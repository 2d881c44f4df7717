"""Run published LT-PLL table cells with ``pllzoo bench`` and compare with the printed numbers.

``recipes.csv`` (next to this file) has one row per cell of the SoLar paper's Tables 1, 2, 4 and 6
(plus the SUN397 table, which pllzoo cannot run); ``recipes-ltpll.csv`` the RECORDS README's CIFAR
cells and HTC's README commands (table ids ``R`` and ``H``).  Cells with the same ``run`` value are one
training: e.g. Table 1's CIFAR-10-LT φ=0.5 γ=100 SoLar cell and that run's many/medium/few
cells in Tables 2, 4 and 6.

    python benchmarks/paper/run.py list [--names]
    python benchmarks/paper/run.py run c10-phi0.5-g100-solar [--seeds 1,2,3] [--out DIR] [--dry-run] [bench args...]
    python benchmarks/paper/run.py table [--results benchmarks/paper/results]

Arguments after the run name that ``run`` does not know go to ``pllzoo bench`` unchanged
(e.g. ``--device cuda --data-dir ../shared/data --offline``); they come after the recipe's,
so they win for single-valued options.
"""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path
from typing import NamedTuple

import click
import pandas as pd

from pllzoo.archive import NAME as ARCHIVE
from pllzoo.model_selection import select_epochs
from pllzoo.report import fmt, summary
from pllzoo.results import load

HERE = Path(__file__).resolve().parent
RECIPES = (HERE / "recipes.csv", HERE / "recipes-ltpll.csv")  # the SoLar paper's cells, then RECORDS' and HTC's
RESULTS = HERE / "results"
TABLES_MD = HERE / "TABLES.md"


class Table(NamedTuple):
    title: str
    source: str  # where the printed numbers come from, as the sentence under the table's title says it
    epochs: int  # final-stage epochs of the published runs (a shorter run of ours is flagged)
    label: str | None = None  # the LaTeX label in ../shared/spec/solar-paper.tex, for the SoLar paper's tables


SOLAR_TEX = "the SoLar paper's LaTeX (../shared/spec/solar-paper.tex)"
RECORDS_README = "Paper numbers from the RECORDS README (MediaBrain-SJTU/RECORDS-LTPLL)"
# table id -> Table; see README.md for the numbering
TABLES = {
    "1": Table("Table 1: accuracy on CIFAR10-LT / CIFAR100-LT across φ and γ (mean ± std over 3 seeds in the paper)",
               SOLAR_TEX, 1000, "tab:all-acc"),
    "2": Table("Table 2: many / medium / few-shot accuracy, CIFAR10-LT (φ=0.5, γ=100) and CIFAR100-LT (φ=0.1, γ=20)",
               SOLAR_TEX, 1000, "tab:shot-acc"),
    "4": Table("Table 4: ablations, CIFAR10-LT (φ=0.5, γ=100) and CIFAR100-LT (φ=0.1, γ=20)", SOLAR_TEX, 1000,
               "tab:ablation"),
    "6": Table("Table 6: SoLar with post-hoc logit adjustment (SoLar-LA)", SOLAR_TEX, 1000, "tab:logit-adj"),
    "4f": Table("SUN397 (φ=0.05): the fourth table float in the LaTeX, not runnable", SOLAR_TEX, 1000, "tab:sun197"),
    "R": Table("RECORDS README: CORR, CORR + RECORDS (w/o and w/ mixup), their SoLar re-run; 800 epochs",
               RECORDS_README, 800),
    "H": Table("HTC README commands (no published numbers found); 800 epochs",
               "No paper numbers: the HTC README (pruirui/HTC-LTPLL) gives the commands, no accuracies", 800),
}
PAPER_EPOCHS = TABLES["1"].epochs  # every SoLar CIFAR cell: final-stage epochs in the paper and the released commands


def load_recipes(paths: tuple[Path, ...] = RECIPES) -> pd.DataFrame:
    """Every cell of every recipe file, all columns as strings (paper numbers stay exactly as printed)."""
    return pd.concat([pd.read_csv(p, dtype=str, keep_default_na=False) for p in paths], ignore_index=True)


def runnable(cells: pd.DataFrame) -> pd.DataFrame:
    """The cells that name a pllzoo method."""
    return cells[cells["method"] != ""]


def runs(cells: pd.DataFrame) -> pd.DataFrame:
    """One row per run: ``run, method, args, cells`` (the cell ids it serves, comma-joined)."""
    grouped = runnable(cells).groupby("run", sort=False)
    return grouped.agg(method=("method", "first"), args=("args", "first"), cells=("cell", ",".join)).reset_index()


def find_run(cells: pd.DataFrame, name: str) -> pd.Series:
    """The run called ``name``, or the run that serves the cell ``name``."""
    table = runs(cells)
    if name in set(cells["cell"]) and name not in set(table["run"]):
        cell = cells[cells["cell"] == name].iloc[0]
        if not cell["run"]:
            raise click.ClickException(f"cell {name} is not runnable: {cell['note']}")
        name = cell["run"]
    hit = table[table["run"] == name]
    if hit.empty:
        raise click.ClickException(f"unknown run or cell {name!r}; see `python {Path(__file__).name} list`")
    return hit.iloc[0]


def bench_argv(run: pd.Series, seeds: str, out: Path, extra: tuple[str, ...] = ()) -> list[str]:
    """The ``pllzoo bench`` arguments for one run (recipe, seeds, out, --resume, then ``extra``)."""
    return ["--methods", run["method"], *shlex.split(run["args"]), "--seeds", seeds, "--out", str(out),
            "--resume", *extra]


def bench_command(argv: list[str]) -> list[str]:
    """The full command line: this interpreter's ``python -m pllzoo bench``."""
    return [sys.executable, "-m", "pllzoo", "bench", *argv]


def summarise(results: Path, run: pd.Series) -> pd.Series | None:
    """The run's row of ``pllzoo report``'s summary (last epoch; mean, sample std, n), or None."""
    folder = results / run["run"]
    if not (folder / "runs").is_dir() and not (folder / ARCHIVE).exists():
        return None
    records = load(folder)
    records = records[records["method"] == run["method"]]
    if records.empty:
        return None
    rows = summary(records, "last")
    row = rows.iloc[0].copy()
    last = select_epochs(records, "last")
    row["epoch"] = int(last["epoch"].max())
    tv = last["prior_tv"].dropna() if "prior_tv" in last else pd.Series(dtype=float)  # a method estimating the prior
    row["prior_tv"] = (f"{tv.mean():.3f}" + (f" ± {tv.std():.3f}" if len(tv) > 1 else "")) if len(tv) else ""
    if len(rows) > 1:  # runs trained with other settings in one folder: no one of them is the cell's (an outside
        # review: the first setting was shown, with no mark, and the recipe's own runs left out)
        row["settings"] = "; ".join(str(s) or "(none)" for s in rows["setting"])
        return row
    row["runs"] = sorted(set(records["run"]))  # the runs the cell's numbers come from (a re-scoring must be theirs)
    row["differs"] = differences(folder, set(records["run"]), run)
    return row


_LA_RUN = re.compile(r"^(?P<base>.+-solar)-la-z(?P<zeta>[\d.]+)$")


def rescored(results: Path, run: pd.Series, summaries: dict[str, pd.Series | None]) -> pd.Series | None:
    """A ``solar-la`` run's row from its SoLar run re-scored at its ζ (``results/<solar run>/la-zZ.csv``, written by
    ``pllzoo evaluate --predict solar.la``, as the paper queue does on the device), marked so; None when neither
    exists.  The SoLar run's own marks and epoch count carry over (the same model).  Only rows of the SoLar cell's
    own runs, re-scored at that ζ (``overrides``), with numbers count; none: None (a second review: rows of other
    runs were averaged in, and n counted rows, not values)."""
    found = _LA_RUN.match(run["run"])
    base = summaries.get(found["base"]) if found else None
    csv = results / found["base"] / f"la-z{found['zeta']}.csv" if found else None
    if base is None or csv is None or not csv.exists() or isinstance(base.get("settings"), str):
        return None
    try:
        frame = pd.read_csv(csv)
    except (OSError, ValueError):
        return None
    metrics = [f"acc_{m}" for m in ("all", "many", "medium", "few")]
    if frame.empty or not all(c in frame for c in [*metrics, "run"]):
        return None
    frame = frame[frame["run"].astype(str).isin(base.get("runs", []))].drop_duplicates("run")
    if "overrides" in frame:  # `predict.zeta=Z` (evaluate's column): the file's ζ, not another's
        frame = frame[frame["overrides"].astype(str).str.contains(rf"(?:^|;)predict\.zeta={found['zeta']}(?:;|$)")]
    frame = frame.assign(**{c: pd.to_numeric(frame[c], errors="coerce") for c in metrics}).dropna(subset=["acc_all"])
    if frame.empty:
        return None
    row = base.copy()
    for c in metrics:
        values = frame[c].dropna()
        row[f"{c}_mean"] = values.mean() if len(values) else float("nan")
        row[f"{c}_std"] = values.std() if len(values) > 1 else float("nan")
    row["n"] = len(frame)
    row["prior_tv"] = ""  # the SoLar row says it
    said = "the SoLar model re-scored (pllzoo evaluate --predict solar.la)"
    row["differs"] = f"{said}, {base['differs']}" if base.get("differs") else said
    return row


def recipe_sections(run: pd.Series, device: str) -> dict[str, dict]:
    """What a run of the recipe ``run`` records in its config's ``hparams``, ``train`` and ``data`` (φ, γ, the
    tail's shape) on ``device``, resolved as ``pllzoo bench`` resolves them but without loading the images: the
    components' hyper-parameters from the registry, the trainer's settings from the CIFAR defaults (every recipe
    here is a CIFAR one), then the recipe's own flags and ``--hp``."""
    import dataclasses
    import json
    import types

    from pllzoo.cli.bench import bench
    from pllzoo.components import declared_strong_view
    from pllzoo.data.base import DataOptions
    from pllzoo.data.cifar import SOLAR_CIFAR_DEFAULTS
    from pllzoo.hparams import named
    from pllzoo.planning import _route, device_views, hashed_train, own_view, parse_overrides, train_config
    from pllzoo.portable import portable
    from pllzoo.registry import get_registry

    params = bench.make_context("bench", ["--methods", run["method"], *shlex.split(run["args"])]).params
    reg = get_registry()
    method = reg.method(params["methods"])
    train_hp, per_method = _route(parse_overrides(params["hps"]), [method], reg)
    comps = reg.build_components(method, per_method[method.name], (params["dataset"], "image"))
    cfg = train_config(types.SimpleNamespace(defaults=SOLAR_CIFAR_DEFAULTS), params["epochs"], params["batch_size"],
                       train_hp[method.name], reg)
    cfg = device_views(own_view(cfg, declared_strong_view(method.name, comps), train_hp[method.name]), device,
                       train_hp[method.name])
    options = dataclasses.replace(DataOptions(), phi=params["phi"], imb=params["imb"],
                                  **({"imb_type": params["imb_type"]} if params["imb_type"] else {}))
    return json.loads(json.dumps(portable({  # as a config.json reads back (tuples as lists)
        "hparams": {s: named(c.hp) for s, c in comps.items()}, "train": hashed_train(cfg),
        "data": {k: getattr(options, k) for k in ("phi", "imb", "imb_type", "holdout")}})))


# what differences() names in its own words (a model, --subset, bf16) or the cell in its own (epochs)
_SAID = {("train", "model"), ("train", "epochs"), ("train", "amp")}


def differences(folder: Path, runs: set[str], recipe: pd.Series | None = None) -> str:
    """What the ``runs`` under ``folder`` (the ones the cell's numbers come from) did otherwise than the released
    command, from their configs and logs: the JPEG copy of CIFAR-10 (other images than the reference's), bf16
    autocast on CUDA ("What a recipe is", README.md), SoLar's Sinkhorn stopping at a tolerance, warm-started or
    relaxed otherwise than the reference's 50 cold iterations (pllzoo's defaults), the padded mixup pass of CUDA
    graphs, SGD momentum restarted (a run carried between device sessions resumed without it: its log says
    ``momentum_restarted``), a ``--subset`` or a model other than ResNet-18 (a smoke run); with the cell's
    ``recipe`` row, also another dataset than the recipe's, and every hyper-parameter, trainer setting and data
    option a run was given other than the recipe's (``--hp``, flags, and a setting whose default names no run, so
    that the recipe's sections leave it out: ``train.compile``, ``label_update.relax``), as ``key=value``
    (:func:`recipe_sections`).
    A config that cannot be read says nothing (``load`` judged the runs)."""
    import json

    from pllzoo import archive
    from pllzoo.errors import PLLZooError

    def read(path: Path) -> object:
        try:
            return json.loads(path.read_text())
        except (OSError, ValueError):
            return None

    def logged(path: Path) -> list:
        try:
            return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
        except (OSError, ValueError):
            return []

    configs = [read(folder / "runs" / r / "config.json") for r in sorted(runs)]
    records = [rec for r in sorted(runs) for rec in logged(folder / "runs" / r / "log.jsonl")]
    try:
        kept = [run for name, run in archive.read(folder).items() if name in runs]
        configs += [run.config for run in kept]
        records += [rec for run in kept for rec in run.records]
    except (OSError, ValueError, PLLZooError):  # a damaged archive: load() has said so
        pass
    configs = [c for c in configs if isinstance(c, dict)]

    def part(c: dict, key: str) -> dict:
        return c.get(key) if isinstance(c.get(key), dict) else {}

    found = []
    if any(part(c, "data").get("source") == "jpeg" for c in configs):
        found.append("JPEG copy")
    if any(str(c.get("device", "")).startswith("cuda") and part(c, "train").get("amp", True) for c in configs):
        found.append("bf16")
    found += sorted({_sinkhorn(part(part(c, "hparams"), "label_update")) for c in configs} - {""})
    if any(_padded_mixup(c, part(c, "train"), part(part(c, "hparams"), "loss")) for c in configs):
        found.append("padded mixup pass")
    if any(isinstance(r, dict) and r.get("momentum_restarted") for r in records):  # a carried run resumed
        found.append("SGD momentum restarted")
    subsets = sorted({part(c, "data").get("subset") for c in configs} - {None})
    if subsets:
        found.append(f"--subset {', '.join(map(str, subsets))}")
    models = sorted({part(c, "train").get("model") for c in configs} - {None, "resnet18"})
    if models:
        found.append(f"model {', '.join(models)}")
    if recipe is not None:
        wanted = _recipe_dataset(recipe)
        others = sorted({str(c["dataset"]) for c in configs if c.get("dataset") not in (None, wanted)})
        if others:  # (an outside review: synthetic-lt runs filled a CIFAR10-LT cell with no mark)
            found.append(f"dataset {', '.join(others)}")
        given: dict[str, None] = {}
        wants: dict[str, dict[str, dict]] = {}  # by device (the views' names differ on a GPU)
        for c in configs:
            device = str(c.get("device", "cpu"))
            if device not in wants:
                wants[device] = recipe_sections(recipe, device)
            for section, keys in wants[device].items():
                flat = _flat(keys)
                for key, value in _flat(part(c, section)).items():
                    if section == "data" and key == "imb_type":  # None: the loaders' default, exp (pllzoo.results)
                        value, flat[key] = value or "exp", flat.get(key) or "exp"
                    if key not in flat and section != "data":  # a trainer setting or hyper-parameter whose default
                        flat[key] = None  # names no run (train.compile, relax): left out of the recipe's sections
                    if (section, key.split(".")[0]) not in _SAID and key in flat and value != flat[key]:
                        given[f"{'train.' if section == 'train' else ''}{key}={_value(value)}"] = None
        found += list(given)
    return ", ".join(found)


def _sinkhorn(lu: dict) -> str:
    """How SoLar's Sinkhorn (a label update with ``stop``) ran otherwise than the reference's 50 cold iterations
    relaxed only where they go NaN: '' for the reference's settings or another label update.  A config without
    ``relax`` ran its default, the feasibility check (a default is left out of the config, so run ids stand)."""
    if "stop" not in lu:
        return ""
    said = [f"tol {lu.get('tol')}" if lu["stop"] != "fixed" else "",
            "warm starts" if lu.get("warm_start") else "",
            {"reference": "", "check": "feasibility check"}.get(lu.get("relax", "check"), f"relax={lu.get('relax')}")]
    said = [s for s in said if s]
    return f"Sinkhorn {', '.join(said)}" if said else ""


def _padded_mixup(config: dict, train: dict, loss: dict) -> bool:
    """Whether the run's mixup over a subset ran as the padded pass (``train.mixup_rows``; ``auto``: padded under
    ``compile=reduce-overhead`` in one process), which SoLar's loss takes when it mixes."""
    mode = train.get("mixup_rows", "auto")
    if mode == "auto":
        mode = "padded" if train.get("compile") == "reduce-overhead" and config.get("processes", 1) == 1 else "exact"
    return mode == "padded" and bool(loss.get("mixup"))


def _recipe_dataset(recipe: pd.Series) -> str | None:
    """The ``--dataset`` of the recipe's bench arguments."""
    args = shlex.split(recipe["args"])
    return args[args.index("--dataset") + 1] if "--dataset" in args[:-1] else None


def _flat(section: dict) -> dict[str, object]:
    """``{"loss": {"eta": 0.9}}`` → ``{"loss.eta": 0.9}``; a section of plain values stays as it is."""
    return {f"{k}.{f}" if isinstance(v, dict) else k: x
            for k, v in section.items() for f, x in (v.items() if isinstance(v, dict) else [(None, v)])}


def _value(v: object) -> str:
    return ",".join(map(str, v)) if isinstance(v, list) else str(v).lower() if isinstance(v, bool) else str(v)


def ours(row: pd.Series | None, metric: str, epochs: int = PAPER_EPOCHS) -> str:
    """``mean ± std (n=k)``, flagged when the run's length is not the published runs' ``epochs``;
    "not run" without results."""
    if row is None:
        return "not run"
    if isinstance(row.get("settings"), str):
        return f"not summarised: its folder holds runs of several settings ({row['settings']}); keep one per folder"
    text = fmt(row[f"acc_{metric}_mean"], row[f"acc_{metric}_std"]) + f" (n={int(row['n'])})"
    if int(row["epoch"]) != epochs:
        text += f" [{int(row['epoch'])} epochs, not {epochs}]"
    if row.get("differs"):
        text += f" [{row['differs']}]"
    return text


def paper_text(cell: pd.Series) -> str:
    """The paper's number, with its std when one is printed ("–" where none is published)."""
    return (cell["paper"] or "–") + (f" ± {cell['paper_std']}" if cell["paper_std"] else "")


def markdown_tables(cells: pd.DataFrame, results: Path) -> str:
    """One Markdown table per paper table: cell, row, setting, metric, paper, ours."""
    summaries = {r["run"]: summarise(results, r) for _, r in runs(cells).iterrows()}
    for _, r in runs(cells).iterrows():  # a SoLar-LA cell without its own run: the SoLar model, re-scored
        if summaries[r["run"]] is None:
            summaries[r["run"]] = rescored(results, r, summaries)
    parts = ["# Published LT-PLL tables: paper vs pllzoo", "",
             f"Generated by `python benchmarks/paper/run.py table` from `{_shown(results)}`; "
             "ours = last epoch, mean ± sample std over seeds (n seeds). See README.md. A cell marked "
             "[JPEG copy] was trained on the lossy JPEG copy of CIFAR-10 (another long-tailed subset of other "
             "images than the reference's seed draws), [bf16] under bf16 autocast, [key=value] with a setting given "
             "beside the recipe's (--hp, a flag): README.md, \"What a recipe is\", lists these and every other "
             "setting in which the runs differ from the released commands. Prior TV: the total variation between "
             "the estimated and the true training class prior at the last epoch, for a method that estimates "
             "one (SoLar's r), on the cell's `all` row (the paper prints none).", ""]
    for table, spec in TABLES.items():
        part = cells[cells["table"] == table]
        where = f"LaTeX `\\label{{{spec.label}}}`" if spec.label else spec.source
        parts += [f"## {spec.title}", "", f"{where}.", "",
                  "| cell | row | setting | metric | paper | ours | prior TV (ours) |", "|---|---|---|---|---|---|---|"]
        for _, c in part.iterrows():
            row = summaries.get(c["run"]) if c["method"] else None
            got = ours(row, c["metric"], spec.epochs) if c["method"] else f"not runnable: {c['note']}"
            tv = (row.get("prior_tv") or "–") if row is not None and c["metric"] == "all" and \
                not isinstance(row.get("settings"), str) else "–"
            parts.append(f"| `{c['cell']}` | {c['row']} | {c['setting']} | {c['metric']} | {paper_text(c)} | {got} "
                         f"| {tv} |")
        parts.append("")
    return "\n".join(parts)


def _shown(path: Path) -> str:
    """``path`` relative to the repository root when it is inside it."""
    try:
        return str(Path(path).resolve().relative_to(HERE.parents[1]))
    except ValueError:
        return str(path)


@click.group()
def main() -> None:
    """The SoLar paper's table cells as pllzoo bench runs."""


@main.command("list")
@click.option("--names", is_flag=True, help="Only the run names, one a line (for shell loops).")
def list_runs(names: bool) -> None:
    """Print every run (method, bench args, the cells it serves), then the cells pllzoo cannot run."""
    cells = load_recipes()
    table = runs(cells)
    if names:
        click.echo("\n".join(table["run"]))
        return
    for _, r in table.iterrows():
        click.echo(f"{r['run']}\n    pllzoo bench --methods {r['method']} {r['args']}\n    cells: {r['cells']}")
    blocked = cells[cells["method"] == ""]
    click.echo(f"\n{len(table)} runs serve {len(runnable(cells))} cells; {len(blocked)} cells are not runnable:")
    for _, c in blocked.iterrows():
        click.echo(f"  {c['cell']}: {c['note']}")


@main.command(context_settings={"ignore_unknown_options": True, "allow_extra_args": True})
@click.argument("name")
@click.option("--seeds", default="1,2,3", show_default=True, help="Seeds (the paper reports 3).")
@click.option("--out", type=click.Path(path_type=Path), default=None, help="Default: benchmarks/paper/results/RUN.")
@click.option("--dry-run", is_flag=True, help="Print the command and exit.")
@click.argument("extra", nargs=-1, type=click.UNPROCESSED)
def run(name: str, seeds: str, out: Path | None, dry_run: bool, extra: tuple[str, ...]) -> None:
    """Train run NAME (a run or a cell id) with pllzoo bench --resume; EXTRA goes to pllzoo bench."""
    r = find_run(load_recipes(), name)
    cmd = bench_command(bench_argv(r, seeds, out or RESULTS / r["run"], extra))
    click.echo(shlex.join(cmd))
    if not dry_run:
        sys.exit(subprocess.call(cmd))


@main.command()
@click.option("--results", type=click.Path(path_type=Path), default=RESULTS, show_default=True,
              help="Folder with one sub-folder per run (its results.csv).")
@click.option("--out", type=click.Path(path_type=Path, dir_okay=False), default=TABLES_MD, show_default=True)
def table(results: Path, out: Path) -> None:
    """Write the paper-vs-ours Markdown tables from whatever result folders exist."""
    text = markdown_tables(load_recipes(), results)
    try:
        out.write_text(text)
    except OSError as exc:  # one line, as pllzoo's --md (an outside review: a traceback)
        raise click.ClickException(f"cannot write {out}: {exc.strerror or exc}") from None
    click.echo(f"wrote {out}")


if __name__ == "__main__":
    main()
