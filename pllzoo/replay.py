"""``pllzoo bench --from-run RUN_DIR``: train a recorded run again, exactly, from its ``config.json``.

The record names everything that decides a number (:func:`pllzoo.planning.plan`): the method string,
dataset, seed, device, data options, the trainer settings and every component's resolved
hyper-parameters.  A replay plans that one run with all of them given explicitly (the hyper-parameters
as typed overrides, so nothing is re-parsed from text), then checks that the planned config equals the
recorded one (:func:`check`): the same run id, and on CPU the same numbers (a run is deterministic
given its seed and ``--threads``).  A pllzoo or plugin that would plan something else is one
``Error:`` line naming the first keys that differ.  Never compared: where the data lay
(``data.data_dir``, ``data.path``; records may leave them out) and ``data.download``; tolerated: a key
an older record lacks that this pllzoo plans at an empty value (``None``, 0, false), e.g. ``holdout``.
When the run id still differs, one ``Warning:`` line names the replay's id and the keys.

Allowed beside it: options that change no number (``--out``, ``--resume``, ``--overwrite``,
``--jobs``, ``--threads``, ``--time-limit``, ``--check``, ``--view-workers`` with the recorded
stream), and three that say where and how to get the data or where to train: ``--data-dir`` (wins
over the recorded folder, which is also used when the record has none), ``--offline`` and
``--device``; and ``--dataset`` for a run trained on a ``.mat`` file or an image folder, whose path the
record does not hold (it must load the dataset of the recorded name).  ``--offline`` and ``--device`` are
part of the run id: the replay then gets a new one, with one
``Warning:`` line (and on another device other numbers).  Options that would change the run
(``--methods``, ``--epochs``, ``--hp``, ...; :data:`FIXED`) and ``--config`` are refused with one line.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
from click.core import ParameterSource

from pllzoo.configfile import META_HP, META_REPLAY_HP
from pllzoo.errors import PLLZooError
from pllzoo.portable import WHERE_FROM_KEYS

if TYPE_CHECKING:  # pragma: no cover
    from pllzoo.planning import RunPlan

META_RUN = "pllzoo.replay.run"  # ctx.meta: (run folder, recorded config)
FIXED = ("methods", "dataset", "seeds", "epochs", "batch_size", "split", "phi", "imb", "imb_type", "holdout",
         "subset", "hps")
"""Bench parameters a replay takes from the record; given on the command line beside ``--from-run``
they are refused."""
DATA_OPTIONS = ("split", "phi", "imb", "imb_type", "holdout", "subset")  # DataOptions fields that are bench options
NEVER_COMPARED = frozenset(f"data.{k}" for k in WHERE_FROM_KEYS)  # where and how the data came
EMPTY = (None, 0, False, "none")  # a key a later pllzoo records, absent from older records, at such a value: tolerated
EXPECTED = {"method": str, "dataset": str, "seed": int, "device": str, "train": dict, "hparams": dict, "data": dict}


def _archived_config(path: Path) -> Any:
    """The config of run ``path.name`` in ``OUT/runs.jsonl.xz`` when ``path`` is ``OUT/runs/<run-id>`` and the
    archive holds that run (git keeps a study's archive, not its run folders: :mod:`pllzoo.archive`), else None.

    :raises PLLZooError: one line, for an unreadable archive."""
    from pllzoo import archive

    if path.parent.name != "runs" or not (path.parent.parent / archive.NAME).is_file():
        return None
    run = archive.read(path.parent.parent).get(path.name)
    return run.config if run is not None else None


def read_config(path: Path) -> dict[str, Any]:
    """The config recorded in a run folder (``OUT/runs/<run-id>``, or its ``config.json``), or, for a run folder
    that is gone, in ``OUT/runs.jsonl.xz``.

    :raises PLLZooError: one line: no such folder, no config.json, or a damaged one (not JSON, or
        without the keys and types a bench writes).
    """
    from pllzoo.results import DamagedRun  # here: pllzoo.results loads pandas, and `bench --help` must not

    file = path if path.name == "config.json" else path / "config.json"
    if not path.exists():
        config = _archived_config(path)
        if config is None:
            raise PLLZooError(f"--from-run {path}: no such run folder (a run folder is OUT/runs/<run-id>, or a run "
                              f"that OUT/runs.jsonl.xz holds)")
    elif not file.is_file():
        raise PLLZooError(f"--from-run {path}: no config.json in it (a run folder is OUT/runs/<run-id>)")
    else:
        try:
            config = json.loads(file.read_text())
        except (OSError, UnicodeDecodeError, ValueError) as exc:
            why = "not JSON: truncated or garbage" if isinstance(exc, ValueError) else type(exc).__name__
            raise DamagedRun(f"--from-run {path}: damaged run (config.json {why})") from None
    if not isinstance(config, dict):
        raise DamagedRun(f"--from-run {path}: damaged run (config.json is not a JSON object)")
    for key, kind in EXPECTED.items():
        if not isinstance(config.get(key), kind) or isinstance(config.get(key), bool):
            have = "no" if key not in config else f"a bad ({type(config[key]).__name__})"
            raise DamagedRun(f"--from-run {path}: damaged run (config.json has {have} {key!r})")
    if not all(isinstance(v, dict) for v in config["hparams"].values()):
        raise DamagedRun(f"--from-run {path}: damaged run (config.json's 'hparams' is not a table per slot)")
    return config


def json_typed(value: Any) -> Any:
    """A JSON value as the dataclass field holds it (lists back to tuples)."""
    return tuple(json_typed(v) for v in value) if isinstance(value, list) else value


def recorded_overrides(config: dict[str, Any]) -> dict[str, Any]:
    """Every trainer setting and component hyper-parameter of ``config``, as typed ``--hp`` overrides (a field
    left out of the config at its ``unnamed_when`` value is filled in: :meth:`Registry.recorded_hparams`)."""
    from pllzoo.registry import get_registry

    out = {f"train.{k}": json_typed(v) for k, v in config["train"].items()}
    out |= {k: json_typed(v) for k, v in get_registry().recorded_hparams(config).items()}
    return out


def recorded_options(config: dict[str, Any]) -> dict[str, Any]:
    """The bench options (click parameter names) that plan ``config``'s run."""
    data = config["data"]
    opts: dict[str, Any] = {"methods": config["method"], "dataset": config["dataset"], "seeds": str(config["seed"]),
                            "device": config["device"]}
    # split "given": an image folder's own train/ and test/ (its loader records it), which no --split names: the
    # default plans it again (an outside review: --from-run refused every such run)
    opts |= {k: data[k] for k in DATA_OPTIONS if data.get(k) is not None and (k, data[k]) != ("split", "given")}
    if data.get("data_dir") is not None:  # absent from records that keep no machine-specific path
        opts["data_dir"] = data["data_dir"]
    if "download" in data:
        opts["offline"] = not data["download"]
    if config.get("view_stream") == "pooled":  # any positive count draws the same stream: CUDA's default count
        from pllzoo.prefetch import resolve_workers

        opts["view_workers"] = resolve_workers(None, "cuda")
    else:
        opts["view_workers"] = 0
    return opts


def recorded_env_of(path: Path) -> dict[str, Any] | None:
    """The env.json recorded beside ``--from-run PATH``'s config (:func:`read_config`'s places), or None."""
    from pllzoo.runfolders import recorded_env

    if path.exists():
        return recorded_env(path.parent if path.name == "config.json" else path)
    from pllzoo import archive

    try:
        run = archive.read(path.parent.parent).get(path.name) if path.parent.name == "runs" else None
    except PLLZooError:
        return None
    return run.env if run is not None and isinstance(run.env, dict) else None


def recorded_in(path: Path) -> str:
    """Where ``--from-run PATH``'s config was read (:func:`read_config`): the run folder's config.json, or, for a
    run folder that is gone, the archive that holds it."""
    if path.name == "config.json":
        return str(path)
    if not path.exists():
        from pllzoo import archive

        return f"{path.parent.parent / archive.NAME} (run {path.name})"
    return str(path / "config.json")


def use_run(ctx: click.Context, param: click.Parameter, value: Path | None) -> Path | None:
    """``--from-run``'s callback (eager): the recorded run's options become the bench's defaults."""
    if value is None:
        return None
    if META_HP in ctx.meta:
        raise PLLZooError("--from-run and --config exclude each other: --from-run replays a recorded run as it was")
    config = read_config(Path(value))
    from pllzoo.registry import get_registry

    absent = get_registry().absent_plugins(recorded_env_of(Path(value)))
    if absent is not None:
        raise PLLZooError(f"--from-run {value}: trained with {absent} to replay this run (`pllzoo plugins` lists "
                          "those loaded)")
    ctx.default_map = {**(ctx.default_map or {}), **recorded_options(config)}
    ctx.meta[META_RUN] = (Path(value), config)
    ctx.meta[META_REPLAY_HP] = recorded_overrides(config)
    return value


def only_bookkeeping(hps: tuple[str, ...] | list[str]) -> bool:
    """Whether every ``--hp`` sets a bookkeeping field of the trainer (``train.checkpoint_every``, ...), which
    enters no run id (:data:`pllzoo.run.BOOKKEEPING_FIELDS`): a replay takes them."""
    from pllzoo.planning import parse_overrides
    from pllzoo.run import BOOKKEEPING_FIELDS

    return all(k.startswith("train.") and k[len("train."):] in BOOKKEEPING_FIELDS for k in parse_overrides(hps))


def refuse_changes(ctx: click.Context) -> None:
    """Refuse, with one line, a run-changing option given beside ``--from-run`` (:data:`FIXED`)."""
    from pllzoo.registry import get_registry

    given = ParameterSource.COMMANDLINE, ParameterSource.ENVIRONMENT
    recorded, registry = ctx.meta[META_RUN][1]["dataset"], get_registry()
    path = ctx.params["dataset"] if ctx.get_parameter_source("dataset") in given else None
    # a .mat file or an image folder, whose path is not recorded: --dataset gives it (that dataset, or one line),
    # and without it one line says so; a file of one's own named like a registered set (birdsong.mat) too
    by_path = recorded not in registry.datasets or (path is not None and path not in registry.datasets)
    if by_path:
        registry.recorded_dataset(recorded, path)
    for name in FIXED:
        if name == "dataset" and by_path:
            continue
        if name == "hps" and only_bookkeeping(ctx.params.get("hps") or ()):  # how often it checkpoints: no number
            continue  # changes, nor the run id (an outside review: a long replay could not set it)
        if ctx.get_parameter_source(name) in given:
            flag = "--hp" if name == "hps" else "--" + name.replace("_", "-")
            raise PLLZooError(f"{flag} would change the run that --from-run replays as recorded; beside it give only "
                              f"options that change no number (--out, --resume, --jobs, ...) or "
                              f"--data-dir, --offline, --device")


def _flat(obj: Any, prefix: str = "") -> dict[str, Any]:
    """Nested tables as one table with dotted keys (``data.phi``); lists stay values."""
    if not isinstance(obj, dict):
        return {prefix[:-1]: obj}
    out: dict[str, Any] = {}
    for key, value in obj.items():
        out |= _flat(value, f"{prefix}{key}.")
    return out


def _empty(value: Any) -> bool:
    """Whether ``value`` is one of :data:`EMPTY` (an int or float zero, not some other falsy value)."""
    return any(value == e and type(value) in {type(e), float} for e in EMPTY)


def check(ctx: click.Context, plans: list[RunPlan]) -> None:
    """After planning a replay: its config must be the recorded one, up to what the command line chose.

    :raises PLLZooError: one line naming the first keys that differ (another pllzoo or plugin version).
    """
    if META_RUN not in ctx.meta or not plans:
        return
    from pllzoo.results import run_id

    path, recorded = ctx.meta[META_RUN]
    planned = json.loads(json.dumps(plans[0].config, default=str))  # as config.json holds it
    chosen = set(NEVER_COMPARED)
    if ctx.get_parameter_source("device") == ParameterSource.COMMANDLINE:
        chosen |= {"device", "rng"}
    want, have = _flat(recorded), _flat(planned)
    differ = sorted(k for k in want.keys() | have.keys()  # as the run id reads them: 1 is not 1.0
                    if json.dumps(want.get(k, "<absent>")) != json.dumps(have.get(k, "<absent>")))
    wrong = [k for k in differ if k not in chosen and not (k not in want and _empty(have[k]))
             and want.get(k, "<absent>") != have.get(k, "<absent>")]  # the same value in another type: a new id only
    if wrong:
        shown = "; ".join(f"{k}: recorded {want.get(k, '<absent>')!r}, now {have.get(k, '<absent>')!r}"
                          for k in wrong[:3])
        more = f" (and {len(wrong) - 3} more)" if len(wrong) > 3 else ""
        why = ("was it trained on a file of your own of that name (pass it with --dataset PATH), or recorded by "
               "another version of pllzoo?" if any(k.startswith("data.") for k in wrong)
               else "was it recorded by another version of pllzoo or its plugins?")
        raise PLLZooError(f"--from-run {path}: this pllzoo plans another run than the recorded one ({shown}{more}); "
                          f"{why}")
    if run_id(planned) != run_id(recorded):
        warnings.warn(f"--from-run {path}: replayed as run {run_id(planned)}, not {run_id(recorded)}, as "
                      f"{', '.join(differ)} differ (chosen on the command line or not recorded)", stacklevel=2)
    from pllzoo.runfolders import version_change

    env = recorded_env_of(Path(path))  # beside the config, or in the archive of an archived-only run
    older = version_change(env, plans[0].plugins)
    if older is not None:
        warnings.warn(f"--from-run {path}: recorded with {older}; replayed with these, whose numbers may differ",
                      stacklevel=2)
    if str(planned.get("device")) == "cpu":
        from pllzoo.runfolders import machine_change
        from pllzoo.threads import default_threads

        threads = ctx.params.get("threads") or default_threads(ctx.params.get("jobs") or 1)
        other_cpu = machine_change(env, threads)
        if other_cpu is not None:
            warnings.warn(f"--from-run {path}: {other_cpu}", stacklevel=2)
    from pllzoo.data.base import fingerprint
    from pllzoo.runfolders import data_change

    other = data_change(env, fingerprint(plans[0].data), plans[0].plugins.get("trainer"))
    if other is not None:  # a user's file is named by its name, shape and counts only (the run id)
        warnings.warn(f"--from-run {path}: the recorded run trained on other data than these ({other}); it is "
                      "replayed on these", stacklevel=2)
