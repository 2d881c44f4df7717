"""What a plugin hands back outside the role hooks is checked too, each bad answer one line naming its source:
epoch-end logs and step logs (never a field of the record itself), extra modules, stage plans, a backbone's
factory and logits, a dataset loader's data, and ``sys.exit()`` inside a hook (a failed run, not a silent end)."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from pllzoo import Component, Method, hookimpl
from pllzoo.builtin import SoftCrossEntropy
from pllzoo.checks import ComponentError
from pllzoo.data.base import DataOptions, DatasetSpec
from pllzoo.errors import PLLZooError, UnknownNameError
from pllzoo.hparams import hp
from pllzoo.models import build_model
from pllzoo.pllnet import PLLNet
from pllzoo.planning import load
from pllzoo.plugins import make_plugin_manager
from pllzoo.registry import Registry
from pllzoo.run import Stage

from test_output_checks import trainer_for


class EpochEnd(Component):
    def __init__(self, answer=None, **kw):
        super().__init__(**kw)
        self.answer = answer

    @hookimpl
    def pllzoo_on_epoch_end(self, run, state):
        return self.answer


@pytest.mark.parametrize("key", ["seed", "method", "epoch", "final_stage", "acc_all", "status", "error", "run",
                                 "setting"])
def test_epoch_end_logs_cannot_relabel_the_record(tiny_data, key):
    with pytest.raises(PLLZooError, match=rf"estimator component 'EpochEnd' .* logs '{key}', a field of the record"):
        trainer_for(tiny_data, {"estimator": EpochEnd({key: 1.0})}, record_base={"method": "m"}).fit()


@pytest.mark.parametrize("answer, why", [
    ("hello", "returned str, not a dict"),
    ({"v": {"a": 1}}, "logged 'v' holding a dict"),
    ({"v": [1.0, object()]}, "logged 'v' holding a object"),
    ({1: 2.0}, "logged the key 1, not a str"),
])
def test_bad_epoch_end_answers_are_one_line(tiny_data, answer, why):
    with pytest.raises(ComponentError, match=why) as err:
        trainer_for(tiny_data, {"estimator": EpochEnd(answer)}).fit()
    assert "pllzoo_on_epoch_end" in str(err.value) and "\n" not in str(err.value)


def test_epoch_end_values_are_logged_as_json(tiny_data):
    """Tensors and numpy values are read; None, strings and (nested) lists of them are kept as they are."""
    import numpy as np

    answer = {"t": torch.tensor(0.5), "v": torch.tensor([1.0, 2.0]), "n": None, "l": (1, 2.5), "gaps": [1.0, None],
              "phase": "warmup", "hist": [[1, 2], [3, 4]], "i": np.int64(3), "a": np.array([0.5, 1.5]),
              "nan": float("nan"), "inf": [1.0, float("inf")]}
    rec = trainer_for(tiny_data, {"estimator": EpochEnd(answer)}).fit()[-1]
    assert {k: rec[k] for k in answer} == {"t": 0.5, "v": [1.0, 2.0], "n": None, "l": [1, 2.5], "gaps": [1.0, None],
                                           "phase": "warmup", "hist": [[1, 2], [3, 4]], "i": 3, "a": [0.5, 1.5],
                                           "nan": None, "inf": [1.0, None]}  # JSON has no NaN: null
    assert isinstance(rec["i"], int)


class StepLogs(Component):
    def __init__(self, key="x", value=1.0, **kw):
        super().__init__(**kw)
        self.key, self.value = key, value

    @hookimpl
    def pllzoo_post_step(self, step, state):
        step.logs[self.key] = self.value


def test_step_logs_cannot_relabel_the_record(tiny_data):
    with pytest.raises(PLLZooError, match=r"a component of 'm' \(step.logs\) logs 'seed', a field of the record"):
        trainer_for(tiny_data, {"estimator": StepLogs("seed", 5.0)}, record_base={"method": "m"}).fit()


def test_step_logs_of_one_number_are_averaged(tiny_data):
    import numpy as np

    for value in (np.array(0.5), [0.5], np.float32(0.5), torch.tensor([0.5])):
        rec = trainer_for(tiny_data, {"estimator": StepLogs("x", value)}).fit()[-1]
        assert rec["x"] == 0.5


@pytest.mark.parametrize("value, why", [(torch.ones(3), "'x' = Tensor \\[3\\]"), ("a", "'x' = str")])
def test_step_logs_are_scalars(tiny_data, value, why):
    with pytest.raises(PLLZooError, match=rf"logged {why} in step.logs; step logs are scalars"):
        trainer_for(tiny_data, {"estimator": StepLogs("x", value)}).fit()


class LaterStepLogs(Component):
    """A number on the epoch's first step (the checked one), then ``value`` (an outside review)."""

    def __init__(self, value, **kw):
        super().__init__(**kw)
        self.value = value

    @hookimpl
    def pllzoo_post_step(self, step, state):
        step.logs["x"] = 1.0 if bool((step.batch.index == step.batch.index).all()) and not getattr(self, "seen", 0) \
            else self.value
        self.seen = 1


