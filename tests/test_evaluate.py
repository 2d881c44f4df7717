"""``pllzoo evaluate``: a finished run's final model re-scored without training — as trained it
reproduces the last record, and SoLar-LA's ζ moves predictions as g − ζ·log r says."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
import torch
from click.testing import CliRunner

from pllzoo.cli import cli
from pllzoo.errors import PLLZooError
from pllzoo.evaluate import rescore
from pllzoo.registry import get_registry


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("evaluate")
    result = CliRunner().invoke(cli, ["bench", "--methods", "solar", "--dataset", "synthetic-lt", "--seeds", "1",
                                      "--epochs", "2", "--hp", "estimator.est_epochs=1", "--device", "cpu",
                                      "--out", str(out)])
    assert result.exit_code == 0, result.output
    (run,) = (out / "runs").iterdir()
    return run


def _last(run: Path) -> dict:
    return json.loads((run / "log.jsonl").read_text().splitlines()[-1])


def test_as_trained_reproduces_the_last_record(run_dir):
    last = _last(run_dir)
    for got in (rescore(get_registry(), run_dir, {}, device="cpu"),
                rescore(get_registry(), run_dir, {"predict.zeta": "0"}, predict="solar.la", device="cpu")):
        for key in ("acc_all", "acc_many", "acc_medium", "acc_few", "class_acc"):
            assert got[key] == last[key], key


def test_large_zeta_predicts_the_rarest_estimated_class(run_dir):
    """ζ = 1e4 swamps the logits: argmax(g − ζ log r) = argmin r for every test row."""
    prior = torch.tensor(_last(run_dir)["prior"])
    got = rescore(get_registry(), run_dir, {"predict.zeta": "1e4"}, predict="solar.la", device="cpu")
    rarest = int(prior.argmin())
    assert got["method"] == "solar+predict=solar.la"
    assert [a for a in got["class_acc"]] == [100.0 if k == rarest else 0.0 for k in range(prior.numel())]


def test_errors(run_dir, tmp_path):
    with pytest.raises(PLLZooError, match="unknown hyper-parameter.*predict.zeta.*this method has none"):
        rescore(get_registry(), run_dir, {"predict.zeta": "1"}, device="cpu")  # plain solar has no predict slot
    with pytest.raises(PLLZooError, match=r"unknown hyper-parameter\(s\) train.nope for solar\+predict=solar.la; "
                                          r"evaluate takes predict.\* only: predict.zeta$"):  # not loss.* (a review)
        rescore(get_registry(), run_dir, {"train.nope": "1"}, predict="solar.la", device="cpu")
    unfinished = tmp_path / "run"
    unfinished.mkdir()
    with pytest.raises(PLLZooError, match="not a run folder"):
        rescore(get_registry(), unfinished, {}, device="cpu")
    (unfinished / "log.jsonl").write_text("")
    with pytest.raises(PLLZooError, match="not a finished run"):
        rescore(get_registry(), unfinished, {}, device="cpu")
    (unfinished / "done").write_text("")
    with pytest.raises(PLLZooError, match="no checkpoint"):
        rescore(get_registry(), unfinished, {}, device="cpu")


def test_cli_prints_and_writes_rows(run_dir, tmp_path):
    out = tmp_path / "rows.csv"
    result = CliRunner().invoke(cli, ["evaluate", str(run_dir), "--predict", "solar.la", "--hp", "predict.zeta=1",
                                      "--device", "cpu", "--csv", str(out)])
    assert result.exit_code == 0, result.output
    assert "predict=solar.la, predict.zeta=1" in result.output and run_dir.name in result.output
    text = out.read_text()
    assert text.splitlines()[0].startswith("run,method,seed,overrides,acc_all") and "predict.zeta=1" in text


def test_cli_md_is_mean_and_sample_std_per_method(run_dir, tmp_path):
    """One row per method and setting; the same run given twice, or a copy of its folder, counts once (an outside
    review: n = 3 with std 0.00), and runs on other data are another table, not averaged in."""
    import shutil

    copy = tmp_path / "copy" / run_dir.name
    shutil.copytree(run_dir, copy)
    renamed = tmp_path / "copy" / "backup"  # a copy under another name is the same run (its config's id)
    shutil.copytree(run_dir, renamed)
    offline = tmp_path / "copy" / "offline"  # the same run trained with --offline: its own id, counted once
    shutil.copytree(run_dir, offline)
    config = json.loads((offline / "config.json").read_text())
    (offline / "config.json").write_text(json.dumps({**config, "data": {**config["data"], "download": False}}))
    out = tmp_path / "table.md"
    result = CliRunner().invoke(cli, ["evaluate", str(run_dir), str(run_dir), str(copy), str(renamed), str(offline),
                                      "--device", "cpu", "--md", str(out)])
    assert result.exit_code == 0, result.output
    assert result.output.count("(each run counts once)") == 4
    last = _last(run_dir)
    rows = [line for line in out.read_text().splitlines() if line.startswith("| solar")]
    assert rows == [f"| solar | {last['acc_all']:.2f} | {last['acc_many']:.2f} | "
                    f"{last['acc_medium']:.2f} | {last['acc_few']:.2f} | 1 |"]
    assert out.read_text().startswith("### Re-scored: as trained")


def test_cli_md_keeps_runs_on_other_data_apart(run_dir, tmp_path):
    other = tmp_path / "other"
    res = CliRunner().invoke(cli, ["bench", "--methods", "solar", "--dataset", "synthetic-lt", "--seeds", "2",
                                   "--epochs", "2", "--hp", "estimator.est_epochs=1", "--subset", "2000",
                                   "--device", "cpu", "--out", str(other)])
    assert res.exit_code == 0, res.output
    (run2,) = (other / "runs").iterdir()
    out = tmp_path / "table.md"
    result = CliRunner().invoke(cli, ["evaluate", str(run_dir), str(run2), "--device", "cpu", "--md", str(out)])
    assert result.exit_code == 0, result.output
    text = out.read_text()
    assert text.count("### Re-scored: as trained (") == 2 and "subset=2000" in text
    rows = tmp_path / "rows.csv"  # the CSV's columns stay as they were (benchmarks/cifar10lt-cpu/la.sh)
    result = CliRunner().invoke(cli, ["evaluate", str(run_dir), "--device", "cpu", "--csv", str(rows)])
    assert result.exit_code == 0 and rows.read_text().splitlines()[0].endswith("acc_few"), result.output
    assert [line.rsplit("|", 2)[1].strip() for line in text.splitlines() if line.startswith("| solar")] == ["1", "1"]
    result = CliRunner().invoke(cli, ["evaluate", str(run_dir), str(run2), "--device", "cpu", "--csv", str(rows)])
    both = pd.read_csv(rows)  # two settings: the CSV says which row is which (an outside review)
    assert result.exit_code == 0 and sorted(both["setting"].str.contains("subset=2000")) == [False, True]


def test_what_is_not_a_run_folder_says_so(run_dir, tmp_path):
    """An outside review: a plain folder was "a damaged run"; a checkpoint of another run ran two remedies together;
    plot of a run folder said it held no finished run."""
    res = CliRunner().invoke(cli, ["evaluate", str(tmp_path), "--device", "cpu"])
    assert res.exit_code == 1 and f"{tmp_path}: not a run folder (no config.json, log.jsonl or checkpoint); give run " \
        "folders OUT/runs/<run-id>, or a results folder OUT" in " ".join(res.output.split())
    res = CliRunner().invoke(cli, ["plot", str(run_dir), "--out", str(tmp_path / "f.png")])
    assert res.exit_code != 0 and "Traceback" not in res.output
    assert f"{run_dir} is a run folder; plot takes results folders" in " ".join(res.output.split())


def test_a_training_setting_is_refused_since_it_would_change_nothing(run_dir):
    with pytest.raises(PLLZooError, match=r"^selection.tau: evaluate re-scores the trained model, so only predict\.\* "):
        rescore(get_registry(), run_dir, {"selection.tau": "0.5"}, predict="solar.la", device="cpu")


def test_a_bounded_tuple_hyper_parameter_is_read_back(tmp_path):
    """A component field ``tuple`` with a bound (as the README advises for sequences): config.json holds it as a
    JSON list, and evaluate passed the list on, which the bound refused (``must be ≥ 0``; an outside review)."""
    from dataclasses import dataclass

    from pllzoo import bench as bench_lib
    from pllzoo.components import Component
    from pllzoo.data.base import DataOptions
    from pllzoo.hparams import hp
    from pllzoo import hookimpl
    from pllzoo.plugins import make_plugin_manager
    from pllzoo.registry import Registry

    @dataclass(frozen=True)
    class Weights:
        weights: tuple[float, ...] = hp((1.0, 2.0), "per-class logit weights, cycled", ge=0)

    class Weighted(Component):
        HParams = Weights

        @hookimpl
        def pllzoo_predict(self, logits, state, features):
            seen.append(self.hp.weights)
            w = torch.tensor(self.hp.weights * logits.shape[1])[: logits.shape[1]]
            return logits * w

    seen: list = []
    plugin = type("P", (), {"pllzoo_register_predictors": staticmethod(hookimpl(
        lambda register: register("p0.weighted", Weighted)))})
    pm, infos = make_plugin_manager()  # the shipped plugins (cc) and p0
    pm.register(plugin, name="p0")
    reg = Registry.build(pm, infos)
    plans = bench_lib.plan(reg, ["cc+predict=p0.weighted"], "synthetic-lt", [1], DataOptions(subset=256), epochs=1,
                           batch_size=64, hp={"predict.weights": "0.5,3"}, device="cpu")
    bench_lib.execute(reg, plans, tmp_path)
    (run,) = [p for p in (tmp_path / "runs").iterdir() if p.is_dir()]
    assert json.loads((run / "config.json").read_text())["hparams"]["predict"]["weights"] == [0.5, 3.0]
    seen.clear()
    row = rescore(reg, run, {})
    assert seen and all(w == (0.5, 3.0) for w in seen)
    assert row["acc_all"] == _last(run)["acc_all"]


def test_predict_replaces_a_predict_swap_the_run_already_has():
    """An outside review: re-scoring `proden-s-cpe+predict=pllzoo.logit_adjust` with --predict solar.la was refused
    as "slot 'predict' is swapped twice" (and ended the whole command)."""
    from pllzoo.evaluate import with_predict
    from pllzoo.registry import get_registry

    assert with_predict("solar", "solar.la") == "solar+predict=solar.la"
    assert with_predict("solar", None) == "solar"
    mixed = with_predict("proden-s-cpe+predict=pllzoo.logit_adjust", "solar.la")
    assert mixed == "proden-s-cpe+predict=solar.la"
    assert get_registry().method(mixed).predict == "solar.la"
    assert with_predict("proden+predict=solar.la+selection=solar.classwise", "none") == \
        "proden+predict=none+selection=solar.classwise"


def test_predict_none_rescores_a_run_whose_estimator_then_only_trained(tmp_path):
    """Known issue of an earlier session: ``evaluate --predict none`` on a ``cc-records`` run was refused with
    training's "would change nothing" check (RECORDS' offset reads nothing in cc+estimator=records.prior), though
    the trained model without the adjustment is a fair question.  Training that recipe stays refused."""
    out = tmp_path / "out"
    res = CliRunner().invoke(cli, ["bench", "--methods", "cc-records", "--dataset", "synthetic-lt", "--subset", "256",
                                   "--epochs", "1", "--batch-size", "64", "--threads", "1", "--out", str(out)])
    assert res.exit_code == 0, res.output
    (run,) = [p for p in (out / "runs").iterdir() if p.is_dir()]
    plain = rescore(get_registry(), run, {}, predict="none", device="cpu")
    adjusted = rescore(get_registry(), run, {}, device="cpu")
    assert adjusted["acc_all"] == _last(run)["acc_all"]
    assert plain["class_acc"] != adjusted["class_acc"]  # the model's own argmax, not the debiased one
    with pytest.raises(PLLZooError, match="would change nothing"):
        get_registry().build_components(get_registry().method("cc-records+predict=none"), {},
                                        ("synthetic-lt", "tabular"))


def test_a_results_folder_stands_for_its_finished_runs(run_dir, tmp_path):
    """An outside review: ``pllzoo evaluate OUT`` (a bench's folder, not a run's) said "damaged run"."""
    out = run_dir.parent.parent
    res = CliRunner().invoke(cli, ["evaluate", str(out), "--threads", "1", "--csv", str(tmp_path / "rows.csv")])
    assert res.exit_code == 0, res.output
    import pandas as pd

    assert pd.read_csv(tmp_path / "rows.csv")["run"].tolist() == [run_dir.name]
    (tmp_path / "empty" / "runs").mkdir(parents=True)
    res = CliRunner().invoke(cli, ["evaluate", str(tmp_path / "empty")])
    assert res.exit_code == 1 and "a bench's results folder without a finished run under runs/" in res.output



def test_an_unknown_hyper_parameter_is_exit_2_as_in_bench(run_dir):
    """An outside review: bench said exit 2 for an unknown name, evaluate 1 for the same name."""
    res = CliRunner().invoke(cli, ["evaluate", str(run_dir), "--hp", "predict.zeta=2", "--device", "cpu"])
    assert res.exit_code == 2 and "unknown hyper-parameter(s) predict.zeta" in res.output


def test_a_run_whose_plugin_is_gone_is_left_out_of_a_study_folder(run_dir, tmp_path, monkeypatch):
    """An outside review: one run whose method plugin was uninstalled refused ``evaluate STUDY`` whole, without
    naming it; now it is left out with a warning naming it, and a run given by its own folder is an error naming
    it."""
    import shutil

    from pllzoo import registry
    from pllzoo.plugins import make_plugin_manager

    study = tmp_path / "study"
    shutil.copytree(run_dir, study / "runs" / run_dir.name)
    monkeypatch.setattr(registry, "_REGISTRY", registry.Registry.build(*make_plugin_manager(only={"baselines"})))
    res = CliRunner().invoke(cli, ["evaluate", str(study), "--device", "cpu", "--threads", "1"])
    assert res.exit_code == 2 and "Traceback" not in res.output
    said = " ".join(res.output.split())  # the plugin its env.json names (a later review)
    assert f"Error: no run could be re-scored; {study / 'runs' / run_dir.name}: trained with plugin 'solar' " \
           "(pllzoo-solar" in said, res.output
    res = CliRunner().invoke(cli, ["evaluate", str(study / "runs" / run_dir.name), "--device", "cpu"])
    assert res.exit_code == 2
    assert f"Error: {study / 'runs' / run_dir.name}: trained with plugin 'solar'" in " ".join(res.output.split())


def test_rescored_leaves_out_only_runs_found_in_a_study_folder():
    from pllzoo.cli.evaluate import _rescored
    from pllzoo.errors import PLLZooError, UnknownNameError

    def resolve(run):
        if run.name == "gone":
            raise UnknownNameError("unknown method 'x'")

    def score(run):
        assert run.name != "gone"
        return {"run": run.name}

    gone, kept = Path("study/runs/gone"), Path("study/runs/kept")
    with pytest.warns(UserWarning, match="left out study/runs/gone: unknown method 'x'"):
        assert _rescored([gone, kept], {Path("study")}, score, resolve) == [{"run": "kept"}]
    with pytest.raises(PLLZooError, match="^study/runs/gone: unknown method 'x'$"):
        _rescored([gone, kept], {gone, kept}, score, resolve)

    def mistyped(run):  # an error of the user's own arguments (a second review: every run was left out)
        raise UnknownNameError("unknown predict component 'solar.lx'")

    with pytest.raises(UnknownNameError, match="^unknown predict component 'solar.lx'$"):
        _rescored([kept], {Path("study")}, mistyped, resolve)


def _copy(run_dir: Path, tmp_path: Path) -> Path:
    import shutil

    return Path(shutil.copytree(run_dir, tmp_path / "runs" / run_dir.name))


def test_a_run_of_a_plugin_no_longer_installed_names_the_plugin(run_dir, tmp_path, monkeypatch):
    """An outside review: after ``pip uninstall`` of a plugin, evaluate and --from-run said "unknown method
    'sharp-la' (did you mean 'solar-la'?)" and never named the plugin that env.json records."""
    run = _copy(run_dir, tmp_path)
    env = json.loads((run / "env.json").read_text())
    env["components"]["loss"] = {"component": "sharp.loss", "plugin": "sharp", "dist": "pllzoo-sharp",
                                 "version": "1.0.0"}
    (run / "env.json").write_text(json.dumps(env))
    monkeypatch.delenv("PLLZOO_LOAD_PLUGINS", raising=False)  # (the registry loaded is the test session's)
    said = r"trained with plugin 'sharp' \(pllzoo-sharp 1\.0\.0: sharp\.loss\), which no loaded plugin registers; " \
           r"install it to re-score"
    with pytest.raises(PLLZooError, match=said):
        rescore(get_registry(), run, {}, device="cpu")
    res = CliRunner().invoke(cli, ["bench", "--from-run", str(run), "--out", str(tmp_path / "again"), "--dry-run"])
    assert res.exit_code != 0 and "Traceback" not in res.output
    assert "trained with plugin 'sharp' (pllzoo-sharp 1.0.0: sharp.loss)" in " ".join(res.output.split())


