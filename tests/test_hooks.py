"""Every hook spec is exercised here (``test_hook_<name>``), through the real trainer/registry."""

from __future__ import annotations

import pytest
import torch

from pllzoo import Component, Method, Stage, hookimpl
from pllzoo.builtin import SelectAll, SoftCrossEntropy, UniformTargets
from pllzoo.data.base import DatasetSpec
from pllzoo.plugins import make_plugin_manager
from pllzoo.registry import Registry
from pllzoo.run import TrainConfig
from pllzoo.trainer import Trainer

CFG = TrainConfig(model="linear", epochs=2, lr=0.1, weight_decay=0.0, batch_size=16)


def fit(data, extra: dict[str, Component] | None = None, cfg: TrainConfig = CFG, **kw):
    comps = {"label_update": UniformTargets(), "selection": SelectAll(), "loss": SoftCrossEntropy()}
    comps.update(extra or {})
    trainer = Trainer(data, comps, cfg, seed=1, device=torch.device("cpu"), **kw)
    return trainer, trainer.fit()


class Recorder(Component):
    """An estimator that records every lifecycle call it receives."""

    provides = frozenset({"counter"})

    def __init__(self):
        super().__init__()
        self.calls: list[tuple] = []

    @hookimpl
    def pllzoo_setup_stage(self, run, state):
        self.calls.append(("setup", run.stage.name, sorted(state)))
        state.counter = torch.zeros(())

    @hookimpl
    def pllzoo_on_epoch_start(self, epoch):
        self.calls.append(("start", epoch))

    @hookimpl
    def pllzoo_post_step(self, step, state):
        state.counter += 1
        assert step.targets is not None and step.mask is not None

    @hookimpl
    def pllzoo_on_epoch_end(self, run, epoch, state):
        probs = run.predict_train()
        assert probs.shape == (run.num_train, run.num_classes)
        torch.testing.assert_close(probs.sum(1), torch.ones(run.num_train))
        self.calls.append(("end", epoch, int(state.counter)))
        return {"counter": float(state.counter)}


# ---------------------------------------------------------------------------- discovery hooks
class _Plugin:
    @hookimpl
    def pllzoo_register_label_updates(self, register):
        register("t.uniform", type("U", (UniformTargets,), {}))

    @hookimpl
    def pllzoo_register_selections(self, register):
        register("t.all", type("S", (SelectAll,), {}))

    @hookimpl
    def pllzoo_register_losses(self, register):
        register("t.ce", type("L", (SoftCrossEntropy,), {}))

    @hookimpl
    def pllzoo_register_estimators(self, register):
        register("t.rec", Recorder)

    @hookimpl
    def pllzoo_register_predictors(self, register):
        register("t.flip", Flip)

    @hookimpl
    def pllzoo_register_methods(self, register):
        register(Method("t-method", loss="t.ce", label_update="t.uniform", selection="t.all", estimator="t.rec"))

    @hookimpl
    def pllzoo_register_datasets(self, register):
        register(DatasetSpec("t-data", load=lambda opts: None, description="test"))


class Flip(Component):
    @hookimpl
    def pllzoo_predict(self, logits):
        return -logits


@pytest.fixture
def plugin_registry():
    pm, infos = make_plugin_manager(load_entrypoints=False)
    pm.register(_Plugin(), name="t")
    return Registry.build(pm, infos)


@pytest.mark.parametrize(
    "slot,name",
    [("label_update", "t.uniform"), ("selection", "t.all"), ("loss", "t.ce"), ("estimator", "t.rec"), ("predict", "t.flip")],
)
def test_component_registration(plugin_registry, slot, name):
    cls = plugin_registry.component_class(slot, name)
    assert cls.name == name and cls.slot == slot
    assert plugin_registry.components[slot][name][1] == "t"


def test_hook_pllzoo_register_label_updates(plugin_registry):
    assert "t.uniform" in plugin_registry.components["label_update"]


def test_hook_pllzoo_register_selections(plugin_registry):
    assert "t.all" in plugin_registry.components["selection"]


def test_hook_pllzoo_register_losses(plugin_registry):
    assert "t.ce" in plugin_registry.components["loss"]


def test_hook_pllzoo_register_estimators(plugin_registry):
    assert "t.rec" in plugin_registry.components["estimator"]


def test_hook_pllzoo_register_predictors(plugin_registry):
    assert "t.flip" in plugin_registry.components["predict"]


def test_hook_pllzoo_register_methods(plugin_registry):
    m = plugin_registry.method("t-method+predict=t.flip")
    assert (m.name, m.estimator, m.predict) == ("t-method+predict=t.flip", "t.rec", "t.flip")


def test_hook_pllzoo_register_datasets(plugin_registry):
    assert plugin_registry.dataset("t-data").description == "test"


