"""Run records on disk → pandas.

Layout of a bench output folder ``OUT``::

    OUT/results.csv              one row per run (final epoch); ``setting``, ``status``, ``error`` last
    OUT/summary.csv              mean, sample std (ddof=1) and n over seeds
    OUT/runs/<run-id>/config.json    resolved recipe, hyper-parameters, data options
    OUT/runs/<run-id>/env.json       package versions, device, git commit, plugins (:func:`plugins_env`)
    OUT/runs/<run-id>/log.jsonl      one record per epoch
    OUT/runs/<run-id>/checkpoint.pt  resume point (pllzoo.checkpoint: cadence, clean stops)
    OUT/runs/<run-id>/done           written when the run finished
    OUT/runs/<run-id>/error.txt      a failed run's traceback (pllzoo.jobs.record_failure)
    OUT/runs.jsonl.xz                every run above but its checkpoint, in one file (pllzoo.archive);
                                     what git keeps instead of runs/

A finished run's log is checked whole before it is used (:func:`read_log`): every line a
record, the epochs of each stage consecutive from 1, the last one the final epoch of the final
stage.  A run that fails the check is *damaged*: ``report`` leaves it out with one line,
``bench --resume`` resumes it from its checkpoint or retrains it, ``evaluate`` refuses it.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import os
import platform
import subprocess
import warnings
from importlib import metadata as md
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Iterator

import pandas as pd

from pllzoo.atomic import write_atomic
from pllzoo.columns import ACC_COLUMNS, LABEL_COLUMNS, RESULT_COLUMNS
from pllzoo.errors import PLLZooError
from pllzoo.model_selection import select_epochs
from pllzoo.portable import WHERE_FROM_KEYS, portable


ID_BYTES = 237
"""The longest run id (UTF-8 bytes): a file name holds 255, and the longest name made of one, a sweep's
``runs/.<id>.adopting-<pid>``, adds up to 18 (a pid of 7 digits)."""


def _file_safe(text: str) -> str:
    return "".join(c if c.isalnum() or c in "-_.=+" else "_" for c in text)


def run_id(config: dict[str, Any], cut: bool = True) -> str:
    """``<method>__<dataset>__s<seed>-<hash of the whole config>``, filesystem-safe.  A name part that would make
    the id longer than :data:`ID_BYTES` is cut (the hash still tells the runs apart; an outside review's
    240-character ``.mat`` file name gave an id the file system refused); runs recorded under an uncut id
    (``cut=False``) are moved to it (:mod:`pllzoo.migrate`)."""
    blob = json.dumps(config, sort_keys=True, default=str).encode()
    safe = _file_safe(f"{config['method']}__{config['dataset']}")
    # the seed too: an integer everywhere pllzoo writes one, but a config.json handed over may say anything (an
    # outside review: a seed "/../../x" had the migration move a run folder out of OUT)
    tail = f"__s{_file_safe(str(config['seed']))}-{hashlib.sha1(blob).hexdigest()[:8]}"
    room = ID_BYTES - len(tail.encode())
    if cut and len(safe.encode()) > room:
        safe = safe.encode()[:room].decode(errors="ignore")  # a character cut in two is left out
    return safe + tail


def write_json(path: Path, obj: Any) -> None:
    write_atomic(path, json.dumps(obj, indent=2, sort_keys=True, default=str) + "\n")


def write_jsonl(path: Path, records: Iterable[dict[str, Any]]) -> None:
    write_atomic(path, "".join(json.dumps(r, default=str) + "\n" for r in records))


def append_jsonl(path: Path, record: dict[str, Any]) -> None:
    """Append ``record`` as one line: one ``write`` of the whole line with ``O_APPEND``, so a process killed
    meanwhile leaves the line whole or absent (a run's log grows an epoch at a time; rewritten whole each epoch
    its cost grew with the epoch number: 1.3 s an epoch at K = 1000 by epoch 1,100, an outside review)."""
    data = (json.dumps(record, default=str) + "\n").encode("utf-8")
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o666)
    try:
        size = os.fstat(fd).st_size
        view = memoryview(data)
        try:
            while view:
                view = view[os.write(fd, view):]
        except BaseException:  # a full disk part-way: the log ends at its last whole line again
            with contextlib.suppress(OSError):
                os.ftruncate(fd, size)
            raise
    finally:
        os.close(fd)


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]


class DamagedRun(PLLZooError):
    """A run folder whose files cannot be trusted (see :func:`read_log`); the message is one line."""


def _records(run_dir: Path) -> list[dict[str, Any]]:
    """Every line of ``run_dir/log.jsonl`` as a record with integer ``epoch`` and ``epochs``."""
    log = Path(run_dir) / "log.jsonl"
    if not log.exists():
        raise DamagedRun(f"{run_dir}: damaged run (no log.jsonl)")
    try:
        lines = log.read_text().splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise DamagedRun(f"{run_dir}: damaged run (log.jsonl unreadable: {type(exc).__name__})") from None
    records = []
    for i, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except ValueError:
            rec = None
        if not isinstance(rec, dict):
            raise DamagedRun(f"{run_dir}: damaged run (log.jsonl line {i} is not a JSON record: truncated or garbage)")
        if not all(isinstance(rec.get(k), int) and not isinstance(rec.get(k), bool) for k in ("epoch", "epochs")):
            raise DamagedRun(f"{run_dir}: damaged run (log.jsonl line {i} has no epoch/epochs)")
        records.append(rec)
    if not records:
        raise DamagedRun(f"{run_dir}: damaged run (log.jsonl is empty)")
    return records


def read_log(run_dir: Path) -> list[dict[str, Any]]:
    """The records of the finished run in ``run_dir``, checked whole (:func:`check_log`).

    :raises DamagedRun: one line naming the run and what is wrong.
    """
    return check_log(_records(run_dir), run_dir)


def check_log(records: list[dict[str, Any]], where: Path | str) -> list[dict[str, Any]]:
    """``records`` of a finished run, when whole: each stage's epochs consecutive from 1, ending at the
    final epoch of the final stage.

    :raises DamagedRun: one line naming ``where`` (the run) and what is wrong.
    """
    if not records:
        raise DamagedRun(f"{where}: damaged run (log.jsonl is empty)")
    _check_record_types(records, where)
    prev = None
    for rec in records:
        here = (rec.get("stage_index", 0), rec["epoch"])
        follows = (here[1] == 1 if prev is None or here[0] != prev[0] else here[1] == prev[1] + 1)
        if not follows or (prev is not None and here[0] < prev[0]):
            gap = f"starts at epoch {here[1]}" if prev is None else f"jumps from epoch {prev[1]} to {here[1]}"
            raise DamagedRun(f"{where}: damaged run (log.jsonl {gap}: epochs are missing)")
        prev = here
    last = records[-1]
    if last["epoch"] != last["epochs"] or last.get("final_stage", True) is not True:
        stage = f" of stage {last['stage']!r}" if "stage" in last else ""
        raise DamagedRun(f"{where}: damaged run (log.jsonl ends at epoch {last['epoch']} of {last['epochs']}"
                         f"{stage}{'' if last.get('final_stage', True) else ', not the final stage'}: "
                         f"its last epochs are missing)")
    return records


def _git_commit(here: Path = Path(__file__).resolve().parent) -> str | None:
    """The commit of pllzoo's own checkout (an editable install), else None: a wheel installed into a virtual
    environment inside the user's project sits in *their* work tree, whose commit says nothing of pllzoo's code
    (an outside review), so the work tree must be the one holding this package as ``<top>/pllzoo``."""
    try:
        out = subprocess.run(["git", "-C", str(here), "rev-parse", "--show-toplevel", "HEAD"], capture_output=True,
                             text=True, timeout=5)
    except (OSError, subprocess.SubprocessError):
        return None
    lines = out.stdout.split("\n")
    if out.returncode != 0 or len(lines) < 2 or not lines[1].strip():
        return None
    try:
        ours = Path(lines[0]).resolve() == here.parent
    except OSError:
        return None
    return lines[1].strip() if ours else None


def cpu_model() -> str:
    """The processor's name (Linux: /proc/cpuinfo's "model name"; elsewhere what ``platform`` knows)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def env_info(device: str) -> dict[str, Any]:
    """Versions of everything that can change a number, plus device and git commit.

    The CPU too: its model and the instruction set torch dispatches to (``cpu_capability``).  A CPU run is
    bit-reproducible on the same kind of CPU with the same thread count; another CPU takes other MKL/oneDNN
    kernels, whose last bits differ (benchmarks/momentum-restart/README.md: the first epoch of runs recorded
    on an earlier machine differs in the 5th digit here).  Pillow decodes the JPEG datasets.
    """
    import numpy
    import torch

    versions = {}
    for dist in ("pllzoo", "pllzoo-solar", "pllzoo-baselines", "torch", "torchvision", "numpy", "scipy", "pluggy",
                 "pillow"):
        try:
            versions[dist] = md.version(dist)
        except md.PackageNotFoundError:
            pass
    return {
        "python": platform.python_version(), "platform": platform.platform(), "versions": versions,
        "torch_cuda": torch.version.cuda, "cudnn": torch.backends.cudnn.version(),
        "numpy": numpy.__version__, "device": device,
        "gpu": torch.cuda.get_device_name(torch.device(device)) if device.startswith("cuda") else None,  # the run's
        # own (an outside review: cuda:1's run recorded cuda:0's name)
        "torch_threads": torch.get_num_threads(), "git_commit": _git_commit(),
        "cpu": cpu_model(), "cpu_capability": torch.backends.cpu.get_cpu_capability(),
    }


