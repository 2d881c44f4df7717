"""Hyper-parameter ranges (``hp(..., ge=/gt=/le=/lt=)``): checked where overrides and dataset defaults are
applied, one line naming the key, the value and the range; a value at a closed bound is accepted."""

from __future__ import annotations

import dataclasses
import re
import math
from dataclasses import dataclass
from typing import Optional, Union

import pytest
from click.testing import CliRunner

from pllzoo import bench
from pllzoo.cli import cli
from pllzoo.data.base import DataOptions
from pllzoo.errors import PLLZooError
from pllzoo.hparams import Range, check, describe, hp, override
from pllzoo.run import TrainConfig
from conftest import make_tiny_data


@dataclass(frozen=True)
class Bounded:
    p: float = hp(0.5, "a probability", ge=0, le=1)
    rate: float = hp(0.1, "a rate", gt=0)
    m: float = hp(0.9, "a momentum", ge=0, lt=1)
    n: int = hp(1, "a count", ge=1)
    cap: float = hp(-1.0, "at most zero", le=0)
    steps: tuple[int, ...] = hp((1, 2), "epochs", ge=0)
    free: float = hp(3.0, "no range")


@pytest.mark.parametrize("key, text, value, bound", [
    ("p", "1.5", "1.5", "in [0, 1]"), ("p", "-0.1", "-0.1", "in [0, 1]"),
    ("rate", "0", "0.0", "> 0"), ("rate", "-1e-3", "-0.001", "> 0"),
    ("m", "1", "1.0", "in [0, 1)"), ("m", "-0.5", "-0.5", "in [0, 1)"),
    ("n", "0", "0", "≥ 1"), ("cap", "0.5", "0.5", "≤ 0"),
    ("p", "nan", "nan", "in [0, 1]"), ("rate", "nan", "nan", "> 0"),
    ("rate", "inf", "inf", "> 0"), ("cap", "-inf", "-inf", "≤ 0"),  # a bounded number is a finite one
])
def test_a_value_outside_its_range_is_one_line_naming_key_value_range(key, text, value, bound):
    with pytest.raises(PLLZooError) as err:
        override(Bounded(), {key: text}, where="slot")
    assert str(err.value) == f"bad value for slot.{key}: {value}; must be {bound}"


@pytest.mark.parametrize("key, text", [("p", "0"), ("p", "1"), ("m", "0"), ("n", "1"), ("cap", "0"),
                                       ("rate", "1e-12"), ("free", "-1e9"), ("steps", "0,5")])
def test_a_value_at_a_closed_bound_or_inside_is_accepted(key, text):
    assert getattr(override(Bounded(), {key: text}, where="slot"), key) == \
        (tuple(int(t) for t in text.split(",")) if key == "steps" else type(getattr(Bounded(), key))(text))


def test_tuples_are_checked_element_by_element_and_flags_too():
    with pytest.raises(PLLZooError, match=r"^bad value for slot\.steps: \(3, -1\); must be ≥ 0$"):
        override(Bounded(), {"steps": "3,-1"}, where="slot")
    with pytest.raises(PLLZooError, match=r"^bad value for slot\.n: 0; must be ≥ 1$"):
        override(Bounded(), {"n": 0}, where="slot")  # an already parsed value (--epochs, --batch-size)


def test_range_contains_and_prints():
    assert 0 in Range(0, 1) and 1 in Range(0, 1) and 0 not in Range(0, 1, low_open=True)
    assert 1 not in Range(0, 1, high_open=True) and math.inf not in Range(0) and math.nan not in Range(0)
    assert True not in Range(0, 1) and "0.5" not in Range(0, 1)  # a range is for numbers
    assert [str(r) for r in (Range(0, 1), Range(0, 1, True, True), Range(0, low_open=True), Range(1), Range(None, 0))] \
        == ["[0, 1]", "(0, 1)", "> 0", "≥ 1", "≤ 0"]


