"""Move results folders to lean results (issue 16.8): path-free run ids, one ``runs.jsonl.xz`` each.

For each results folder (a folder with ``runs/`` or ``runs.jsonl.xz``) it

1. moves the runs recorded with machine paths to their new ids (:func:`pllzoo.migrate.migrate`: drops
   ``data.data_dir`` and ``data.path`` from each ``config.json``, renames the folder, rewrites the old
   ids in ``results.csv`` and the other tables beside ``runs/``);
2. writes the archive (:func:`pllzoo.archive.write`, as ``pllzoo archive``);
3. checks that the archive alone gives the records ``runs/`` gives (``pllzoo report`` reads either);
4. with ``--delete-runs``, removes the run folders that hold nothing but what the archive holds
   (a folder with a ``checkpoint.pt`` stays).

Idempotent: a second pass moves nothing and leaves the archive's bytes as they are.

    python benchmarks/migrate_lean.py benchmarks/realworld/results/*/ --delete-runs
    python benchmarks/migrate_lean.py --all --exclude benchmarks/cifar10lt-cpu --delete-runs
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

import pandas as pd

from pllzoo import archive
from pllzoo.cli.archive import prune
from pllzoo.errors import PLLZooError
from pllzoo.migrate import migrate
from pllzoo.results import load

ROOT = Path(__file__).resolve().parents[1]


def results_folders(root: Path, exclude: list[Path]) -> list[Path]:
    """Every folder under ``root`` holding ``runs/`` or an archive, minus those under ``exclude``."""
    found = {p.parent for p in root.rglob("runs") if p.is_dir()} | {p.parent for p in root.rglob(archive.NAME)}
    skip = [e.resolve() for e in exclude]
    return sorted(f for f in found if not any(f.resolve().is_relative_to(e) for e in skip))


def check(out: Path) -> int:
    """The number of finished runs, after checking the archive alone gives what runs/ and the archive give.

    :raises SystemExit: one line, when they differ."""
    both = load(out, damaged=[])
    with tempfile.TemporaryDirectory() as tmp:
        shutil.copy(out / archive.NAME, Path(tmp) / archive.NAME)
        alone = load(Path(tmp), damaged=[])
    try:
        pd.testing.assert_frame_equal(both.reset_index(drop=True), alone.reset_index(drop=True))
    except AssertionError as exc:
        raise SystemExit(f"{out}: the archive does not give the records of runs/ ({str(exc).splitlines()[0]})")
    return both["run"].nunique() if len(both) else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folders", nargs="*", type=Path, help="results folders")
    parser.add_argument("--all", action="store_true", help="every results folder under benchmarks/")
    parser.add_argument("--exclude", action="append", type=Path, default=[], help="skip folders under this one")
    parser.add_argument("--delete-runs", action="store_true", help="then remove the archived run folders")
    args = parser.parse_args(argv)
    folders = list(args.folders) + (results_folders(ROOT / "benchmarks", args.exclude) if args.all else [])
    if not folders:
        parser.error("name results folders or pass --all")
    status = 0
    for out in folders:
        moved = migrate(out)
        try:
            path, n, local, changed = archive.write(out)
        except PLLZooError as exc:  # e.g. a run still held by a bench: rerun once it is done
            print(f"error: {exc}", file=sys.stderr)
            status = 1
            continue
        if not n:
            print(f"{out}: no runs")
            continue
        finished = check(out)
        line = (f"{out}: {len(moved)} run(s) moved to new ids; {path.name}: {n} runs ({finished} finished), "
                f"{path.stat().st_size} bytes, {'written' if changed else 'unchanged'}")
        if args.delete_runs:
            removed, kept = prune(out)
            line += f"; removed {removed} run folder(s)" + (f", kept {len(kept)} (e.g. {kept[0].name})" if kept else "")
            if (out / "runs").is_dir() and not any((out / "runs").iterdir()):
                (out / "runs").rmdir()
        print(line)
    return status


if __name__ == "__main__":
    sys.exit(main())
