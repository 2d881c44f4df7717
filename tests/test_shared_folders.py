"""Results folders handed over (copied, unpacked from someone's archive) may hold symbolic links and configs
pllzoo never wrote: nothing outside the folder is written, moved or read into an archive (an outside review
planted each of these)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from pllzoo import atomic
from pllzoo.atomic import write_atomic
from pllzoo.cli import cli
from pllzoo.results import run_id

BENCH = ["bench", "--methods", "proden", "--dataset", "synthetic-lt", "--subset", "300", "--epochs", "1",
         "--batch-size", "64", "--threads", "1"]


def test_write_atomic_never_writes_through_a_link(tmp_path):
    """A link at ``name.tmp`` (the temporary name of older versions) or at this process's own temporary name is
    never written through; a link at ``name`` is replaced by the file; a failed write leaves the old file and no
    temporary file."""
    victim = tmp_path / "victim"
    victim.write_text("precious")
    (tmp_path / "a.md.tmp").symlink_to(victim)
    (tmp_path / f"a.md.{os.getpid()}-{next(atomic._WRITES) + 1}.tmp").symlink_to(victim)  # the name it will use
    write_atomic(tmp_path / "a.md", "table φ")
    (tmp_path / "a.md.tmp").unlink()
    assert victim.read_text() == "precious" and (tmp_path / "a.md").read_text(encoding="utf-8") == "table φ"
    (tmp_path / "b.json").symlink_to(victim)
    write_atomic(tmp_path / "b.json", b"{}")
    assert victim.read_text() == "precious" and not (tmp_path / "b.json").is_symlink()

    def half(f):
        f.write(b"half")
        raise OSError(28, "No space left on device")

    with pytest.raises(OSError):
        write_atomic(tmp_path / "a.md", half)
    assert (tmp_path / "a.md").read_text(encoding="utf-8") == "table φ"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.md", "b.json", "victim"]


def test_a_bench_into_a_folder_with_planted_links_writes_only_inside_it(tmp_path):
    """``results.csv.tmp``, ``summary.md.tmp`` and a run's ``config.json.tmp`` linked to files elsewhere: the bench,
    its --resume and ``plot``'s default figure leave those files as they were."""
    out = tmp_path / "out"
    res = CliRunner().invoke(cli, [*BENCH, "--out", str(out)])
    assert res.exit_code == 0, res.output
    (run,) = (out / "runs").iterdir()
    victims = {name: tmp_path / f"victim-{i}" for i, name in enumerate(
        ["results.csv.tmp", "summary.md.tmp", "summary.csv.tmp", f"runs/{run.name}/config.json.tmp",
         f"runs/{run.name}/done.tmp", "figure1.png"])}
    for name, victim in victims.items():
        victim.write_text("precious")
        (out / name).symlink_to(victim)
    (run / "done").unlink()  # resumed: its config.json and done are written again
    res = CliRunner().invoke(cli, [*BENCH, "--out", str(out), "--resume"])
    assert res.exit_code == 0 and "resumed" in res.output, res.output
    pytest.importorskip("matplotlib")
    res = CliRunner().invoke(cli, ["plot", str(out)])
    assert res.exit_code == 0, res.output
    assert all(v.read_text() == "precious" for v in victims.values())
    assert (out / "figure1.png").read_bytes()[:4] == b"\x89PNG" and not (out / "figure1.png").is_symlink()
    mine, link = tmp_path / "docs-fig.png", tmp_path / "fig.png"  # a link the user names: written through, as --md's
    link.symlink_to(mine)
    res = CliRunner().invoke(cli, ["plot", str(out), "--out", str(link)])
    assert res.exit_code == 0 and link.is_symlink() and mine.read_bytes()[:4] == b"\x89PNG", res.output


def test_a_seed_naming_a_path_keeps_the_run_inside_its_folder(tmp_path, monkeypatch):
    """A config.json that says its seed is ``/../../../ESCAPED``: the id it would migrate to is one file name in
    ``runs/``, so archive and bench move nothing out of OUT; integer seeds keep their ids."""
    assert run_id({"method": "m", "dataset": "d", "seed": 3, "x": 1}).startswith("m__d__s3-")
    assert "/" not in run_id({"method": "m", "dataset": "d", "seed": "/../../../ESCAPED"})
    out = tmp_path / "a" / "b" / "OUT"
    legacy = out / "runs" / "legacy1"
    legacy.mkdir(parents=True)
    (legacy / "config.json").write_text(json.dumps({"method": "m", "dataset": "d", "seed": "/../../../ESCAPED",
                                                    "data": {"data_dir": "/x"}}))
    monkeypatch.chdir(tmp_path)
    CliRunner().invoke(cli, ["archive", str(out)])
    found = sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*") if p.is_dir())
    assert all(f in ("a", "a/b") or f.startswith("a/b/OUT") for f in found), found
    (moved,) = [p for p in (out / "runs").iterdir()]
    assert moved.name.startswith("m__d__s_.._.._.._ESCAPED-") and (moved / "config.json").exists()


