"""The host checks what role hooks return (pllzoo.checks) and names the component that broke the contract."""

from __future__ import annotations

import pandas as pd
import pytest
import torch

from pllzoo import Component, hookimpl
from pllzoo.builtin import SelectAll, SoftCrossEntropy, UniformTargets
from pllzoo.checks import ComponentError
from pllzoo.run import TrainConfig
from pllzoo.syncs import count_syncs
from pllzoo.trainer import Trainer

CFG = TrainConfig(model="linear", epochs=2, lr=0.1, weight_decay=0.0, batch_size=16)


def trainer_for(data, extra: dict[str, Component] | None = None, **kw) -> Trainer:
    comps = {"label_update": UniformTargets(), "selection": SelectAll(), "loss": SoftCrossEntropy()}
    comps.update(extra or {})
    return Trainer(data, comps, CFG, seed=1, device=torch.device("cpu"), **kw)


def fails(data, slot: str, comp: Component, *parts: str, **kw) -> ComponentError:
    """Training with ``comp`` in ``slot`` ends in one line naming the component, its module and each part."""
    with pytest.raises(ComponentError) as err:
        trainer_for(data, {slot: comp}, **kw).fit()
    msg = str(err.value)
    assert "\n" not in msg, msg
    for part in (f"{slot} component {type(comp).__qualname__!r}", "(plugin test_output_checks)", *parts):
        assert part in msg, (part, msg)
    return err.value


# ---------------------------------------------------------------------------- predict
class DropsAClass(Component):
    @hookimpl
    def pllzoo_predict(self, logits):
        return logits[:, :-1]


class NaNLogits(Component):
    @hookimpl
    def pllzoo_predict(self, logits):
        return logits * float("nan")


class IntLogits(Component):
    @hookimpl
    def pllzoo_predict(self, logits):
        return logits.long()


def test_predict_logits_of_the_wrong_shape(tiny_data):
    m, k = tiny_data.y_test.numel(), tiny_data.num_classes
    fails(tiny_data, "predict", DropsAClass(), "pllzoo_predict", f"shape [{m}, {k - 1}]", f"expected [{m}, {k}]")




# ---------------------------------------------------------------------------- label update
class OutsideCandidates(Component):
    @hookimpl
    def pllzoo_label_update(self, step):
        outside = 1 - step.batch.candidates
        return torch.where(outside.sum(1, keepdim=True) > 0, outside / outside.sum(1, keepdim=True).clamp_min(1),
                           step.batch.candidates / step.batch.candidates.sum(1, keepdim=True))


class SumsToTwo(Component):
    @hookimpl
    def pllzoo_label_update(self, step):
        c = step.batch.candidates
        return 2 * c / c.sum(1, keepdim=True)


class Negative(Component):
    @hookimpl
    def pllzoo_label_update(self, step):
        t = step.batch.candidates / step.batch.candidates.sum(1, keepdim=True)
        t[:, 0] = -t[:, 0]  # class 0's share made negative
        return t


class NaNTargets(Component):
    @hookimpl
    def pllzoo_label_update(self, step):
        return step.batch.candidates * float("nan")


class WrongWidth(Component):
    @hookimpl
    def pllzoo_label_update(self, step):
        return step.batch.candidates[:, 1:]


class Nothing(Component):
    @hookimpl
    def pllzoo_label_update(self, step):
        return None


class MetaTargets(Component):
    """Targets on another device than the batch's (the meta device stands for another GPU here)."""

    @hookimpl
    def pllzoo_label_update(self, step):
        return torch.empty(step.batch.candidates.shape, device="meta")






def test_targets_of_the_wrong_shape(tiny_data):
    k = tiny_data.num_classes
    fails(tiny_data, "label_update", WrongWidth(), f"shape [16, {k - 1}], expected [16, {k}]")



# ---------------------------------------------------------------------------- selection, loss
class ShortMask(Component):
    @hookimpl
    def pllzoo_select(self, step):
        return torch.ones(step.batch.size - 1, dtype=torch.bool)


class IntMask(Component):
    @hookimpl
    def pllzoo_select(self, step):
        return torch.ones(step.batch.size, dtype=torch.long)


class BigWeights(Component):
    @hookimpl
    def pllzoo_select(self, step):
        return torch.full((step.batch.size,), 2.0)


