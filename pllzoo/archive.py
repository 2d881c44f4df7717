"""One compressed file per results folder holding every recorded run: ``OUT/runs.jsonl.xz``.

Git keeps a study's tables, its ``results.csv`` and this archive, not its ``runs/`` folders
(thousands of small files).  The archive is xz-compressed JSON lines (stdlib :mod:`lzma`), one
line per run, sorted by run id::

    {"run": "<run id>", "done": true, "config": {...config.json}, "env": {...env.json},
     "log": {"n": <epochs recorded>, "columns": {"<key>": [value per record], ...},
             "absent": {"<key>": [indices of the records without that key], ...}},
     "error": "<error.txt>"}                      # only for a run that has one; its frames' paths cut to their
                                                  # last two parts, the home folder as ~ (:func:`placeless`)

The records are stored by column (about 13 % smaller than by row once compressed) and come back
**lossless**: every value is the one in ``log.jsonl`` (JSON floats round-trip exactly); within a
record the keys come back in the order the run first used them.  ``checkpoint.pt`` is never
archived.  The bytes depend only on the runs: lines sorted by id, JSON with sorted config/env keys
and fixed separators, fixed :data:`FILTERS`, no timestamps (xz stores none), so archiving the same
runs twice gives the same file (with the same liblzma).

Reading (:func:`pllzoo.results.load`, hence ``pllzoo report``/``plot``, ``bench``'s ``results.csv``
and ``--resume``): a run in both places is taken from ``runs/`` when that copy is finished, else
from the archive when the archived copy is; so new runs trained next to an archive add to it, and a
failed retraining never hides an archived finished run.
"""

from __future__ import annotations

import itertools
import json
import lzma
import os
import re
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO, Iterator

from pllzoo.atomic import write_atomic
from pllzoo.errors import PLLZooError

NAME = "runs.jsonl.xz"
FORMAT = 1  # bump when the line layout changes
FILTERS = [{"id": lzma.FILTER_LZMA2, "preset": 9 | lzma.PRESET_EXTREME, "lc": 4, "lp": 0, "pb": 0}]
ARCHIVED_FILES = frozenset({"config.json", "env.json", "log.jsonl", "done", "error.txt"})
"""What a run folder's archive line holds; ``checkpoint.pt`` and anything else stays behind."""
MAX_BYTES = 2 << 30  # read() refuses an archive larger decompressed (the largest committed one: 6.8 MB)
MAX_LINE = 256 << 20  # ... or a line longer (the longest committed: 0.3 MB, a run of 220 epochs)
MAX_BLANK = 1000  # ... or more blank lines (pllzoo writes none)


@dataclass(frozen=True)
class ArchivedRun:
    """One run of an archive: what its folder held."""

    run: str
    done: bool
    config: dict[str, Any]
    env: dict[str, Any]
    records: list[dict[str, Any]]
    error: str | None = None


def pack(records: list[dict[str, Any]]) -> dict[str, Any]:
    """Records (one dict per epoch) → ``{"n", "columns", "absent"}``, columns in first-used order."""
    keys = list(dict.fromkeys(k for r in records for k in r))
    absent = {k: [i for i, r in enumerate(records) if k not in r] for k in keys}
    return {"n": len(records), "columns": {k: [r.get(k) for r in records] for k in keys},
            "absent": {k: idx for k, idx in absent.items() if idx}}


def unpack(log: dict[str, Any]) -> list[dict[str, Any]]:
    """The inverse of :func:`pack`."""
    absent = {k: set(v) for k, v in log.get("absent", {}).items()}
    return [{k: col[i] for k, col in log["columns"].items() if i not in absent.get(k, ())} for i in range(log["n"])]


def line(run: ArchivedRun) -> str:
    """The archive line of ``run``: compact JSON, config and env keys sorted, records by column."""
    obj: dict[str, Any] = {"run": run.run, "done": run.done, "config": _sorted(run.config), "env": _sorted(run.env),
                           "log": pack(run.records)}
    if run.error is not None:
        obj["error"] = run.error
    return json.dumps(obj, separators=(",", ":"))


_TRACED_FILE = re.compile(r'File "((?:/|[A-Za-z]:\\).*?)", line')  # a frame's file, quotes and blanks in it too
_ABSOLUTE = re.compile(r"""(?<![\w.~:/])(?:/|[A-Za-z]:\\)(?:[^\s'"/\\]+[/\\]){2,}[^\s'"/\\]*""")  # 3+ parts


def placeless(traceback: str) -> str:
    """A failed run's traceback as its archive keeps it: the file of each frame (POSIX or Windows, quotes and
    blanks in it too) and any other absolute path of three or more parts (a data file in the message) keep their
    last two parts (``.../pllzoo/trainer.py``), so a committed archive names no folder of the machine that ran it
    (issue 16; two outside reviews found checkouts, site-packages, user names and data folders there); a path in
    the home folder reads ``~/...`` first."""
    def last_two(path: str) -> str:
        return ".../" + "/".join([p for p in re.split(r"[/\\]", path) if p][-2:])

    text = _TRACED_FILE.sub(lambda m: f'File "{last_two(m.group(1))}", line', traceback)
    home = str(Path.home())
    if len(home) > 1:  # the home folder as ~ where it is a whole folder (/home/al, not /home/alice)
        text = re.sub(re.escape(home) + r"(?=[/\\'\"\s]|$)", "~", text)
    return _ABSOLUTE.sub(lambda m: last_two(m.group(0)), text)


