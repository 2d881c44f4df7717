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
