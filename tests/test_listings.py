"""``pllzoo plugins`` / ``methods`` / ``datasets``: no name is ever cut, on or off a terminal, at any
width; ``--json`` lists every registered name; ``datasets`` says what each set reads offline."""

from __future__ import annotations

import json
import re

import pytest
from click.testing import CliRunner

from pllzoo.cli import cli
from pllzoo.cli.listing import plain_lines, words_whole
from pllzoo.components import SLOTS
from pllzoo.data.cifar import find_jpeg_pair
from pllzoo.data.matfile import find_mat_file

ANSI = re.compile(r"\x1b\[[0-9;]*m")
WIDTHS = [20, 40, 80, 120, 200]


def _invoke(args: list[str], width: int, terminal: bool) -> str:
    """The command's output at a terminal ``width``; ``terminal`` makes rich believe it writes to one."""
    env = {"COLUMNS": str(width), "FORCE_COLOR": "1" if terminal else None, "TTY_COMPATIBLE": None}
    res = CliRunner().invoke(cli, args, env=env)
    assert res.exit_code == 0, res.output
    return ANSI.sub("", res.output)


def _tokens(output: str) -> set[str]:
    return set(re.split(r"[\s,;│┃]+", output))


@pytest.mark.parametrize("terminal", [False, True], ids=["pipe", "terminal"])
@pytest.mark.parametrize("width", WIDTHS)
def test_every_plugin_and_method_name_whole(registry, width, terminal):
    out = _invoke(["plugins"], width, terminal)
    assert {p.name for p in registry.plugins} | set(registry.methods) | set(registry.datasets) <= _tokens(out)
    out = _invoke(["methods"], width, terminal)
    in_recipes = {c for m, _ in registry.methods.values() for c in m.slots().values() if c}
    assert set(registry.list_methods()) | in_recipes <= _tokens(out)  # and each recipe's components
    assert "selection.mode=global" in out and "estimator.init=cand-mle" in out  # recipe values whole too
    out = _invoke(["datasets"], width, terminal)
    assert set(registry.datasets) <= _tokens(out)


def test_pipe_output_is_greppable(registry):
    """Off a terminal each row is one line: grep finds a name beside the plugin or recipe it belongs to."""
    out = _invoke(["plugins"], 40, terminal=False).splitlines()
    (solar,) = [line for line in out if "solar-global-selection" in line]
    assert solar.split()[:3] == ["solar", "0.2.0", "label_update:"] and solar.endswith("ok")
    (line,) = [line for line in _invoke(["methods"], 40, terminal=False).splitlines()
               if line.startswith("solar-global-selection ")]
    assert line.split() == ["solar-global-selection", "solar.sinkhorn", "solar.classwise", "solar.loss",
                            "solar.prior", "–", "selection.mode=global"]


def test_a_wide_terminal_gets_the_table_a_narrow_one_plain_lines(registry):
    assert "┃ Plugin" in _invoke(["plugins"], 220, terminal=True)
    out = _invoke(["plugins"], 40, terminal=True)
    assert "┃" not in out and out.splitlines()[1].split() == ["Plugin", "Version", "Components", "Methods",
                                                           "Datasets", "Status"]


def test_plain_lines_align_columns_and_join_cell_lines():
    rows = [("x", "1\n2"), ("long-name", "3")]
    assert plain_lines("T", ("A", "Bee"), rows) == ["T", "A          Bee", "x          1; 2", "long-name  3"]


def test_words_whole_catches_crop_ellipsis_and_fold():
    assert words_whole("│ a b │\n│ c   │", ["a b c"])
    assert not words_whole("solar-global-selec…", ["solar-global-selection"])
    assert not words_whole("│ solar-glo │\n│ bal       │", ["solar-global"])
    assert not words_whole("solar", ["solar solar"])  # one of two occurrences cut away


def test_methods_json_lists_every_recipe(registry):
    rows = json.loads(_invoke(["methods", "--json"], 40, terminal=False))
    assert [r["name"] for r in rows] == registry.list_methods()
    solar = next(r for r in rows if r["name"] == "solar-global-selection")
    method = registry.methods["solar-global-selection"][0]
    assert solar == {"name": "solar-global-selection", "plugin": "solar", "hparams": {"selection.mode": "global"},
                     "slots": {"label_update": "solar.sinkhorn", "selection": "solar.classwise", "loss": "solar.loss",
                               "estimator": "solar.prior", "predict": None},
                     "description": method.description, "citation": method.citation}
    assert next(r for r in rows if r["name"] == "cc")["description"].startswith("CC: ")  # what Method(...) says