def test_a_declaration_is_checked_itself():
    """Raised while the plugin's module is imported (discovery reports it): the message names the field by its
    default and help, since the field's name is not known yet, and the class body and line that declare it (an
    outside review: nothing said where)."""
    with pytest.raises(TypeError, match=r"^hp\(-0.1, 'lr'\) in \w+ \(test_hp_ranges.py:\d+\): the default is outside "
                                        r"its range > 0$"):
        hp(-0.1, "lr", gt=0)
    with pytest.raises(TypeError, match="one lower bound"):
        hp(0.5, "p", ge=0, gt=0)
    with pytest.raises(TypeError, match=r"^hp\('z', 'mode'\) in \w+ \(test_hp_ranges.py:\d+\): the default is not one "
                                        r"of its choices \('a', 'b'\)$"):
        hp("z", "mode", choices=("a", "b"))
    with pytest.raises(TypeError, match=r"^hp\(\[1\], 'xs'\) in \w+ \(test_hp_ranges.py:\d+\): hyper-parameters must "
                                        "be immutable"):
        hp([1], "xs")
    with pytest.raises(TypeError) as err:
        class MyHParams:  # noqa: F841  (the usual place: a class body)
            a: float = hp(5.0, "a", ge=0, le=1)
    line = err.traceback[-2].lineno + 1  # hp's caller: the class body's line (traceback lines are 0-based)
    assert str(err.value) == f"hp(5.0, 'a') in MyHParams (test_hp_ranges.py:{line}): the default is outside its " \
                             "range [0, 1]"


def test_ranges_are_metadata_only():
    """No default changes and nothing enters a run's hashed config (the run-id tests check committed ids)."""
    assert dataclasses.asdict(Bounded()) == {"p": 0.5, "rate": 0.1, "m": 0.9, "n": 1, "cap": -1.0, "steps": (1, 2),
                                             "free": 3.0}
    assert dataclasses.fields(TrainConfig)[2].metadata["range"] == Range(0, low_open=True)
    assert TrainConfig().lr == 0.01 and TrainConfig().momentum == 0.9


def _plan(registry, methods=("proden",), hp_=None, **kw):
    return bench.plan(registry, list(methods), "synthetic-lt", [1], DataOptions(subset=100), device="cpu",
                      hp=hp_ or {}, **kw)


@pytest.mark.parametrize("key, value, shown", [
    ("train.lr", "-0.1", "bad value for train.lr: -0.1; must be > 0"),
    ("train.lr", "0", "bad value for train.lr: 0.0; must be > 0"),
    ("train.momentum", "-0.9", "bad value for train.momentum: -0.9; must be in [0, 1)"),
    ("train.momentum", "1", "bad value for train.momentum: 1.0; must be in [0, 1)"),
    ("train.weight_decay", "-1e-4", "bad value for train.weight_decay: -0.0001; must be ≥ 0"),
    ("train.eval_batch_size", "0", "bad value for train.eval_batch_size: 0; must be ≥ 1"),
    ("train.batch_size", "0", "bad value for train.batch_size: 0; must be ≥ 1"),
    ("train.epochs", "0", "bad value for train.epochs: 0; must be ≥ 1"),
    ("train.checkpoint_minutes", "-1", "bad value for train.checkpoint_minutes: -1.0; must be ≥ 0"),
    ("train.milestones", "10,-1", "bad value for train.milestones: (10, -1); must be ≥ 0"),
    ("train.schedule", "linear", "bad value for train.schedule: 'linear'; valid: constant, step, cosine"),
])
def test_train_ranges_fail_at_plan_time(registry, key, value, shown):
    with pytest.raises(PLLZooError) as err:
        _plan(registry, hp_={key: value})
    assert str(err.value) == shown


def test_train_values_at_their_bounds_are_accepted(registry):
    hp_ = {"train.momentum": "0", "train.weight_decay": "0", "train.eval_batch_size": "1", "train.epochs": "1",
           "train.checkpoint_every": "0", "train.cosine_min_factor": "1"}
    (p,) = _plan(registry, hp_=hp_)
    assert (p.train.momentum, p.train.weight_decay, p.train.eval_batch_size, p.train.epochs) == (0, 0, 1, 1)


def test_the_epochs_and_batch_size_flags_are_checked(registry):
    with pytest.raises(PLLZooError, match=r"^bad value for train\.epochs: 0; must be ≥ 1$"):
        _plan(registry, epochs=0)
    with pytest.raises(PLLZooError, match=r"^bad value for train\.batch_size: -4; must be ≥ 1$"):
        _plan(registry, batch_size=-4)


def test_a_datasets_train_defaults_are_checked_too():
    data = make_tiny_data()
    assert bench.train_config(data, None, None, {}).lr == 0.1
    bad = dataclasses.replace(data, defaults=dataclasses.replace(data.defaults, momentum=1.2))
    with pytest.raises(PLLZooError, match=r"^bad value for train\.momentum: 1\.2; must be in \[0, 1\)$"):
        bench.train_config(bad, None, None, {})


