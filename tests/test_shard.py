"""``pllzoo bench --shard i/n``: disjoint parts of the method × seed grid that together are the grid, written
into one ``--out`` layout that ``results.csv`` and ``pllzoo report`` merge."""

from __future__ import annotations

import pandas as pd
import pytest
from click.testing import CliRunner

from pllzoo import bench
from pllzoo.cli import cli
from pllzoo.data.base import DataOptions
from pllzoo.errors import PLLZooError
from pllzoo.planning import parse_shard

TINY = ["--dataset", "synthetic-lt", "--epochs", "1", "--subset", "64", "--batch-size", "16", "--device", "cpu"]


@pytest.mark.parametrize("text,expected", [("1/1", (1, 1)), ("2/4", (2, 4)), (" 3/3 ", (3, 3))])
def test_parse_shard(text, expected):
    assert parse_shard(text) == expected


@pytest.mark.parametrize("text", ["0/2", "3/2", "1/0", "a/b", "2", "1/2/3", "-1/2", ""])
def test_bad_shards_are_one_line(text):
    with pytest.raises(PLLZooError, match=r"i/n|1\.\.n") as info:
        parse_shard(text)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize("n", [1, 2, 3, 4, 7])
def test_shards_partition_the_grid(registry, n):
    args = (registry, ["proden", "cc"], "synthetic-lt", [1, 2, 3], DataOptions(subset=64))
    grid = [(p.method.name, p.seed) for p in bench.plan(*args, epochs=1)]
    assert grid == [(m, s) for s in (1, 2, 3) for m in ("proden", "cc")]  # seed-major
    parts = [[(p.method.name, p.seed) for p in bench.plan(*args, epochs=1, shard=(i, n))] for i in range(1, n + 1)]
    assert sorted(sum(parts, [])) == sorted(grid)  # together the grid, each run once
    assert parts[0] == grid[0::n]  # round robin over the grid: shard i gets positions i-1, i-1+n, ...
    assert max(map(len, parts)) - min(map(len, parts)) <= 1  # balanced


def test_shards_into_one_out_merge(tmp_path):
    out = tmp_path / "out"
    for i in (1, 2):
        res = CliRunner().invoke(cli, ["bench", "--methods", "proden,cc", "--seeds", "1,2", *TINY, "--out", str(out),
                                       "--shard", f"{i}/2"])
        assert res.exit_code == 0, res.output
        assert f"shard {i}/2: 2 run(s) of the grid" in res.stderr
    rows = pd.read_csv(out / "results.csv")
    # in --methods order, then seed, whichever shard wrote last (shard 2 trains only cc)
    assert list(zip(rows["method"], rows["seed"])) == [("proden", 1), ("proden", 2), ("cc", 1), ("cc", 2)]
    res = CliRunner().invoke(cli, ["report", str(out)])
    assert res.exit_code == 0 and "proden" in res.output and "cc" in res.output


def test_the_plan_line_of_a_shard_that_is_no_grid_says_of(tmp_path):
    res = CliRunner().invoke(cli, ["bench", "--methods", "proden,cc", "--seeds", "1,2", *TINY, "--out",
                                   str(tmp_path / "out"), "--shard", "1/3", "--dry-run"])
    assert res.exit_code == 0, res.output
    assert "shard 1/3: 2 run(s) of the grid" in res.stderr  # proden seed 1 and cc seed 2
    assert "plan: 2 run(s) of 2 method(s) x 2 seed(s) on cpu" in res.stderr  # not "2 run(s) = 2 x 2"


def test_a_shard_without_runs_is_not_an_error(tmp_path):
    res = CliRunner().invoke(cli, ["bench", "--methods", "proden", "--seeds", "1", *TINY, "--out", str(tmp_path / "o"),
                                   "--shard", "3/4"])
    assert res.exit_code == 0, res.output
    assert "shard 3/4: 0 run(s) of the grid" in res.stderr


def test_bad_shard_on_the_command_line(tmp_path):
    res = CliRunner().invoke(cli, ["bench", "--methods", "proden", *TINY, "--out", str(tmp_path / "o"), "--shard", "5/4"])
    assert res.exit_code == 2 and "Invalid value for '--shard': '5/4'" in res.stderr and "Traceback" not in res.output


def test_shards_in_separate_outs_merge_in_report(tmp_path):
    outs = [tmp_path / f"out{i}" for i in (1, 2)]
    for i, out in enumerate(outs, 1):
        res = CliRunner().invoke(cli, ["bench", "--methods", "proden", "--seeds", "1,2", *TINY, "--out", str(out),
                                       "--shard", f"{i}/2"])
        assert res.exit_code == 0, res.output
    csv = tmp_path / "merged.csv"
    res = CliRunner().invoke(cli, ["report", *map(str, outs), "--csv", str(csv)])
    assert res.exit_code == 0, res.output
    assert pd.read_csv(csv).set_index("method").loc["proden", "n"] == 2  # one setting, both seeds