def test_methods_hparams_json_has_train_and_every_component(registry):
    doc = json.loads(_invoke(["methods", "--hparams", "--json"], 40, terminal=False))
    assert [r["name"] for r in doc["methods"]] == registry.list_methods()
    assert {(c["slot"], c["name"]) for c in doc["components"]} == {(s, n) for s in SLOTS for n in registry.components[s]}
    train = {r["field"]: r for r in doc["train"]}
    assert train["lr"] == {"field": "lr", "default": 0.01, "help": "SGD learning rate (range: > 0)", "from_dataset": True}
    assert train["amp"]["default"] is True and not train["amp"]["from_dataset"]
    assert train["milestones"]["default"] == [] and train["milestones"]["from_dataset"]
    rho = next(h for c in doc["components"] if c["name"] == "solar.classwise" for h in c["hparams"]
               if h["field"] == "rho_end")
    assert rho["help"].endswith("(range: [0, 1])")


def test_methods_hparams_lists_the_trainer_settings_whole(registry):
    lines = _invoke(["methods", "--hparams"], 40, terminal=False).splitlines()
    lr = next(line for line in lines if line.split()[:2] == ["train", "lr"])
    assert "dataset's, else 0.01" in lr and lr.endswith("SGD learning rate (range: > 0)")
    compile_ = next(line for line in lines if line.split()[:2] == ["train", "compile"])
    assert compile_.split()[2] == "'none'" and compile_.endswith("of compiling, benchmarks/gpu/README.md) "
                                                                 "(one of: none, default, reduce-overhead)")


def test_datasets_json_says_what_each_needs_offline(registry):
    rows = {r["name"]: r for r in json.loads(_invoke(["datasets", "--json"], 40, terminal=False))}
    assert set(rows) == set(registry.datasets)
    c10 = rows["cifar10lt"]
    assert c10["files"] == ["cifar-10-batches-py/{data_batch_1..5,test_batch,batches.meta}",
                            "cifar10_jpeg/{train,test}_jpeg.npz", "{train,test}_jpeg.npz"]
    assert c10["source"] == "https://www.cs.toronto.edu/~kriz/cifar-10-python.tar.gz"
    assert c10["downloads"] and not c10["needs_files"]
    assert rows["cifar100lt-h"]["files"] == ["cifar-100-python/{train,test,meta}"]
    assert rows["lost"]["files"] == ["lost.mat", "pll/lost.mat"] and rows["lost"]["needs_files"]
    assert not rows["lost"]["downloads"] and rows["lost"]["source"].startswith("palm.seu.edu.cn")
    assert rows["synthetic-lt"]["files"] == [] and not rows["synthetic-lt"]["downloads"]


def test_datasets_table_no_longer_says_cifar_needs_nothing(registry):
    line = next(line for line in _invoke(["datasets"], 40, terminal=False).splitlines()
                if line.startswith("cifar10lt "))
    assert "cifar-10-batches-py/" in line and "or cifar10_jpeg/{train,test}_jpeg.npz" in line
    assert "downloads https://www.cs.toronto.edu/~kriz/cifar-10-python.tar.gz unless --offline" in line
    synthetic = next(line for line in _invoke(["datasets"], 40, terminal=False).splitlines()
                     if line.startswith("synthetic-lt "))
    assert "nothing: generated" in synthetic


def test_the_listed_files_are_what_the_loaders_read(tmp_path):
    (tmp_path / "pll").mkdir()
    (tmp_path / "pll" / "lost.mat").write_bytes(b"")
    assert find_mat_file("lost", tmp_path) == tmp_path / "pll" / "lost.mat"  # "pll/lost.mat"
    (tmp_path / "cifar10_jpeg").mkdir()
    for split in ("train", "test"):
        (tmp_path / "cifar10_jpeg" / f"{split}_jpeg.npz").write_bytes(b"")
    assert find_jpeg_pair([tmp_path]) == (tmp_path / "cifar10_jpeg" / "train_jpeg.npz",
                                          tmp_path / "cifar10_jpeg" / "test_jpeg.npz")