@pytest.mark.parametrize("field, value, why", [
    ("epochs", 2.0, "epochs = 2.0 is float; train.epochs takes int"),  # every run failed, late (TypeError)
    ("milestones", (1.5,), "milestones = (1.5,) is tuple; train.milestones takes a tuple of int"),
    ("milestones", 5, "milestones = 5 is int; train.milestones takes a tuple of int"),
    ("batch_size", True, "batch_size = True is bool; train.batch_size takes int"),
    ("lr", "0.1", "lr = '0.1' is str; train.lr takes float"),
])
def test_a_datasets_train_defaults_of_another_type_are_one_line(field, value, why):
    """An outside review: a dataset's defaults were checked for range, never type."""
    data = make_tiny_data()
    bad = dataclasses.replace(data, defaults=dataclasses.replace(data.defaults, **{field: value}))
    with pytest.raises(PLLZooError, match=rf"^dataset '{data.name}': its training default {re.escape(why)}$"):
        bench.train_config(bad, None, None, {})


def test_a_datasets_int_default_for_a_float_names_the_run_as_hp_does():
    """An outside review: lr=1 in a dataset's defaults was recorded as 1 and named another run than --hp
    train.lr=1 (1.0)."""
    data = make_tiny_data()
    ints = dataclasses.replace(data, defaults=dataclasses.replace(data.defaults, lr=1, weight_decay=0,
                                                                  milestones=[3, 1]))
    cfg = bench.train_config(ints, None, None, {})
    assert (cfg.lr, cfg.weight_decay, cfg.milestones) == (1.0, 0.0, (3, 1))
    assert type(cfg.lr) is float and type(cfg.weight_decay) is float
    assert cfg == bench.train_config(data, None, None, {"lr": "1", "weight_decay": "0", "milestones": "3,1"})


@pytest.mark.parametrize("method, key, value, shown", [
    ("solar", "selection.rho_end", "1.5", "bad value for selection.rho_end: 1.5; must be in [0, 1]"),
    ("solar", "selection.tau", "-0.01", "bad value for selection.tau: -0.01; must be in [0, 1]"),
    ("solar", "label_update.lam", "0", "bad value for label_update.lam: 0.0; must be > 0"),
    ("solar", "label_update.queue_length", "0", "bad value for label_update.queue_length: 0; must be ≥ 1"),
    ("solar", "estimator.est_epochs", "-1", "bad value for estimator.est_epochs: -1; must be ≥ 0"),
    ("pico", "loss.temperature", "0", "bad value for loss.temperature: 0.0; must be > 0"),
    ("pico", "loss.proto_m", "1.01", "bad value for loss.proto_m: 1.01; must be in [0, 1]"),
    ("valen", "loss.knn", "0", "bad value for loss.knn: 0; must be ≥ 1"),
    ("proden", "loss.mixup_alpha", "-4", "bad value for loss.mixup_alpha: -4.0; must be > 0"),
])
def test_builtin_component_ranges(registry, method, key, value, shown):
    with pytest.raises(PLLZooError) as err:
        _plan(registry, [method], {key: value})
    assert str(err.value).startswith(shown + f" ({key.split('.')[0]} ") and str(err.value).endswith(
        f" of method {method!r})")  # the component the value was refused by


def test_builtin_values_at_their_bounds_are_accepted(registry):
    (p,) = _plan(registry, ["solar"], {"selection.rho_end": "1", "selection.rho_start": "0",
                                       "estimator.est_epochs": "0", "label_update.queue_length": "1"})
    assert p.config["hparams"]["selection"]["rho_end"] == 1.0 and p.config["hparams"]["estimator"]["est_epochs"] == 0


def test_every_registered_default_is_within_its_range(registry):
    """Declared defaults (hp checks them) and the dataset defaults components add pass :func:`check`."""
    for slot, comps in registry.components.items():
        for name, (cls, _) in comps.items():
            check(cls.HParams(), f"{slot}.{name}")
            for dataset, kind in (("cifar10lt", "image"), ("cifar100lt", "image"), ("synthetic-lt", "tabular")):
                override(cls.HParams(), cls.dataset_defaults(dataset, kind), where=f"{slot}.{name}")


def test_cli_range_error_is_one_line(tmp_path):
    args = ["bench", "--methods", "proden", "--subset", "100", "--hp", "train.lr=-0.5", "--out", str(tmp_path / "o")]
    res = CliRunner().invoke(cli, args)
    assert res.exit_code == 1 and "Traceback" not in res.output
    assert res.output.strip().splitlines() == ["Error: bad value for train.lr: -0.5; must be > 0"]
    assert not (tmp_path / "o").exists()


