"""``pllzoo report``: comparison tables from one or more results folders."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

from pllzoo.cli import cli
from pllzoo.cli.listing import show_report
from pllzoo.cli.options import INPUT_FILE, UserPath
from pllzoo.cli.outputs import OutputFile, write_text
from pllzoo.columns import ACC_COLUMNS, LABEL_COLUMNS
from pllzoo.components import scope_name
from pllzoo.errors import PLLZooError
from pllzoo.model_selection import RULES

if TYPE_CHECKING:  # pragma: no cover  (pandas, torch load when the command runs: `--help` stays fast)
    import pandas as pd


def _paper(path: Path | None) -> pd.DataFrame | None:
    if path is None:
        return None
    import pandas as pd

    try:
        frame = pd.read_csv(path, dtype=str)
    except (OSError, ValueError, UnicodeDecodeError, pd.errors.ParserError, pd.errors.EmptyDataError) as exc:
        why = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise PLLZooError(f"{path}: not a readable CSV of paper numbers ({type(exc).__name__}: {why})") from None
    missing = {"method", "setting", "paper"} - set(frame.columns)
    if missing:
        raise PLLZooError(f"{path}: needs columns method, setting, paper (missing {', '.join(sorted(missing))})")
    for i, row in frame.iterrows():  # line i + 2: the header is line 1
        empty = [c for c in ("method", "setting", "paper") if pd.isna(row[c]) or not str(row[c]).strip()]
        if empty:  # shown as "nan", or matched to nothing
            raise PLLZooError(f"{path}, line {i + 2}: empty {', '.join(empty)}; give each cell, or leave the row out")
    twice = frame[frame.duplicated(["setting", "method"], keep=False)]
    if len(twice):  # one of them would be shown, silently
        first = twice.iloc[0]
        lines = ", ".join(str(i + 2) for i in twice.index[(twice["setting"] == first["setting"]) &
                                                         (twice["method"] == first["method"])])
        raise PLLZooError(f"{path}: {first['method']} at setting {first['setting']!r} is given more than once "
                          f"(lines {lines}); keep one")
    return frame


def _failed(results: tuple[Path, ...]) -> dict[Path, dict]:
    """The failed runs under ``results`` (``runs/<id>/error.txt`` without ``done``, or an archived run with its
    error and not done; a readable config), with each one's config; a run that failed before its first epoch
    has no log."""
    import json

    from pllzoo import archive

    def whole(config) -> bool:
        return isinstance(config, dict) and isinstance(config.get("method"), str) and "seed" in config and \
            isinstance(config.get("data"), dict) and isinstance(config["data"].get("train_counts"), list)

    out = {}
    for folder in results:
        local = set()
        for run in sorted(e.parent for e in Path(folder).glob("runs/*/error.txt")):
            local.add(run.name)
            try:
                config = None if (run / "done").exists() else json.loads((run / "config.json").read_text())
            except (OSError, ValueError):
                config = None
            if whole(config):
                out[run] = config
        for name, run in archive.read(Path(folder)).items():  # archived with --prune: the folder is gone
            if name not in local and run.error is not None and not run.done and whole(run.config):
                out[Path(folder) / archive.NAME / name] = run.config
    return out


@cli.command()
@click.argument("results", nargs=-1, required=True, type=UserPath(exists=True, file_okay=False))
@click.option("--select", "rule", type=click.Choice(RULES), default="last", show_default=True,
              help="Model selection: last epoch, held-out covering rate (heldout) or approximated accuracy "
                   "(approx; both need bench --holdout), or oracle (best on test; labelled).")
@click.option("--methods", default=None, help="Comma-separated methods to show, in this order (default: all, by name).")
@click.option("--missing-ok", is_flag=True,
              help="Leave out --methods that have no finished run instead of stopping (table scripts).")
@click.option("--seeds", default=None, help="Comma-separated seeds to include (default: every seed found).")
@click.option("--wide", is_flag=True, help="One metric, methods x settings (with --paper numbers beside ours).")
@click.option("--metric", type=click.Choice((*ACC_COLUMNS, *LABEL_COLUMNS)), default="acc_all", show_default=True,
              help="Metric of --wide: a test accuracy, or a training-label accuracy (label_acc*: how often the "
                   "method's targets were largest at the true label).")
@click.option("--paper", type=INPUT_FILE, default=None,
              help="CSV with columns method,setting,paper: the paper's numbers for --wide.")
@click.option("--title", default="", help="Title of the --wide table.")
@click.option("--md", type=OutputFile(), default=None, help="Write the tables as Markdown here.")
@click.option("--csv", "csv_path", type=OutputFile(), default=None, help="Write the summary CSV here.")
def report(results, rule, methods, missing_ok, seeds, wide, metric, paper, title, md, csv_path) -> None:
    """Tables of mean ± std over seeds from RESULTS folders written by `pllzoo bench`."""
    from pllzoo import report as rep
    from pllzoo.results import load, unfinished

    if paper is not None and not wide:
        raise PLLZooError("--paper goes with --wide (the paper's numbers beside ours, one metric)")
    given = [f"--{name}" for name in ("metric", "title")  # (an outside review: test accuracy printed for label_acc)
             if click.get_current_context().get_parameter_source(name) is not click.core.ParameterSource.DEFAULT]
    if given and not wide:
        raise PLLZooError(f"{' and '.join(given)} go{'es' if len(given) == 1 else ''} with --wide (one metric, "
                          "methods x settings); without it the tables show every test accuracy")
    firsts: dict[Path, Path] = {}
    for folder in results:  # a folder given twice (a shell glob, say) counts once
        if folder.resolve() in firsts:
            click.echo(f"Warning: {folder} is given twice (as {firsts[folder.resolve()]}); it counts once", err=True)
        firsts.setdefault(folder.resolve(), folder)
    results = tuple(firsts.values())
    damaged: list[tuple[Path, str]] = []
    skipped = unfinished(*results)
    failed = _failed(results)  # their rows say "failed", as bench's table (each run's error.txt says why)
    labels: list[str] = []  # the failed runs' settings, told apart as the finished runs' are
    records = load(*results, damaged=damaged, beside=list(failed.values()), beside_labels=labels)
    for _, why in damaged:  # one line each: the run and what is wrong (pllzoo.results.read_log)
        click.echo(f"Warning: left out {why}", err=True)
    skipped = [p for p in skipped if p not in failed]
    if skipped:
        click.echo(f"Warning: left out {len(skipped)} unfinished run(s), e.g. {skipped[0]}", err=True)
    finished = set(records["run"]) if "run" in records else set()  # a failed run trained again elsewhere: not
    failures = [(label, c["method"], c["data"]["train_counts"], c["seed"])  # failed (a second review)
                for label, (where, c) in zip(labels, failed.items()) if where.name not in finished]
    if records.empty and not failures:  # (failed runs alone: their rows say so, as the bench's table)
        if damaged:  # each named above
            raise PLLZooError(f"no usable runs under {', '.join(map(str, results))}: {len(damaged)} damaged (above); "
                              "bench --resume with their settings repairs them")
        errors = [e for d in results for e in sorted(Path(d).glob("runs/*/error.txt"))]
        if errors:  # every run failed: say so, not "no runs"
            raise PLLZooError(f"no finished runs under {', '.join(map(str, results))}: {len(errors)} failed, "
                              f"e.g. {errors[0].parent.name} (its error.txt says why; results.csv has each reason)")
        if skipped:  # the runs are there, not finished (an outside review: "no runs" after naming them)
            raise PLLZooError(f"no finished runs under {', '.join(map(str, results))}: {len(skipped)} unfinished "
                              "(above); bench --resume with their settings finishes them")
        from pllzoo.sweep import MANIFEST

        trials = [d for d in results if (Path(d) / MANIFEST).is_file()]
        hint = (f"; {trials[0]} is a sweep's folder: report its trials, {Path(trials[0]) / 'trials' / '*'}"
                if trials else "")
        raise PLLZooError(f"no runs under {', '.join(map(str, results))} "
                          f"(expected RESULTS/runs/*/log.jsonl or RESULTS/runs.jsonl.xz){hint}")
    if seeds is not None:  # e.g. a study whose new methods ran one seed, compared on that seed alone
        from pllzoo.cli.bench import _seeds

        kept = set(_seeds(seeds))
        if not kept:  # as bench says it (an outside review: "--seeds : no runs of these seeds")
            raise PLLZooError("no seed given; try --seeds 1,2,3")
        found = sorted(set(records["seed"]))
        records = records[records["seed"].isin(kept)]
        failures = [f for f in failures if f[3] in kept]
        if records.empty and not failures:
            raise PLLZooError(f"--seeds {seeds}: no runs of these seeds; found seeds {', '.join(map(str, found))}")
    wanted = [scope_name(m) for m in methods.split(",") if m.strip()] if methods else None  # as bench names them
    have = set(records["method"]) | {f[1] for f in failures}
    unknown = sorted(set(wanted or ()) - have)
    if unknown and missing_ok and set(wanted) - set(unknown):  # at least one listed method has runs
        wanted, unknown = [m for m in wanted if m not in unknown], []
    if unknown:
        raise PLLZooError(f"--methods: no runs of {', '.join(unknown)}; found {', '.join(sorted(have))}")
    order = wanted or sorted(have)
    extra = (metric,) if wide and metric in LABEL_COLUMNS else ()  # other summaries keep their columns
    summ = rep.with_failures(rep.summary(records, rule, order, extra),
                             [f[:3] for f in failures if f[1] in order], order)
    paper_frame = _paper(paper)
    if paper_frame is not None:  # settings spelled otherwise than ours: say so, rather than show no paper column
        ours = list(dict.fromkeys(summ["setting"]))  # (one file may hold other tables' settings too: those stay
        if not set(paper_frame["setting"]) & set(ours):  # quiet while some match)
            theirs = list(dict.fromkeys(paper_frame["setting"]))
            click.echo(f"Warning: {paper}: none of its settings ({', '.join(map(repr, theirs[:5]))}"
                       f"{', ...' if len(theirs) > 5 else ''}) is a setting of these runs ({', '.join(map(repr, ours))})"
                       "; no paper numbers are shown", err=True)
    tables = ([rep.wide_report(summ, rule, metric, paper_frame, title)] if wide else rep.long_reports(summ, rule))
    for t in tables:
        show_report(t)
    if md:
        write_text(md, "\n".join(rep.to_markdown(t) for t in tables))
        click.echo(f"markdown: {md}")
    if csv_path:
        write_text(csv_path, rep.to_csv(summ, rule, paper_frame, metric))
        click.echo(f"csv: {csv_path}")
