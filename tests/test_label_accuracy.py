"""The trainer's training-label accuracy (``label_acc``, ``label_acc_many/medium/few``: pllzoo.metrics.label_tally):
each epoch, how often the label update's targets are largest at the hidden true label, summed over the epoch's
steps; only for a method whose targets are its own (not the uniform targets, nor a loss that ignores them)."""

from __future__ import annotations

import pytest
import torch

from conftest import make_tiny_data
from pllzoo import hookimpl
from pllzoo.components import Component
from pllzoo.metrics import label_accuracy, shot_groups
from pllzoo.registry import get_registry
from pllzoo.run import Step, TrainConfig
from pllzoo.trainer import Trainer

CFG = TrainConfig(model="mlp", epochs=2, lr=0.05, weight_decay=0.0, batch_size=16, drop_last=False)


class FirstCandidate(Component):
    """One-hot at each row's lowest-index candidate: its accuracy is known without training."""

    name = "t.first"
    distributed = True

    @hookimpl
    def pllzoo_label_update(self, step: Step) -> torch.Tensor:
        first = step.batch.candidates.argmax(1)  # the lowest index among the 1s
        return torch.nn.functional.one_hot(first, step.batch.candidates.shape[1]).float()


def _fit(method: str, swap: Component | None = None):
    reg = get_registry()
    comps = reg.build_components(reg.method(method), {})
    if swap is not None:
        comps["label_update"] = swap
    data = make_tiny_data(n=90)  # 90 rows at batch 16: a last step of 10 rows
    return data, Trainer(data, comps, CFG, seed=1, device=torch.device("cpu")).fit()


def test_the_tally_covers_every_row_once_an_epoch():
    data, records = _fit("proden", FirstCandidate())
    k = data.num_classes
    hit = data.candidates.float().argmax(1) == data.y_train
    tally = torch.stack([torch.bincount(data.y_train[hit], minlength=k), torch.bincount(data.y_train, minlength=k)])
    want = label_accuracy(tally.float(), shot_groups(data.train_counts))
    assert want["label_acc"] is not None and 0 < want["label_acc"] < 100  # a case that tells rows apart
    for r in records:
        assert {key: r[key] for key in want} == want
    keys = list(records[0])
    assert keys.index("label_acc_few") + 1 == keys.index("acc_all")  # beside the test accuracies


def test_only_methods_with_their_own_targets_log_it():
    for method in ("proden", "pico"):  # PiCO's loss reads its W from the state; its label update returns it
        _, records = _fit(method)
        assert all(0 <= r["label_acc"] <= 100 for r in records), method
    _, records = _fit("cc")  # the uniform targets: no disambiguation to score
    assert not any(k.startswith("label_acc") for k in records[-1])


def test_a_copy_of_the_uniform_targets_under_another_name_is_not_tallied_either():
    """The trainer asked the label update's name (``pllzoo.uniform``): an outside plugin registering the same
    class under its own name got ``label_acc`` columns the built-in has not (a review).  It asks ``neutral``."""
    from pllzoo.builtin import UniformTargets

    class Copy(UniformTargets):
        name = "t.uniform"

    class Disambiguates(UniformTargets):  # the same targets, but declared as its own: tallied
        name, neutral = "t.mine", False

    class OwnUpdate(UniformTargets):  # a hook of its own: not neutral unless it says so
        name = "t.own"

        @hookimpl
        def pllzoo_label_update(self, step):
            return FirstCandidate().pllzoo_label_update(step=step)

    _, records = _fit("cc", Copy())
    assert not any(k.startswith("label_acc") for k in records[-1])
    for own in (Disambiguates(), OwnUpdate()):
        _, records = _fit("cc", own)
        assert 0 <= records[-1]["label_acc"] <= 100, own.name


