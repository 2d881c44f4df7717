"""Files that commands write (``report --md/--csv``, ``evaluate --md/--csv``, ``plot --out``): a bad path is one
line before any work, a missing folder is made, a failed write is one ``Error:`` line (pllzoo/cli/outputs.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from pllzoo.cli import cli

FINISHED_ARGS = ["bench", "--methods", "proden", "--dataset", "synthetic-lt", "--subset", "200", "--batch-size", "64",
                 "--epochs", "1", "--seeds", "1", "--device", "cpu", "--threads", "1"]


def _run(out: Path) -> Path:
    (run,) = (out / "runs").iterdir()
    return run


def _commands(out: Path, target: str) -> dict[str, list[str]]:
    return {
        "report --md": ["report", str(out), "--md", target],
        "report --csv": ["report", str(out), "--csv", target],
        "evaluate --md": ["evaluate", str(_run(out)), "--device", "cpu", "--md", target],
        "evaluate --csv": ["evaluate", str(_run(out)), "--device", "cpu", "--csv", target],
        "plot --out": ["plot", str(out), "--out", target + (".png" if not target.endswith("/") else "")],
    }


@pytest.mark.parametrize("command", ["report --md", "report --csv", "evaluate --md", "evaluate --csv", "plot --out"])
def test_a_missing_folder_is_made(finished, tmp_path, command):
    target = tmp_path / "new" / "deeper" / "file"
    res = CliRunner().invoke(cli, _commands(finished, str(target))[command])
    assert res.exit_code == 0, res.output
    written = [p for p in (tmp_path / "new" / "deeper").iterdir()]
    assert len(written) == 1 and written[0].stat().st_size > 0 and str(written[0]) in res.output


@pytest.mark.parametrize("command", ["report --md", "report --csv", "evaluate --md", "evaluate --csv", "plot --out"])
def test_a_folder_is_refused_before_any_work(finished, tmp_path, command):
    folder = tmp_path / "a-folder.png"
    folder.mkdir()
    args = _commands(finished, str(folder))[command]
    if command == "plot --out":
        args[-1] = str(folder)
    res = CliRunner().invoke(cli, args)
    assert res.exit_code == 2 and "Traceback" not in res.output
    assert res.output.strip().splitlines()[-1].endswith("is a directory.")
    assert "Method" not in res.output and "Re-scored" not in res.output  # nothing was computed first


@pytest.mark.parametrize("command", ["report --md", "evaluate --csv", "plot --out"])
def test_a_folder_that_cannot_be_made_is_one_line(finished, tmp_path, command):
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    res = CliRunner().invoke(cli, _commands(finished, str(blocker / "x"))[command])
    assert res.exit_code == 2 and "Traceback" not in res.output
    assert "cannot make its folder" in res.output.strip().splitlines()[-1]


@pytest.mark.skipif(not Path("/proc/self").is_dir(), reason="needs Linux's /proc, where no file can be made")
@pytest.mark.parametrize("command", ["report --csv", "evaluate --md", "plot --out"])
def test_a_failed_write_is_one_error_line(finished, command):
    res = CliRunner().invoke(cli, _commands(finished, "/proc/pllzoo-cannot-write")[command])
    assert res.exit_code == 1 and "Traceback" not in res.output
    last = res.output.strip().splitlines()[-1]
    assert last.startswith("Error: cannot write /proc/pllzoo-cannot-write"), last


def test_plot_names_the_file_it_writes_and_refuses_unknown_formats(finished, tmp_path):
    res = CliRunner().invoke(cli, ["plot", str(finished), "--out", str(tmp_path / "fig")])
    assert res.exit_code == 0 and f"figure: {tmp_path / 'fig.png'}" in res.output
    from PIL import Image

    with Image.open(tmp_path / "fig.png") as im:  # a compact palette PNG (pllzoo.plot.compact_png), full size
        assert im.mode == "P" and im.size == (1200, 420) and len(im.getcolors()) <= 64
    res = CliRunner().invoke(cli, ["plot", str(finished), "--out", str(tmp_path / "fig.svg")])
    assert res.exit_code == 0 and (tmp_path / "fig.svg").read_text().lstrip().startswith("<?xml")  # as it was
    res = CliRunner().invoke(cli, ["plot", str(finished), "--out", str(tmp_path / "fig.txt")])
    assert res.exit_code == 2 and "cannot write a .txt file; use one of .png" in res.output
    assert not (tmp_path / "fig.txt").exists()


def test_compact_png_keeps_an_image_of_few_colours_exactly():
    import io

    import numpy as np
    from PIL import Image

    from pllzoo.plot import compact_png

    rng = np.random.default_rng(0)
    colours = rng.integers(0, 256, (10, 3), dtype=np.uint8)
    pixels = colours[rng.integers(0, 10, (40, 60))]  # [40, 60, 3], 10 colours
    buf = io.BytesIO()
    Image.fromarray(pixels).convert("RGBA").save(buf, format="PNG")
    with Image.open(io.BytesIO(compact_png(buf.getvalue()))) as im:
        assert im.mode == "P"
        assert np.array_equal(np.asarray(im.convert("RGB")), pixels)


@pytest.mark.parametrize("name", ["log.jsonl", "config.json", "notes.md"])
@pytest.mark.parametrize("command", ["report", "evaluate"])
def test_nothing_is_written_into_a_run_folder(out, name, command):
    """``report OUT --csv OUT/runs/<id>/log.jsonl`` used to replace the run's records (then a damaged run)."""
    run = sorted((out / "runs").iterdir())[0]
    before = {f.name: f.read_bytes() for f in run.iterdir() if f.is_file()}
    source = [str(out)] if command == "report" else [str(run), "--device", "cpu"]
    res = CliRunner().invoke(cli, [command, *source, "--md" if name.endswith(".md") else "--csv", str(run / name)])
    assert res.exit_code == 2 and "is inside the run folder" in res.output and "Traceback" not in res.output
    assert {f.name: f.read_bytes() for f in run.iterdir() if f.is_file()} == before


