"""Dependencies: ranges, not pins; each distribution declares what its code imports and nothing a user does
not need (pytest only for tests, matplotlib only for ``pllzoo plot``, which says so when it is missing)."""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from pllzoo.cli import cli

REPO = Path(__file__).resolve().parents[1]
DISTS = {  # pyproject -> the package folder whose imports it must declare
    REPO / "pyproject.toml": REPO / "pllzoo",
    **{p / "pyproject.toml": next(d for d in sorted(p.glob("pllzoo_*")) if (d / "__init__.py").is_file())
       for p in sorted((REPO / "plugins").iterdir())},  # the package, not an editable install's egg-info
}
IMPORT_NAMES = {"PIL": "pillow", "yaml": "pyyaml"}  # import name -> distribution name, where they differ


def _project(path: Path) -> dict:
    tomllib = pytest.importorskip("tomllib", reason="tomllib is in the standard library from Python 3.11")
    return tomllib.loads(path.read_text())["project"]


def _name(requirement: str) -> str:
    return re.split(r"[<>=!~\[; ]", requirement, maxsplit=1)[0].lower()


def _imports(package: Path) -> set[str]:
    """Top-level modules imported anywhere in ``package``, outside the standard library and pllzoo itself."""
    found = set()
    for path in package.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                found |= {a.name.split(".")[0] for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                found.add(node.module.split(".")[0])
    return {IMPORT_NAMES.get(m, m).lower() for m in found
            if m not in sys.stdlib_module_names and not m.startswith("pllzoo")}


@pytest.mark.parametrize("pyproject", list(DISTS), ids=lambda p: p.parent.name)
def test_ranges_not_pins(pyproject):
    project = _project(pyproject)
    for req in project["dependencies"] + [r for extra in project.get("optional-dependencies", {}).values()
                                          for r in extra]:
        assert ">=" in req and "==" not in req, f"{pyproject}: {req} is not a range"


@pytest.mark.parametrize("pyproject", list(DISTS), ids=lambda p: p.parent.name)
def test_runtime_dependencies_are_what_the_code_imports(pyproject):
    project = _project(pyproject)
    runtime = {_name(r) for r in project["dependencies"]} - {"pllzoo", "pllzoo-baselines"}
    extras = {_name(r) for extra in project.get("optional-dependencies", {}).values() for r in extra}
    imported = _imports(DISTS[pyproject])
    optional = {"matplotlib", "pyyaml", "tensorboard"}  # `pllzoo plot`, YAML --config, --tensorboard: one-line errors
    assert imported - runtime <= optional & extras, "imported but not declared"
    assert runtime <= imported, f"declared but never imported: {runtime - imported}"


def test_pytest_only_for_tests_and_matplotlib_only_for_plot():
    for pyproject in DISTS:
        assert "pytest" not in {_name(r) for r in _project(pyproject)["dependencies"]}
    project = _project(REPO / "pyproject.toml")
    extras = {k: {_name(r) for r in v} for k, v in project["optional-dependencies"].items()}
    assert "matplotlib" not in {_name(r) for r in project["dependencies"]}
    assert extras["plot"] == {"matplotlib"} and {"pytest", "matplotlib"} <= extras["test"]


def test_plot_without_matplotlib_is_one_line(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # `import matplotlib` now raises ImportError
    res = CliRunner().invoke(cli, ["plot", str(tmp_path)])
    assert res.exit_code == 1
    assert res.output == 'Error: pllzoo plot needs matplotlib, which is not installed: pip install "pllzoo[plot]"\n'


def test_git_commit_is_pllzoo_checkouts_only(tmp_path):
    """An outside review: a wheel installed into a virtual environment inside the user's own git project recorded
    *their* commit as pllzoo's (env.json's git_commit); only a work tree holding the package as <top>/pllzoo
    names pllzoo's code."""
    import shutil
    import subprocess

    from pllzoo.results import _git_commit

    if shutil.which("git") is None:
        pytest.skip("no git here")
    repo = tmp_path / "project"
    for pkg in (repo / "pllzoo", repo / ".venv" / "lib" / "site-packages" / "pllzoo"):
        pkg.mkdir(parents=True)
        (pkg / "__init__.py").write_text("")
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-qm", "x"], check=True)
    head = subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()
    assert _git_commit(repo / "pllzoo") == head  # an editable install's checkout
    assert _git_commit(repo / ".venv" / "lib" / "site-packages" / "pllzoo") is None  # the user's project
    assert _git_commit(tmp_path) is None  # no work tree at all


def test_the_toml_parser_of_python_3_10_is_declared():
    """requires-python admits 3.10, which has no tomllib: configfile falls back to tomli, declared for it alone
    (an outside review: every command failed on 3.10)."""
    deps = _project(REPO / "pyproject.toml")["dependencies"]
    assert "tomli>=1.1; python_version < '3.11'" in deps
    assert _project(REPO / "pyproject.toml")["requires-python"] == ">=3.10"
    source = (REPO / "pllzoo" / "configfile.py").read_text()
    assert "import tomli as tomllib" in source and "sys.version_info >= (3, 11)" in source