def plugins_env(registry: Any, method: Any) -> dict[str, Any]:
    """env.json's plugin part: every plugin with its distribution and version (a failed one with its
    one-line error), and which plugin and distribution supplied each component of ``method``.

    ``{"plugins": [{"name", "dist", "version", "builtin", "error"}, ...],
    "components": {slot: {"component", "plugin", "dist", "version"}}}`` (slots left empty are absent).
    """
    plugins = [{"name": p.name, "dist": p.dist, "version": p.version, "builtin": p.builtin, "error": p.error}
               for p in registry.plugins]
    components = {}
    for slot, name in method.slots().items():
        if name is not None:
            info = registry.component_plugin(slot, name)
            components[slot] = {"component": name, "plugin": info.name, "dist": info.dist, "version": info.version}
    return {"plugins": plugins, "components": components}


#: env.json's ``"trainer"`` keys → the registry's table of that kind (:func:`backbone_env`)
TRAINER_TABLES = {"model": "models", "weak_view": "views", "strong_view": "views", "dataset": "datasets"}


def backbone_env(registry: Any, train: Any, dataset: str | None = None) -> dict[str, Any]:
    """env.json's ``"trainer"`` part: which plugin and distribution supplied the run's backbone, views and, when
    ``dataset`` is a registered name (not a ``.mat`` path or an image folder), its dataset.

    ``{"model" | "weak_view" | "strong_view" | "dataset": {"name", "plugin", "dist", "version"}}``.
    """
    named = {key: getattr(train, key) for key in ("model", "weak_view", "strong_view")}
    named["dataset"] = dataset  # an outside review: the plugin of a plugin's dataset went unrecorded
    out = {}
    for key, name in named.items():
        out.update(supplier_env(registry, key, name, TRAINER_TABLES[key]))
    return {"trainer": out}