class VectorLoss(SoftCrossEntropy):
    @hookimpl
    def pllzoo_loss(self, step, state):
        return super().pllzoo_loss(step, state).expand(2)


class NaNLoss(SoftCrossEntropy):
    @hookimpl
    def pllzoo_loss(self, step, state):
        return super().pllzoo_loss(step, state) * float("nan")


class DetachedLoss(SoftCrossEntropy):
    @hookimpl
    def pllzoo_loss(self, step, state):
        return super().pllzoo_loss(step, state).detach()


class LeafLoss(Component):
    """A tensor made with requires_grad=True: it has grad, but no graph back to the model (an outside review)."""

    @hookimpl
    def pllzoo_loss(self, step):
        return torch.tensor(1.0, requires_grad=True)


class GraphOffTheModel(SoftCrossEntropy):
    """``loss.detach() + 0 * leaf``: a graph, through something other than the network (an outside review)."""

    @hookimpl
    def pllzoo_loss(self, step, state):
        return super().pllzoo_loss(step, state).detach() + 0 * torch.zeros((), requires_grad=True)


class MetaMask(Component):
    @hookimpl
    def pllzoo_select(self, step):
        return torch.ones(step.batch.size, dtype=torch.bool, device="meta")








# ---------------------------------------------------------------------------- when values are checked
class BadAfterFirstStep(Component):
    """Targets summing to 2 on every step but the first of an epoch."""

    def __init__(self):
        super().__init__()
        self.steps = 0

    @hookimpl
    def pllzoo_on_epoch_start(self):
        self.steps = 0

    @hookimpl
    def pllzoo_label_update(self, step):
        self.steps += 1
        c = step.batch.candidates / step.batch.candidates.sum(1, keepdim=True)
        return c if self.steps == 1 else 2 * c


def test_values_are_checked_on_the_first_step_of_each_epoch_and_always_under_check(tiny_data):
    records = trainer_for(tiny_data, {"label_update": BadAfterFirstStep()}).fit()  # the cheap default misses it
    assert len(records) == CFG.epochs
    fails(tiny_data, "label_update", BadAfterFirstStep(), "rows do not sum to 1", check=True)


def test_check_is_result_neutral(registry, tiny_data):
    runs = []
    for check in (False, True):
        comps = registry.build_components(registry.method("solar"), {"estimator.est_epochs": 1},
                                          dataset=(tiny_data.name, tiny_data.kind))
        trainer = Trainer(tiny_data, comps, CFG, seed=1, device=torch.device("cpu"), check=check)
        runs.append([{k: v for k, v in r.items() if k != "wall_s"} for r in trainer.fit()])
    assert runs[0] == runs[1]


def test_shape_checks_read_nothing_and_value_checks_do(registry, tiny_data):
    comps = registry.build_components(registry.method("proden"), {}, dataset=(tiny_data.name, tiny_data.kind))
    trainer = Trainer(tiny_data, comps, CFG, seed=1, device=torch.device("cpu"))
    stage = trainer.stages()[-1]
    trainer._enter_stage(stage)
    gen, vgen = trainer.generators(stage, 0)
    idx = torch.arange(16)
    with count_syncs(cuda=False) as unchecked:
        trainer.step(stage, 0, idx, gen, vgen)
    with count_syncs(cuda=False) as checked:
        trainer.step(stage, 0, idx, gen, vgen, check=True)
    assert unchecked.count == 0 and checked.count > 0, (unchecked.ops, checked.ops)


# ---------------------------------------------------------------------------- exceptions inside hooks
class RaisesInLabelUpdate(Component):
    @hookimpl
    def pllzoo_label_update(self, step):
        raise ValueError("bad thing\nsecond line")


class RaisesAtSetup(UniformTargets):
    @hookimpl
    def pllzoo_setup_stage(self):
        raise KeyError("confidence")


class RaisesAtEpochEnd(Component):
    @hookimpl
    def pllzoo_on_epoch_end(self):
        raise RuntimeError("estimator broke")


def test_an_exception_in_a_role_hook_names_the_component(tiny_data):
    err = fails(tiny_data, "label_update", RaisesInLabelUpdate(), "failed in pllzoo_label_update",
                "ValueError: bad thing")
    assert isinstance(err.__cause__, ValueError)  # chained: a traceback still shows where


