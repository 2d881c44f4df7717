"""A recipe in which a component would change nothing is refused before training, in one line
(:func:`pllzoo.components.check_compatible`): a logit offset that nothing reads from a component whose
outputs nothing uses, a selection in front of a loss that makes its own, and HTC's ensemble without the
tail classifier and weighting module that HTC's loss trains.  Each of these used to run: the first two
as rows identical to the base method's, the last as one failed run per seed."""

from __future__ import annotations

import pytest
import torch
from click.testing import CliRunner

from pllzoo import Component, PLLZooError, Stage, hookimpl
from pllzoo.cli import cli
from pllzoo.components import check_compatible


class Offset(Component):
    provides = frozenset({"prior"})

    @hookimpl
    def pllzoo_logit_offset(self, step, state):
        return torch.zeros(3)


class Reader(Component):
    reads = frozenset({"logit_offset"})


class Plain(Component):
    pass


class NeedsPrior(Component):
    needs = frozenset({"prior"})


class Neutral(Component):
    """A slot's do-nothing component (``pllzoo.all``, ``pllzoo.uniform``), here under another name."""

    neutral = True


class OwnSelection(Component):
    ignores = frozenset({"mask"})


class CandidateLoss(Component):
    ignores = frozenset({"targets"})


class ReadsTargets(Component):
    reads = frozenset({"targets"})


class Confidences(Component):
    provides = frozenset({"confidence"})


class NeedsConfidence(Component):
    needs = frozenset({"confidence"})


def _named(comp: Component, slot: str, name: str) -> Component:
    comp.slot, comp.name = slot, name  # what the registry sets on registration
    return comp


def _recipe(**parts: Component) -> dict[str, Component]:
    return {slot: _named(c, slot, f"test.{slot}") for slot, c in parts.items()}


def test_an_offset_is_kept_when_a_label_update_reads_it_or_its_prior_is_used():
    check_compatible("a", _recipe(label_update=Reader(), loss=Plain(), estimator=Offset()))
    check_compatible("b", _recipe(label_update=Plain(), loss=Plain(), estimator=Offset(), predict=NeedsPrior()))


def test_an_offset_that_changes_nothing_is_refused():
    with pytest.raises(PLLZooError, match=r"incompatible recipe 'c': estimator 'test.estimator' offsets the logits "
                                          r"that label updates read, but none of the others reads them .* it would "
                                          r"change nothing"):
        check_compatible("c", _recipe(label_update=Plain(), loss=Plain(), estimator=Offset()))


class Estimates(Component):
    provides = frozenset({"prior"})

    @hookimpl
    def pllzoo_stages(self, run):
        return [Stage("pre-estimation", epochs=3), Stage("train")]


class LogsOnly(Component):
    """An estimator without stages of its own: its estimate is logged (prior_tv), a measurement."""

    provides = frozenset({"prior"})


def test_an_estimator_whose_outputs_nothing_reads_is_refused_among_shipped_components_only():
    with pytest.raises(PLLZooError, match=r"incompatible recipe 'k': estimator 'test.estimator' provides 'prior', "
                                          r"which none of the others reads \(label_update 'test.label_update', loss "
                                          r"'test.loss'\); it would change nothing but its own stages"):
        check_compatible("k", _recipe(label_update=Plain(), loss=Plain(), estimator=Estimates()))
    check_compatible("l", _recipe(label_update=Plain(), loss=Plain(), estimator=Estimates(), predict=NeedsPrior()))
    # an outside component may read a state key it does not declare: kept
    check_compatible("m", _recipe(label_update=Plain(), loss=Plain(), estimator=Estimates()),
                     complete=("estimator", "loss"))
    # one that plans no stage of its own costs nothing and logs its estimate (an outside review): kept
    check_compatible("n", _recipe(label_update=Plain(), loss=Plain(), estimator=LogsOnly()))


def test_a_selection_in_front_of_a_loss_with_its_own_is_refused_but_select_all_is_fine():
    parts = dict(label_update=Plain(), loss=OwnSelection())
    check_compatible("d", {**_recipe(**parts), "selection": _named(Neutral(), "selection", "t.all")})  # asks
    # neutral, not the name pllzoo.all: an outside copy of the built-in under its own name was refused (a review)
    with pytest.raises(PLLZooError, match=r"loss 'test.loss' does not read the selection's mask .* so selection "
                                          r"'test.selection' would change nothing"):
        check_compatible("e", _recipe(selection=Plain(), **parts))

    class Selects(Neutral):  # a subclass that selects by a hook of its own is no longer neutral
        @hookimpl
        def pllzoo_select(self, step):
            return step.batch.index % 2 == 0

    with pytest.raises(PLLZooError, match=r"so selection 'test.selection' would change nothing"):
        check_compatible("e2", _recipe(selection=Selects(), **parts))