def test_components_holding_other_hyper_parameters_than_recorded_are_refused(run_dir, monkeypatch):
    """An outside review: a plugin's new version added a field that changes predictions, and evaluate re-scored the
    old run with it "as trained" (19.5 points off) without a word; a recorded key the component lost was dropped."""
    import dataclasses

    from pllzoo.hparams import hp

    reg = get_registry()
    config = json.loads((run_dir / "config.json").read_text())
    name = config["recipe"]["selection"]
    cls, plugin = reg.components["selection"][name]
    later = dataclasses.make_dataclass("Later", [("extra", float, hp(3.0, "a field added in a later version"))],
                                       bases=(cls.HParams,), frozen=True)
    monkeypatch.setitem(reg.components["selection"], name, (type("LaterSelection", (cls,), {"HParams": later}), plugin))
    with pytest.raises(PLLZooError, match=r"other hyper-parameters than it was trained with \(selection\.extra: "
                                          r"recorded <absent>, now 3\.0\); was it recorded by another version of "
                                          r"pllzoo or its plugins\? \(trained with pllzoo-solar "):
        rescore(reg, run_dir, {}, device="cpu")
    field = next(iter(config["hparams"]["selection"]))  # a recorded field the installed component lost
    kept = [(f.name, f.type, f) for f in dataclasses.fields(cls.HParams) if f.name != field]
    earlier = dataclasses.make_dataclass("Earlier", kept, frozen=True)
    monkeypatch.setitem(reg.components["selection"], name,
                        (type("EarlierSelection", (cls,), {"HParams": earlier}), plugin))
    with pytest.raises(PLLZooError, match=rf"selection\.{field}: recorded .*, now <absent>"):
        rescore(reg, run_dir, {}, device="cpu")


