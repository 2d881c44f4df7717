"""The plugin author's surface: ``pllzoo.__all__``, imports from ``pllzoo`` only, env.json provenance, scoped --hp.

* Every name in ``pllzoo.__all__`` imports, and the outside plugin in ``tests/thirdparty`` and the
  README's plugin example import nothing but ``pllzoo`` itself (no ``pllzoo.<submodule>``); the
  README example runs as written.
* ``env.json`` records every plugin with its distribution and version (a failed one with its error)
  and which plugin and distribution supplied each component of the run.
* ``--hp METHOD:key=value`` takes any ``--methods`` string as METHOD, a mixed one included.
"""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
import types
from pathlib import Path

import pandas as pd
import pytest
from click.testing import CliRunner

import pllzoo
from pllzoo import bench
from pllzoo.cli import cli
from pllzoo.data.base import DataOptions
from pllzoo.errors import PLLZooError, UnknownNameError
from pllzoo.plugins import make_plugin_manager
from pllzoo.registry import Registry

ROOT = Path(__file__).resolve().parents[1]
THIRDPARTY = ROOT / "tests" / "thirdparty" / "pllzoo-example" / "pllzoo_example"
TINY = ["--dataset", "synthetic-lt", "--seeds", "1", "--epochs", "1", "--subset", "200", "--batch-size", "64",
        "--threads", "1"]


# ---------------------------------------------------------------------------------------------- public API
def test_every_name_in_all_imports():
    assert len(set(pllzoo.__all__)) == len(pllzoo.__all__)
    namespace: dict = {}
    exec("from pllzoo import *", namespace)
    assert set(pllzoo.__all__) - {"__version__"} <= set(namespace)
    for name in ("PLLZooError", "hp", "NoHParams", "Component", "Method", "hookimpl", "Batch", "Step", "Run",
                 "Stage", "PLLState", "soft_cross_entropy", "masked_mean", "normalize_rows", "mixup_loss"):
        assert name in pllzoo.__all__, name
    assert pllzoo.PLLZooError is PLLZooError and issubclass(pllzoo.UnknownNameError, PLLZooError)