def test_methods_hparams_shows_each_range(monkeypatch):
    monkeypatch.setenv("COLUMNS", "400")  # rich wraps to the terminal's width
    out = CliRunner().invoke(cli, ["methods", "--hparams"]).output
    line = next(line for line in out.splitlines() if "rho_end" in line)
    assert "(range: [0, 1])" in line
    assert "(range: > 0)" in next(line for line in out.splitlines() if "temperature" in line)
    assert ("lr", 0.01, "SGD learning rate (range: > 0)") in describe(TrainConfig)


@dataclass(frozen=True)
class Typed:
    ratio: float = 1  # an int default of a float field
    flag: bool = False
    n: int | None = None
    name: str = "a"


@pytest.mark.parametrize("key, text, value", [
    ("ratio", "0.5", 0.5),  # parsed as its default's type, int, this used to be refused
    ("ratio", "2", 2.0),
    ("flag", "false", False),
    ("flag", "on", True),
    ("n", "3", 3),
    ("name", "7", "7"),
])
def test_a_value_is_parsed_by_the_fields_annotation(key, text, value):
    got = getattr(override(Typed(), {key: text}, "t"), key)
    assert got == value and type(got) is type(value)


@pytest.mark.parametrize("key, text, why", [("flag", "maybe", "expected a boolean, got 'maybe'"),
                                            ("n", "2.5", "expected a whole number, got '2.5'")])
def test_a_value_its_annotation_does_not_take_is_one_line(key, text, why):
    with pytest.raises(PLLZooError, match=f"^bad value for t.{key}: {why}$"):
        override(Typed(), {key: text}, "t")


@dataclass(frozen=True)
class Forms:
    limit: int | None = hp(None, "a count, or none")
    steps: tuple[int, ...] = hp((), "whole epochs, none by default")


def test_none_and_tuple_elements_parse_by_the_annotation():
    """An outside review: an ``int | None`` field could not be set back to None from --hp, and a ``tuple[int, ...]``
    with an empty default took 1.5 (its element type came from the default's first element)."""
    assert override(Forms(limit=3), {"limit": "none"}, where="slot").limit is None
    assert override(Forms(), {"limit": "7"}, where="slot").limit == 7
    assert override(Forms(), {"steps": "3,5"}, where="slot").steps == (3, 5)
    with pytest.raises(PLLZooError, match=r"slot\.steps.*expected a whole number, got '1\.5'"):
        override(Forms(), {"steps": "3,1.5"}, where="slot")


@dataclass(frozen=True)
class MoreForms:
    steps: tuple[int, ...] | None = hp(None, "whole epochs, or none")
    weights: tuple[float, ...] = hp((0.5,), "numbers")
    keep: float = hp(1, "a float field an outside plugin declared with an int default")


def test_typed_values_follow_the_annotation_too():
    """A replayed record's typed values (a second review): None for an optional tuple, a tuple of ints for its
    ``tuple[int, ...] | None`` text annotation (not floats, from a fallback), ints made floats in a float tuple, no
    bool in a tuple of numbers, and the text path parses such a tuple as a tuple (it stayed the string '3,5')."""
    assert override(MoreForms(steps=(2,)), {"steps": None}, where="slot").steps is None
    steps = override(MoreForms(), {"steps": [3, 5]}, where="slot").steps
    assert steps == (3, 5) and all(type(v) is int for v in steps)
    assert override(MoreForms(), {"steps": "3,5"}, where="slot").steps == (3, 5)
    weights = override(MoreForms(), {"weights": [1, 2]}, where="slot").weights
    assert weights == (1.0, 2.0) and all(type(v) is float for v in weights)
    for bad, field in (([True], "steps"), ([True], "weights"), ([1.5], "steps"), (["1"], "weights")):
        with pytest.raises(PLLZooError, match=rf"bad value for slot\.{field}: .*expected a list of"):
            override(MoreForms(), {field: bad}, where="slot")


@dataclass(frozen=True)
class WrappedForms:  # postponed annotations (this module's __future__ import): their text is all there is
    count: Optional[int] = hp(None, "a count, or none")
    steps: Union[tuple[int, ...], None] = hp(None, "whole epochs, or none")


def test_optional_and_union_texts_parse_by_their_inner_type():
    """A review: ``Optional[int]`` took any text as a string, ``Union[tuple[int, ...], None]`` kept "1,2"."""
    assert override(WrappedForms(), {"count": "3"}, where="slot").count == 3
    assert override(WrappedForms(count=3), {"count": "none"}, where="slot").count is None
    with pytest.raises(PLLZooError, match=r"slot\.count: expected a whole number, got 'abc'"):
        override(WrappedForms(), {"count": "abc"}, where="slot")
    assert override(WrappedForms(), {"steps": "1,2"}, where="slot").steps == (1, 2)
    assert override(WrappedForms(), {"steps": [1, 2]}, where="slot").steps == (1, 2)