def test_archive_refuses_a_run_whose_files_are_links(tmp_path):
    """An ``error.txt`` linked to a secret elsewhere: archived, it would carry the secret into the shared archive
    and ``--prune`` would delete the folder that showed it.  The archive is refused in one line, nothing
    pruned."""
    out = tmp_path / "out"
    res = CliRunner().invoke(cli, [*BENCH, "--out", str(out)])
    assert res.exit_code == 0, res.output
    (run,) = (out / "runs").iterdir()
    (run / "checkpoint.pt").unlink()
    secret = tmp_path / "secret"
    secret.write_text("AWS_SECRET=hunter2")
    (run / "error.txt").symlink_to(secret)
    res = CliRunner().invoke(cli, ["archive", str(out), "--prune"])
    assert res.exit_code == 1 and "Traceback" not in res.output, res.output
    assert "error.txt: a symbolic link, which pllzoo never makes" in " ".join(res.output.split())
    assert run.is_dir() and not (out / "runs.jsonl.xz").exists() and os.path.islink(run / "error.txt")


def test_a_run_folder_that_is_a_link_is_neither_trained_into_nor_archived(tmp_path):
    """``runs/<id>`` linked to a folder elsewhere: --resume rewrote that folder and archive packed it (an outside
    review); the run fails in one line, the folder elsewhere is as it was, and archive refuses it."""
    out = tmp_path / "out"
    res = CliRunner().invoke(cli, [*BENCH, "--out", str(out)])
    assert res.exit_code == 0, res.output
    (run,) = (out / "runs").iterdir()
    (run / "done").unlink()
    elsewhere = tmp_path / "elsewhere"
    run.rename(elsewhere)
    run.symlink_to(elsewhere)
    before = {p.name: p.read_bytes() for p in elsewhere.iterdir()}
    res = CliRunner().invoke(cli, [*BENCH, "--out", str(out), "--resume"])
    assert res.exit_code == 1 and "is a symbolic link; pllzoo trains only into folders inside --out" in res.output
    assert {p.name: p.read_bytes() for p in elsewhere.iterdir()} == before
    res = CliRunner().invoke(cli, ["archive", str(out)])
    assert res.exit_code == 1 and "the folder" in res.output and "symbolic link" in res.output, res.output


def test_a_config_file_past_its_cap_is_one_line(tmp_path):
    """A 5 GB file, or /dev/zero, given as --config was read whole into a MemoryError traceback (an outside
    review): past 1 MiB it is refused unread."""
    big = tmp_path / "big.toml"
    big.write_bytes(b"# " + b"x" * (1 << 20) + b"\n")
    zero = tmp_path / "zero.toml"
    zero.symlink_to("/dev/zero")
    for path in (big, zero):
        res = CliRunner().invoke(cli, ["bench", "--config", str(path), "--dry-run"])
        assert res.exit_code != 0 and "Traceback" not in res.output, res.output
        assert f"--config {path}: larger than 1 MiB; not a pllzoo config file" in res.output, res.output


def test_two_processes_writing_one_file_at_once_each_write_it_whole(tmp_path):
    """An outside review: two `pllzoo archive` of one folder at once shared `<name>.tmp`; the second removed the
    first's, whose rename then failed (FileNotFoundError).  Each process writes a temporary file of its own."""
    import multiprocessing as mp

    ctx = mp.get_context("spawn")
    with ctx.Pool(2) as pool:
        pool.map(_write_many, [(str(tmp_path / "f"), "a"), (str(tmp_path / "f"), "b")])
    assert (tmp_path / "f").read_text() in ("a" * 10_000, "b" * 10_000)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["f"]


def _write_many(args):
    path, letter = args
    for _ in range(2000):
        write_atomic(Path(path), letter * 10_000)