@pytest.mark.parametrize("name", ["results.csv", "summary.csv", "summary.md", "runs.jsonl.xz"])
def test_the_bench_files_of_a_results_folder_are_not_overwritten(out, name):
    """``report OUT --md OUT/results.csv`` used to replace the bench's record with Markdown."""
    before = (out / "results.csv").read_bytes()
    res = CliRunner().invoke(cli, ["report", str(out), "--md" if name.endswith(".md") else "--csv", str(out / name)])
    assert res.exit_code == 2 and "the bench's own record of that results folder" in res.output
    assert (out / "results.csv").read_bytes() == before


def test_a_write_that_fails_leaves_the_file_as_it_was(tmp_path, monkeypatch):
    """A full disk under ``--md``/``--csv``: one line, and the table there before is whole (an outside review: it
    was truncated to 0 bytes), with no temporary file left."""
    import errno

    from pllzoo import atomic
    from pllzoo.cli import outputs
    from pllzoo.cli.outputs import write_text
    from pllzoo.errors import PLLZooError

    table = tmp_path / "t.md"
    table.write_text("the old table\n")

    def full_disk(path, text):
        def half(f):
            f.write(text.encode()[:3])
            raise OSError(errno.ENOSPC, "No space left on device")

        atomic.write_atomic(path, half)

    monkeypatch.setattr(outputs, "write_atomic", full_disk)
    with pytest.raises(PLLZooError, match=r"^cannot write .*t\.md: No space left on device$"):
        write_text(table, "a new table\n")
    monkeypatch.undo()
    assert table.read_text() == "the old table\n" and sorted(p.name for p in tmp_path.iterdir()) == ["t.md"]


def test_a_link_is_written_through_and_a_device_directly(tmp_path):
    """The atomic write replaced a symbolic link by a file (a second review): the link's target gets the table."""
    from pllzoo.cli.outputs import write_text

    shared = tmp_path / "shared"
    shared.mkdir()
    (shared / "table.md").write_text("old\n")
    link = tmp_path / "link.md"
    link.symlink_to(shared / "table.md")
    write_text(link, "new\n")
    assert link.is_symlink() and (shared / "table.md").read_text() == "new\n"
    write_text(Path("/dev/null"), "into the void\n")  # a device: written, not replaced
    assert Path("/dev/null").is_char_device()


@pytest.mark.skipif(not Path("/dev/stdout").exists(), reason="no /dev/stdout here")
def test_md_to_dev_stdout_through_a_pipe(finished):
    """An outside review: ``--md /dev/stdout`` into a pipe printed the table, then "cannot write /dev/stdout": the
    link resolved to /proc/self/fd/1 → "pipe:[…]", taken for a file to replace."""
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-m", "pllzoo", "report", str(finished), "--md", "/dev/stdout"],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "| Method |" in done.stdout and "Error" not in done.stdout + done.stderr