def test_the_targets_a_loss_says_it_trained_on_are_tallied():
    """``step.trained_targets``: a loss training on other targets than the label update's (PiCO's W after the
    update its loss makes) has those scored; here the first candidate's, under PRODEN's label update."""
    from pllzoo.builtin import SoftCrossEntropy

    class TrainsOnFirst(SoftCrossEntropy):
        name = "t.trains_on_first"

        @hookimpl
        def pllzoo_loss(self, step, state):
            step.trained_targets = FirstCandidate().pllzoo_label_update(step=step)
            return super().pllzoo_loss(step=step, state=state)

    _, want = _fit("proden", FirstCandidate())
    reg = get_registry()
    comps = reg.build_components(reg.method("proden"), {})
    comps["loss"] = TrainsOnFirst()
    records = Trainer(make_tiny_data(n=90), comps, CFG, seed=1, device=torch.device("cpu")).fit()
    assert [r["label_acc"] for r in records] == [r["label_acc"] for r in want]


def test_non_finite_trained_targets_past_the_checked_step_are_one_line():
    """A review: a loss setting NaN step.trained_targets after an epoch's first (checked) step wrote a NaN
    label_acc, and the bench then called its own new run damaged."""
    from pllzoo.builtin import SoftCrossEntropy
    from pllzoo.errors import PLLZooError

    class LateNaN(SoftCrossEntropy):
        name = "t.late_nan"

        @hookimpl
        def pllzoo_loss(self, step, state):
            if step.batch.size < CFG.batch_size:  # the epoch's last step (90 rows at batch 16): not checked
                step.trained_targets = torch.full_like(step.targets, float("nan"))
            return super().pllzoo_loss(step=step, state=state)

    reg = get_registry()
    comps = reg.build_components(reg.method("proden"), {})
    comps["loss"] = LateNaN()
    trainer = Trainer(make_tiny_data(n=90), comps, CFG, seed=1, device=torch.device("cpu"))
    with pytest.raises(PLLZooError, match=r"^the training-label accuracy of train epoch 1 is not finite: .*"
                                          r"step.trained_targets.* --check to name the component$"):
        trainer.fit()


def test_pico_scores_the_w_its_loss_trains_on():
    """An outside review: PiCO's label_acc scored W before the update its loss makes (l.5), one epoch behind the
    W it trained on (its second epoch showed the first's uniform-tie share)."""
    from pllzoo.metrics import label_tally
    from pllzoo_baselines.pico import PiCOConfidence

    tallies: list[torch.Tensor] = []

    class Watched(PiCOConfidence):
        @hookimpl
        def pllzoo_post_step(self, step, state):  # W of the batch's rows after the step: what l.6 trained on
            tallies.append(label_tally(state.confidence[step.batch.index], step.batch.y_true, data.num_classes))

        @hookimpl
        def pllzoo_on_epoch_start(self, epoch):
            tallies.clear()

    reg = get_registry()
    comps = reg.build_components(reg.method("pico"), {})
    comps["label_update"] = Watched(comps["label_update"].hp)
    data = make_tiny_data(n=90)
    epochs: list[float] = []
    records = Trainer(data, comps, CFG, seed=1, device=torch.device("cpu"),
                      on_epoch=lambda rec: epochs.append(label_accuracy(sum(tallies), shot_groups(
                          data.train_counts))["label_acc"])).fit()
    assert [r["label_acc"] for r in records] == pytest.approx(epochs, abs=1e-4)
    assert records[1]["label_acc"] != records[0]["label_acc"]  # W moved in the second epoch (prot_start = 1)


def test_a_component_that_logs_label_acc_itself_keeps_its_values():
    """A review: a plugin logging "label_acc" (before the trainer did) was refused after its first epoch."""
    from pllzoo.builtin import SoftCrossEntropy

    class Own(SoftCrossEntropy):
        name = "t.own"

        @hookimpl
        def pllzoo_loss(self, step, state):
            step.logs["label_acc"] = torch.tensor(7.0)
            return super().pllzoo_loss(step=step, state=state)

    reg = get_registry()
    comps = reg.build_components(reg.method("proden"), {})
    comps["loss"] = Own()
    data = make_tiny_data(n=90)
    with pytest.warns(UserWarning, match="a component logs 'label_acc', a key of the trainer's training-label "
                                         "accuracy; the record keeps the component's"):
        records = Trainer(data, comps, CFG, seed=1, device=torch.device("cpu")).fit()
    assert [r["label_acc"] for r in records] == [7.0, 7.0] and "label_acc_few" not in records[0]