@pytest.mark.parametrize("value, why", [(torch.ones(3), "'x' = Tensor \\[3\\]"), ("a", "'x' = str"),
                                        ([1.0, object()], "'x' = list")])
def test_a_later_steps_logs_are_scalars_too(tiny_data, value, why):
    """Only the epoch's first step is checked in full; a later step's log is read for its shape only (no device
    read), and one that is not a number is the same line, not Python's error from the epoch's sum."""
    with pytest.raises(PLLZooError, match=rf"logged {why} in step.logs; step logs are scalars"):
        trainer_for(tiny_data, {"estimator": LaterStepLogs(value)}).fit()


class Modules(Component):
    def __init__(self, kind, **kw):
        super().__init__(**kw)
        self.kind = kind

    @hookimpl
    def pllzoo_modules(self, run):
        if self.kind == "list":
            return [torch.nn.Linear(2, 2)]
        if self.kind == "tensor":
            return {"w": torch.zeros(2)}
        return {"head": run.model.head}


@pytest.mark.parametrize("kind, why", [
    ("list", "must return a dict of names to torch.nn.Module, got list"),
    ("tensor", "got dict with other values"),
    ("shared", "module 'head' shares parameters with the network"),
])
def test_bad_modules_are_one_line(tiny_data, kind, why):
    with pytest.raises(PLLZooError, match=why) as err:
        trainer_for(tiny_data, {"estimator": Modules(kind)}).fit()
    assert "estimator component 'Modules'" in str(err.value)


class Plans(Component):
    def __init__(self, plan, **kw):
        super().__init__(**kw)
        self.plan = plan

    @hookimpl
    def pllzoo_stages(self, run):
        return self.plan


@pytest.mark.parametrize("plan, why", [
    (["train"], "planned a str \\('train'\\), not a pllzoo.Stage"),
    (Stage(), "returned a Stage, not a list"),
    ([Stage("a", epochs=-2)], "planned stage 'a' with epochs=-2"),
    ([Stage("a", epochs=1.5)], "epochs=1.5; epochs is None or an int ≥ 0"),
    # an outside review: a final stage of 0 epochs finished a run that no report could read (its record ends in
    # another stage: the method vanished from the table, exit 0); all stages at 0 gave an IndexError
    ([Stage("a", epochs=1), Stage("b", epochs=0)], "planned its final stage 'b' with 0 epochs; a run ends with"),
    ([Stage("a", epochs=0)], "planned its final stage 'a' with 0 epochs"),
    # an outside review: a key no component provides was carried as nothing, silently; a str is not a tuple
    ([Stage("a", epochs=1), Stage("b", carry=("prior",))], "planned stage 'b' carrying 'prior', which no component "
                                                          r"of the recipe provides \(its state keys: none\)"),
    ([Stage("a", epochs=1), Stage("b", carry="prior")], "planned stage 'b' with carry='prior'; carry is a tuple of "
                                                         "state keys, e.g. \\('prior',\\)"),
])
def test_bad_stage_plans_are_one_line(tiny_data, plan, why):
    with pytest.raises(ComponentError, match=why) as err:
        trainer_for(tiny_data, {"estimator": Plans(plan)}).fit()
    assert str(err.value).startswith("estimator component 'Plans'")


class LeavesTorchChanged(Component):
    """Changes one of torch's process-wide settings in a hook and leaves it so."""

    def __init__(self, how, hook="setup", **kw):
        super().__init__(**kw)
        self.how, self.hook = how, hook

    def _change(self):
        if self.how == "grad":
            torch.set_grad_enabled(False)
        elif self.how == "dtype":
            torch.set_default_dtype(torch.float64)
        elif self.how == "with-block":
            torch.device("meta").__enter__()  # a device's with-block entered and never left
        else:
            torch.set_default_device("meta")

    @hookimpl
    def pllzoo_setup_stage(self, run, state):
        if self.hook == "setup":
            self._change()

    @hookimpl
    def pllzoo_select(self, step, state):
        if self.hook == "select":
            self._change()
        return None


