"""Shell completion of method, mix, dataset and predict names (pllzoo.cli.complete), through click's own protocol
(what ``eval "$(_PLLZOO_COMPLETE=bash_source pllzoo)"`` installs)."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from pllzoo.cli import cli


def _complete(line: str) -> list[str]:
    words = line.split(" ")
    res = CliRunner().invoke(cli, [], prog_name="pllzoo", env={
        "_PLLZOO_COMPLETE": "bash_complete", "COMP_WORDS": line, "COMP_CWORD": str(len(words) - 1)})
    assert res.exit_code == 0 and "Traceback" not in res.output, res.output
    return [item.partition(",")[2] for item in res.output.splitlines() if item]


@pytest.mark.parametrize("line, expected", [
    ("pllzoo bench --methods proden-", ["proden-records", "proden-s-cpe"]),
    ("pllzoo bench --methods solar,proden-r", ["solar,proden-records"]),  # the last item of the list
    ("pllzoo sweep --methods pico", ["pico"]),
    ("pllzoo check cc-", ["cc-records"]),
    ("pllzoo bench --methods proden+sel", ["proden+selection="]),  # a mix: the slot, then its components
    ("pllzoo bench --methods proden+selection=", ["proden+selection=pllzoo.all", "proden+selection=solar.classwise"]),
    ("pllzoo bench --methods cc+predict=n", ["cc+predict=none"]),  # an optional slot can be emptied
    ("pllzoo bench --methods cc+selection=n", []),  # a required one cannot
    ("pllzoo bench --dataset cifar10", ["cifar100lt", "cifar100lt-h", "cifar10lt"]),
    ("pllzoo evaluate --predict solar", ["solar.la"]),
])
def test_names_complete(line, expected):
    assert _complete(line) == expected


def test_a_dataset_path_completes_as_a_file():
    res = CliRunner().invoke(cli, [], prog_name="pllzoo", env={
        "_PLLZOO_COMPLETE": "bash_complete", "COMP_WORDS": "pllzoo bench --dataset ./data/my", "COMP_CWORD": "3"})
    assert res.output.splitlines() == ["file,./data/my"]