def test_the_cli_names_a_plugin_no_longer_installed_and_what_to_do(run_dir, tmp_path, monkeypatch):
    """A second review: ``pllzoo evaluate RUN`` resolved the recorded method before re-scoring, so a run of an
    uninstalled plugin's recipe still said "unknown method"; a plugin PLLZOO_LOAD_PLUGINS left out was "not
    installed"."""
    run = _copy(run_dir, tmp_path)
    config = json.loads((run / "config.json").read_text())
    config["method"] = "sharp-la"
    (run / "config.json").write_text(json.dumps(config))
    env = json.loads((run / "env.json").read_text())
    env["components"]["loss"] = {"component": "sharp.loss", "plugin": "sharp", "dist": "pllzoo-sharp",
                                 "version": "1.0.0"}
    (run / "env.json").write_text(json.dumps(env))
    monkeypatch.delenv("PLLZOO_LOAD_PLUGINS", raising=False)  # (the registry loaded is the test session's)
    res = CliRunner().invoke(cli, ["evaluate", str(run), "--device", "cpu"])
    said = " ".join(res.output.split())
    assert res.exit_code != 0 and "Traceback" not in res.output, res.output
    assert f"Error: {run}: trained with plugin 'sharp' (pllzoo-sharp 1.0.0: sharp.loss), which no loaded plugin " \
           "registers; install it to re-score this run" in said, res.output
    monkeypatch.setenv("PLLZOO_LOAD_PLUGINS", "solar")
    assert "let PLLZOO_LOAD_PLUGINS (now 'solar') load it, or install it" in get_registry().absent_plugins(env)


