"""Composition rules (docs/hooks.md, "Who answers"): role hooks by their slot's component only, one stage
planner per run, lifecycle hooks broadcast with epoch-end logs merged without collisions."""

from __future__ import annotations

import sys

import pytest
import torch

from pllzoo import Component, Stage, hookimpl
from pllzoo.builtin import SelectAll, SoftCrossEntropy, UniformTargets
from pllzoo.components import check_compatible, stage_planner
from pllzoo.errors import PLLZooError
from pllzoo.run import TrainConfig
from pllzoo.trainer import Trainer

CFG = TrainConfig(model="linear", epochs=2, lr=0.1, weight_decay=0.0, batch_size=16)


def trainer_for(data, extra: dict[str, Component] | None = None, **kw) -> Trainer:
    comps = {"label_update": UniformTargets(), "selection": SelectAll(), "loss": SoftCrossEntropy()}
    comps.update(extra or {})
    return Trainer(data, comps, CFG, seed=1, device=torch.device("cpu"), **kw)


# ---------------------------------------------------------------------------- role hooks: the slot's component only
class TargetsThatPredict(UniformTargets):
    """A label update that also implements the predict and selection roles (not its slots)."""

    def __init__(self):
        super().__init__()
        self.calls: list[str] = []

    @hookimpl
    def pllzoo_predict(self, logits):
        self.calls.append("predict")
        return -logits

    @hookimpl
    def pllzoo_select(self, step):
        self.calls.append("select")
        return torch.zeros(step.batch.size, dtype=torch.bool)


class Flip(Component):
    @hookimpl
    def pllzoo_predict(self, logits):
        return -logits


def test_a_role_hook_of_another_slot_is_never_called(tiny_data):
    comp = TargetsThatPredict()
    trainer = trainer_for(tiny_data, {"label_update": comp})
    records = trainer.fit()
    plain = trainer_for(tiny_data).fit()
    assert comp.calls == []  # neither predict (the slot is empty) nor select (SelectAll's slot)
    assert [r["acc_all"] for r in records] == [r["acc_all"] for r in plain]
    assert records[-1]["loss"] > 0  # SelectAll's mask was used, not the all-False one


def test_the_predict_slot_answers_even_when_another_component_implements_predict(tiny_data):
    comp = TargetsThatPredict()
    flipped = trainer_for(tiny_data, {"label_update": comp, "predict": Flip()}).fit()
    plain = trainer_for(tiny_data).fit()
    assert comp.calls == [] and flipped[-1]["acc_all"] < plain[-1]["acc_all"]


class _FakeStep:
    class batch:
        size = 4


class SelectInLossSlot(SoftCrossEntropy):
    """A loss that also implements pllzoo_select; registered after the selection slot, pluggy would ask it first."""

    @hookimpl
    def pllzoo_select(self, step):
        return torch.zeros(step.batch.size, dtype=torch.bool)


def test_a_later_registered_component_does_not_take_over_a_role(tiny_data):
    trainer = trainer_for(tiny_data, {"loss": SelectInLossSlot()})
    pluggys = trainer.hooks.pllzoo_select(step=_FakeStep(), state=None)  # pluggy alone asks the loss first ...
    assert pluggys is not None and not pluggys.any()
    records = trainer.fit()
    assert all(r["loss"] > 0 for r in records)  # ... the trainer asks the selection slot only


class ConstantSelection(Component):
    MASK = torch.ones(4, dtype=torch.bool)

    @hookimpl
    def pllzoo_select(self, step):
        return self.MASK


def _python_calls(fn) -> list[tuple[str, str]]:
    """The Python frames ``fn()`` enters, as (module file, qualified name): a count that does not depend on the
    machine's speed, unlike a timing."""
    entered: list[tuple[str, str]] = []

    def profile(frame, event, arg):
        if event == "call":
            entered.append((frame.f_code.co_filename, frame.f_code.co_name))

    sys.setprofile(profile)
    try:
        fn()
    finally:
        sys.setprofile(None)
    return entered[1:]  # not fn itself


