"""Run records on disk → pandas.

Layout of a bench output folder ``OUT``::

    OUT/results.csv              one row per method × seed (final epoch); ``status``, ``error`` last
    OUT/summary.csv              mean, sample std (ddof=1) and n over seeds
    OUT/runs/<run-id>/config.json    resolved recipe, hyper-parameters, data options
    OUT/runs/<run-id>/env.json       package versions, device, git commit, plugins (:func:`plugins_env`)
    OUT/runs/<run-id>/log.jsonl      one record per epoch
    OUT/runs/<run-id>/checkpoint.pt  resume point (pllzoo.checkpoint: cadence, clean stops)
    OUT/runs/<run-id>/done           written when the run finished
    OUT/runs/<run-id>/error.txt      a failed run's traceback (pllzoo.jobs.record_failure)
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import subprocess
from importlib import metadata as md
from pathlib import Path
from typing import Any, Iterable

import pandas as pd

from pllzoo.model_selection import select_epochs

ACC_COLUMNS = ("acc_all", "acc_many", "acc_medium", "acc_few")
RESULT_COLUMNS = ("method", "dataset", "seed", "epoch", *ACC_COLUMNS)


def run_id(config: dict[str, Any]) -> str:
    """``<method>__<dataset>__s<seed>-<hash of the whole config>``, filesystem-safe."""
    blob = json.dumps(config, sort_keys=True, default=str).encode()
    safe = "".join(c if c.isalnum() or c in "-_.=+" else "_" for c in f"{config['method']}__{config['dataset']}")
    return f"{safe}__s{config['seed']}-{hashlib.sha1(blob).hexdigest()[:8]}"


def write_json(path: Path, obj: Any) -> None:
    tmp = Path(str(path) + ".tmp")
    tmp.write_text(json.dumps(obj, indent=2, sort_keys=True, default=str) + "\n")
    os.replace(tmp, path)


def write_jsonl(path: Path, records: Iterable[dict[str, Any]]) -> None:
    tmp = Path(str(path) + ".tmp")
    tmp.write_text("".join(json.dumps(r, default=str) + "\n" for r in records))
    os.replace(tmp, path)


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]


def _git_commit() -> str | None:
    here = Path(__file__).resolve().parent
    try:
        out = subprocess.run(["git", "-C", str(here), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None if out.returncode == 0 else None


def env_info(device: str) -> dict[str, Any]:
    """Versions of everything that can change a number, plus device and git commit."""
    import numpy
    import torch

    versions = {}
    for dist in ("pllzoo", "pllzoo-solar", "pllzoo-baselines", "torch", "torchvision", "numpy", "scipy", "pluggy"):
        try:
            versions[dist] = md.version(dist)
        except md.PackageNotFoundError:
            pass
    return {
        "python": platform.python_version(), "platform": platform.platform(), "versions": versions,
        "torch_cuda": torch.version.cuda, "cudnn": torch.backends.cudnn.version(),
        "numpy": numpy.__version__, "device": device,
        "gpu": torch.cuda.get_device_name(0) if device.startswith("cuda") else None,
        "torch_threads": torch.get_num_threads(), "git_commit": _git_commit(),
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


def setting_label(config: dict[str, Any]) -> str:
    """What a run was trained on, e.g. ``cifar10lt φ=0.5 γ=100`` or ``lost balanced``."""
    d = config.get("data", {})
    parts = [str(config["dataset"])]
    if d.get("phi") is not None:
        parts.append(f"φ={d['phi']:g}")
    if d.get("imb") is not None:
        parts.append(f"γ={d['imb']:g}")
    if "layout" in d:  # the real-world .mat sets: the test protocol matters
        parts.append(str(d.get("split", "uniform")))
    for key in ("holdout", "subset"):
        if d.get(key):
            parts.append(f"{key}={d[key]:g}")
    return " ".join(parts)


def unfinished(*out_dirs: Path) -> list[Path]:
    """Run folders that have a log but no ``done`` marker (still training, or interrupted)."""
    return [log.parent for d in out_dirs for log in sorted(Path(d).glob("runs/*/log.jsonl"))
            if not (log.parent / "done").exists()]


def load(*out_dirs: Path, finished_only: bool = True) -> pd.DataFrame:
    """All per-epoch records under ``out_dir/runs`` as one tidy frame (one row per run × epoch).

    Each record also gets its run's ``setting`` (:func:`setting_label`) and ``train_counts``.
    Runs without a ``done`` marker are left out unless ``finished_only`` is False.
    """
    frames = []
    for out_dir in out_dirs:
        for log in sorted(Path(out_dir).glob("runs/*/log.jsonl")):
            if finished_only and not (log.parent / "done").exists():
                continue
            recs = read_jsonl(log)
            if not recs:
                continue
            cfg_path = log.parent / "config.json"
            config = json.loads(cfg_path.read_text()) if cfg_path.exists() else {"dataset": recs[0]["dataset"]}
            counts = tuple(config.get("data", {}).get("train_counts", ()))
            frame = pd.DataFrame(recs).assign(run=log.parent.name, setting=setting_label(config))
            frame["train_counts"] = [counts] * len(frame)
            frames.append(frame)
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=[*RESULT_COLUMNS, "run"])


def final_rows(df: pd.DataFrame) -> pd.DataFrame:
    """The last epoch of the final stage of every run, methods in first-seen order."""
    if df.empty:
        return df
    return order_methods(select_epochs(df, "last"), list(dict.fromkeys(df["method"])))


def order_methods(df: pd.DataFrame, order: list[str]) -> pd.DataFrame:
    """Rows sorted by ``order`` of methods, then seed (stable)."""
    rank = {m: i for i, m in enumerate(order)}
    return df.sort_values(["method", "seed"], key=lambda c: c.map(rank) if c.name == "method" else c, kind="stable")


def summarise(df: pd.DataFrame, by: tuple[str, ...] = ("method", "dataset")) -> pd.DataFrame:
    """Mean, *sample* std (ddof=1; NaN for one seed) and n over seeds of the accuracy columns.

    Groups keep their first-seen order.
    """
    g = df.groupby(list(by), sort=False)[list(ACC_COLUMNS)]
    out = g.mean().add_suffix("_mean").join(g.std(ddof=1).add_suffix("_std")).join(g.size().rename("n"))
    return out.reset_index()