def supplier_env(registry: Any, key: str, name: str | None, table: str) -> dict[str, Any]:
    """``{key: {"name", "plugin", "dist", "version"}}`` of the plugin that registered ``name`` in the registry's
    ``table`` ("models", "views", "datasets"); empty where no plugin registered it (a ``.mat`` path)."""
    entry = getattr(registry, table).get(name) if isinstance(name, str) else None
    if entry is None:
        return {}
    info = next(p for p in registry.plugins if p.name == entry[1])
    return {key: {"name": name, "plugin": info.name, "dist": info.dist, "version": info.version}}


def setting_label(config: dict[str, Any]) -> str:
    """What a run was trained on, e.g. ``cifar10lt φ=0.5 γ=100`` or ``lost balanced``."""
    d = config.get("data", {})
    parts = [str(config["dataset"])]
    if d.get("phi") is not None:
        parts.append(f"φ={d['phi']:g}")
    if d.get("imb") is not None:
        parts.append(f"γ={d['imb']:g}")
    if d.get("imb_type") == "step":  # exp, the default profile, goes unsaid
        parts.append("step")
    if "layout" in d:  # the real-world .mat sets: the test protocol matters
        parts.append(str(d.get("split", "uniform")))
    for key in ("holdout", "subset"):
        if d.get(key):
            parts.append(f"{key}={d[key]:g}")
    return " ".join(parts)


def _finite_number(v: Any) -> bool:
    """A number as pllzoo writes one: an int or a finite float (NaN and inf are written as null)."""
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _finite_numbers(v: Any) -> bool:
    """A list of :func:`_finite_number` or null (``class_acc``); a plain loop, as a report reads millions of them."""
    if not isinstance(v, list):
        return False
    for x in v:
        if type(x) is float:  # the common case first (six times faster than the general test)
            if not math.isfinite(x):
                return False
        elif x is not None and not _finite_number(x):
            return False
    return True


RUN_KEYS = ("method", "dataset", "seed")  # what names a run in its records and its config.json


REQUIRED_KEYS = ("method", "dataset", "seed", "epoch", "epochs")
"""What every record pllzoo writes holds, and the tables group and order by."""