def test_an_exception_in_a_lifecycle_hook_names_the_component(tiny_data):
    err = fails(tiny_data, "label_update", RaisesAtSetup(), "failed in pllzoo_setup_stage", "KeyError: 'confidence'")
    assert isinstance(err.__cause__, KeyError)
    fails(tiny_data, "estimator", RaisesAtEpochEnd(), "failed in pllzoo_on_epoch_end", "RuntimeError: estimator broke")


def test_bench_check_flag_reaches_the_trainer_and_leaves_results_and_ids_alone(registry, tmp_path, monkeypatch):
    from click.testing import CliRunner

    import pllzoo.trainer as trainer_mod
    from pllzoo import bench
    from pllzoo.cli import cli
    from pllzoo.data.base import DataOptions

    seen = []
    original = trainer_mod.Trainer.__init__

    def spy(self, *a, **kw):
        if a[5] is not None:  # the run's trainer (a run folder), not the cost guard's timing (pllzoo.timing)
            seen.append(kw.get("check"))
        original(self, *a, **kw)

    monkeypatch.setattr(trainer_mod.Trainer, "__init__", spy)
    tiny = ["--methods", "proden", "--dataset", "synthetic-lt", "--epochs", "2", "--subset", "200", "--batch-size", "64", "--threads", "1"]
    for flag, out in (([], "plain"), (["--check"], "checked")):
        res = CliRunner().invoke(cli, ["bench", *tiny, *flag, "--out", str(tmp_path / out)])
        assert res.exit_code == 0, res.output
    assert seen == [False, True]
    a, b = (pd.read_csv(tmp_path / o / "results.csv").drop(columns="wall_s") for o in ("plain", "checked"))
    pd.testing.assert_frame_equal(a, b)  # same run id, same numbers
    (p1,) = bench.plan(registry, ["proden"], "synthetic-lt", [1], DataOptions(), epochs=1, device="cpu")
    (p2,) = bench.plan(registry, ["proden"], "synthetic-lt", [1], DataOptions(), epochs=1, device="cpu", check=True)
    assert p2.check and p1.run_id == p2.run_id


BAD_OUTPUTS = [  # (case, slot, component class, substrings of the one-line error)
    ('predict_logits_not_finite', "predict", NaNLogits, ("non-finite logits",)),
    ('predict_logits_not_float', "predict", IntLogits, ("dtype torch.int64",)),
    ('targets_outside_the_candidate_set', "label_update", OutsideCandidates, ("pllzoo_label_update", "outside a sample's candidate set",)),
    ('targets_summing_to_two', "label_update", SumsToTwo, ("rows do not sum to 1", ": 2)",)),
    ('negative_targets', "label_update", Negative, ("negative targets",)),
    ('non_finite_targets', "label_update", NaNTargets, ("non-finite targets",)),
    ('no_targets', "label_update", Nothing, ("returned NoneType",)),
    ('targets_on_another_device', "label_update", MetaTargets, ("on device meta, expected cpu (the batch's)",)),
    ('mask_on_another_device', "selection", MetaMask, ("pllzoo_select", "on device meta, expected cpu",)),
    ('mask_of_the_wrong_length', "selection", ShortMask, ("pllzoo_select", "shape [15], expected [16]",)),
    ('mask_of_the_wrong_dtype', "selection", IntMask, ("dtype torch.int64",)),
    ('weights_outside_0_1', "selection", BigWeights, ("weights outside [0, 1]",)),
    ('loss_not_a_scalar', "loss", VectorLoss, ("pllzoo_loss", "shape [2], expected a float scalar",)),
    ('loss_not_finite', "loss", NaNLoss, ("non-finite loss",)),
    ('loss_without_grad', "loss", DetachedLoss, ("without grad",)),
    ('loss_a_leaf', "loss", LeafLoss, ("without grad (it does not depend on the model)",)),
    ('loss_off_the_network', "loss", GraphOffTheModel, ("does not depend on the network (no parameter got a "
                                                        "gradient)",)),
]


@pytest.mark.parametrize("slot,component,expected", [c[1:] for c in BAD_OUTPUTS], ids=[c[0] for c in BAD_OUTPUTS])
def test_bad_output_is_one_line_naming_the_component(tiny_data, slot, component, expected):
    fails(tiny_data, slot, component(), *expected)