def _sorted(obj: Any) -> Any:
    """``obj`` with every dict's keys sorted (as config.json and env.json are written)."""
    return json.loads(json.dumps(obj, sort_keys=True))


def encode(runs: list[ArchivedRun]) -> bytes:
    """The archive file's bytes: a header line, then one line per run, sorted by id."""
    text = json.dumps({"pllzoo_archive": FORMAT}) + "\n"
    text += "".join(line(r) + "\n" for r in sorted(runs, key=lambda r: r.run))
    return lzma.compress(text.encode(), format=lzma.FORMAT_XZ, check=lzma.CHECK_CRC64, filters=FILTERS)


def _lines(f: BinaryIO) -> Iterator[tuple[int, str]]:
    """``(number, text)`` of each line of the open archive ``f`` that is not blank, decompressed as it is read: an
    outside review's 19.7 KB archive held 128 MiB of newlines, which read whole took 2.2 GB (1 GiB: MemoryError).

    :raises ValueError: past :data:`MAX_BYTES`, a line past :data:`MAX_LINE`, more than :data:`MAX_BLANK` blank
        lines (each costs a loop: 128 MiB of them took 90 s).
    """
    total = blank = 0
    for i in itertools.count(1):
        raw = f.readline(MAX_LINE + 1)  # never more than a line's cap in memory at once
        if not raw:
            return
        total += len(raw)
        if total > MAX_BYTES:
            raise ValueError(f"decompresses to more than {MAX_BYTES} bytes")
        if len(raw) > MAX_LINE:
            raise ValueError(f"line {i} is longer than {MAX_LINE} bytes")
        if raw.strip():
            yield i, raw.decode()
        else:
            blank += 1
            if blank > MAX_BLANK:
                raise ValueError(f"more than {MAX_BLANK} blank lines")


def read(out: Path) -> dict[str, ArchivedRun]:
    """The runs archived in ``out`` by id (``{}`` when it has no archive).

    :raises PLLZooError: one line, when the file is not a readable archive.
    """
    path = Path(out) / NAME
    if not path.exists():
        return {}
    try:
        with lzma.open(path, "rb") as f:
            lines = _lines(f)
            header = json.loads(next(lines, (1, "{}"))[1])
            if not isinstance(header, dict) or header.get("pllzoo_archive") != FORMAT:
                raise ValueError(f"not a format-{FORMAT} pllzoo run archive")
            runs = {}
            for i, text in lines:
                obj = json.loads(text)
                if not (isinstance(obj, dict) and isinstance(obj.get("run"), str) and
                        all(isinstance(obj.get(k), dict) for k in ("config", "env", "log"))):
                    raise ValueError(f"line {i} is not a run (its run, config, env and log of the wrong types)")
                runs[obj["run"]] = ArchivedRun(obj["run"], bool(obj["done"]), obj["config"], obj["env"],
                                               unpack(obj["log"]), obj.get("error"))
    except (OSError, ValueError, KeyError, TypeError, IndexError, AttributeError, lzma.LZMAError,
            UnicodeDecodeError, RecursionError, MemoryError) as exc:  # the last two: deep nesting, or a line too
        # large for this machine (an outside review: tracebacks)
        why = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
        raise PLLZooError(f"{path}: unreadable run archive ({why}); restore it from git, or "
                          f"rebuild it from {Path(out) / 'runs'}/ alone with pllzoo archive --rebuild {out}") from None
    return runs


def finished(out: Path) -> tuple[dict[str, list[dict[str, Any]]], dict[str, dict[str, Any]], dict[str, str]]:
    """The finished runs archived in ``out``, by run id: the records and the env of each undamaged one, and the
    one-line damage of the others (a log that is not whole, or of another run than its config:
    :func:`pllzoo.results.check_log`, :func:`~pllzoo.results.check_same_run`), which a bench retrains."""
    from pllzoo.results import DamagedRun, check_log, check_same_run

    found, envs, damaged = {}, {}, {}
    for name, run in read(out).items():
        if run.done:
            where = Path(out) / NAME / name
            try:
                found[name] = check_log(run.records, where)
                check_same_run(run.config, run.records[0], where)
            except DamagedRun as exc:
                found.pop(name, None)
                damaged[name] = str(exc)
                continue
            envs[name] = run.env
    return found, envs, damaged