def test_cifar_sources_are_torchvisions():
    torchvision = pytest.importorskip("torchvision")
    from pllzoo.data.cifar import DOWNLOADS, TORCHVISION_DIRS

    assert DOWNLOADS == {"cifar10": torchvision.datasets.CIFAR10.url, "cifar100": torchvision.datasets.CIFAR100.url}
    assert TORCHVISION_DIRS == {"cifar10": torchvision.datasets.CIFAR10.base_folder,
                                "cifar100": torchvision.datasets.CIFAR100.base_folder}


def test_component_defaults_a_dataset_sets_are_marked():
    """An outside review: `methods --hparams` listed solar.prior's est_epochs as 20 where a run on CIFAR-10 takes
    100 (the component's dataset_defaults), with no word that a dataset sets it."""
    import json

    from click.testing import CliRunner

    from pllzoo.cli import cli

    res = CliRunner().invoke(cli, ["methods", "--hparams", "--json"])
    assert res.exit_code == 0, res.output
    comps = {(c["slot"], c["name"]): {h["field"]: h for h in c["hparams"]} for c in json.loads(res.output)["components"]}
    prior = comps[("estimator", "solar.prior")]
    assert prior["est_epochs"]["from_dataset"] and not prior["gamma2"]["from_dataset"]
    assert not any(h["from_dataset"] for h in comps[("label_update", "solar.sinkhorn")].values())
    assert comps[("loss", "solar.loss")]["mixup"]["from_dataset"] and comps[("loss", "valen.loss")]["beta"]["from_dataset"]
    res = CliRunner().invoke(cli, ["methods", "--hparams"])
    line = next(x for x in res.output.splitlines() if x.startswith("estimator solar.prior") and " est_epochs " in x)
    assert "dataset's, else 20" in line


def test_results_tables_keep_names_whole_off_a_terminal_and_on_a_narrow_one(monkeypatch, capsys):
    """An outside review (issue 16 item 7): bench/report/evaluate tables folded a mix's name across rows when
    written to a file or pipe (rich assumes 80 columns there), so `grep NAME` found nothing."""
    from rich.console import Console

    from pllzoo.cli.listing import show_report
    from pllzoo.report import Report

    name = "proden+selection=solar.classwise+estimator=solar.prior"
    report = Report("a setting", ["Method", "All", "n"], [[name, "46.80 ± 1.00", "2"], ["cc", "50.00", "1"]],
                    "Model selection: last epoch.")
    show_report(report)  # pytest's capture: no terminal
    out = capsys.readouterr().out
    assert name in out and "│ cc " in out and "Model selection: last epoch." in out
    long_title = "lost_faces_partial_labels_cleaned_2024_release_of_a_very_long_name_beyond_eighty_columns uniform"
    show_report(Report(long_title, ["Method", "All"], [["cc", "50.00"]], ""))  # a title wider than the table
    assert long_title.split()[0] in capsys.readouterr().out  # (a second review: it was folded)
    monkeypatch.setattr(Console, "is_terminal", property(lambda self: True))  # a terminal 30 columns wide
    monkeypatch.setenv("COLUMNS", "30")
    show_report(report)
    out = capsys.readouterr().out
    assert name in out and "│" not in out  # plain aligned lines: the table would have cut it
    assert out.splitlines()[0] == "a setting" and out.splitlines()[-1] == "Model selection: last epoch."


def test_the_live_progress_needs_a_real_interactive_terminal(tmp_path, monkeypatch):
    """An outside review: FORCE_COLOR with stderr to a file wrote every redraw of the live display into the log,
    and TERM=dumb on a terminal showed nothing until the run ended; both now take the plain lines."""
    import io

    from rich.console import Console

    from pllzoo.progress import live_on

    with open(tmp_path / "log", "w") as f:
        assert not live_on(Console(file=f, force_terminal=True))  # FORCE_COLOR: a file called a terminal
    assert not live_on(Console(file=io.StringIO()))

    class Tty(io.StringIO):
        def isatty(self):
            return True

    monkeypatch.setenv("TERM", "xterm")
    assert live_on(Console(file=Tty(), force_terminal=True))
    monkeypatch.setenv("TERM", "dumb")
    assert not live_on(Console(file=Tty(), force_terminal=True))