@pytest.mark.parametrize("how, hook, what", [
    ("grad", "setup", r"grad mode \(off; torch.set_grad_enabled\)"),
    ("dtype", "select", r"default dtype \(torch.float64; torch.set_default_dtype\)"),
    ("device", "setup", r"default device or a function mode \(torch.set_default_device\)"),
    ("with-block", "select", r"default device or a function mode \(torch.set_default_device\)"),
])
def test_a_hook_that_leaves_torch_changed_is_named_and_undone(tiny_data, how, hook, what):
    """An outside review: set_grad_enabled(False) in a setup hook failed the run blaming the loss ('loss
    without grad'); set_default_device('meta') failed this run and every later one, and the report crashed."""
    with pytest.raises(ComponentError, match=rf"^selection component 'LeavesTorchChanged' .*: pllzoo_\w+ left "
                                             rf"torch's {what} changed for everything after it"):
        trainer_for(tiny_data, {"selection": LeavesTorchChanged(how, hook)}).fit()
    assert torch.is_grad_enabled() and torch.get_default_dtype() == torch.float32
    assert torch.get_default_device() == torch.device("cpu") and torch._C._len_torch_function_stack() == 0


class NotesInScratch(Component):
    """A label update that shares a tensor of its own with later hooks through ``step.scratch``."""

    provides = frozenset({"note"})

    @hookimpl
    def pllzoo_label_update(self, step):
        step.scratch["note"] = step.probs.clone()
        return step.batch.candidates.float() / step.batch.candidates.sum(1, keepdim=True)


class ClobbersScratch(Component):
    provides = frozenset({"mine"})  # its own key (an undeclared one is refused: test_undeclared_keys_are_refused)

    def __init__(self, how, **kw):
        super().__init__(**kw)
        self.how = how

    @hookimpl
    def pllzoo_post_step(self, step, state):
        if self.how == "assign":
            step.scratch["note"] = torch.zeros_like(step.scratch["note"])
        elif self.how == "in place":
            step.scratch["note"].zero_()
        elif self.how == "delete":
            step.scratch.pop("note")
        elif self.how == "popitem":
            step.scratch.popitem()
        elif self.how == "merge":
            step.scratch |= {"note": torch.zeros(1)}
        elif self.how == "rebind":
            step.scratch = {"note": torch.zeros(1)}
        else:  # a key of its own: allowed
            step.scratch["mine"] = torch.zeros(1)

    @hookimpl
    def pllzoo_select(self, step, state):
        return torch.ones(step.batch.size, dtype=torch.bool)


@pytest.mark.parametrize("how, what", [
    ("assign", "it assigns step.scratch.note, which label_update component 'NotesInScratch'"),
    ("in place", "it changes step.scratch.note in place, which label_update component 'NotesInScratch'"),
    ("delete", "it deletes step.scratch.note, which label_update component 'NotesInScratch'"),
    # the ways round the guard a second review found: dict's own methods, and a new dict in its place
    ("popitem", "it deletes step.scratch.note, which label_update component 'NotesInScratch'"),
    ("merge", "it assigns step.scratch.note, which label_update component 'NotesInScratch'"),
    ("rebind", "it replaced step.scratch, which other components' keys live in"),
    ("own key", None),
])
def test_scratch_keys_are_guarded_as_state_keys(tiny_data, how, what):
    """docs/hooks.md: a key another component provides, in state or in step.scratch, is its own.  An outside
    review zeroed VALEN's ``valen_dirichlet`` from a selection's post-step: nothing caught it, and a later check
    blamed VALEN."""
    trainer = trainer_for(tiny_data, {"label_update": NotesInScratch(), "selection": ClobbersScratch(how)})
    if what is None:
        trainer.fit()
        return
    with pytest.raises(ComponentError, match=rf"^selection component 'ClobbersScratch' .*pllzoo_post_step.*{what}"):
        trainer.fit()


class CountsUndeclared(Component):
    """A selection that keeps a counter in the state without declaring it (an outside review: a label update
    writing a key of the same name overwrote it, and the run went on; the logged count was 1, not 600)."""

    def __init__(self, where="state", **kw):
        super().__init__(**kw)
        self.where = where

    @hookimpl
    def pllzoo_select(self, step, state):
        if self.where == "state":
            state.sel_count = torch.zeros(())
        else:
            step.scratch["sel_count"] = torch.zeros(())
        return torch.ones(step.batch.size, dtype=torch.bool)