class ZeroesTheTargets(Component):
    @hookimpl
    def pllzoo_select(self, step):
        step.targets.fill_(0)
        return torch.ones(step.batch.size, dtype=torch.bool)


def test_a_selection_that_changes_the_targets_in_place_is_named(tiny_data):
    """It used to train on zero targets and finish ok."""
    fails(tiny_data, "selection", ZeroesTheTargets(), "pllzoo_select changed step.targets in place")


# ---------------------------------------------------------------------------- inputs changed in place, answers with grad
class ChangesProbs(Component):  # PRODEN's post-step reads step.probs
    @hookimpl
    def pllzoo_select(self, step):
        step.probs.mul_(2)
        return torch.ones(step.batch.size, dtype=torch.bool)


class FillsTheCandidates(Component):
    @hookimpl
    def pllzoo_select(self, step):
        step.batch.candidates.fill_(1)
        return torch.ones(step.batch.size, dtype=torch.bool)


class ZeroesTheTestLabels(SelectAll):
    @hookimpl
    def pllzoo_on_epoch_end(self, run):
        run.data.y_test.zero_()


class PrunesRunCandidates(SelectAll):
    @hookimpl
    def pllzoo_on_epoch_start(self, run):
        run.candidates.fill_(True)


class NegatesLogitsAndAnswersNone(Component):  # None means "the argmax of logits": of the negated ones
    @hookimpl
    def pllzoo_predict(self, logits):
        logits.neg_()


class ScalesTheLogitsInTheLoss(Component):  # through a detached alias, which shares the logits' memory
    @hookimpl
    def pllzoo_loss(self, step):
        step.logits.detach().mul_(0)
        return torch.nn.functional.cross_entropy(step.logits, step.targets)


class ChangesTheMaskInPostStep(SelectAll):
    @hookimpl
    def pllzoo_post_step(self, step):
        step.mask.fill_(False)


INPUTS_CHANGED = [  # (case, slot, component class, the field named)
    ("probs_in_selection", "selection", ChangesProbs, "pllzoo_select changed step.probs in place"),
    ("batch_candidates_in_selection", "selection", FillsTheCandidates,
     "pllzoo_select changed step.batch.candidates in place"),
    ("test_labels_at_epoch_end", "selection", ZeroesTheTestLabels, "pllzoo_on_epoch_end changed run.data.y_test"),
    ("run_candidates_at_epoch_start", "selection", PrunesRunCandidates,
     "pllzoo_on_epoch_start changed run.candidates in place"),
    ("logits_in_predict", "predict", NegatesLogitsAndAnswersNone, "pllzoo_predict changed logits in place"),
    ("logits_in_the_loss", "loss", ScalesTheLogitsInTheLoss, "pllzoo_loss changed step.logits in place"),
    ("mask_in_post_step", "selection", ChangesTheMaskInPostStep, "pllzoo_post_step changed step.mask in place"),
]


@pytest.mark.parametrize("slot,component,expected", [c[1:] for c in INPUTS_CHANGED], ids=[c[0] for c in INPUTS_CHANGED])
def test_a_hook_that_changes_what_others_read_in_place_is_named(tiny_data, slot, component, expected):
    """Each of these used to finish ok with changed numbers (a reviewer's cases: PRODEN's post-step on doubled
    probabilities, filled candidates, zeroed test labels, negated test logits)."""
    fails(tiny_data, slot, component(), expected, "work on a copy (.clone())")


class GradTargets(Component):
    @hookimpl
    def pllzoo_label_update(self, step):
        with torch.enable_grad():
            return torch.softmax(step.logits, 1) * step.batch.candidates / (
                torch.softmax(step.logits, 1) * step.batch.candidates).sum(1, keepdim=True)


class GradWeights(Component):
    @hookimpl
    def pllzoo_select(self, step):
        with torch.enable_grad():
            return torch.sigmoid(step.logits[:, 0])


@pytest.mark.parametrize("slot,component,hook", [("label_update", GradTargets, "pllzoo_label_update"),
                                                 ("selection", GradWeights, "pllzoo_select")])
def test_an_answer_that_requires_grad_is_refused(tiny_data, slot, component, hook):
    """Gradients used to flow through targets or weights built under enable_grad (hooks documented no_grad)."""
    fails(tiny_data, slot, component(), hook, "returned a tensor that requires grad", ".detach() it")