#: the held-out scores ``report --select heldout|approx`` maximises (percentages, as the accuracies)
SCORE_COLUMNS = ("val_covering", "val_approx")
SCORE_SLACK = 1e-3  # percentage points a float32 score may lie past 0 or 100


def _check_record_types(records: list[dict[str, Any]], where: Path | str) -> None:
    """The fields the tables read of each record have the types pllzoo writes: ``method``, ``dataset`` and
    ``stage`` strings, ``seed``, ``epoch`` and ``epochs`` integers, the accuracies, training-label accuracies and
    held-out scores finite percentages or null, ``class_acc`` a list of them (an edited or corrupted log does not,
    and would sort, average or plot wrongly).

    :raises DamagedRun: one line naming the run, the field, the epoch and the value."""
    text = (lambda v: isinstance(v, str), "a string")
    whole = (lambda v: isinstance(v, int) and not isinstance(v, bool), "a whole number")
    checks = {"method": text, "dataset": text, "stage": text, "seed": whole, "epoch": whole, "epochs": whole,
              **{c: (lambda v: v is None or _finite_number(v), "a finite number or null")
                 for c in (*ACC_COLUMNS, *SCORE_COLUMNS, *LABEL_COLUMNS)},
              "class_acc": (lambda v: v is None or _finite_numbers(v), "a list of finite numbers")}
    first = records[0] if records else {}
    for rec in records:
        missing = [k for k in REQUIRED_KEYS if k not in rec]
        if missing:  # an edited log, or another tool's: the tables would sort or group it wrongly
            raise DamagedRun(f"{where}: damaged run (log.jsonl's record at epoch {rec.get('epoch')!r} has no "
                             f"{', '.join(missing)})")
        for key, (ok, what) in checks.items():
            if key in rec and not ok(rec[key]):
                raise DamagedRun(f"{where}: damaged run (log.jsonl's {key} at epoch {rec.get('epoch')!r} is "
                                 f"{rec[key]!r:.60}, not {what})")
        for key in (*ACC_COLUMNS, *SCORE_COLUMNS, *LABEL_COLUMNS):  # a score or a label tally (shares 1/m) summed
            slack = 0.0 if key in ACC_COLUMNS else SCORE_SLACK  # in float32 may round past a bound by ~1e-5 (an
            # outside review: -5.96e-06, a trainer's own)
            if rec.get(key) is not None and not -slack <= rec[key] <= 100 + slack:
                raise DamagedRun(f"{where}: damaged run (log.jsonl's {key} at epoch {rec.get('epoch')!r} is "
                                 f"{rec[key]!r:.60}, not a percentage)")
        for key in RUN_KEYS:  # one run's records: lines of another run pasted in would be averaged as a seed
            if key in first and rec.get(key, first[key]) != first[key]:
                raise DamagedRun(f"{where}: damaged run (log.jsonl's {key} at epoch {rec.get('epoch')!r} is "
                                 f"{rec[key]!r:.60}, its first epoch's {first[key]!r:.60}: lines of two runs)")


def _check_types(records: list[dict[str, Any]], config: dict[str, Any], where: Path, checked: bool = False) -> None:
    """What the tables read of a run has the types pllzoo writes (an edited or corrupted file does not);
    ``checked``: the records' own types were (:func:`check_log`), so only the config's are.

    :raises DamagedRun: one line naming the run and the value."""
    def number(v: Any) -> bool:
        return v is None or isinstance(v, (int, float)) and not isinstance(v, bool)

    check_same_run(config, records[0], where)
    data = config.get("data", {})
    if not isinstance(data, dict):
        raise DamagedRun(f"{where}: damaged run (config.json's data is a {type(data).__name__}, not a mapping)")
    for key in ("phi", "imb", "holdout", "subset"):
        if not number(data.get(key)):
            raise DamagedRun(f"{where}: damaged run (config.json's data.{key} is {data[key]!r}, not a number)")
    if not checked:
        _check_record_types(records, where)


#: config keys that vary from seed to seed, or that the setting label and the method name already say
_NOT_A_VARIANT = frozenset({"seed", "data", "method", "dataset"})
#: keys of a config's data block that say what the data are and do not move with the seed (the rest of the block
#: does: the split's counts, the candidate statistics): runs that differ in one are other experiments
SEED_FREE_DATA = ("layout", "candidates", "source", "d", "n", "imb_type")


def _flat(d: Any, prefix: str = "") -> dict[str, Any]:
    if not isinstance(d, dict):
        return {prefix: d}
    out: dict[str, Any] = {}
    for k, v in d.items():
        out.update(_flat(v, f"{prefix}.{k}" if prefix else str(k)))
    return out


