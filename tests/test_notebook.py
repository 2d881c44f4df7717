"""Benches called in-process (a notebook, a script: ``pllzoo.cli.cli([...], standalone_mode=False)``, README)
leave the caller's process as they found it, whatever a component did during its run, and Ctrl-C stops the
caller's code as it does anywhere else there (an outside review of a notebook user's session)."""

from __future__ import annotations

import os
import random
import signal
import types
import warnings

import pytest
import torch
from click.testing import CliRunner

import pllzoo
import pllzoo.registry
from pllzoo.cli import cli

TINY = ["--dataset", "synthetic-lt", "--seeds", "1", "--epochs", "2", "--subset", "200", "--batch-size", "64",
        "--threads", "1"]
MARK = "pllzoo-notebook-test"


class Meddler(pllzoo.Component):
    """Selects every row, and changes the process on the way: a warning filter, Python's random stream,
    torch._dynamo's settings (as ``train.compile=reduce-overhead`` does)."""

    @pllzoo.hookimpl
    def pllzoo_select(self, step):
        import torch._dynamo.config as dynamo

        warnings.filterwarnings("ignore", message=MARK)
        random.random()
        dynamo.automatic_dynamic_shapes = False
        dynamo.recompile_limit = 99
        return torch.ones(step.batch.size, dtype=torch.bool)


class CtrlC(pllzoo.Component):
    """Selects every row; its first call in the second epoch presses Ctrl-C (the bench's timed steps, before
    the run, are first-epoch steps)."""

    pressed = False

    @pllzoo.hookimpl
    def pllzoo_select(self, step):
        if step.epoch == 1 and not CtrlC.pressed:
            CtrlC.pressed = True
            os.kill(os.getpid(), signal.SIGINT)
        return torch.ones(step.batch.size, dtype=torch.bool)


@pllzoo.hookimpl
def pllzoo_register_selections(register):
    register("nb.meddler", Meddler)
    register("nb.ctrlc", CtrlC)


@pytest.fixture
def notebook_plugin():
    plugin = types.ModuleType("nb_plugin")
    plugin.pllzoo_register_selections = pllzoo_register_selections
    pllzoo.registry.reset_registry()
    pllzoo.register_plugin(plugin, name="nb")
    yield
    pllzoo.unregister_plugin("nb")
    pllzoo.registry.reset_registry()


def test_what_a_component_changed_is_put_back_for_the_caller(notebook_plugin, tmp_path):
    import torch._dynamo.config as dynamo

    random.seed(0)
    filters, dynamic, limit = list(warnings.filters), dynamo.automatic_dynamic_shapes, dynamo.recompile_limit
    cli(["bench", "--methods", "proden+selection=nb.meddler", *TINY, "--out", str(tmp_path)], standalone_mode=False)
    assert random.random() == random.Random(0).random()  # the run drew from it, the caller's stream goes on
    assert warnings.filters == filters and not any(MARK in str(f[1]) for f in warnings.filters)
    assert (dynamo.automatic_dynamic_shapes, dynamo.recompile_limit) == (dynamic, limit)


def test_ctrl_c_in_process_raises_keyboard_interrupt_after_the_clean_stop(notebook_plugin, tmp_path):
    """It returned 130, and a loop of benches went on with the next one.  The stop itself is the clean one: the
    run keeps a checkpoint and --resume continues it.  As a program (standalone) the status stays 130."""
    if signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
        pytest.skip("SIGINT is handled by someone else here")
    args = ["bench", "--methods", "proden+selection=nb.ctrlc", *TINY, "--epochs", "3", "--out", str(tmp_path / "a")]
    CtrlC.pressed = False
    with pytest.raises(KeyboardInterrupt, match="pllzoo stopped by Ctrl-C"):
        cli(args, standalone_mode=False)
    (run,) = (p for p in (tmp_path / "a" / "runs").iterdir() if p.is_dir())
    assert (run / "checkpoint.pt").is_file() and not (run / "done").exists()
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    CtrlC.pressed = False
    res = CliRunner().invoke(cli, [*args[:-1], str(tmp_path / "b")])
    assert res.exit_code == 130, res.output
    assert cli(["methods"], standalone_mode=False) is None  # other statuses as click returns them
    CtrlC.pressed = False  # pressed in the last epoch: the bench finishes it, then the caller is interrupted
    with pytest.raises(KeyboardInterrupt, match="after the bench's last epoch"):
        cli([*args[:-3], "2", "--out", str(tmp_path / "c")], standalone_mode=False)
    assert (next((tmp_path / "c" / "runs").glob("*/done"))).is_file()
    assert cli(["methods"], standalone_mode=False) is None  # that press is not the next command's