# ---------------------------------------------------------------------------- run hooks
def test_hook_pllzoo_setup_stage_and_epoch_hooks_order(tiny_data):
    rec = Recorder()
    _, records = fit(tiny_data, {"estimator": rec})
    steps_per_epoch = tiny_data.num_train // CFG.batch_size
    assert rec.calls == [
        ("setup", "train", []), ("start", 0), ("end", 0, steps_per_epoch), ("start", 1), ("end", 1, 2 * steps_per_epoch),
    ]
    assert [r["counter"] for r in records] == [steps_per_epoch, 2 * steps_per_epoch]


def test_hook_pllzoo_setup_stage(tiny_data):
    test_hook_pllzoo_setup_stage_and_epoch_hooks_order(tiny_data)


def test_hook_pllzoo_on_epoch_start(tiny_data):
    rec = Recorder()
    fit(tiny_data, {"estimator": rec})
    assert [c[1] for c in rec.calls if c[0] == "start"] == [0, 1]


def test_hook_pllzoo_on_epoch_end(tiny_data):
    rec = Recorder()
    _, records = fit(tiny_data, {"estimator": rec})
    assert all("counter" in r for r in records)


def test_hook_pllzoo_post_step(tiny_data):
    rec = Recorder()
    trainer, _ = fit(tiny_data, {"estimator": rec})
    assert int(trainer.state.counter) == 2 * (tiny_data.num_train // CFG.batch_size)


class TwoStages(Recorder):
    provides = frozenset({"counter", "kept", "dropped"})

    @hookimpl
    def pllzoo_stages(self, run):
        return [Stage("pre", epochs=1), Stage("train", carry=("kept",))]

    @hookimpl
    def pllzoo_setup_stage(self, run, state):
        self.calls.append(("setup", run.stage.name, sorted(state)))
        state.counter = torch.zeros(())
        if "kept" not in state:
            state.kept = torch.tensor(7.0)
            state.dropped = torch.tensor(1.0)


def test_hook_pllzoo_stages(tiny_data):
    rec = TwoStages()
    _, records = fit(tiny_data, {"estimator": rec})
    setups = [c for c in rec.calls if c[0] == "setup"]
    # the second stage sees only the carried key: model, optimizer and other state are re-initialised
    assert setups == [("setup", "pre", []), ("setup", "train", ["kept"])]
    assert [(r["stage"], r["epoch"], r["final_stage"]) for r in records] == [
        ("pre", 1, False), ("train", 1, True), ("train", 2, True),
    ]


class WrongTargets(Component):
    @hookimpl
    def pllzoo_label_update(self, step):
        # valid targets (one-hot inside the candidate set) that avoid the true label wherever another
        # candidate exists: the largest-index false candidate, else the true label
        false = step.batch.candidates.clone()
        false[torch.arange(step.batch.size), step.batch.y_true] = 0
        pick = torch.where(false.sum(1) > 0, (false * torch.arange(1, false.shape[1] + 1)).argmax(1), step.batch.y_true)
        return torch.nn.functional.one_hot(pick, false.shape[1]).float()


def test_hook_pllzoo_label_update(tiny_data):
    cfg = TrainConfig(model="linear", epochs=10, lr=0.1, weight_decay=0.0, batch_size=16)
    _, right = fit(tiny_data, cfg=cfg)
    _, wrong = fit(tiny_data, {"label_update": WrongTargets()}, cfg=cfg)
    # trained towards false candidates: far fewer test samples are predicted right
    assert wrong[-1]["acc_all"] < right[-1]["acc_all"] - 30, (wrong[-1]["acc_all"], right[-1]["acc_all"])


class NoneSelected(Component):
    @hookimpl
    def pllzoo_select(self, step):
        return torch.zeros(step.batch.size, dtype=torch.bool)


def test_hook_pllzoo_select(tiny_data):
    trainer, records = fit(tiny_data, {"selection": NoneSelected()})
    # with nothing selected the masked mean is 0: no gradient, so nothing is learnt
    assert all(r["loss"] == 0.0 for r in records)


class ZeroLoss(Component):
    @hookimpl
    def pllzoo_loss(self, step):
        return step.logits.sum() * 0.0


def test_hook_pllzoo_loss(tiny_data):
    _, records = fit(tiny_data, {"loss": ZeroLoss()})
    assert [r["loss"] for r in records] == [0.0, 0.0]


def test_hook_pllzoo_predict(tiny_data):
    _, plain = fit(tiny_data)
    _, flipped = fit(tiny_data, {"predict": Flip()})
    # predicting argmin instead of argmax: a trained model gets fewer right
    assert flipped[-1]["acc_all"] < plain[-1]["acc_all"]


class Head(Component):
    """Offers a trainable head on the encoder features (as PiCO's projection head)."""

    views = frozenset({"features"})

    @hookimpl
    def pllzoo_modules(self, run):
        self.head = torch.nn.Linear(run.model.feature_dim, 2)
        self.frozen = torch.nn.Linear(2, 2).requires_grad_(False)
        self.initial = (self.head.weight.detach().clone(), self.frozen.weight.detach().clone())
        return {"head": self.head, "frozen": self.frozen}

    @hookimpl
    def pllzoo_loss(self, step):
        assert step.features is not None and step.features.shape[0] == step.batch.size
        return SoftCrossEntropy().pllzoo_loss(step, None) + 1e-3 * self.head(step.features).pow(2).mean()


def test_hook_pllzoo_modules(tiny_data, tmp_path):
    comp = Head()
    trainer = Trainer(tiny_data, {"label_update": UniformTargets(), "selection": SelectAll(), "loss": comp}, CFG,
                      seed=1, device=torch.device("cpu"), run_dir=tmp_path)
    torch.manual_seed(0)
    trainer.fit()
    # trained with the network (same optimizer), frozen one untouched, both in the checkpoint
    assert set(trainer.modules) == {"loss.head", "loss.frozen"}
    assert not torch.equal(comp.head.weight, comp.initial[0]) and torch.equal(comp.frozen.weight, comp.initial[1])
    opt_params = {id(p) for g in trainer.optimizer.param_groups for p in g["params"]}
    assert id(comp.head.weight) in opt_params and id(comp.frozen.weight) not in opt_params
    ckpt = torch.load(tmp_path / "checkpoint.pt", weights_only=False)
    assert torch.equal(ckpt["modules"]["loss.head"]["weight"], comp.head.weight.detach())


class OffsetProbe(Component):
    """Answers ``pllzoo_logit_offset`` with a fixed [K] offset and records what the label update then reads."""

    views = frozenset({"strong", "features"})

    def __init__(self, offset):
        super().__init__()
        self.offset, self.seen = offset, []

    @hookimpl
    def pllzoo_logit_offset(self, step):
        assert step.targets is None  # before the label update
        return self.offset

    @hookimpl
    def pllzoo_label_update(self, step):
        self.seen.append((step.label_probs, step.label_probs_of(step.logits_strong), step.probs, step.logits,
                          step.logits_strong, step.features_strong))
        return UniformTargets().pllzoo_label_update(step)


def test_hook_pllzoo_logit_offset(tiny_data):
    k = tiny_data.num_classes
    offset = torch.log(torch.linspace(1, 2, k) / torch.linspace(1, 2, k).sum())
    probe = OffsetProbe(offset)
    fit(tiny_data, {"label_update": probe})
    for label_probs, label_probs_strong, probs, logits, logits_strong, feats_strong in probe.seen:
        # hand-computed: softmax(z − offset) for both views; step.probs itself stays the plain softmax
        torch.testing.assert_close(label_probs, torch.softmax(logits.detach() - offset, 1))
        torch.testing.assert_close(label_probs_strong, torch.softmax(logits_strong.detach() - offset, 1))
        torch.testing.assert_close(probs, torch.softmax(logits.detach(), 1))
        assert feats_strong is not None and feats_strong.shape[0] == logits.shape[0]


def test_logit_offset_absent_leaves_label_probs_as_probs(tiny_data):
    probe = OffsetProbe(None)
    fit(tiny_data, {"label_update": probe})
    assert all(lp is p for lp, _, p, *_ in probe.seen)


def test_logit_offset_of_a_wrong_shape_is_one_line(tiny_data):
    from pllzoo.checks import ComponentError

    with pytest.raises(ComponentError, match=r"pllzoo_logit_offset.*shape \[3\]"):
        fit(tiny_data, {"label_update": OffsetProbe(torch.zeros(3))})


class SecondOffset(Component):
    @hookimpl
    def pllzoo_logit_offset(self, step):
        return None

    @hookimpl
    def pllzoo_select(self, step):
        return SelectAll().pllzoo_select(step)


def test_two_logit_offsets_are_refused_before_training(tiny_data):
    from pllzoo.errors import PLLZooError

    with pytest.raises(PLLZooError, match="both offset the logits.*pllzoo_logit_offset"):
        fit(tiny_data, {"label_update": OffsetProbe(None), "selection": SecondOffset()})


class FeaturePredict(Component):
    """A predict component that asks for the test inputs' features and predicts with a fixed second head."""

    views = frozenset({"features"})
    calls: list = []

    @hookimpl
    def pllzoo_predict(self, logits, features):
        self.calls.append((logits.shape, None if features is None else features.shape))
        return logits


def test_hook_pllzoo_predict_gets_features_when_asked(tiny_data):
    FeaturePredict.calls = []
    fit(tiny_data, {"predict": FeaturePredict()})
    (m, k), (m2, f) = FeaturePredict.calls[-1]
    assert m == m2 == tiny_data.y_test.numel() and k == tiny_data.num_classes and f > 0
    FeaturePredict.calls = []
    fit(tiny_data, {"predict": NotAsking()})  # without views={"features"}: None, no feature pass
    assert FeaturePredict.calls[-1][1] is None


class NotAsking(FeaturePredict):
    views = frozenset()


def test_run_modules_name_every_offered_module(tiny_data, tmp_path):
    comp = Head()
    trainer = Trainer(tiny_data, {"label_update": UniformTargets(), "selection": SelectAll(), "loss": comp}, CFG,
                      seed=1, device=torch.device("cpu"), run_dir=tmp_path)
    trainer.fit()
    assert trainer.run.modules == {"loss.head": comp.head, "loss.frozen": comp.frozen}
