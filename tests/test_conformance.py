"""``pllzoo check`` (:mod:`pllzoo.conformance`): every shipped recipe passes; an outside component that breaks the
contract fails the check that is about it, one line saying what to do, and nothing else fails with it."""

from __future__ import annotations

import dataclasses
import json
import os

import pytest
import torch
from click.testing import CliRunner

from pllzoo import Component, hookimpl, hp
from pllzoo.cli import cli
from pllzoo.conformance import CHECKS, Checker, Outcome, check, cut_points, first_difference
from pllzoo.losses import masked_mean, soft_cross_entropy
from pllzoo.run import Stage
from conftest import registered_methods


@pytest.fixture(autouse=True)
def _one_thread(one_torch_thread):
    """Bit-for-bit comparisons: one torch thread (the command sets it too; the fixture restores the count)."""


class Good(Component):
    """The soft cross-entropy over the selected rows: keeps the contract."""

    @hookimpl
    def pllzoo_loss(self, step):
        return masked_mean(soft_cross_entropy(step.logits, step.targets), step.mask)


class SelfState(Component):
    """Counts its steps on ``self``: lost on resume."""

    def __init__(self, hp=None):
        super().__init__(hp)
        self.steps = 0

    @hookimpl
    def pllzoo_loss(self, step):
        self.steps += 1
        return masked_mean(soft_cross_entropy(step.logits, step.targets), step.mask) * (1 + 0.1 * self.steps)


class SelfPrior(Component):
    """A predict component that keeps a running prior on ``self`` (an outside review: the adjustment changed no
    accuracy of the tiny test set, and "resumes" passed)."""

    def __init__(self, hp=None):
        super().__init__(hp)
        self.prior = None

    @hookimpl
    def pllzoo_on_epoch_end(self, run, state):
        conf = torch.softmax(run.predict_train(), 1).mean(0)
        self.prior = conf if self.prior is None else 0.5 * self.prior + 0.5 * conf

    @hookimpl
    def pllzoo_predict(self, logits, state):
        return logits - 0.01 * torch.log(self.prior)


class NoMask(Component):
    """Reads the targets but averages over the whole batch, undeclared."""

    @hookimpl
    def pllzoo_loss(self, step):
        return soft_cross_entropy(step.logits, step.targets).mean()


class NoTargets(Component):
    """CC's loss, ``-log Σ_{j∈S} p_j``, without declaring that it ignores the targets."""

    @hookimpl
    def pllzoo_loss(self, step):
        log_p = step.logits.log_softmax(1).masked_fill(step.batch.candidates == 0, float("-inf"))
        return masked_mean(-torch.logsumexp(log_p, 1), step.mask)


class LogsMask(Component):
    """Averages over the whole batch, and logs the share the selection kept."""

    @hookimpl
    def pllzoo_loss(self, step):
        step.logs["kept"] = step.mask.float().mean()
        return soft_cross_entropy(step.logits, step.targets).mean()


class LogsTargets(NoTargets):
    """CC's loss; the targets only in a log."""

    @hookimpl
    def pllzoo_loss(self, step):
        step.logs["tmax"] = step.targets.amax(1).mean()
        return super().pllzoo_loss(step)


class FirstEpochMask(Component):
    """Honours the mask in the first epoch, then averages over the whole batch."""

    @hookimpl
    def pllzoo_loss(self, step):
        ce = soft_cross_entropy(step.logits, step.targets)
        return masked_mean(ce, step.mask) if step.epoch == 0 else ce.mean()


class WarmUpMode(Good):
    """A field named as a shipped one the check shortens, of another type and meaning."""

    @dataclasses.dataclass(frozen=True)
    class HParams:
        warm_up: str = hp("linear", "its warm-up's shape", choices=("linear", "cosine"))


class Declared(NoTargets):
    ignores = frozenset({"targets"})


class Unseeded(Component):
    """Scales the loss by bytes from the operating system: no seed makes two runs alike."""

    @hookimpl
    def pllzoo_loss(self, step):
        noise = 1 + int.from_bytes(os.urandom(2), "little") / 65536
        return masked_mean(soft_cross_entropy(step.logits, step.targets), step.mask) * noise


class Weights(Component):
    """Float weights: 1 on even rows, 0.1 on odd ones."""

    @hookimpl
    def pllzoo_select(self, step):
        return torch.where(torch.arange(step.batch.index.shape[0]) % 2 == 0, 1.0, 0.1)


