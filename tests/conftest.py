"""Shared fixtures: the offline data folder, a clean registry, tiny synthetic data.

Only this project's own plugins are loaded (``PLLZOO_LOAD_PLUGINS``), so a plugin
a developer installed never leaks into the suite; tests that exercise outside
plugins set the variable themselves.
"""

from __future__ import annotations

import os
from pathlib import Path

from typing import TYPE_CHECKING

import pytest
import torch

if TYPE_CHECKING:  # pragma: no cover
    from pllzoo.data.base import PLLData

os.environ["PLLZOO_LOAD_PLUGINS"] = "baselines,solar,ltpll"

REPO = Path(__file__).resolve().parents[1]


def shared_data_dir() -> Path:
    """``../shared/data`` beside the repository root (present on dev machines and in CI)."""
    return REPO.parent / "shared" / "data"


@pytest.fixture
def shared_data() -> Path:
    path = shared_data_dir()
    if not path.is_dir():
        pytest.skip(f"offline data folder {path} is absent (it ships beside the repo on dev machines and CI)")
    return path


@pytest.fixture
def one_torch_thread():
    """One torch thread for the test (bit-for-bit comparisons), the previous count restored after."""
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(previous)


@pytest.fixture
def registry():
    from pllzoo.registry import get_registry, reset_registry

    reset_registry()
    yield get_registry()
    reset_registry()


DATA_NOTE = "Warning: synthetic-lt:"  # the data check's note on a tiny --subset, not about a run folder


def one_line_about(output: str, prefix: str, run: Path) -> str:
    """The one ``Error:``/``Warning:`` line (``prefix``) of a command's ``output``, which names ``run``;
    no traceback, and synthetic-lt's own data note on a tiny subset aside."""
    assert "Traceback" not in output, output
    lines = [line for line in output.splitlines() if line.startswith(prefix) and not line.startswith(DATA_NOTE)]
    assert len(lines) == 1, output
    assert run.name in lines[0], lines[0]
    return lines[0]


@pytest.fixture(scope="module")
def finished(tmp_path_factory, request) -> Path:
    """A finished bench folder, made once per module by ``pllzoo bench <module's FINISHED_ARGS> --out ...``."""
    from click.testing import CliRunner

    from pllzoo.cli import cli

    out = tmp_path_factory.mktemp(request.module.__name__.rpartition(".")[2]) / "out"
    res = CliRunner().invoke(cli, [*request.module.FINISHED_ARGS, "--out", str(out)])
    assert res.exit_code == 0, res.output
    return out


@pytest.fixture
def out(finished, tmp_path) -> Path:
    """A copy of the module's finished bench folder for one test to damage, resume or re-run."""
    import shutil

    return Path(shutil.copytree(finished, tmp_path / "out"))


def make_tiny_data(n: int = 96, k: int = 4, d: int = 6, seed: int = 0, phi: float = 0.3):
    """A tiny tabular PLL problem: separable Gaussian classes, uniform candidates (``pllzoo check``'s)."""
    from pllzoo.conformance import tiny_tabular

    return tiny_tabular(n, k, d, seed, phi)


@pytest.fixture
def tiny_data():
    return make_tiny_data()


def registered_methods() -> list[str]:
    """Every method the installed plugins register (for parametrising tests at collection time)."""
    from pllzoo.registry import get_registry, reset_registry

    reset_registry()
    try:
        return get_registry().list_methods()
    finally:
        reset_registry()


def make_fake_images(n: int = 64, k: int = 4, seed: int = 0) -> "PLLData":
    """Random uint8 images (kind 'image', model 'cnn'): the augmentation and strong-view paths (``pllzoo check``'s)."""
    from pllzoo.conformance import tiny_images

    return tiny_images(n, k, seed)


def stopped_run(tmp_path: Path, monkeypatch, request) -> tuple[list[str], Path]:
    """A 5-epoch PRODEN bench on synthetic-lt stopped by ``--time-limit`` after its first epochs (a fake clock,
    10 s an epoch): the bench's arguments (add ``--resume`` to continue it) and its run folder, checkpointed."""
    import fake_clock
    import torch
    from click.testing import CliRunner

    from pllzoo.cli import cli

    request.addfinalizer(lambda threads=torch.get_num_threads(): torch.set_num_threads(threads))
    fake_clock.install(monkeypatch)
    args = ["bench", "--methods", "proden", "--dataset", "synthetic-lt", "--epochs", "5", "--out",
            str(tmp_path / "out"), "--threads", "1"]
    assert CliRunner().invoke(cli, [*args, "--time-limit", "0.5"]).exit_code == 75
    (run,) = (p for p in (tmp_path / "out" / "runs").iterdir() if p.is_dir())
    return args, run