def from_folder(run_dir: Path) -> ArchivedRun | None:
    """The archive entry of the run folder ``run_dir``; None when it has no log or config (nothing to keep).

    :raises pllzoo.results.DamagedRun: a log line that is not a record.
    """
    from pllzoo.results import _records

    if not (run_dir / "log.jsonl").exists() or not (run_dir / "config.json").exists():
        return None
    from pllzoo.results import DamagedRun

    linked = (["the folder"] if run_dir.is_symlink() else []) + sorted(n for n in ARCHIVED_FILES
                                                                        if (run_dir / n).is_symlink())
    if linked:  # pllzoo writes none: a folder handed over could carry any file of this machine into the archive,
        # which is committed and shared, and --prune would delete the folder that showed it (an outside review)
        raise DamagedRun(f"{run_dir}: damaged run ({', '.join(linked)}: a symbolic link, which pllzoo never makes)")
    records = _records(run_dir)
    found = {}
    for name in ("config.json", "env.json"):
        path = run_dir / name
        try:
            found[name] = json.loads(path.read_text()) if path.exists() else {}
        except (OSError, ValueError, RecursionError) as exc:  # the last: nested too deep (an outside review)
            raise DamagedRun(f"{run_dir}: damaged run ({name} is not JSON: {type(exc).__name__})") from None
        if not isinstance(found[name], dict):  # read() refuses such a line: the archive would be unreadable
            raise DamagedRun(f"{run_dir}: damaged run ({name} is not a JSON object)")
    config, env = found["config.json"], found["env.json"]
    from pllzoo.results import check_log, run_config

    if records:  # what report, plot and --from-run would leave out must not be archived (and --prune its folder)
        run_config(run_dir, records[0])  # an outside review: a config naming no method or dataset, or a NaN
    if (run_dir / "done").exists():  # accuracy in a finished run's log, was archived and its folder deleted
        check_log(records, run_dir)
    error_txt = run_dir / "error.txt"  # UTF-8 as written (jobs.record_failure), whatever the locale (a review)
    error = placeless(error_txt.read_text(encoding="utf-8", errors="replace")) if error_txt.exists() else None
    return ArchivedRun(run_dir.name, (run_dir / "done").exists(), config, env, records, error)


def _check_rebuild(out: Path) -> None:
    """Refuse (one line) a ``--rebuild`` that would lose runs: of a readable archive (it may hold runs that
    ``runs/`` lacks: a plain ``pllzoo archive`` merges the two), or with no run folder to rebuild from."""
    try:
        read(out)
    except PLLZooError:
        pass
    else:
        raise PLLZooError(f"{out / NAME} is readable; --rebuild replaces an unreadable archive only (pllzoo archive "
                          f"{out} adds runs/ to it)")
    if not any(p.is_dir() and (p / "log.jsonl").exists() for p in (out / "runs").glob("*")):
        raise PLLZooError(f"{out / 'runs'}/ holds no run folder to rebuild {out / NAME} from; restore the archive "
                          "from git instead (it stays as it is)")


def write(out: Path, rebuild: bool = False) -> tuple[Path, int, int, bool]:
    """(Re)build ``out``'s archive from its ``runs/`` folders and its current archive (a run in both is
    taken as :mod:`pllzoo.results` reads it: the local copy when finished).  Run
    :func:`pllzoo.migrate.migrate` first: the archive holds path-free configs only.

    ``rebuild``: from ``runs/`` alone, the current archive, which must be unreadable, kept beside as ``*.damaged``
    (:func:`_check_rebuild` refuses a readable one, and one with no run folder to rebuild from).

    :returns: ``(path, runs archived, runs taken from runs/, whether the file changed)``.
    :raises PLLZooError: one line, for a run folder recorded with machine paths, or a damaged log.
    """
    from pllzoo.migrate import legacy_runs
    from pllzoo.results import DamagedRun

    out = Path(out)
    legacy = legacy_runs(out / "runs")
    if legacy:
        old = next(iter(legacy))
        raise PLLZooError(f"{out / 'runs' / old}: recorded under an old run id (with machine paths); "
                          f"migrate it first (pllzoo archive does; a run a bench holds moves once that bench is done)")
    if rebuild and (out / NAME).exists():
        _check_rebuild(out)
        aside = out / f"{NAME}.damaged"
        n = 1
        while aside.exists():  # an earlier rebuild's: kept too
            aside, n = out / f"{NAME}.damaged.{n}", n + 1
        os.replace(out / NAME, aside)
    runs = read(out)
    local = 0
    for run_dir in sorted(p for p in (out / "runs").glob("*") if p.is_dir() and not p.name.startswith(".")):
        try:
            entry = from_folder(run_dir)
        except DamagedRun as exc:
            raise PLLZooError(f"{exc}; fix or remove the folder, then archive again") from None
        if entry is None:
            lacks = [f for f in ("config.json", "log.jsonl") if not (run_dir / f).exists()]
            if (run_dir / "done").exists() or (run_dir / "log.jsonl").exists():  # not a run that has yet to log:
                # damaged, said as report says it (an outside review: left out without a word)
                warnings.warn(f"left out {run_dir}: damaged run (no {' and no '.join(lacks)}); fix or remove the "
                              "folder, then archive again")
            continue
        if entry.done or not runs.get(entry.run, entry).done:  # an unfinished copy never hides a finished one
            runs[entry.run] = entry
            local += 1
    path = out / NAME
    blob = encode(list(runs.values()))
    changed = not path.exists() or path.read_bytes() != blob
    if changed and runs:
        write_atomic(path, blob)
    return path, len(runs), local, changed and bool(runs)
