"""EXAMPLE ONLY — a stub of an experiment-tracking client, in the shape of ``mlflow``'s fluent API.

It talks to no server: every call appends one JSON line ``{"call": ..., ...}`` to the file named by
the tracking URI, so a test can read back what the observer sent.  A real plugin imports ``mlflow``
(or ``wandb``) instead of this module; see docs/observers.md.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

_uri: str | None = None
_active: str | None = None


def _write(call: str, **fields: Any) -> None:
    if _uri is None:
        raise RuntimeError("set_tracking_uri() was not called")
    with open(_uri, "a") as f:  # one short line per call: appends from several processes do not interleave
        f.write(json.dumps({"call": call, "pid": os.getpid(), "run": _active, **fields}) + "\n")


def set_tracking_uri(uri: str) -> None:
    global _uri
    _uri = str(Path(uri))


def start_run(run_name: str, tags: dict[str, str] | None = None) -> str:
    global _active
    if _active is not None:
        raise RuntimeError(f"run {_active} is still active")
    _active = run_name
    _write("start_run", tags=tags or {})
    return run_name


def log_params(params: dict[str, Any]) -> None:
    _write("log_params", params=params)


def log_metrics(metrics: dict[str, float], step: int) -> None:
    _write("log_metrics", metrics=metrics, step=step)


def end_run(status: str = "FINISHED") -> None:
    global _active
    _write("end_run", status=status)
    _active = None
