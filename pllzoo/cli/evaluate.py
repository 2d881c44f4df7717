"""``pllzoo evaluate``: re-score finished runs' final models with other prediction settings."""

from __future__ import annotations

import warnings
from pathlib import Path

import click

from pllzoo.cli import cli, complete
from pllzoo.cli.listing import show_report
from pllzoo.cli.options import UserPath
from pllzoo.cli.outputs import OutputFile, write_text
from pllzoo.columns import ACC_COLUMNS


@cli.command()
@click.argument("runs", nargs=-1, required=True, type=UserPath(exists=True, file_okay=False))
@click.option("--predict", default=None, shell_complete=complete.predictors, help="Predict component to use, e.g. solar.la (SoLar-LA with --hp predict.zeta=2).")
@click.option("--hp", "hps", multiple=True, help="Override: slot.field=value, e.g. predict.zeta=2.")
@click.option("--data-dir", type=UserPath(), default=None,
              help="Offline data folder, as bench's --data-dir (runs record no machine path; default: "
                   "$PLLZOO_CACHE/data, ~/.cache/pllzoo/data unless set).")
@click.option("--device", default="auto", show_default=True, help="auto | cpu | cuda[:i].")
@click.option("--dataset", default=None,
              help="For runs trained on a .mat file or imagefolder:PATH (runs record no path): that dataset again.")
@click.option("--csv", "csv_path", type=OutputFile(), default=None, help="Write the rows here.")
@click.option("--md", "md_path", type=OutputFile(), default=None,
              help="Write a Markdown table here: mean ± sample std over the runs of each method.")
@click.option("--threads", type=click.IntRange(min=1, max=1024), default=None,
              help="Torch CPU threads, as pllzoo bench's --threads (default: the CPUs this process may use).")
def evaluate(runs, predict, hps, data_dir, device, dataset, csv_path, md_path, threads) -> None:
    """Test accuracy of each finished run (RUNS: results/<study>/runs/<run>, or results/<study> for all its finished
    runs) under --hp, no training."""
    import pandas as pd

    from pllzoo import planning
    from pllzoo import report as rep
    from pllzoo.evaluate import recorded_method, rescore, run_config
    from pllzoo.registry import get_registry
    from pllzoo.portable import WHERE_FROM_KEYS, portable
    from pllzoo.results import run_id, settings_of

    from pllzoo.threads import default_threads, set_threads

    set_threads(threads or default_threads())  # torch's own default made runs 10–25× slower on a shared machine
    overrides = planning.parse_overrides(hps)
    unique: dict[str, Path] = {}
    for run in _run_folders(runs):  # a run given twice, a copy of its folder, or one that differs only in how its data came
        config = portable(run_config(run))  # (--offline) counts once, as in pllzoo report: by its id without that
        if isinstance(config["data"], dict):
            config["data"] = {k: v for k, v in config["data"].items() if k not in WHERE_FROM_KEYS}
        key = run_id(config)
        if key in unique:
            warnings.warn(f"left out {run}: the same run as {unique[key]} (each run counts once)")
        else:
            unique[key] = run
    rows = pd.DataFrame(_rescored(list(unique.values()), set(map(Path, runs)),
                                  lambda run: rescore(get_registry(), run, overrides, predict, data_dir, device,
                                                      dataset),
                                  lambda run: recorded_method(get_registry(), run, run_config(run))))
    rows["setting"] = rows["run"].map(settings_of({run.name: run_config(run) for run in unique.values()}))
    setting = ([f"predict={predict}"] if predict else []) + [f"{k}={v}" for k, v in overrides.items()]
    title = "Re-scored: " + (", ".join(setting) or "as trained")
    note = "Final checkpoint of each run, test set, no training."
    cells = [[r["run"], *(rep.fmt(r[c], None) for c in ACC_COLUMNS)] for _, r in rows.iterrows()]
    show_report(rep.Report(title, ["run", *rep.HEADERS.values()], cells, note))
    if md_path:  # one table per setting: runs on other data, or trained otherwise, are not averaged together
        one = rows["setting"].nunique() == 1
        tables = [rep.Report(title if one else f"{title} ({setting})", ["Method", *rep.HEADERS.values(), "n"],
                             rep.mean_std_cells(rep.counted(group, by=("method",))), f"{note} {rep.SPREAD}.")
                  for setting, group in rows.groupby("setting", sort=False)]
        write_text(md_path, "\n".join(rep.to_markdown(t) for t in tables))
        click.echo(f"table: {md_path}")
    if csv_path:
        frame = rows.assign(overrides=rows["overrides"].map(lambda d: ";".join(f"{k}={v}" for k, v in d.items())))
        # the setting only where the rows hold several (an outside review: rows of two settings differed by run id
        # alone); one setting keeps the columns benchmarks/cifar10lt-cpu/la.sh wrote
        dropped = ["class_acc"] + (["setting"] if rows["setting"].nunique() == 1 else [])
        write_text(csv_path, frame.drop(columns=dropped, errors="ignore").to_csv(index=False))
        click.echo(f"rows: {csv_path}")


def _rescored(runs: list[Path], given: set[Path], score, resolve) -> list[dict]:
    """``score(run)`` of each run.  A run found in a study folder whose recorded method this install cannot
    resolve (``resolve(run)`` raises: its plugin uninstalled) is left out with a warning naming it, and the others
    are re-scored (an outside review: one such run refused the whole folder, without naming it); a run given by
    its own folder, or none left, is an error naming the run.  Any other error (a mistyped ``--predict`` or
    ``--hp``) stays the error it is (a second review: it left every run out)."""
    from pllzoo.errors import UnknownNameError

    rows, left_out = [], []
    for run in runs:
        try:
            resolve(run)
        except UnknownNameError as exc:
            if run in given:
                raise UnknownNameError(f"{run}: {exc}") from None
            warnings.warn(f"left out {run}: {exc}")
            left_out.append(f"{run}: {exc}")
            continue
        rows.append(score(run))
    if not rows:
        raise UnknownNameError(f"no run could be re-scored; {left_out[0]}")
    return rows


def _run_folders(paths: tuple[Path, ...]) -> list[Path]:
    """RUNS with a bench's ``--out`` folder (``OUT/runs/<run>/``, no ``config.json`` of its own) replaced by its
    finished runs, in order (an outside review: a study folder was called "a damaged run")."""
    from pllzoo.errors import PLLZooError
    from pllzoo.evaluate import check_run_folder

    out = []
    for path in paths:
        if (path / "config.json").exists() or not (path / "runs").is_dir():
            check_run_folder(path)
            out.append(path)  # a run folder (or a damaged one: run_config says what it lacks)
            continue
        finished = sorted(p for p in (path / "runs").iterdir() if p.is_dir() and (p / "done").exists())
        if not finished:
            raise PLLZooError(f"{path}: a bench's results folder without a finished run under runs/ (evaluate "
                              "re-scores finished runs: give their folders, OUT/runs/<run-id>)")
        out += finished
    return out