def test_a_recorded_float_equal_to_an_int_default_is_the_same_setting():
    """A second review: a run recorded ``keep: 1.0`` (the old code's text → float) and a component declaring
    ``hp(1)`` (kept an int, hparams.as_declared) was refused by evaluate as "other hyper-parameters"."""
    import types
    from dataclasses import dataclass

    from pllzoo.evaluate import check_same_components
    from pllzoo.hparams import hp

    @dataclass(frozen=True)
    class H:
        keep: float = hp(1, "an int default of a float field")

    comps = {"selection": types.SimpleNamespace(hp=H())}
    check_same_components({"hparams": {"selection": {"keep": 1.0}}}, comps, Path("run"), set(), set())
    with pytest.raises(PLLZooError, match=r"selection\.keep: recorded 2\.0, now 1"):
        check_same_components({"hparams": {"selection": {"keep": 2.0}}}, comps, Path("run"), set(), set())
    check_same_components({"hparams": {"selection": {"keep": 2.0}}}, comps, Path("run"), {"selection.keep"}, set())


def test_a_plugins_dataset_backbone_or_view_no_longer_installed_is_named(run_dir, tmp_path, monkeypatch):
    """An outside review: env.json did not record which plugin supplied a run's dataset, so re-scoring a run of an
    uninstalled plugin's dataset said "no registered name: a .mat file or an image folder ..."; a backbone or a
    view of a plugin no longer loaded was named by no plugin either."""
    run = _copy(run_dir, tmp_path)
    config = json.loads((run / "config.json").read_text())
    config["dataset"] = "ext.lt"
    (run / "config.json").write_text(json.dumps(config))
    env = json.loads((run / "env.json").read_text())
    assert env["trainer"]["dataset"]["name"] == json.loads((run_dir / "config.json").read_text())["dataset"]
    env["trainer"]["dataset"] = {"name": "ext.lt", "plugin": "ext", "dist": "pllzoo-ext", "version": "0.2.1"}
    env["trainer"]["model"] = {"name": "ext.net", "plugin": "ext", "dist": "pllzoo-ext", "version": "0.2.1"}
    (run / "env.json").write_text(json.dumps(env))
    monkeypatch.delenv("PLLZOO_LOAD_PLUGINS", raising=False)
    res = CliRunner().invoke(cli, ["evaluate", str(run), "--device", "cpu"])
    said = " ".join(res.output.split())
    assert res.exit_code != 0 and "Traceback" not in res.output, res.output
    assert "trained with plugin 'ext' (pllzoo-ext 0.2.1: ext.lt, ext.net), which no loaded plugin registers; " \
           "install it to re-score this run" in said, res.output


def test_data_of_another_version_of_the_datasets_plugin_is_said():
    from pllzoo.runfolders import data_change

    entry = {"name": "ext.lt", "plugin": "ext", "dist": "pllzoo-ext", "version": "0.2.1"}
    env = {"data_sha256": "a" * 8, "trainer": {"dataset": entry}}
    assert data_change(env, "a" * 8, {"dataset": {**entry, "version": "0.3.0"}}) is None  # the same data
    assert data_change(env, "b" * 8, {"dataset": {**entry, "version": "0.3.0"}}) == (  # one more guess, not the cause
        f"fingerprint {'a' * 8}, now {'b' * 8}: another file of the same name, another --data-dir copy, or another "
        "image decoder; or dataset 'ext.lt' of pllzoo-ext 0.2.1, now of pllzoo-ext 0.3.0?")
    for now in ({"dataset": entry}, None, {}):  # the same plugin version, or no plugin's set: the other guesses
        assert data_change(env, "b" * 8, now).endswith("another --data-dir copy, or another image decoder?")
