"""An outside plugin pip-installed into a private site folder, and the ``pllzoo`` CLI run with it (third-party tests)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def install(example: str, tmp_path_factory) -> Path:
    """``pip install --target`` the distribution ``tests/thirdparty/<example>`` (built outside the repository,
    no index, no deps) into a fresh folder; that folder."""
    target = tmp_path_factory.mktemp("site")
    source = tmp_path_factory.mktemp("src") / example
    shutil.copytree(HERE / "thirdparty" / example, source, ignore=shutil.ignore_patterns("build", "*.egg-info"))
    cmd = [sys.executable, "-m", "pip", "install", "--quiet", "--no-index", "--no-deps", "--no-build-isolation",
           "--target", str(target), str(source)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    return target


def run_pllzoo(site: Path, *args: str, load: str | None = None) -> subprocess.CompletedProcess:
    """``python -m pllzoo ARGS`` with ``site`` on the path; ``load``: PLLZOO_LOAD_PLUGINS (None: every plugin)."""
    env = {k: v for k, v in os.environ.items() if k != "PLLZOO_LOAD_PLUGINS"}
    if load is not None:
        env["PLLZOO_LOAD_PLUGINS"] = load
    env["PYTHONPATH"] = os.pathsep.join([str(site), env.get("PYTHONPATH", "")])
    return subprocess.run([sys.executable, "-m", "pllzoo", *args], capture_output=True, text=True, env=env,
                          timeout=300)
