"""Run configs without machine paths, and moving runs recorded with them to their path-free run ids.

A run's config (``config.json``, hashed into its id by :func:`pllzoo.results.run_id`) records what
changes a number, never where this machine keeps its files: ``data.data_dir`` (a command-line
input, ``--data-dir``) and ``data.path`` (the ``.mat`` file a loader found there) are left out
(:mod:`pllzoo.portable`), so the same run has the same id on every machine.

Runs recorded before that carry those keys, and ids hashed over them (and runs recorded with
``train.milestones`` as floats, :func:`pllzoo.portable.portable`; and runs whose id was longer than
:data:`pllzoo.results.ID_BYTES`, recorded before such ids were cut).  :func:`migrate` moves them
over: it drops the keys from each ``config.json``, renames the folder to the new id and rewrites
the old ids in the folder's tables (``results.csv`` and any other ``.csv``/``.md``/``.txt`` file
beside ``runs/``).  It is idempotent, and ``pllzoo bench`` runs it on its output folder before it
looks for finished runs, so ``--resume`` finds runs recorded under the old ids.
"""

from __future__ import annotations

import json
import os
import re
import warnings
from pathlib import Path

from pllzoo.atomic import write_atomic
from pllzoo.portable import portable
from pllzoo.results import run_id, write_json

TABLE_SUFFIXES = (".csv", ".md", ".txt")  # files beside runs/ whose run ids migrate rewrites


def legacy_runs(runs_dir: Path) -> dict[str, str]:
    """``{old id: new id}`` for the run folders under ``runs_dir`` whose config.json records machine paths
    (hidden folders and folders without a readable config.json are left alone).  A path-free config whose
    hash is not its folder's name was edited, or copied in: not a run recorded under an old id, so it is left
    alone too (it is not moved to the id of what its config now says)."""
    moves = {}
    for run_dir in sorted(Path(runs_dir).glob("*/config.json")):
        name = run_dir.parent.name
        if name.startswith("."):
            continue
        try:
            config = json.loads(run_dir.read_text())
        except (OSError, ValueError, RecursionError):  # the last: nested too deep (an outside review: a traceback)
            continue
        if not isinstance(config, dict) or "method" not in config or "dataset" not in config or "seed" not in config:
            continue
        if json.dumps(portable(config), sort_keys=True) != json.dumps(config, sort_keys=True):  # 1.0 == 1 in Python
            moves[name] = run_id(portable(config))
        elif name == run_id(config, cut=False) != run_id(config):  # recorded before long ids were cut
            moves[name] = run_id(config)
    return moves


def migrate(out: Path) -> dict[str, str]:
    """Move the runs of results folder ``out`` recorded with machine paths to their new ids; return
    ``{old id: new id}`` of those moved.  Idempotent: a migrated folder gives ``{}``.

    A run whose folder is locked by a live bench (``runs/<id>.lock``) or whose new id already has a
    folder is left as it is, with one warning line.
    """
    from pllzoo.runfolders import lock_holder

    runs_dir = Path(out) / "runs"
    moved = {}
    for old, new in legacy_runs(runs_dir).items():
        src, dst = runs_dir / old, runs_dir / new
        lock = runs_dir / f"{old}.lock"
        if lock.exists() and lock_holder(lock) is not None:
            warnings.warn(f"{src}: in use by another bench ({lock}); not moved to its new id {new}")
            continue
        if old != new and dst.exists():
            warnings.warn(f"{src}: its new id {new} already has a folder; left as it is (remove one of them)")
            continue
        config = json.loads((src / "config.json").read_text())
        write_json(src / "config.json", portable(config))
        if old != new:
            os.replace(src, dst)
            moved[old] = new
    if moved:
        rename_ids(Path(out), moved)
    return moved


def rename_ids(out: Path, moved: dict[str, str]) -> list[Path]:
    """Replace each old run id by its new one in the table files of ``out`` (not under ``runs/``);
    return the files changed.  Only whole ids are replaced; every other byte stays."""
    pattern = re.compile(r"(?<![\w.+=-])(" + "|".join(map(re.escape, sorted(moved, key=len, reverse=True)))
                         + r")(?![\w.+=-])")
    changed = []
    for path in sorted(Path(out).rglob("*")):
        if not path.is_file() or path.suffix not in TABLE_SUFFIXES or "runs" in path.relative_to(out).parts[:-1]:
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        new = pattern.sub(lambda m: moved[m.group(1)], text)
        if new != text:
            write_atomic(path, new)
            changed.append(path)
    return changed