def _settings(configs: dict[str, dict[str, Any]]) -> dict[str, str]:
    """Each run's setting label (:func:`setting_label`), and, where runs of one method and setting were trained
    with other settings (epochs, hyper-parameters, batch size, device: anything in the config but the seed and
    the data), the values that tell them apart, e.g. ``synthetic-lt φ=0.5 γ=100 [train.epochs=20]``: they
    are other experiments, not more seeds of one."""
    labels = {key: setting_label(c) for key, c in configs.items()}
    groups: dict[tuple[str, str], list[str]] = {}
    for key, c in configs.items():
        groups.setdefault((labels[key], str(c.get("method"))), []).append(key)
    out = dict(labels)
    found = []
    shared: dict[str, set[str]] = {}  # setting label → the fields beyond the recipe's that tell its runs apart
    for (label, _), keys in groups.items():
        flats = {k: {**_flat({n: v for n, v in configs[k].items() if n not in _NOT_A_VARIANT}),
                     **{f"data.{n}": v for n, v in _seed_free(configs[k]).items()}} for k in keys}
        names = sorted({n for f in flats.values() for n in f})
        differ = [n for n in names if len({repr(f.get(n, "–")) for f in flats.values()}) > 1]
        if any(n.startswith("hparams.") for n in differ):  # a field left out at its recorded value: that value
            flats = {k: {**f, **_recorded_hparams(configs[k])} for k, f in flats.items()}
            differ = [n for n in names if len({repr(f.get(n, "–")) for f in flats.values()}) > 1]
        found.append((label, keys, flats, differ))
        shared.setdefault(label, set()).update(n for n in differ if not n.startswith("hparams."))
    for label, keys, flats, differ in found:
        # a trainer field (epochs, ...) that tells one method's runs apart tells every method's of the setting apart:
        # a method trained at one value only is labelled with it too (an outside review: it stood alone, unlabelled)
        fields = sorted(set(differ) | shared[label], key=lambda n: (n.startswith("hparams."), n))
        for k in keys if fields else ():  # "default": a trainer field or mode absent from the config at its default
            shown = ", ".join(f"{n.removeprefix('hparams.')}={flats[k].get(n, 'default')}" for n in fields)
            out[k] = f"{labels[k]} [{shown}]"
    return _tell_data_apart(configs, out)


def _seed_free(config: dict[str, Any]) -> dict[str, Any]:
    """The :data:`SEED_FREE_DATA` values of ``config``'s data block (``imb_type`` None, the dataset's default, as
    exp: an explicit ``--imb-type exp`` is the same data)."""
    data = config.get("data") if isinstance(config.get("data"), dict) else {}
    out = {n: data[n] for n in SEED_FREE_DATA if n in data}
    if out.get("imb_type") is None and data.get("imb") is not None:
        out["imb_type"] = "exp"
    return out


def _tell_data_apart(configs: dict[str, dict[str, Any]], labels: dict[str, str]) -> dict[str, str]:
    """``labels``, where one method, setting and seed has several runs: those were trained on other data of the
    same name (a user's ``.mat`` file and the built-in set, two files of one name; the data block is otherwise
    not a variant, as it moves with the seed), not more seeds of one run: each gets the data values that tell
    them apart, e.g. ``lost uniform [data.layout=proden]`` (a list as a short hash, ``#1a2b3c``).  Where nothing
    but how the data came differs (``--offline``), :func:`load` counts the runs once (:func:`_fetch_twins`)."""
    out = dict(labels)
    for keys, flats, differ in _seed_groups(configs, labels):
        for k in keys if differ else ():
            out[k] = f"{out[k]} [{', '.join(f'{n}={_short(flats[k].get(n, chr(8211)))}' for n in differ)}]"
    return out


def _seed_groups(configs: dict[str, dict[str, Any]], labels: dict[str, str]
                 ) -> Iterator[tuple[list[str], dict[str, dict[str, Any]], list[str]]]:
    """The groups of runs of one setting label, method and seed with more than one run: (their keys, each one's
    flattened data block without the seed and without where and how the data came, the data keys that differ)."""
    groups: dict[tuple[str, str, str], list[str]] = {}
    for key, c in configs.items():
        if "method" in c and "seed" in c:  # a whole config (older runs' have the dataset alone: nothing to compare)
            groups.setdefault((labels[key], str(c["method"]), repr(c["seed"])), []).append(key)
    skip = {"seed", *WHERE_FROM_KEYS}  # where and how the data came (--offline) is not other data
    for keys in (ks for ks in groups.values() if len(ks) > 1):
        flats = {k: _flat({n: v for n, v in dict(configs[k].get("data") or {}).items() if n not in skip}, "data")
                 for k in keys}
        names = sorted({n for f in flats.values() for n in f})
        yield keys, flats, [n for n in names if len({repr(f.get(n, "–")) for f in flats.values()}) > 1]