@pytest.mark.parametrize("where, key", [("state", "state.sel_count"), ("scratch", "step.scratch.sel_count")])
def test_undeclared_keys_are_refused(tiny_data, where, key):
    trainer = trainer_for(tiny_data, {"selection": CountsUndeclared(where)})
    with pytest.raises(ComponentError, match=rf"^selection component 'CountsUndeclared' .*pllzoo_select.*it assigns "
                                             rf"{key}, which no component of the recipe provides; declare 'sel_count' "
                                             r"in its provides"):
        trainer.fit()


class Exits(Component):
    @hookimpl
    def pllzoo_loss(self, step, state):
        raise SystemExit(3)


def test_sys_exit_in_a_hook_fails_the_run(tiny_data):
    with pytest.raises(ComponentError, match="loss component 'Exits' .* failed in pllzoo_loss: SystemExit: 3"):
        trainer_for(tiny_data, {"loss": Exits()}).fit()


def _registry(**plugin_hooks) -> Registry:
    """The built-ins plus one in-process plugin ``p0`` made of ``plugin_hooks`` (hook name → function)."""
    plugin = type("P", (), {name: staticmethod(hookimpl(fn)) for name, fn in plugin_hooks.items()})
    pm, infos = make_plugin_manager(load_entrypoints=False)
    pm.register(plugin, name="p0")
    return Registry.build(pm, infos)


def _models(factory):
    return _registry(pllzoo_register_models=lambda register: register("m", factory))


def test_a_failing_model_factory_is_one_line_naming_it():
    def factory(num_classes, input_shape):
        raise ValueError("cannot build\nmore")

    with pytest.raises(PLLZooError, match=r"^model 'm' \(plugin p0\) failed to build: ValueError: cannot build$"):
        build_model("m", 3, (4,), _models(factory))


def test_a_model_with_the_wrong_number_of_logits_is_named():
    def factory(num_classes, input_shape):
        return PLLNet(torch.nn.Flatten(1), torch.nn.Linear(input_shape[0], num_classes - 1))

    with pytest.raises(PLLZooError, match=r"model 'm' \(plugin p0\) gives logits \[2, 2\] for a batch of 2 and 3 "
                                          r"classes; expected \[2, 3\]"):
        build_model("m", 3, (4,), _models(factory))


def _dataset(tiny_data, change):
    def loader(options):
        return change(tiny_data)

    reg = _registry(pllzoo_register_datasets=lambda register: register(DatasetSpec("d", loader, "a test set")))
    return load(reg, "d", reg.dataset("d"), DataOptions())


def _raise(data):
    raise ValueError("no such thing")


@pytest.mark.parametrize("change, why", [
    (_raise, "dataset 'd' \\(plugin p0\\) failed to load: ValueError: no such thing"),
    (lambda d: None, "the loader returned NoneType, not a pllzoo PLLData"),
    (lambda d: dataclasses.replace(d, y_train=torch.where(torch.arange(d.num_train) == 0, 99, d.y_train)),
     "training split: label indices outside 0..3 in 1 of"),
    (lambda d: dataclasses.replace(d, candidates=d.candidates.float() * 0.5),
     "candidate entries other than 0/1"),
    (lambda d: dataclasses.replace(d, y_test=torch.full_like(d.y_test, -1)), "test split: negative label indices"),
    (lambda d: dataclasses.replace(d, x_test=d.x_test * float("nan")), "test split: NaN/inf features"),
    # the layout of PLLData (a reviewer's plugin datasets: each used to be a traceback or a cryptic run failure)
    (lambda d: dataclasses.replace(d, y_train=d.y_train.float()),
     r"y_train is torch.float32 of shape \[96\]; expected long \[rows\] \(0-based class indices\)"),
    (lambda d: dataclasses.replace(d, y_train=d.y_train[:, None]), r"y_train is torch.int64 of shape \[96, 1\]"),
    (lambda d: dataclasses.replace(d, y_train=d.y_train.tolist()), "y_train is a builtins.list; expected a torch.Tensor"),
    (lambda d: dataclasses.replace(d, candidates=d.candidates.numpy()),
     "candidates is a numpy.ndarray; expected a torch.Tensor"),
    (lambda d: dataclasses.replace(d, x_train=d.x_train.double(), x_test=d.x_test.double()),
     r"x_train is torch.float64 of shape \[96, 6\]; tabular features are float32 \[N, d\]"),
    (lambda d: dataclasses.replace(d, x_test=d.x_test[:, :5]), r"x_test is torch.float32 of shape \[16, 5\], x_train"),
    (lambda d: dataclasses.replace(d, num_classes="4"), r"num_classes is '4' \(str\); expected an int"),
    (lambda d: dataclasses.replace(d, class_names=["a"]), "class_names has 1 entries for 4 classes"),
    (lambda d: dataclasses.replace(d, kind="audio"), "kind 'audio'; expected 'image' or 'tabular'"),
    (lambda d: dataclasses.replace(d, kind="image", x_train=torch.zeros(96, 3, 4, 4, dtype=torch.uint8),
                                   x_test=torch.zeros(16, 3, 4, 4, dtype=torch.uint8)),
     r"mean is None; images need 3 finite per-channel values"),
    (lambda d: dataclasses.replace(d, kind="image", x_train=torch.zeros(96, 4, 4, 3, dtype=torch.uint8)),
     r"images are uint8 \[N, C, H, W\] \(channels first, C = 1 or 3\)"),
    (lambda d: dataclasses.replace(d, x_val=d.x_train[:4]), "x_val and candidates_val go together"),
])
def test_an_outside_dataset_is_checked_like_a_shipped_one(tiny_data, change, why):
    with pytest.raises(PLLZooError, match=why) as err:
        _dataset(tiny_data, change)
    assert "\n" not in str(err.value)


