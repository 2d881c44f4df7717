"""``pllzoo archive``: put the runs of results folders into their ``runs.jsonl.xz`` (:mod:`pllzoo.archive`)."""

from __future__ import annotations

import shutil
from pathlib import Path

import click

from pllzoo.cli import cli
from pllzoo.cli.options import UserPath


def prune(out: Path) -> tuple[int, dict[str, list[Path]]]:
    """Remove the run folders of ``out`` whose every file is in its archive, as archived; return how many
    went and the folders kept, by why (a checkpoint or another file beside the archived ones, nothing to
    archive, a copy that differs from the archived one, or a run a live bench holds: its lock, ``runs/<id>.lock``,
    is taken while the folder is looked at and removed (an outside review: a bench training the run failed when
    its folder went)."""
    from pllzoo import archive as arc
    from pllzoo.runfolders import take_lock

    archived = arc.read(out)
    removed, kept = 0, {}
    for run_dir in sorted(p for p in (out / "runs").glob("*") if p.is_dir() and not p.name.startswith(".")):
        lock = run_dir.with_name(f"{run_dir.name}.lock")
        holder = take_lock(lock)
        if holder is not None:
            kept.setdefault("a run another process is training (runs/<id>.lock)", []).append(run_dir)
            continue
        try:
            removed += _prune_one(run_dir, archived, kept)
        finally:
            lock.unlink(missing_ok=True)
    return removed, kept


def _prune_one(run_dir: Path, archived: dict, kept: dict[str, list[Path]]) -> int:
    """Remove ``run_dir`` (1) if the archive holds all of it, else add it to ``kept`` under why (0)."""
    from pllzoo import archive as arc

    entry = arc.from_folder(run_dir)
    extra = sorted({f.name for f in run_dir.iterdir()} - arc.ARCHIVED_FILES)
    missing = " and ".join(f for f in ("log.jsonl", "config.json") if not (run_dir / f).is_file())
    why = (f"no {missing or 'readable log.jsonl or config.json'} to archive" if entry is None else
           "a checkpoint.pt, which the archive does not hold (delete it to prune the folder)"
           if extra == ["checkpoint.pt"] else
           f"files the archive does not hold ({', '.join(extra)})" if extra else
           "a run that differs from its archived copy" if archived.get(run_dir.name) != entry else None)
    if why is not None:
        kept.setdefault(why, []).append(run_dir)
        return 0
    shutil.rmtree(run_dir)
    return 1


@cli.command()
@click.argument("results", nargs=-1, required=True, type=UserPath(exists=True, file_okay=False))
@click.option("--prune", "do_prune", is_flag=True,
              help="Then remove the run folders that hold nothing but what the archive holds (not checkpoints).")
@click.option("--rebuild", is_flag=True,
              help="Replace an unreadable archive by one built from runs/ alone (the old one is kept as "
                   "runs.jsonl.xz.damaged); a readable one is refused.")
def archive(results: tuple[Path, ...], do_prune: bool, rebuild: bool) -> None:
    """Write RESULTS/runs.jsonl.xz from RESULTS/runs/ and the archive already there.

    Runs recorded under old run ids (with machine paths, or float milestones) are first moved to their new ids
    (pllzoo.migrate).  The same runs always give the same bytes; an unchanged archive is not rewritten.
    """
    from pllzoo import archive as arc  # here, not at the top: `pllzoo --help` loads no pandas
    from pllzoo.migrate import migrate

    for out in results:
        moved = migrate(out)
        if moved:
            click.echo(f"{out}: moved {len(moved)} run(s) to their path-free run ids")
        path, n, local, changed = arc.write(out, rebuild=rebuild)
        if not n:
            click.echo(f"{out}: no runs to archive")
            continue
        click.echo(f"{path}: {n} runs ({local} from runs/), {path.stat().st_size} bytes, "
                   f"{'written' if changed else 'unchanged'}")
        if do_prune:
            removed, kept = prune(out)
            click.echo(f"{out / 'runs'}: removed {removed} archived run folder(s)"
                       + (f", kept {sum(map(len, kept.values()))}: " if kept else "")
                       + "; ".join(f"{len(dirs)} with {why}, e.g. {dirs[0].name}" for why, dirs in kept.items()))