def _pllzoo_imports(source: str) -> list[str]:
    """The modules a piece of Python imports from the ``pllzoo`` package."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "pllzoo":
            found.append(node.module)
        elif isinstance(node, ast.Import):
            found += [a.name for a in node.names if a.name.split(".")[0] == "pllzoo"]
    return found


def _readme_plugin_example() -> str:
    readme = (ROOT / "README.md").read_text()
    section = readme[readme.index("## Writing a plugin"):]
    section = section[:section.index("\n## ", 1)]
    blocks = re.findall(r"```python\n(.*?)```", section, re.S)
    assert blocks, "the README's plugin section has no python example"
    return "\n".join(blocks)


@pytest.mark.parametrize("where", ["thirdparty", "readme"])
def test_plugins_import_only_from_pllzoo(where):
    source = (THIRDPARTY / "__init__.py").read_text() if where == "thirdparty" else _readme_plugin_example()
    modules = _pllzoo_imports(source)
    assert modules and set(modules) == {"pllzoo"}, modules


def test_readme_plugin_example_runs(registry, tmp_path, monkeypatch):
    example = types.ModuleType("readme_example")
    monkeypatch.setitem(sys.modules, "readme_example", example)  # as an imported module (dataclasses look it up)
    exec(compile(_readme_plugin_example(), "README.md", "exec"), example.__dict__)
    pm, infos = make_plugin_manager()
    pm.register(example, name="readme_example")
    reg = Registry.build(pm, infos)
    assert not reg.failures(), [p.error for p in reg.failures()]
    added = [m for m, (_, plugin) in reg.methods.items() if plugin == "readme_example"]
    assert added
    plans = bench.plan(reg, added, "synthetic-lt", [1], DataOptions(subset=200), epochs=1, batch_size=64,
                       device="cpu")
    rows = bench.execute(reg, plans, tmp_path, threads=1)
    assert list(rows["status"]) == ["ok"] * len(added) and rows["acc_all"].notna().all()


def test_a_plugin_object_registered_in_process_runs_from_the_cli_and_the_callers_state_is_kept(tmp_path,
                                                                                           monkeypatch):
    # an outside review: pm.register on get_registry()'s manager was a silent no-op; an in-process bench left
    # torch's thread count, its global random state and warnings.showwarning changed in the caller's session
    import warnings

    import torch

    example = types.ModuleType("readme_example")
    monkeypatch.setitem(sys.modules, "readme_example", example)
    exec(compile(_readme_plugin_example(), "README.md", "exec"), example.__dict__)
    pllzoo.registry.reset_registry()
    try:
        reg = pllzoo.register_plugin(example, name="readme_example")
        assert "example" in reg.list_methods() and pllzoo.get_registry() is reg
        with pytest.raises(PLLZooError, match="loaded already"):
            pllzoo.register_plugin(example, name="readme_example")
        with pytest.raises(PLLZooError, match="'again' was refused: ValueError"):  # pluggy: one object, two names
            pllzoo.register_plugin(example, name="again")
        assert "example" in pllzoo.get_registry().list_methods()  # nothing of the refused one stays behind
        pllzoo.registry.reset_registry()  # what register_plugin added stays
        threads, shown = torch.get_num_threads(), warnings.showwarning
        torch.set_num_threads(2)
        torch.manual_seed(7)
        expected = torch.rand(3)
        torch.manual_seed(7)
        cli(["bench", "--methods", "example,proden+selection=example.smallloss", *TINY, "--out", str(tmp_path)],
            standalone_mode=False)
        assert torch.get_num_threads() == 2 and torch.equal(torch.rand(3), expected)
        assert warnings.showwarning is shown
        rows = pd.read_csv(tmp_path / "results.csv")
        assert list(rows["method"]) == ["example", "proden+selection=example.smallloss"]
        pllzoo.unregister_plugin("readme_example")
        assert "example" not in pllzoo.get_registry().list_methods()
        with pytest.raises(PLLZooError, match="was not added"):
            pllzoo.unregister_plugin("readme_example")
    finally:
        torch.set_num_threads(threads)
        pllzoo.registry._ADDED.pop("readme_example", None)
        pllzoo.registry.reset_registry()


def test_a_plugin_that_fails_its_checks_is_refused_and_nothing_of_it_stays(registry):
    """A plugin whose hooks register something pllzoo refuses (not a Component) is not half-registered: one
    PLLZooError with the reason, nothing under its name afterwards, so the corrected plugin registers under the
    same name (an outside mutation audit: the failed one was returned as registered, or its name kept taken).  A
    blank name names nothing and is refused."""
    class NotAComponent:
        pass

    @pllzoo.hookimpl
    def pllzoo_register_losses(register):
        register("broken", NotAComponent)

    bad = types.ModuleType("bad_plugin")
    bad.pllzoo_register_losses = pllzoo_register_losses
    try:
        with pytest.raises(PLLZooError, match=r"plugin 'bad' failed its checks: loss 'broken': .*NotAComponent.* is "
                                              r"not a pllzoo.Component subclass"):
            pllzoo.register_plugin(bad, name="bad")
        assert "bad" not in pllzoo.registry._ADDED
        assert not any(p.name == "bad" for p in pllzoo.get_registry().plugins)
        reg = pllzoo.register_plugin(types.ModuleType("fixed_plugin"), name="bad")  # the corrected one
        assert any(p.name == "bad" for p in reg.plugins) and not reg.failures()
    finally:
        pllzoo.registry._ADDED.pop("bad", None)
        pllzoo.registry.reset_registry()
    for blank in ("", "   "):
        with pytest.raises(PLLZooError, match="name must be a non-empty string"):
            pllzoo.register_plugin(types.ModuleType("unnamed_plugin"), name=blank)
    assert not pllzoo.registry._ADDED


@pytest.mark.parametrize("nested, ignored", [(False, True), (True, False)])
def test_the_program_ignores_late_signals_but_a_caller_keeps_its_handlers(nested, ignored):
    # the console script calls main() at module level; IPython's `%run -m pllzoo` calls it from its own frames
    call = "runpy.run_module('pllzoo', run_name='__main__', alter_sys=True)"
    body = f"def f():\n    {call}\ntry:\n    f()\n" if nested else f"try:\n    {call}\n"
    code = ("import runpy, signal, sys\nsignal.signal(signal.SIGINT, signal.default_int_handler)\n"  # nohup's
            "sys.argv = ['pllzoo', '--version']\n" + body +
            "except SystemExit:\n    pass\nprint(signal.getsignal(signal.SIGINT) == signal.SIG_IGN)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.splitlines()[-1] == str(ignored), done.stdout + done.stderr


def test_a_wrapper_module_run_with_python_m_is_the_program(tmp_path):
    """``python -m wrapper``, whose module-level line calls main(), ends with the command like the console script
    (runpy's frames are no caller's session): late signals are ignored there too (an outside mutation audit: it
    was taken for a session going on)."""
    (tmp_path / "wrapper.py").write_text(
        "import signal, sys\nfrom pllzoo.cli import main\nsignal.signal(signal.SIGINT, signal.default_int_handler)\n"
        "sys.argv = ['pllzoo', '--version']\ntry:\n    main()\nexcept SystemExit:\n    pass\n"
        "print(signal.getsignal(signal.SIGINT) == signal.SIG_IGN)\n")
    done = subprocess.run([sys.executable, "-m", "wrapper"], capture_output=True, text=True, check=True,
                          cwd=tmp_path, env={**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), *sys.path])})
    assert done.stdout.splitlines()[-1] == "True", done.stdout + done.stderr


# ---------------------------------------------------------------------------------------------- env.json
def _env(out: Path, method_prefix: str) -> dict:
    (run,) = [r for r in (out / "runs").iterdir() if json.loads((r / "config.json").read_text())["method"]
              == method_prefix]
    return json.loads((run / "env.json").read_text())


def test_env_json_names_every_plugin_and_the_supplier_of_each_component(registry, tmp_path):
    out = tmp_path / "out"
    mixed = "proden+selection=solar.classwise+estimator=solar.prior"
    res = CliRunner().invoke(cli, ["bench", "--methods", f"proden,{mixed}", *TINY, "--out", str(out)])
    assert res.exit_code == 0, res.output
    plain, mix = _env(out, "proden"), _env(out, mixed)
    plugins = {p["name"]: p for p in plain["plugins"]}
    assert plugins["baselines"] == {"name": "baselines", "dist": "pllzoo-baselines", "version": "0.2.0",
                                    "builtin": False, "error": None}
    assert plugins["solar"]["dist"] == "pllzoo-solar" and plugins["solar"]["error"] is None
    assert plugins["pllzoo.builtin"]["dist"] == "pllzoo" and plugins["pllzoo.builtin"]["version"] == pllzoo.__version__
    assert plain["components"] == {
        "label_update": {"component": "proden.confidence", "plugin": "baselines", "dist": "pllzoo-baselines",
                         "version": "0.2.0"},
        "selection": {"component": "pllzoo.all", "plugin": "pllzoo.builtin", "dist": "pllzoo",
                      "version": pllzoo.__version__},
        "loss": {"component": "proden.loss", "plugin": "baselines", "dist": "pllzoo-baselines",
                 "version": "0.2.0"},
    }
    supplied = {slot: (c["component"], c["plugin"], c["dist"]) for slot, c in mix["components"].items()}
    assert supplied == {
        "label_update": ("proden.confidence", "baselines", "pllzoo-baselines"),
        "selection": ("solar.classwise", "solar", "pllzoo-solar"),
        "loss": ("proden.loss", "baselines", "pllzoo-baselines"),
        "estimator": ("solar.prior", "solar", "pllzoo-solar"),
    }
    assert mix["plugins"] == plain["plugins"]


def test_env_json_lists_a_failed_plugin_with_its_error_also_from_jobs(tmp_path):
    class Broken:
        @pllzoo.hookimpl
        def pllzoo_register_methods(self, register):
            raise ValueError("cannot register\nsecond line")

    pm, infos = make_plugin_manager()
    pm.register(Broken(), name="broken")
    reg = Registry.build(pm, infos)
    plans = bench.plan(reg, ["cc"], "synthetic-lt", [1, 2], DataOptions(subset=200), epochs=1, batch_size=64,
                       device="cpu")
    bench.execute(reg, plans, tmp_path, jobs=2, threads=1)  # a worker's registry has no infos: the plan carries them
    env = json.loads((tmp_path / "runs" / plans[0].run_id / "env.json").read_text())
    (broken,) = [p for p in env["plugins"] if p["name"] == "broken"]
    assert broken["dist"] == "in-process" and broken["error"].endswith("ValueError: cannot register")
    assert env["components"]["loss"] == {"component": "cc.loss", "plugin": "baselines", "dist": "pllzoo-baselines",
                                         "version": "0.2.0"}


# ---------------------------------------------------------------------------------------------- --hp scope
@pytest.mark.parametrize("pair, parsed", [
    ("train.lr=0.05", {"train.lr": "0.05"}),
    ("selection.rho_end = 0.5", {"selection.rho_end": "0.5"}),
    ("proden:loss.eta=0.5", {"proden:loss.eta": "0.5"}),
    ("proden+selection=solar.classwise:selection.rho_end=0.5",
     {"proden+selection=solar.classwise:selection.rho_end": "0.5"}),
    ("proden + selection = solar.classwise : selection.rho_end=0.5",
     {"proden+selection=solar.classwise:selection.rho_end": "0.5"}),
    ("train.strong_view=a=b:c.d=e", {"train.strong_view": "a=b:c.d=e"}),
    ("proden+selection=solar.classwise:train.weak_view=x:y=z", {"proden+selection=solar.classwise:train.weak_view":
                                                                "x:y=z"}),
    ("lr=3", {"lr": "3"}),  # no dotted key: reported unknown by the routing
])
def test_parse_overrides(pair, parsed):
    assert bench.parse_overrides([pair]) == parsed


@pytest.mark.parametrize("pair", ["train.lr", "=5", " = 5"])
def test_parse_overrides_rejects_pairs_without_key_or_value(pair):
    with pytest.raises(PLLZooError, match=r"^bad --hp .*; write key=value") as err:
        bench.parse_overrides([pair])
    assert "\n" not in str(err.value)


def test_a_mixed_method_scope_reaches_only_that_method(registry):
    mixed, other = ("proden+selection=solar.classwise+estimator=solar.prior",
                    "cc+selection=solar.classwise+estimator=solar.prior")
    hp = bench.parse_overrides([f"{mixed}:selection.rho_end=0.5", "solar:selection.rho_end=0.7",
                                "selection.rho_start=0.1"])
    plans = bench.plan(registry, ["solar", mixed, other], "synthetic-lt", [1], DataOptions(subset=200), epochs=1,
                       device="cpu", hp=hp)
    rho = {p.method.name: p.config["hparams"]["selection"] for p in plans}
    assert rho["solar"]["rho_end"] == 0.7 and rho[mixed]["rho_end"] == 0.5
    assert rho[other]["rho_end"] == 0.8  # its default: untouched
    assert {r["rho_start"] for r in rho.values()} == {0.1}  # unscoped: every method that has the key


def test_a_scoped_trainer_setting_reaches_only_that_method(registry):
    """``--hp cc:train.lr=...`` is cc's alone, over an unscoped ``train.lr`` whatever their order; the others keep
    the unscoped value (a scoped train.* once reached every method)."""
    for order in (["cc:train.lr=0.3", "train.lr=0.02"], ["train.lr=0.02", "cc:train.lr=0.3"]):
        plans = bench.plan(registry, ["proden", "cc"], "synthetic-lt", [1], DataOptions(subset=200), epochs=1,
                           device="cpu", hp=bench.parse_overrides([*order, "proden:train.weight_decay=0.01"]))
        got = {p.method.name: (p.train.lr, p.train.weight_decay, p.config["train"]["lr"]) for p in plans}
        default_wd = plans[1].train.weight_decay
        assert got == {"proden": (0.02, 0.01, 0.02), "cc": (0.3, default_wd, 0.3)} and default_wd != 0.01


@pytest.mark.parametrize("pair, pattern", [
    ("cc+selection=solar.classwise:selection.rho_end=0.5",
     r"--hp cc\+selection=solar.classwise:selection.rho_end: method 'cc\+selection=solar.classwise' is not in "
     r"--methods; scope one of: proden, proden\+selection=solar.classwise$"),
    ("proden+selection=solar.classwise:loss.nope=1",
     r"unknown hyper-parameter 'proden\+selection=solar.classwise:loss.nope'; valid: .*selection.rho_end"),
])
def test_a_bad_scope_or_key_is_a_one_line_error(registry, pair, pattern):
    methods = [registry.method(m) for m in ("proden", "proden+selection=solar.classwise")]
    with pytest.raises(UnknownNameError, match=pattern) as err:
        bench._route(bench.parse_overrides([pair]), methods, registry)
    assert "\n" not in str(err.value)


def test_cli_unknown_scope_exits_2_with_one_line(registry, tmp_path):
    out = tmp_path / "out"
    res = CliRunner().invoke(cli, ["bench", "--methods", "proden", *TINY, "--out", str(out),
                                   "--hp", "proden+selection=solar.classwise:selection.rho_end=0.5"])
    assert res.exit_code == 2 and "Traceback" not in res.output and not out.exists()
    lines = [line for line in res.output.splitlines() if line.strip()]
    assert len(lines) == 1 and "is not in --methods" in lines[0], res.output


def test_every_hook_was_added_in_this_version_or_before():
    """A plugin that declares ``pllzoo>=X`` for a hook documented as ``versionadded:: X`` is not refused."""
    import importlib.metadata as md

    from packaging.version import Version

    from pllzoo import hookspecs

    added = {Version(v) for v in re.findall(r"versionadded:: ([0-9.]+)", Path(hookspecs.__file__).read_text())}
    assert added and max(added) <= Version(pllzoo.__version__), (sorted(added), pllzoo.__version__)
    assert md.version("pllzoo") == pllzoo.__version__  # the installed metadata says the same
