"""Runs of one bench do not reach each other: a component that changes the dataset in place (through
``run.candidates`` or ``run.data``) or torch's process-wide settings changes its own run only; the run after
it trains as it would alone (same records, bit for bit, on the CPU).  A change to the data inside a hook also
fails the run that made it (``pllzoo.hookcalls.RunHooks.inputs``); the copy guards the rest."""

from __future__ import annotations

import pytest
import torch

from pllzoo import Method, bench, hookimpl
from pllzoo.builtin import SoftCrossEntropy
from pllzoo.data.base import DataOptions
from pllzoo.jobs import RunsFailed
from pllzoo.plugins import make_plugin_manager
from pllzoo.registry import Registry
from pllzoo.results import read_jsonl


class Vandal(SoftCrossEntropy):
    """A loss that, once trained, damages what a careless plugin can reach: the candidate sets (through an
    alias kept in its setup), the training images and torch's default dtype and grad mode."""

    @hookimpl
    def pllzoo_setup_stage(self, run, state):
        self._alias = run.candidates  # an alias, not a copy

    @hookimpl
    def pllzoo_on_epoch_end(self, run, state):
        self._alias.fill_(True)
        run.data.candidates.fill_(True)
        run.data.x_train.mul_(0)
        torch.set_default_dtype(torch.float64)
        torch.set_grad_enabled(False)
        torch.backends.cuda.matmul.fp32_precision = "tf32"  # the API torch recommends (its legacy getter then
        # raises: an outside review found every run failing in the isolation's own check)


class VandalPlugin:
    @hookimpl
    def pllzoo_register_losses(self, register):
        register("isolation.vandal", Vandal)

    @hookimpl
    def pllzoo_register_methods(self, register):
        register(Method("isolation-vandal", loss="isolation.vandal"))


@pytest.fixture
def registry(request):
    request.addfinalizer(lambda threads=torch.get_num_threads(): torch.set_num_threads(threads))
    pm, infos = make_plugin_manager()
    pm.register(VandalPlugin(), name="isolation")
    return Registry.build(pm, infos)


def _plans(reg, methods):
    return bench.plan(reg, methods, "synthetic-lt", [1], DataOptions(subset=200), epochs=2, batch_size=64,
                      device="cpu")


def test_a_run_after_one_that_damages_data_and_torch_settings_trains_as_alone(registry, tmp_path):
    from pllzoo.isolation import torch_settings

    settings = torch_settings()
    alone = bench.execute(registry, _plans(registry, ["proden"]), tmp_path / "alone", threads=1)
    with pytest.raises(RunsFailed, match=r"pllzoo_on_epoch_end changed run.candidates, "
                       r"run.data.x_train in place") as failed:
        bench.execute(registry, _plans(registry, ["isolation-vandal", "proden"]), tmp_path / "after", threads=1)
    after = failed.value.rows
    assert list(after["status"]) == ["failed", "ok"]
    run = alone["run"][0]
    logs = [read_jsonl(out / "runs" / run / "log.jsonl") for out in (tmp_path / "alone", tmp_path / "after")]
    untimed = [[{k: v for k, v in r.items() if "time" not in k and not k.endswith("_s")} for r in log] for log in logs]
    assert untimed[0] == untimed[1] and len(untimed[0]) == 2  # every epoch's numbers, bit for bit
    assert torch.get_default_dtype() == torch.float32 and torch.is_grad_enabled() and torch_settings() == settings


def test_the_planned_data_is_untouched_by_a_run(registry, tmp_path):
    plans = _plans(registry, ["isolation-vandal"])
    before = (plans[0].data.candidates.clone(), plans[0].data.x_train.clone())
    with pytest.raises(RunsFailed):
        bench.execute(registry, plans, tmp_path, threads=1)
    assert torch.equal(plans[0].data.candidates, before[0]) and torch.equal(plans[0].data.x_train, before[1])