def test_role_calls_go_straight_to_the_slot_without_pluggys_dispatch(tiny_data):
    """The per-step dispatch calls the slot's implementation directly: no pluggy frame, fewer frames than a
    pluggy hook call (a count, not a timing: tests assert no wall-clock time)."""
    trainer = trainer_for(tiny_data, {"selection": ConstantSelection()})
    step = object()
    ours = _python_calls(lambda: trainer.calls.role("selection", step=step, state=None))
    pluggys = _python_calls(lambda: trainer.hooks.pllzoo_select(step=step, state=None))
    assert [name for _, name in ours if name == "pllzoo_select"] == ["pllzoo_select"]
    assert not [f for f, _ in ours if "pluggy" in f], ours
    assert any("pluggy" in f for f, _ in pluggys)  # the comparison is with pluggy's own dispatch
    assert len(ours) < len(pluggys), (ours, pluggys)


# ---------------------------------------------------------------------------- stage planning: one planner
class PlansTwo(Component):
    @hookimpl
    def pllzoo_stages(self):
        return [Stage("a", epochs=1), Stage("b")]

    @hookimpl
    def pllzoo_on_epoch_end(self):
        return None


class AlsoPlans(SoftCrossEntropy):
    @hookimpl
    def pllzoo_stages(self):
        return [Stage("other")]


def test_one_stage_planner_in_any_slot_plans_the_run(tiny_data):
    records = trainer_for(tiny_data, {"estimator": PlansTwo()}).fit()
    assert [r["stage"] for r in records] == ["a", "b", "b"]
    records = trainer_for(tiny_data, {"loss": AlsoPlans()}).fit()
    assert [r["stage"] for r in records] == ["other", "other"]


def test_two_stage_planners_are_refused_before_training(tiny_data):
    with pytest.raises(PLLZooError) as err:
        trainer_for(tiny_data, {"loss": AlsoPlans(), "estimator": PlansTwo()}, record_base={"method": "mix"})
    msg = str(err.value)
    assert "\n" not in msg and "'mix'" in msg and "'AlsoPlans'" in msg and "'PlansTwo'" in msg
    assert "both plan training stages" in msg
    assert stage_planner("x", {"loss": AlsoPlans(), "selection": SelectAll()}) == "loss"
    assert stage_planner("x", {"loss": SoftCrossEntropy()}) is None


def test_valen_with_solar_prior_is_refused_naming_both(registry):
    method = registry.method("valen+estimator=solar.prior")
    with pytest.raises(PLLZooError) as err:
        registry.build_components(method, {}, dataset=("tiny", "tabular"))
    msg = str(err.value)
    assert "\n" not in msg and "valen.loss" in msg and "solar.prior" in msg and "stages" in msg


@pytest.mark.parametrize("method", ["valen", "solar", "proden+selection=solar.classwise+estimator=solar.prior"])
def test_recipes_with_one_planner_are_accepted(registry, method):
    comps = registry.build_components(registry.method(method), {}, dataset=("tiny", "tabular"))
    check_compatible(method, comps)
    assert stage_planner(method, comps) is not None


# ---------------------------------------------------------------------------- lifecycle hooks: everyone, merged
class LogsA(Component):
    @hookimpl
    def pllzoo_on_epoch_end(self):
        return {"shared": 1.0, "a": 2.0}


class LossLogsA(SoftCrossEntropy):
    @hookimpl
    def pllzoo_on_epoch_end(self):
        return {"shared": 3.0}


def test_epoch_end_logs_of_several_components_are_merged(tiny_data):
    class LossLogsB(SoftCrossEntropy):
        @hookimpl
        def pllzoo_on_epoch_end(self):
            return {"b": 5.0}

    records = trainer_for(tiny_data, {"loss": LossLogsB(), "estimator": LogsA()}).fit()
    assert (records[-1]["a"], records[-1]["b"], records[-1]["shared"]) == (2.0, 5.0, 1.0)


def test_epoch_end_log_collision_is_refused_naming_both(tiny_data):
    with pytest.raises(PLLZooError) as err:
        trainer_for(tiny_data, {"loss": LossLogsA(), "estimator": LogsA()}).fit()
    msg = str(err.value)
    assert "\n" not in msg and "'LossLogsA'" in msg and "'LogsA'" in msg and "'shared'" in msg


class Wrapper(UniformTargets):
    @hookimpl(wrapper=True)
    def pllzoo_post_step(self):
        return (yield)


def test_hook_wrappers_are_refused(tiny_data):
    with pytest.raises(PLLZooError, match="'Wrapper'.*pllzoo_post_step is a hook wrapper"):
        trainer_for(tiny_data, {"label_update": Wrapper()})