class ExitsPlugin:
    @hookimpl
    def pllzoo_register_losses(self, register):
        register("exittest.loss", Exits)

    @hookimpl
    def pllzoo_register_methods(self, register):
        register(Method(name="exittest", loss="exittest.loss"))


def test_sys_exit_in_one_method_fails_its_runs_and_the_others_finish(tmp_path, request):
    """A plugin's ``sys.exit()`` in a hook used to end the bench with exit 0 and write nothing."""
    import pandas as pd

    from pllzoo import bench
    from pllzoo.jobs import RunsFailed

    request.addfinalizer(lambda threads=torch.get_num_threads(): torch.set_num_threads(threads))
    pm, infos = make_plugin_manager()
    pm.register(ExitsPlugin(), name="exittest")
    reg = Registry.build(pm, infos)
    plans = bench.plan(reg, ["exittest", "proden"], "synthetic-lt", [1], DataOptions(subset=200), epochs=1,
                       batch_size=50, device="cpu")
    with pytest.raises(RunsFailed, match=r"1 of 2 runs failed: exittest seed 1 \(loss component 'exittest.loss'"
                                         r" .*SystemExit: 3"):
        bench.execute(reg, plans, tmp_path, threads=1)
    assert list(pd.read_csv(tmp_path / "results.csv")["status"]) == ["failed", "ok"]


def test_a_recipe_with_a_bad_hyper_parameter_of_its_own_is_named():
    """The user passed no --hp: the message says the recipe's own value is bad, and whose recipe it is."""
    reg = _registry(pllzoo_register_methods=lambda register: register(
        Method(name="t-bad", loss="pllzoo.soft_ce", hparams={"loss.nonexistent": 1})))
    with pytest.raises(PLLZooError, match=r"^method 't-bad' \(plugin 'p0' \(in-process\)\) sets a bad hyper-parameter "
                                          r"of its own: unknown hyper-parameter loss.nonexistent"):
        reg.build_components(reg.method("t-bad"), {})


class Owns(Component):
    provides = frozenset({"k"})

    @hookimpl
    def pllzoo_setup_stage(self, run, state):
        state.k = torch.zeros(3)

    @hookimpl
    def pllzoo_on_epoch_end(self, run, state):
        state.k = state.k + 1  # its own key: fine


class Clobbers(Component):
    @hookimpl
    def pllzoo_predict(self, logits):
        return logits

    @hookimpl
    def pllzoo_on_epoch_end(self, run, state):
        state.k = torch.zeros(3)


def test_a_key_another_component_provides_cannot_be_assigned(tiny_data):
    """The declared provides are enforced: another component resetting it used to train on silently."""
    with pytest.raises(ComponentError, match=r"^predict component 'Clobbers' .* failed in pllzoo_on_epoch_end: "
                                             r"PLLZooError: it assigns state.k, which estimator component 'Owns'"):
        trainer_for(tiny_data, {"estimator": Owns(), "predict": Clobbers()}).fit()
    rec = trainer_for(tiny_data, {"estimator": Owns()}).fit()  # the owner alone trains
    assert rec[-1]["epoch"] == 2


class Deletes(Component):
    @hookimpl
    def pllzoo_predict(self, logits):
        return logits

    @hookimpl
    def pllzoo_on_epoch_end(self, run, state):
        del state.k