def _fetch_twins(configs: dict[str, dict[str, Any]], labels: dict[str, str]) -> dict[str, str]:
    """Run key → the key of the run it repeats: the same setting, method, seed and data, apart from how the data
    came (``--offline`` is recorded, so such runs have ids of their own).  Each counts once: the first by key."""
    twins = {}
    for keys, _, differ in _seed_groups(configs, labels):
        if not differ:
            kept, *rest = sorted(keys)
            twins.update((k, kept) for k in rest)
    return twins


def _short(value: Any) -> str:
    """A config value as a label shows it: a float to 4 digits, another scalar as it is, a list or a long string
    as ``#`` + 6 hex digits."""
    if isinstance(value, float):
        return f"{value:.4g}"
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    if isinstance(value, (list, dict)) or len(text) > 40:
        return "#" + hashlib.sha256(text.encode()).hexdigest()[:6]
    return text


def _recorded_hparams(config: dict[str, Any]) -> dict[str, Any]:
    """``config``'s hyper-parameters with the fields left out at their ``unnamed_when`` value filled in, keyed
    as :func:`_flat` keys them (``hparams.slot.field``); as recorded when the registry cannot say."""
    try:
        from pllzoo.registry import get_registry

        filled = get_registry().recorded_hparams(config)
    except Exception:  # noqa: BLE001 - a label only: the recorded values are shown then
        return {}
    return {f"hparams.{k}": v for k, v in filled.items()}


def unfinished(*out_dirs: Path) -> list[Path]:
    """Runs that have a log but no ``done`` marker (still training, or interrupted), as :func:`load` sees
    them: run folders, and ``OUT/runs.jsonl.xz/<run-id>`` for an archived one."""
    return [src.where for d in out_dirs for src in _sources(Path(d)) if not src.done and src.has_log]


@dataclass(frozen=True)
class _Source:
    """Where :func:`load` takes one run from: its folder under ``runs/`` or its line of the archive."""

    name: str
    where: Path  # the run folder, or OUT/runs.jsonl.xz/<run-id> (named in messages)
    done: bool
    has_log: bool
    archived: Any = None  # the pllzoo.archive.ArchivedRun, for an archived run

    def records(self) -> list[dict[str, Any]]:
        """Its records; a finished run's checked whole (:func:`check_log`). :raises DamagedRun:"""
        if self.archived is None:
            return read_log(self.where) if self.done else _records(self.where)
        recs = self.archived.records
        if self.done:
            return check_log(recs, self.where)
        if not recs:
            raise DamagedRun(f"{self.where}: damaged run (log.jsonl is empty)")
        return recs

    def config(self, first: dict[str, Any]) -> dict[str, Any]:
        if self.archived is None:
            return run_config(self.where, first)
        if not isinstance(self.archived.config, dict) or "dataset" not in self.archived.config:
            raise DamagedRun(f"{self.where}: damaged run (config.json is not a pllzoo run config)")
        return self.archived.config


def _sources(out_dir: Path) -> list[_Source]:
    """The runs of one results folder, sorted by id: each from ``runs/<id>/`` when that copy is finished,
    else from the archive (:mod:`pllzoo.archive`) when the archived copy is, else whichever exists."""
    from pllzoo import archive
    from pllzoo.runfolders import set_aside

    local = {}
    for name in ("log.jsonl", "done"):
        for f in out_dir.glob(f"runs/*/{name}"):
            if not f.parent.name.startswith("."):  # .<run-id>.tmp-<pid>: a bench's, in progress
                d = f.parent
                local[d.name] = _Source(d.name, d, (d / "done").exists(), (d / "log.jsonl").exists())
    archived = {name: _Source(name, out_dir / archive.NAME / name, run.done, True, run)
                for name, run in archive.read(out_dir).items()}
    for name, aside in set_aside(out_dir / "runs").items():  # a bench killed between a swap's two renames (an
        if name not in local and name not in archived:  # outside review: report left the run out without a word)
            warnings.warn(f"{out_dir / 'runs' / name}: missing; a bench killed while it swapped the run in left it "
                          f"as {aside.name} (left out here): the next pllzoo bench on {out_dir} puts it back (unless "
                          f"another bench holds runs/{name}.lock)")
            local[name] = None  # one line a run
    local = {k: v for k, v in local.items() if v is not None}
    picked = []
    for name in sorted(set(local) | set(archived)):
        here, there = local.get(name), archived.get(name)
        picked.append(here if here is not None and (here.done or there is None or not there.done) else there)
    return picked


