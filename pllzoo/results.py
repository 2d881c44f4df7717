"""Run records on disk → pandas.

Layout of a bench output folder ``OUT``::

    OUT/results.csv              one row per method × seed (final epoch)
    OUT/summary.csv              mean, sample std (ddof=1) and n over seeds
    OUT/runs/<run-id>/config.json    resolved recipe, hyper-parameters, data options
    OUT/runs/<run-id>/env.json       package versions, device, git commit
    OUT/runs/<run-id>/log.jsonl      one record per epoch
    OUT/runs/<run-id>/checkpoint.pt  resume point (rewritten every epoch)
    OUT/runs/<run-id>/done           written when the run finished
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


def load(out_dir: Path) -> pd.DataFrame:
    """All per-epoch records under ``out_dir/runs`` as one tidy frame (one row per run × epoch)."""
    frames = []
    for log in sorted(Path(out_dir).glob("runs/*/log.jsonl")):
        recs = read_jsonl(log)
        if recs:
            frames.append(pd.DataFrame(recs).assign(run=log.parent.name))
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=[*RESULT_COLUMNS, "run"])


def final_rows(df: pd.DataFrame) -> pd.DataFrame:
    """The last epoch of the final stage of every run."""
    if df.empty:
        return df
    last = df[df["final_stage"].astype(bool)]
    last = last.sort_values("epoch", kind="stable").groupby("run", sort=False).tail(1)
    order = {m: i for i, m in enumerate(dict.fromkeys(df["method"]))}  # first-seen method order
    return last.sort_values(["method", "seed"], key=lambda c: c.map(order) if c.name == "method" else c)


def summarise(df: pd.DataFrame, by: tuple[str, ...] = ("method", "dataset")) -> pd.DataFrame:
    """Mean, *sample* std (ddof=1; NaN for one seed) and n over seeds of the accuracy columns."""
    order = list(dict.fromkeys(df["method"]))
    g = df.groupby(list(by), sort=False)[list(ACC_COLUMNS)]
    out = g.mean().add_suffix("_mean").join(g.std(ddof=1).add_suffix("_std")).join(g.size().rename("n"))
    out = out.reset_index()
    out["_order"] = out["method"].map({m: i for i, m in enumerate(order)})
    return out.sort_values("_order").drop(columns="_order").reset_index(drop=True)