def test_a_key_another_component_provides_cannot_be_deleted(tiny_data):
    """Deleting another's key used to succeed, and the owner then failed, named as the culprit."""
    with pytest.raises(ComponentError, match=r"^predict component 'Deletes' .* failed in pllzoo_on_epoch_end: "
                                             r"PLLZooError: it deletes state.k, which estimator component 'Owns'"):
        trainer_for(tiny_data, {"estimator": Owns(), "predict": Deletes()}).fit()


class ChangesInPlace(Component):
    """A predictor that changes another's key in place: in a lifecycle hook, or in its role hook."""

    where = "on_epoch_end"

    @hookimpl
    def pllzoo_predict(self, logits, state):
        if self.where == "predict":
            state.k[0] = 5.0  # a view's in-place write counts too
        return logits

    @hookimpl
    def pllzoo_on_epoch_end(self, run, state):
        if self.where == "on_epoch_end":
            state.k.mul_(2)


class NeedsAndChanges(ChangesInPlace):
    needs = frozenset({"k"})  # declared: it may update k in place, as PiCO's loss the confidences


@pytest.mark.parametrize("where, hook", [("on_epoch_end", "pllzoo_on_epoch_end"), ("predict", "pllzoo_predict")])
def test_a_key_another_component_provides_cannot_be_changed_in_place_unless_needed(tiny_data, where, hook):
    """An in-place change (``state.k[0] = ...``, ``state.k.mul_(2)``) of another's key, undeclared, is refused as
    an assignment is; with the key in ``needs`` it is the documented way to update it (PiCO's loss)."""
    bad = ChangesInPlace()
    bad.where = where
    with pytest.raises(ComponentError, match=rf"^predict component 'ChangesInPlace' .* failed in {hook}: "
                                             r"PLLZooError: it changes state.k in place, which estimator component "
                                             r"'Owns' .* provides \(its own key\); list 'k' in needs"):
        trainer_for(tiny_data, {"estimator": Owns(), "predict": bad}).fit()
    good = NeedsAndChanges()
    good.where = where
    rec = trainer_for(tiny_data, {"estimator": Owns(), "predict": good}).fit()
    assert rec[-1]["epoch"] == 2


def test_the_watch_sees_exactly_the_in_place_changes_by_hand():
    """PLLState.watch/check_watched: a read, a new tensor for one's own key, and the owner's in-place change
    pass; another's in-place change is named."""
    from pllzoo.state import PLLState

    state = PLLState({"a": torch.zeros(2), "b": torch.ones(2)})
    state.set_owners({"a": ("loss", "loss A"), "b": ("selection", "selection B")}, {"loss": frozenset()})
    watched = state.watch("loss")
    assert [k for k, _, _ in watched] == ["b"]  # its own key is not watched
    _ = state.b * 2  # a read
    state.a.add_(1)  # its own, in place
    state.check_watched(watched)
    state.b[1] = 0.0
    with pytest.raises(PLLZooError, match=r"^it changes state.b in place, which selection B provides"):
        state.check_watched(watched)
    state.set_owners({"a": ("loss", "loss A"), "b": ("selection", "selection B")}, {"loss": frozenset({"b"})})
    assert state.watch("loss") == []  # declared in needs: may update it


class BuildsBadly(SoftCrossEntropy):
    def __init__(self, hp=None):
        raise RuntimeError("constructor boom\nsecond line")


def test_a_component_whose_constructor_raises_is_named_as_such():
    """Not "refused its hyper-parameters" (they were fine): it could not be built, one line."""
    reg = _registry(pllzoo_register_losses=lambda register: register("t.builds", BuildsBadly),
                    pllzoo_register_methods=lambda register: register(Method(name="t-builds", loss="t.builds")))
    with pytest.raises(PLLZooError) as err:
        reg.build_components(reg.method("t-builds"), {})
    assert str(err.value) == ("loss component 't.builds' (plugin 'p0' (in-process)) could not be built: "
                              "RuntimeError: constructor boom")


@pytest.mark.parametrize("loss, why", [
    ("nosuch.loss", r"unknown loss component 'nosuch.loss'; valid: "),
    ("pllzoo.all", r"unknown loss component 'pllzoo.all' \(it is a selection component\); valid: "),
])
def test_a_recipe_naming_an_unknown_component_names_the_recipe_and_its_plugin(loss, why):
    reg = _registry(pllzoo_register_methods=lambda register: register(Method(name="t-lazy", loss=loss)))
    with pytest.raises(UnknownNameError, match=r"^method 't-lazy' \(plugin 'p0' \(in-process\)\) names an " + why):
        reg.method("t-lazy")
    with pytest.raises(UnknownNameError, match=r"^unknown selection component 'x.y'; valid: "):  # the user's own
        reg.method("t-lazy+selection=x.y")