def load(*out_dirs: Path, finished_only: bool = True, damaged: list[tuple[Path, str]] | None = None,
         beside: list[dict[str, Any]] | None = None, beside_labels: list[str] | None = None) -> pd.DataFrame:
    """All per-epoch records of the runs of each results folder as one tidy frame (one row per run × epoch):
    ``out_dir/runs/<run-id>/`` and the archive ``out_dir/runs.jsonl.xz`` (:func:`_sources` says which copy
    of a run in both is read).

    Each record also gets its run's ``setting`` (:func:`setting_label`) and ``train_counts``.
    Runs without a ``done`` marker are left out unless ``finished_only`` is False.  Damaged runs
    (:func:`read_log`, a finished run's damaged checkpoint; for an unfinished run only unreadable log lines
    count) are left out too, each as
    ``(run folder, one-line reason)`` appended to ``damaged``, or as a warning when it is None.
    ``beside``: configs of runs reported beside these (failed ones): their settings take part in telling runs
    of one method and setting apart, and their own labels, so told apart, are appended to ``beside_labels``.
    """
    read = _read(out_dirs, finished_only, damaged)
    frames = []
    chosen = _chosen(read)
    settings, labels = _labels({key: c[2] for key, c in chosen.items()}, beside or [])
    if beside_labels is not None:
        beside_labels += labels
    twins = _fetch_twins({key: c[2] for key, c in chosen.items()}, settings)
    for key, copies in read.items():  # a copied run folder counts once: the one named by its run id, else the first
        src, recs, config = chosen[key]
        if key in twins:
            warnings.warn(f"left out {src.where}: the same setting, seed and data as {chosen[twins[key]][0].where}, "
                          "which differs only in how the data came (e.g. --offline); each run counts once")
            continue
        for other, other_recs, _ in copies:
            if other is src:
                continue
            if other_recs == recs:
                warnings.warn(f"left out {other.where}: the same run as {src.where} (a copy; each run counts once)")
            elif _untimed(other_recs) == _untimed(recs):  # the same numbers: trained again here, or anywhere alike
                warnings.warn(f"left out {other.where}: the same run as {src.where}, trained again with the same "
                              "results (only the wall times differ); each run counts once")
            else:  # trained again, e.g. under torchrun: run ids do not depend on the processes
                warnings.warn(f"left out {other.where}: the same run id as {src.where}, trained apart with other "
                              "records (another machine or number of processes); each run id counts once")
        counts = tuple(config.get("data", {}).get("train_counts", ()))
        frame = pd.DataFrame(recs).assign(run=src.name, setting=settings[key])
        frame["train_counts"] = [counts] * len(frame)
        frames.append(frame)
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=[*RESULT_COLUMNS, "run"])