class NaN(Component):
    @hookimpl
    def pllzoo_loss(self, step):
        return step.logits.sum() * float("nan")


class Raises(Component):
    @hookimpl
    def pllzoo_loss(self, step):
        raise RuntimeError("boom")


OUTSIDE = {"t.good": Good, "t.selfprior": SelfPrior, "t.warmupmode": WarmUpMode, "t.selfstate": SelfState, "t.nomask": NoMask, "t.notargets": NoTargets,
           "t.logsmask": LogsMask, "t.logstargets": LogsTargets, "t.firstepochmask": FirstEpochMask,
           "t.declared": Declared, "t.unseeded": Unseeded, "t.nan": NaN, "t.raises": Raises}


@pytest.fixture
def outside(monkeypatch):
    """The process-wide registry with the plugin ``t`` and its losses added (what the CLI sees)."""
    import pllzoo.registry
    from pllzoo.plugins import make_plugin_manager
    from pllzoo.registry import Registry

    plugin = type("T", (), {
        "pllzoo_register_losses": staticmethod(hookimpl(
            lambda register: [register(name, cls) for name, cls in OUTSIDE.items() if name != "t.selfprior"])),
        "pllzoo_register_predictors": staticmethod(hookimpl(lambda register: register("t.selfprior", SelfPrior))),
        "pllzoo_register_selections": staticmethod(hookimpl(lambda register: register("t.weights", Weights)))})
    pm, infos = make_plugin_manager()
    pm.register(plugin, name="t")
    reg = Registry.build(pm, infos)
    monkeypatch.setattr(pllzoo.registry, "_REGISTRY", reg)
    return reg


def _verdicts(*args: str) -> tuple[int, dict[str, dict[str, tuple[str, str]]], str]:
    res = CliRunner().invoke(cli, ["check", *args, "--json"])
    assert "Traceback" not in res.output, res.output
    found: dict[str, dict[str, tuple[str, str]]] = {}
    if res.exit_code in (0, 1):
        for row in json.loads(res.stdout):
            found.setdefault(row["method"], {})[row["check"]] = (row["status"], row["detail"])
    return res.exit_code, found, res.output


def test_an_outside_loss_that_keeps_the_contract_passes_every_check(outside):
    code, found, _ = _verdicts("proden+loss=t.good,cc+loss=t.good")
    assert code == 0 and list(found) == ["proden+loss=t.good", "cc+loss=t.good"]
    for verdicts in found.values():
        assert {c: s for c, (s, _) in verdicts.items()} == {c: "ok" for c in CHECKS}, verdicts


@pytest.mark.parametrize("loss, failing, says", [
    ("t.selfstate", "resumes", "stopped after epoch record 1 and resumed, the run differs from the uninterrupted "
                               "one: epoch record 2: loss"),
    ("t.nomask", "honours the mask", "in the last epoch of stage 'train', dropping every other row of each batch in "
                                     "the selection changed no weight: the loss 't.nomask' does not read step.mask "
                                     "there; make it read it, or declare ignores = frozenset({'mask'})"),
    ("t.notargets", "reads the targets", "the loss 't.notargets' does not read step.targets there"),
    # an outside review: a log that reads the mask (or the targets) counted as training that changed
    ("t.logsmask", "honours the mask", "the loss 't.logsmask' does not read step.mask there"),
    ("t.logstargets", "reads the targets", "the loss 't.logstargets' does not read step.targets there"),
    # ... and a loss that honours the mask in the first epoch only passed
    ("t.firstepochmask", "honours the mask", "the loss 't.firstepochmask' does not read step.mask there"),
])
def test_an_outside_loss_that_breaks_the_contract_fails_that_check_alone(outside, loss, failing, says):
    method = f"proden+loss={loss}"
    code, found, _ = _verdicts(method)
    assert code == 1
    assert list(found[method]) == list(CHECKS)
    bad = {name: detail for name, (status, detail) in found[method].items() if status != "ok"}
    assert list(bad) == [failing] and says in bad[failing], found


def test_a_predictor_keeping_state_on_self_fails_resumes(outside):
    code, found, _ = _verdicts("proden+predict=t.selfprior")
    assert code == 1 and found["proden+predict=t.selfprior"]["resumes"][0] == "fail"
    assert "the uninterrupted one: deployed test logits (resumed against" in \
        found["proden+predict=t.selfprior"]["resumes"][1]
    assert {c: s for c, (s, _) in found["proden+predict=t.selfprior"].items() if c != "resumes"} == \
        {c: "ok" for c in CHECKS if c != "resumes"}