@pytest.mark.parametrize("swap, hint", [
    ("selection=solar.prior", "(it is an estimator component)"),  # not "a estimator"
    ("predict=None", "(did you mean 'none'?)"),
    ("loss=cc", "(did you mean 'cc.loss'?)"),  # a method's name for its loss
])
def test_an_unknown_component_of_a_method_string_hints_at_the_one_meant(registry, swap, hint):
    with pytest.raises(UnknownNameError) as err:
        registry.method(f"proden+{swap}")
    assert hint in str(err.value)


@dataclasses.dataclass(frozen=True)
class Ordered:
    low: float = hp(0.0, "lower end")
    high: float = hp(1.0, "upper end")

    def __post_init__(self):
        if not self.low < self.high:
            raise ValueError(f"low {self.low} must be below high {self.high}")


class OrderedLoss(SoftCrossEntropy):
    HParams = Ordered


def test_a_recipes_own_mistakes_name_the_recipe_and_its_plugin():
    """An outside review: a recipe's misspelled slot and its empty slot read like the user's own mistake, and a
    recipe value that only the combination with the user's --hp makes valid was refused before --hp applied."""
    def methods(register):
        register(Method(name="t-typo", loss="pllzoo.soft_ce", hparams={"selektion.x": 1}))
        register(Method(name="t-noloss", loss=None))
        register(Method(name="t-ordered", loss="t.ordered", hparams={"loss.low": 2.0}))

    reg = _registry(pllzoo_register_losses=lambda register: register("t.ordered", OrderedLoss),
                    pllzoo_register_methods=methods)
    with pytest.raises(PLLZooError, match=r"^method 't-typo' \(plugin 'p0' \(in-process\)\) sets a bad "
                                          r"hyper-parameter of its own: bad hyper-parameter key 'selektion.x'"):
        reg.build_components(reg.method("t-typo"), {})
    with pytest.raises(PLLZooError, match=r"^method 't-noloss' leaves slot 'loss' empty: the recipe \(plugin 'p0' "
                                          r"\(in-process\)\) names no loss component$"):
        reg.method("t-noloss")
    with pytest.raises(PLLZooError, match=r"^loss component 't.ordered' \(plugin 'p0' \(in-process\)\) refused its "
                                          r"hyper-parameters \(the recipe's low=2.0\): ValueError: low 2.0 must be "
                                          r"below high 1.0$"):
        reg.build_components(reg.method("t-ordered"), {})
    built = reg.build_components(reg.method("t-ordered"), {"loss.high": "3"})  # the user's --hp completes it
    assert (built["loss"].hp.low, built["loss"].hp.high) == (2.0, 3.0)


def test_a_backbone_giving_nan_is_named_not_the_loss(tiny_data):
    """It used to be reported as the shipped loss's non-finite loss."""
    from pllzoo.builtin import SelectAll, SoftCrossEntropy, UniformTargets
    from pllzoo.run import TrainConfig
    from pllzoo.trainer import Trainer

    class NaNHead(torch.nn.Linear):
        def forward(self, x):
            return super().forward(x) * float("nan")

    reg = _models(lambda num_classes, input_shape: PLLNet(torch.nn.Flatten(1), NaNHead(input_shape[0], num_classes)))
    comps = {"label_update": UniformTargets(), "selection": SelectAll(), "loss": SoftCrossEntropy()}
    cfg = TrainConfig(model="m", epochs=1, lr=0.1, weight_decay=0.0, batch_size=16)
    with pytest.raises(PLLZooError, match=r"^the network \(train.model=m\) gave non-finite logits \(NaN or inf\) in "
                                          r"train epoch 1:"):
        Trainer(tiny_data, comps, cfg, seed=1, device=torch.device("cpu"), registry=reg).fit()


def test_an_outside_dataset_is_recorded_under_its_registered_name(tiny_data):
    """An outside review: a loader naming its PLLData otherwise than its registration had its runs recorded under
    that name, which no command (evaluate, --from-run) could find again."""
    assert tiny_data.name != "d"
    assert _dataset(tiny_data, lambda d: d).name == "d"


def _views(view):
    return _registry(pllzoo_register_views=lambda register: register("v", view))