def _untimed(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``records`` without their wall times: what two trainings of one run must agree on."""
    return [{k: v for k, v in r.items() if k != "wall_s"} for r in records]


def _labels(configs: dict[str, dict[str, Any]], beside: list[dict[str, Any]]) -> tuple[dict[str, str], list[str]]:
    """:func:`_settings` of ``configs`` (by run id) and of ``beside`` together: the labels of each."""
    keys = [f"\0beside{i}" for i in range(len(beside))]  # no run id looks like this
    as_recorded = [json.loads(json.dumps(c, default=str)) for c in beside]  # as config.json holds it (write_json)
    settings = _settings({**configs, **dict(zip(keys, as_recorded))})
    return {k: settings[k] for k in configs}, [settings[k] for k in keys]


def settings_of(configs: dict[str, dict[str, Any]]) -> dict[str, str]:
    """Each run's setting label (``configs``: by run id), told apart as ``pllzoo report`` tells them: the data,
    and what else differs between runs of one method (``[train.epochs=30]``)."""
    return _labels(configs, [])[0]


_Read = dict[str, list[tuple["_Source", list[dict[str, Any]], dict[str, Any]]]]


def _read(out_dirs: tuple[Path, ...], finished_only: bool, damaged: list[tuple[Path, str]] | None) -> _Read:
    """Each run's copies in ``out_dirs`` as (source, records, config), keyed by the run id of its config; a
    damaged one is left out, as :func:`load` says."""
    read: _Read = {}
    for out_dir in out_dirs:
        for src in _sources(Path(out_dir)):
            if finished_only and not src.done:
                continue
            try:
                recs = src.records()
                config = src.config(recs[0])
                _check_types(recs, config, src.where, checked=src.done)  # a finished run's log: check_log'd
                if src.done and src.archived is None:
                    _check_checkpoint(src.where)
            except DamagedRun as exc:
                if damaged is None:
                    warnings.warn(f"left out {exc}")
                else:
                    damaged.append((src.where, str(exc)))
                continue
            read.setdefault(_run_key(config, src.name), []).append((src, recs, config))
    return read


def _chosen(read: _Read) -> dict[str, tuple["_Source", list[dict[str, Any]], dict[str, Any]]]:
    """The copy of each run that counts: the one whose folder is named by its run id, else the first."""
    return {key: next((c for c in copies if c[0].name == key), copies[0]) for key, copies in read.items()}


def _check_checkpoint(run_dir: Path) -> None:
    """A finished run's checkpoint, when it has one, is a whole file (``bench --resume`` retrains the run
    otherwise); absent is fine: checkpoints are not kept in git."""
    from pllzoo.checkpoint_file import NAME, CheckpointError, CheckpointUnreadable, quick_check

    if (run_dir / NAME).exists():
        try:
            quick_check(run_dir / NAME)
        except CheckpointUnreadable:  # nothing says it is damaged, and a report does not read it
            return
        except CheckpointError as exc:
            why = str(exc).rpartition("damaged checkpoint (")[2].removesuffix(")")
            raise DamagedRun(f"{run_dir}: damaged run ({NAME}: {why})") from None


def _run_key(config: dict[str, Any], name: str) -> str:
    """The id of the run ``config`` describes (the folder's name when the config is not a whole one)."""
    whole = all(k in config for k in ("method", "dataset", "seed"))
    return run_id(portable(config)) if whole else name


def run_config(run_dir: Path, first: dict[str, Any]) -> dict[str, Any]:
    """A run folder's config.json. :raises DamagedRun: none (every pllzoo run writes one before its first epoch;
    without it the run's setting, and so what it may be averaged with, is unknown), or one that is not a
    pllzoo run config."""
    path = run_dir / "config.json"
    if not path.exists():
        raise DamagedRun(f"{run_dir}: damaged run (config.json is missing)")
    try:
        config = json.loads(path.read_text())
    except (OSError, ValueError, RecursionError):  # the last: nested too deep (an outside review: a traceback)
        config = None
    if not isinstance(config, dict) or "dataset" not in config:
        raise DamagedRun(f"{run_dir}: damaged run (config.json is not a pllzoo run config)")
    check_same_run(config, first, run_dir)
    return config


def check_same_run(config: dict[str, Any], first: dict[str, Any], where: Path | str) -> None:
    """:raises DamagedRun: the log's first record names another method, dataset or seed than ``config``."""
    other = next((k for k in RUN_KEYS if k in config and k in first and config[k] != first[k]), None)
    if other is not None:
        raise DamagedRun(f"{where}: damaged run (log.jsonl's {other} is {first[other]!r:.60}, config.json's "
                         f"{config[other]!r:.60}: the log of another run)")


def final_rows(df: pd.DataFrame) -> pd.DataFrame:
    """The last epoch of the final stage of every run, methods in first-seen order."""
    if df.empty:
        return df
    return order_methods(select_epochs(df, "last"), list(dict.fromkeys(df["method"])))


def order_methods(df: pd.DataFrame, order: list[str]) -> pd.DataFrame:
    """Rows sorted by ``order`` of methods, then seed (stable)."""
    rank = {m: i for i, m in enumerate(order)}
    return df.sort_values(["method", "seed"], key=lambda c: c.map(rank) if c.name == "method" else c, kind="stable")


def summarised(df: pd.DataFrame, extra: tuple[str, ...] = ()) -> list[str]:
    """The columns :func:`summarise` averages: the test accuracies, and of ``extra`` (training-label accuracies,
    for ``report --metric label_acc*``) those some run of ``df`` logged, so that a summary.csv keeps its columns
    whichever methods a bench trains."""
    return [*ACC_COLUMNS, *(c for c in extra if c in LABEL_COLUMNS and c in df.columns)]


def summarise(df: pd.DataFrame, by: tuple[str, ...] = ("method", "dataset"), extra: tuple[str, ...] = ()
              ) -> pd.DataFrame:
    """Mean, *sample* std (ddof=1; NaN for one seed) and n over seeds of the accuracy columns.

    Groups keep their first-seen order.
    """
    g = df.groupby(list(by), sort=False)[summarised(df, extra)]
    out = g.mean().add_suffix("_mean").join(g.std(ddof=1).add_suffix("_std")).join(g.size().rename("n"))
    return out.reset_index()
