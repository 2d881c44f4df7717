"""``pllzoo --help`` and ``pllzoo <command> --help`` load no torch, torchvision, pandas or matplotlib.

Each check runs in a fresh interpreter (this one has torch loaded already), through the same
``pllzoo.cli.main`` the ``pllzoo`` entry point calls.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from pllzoo.cli import cli

ROOT = Path(__file__).resolve().parents[1]
HEAVY = ("torch", "torchvision", "pandas", "matplotlib")

PROBE = """
import json, sys
from pllzoo.cli import main
sys.argv = ["pllzoo", *json.loads(sys.argv[1])]
try:
    main()
except SystemExit as exc:
    code = exc.code
else:
    code = 0
print(json.dumps({"code": code, "heavy": [m for m in %r if m in sys.modules]}), file=sys.stderr)
""" % (HEAVY,)


def _env() -> dict[str, str]:
    paths = [str(ROOT), *(str(ROOT / "plugins" / p) for p in ("solar", "baselines", "ltpll"))]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(paths + [os.environ.get("PYTHONPATH", "")])}


def _probe(args: list[str]) -> tuple[dict, str]:
    res = subprocess.run([sys.executable, "-c", PROBE, json.dumps(args)], capture_output=True, text=True,
                         env=_env(), cwd=ROOT, timeout=120)
    return json.loads(res.stderr.strip().splitlines()[-1]), res.stdout


@pytest.mark.parametrize("command", [None, *sorted(cli.commands)])
def test_help_imports_nothing_heavy(command):
    found, stdout = _probe([command, "--help"] if command else ["--help"])
    assert found == {"code": 0, "heavy": []}, found
    assert "Usage:" in stdout and (command is None or command in stdout)


def test_version_imports_nothing_heavy():
    found, stdout = _probe(["--version"])
    assert found == {"code": 0, "heavy": []} and "pllzoo" in stdout


def test_report_and_archive_read_runs_and_the_archive_without_torch(tmp_path):
    """``pllzoo report`` (run folders and ``runs.jsonl.xz``, an unfinished run) needs pandas, not torch: 2.4 s of its
    4.7 s went to importing torch (the shot caption, the run-folder helpers), ~1 s now."""
    import shutil

    out = tmp_path / "out"
    shutil.copytree(ROOT / "benchmarks" / "composition" / "results-h100", out)
    run = out / "runs" / "proden__x__s1-00000000"
    run.mkdir(parents=True)
    (run / "log.jsonl").write_text('{"epoch": 1, "epochs": 2}\n')  # unfinished: the report names it
    found, stdout = _probe(["report", str(out), "--md", str(tmp_path / "t.md")])
    assert found == {"code": 0, "heavy": ["pandas"]}, found
    assert "Many: train count > " in (tmp_path / "t.md").read_text()
    shutil.rmtree(run)
    found, stdout = _probe(["archive", str(out)])  # archive too
    assert found["code"] == 0 and "torch" not in found["heavy"], found
    fresh = tmp_path / "fresh"  # a bench's own folder: finished runs with their checkpoints (an outside review)
    res = CliRunner().invoke(cli, ["bench", "--methods", "proden", "--dataset", "synthetic-lt", "--subset", "300",
                                   "--epochs", "1", "--batch-size", "64", "--threads", "1", "--out", str(fresh)])
    assert res.exit_code == 0 and list(fresh.glob("runs/*/checkpoint.pt")), res.output
    found, stdout = _probe(["report", str(fresh)])
    assert found == {"code": 0, "heavy": ["pandas"]}, found


def test_python_m_pllzoo_still_works():
    res = subprocess.run([sys.executable, "-m", "pllzoo", "bench", "--help"], capture_output=True, text=True,
                         env=_env(), cwd=ROOT, timeout=120)
    assert res.returncode == 0 and "--dry-run" in res.stdout, res.stderr


def test_public_names_still_import_lazily():
    code = ("import sys, pllzoo; assert 'torch' not in sys.modules; from pllzoo import Component, Step, hookimpl; "
            "assert 'torch' in sys.modules and pllzoo.Component is Component; print('ok')")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=_env(), cwd=ROOT,
                         timeout=120)
    assert res.stdout.strip() == "ok", res.stderr


def test_an_unknown_public_name_is_an_attribute_error():
    import pllzoo

    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        pllzoo.nope  # noqa: B018
