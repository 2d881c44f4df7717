"""Static check of every Python file in the repository with pyflakes: no undefined names, no unused
imports or variables, no redefinitions.  The only allowed finding is an import made for its side
effect (registering CLI commands and views), listed below."""

from __future__ import annotations

from pathlib import Path

import pytest

pyflakes_api = pytest.importorskip("pyflakes.api", reason="pyflakes comes with the test extras: pip install -e '.[test]'")
from pyflakes import messages  # noqa: E402
from pyflakes.reporter import Reporter  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
FOLDERS = ("pllzoo", "plugins", "benchmarks", "tests")
SIDE_EFFECT_IMPORTS = {"pllzoo/augment.py", "pllzoo/cli/__init__.py"}  # imports that register views / commands


class _Collect(Reporter):
    def __init__(self) -> None:
        self.found: list = []

    def flake(self, message) -> None:
        self.found.append(message)

    def syntaxError(self, filename, msg, lineno, offset, text) -> None:  # noqa: N802 (pyflakes' API)
        self.found.append(f"{filename}:{lineno}: syntax error: {msg}")

    def unexpectedError(self, filename, msg) -> None:  # noqa: N802
        self.found.append(f"{filename}: {msg}")


def _allowed(message) -> bool:
    rel = Path(message.filename).resolve().relative_to(ROOT).as_posix()
    return isinstance(message, messages.UnusedImport) and rel in SIDE_EFFECT_IMPORTS


def test_pyflakes_finds_nothing():
    files = [p for f in FOLDERS for p in sorted((ROOT / f).rglob("*.py")) if "egg-info" not in str(p)]
    assert len(files) > 50
    reporter = _Collect()
    for path in files:
        pyflakes_api.check(path.read_text(), str(path), reporter)
    problems = [str(m) for m in reporter.found if isinstance(m, str) or not _allowed(m)]
    assert not problems, "\n".join(problems)


def test_the_check_catches_an_undefined_name():
    reporter = _Collect()
    pyflakes_api.check("def f():\n    return np.zeros(1)\n", "example.py", reporter)
    assert any(isinstance(m, messages.UndefinedName) for m in reporter.found)