@pytest.mark.skipif(not Path("/dev/stdout").exists(), reason="no /dev/stdout here")
def test_md_and_csv_to_dev_stdout_redirected_to_a_file(finished, tmp_path):
    """An outside review: with stdout redirected to a file, ``--md /dev/stdout --csv /dev/stdout`` replaced that
    file (the printed table gone) and then wrote a stray "FILE (deleted)": each now goes through stdout, in order."""
    import subprocess
    import sys

    target = tmp_path / "o.txt"
    with open(target, "w") as f:
        done = subprocess.run([sys.executable, "-m", "pllzoo", "report", str(finished), "--md", "/dev/stdout",
                               "--csv", "/dev/stdout"], stdout=f, stderr=subprocess.PIPE, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["o.txt"]
    text = target.read_text()
    table, md, csv = text.index("┃ Method"), text.index("| Method |"), text.index("setting,method,select,")
    assert table < md < text.index("markdown: /dev/stdout") < csv < text.index("csv: /dev/stdout")


@pytest.mark.skipif(not Path("/dev/shm").is_dir(), reason="no /dev/shm here")
def test_a_regular_file_under_dev_is_replaced_not_appended_to(tmp_path):
    """A second review: the stream branch for /dev/stdout took every path under /dev, so a table written twice to
    /dev/shm/t.csv held two headers."""
    import os

    from pllzoo.cli.outputs import write_text

    target = Path("/dev/shm") / f"pllzoo-test-{os.getpid()}.csv"
    try:
        write_text(target, "a\n1\n")
        write_text(target, "a\n2\n")
        assert target.read_text() == "a\n2\n"
    finally:
        target.unlink(missing_ok=True)


@pytest.mark.parametrize("encoding", ["ascii", "latin-1"])
def test_a_terminal_that_cannot_encode_the_tables_gets_question_marks_not_a_traceback(encoding):
    """An outside review: PYTHONIOENCODING=ascii made report (and a bench, after writing its results) end in a
    UnicodeEncodeError traceback on the captions' φ, γ and ±."""
    import os
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[1]
    env = {**os.environ, "PYTHONIOENCODING": encoding, "COLUMNS": "200"}
    done = subprocess.run([sys.executable, "-m", "pllzoo", "report", str(root / "benchmarks/composition/results-h100")],
                          capture_output=True, env=env, timeout=300, cwd=root)
    assert done.returncode == 0 and b"Traceback" not in done.stderr, done.stderr[-2000:]
    out = done.stdout.decode(encoding)
    assert "cifar10lt ? = 0.5 ? = 100" in out or "cifar10lt ?=0.5 ?=100" in out, out[:500]
    assert "| corr-records+selection=solar.classwise" in out


def test_env_json_names_the_runs_own_gpu(monkeypatch):
    """An outside review: a run on cuda:1 recorded cuda:0's name (get_device_name(0)); on CPU, faked."""
    import torch

    from pllzoo.results import env_info

    names = {0: "GPU zero", 1: "GPU one"}
    monkeypatch.setattr(torch.cuda, "get_device_name",
                        lambda d=None: names[d.index if isinstance(d, torch.device) and d.index is not None else 0])
    assert env_info("cuda:1")["gpu"] == "GPU one" and env_info("cuda")["gpu"] == "GPU zero"
    assert env_info("cpu")["gpu"] is None


def test_results_csv_follows_from_the_runs_present_not_the_order_they_finished(tmp_path):
    """A review: keeping an earlier results.csv's column order made a bench stopped by its time limit and resumed,
    or --shard parts run in another order, write another header than one bench; the columns follow the runs."""
    headers = []
    for order in (("cc", "solar"), ("solar", "cc")):
        out = tmp_path / "-".join(order)
        for method in order:
            res = CliRunner().invoke(cli, ["bench", "--methods", method, *FINISHED_ARGS[3:], "--out", str(out)])
            assert res.exit_code == 0, res.output
        headers.append((out / "results.csv").read_text().splitlines()[0])
    assert headers[0] == headers[1] and "label_acc" in headers[0] and "prior_tv" in headers[0]
