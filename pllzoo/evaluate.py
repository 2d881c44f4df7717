"""Re-score a finished run's final model with other prediction settings, without training.

SoLar-LA (the paper's Table 6) adjusts the logits of the *same* SoLar model: argmax g − ζ·log r.
Training a ``solar-la`` recipe instead gives another model and costs a full run.  :func:`rescore`
rebuilds a run from its ``config.json`` (the data from its recorded options and seed, the
components with their recorded hyper-parameters plus ``overrides``), optionally with another
``predict`` component (``solar`` + ``solar.la`` with ``predict.zeta=2`` is SoLar-LA), loads its
final checkpoint and evaluates the test set, returning the same metric keys as a training
epoch's record.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

from pllzoo.bench import carve
from pllzoo.checkpoint import NAME, CheckpointError, check_owner, load_checkpoint
from pllzoo.components import parse_method_string
from pllzoo.data.base import DataOptions
from pllzoo.errors import PLLZooError, UnknownNameError
from pllzoo.portable import portable
from pllzoo.registry import Registry
from pllzoo.results import DamagedRun, check_same_run, read_log, run_id, supplier_env
from pllzoo.run import TrainConfig
from pllzoo.devices import resolve_device
from pllzoo.trainer import Trainer


def _options(recorded: dict[str, Any], data_dir: Path | None) -> DataOptions:
    names = {f.name for f in dataclasses.fields(DataOptions)}
    opts = DataOptions(**{k: v for k, v in recorded.items() if k in names})
    root = Path(data_dir) if data_dir else (Path(opts.data_dir) if opts.data_dir else None)
    return dataclasses.replace(opts, data_dir=root, download=False)


def with_predict(method: str, predict: str | None) -> str:
    """The method string ``method`` with its predict slot set to ``predict`` (None: as it is); a swap of that
    slot the run already has is replaced, not added (an outside review: ``solar+predict=solar.la`` re-scored
    with ``--predict X`` was refused as "swapped twice")."""
    if not predict:
        return method
    base, swaps = parse_method_string(method)
    swaps["predict"] = predict
    return "+".join([base] + [f"{slot}={name or 'none'}" for slot, name in swaps.items()])


def check_run_folder(run_dir: Path) -> None:
    """:raises PLLZooError: one line, for a folder that holds nothing of a run (``/tmp``, say: it was "a damaged
    run", an outside review)."""
    if not any((Path(run_dir) / f).exists() for f in ("config.json", "log.jsonl", "done", NAME)):
        raise PLLZooError(f"{run_dir}: not a run folder (no config.json, log.jsonl or checkpoint); give run folders "
                          "OUT/runs/<run-id>, or a results folder OUT")


def run_config(run_dir: Path) -> dict[str, Any]:
    """The run folder's config.json, checked to be a pllzoo run config.

    :raises DamagedRun: one line, when it is not."""
    try:
        config = json.loads((run_dir / "config.json").read_text())
    except (OSError, ValueError):
        config = None
    keys = ("method", "dataset", "seed", "hparams", "data", "train")
    if not isinstance(config, dict) or not all(k in config for k in keys):
        raise DamagedRun(f"{run_dir}: damaged run (config.json is missing or not a pllzoo run config)")
    return config


def _check_data(run_dir: Path, data: Any, trainer: dict[str, Any] | None = None) -> str | None:
    """Warn when ``data`` is not what the run trained on (``env.json``'s ``data_sha256``, runs since
    2026-11-27): another ``--data-dir`` copy with other features re-scores a model on data it never saw.
    ``trainer``: who supplies the dataset now (:func:`pllzoo.runfolders.data_change`).
    Returns how they differ, or None."""
    import warnings

    from pllzoo.data.base import fingerprint
    from pllzoo.runfolders import data_change, recorded_env

    other = data_change(recorded_env(run_dir), fingerprint(data), trainer)
    if other is not None:
        warnings.warn(f"{run_dir.name}: these data are not the ones it trained on ({other}); the numbers below are "
                      "on these")
    return other


def _check_versions(registry: Registry, run_dir: Path, method: Any, config: dict[str, Any]) -> None:
    """Warn when what re-scores the model (the predict component, the backbone) is of another version than the
    run recorded (:func:`pllzoo.runfolders.version_change`): its numbers may then differ from the log's."""
    import warnings

    from pllzoo.results import plugins_env
    from pllzoo.runfolders import recorded_env, version_change

    now = {**plugins_env(registry, method), "trainer": supplier_env(registry, "model", config["train"].get("model"),
                                                                    "models")}
    older = version_change(recorded_env(run_dir), now, frozenset({"predict", "model"}))
    if older is not None:
        warnings.warn(f"{run_dir.name}: recorded with {older}; re-scored with these, so its numbers may differ "
                      "from its log's")


def recorded_method(registry: Registry, run_dir: Path, config: dict[str, Any], predict: str | None = None) -> Any:
    """The run's recorded method (with ``predict`` swapped in) as this install resolves it.

    :raises UnknownNameError: one line; where the run's components came from a plugin not loaded here, it names
        that plugin from the run's env.json (an outside review: "unknown method 'sharp-la' (did you mean
        'solar-la'?)" after an uninstall)."""
    from pllzoo.runfolders import recorded_env

    absent = registry.absent_plugins(recorded_env(run_dir))
    if absent is not None:
        raise UnknownNameError(f"trained with {absent} to re-score this run (`pllzoo plugins` lists those loaded)")
    return registry.method(with_predict(config["method"], predict))


def check_same_components(config: dict[str, Any], comps: dict[str, Any], run_dir: Path, overridden: set[str],
                          swapped: set[str]) -> None:
    """The components built to re-score a run must hold the hyper-parameters it recorded (up to the ``overridden``
    keys and the ``swapped`` slots), as ``--from-run`` checks its replay: an outside review, a plugin's v1.1 with
    a new field that changes the prediction re-scored a v1.0 run "as trained", 19.5 points lower, without a word.

    :raises PLLZooError: one line naming the first keys that differ and the versions recorded."""
    from pllzoo.hparams import named

    def flat(hparams: dict) -> dict[str, Any]:
        return {f"{slot}.{k}": v for slot, fields_ in hparams.items() if slot not in swapped
                for k, v in (fields_ or {}).items() if f"{slot}.{k}" not in overridden}

    absent = object()
    want = flat(config["hparams"])
    have = flat(json.loads(json.dumps(portable({s: named(c.hp) for s, c in comps.items()}))))
    # by value: a recorded 1.0 is the int default 1 a plugin declares (hparams.as_declared), the same prediction
    differ = sorted(k for k in want.keys() | have.keys() if want.get(k, absent) != have.get(k, absent))
    if not differ:
        return
    shown = "; ".join(f"{k}: recorded {json.dumps(want[k]) if k in want else '<absent>'}, now "
                      f"{json.dumps(have[k]) if k in have else '<absent>'}" for k in differ[:3])
    more = f" (and {len(differ) - 3} more)" if len(differ) > 3 else ""
    raise PLLZooError(f"{run_dir}: its components here hold other hyper-parameters than it was trained with "
                      f"({shown}{more}); was it recorded by another version of pllzoo or its plugins? "
                      f"({_versions(run_dir)})")


def _versions(run_dir: Path) -> str:
    """The component plugins' versions env.json recorded ("trained with pllzoo-sharp 1.0.0: ..."), or that it
    recorded none."""
    from pllzoo.runfolders import recorded_env

    env = recorded_env(run_dir) or {}
    comps = env.get("components") if isinstance(env.get("components"), dict) else {}
    seen = sorted({f"{c.get('dist')} {c.get('version')}" for c in comps.values() if isinstance(c, dict)})
    return f"trained with {', '.join(seen)}: `pllzoo plugins` lists those here" if seen else "env.json records none"


def rescore(registry: Registry, run_dir: Path, overrides: dict[str, str], predict: str | None = None,
            data_dir: Path | None = None, device: str = "auto", dataset: str | None = None) -> dict[str, Any]:
    """Test metrics of the finished run in ``run_dir`` with ``predict`` as its predict component (if
    given) and component ``overrides`` (``slot.field``); ``dataset``: where a run trained on a ``.mat`` file or
    an image folder finds it (:meth:`~pllzoo.registry.Registry.recorded_dataset`)."""
    run_dir = Path(run_dir)
    if (run_dir / "runs").is_dir() and not (run_dir / "config.json").exists():  # a bench's --out, not one run
        raise PLLZooError(f"{run_dir} is a results folder; pass its run folders, e.g. {run_dir / 'runs' / '*'}")
    check_run_folder(run_dir)
    if not (run_dir / "done").exists():
        raise PLLZooError(f"{run_dir}: not a finished run (no 'done' marker)")
    if not (run_dir / NAME).exists():
        raise PLLZooError(f"{run_dir}: no checkpoint.pt (checkpoints are not kept in git; re-run the training)")
    records = read_log(run_dir)  # DamagedRun: one line
    config = run_config(run_dir)
    check_same_run(config, records[0], run_dir)  # the log of another run (a copied or pasted log.jsonl)
    try:
        ckpt = load_checkpoint(run_dir)
        check_owner(ckpt, run_dir / NAME, run=run_id(portable(config)), method=config["method"],
                    dataset=config["dataset"], seed=config["seed"])
    except CheckpointError as exc:  # its own remedy when it has one ("remove it to retrain this run")
        raise PLLZooError(str(exc) if "retrain" in str(exc) else f"{exc}; re-run the training") from None
    last = ckpt["records"][-1] if ckpt["records"] else {}
    if (last.get("stage_index"), last.get("epoch")) != (records[-1].get("stage_index"), records[-1]["epoch"]):
        raise PLLZooError(f"{run_dir / 'checkpoint.pt'}: not the run's final checkpoint (it ends at epoch "
                          f"{last.get('epoch')}, the log at {records[-1]['epoch']}); re-run the training")
    method = recorded_method(registry, run_dir, config, predict)
    valid = registry.hparam_keys(method)
    unknown = sorted(set(overrides) - valid)
    if unknown:
        predicts = sorted(k for k in valid if k.startswith("predict."))  # the only ones evaluate takes (below)
        raise UnknownNameError(f"unknown hyper-parameter(s) {', '.join(unknown)} for {method.name}; evaluate takes "
                          + (f"predict.* only: {', '.join(predicts)}" if predicts else
                             "predict.* only, and this method has none (--predict names a predict component)"))
    inert = sorted(k for k in overrides if not k.startswith("predict."))
    if inert:  # the trained model is only re-scored: training settings would be shown but change nothing
        raise PLLZooError(f"{', '.join(inert)}: evaluate re-scores the trained model, so only predict.* "
                          "hyper-parameters change its numbers; retrain the run for the others")
    from pllzoo.replay import json_typed

    # as --from-run reads them: JSON lists back to the tuples the fields hold (a bounded tuple field was refused)
    recorded = {k: json_typed(v) for k, v in registry.recorded_hparams(config).items() if k in valid}
    opts = _options(config["data"], data_dir)
    data = carve(registry.recorded_dataset(config["dataset"], dataset).load(opts), opts, config["seed"])
    now = supplier_env(registry, "dataset", config["dataset"], "datasets") if dataset is None else {}  # a file: none
    other = _check_data(run_dir, data, now)
    _check_versions(registry, run_dir, method, config)
    comps = registry.build_components(method, {**recorded, **overrides}, (data.name, data.kind), training=False)
    check_same_components(config, comps, run_dir, set(overrides), swapped={"predict"} if predict else set())
    # eager: one pass over the test set does not pay for compiling it (CUDA graphs took ~20-40 s a process on an
    # H100, more than the pass; the paper queue re-scores a finished SoLar run three times in its last seconds)
    train = dataclasses.replace(TrainConfig(**{k: json_typed(v) for k, v in config["train"].items()}), compile="none")
    trainer = Trainer(data, comps, train, config["seed"], resolve_device(device))
    try:
        trainer.load_final(ckpt)
    except PLLZooError as exc:
        if other is not None and dataset is not None:  # the file given is not the one it trained on
            raise PLLZooError(f"{run_dir.name} trained on other data than --dataset {dataset} ({other}), and its "
                              "model does not fit these; give the file it was trained on") from None
        if other is not None:  # e.g. a file of the user's own named like a built-in set (birdsong.mat)
            raise PLLZooError(f"{run_dir.name} trained on other data than {config['dataset']!r} loads here "
                              f"({other}), and its model does not fit these; was it trained on a file of your "
                              f"own? pass it with --dataset PATH") from None
        raise PLLZooError(f"{run_dir / NAME}: {exc}") from None
    return {"run": run_dir.name, "method": method.name, "seed": config["seed"],
            "overrides": dict(overrides), **trainer.test_metrics()}