def test_a_declared_ignore_is_skipped_not_failed(outside):
    code, found, _ = _verdicts("cc+loss=t.declared")
    assert code == 0 and found["cc+loss=t.declared"]["reads the targets"] == (
        "skip", "the loss 't.declared' declares ignores 'targets'")


@pytest.mark.parametrize("loss, says", [
    ("t.nan", "loss component 't.nan' (plugin 't'): pllzoo_loss returned a non-finite loss (nan)"),
    ("t.raises", "loss component 't.raises' (plugin 't') failed in pllzoo_loss: RuntimeError: boom"),
])
def test_a_loss_that_does_not_train_fails_trains_and_skips_the_rest(outside, loss, says):
    method = f"proden+loss={loss}"
    code, found, _ = _verdicts(method)
    assert code == 1 and found[method]["trains"][0] == "fail" and says in found[method]["trains"][1], found
    assert {c: s for c, (s, _) in found[method].items() if c != "trains"} == {c: "skip" for c in CHECKS[1:]}


def test_an_unseeded_loss_fails_deterministic_and_nothing_is_compared_after(outside):
    method = "proden+loss=t.unseeded"
    code, found, _ = _verdicts(method)
    assert code == 1 and found[method]["trains"][0] == "ok"
    assert found[method]["deterministic"][0] == "fail"
    assert "a second run with the same seed differs: epoch record 1: loss" in found[method]["deterministic"][1]
    assert {found[method][c][0] for c in CHECKS[2:]} == {"skip"}


@pytest.mark.parametrize("name", registered_methods())
def test_every_shipped_recipe_keeps_the_contract(name, registry):
    """``resumes`` is tests/test_resume_every_method.py's, on more data kinds and cut points."""
    only = {"trains", "deterministic", "honours the mask", "reads the targets"}
    found = check(Checker(registry, registry.method(name)), only)
    assert [f.check for f in found] == [c for c in CHECKS if c in only]
    assert all(f.status in ("ok", "skip") for f in found), found


@pytest.mark.parametrize("args, says", [
    (["proden", "--hp", "train.lr=1"], "--hp train.lr: the check trains with its own settings"),
    (["nope"], "unknown method 'nope'"),
    ([" , "], "no method given"),
    (["proden+selection=solar.classwise"], "needs 'prior'"),  # refused before training
    (["solar", "--hp", "selection.rho_end=2"], "rho_end"),
    # an outside review: the messages of bench named --methods, and listed train.* keys the check refuses
    (["proden", "--hp", "nope:loss.cr=false"], "method 'nope' is not one of METHODS"),
    (["proden", "--hp", "loss.nope=1"], "unknown hyper-parameter 'loss.nope'; valid: label_update.mask, loss.cr, "
                                        "loss.mixup, loss.mixup_alpha"),
])
def test_cli_refuses_what_it_cannot_check_with_exit_2(outside, args, says):
    """A refusal before any training is exit 2, a failed check exit 1 (an outside review: both were 1)."""
    res = CliRunner().invoke(cli, ["check", *args])
    text = " ".join(res.output.split())
    assert res.exit_code == 2 and says in text and "Traceback" not in res.output, res.output
    assert "train.model" not in text


def test_cli_keeps_the_callers_thread_count(outside):
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        assert CliRunner().invoke(cli, ["check", "proden"]).exit_code == 0
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)