def test_a_label_update_in_front_of_a_loss_without_targets_is_refused_unless_something_reads_them():
    """A loss that reads the candidate rows (CC's, MSE's, EXP's) made a swapped label update a silent no-op:
    ``mse+label_update=proden.confidence`` trained as ``mse`` (an outside review)."""
    uniform = {"label_update": _named(Neutral(), "label_update", "t.uniform")}  # not the name: neutral
    check_compatible("f", {**_recipe(loss=CandidateLoss()), **uniform})  # the neutral default
    with pytest.raises(PLLZooError, match=r"incompatible recipe 'g': loss 'test.loss' reads the candidate rows, not "
                                          r"the label update's targets, .* so label update 'test.label_update' "
                                          r"would change nothing \(a component that reads step.targets declares "
                                          r"reads = \{'targets'\}\)"):
        check_compatible("g", _recipe(label_update=Confidences(), loss=CandidateLoss(), selection=Plain()))
    check_compatible("h", _recipe(label_update=Plain(), loss=CandidateLoss(), selection=ReadsTargets()))
    check_compatible("i", _recipe(label_update=Confidences(), loss=CandidateLoss(), estimator=NeedsConfidence()))
    check_compatible("j", _recipe(label_update=Confidences(), loss=Plain()))  # a loss that reads the targets


@pytest.mark.parametrize("method,why", [
    ("mse+label_update=proden.confidence", "label update 'proden.confidence' would change nothing"),
    ("proden+loss=cc.loss", "loss 'cc.loss' reads the candidate rows"),
    ("exp+label_update=solar.sinkhorn+estimator=solar.prior", "label update 'solar.sinkhorn' would change nothing"),
    ("pico+estimator=records.prior", "estimator 'records.prior' offsets the logits"),  # PiCO's W ignores it
    ("cc+estimator=records.prior", "estimator 'records.prior' offsets the logits"),  # CC has no label update
    ("htc+selection=solar.classwise+estimator=solar.prior", "loss 'htc.loss' does not read the selection's mask"),
    # PiCO's l.6 is a mean over the whole batch (found by `pllzoo check pico`)
    ("pico+selection=solar.classwise+estimator=solar.prior", "loss 'pico.loss' does not read the selection's mask"),
    ("corr-records+predict=htc.ensemble", "predict 'htc.ensemble' needs 'htc_tail_logits'"),
    # an outside review: SoLar's pre-estimation trained 20 epochs for a prior none of these reads
    ("proden+estimator=solar.prior", "estimator 'solar.prior' provides 'prior', 'prior_votes', which none of the "
                                     "others reads"),
    ("corr+estimator=solar.prior", "it would change nothing but its own stages"),
    ("htc+estimator=solar.prior", "which none of the others reads"),
    # outside reviews: VALEN's encoder and decoder trained for a Dirichlet nothing read (alpha, beta, gamma, knn
    # changed no number); PiCO's W without pico.loss stayed the uniform targets under PiCO's name
    ("proden+loss=valen.loss", "loss 'valen.loss' provides 'valen_adj', 'valen_dirichlet', which none of the others "
                               "reads"),
    ("valen+label_update=proden.confidence", "it would change nothing but its own stages"),
    ("proden+label_update=pico.confidence", "label_update 'pico.confidence' needs 'pico_prototypes'"),
    ("corr+label_update=pico.confidence", "needs 'pico_prototypes'"),
    ("pico+loss=proden.loss", "needs 'pico_prototypes'"),
])
def test_shipped_recipes_that_would_change_nothing_fail_before_training(method, why, tmp_path):
    res = CliRunner().invoke(cli, ["bench", "--methods", method, "--dataset", "synthetic-lt", "--subset", "300",
                                   "--epochs", "1", "--batch-size", "64", "--threads", "1", "--dry-run",
                                   "--out", str(tmp_path / "out")])
    assert res.exit_code == 1 and "Traceback" not in res.output
    last = res.output.strip().splitlines()[-1]
    assert last.startswith(f"Error: incompatible recipe '{method}'") and why in last, last