@pytest.mark.parametrize("given", [1, 1.0, "1", "1.0"])
def test_an_int_default_of_a_float_field_names_one_run(given):
    """An outside plugin's ``keep: float = hp(1)`` records ``1``; a replay of that run (typed 1) or ``--hp keep=1``
    (text) gave 1.0, another run id (a second review); the same number is the default itself, another one a float."""
    keep = override(MoreForms(), {"keep": given}, where="slot").keep
    assert keep == 1 and type(keep) is int
    other = override(MoreForms(), {"keep": "2" if isinstance(given, str) else 2}, where="slot").keep
    assert other == 2.0 and type(other) is float


def test_a_whole_number_past_64_bits_is_refused_before_the_run():
    """An outside review: label_update.max_iter=99999999999999999999 passed (ge=1, no upper bound) and the run failed
    with OverflowError inside torch, a traceback in error.txt."""
    from click.testing import CliRunner

    from pllzoo.cli import cli

    res = CliRunner().invoke(cli, ["bench", "--methods", "solar", "--hp", "label_update.max_iter=" + "9" * 20,
                                   "--dry-run"])
    assert res.exit_code != 0 and "Traceback" not in res.output
    assert res.output.strip().splitlines()[-1].startswith(
        f"Error: bad value for label_update.max_iter: {'9' * 20}; must fit in 64 bits")
    res = CliRunner().invoke(cli, ["bench", "--methods", "solar", "--hp", f"label_update.max_iter={2 ** 63 - 1}",
                                   "--dry-run"])
    assert "must fit in 64 bits" not in res.output


def test_a_schedule_field_the_schedule_does_not_read_is_warned_not_refused(tmp_path):
    """An outside review: train.milestones under synthetic-lt's cosine decay was recorded, named another run and
    changed nothing, silently; now a warning says so.  Not a refusal (a second review): a run recorded so must
    still replay, and a sweep may draw the schedule beside fixed milestones."""
    from click.testing import CliRunner

    from pllzoo.cli import cli

    args = ["bench", "--methods", "proden", "--subset", "200", "--batch-size", "64", "--epochs", "1", "--threads", "1"]
    res = CliRunner().invoke(cli, [*args, "--hp", "train.milestones=1", "--out", str(tmp_path / "a")])
    assert res.exit_code == 0, res.output
    assert "Warning: train.milestones is read by the step schedule only, and this run's is cosine" in res.output
    (run,) = (tmp_path / "a" / "runs").iterdir()
    res = CliRunner().invoke(cli, ["bench", "--from-run", str(run), "--out", str(tmp_path / "b"), "--threads", "1"])
    assert res.exit_code == 0 and (tmp_path / "b" / "runs" / run.name).is_dir(), res.output
    res = CliRunner().invoke(cli, [*args, "--hp", "train.schedule=step", "--dry-run"])
    assert res.exit_code == 0 and "train.schedule=step with no train.milestones keeps the LR constant" in res.output
    res = CliRunner().invoke(cli, [*args, "--hp", "train.schedule=step", "--hp", "train.milestones=1", "--dry-run"])
    assert res.exit_code == 0 and "schedule only" not in res.output and "keeps the LR constant" not in res.output


@pytest.mark.parametrize("changes, words", [
    ({"milestones": [1.5]}, "bad value for train.milestones: [1.5] (list); expected a list of int"),
    ({"milestones": 1}, "bad value for train.milestones: 1 (int); expected a list of int"),
    ({"drop_last": 1}, "bad value for train.drop_last: 1 (int); expected bool"),
])
def test_a_typed_value_of_another_type_is_one_line(changes, words):
    """A replayed record's typed values (an outside review: a hand-edited config.json's milestones [1.5] passed, 1
    failed in the run); an int for a float is that float, as the command line's text gives it."""
    from pllzoo.hparams import override
    from pllzoo.run import TrainConfig

    with pytest.raises(PLLZooError, match=re.escape(words)):
        override(TrainConfig(), changes, "train")
    typed = override(TrainConfig(), {"lr": 1, "milestones": [3, 1]}, "train")
    assert typed == override(TrainConfig(), {"lr": "1", "milestones": "3,1"}, "train") and type(typed.lr) is float