def test_an_in_process_command_leaves_the_callers_inter_op_threads_settable():
    """torch sets inter-op threads once per process and for good: an in-process ``check`` left a session's count
    at 1 and its own ``set_num_interop_threads`` refused (an outside review).  A fresh interpreter, as a
    notebook's: the count is the caller's after the command and the caller may still set it."""
    import subprocess
    import sys

    code = ("import torch\nfrom pllzoo.cli import cli\nbefore = torch.get_num_interop_threads()\n"
            "cli(['check', 'proden'], standalone_mode=False)\n"
            "assert torch.get_num_interop_threads() == before, (before, torch.get_num_interop_threads())\n"
            "torch.set_num_interop_threads(before + 1)\nprint(torch.get_num_interop_threads() - before)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert done.returncode == 0 and done.stdout.split()[-1] == "1", done.stdout[-2000:] + done.stderr[-2000:]


def test_the_table_names_every_check(outside):
    res = CliRunner().invoke(cli, ["check", "proden+loss=t.good"])
    assert res.exit_code == 0, res.output
    for name in CHECKS:
        assert name in res.output


def test_first_difference_compares_bits():
    nan = torch.tensor([float("nan"), 1.0])
    a = Outcome([{"loss": float("nan"), "wall_s": 1.0}], {"state x": nan})
    assert first_difference(a, Outcome([{"loss": float("nan"), "wall_s": 2.0}], {"state x": nan.clone()})) is None
    assert first_difference(a, Outcome([{"loss": 0.5}], {"state x": nan})) == "epoch record 1: loss nan against 0.5"
    assert first_difference(a, Outcome(a.records, {"state x": torch.tensor([float("nan"), 1.0 + 2 ** -23])})) \
        == "state x"
    assert first_difference(a, Outcome(a.records, {"state x": nan.double()})) == "state x"
    assert first_difference(a, Outcome(a.records, {"state y": nan})) == "not the same tensors: state x, state y"
    assert first_difference(a, Outcome(a.records * 2, a.tensors)) == "1 epoch records against 2"


def test_cut_points_by_hand():
    assert cut_points([Stage(epochs=2), Stage(epochs=None)], 3) == [1, 2, 3, 4]  # in, boundary, in, before end
    assert cut_points([Stage(epochs=None)], 3) == [1, 2]
    assert cut_points([Stage(epochs=1), Stage(epochs=None)], 2) == [1, 2]  # a 1-epoch stage: its boundary only
    assert cut_points([Stage(epochs=None)], 1) == []


def test_a_stop_signal_is_no_verdict_and_ends_the_check_with_its_status(outside, monkeypatch):
    """An outside review: Ctrl-C during a probe became "the probe run failed: stopped by SIGINT" (a FAIL blamed on
    the recipe), or was lost between two runs.  A stop ends the command with 128 + N after the verdicts so far."""
    from pllzoo import checkpoint, conformance

    def stopped(*args, **kwargs):
        raise checkpoint.Stopped("stopped by SIGINT after epoch 1/3 of stage 'train'", 130)

    monkeypatch.setattr(conformance.Checker, "weights_after", stopped)  # the first probe run
    res = CliRunner().invoke(cli, ["check", "proden,cc", "--json"])
    assert res.exit_code == 130 and "Traceback" not in res.output
    assert "Error: pllzoo check stopped (stopped by SIGINT after epoch 1/3 of stage 'train'); the checks listed are " \
           "complete, the others did not run" in res.output
    rows = json.loads(res.stdout)
    assert [(r["method"], r["check"], r["status"]) for r in rows] == [
        ("proden", "trains", "ok"), ("proden", "deterministic", "ok"), ("proden", "resumes", "ok")]


def test_a_one_epoch_stage_is_probed_only_where_no_stage_is_longer(registry):
    """An outside review: with SoLar's pre-estimation at 1 epoch, that epoch is also the stage's first, where
    solar.loss trains every row by design (Alg. l.2), and both probes failed a correct loss."""
    found = check(Checker(registry, registry.method("solar"), {"estimator.est_epochs": "1"}))
    assert {f.check: f.status for f in found} == {c: "ok" for c in CHECKS}, found


@pytest.mark.parametrize("loss", ["solar", "mse"])
def test_float_weights_are_honoured_or_refused(outside, loss):
    """An outside review: solar.loss and mse/exp's `full_set=mask` read the mask with .bool(), so a selection's
    float weights trained as plain membership, silently."""
    reg = outside
    method = reg.method(f"{loss}+selection=t.weights")
    overrides = {"loss.full_set": "mask"} if loss == "mse" else {}
    checker = Checker(reg, method, overrides)
    if loss == "solar":
        with pytest.raises(Exception, match="solar.loss takes the selection as a set of reliable rows"):
            checker.run()
    else:
        weighted = checker.run()
        plain = Checker(reg, reg.method("mse"), overrides).run()
        assert first_difference(weighted, plain) is not None  # the weights count


def test_the_check_shortens_shipped_components_only(outside):
    """An outside review: the check's short stages (loss.warm_up=2, ...) were given to any component with a field of
    that name: an outside loss's str warm_up was refused, exit 2, for a value the user never gave."""
    code, found, output = _verdicts("proden+loss=t.warmupmode")
    assert code == 0, output