@pytest.mark.parametrize("method", ["proden+estimator=records.prior", "corr-records", "htc+estimator=records.prior",
                                    "lws+estimator=records.prior+predict=pllzoo.logit_adjust", "cc-records",
                                    "solar+estimator=records.prior", "htc", "valen+estimator=records.prior",
                                    "cc+label_update=proden.confidence+selection=solar.classwise+estimator=solar.prior",
                                    "lws", "mse", "exp+selection=solar.classwise+estimator=solar.prior",
                                    "proden+estimator=solar.prior+predict=pllzoo.logit_adjust"])
def test_recipes_where_each_component_acts_are_accepted(registry, method):
    registry.build_components(registry.method(method), {}, dataset=("synthetic-lt", "tabular"))


def test_an_unread_estimator_without_stages_of_its_own_is_kept_for_its_logs(registry):
    """SoLar's prior estimator with no pre-estimation stage logs prior and prior_tv every epoch (a measurement
    pllzoo plot draws); only its 20 wasted pre-estimation epochs made it a refusal."""
    comps = registry.build_components(registry.method("proden+estimator=solar.prior"), {"estimator.est_epochs": "0"},
                                      dataset=("synthetic-lt", "tabular"))
    assert comps["estimator"].hp.est_epochs == 0


def test_htc_ensemble_on_the_head_alone_needs_no_htc_loss(registry):
    registry.build_components(registry.method("corr-records+predict=htc.ensemble"), {"predict.output": "head"},
                              dataset=("synthetic-lt", "tabular"))


def test_a_swap_of_the_recipes_own_and_swaps_in_another_order_are_named(tmp_path):
    """Known issue of an earlier session: ``solar+selection=solar.classwise`` (solar itself) and two strings with the
    same swaps in another order trained again under their own ids without a word; they still train, with a warning."""
    mixed = ("proden+selection=solar.classwise+estimator=solar.prior", "proden+estimator=solar.prior+selection=solar.classwise")
    args = ["bench", "--methods", ",".join(["solar+selection=solar.classwise", *mixed]), "--dataset", "synthetic-lt",
            "--subset", "300", "--epochs", "1", "--threads", "1", "--dry-run", "--out", str(tmp_path / "out")]
    res = CliRunner().invoke(cli, args)
    assert res.exit_code == 0, res.output
    text = " ".join(res.output.split())
    assert "solar+selection=solar.classwise: selection=solar.classwise is the recipe's own; it trains as 'solar'" in text
    other = "solar+selection=solar.classwise+estimator=records.prior"  # an outside review: said "as 'solar'"
    res = CliRunner().invoke(cli, [*args[:2], other, *args[3:]])
    assert res.exit_code == 0 and f"{other}: selection=solar.classwise is the recipe's own; it trains as " \
        "solar+estimator=records.prior does" in " ".join(res.output.split()), res.output
    assert f"{mixed[1]} and {mixed[0]} are the same recipe" in text
    scoped = CliRunner().invoke(cli, [*args, "--hp", f"{mixed[1]}:selection.rho_end=0.5"])
    assert scoped.exit_code == 0 and "are the same recipe" not in " ".join(scoped.output.split())


def test_an_outside_selection_keeps_a_label_update_in_front_of_a_loss_without_targets():
    """An outside review: the README's example selection reads step.targets without declaring it, and with today's
    rule ``cc+label_update=proden.confidence+selection=example.smallloss`` was refused as a no-op.  Only the shipped
    components' ``reads`` are taken as complete: an outside one may read the targets undeclared."""
    from pllzoo.plugins import make_plugin_manager
    from pllzoo.registry import Registry

    class Undeclared(Component):
        @hookimpl
        def pllzoo_select(self, step):
            return step.targets.amax(1) > 0.5

    plugin = type("P", (), {"pllzoo_register_selections": staticmethod(hookimpl(
        lambda register: register("p0.undeclared", Undeclared)))})
    pm, infos = make_plugin_manager()
    pm.register(plugin, name="p0")
    reg = Registry.build(pm, infos)
    reg.build_components(reg.method("cc+label_update=proden.confidence+selection=p0.undeclared"), {},
                         ("synthetic-lt", "tabular"))
    with pytest.raises(PLLZooError, match="would change nothing"):
        reg.build_components(reg.method("cc+label_update=proden.confidence"), {}, ("synthetic-lt", "tabular"))