@pytest.mark.parametrize("view, why", [
    (lambda x, gen: 1 / 0, r" failed: ZeroDivisionError: division by zero$"),
    (lambda x, gen: (_ for _ in ()).throw(PLLZooError("needs RGB")), r": needs RGB$"),  # its own one line, named
    (lambda x: x, r" failed: TypeError: .*takes 1 positional argument but 2 were given$"),
    (lambda x, gen: None, r" returned NoneType for torch.uint8 \[4, 3, 8, 8\] on cpu"),
    (lambda x, gen: x.float() / 255, r" returned torch.float32 \[4, 3, 8, 8\] on cpu for torch.uint8 \[4, 3, 8, 8\]"),
    (lambda x, gen: x[:, :1], r" returned torch.uint8 \[4, 1, 8, 8\] on cpu"),
    (lambda x, gen: x[1:], r" returned torch.uint8 \[3, 3, 8, 8\] on cpu"),
    (lambda x, gen: x[..., 2:6, 2:6], r" returned torch.uint8 \[4, 3, 4, 4\] on cpu"),
])
def test_a_views_mistake_is_one_line_naming_it(view, why):
    """An outside review: a float view (the usual ToTensor slip) trained at chance without a word, a view's own
    exception named nothing (or blamed the loss, for a view dropping a row), and another size trained on other
    images than the test's."""
    from pllzoo.augment import make_view

    checked = make_view("v", "train.weak_view", _views(view))
    with pytest.raises(PLLZooError, match=r"^view 'v' \(plugin p0\)" + why) as err:
        checked(torch.zeros(4, 3, 8, 8, dtype=torch.uint8), torch.Generator().manual_seed(0))
    assert "\n" not in str(err.value)
    # a view keeping the contract passes its answer through
    good = make_view("v", "", _views(lambda x, gen: x.flip(3)))
    x = torch.arange(4 * 3 * 8 * 8).reshape(4, 3, 8, 8).to(torch.uint8)
    assert torch.equal(good(x, torch.Generator()), x.flip(3))


def test_a_float_view_fails_the_run_instead_of_training_at_chance():
    from conftest import make_fake_images

    from pllzoo.builtin import SelectAll, SoftCrossEntropy, UniformTargets
    from pllzoo.run import TrainConfig
    from pllzoo.trainer import Trainer

    reg = _views(lambda x, gen: x.float() / 255)
    comps = {"label_update": UniformTargets(), "selection": SelectAll(), "loss": SoftCrossEntropy()}
    cfg = TrainConfig(model="cnn", epochs=1, lr=0.1, weight_decay=0.0, batch_size=16, weak_view="v")
    with pytest.raises(PLLZooError, match=r"^view 'v' \(plugin p0\) returned torch.float32"):
        Trainer(make_fake_images(), comps, cfg, seed=1, device=torch.device("cpu"), registry=reg).fit()


def test_a_backbone_that_cannot_be_built_refuses_the_bench_before_any_run(tiny_data):
    """An outside review: every run of the grid started, failed and left a failed run folder, though README's
    "Failed runs" says a component that cannot be built refuses the bench before any run starts."""
    from pllzoo.planning import plan

    calls = []

    def factory(num_classes):  # the wrong signature
        calls.append(num_classes)

    reg = _registry(pllzoo_register_models=lambda register: register("m", factory),
                    pllzoo_register_datasets=lambda register: register(DatasetSpec("d", lambda o: tiny_data, "t")),
                    pllzoo_register_methods=lambda register: register(Method(name="t", loss="pllzoo.soft_ce")))
    state = torch.get_rng_state()
    with pytest.raises(PLLZooError, match=r"^model 'm' \(plugin p0\) failed to build: TypeError: "):
        plan(reg, ["t"], "d", [1, 2], DataOptions(), hp={"train.model": "m"})
    assert torch.equal(torch.get_rng_state(), state)
    # a factory that builds is built once per shape at planning, and torch's global RNG is left as it was
    built = []

    def linear(num_classes, input_shape):
        built.append((num_classes, input_shape))
        return PLLNet(torch.nn.Flatten(1), torch.nn.Linear(input_shape[0], num_classes))

    reg = _registry(pllzoo_register_models=lambda register: register("m", linear),
                    pllzoo_register_datasets=lambda register: register(DatasetSpec("d", lambda o: tiny_data, "t")),
                    pllzoo_register_methods=lambda register: register(Method(name="t", loss="pllzoo.soft_ce")))
    plans = plan(reg, ["t"], "d", [1, 2], DataOptions(), hp={"train.model": "m"})
    assert len(plans) == 2 and built == [(tiny_data.num_classes, tuple(tiny_data.x_train.shape[1:]))]
    assert torch.equal(torch.get_rng_state(), state)
