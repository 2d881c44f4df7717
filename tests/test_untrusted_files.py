"""Files someone else hands over: small on disk, built to exhaust memory, time or the stack (an outside review).

Each ends in one ``Error:`` line (or a run left out, as for any unreadable config), never a traceback.  Every
input is the reviewed one at a small scale: a cap monkeypatched low, a modest alias bomb, a MemoryError raised
where a real one would cost gigabytes; deep nesting is cheap, so it is real.
"""

from __future__ import annotations

import json
import lzma
import tracemalloc
from pathlib import Path

import numpy as np
import pytest
import scipy.io
import scipy.sparse
from click.testing import CliRunner

from pllzoo import archive
from pllzoo.cli import cli

FINISHED_ARGS = ["bench", "--methods", "proden", "--dataset", "synthetic-lt", "--seeds", "1", "--subset", "200",
                 "--batch-size", "64", "--epochs", "2", "--device", "cpu", "--threads", "1"]
DEEP = "[" * 100_000  # the review's nesting: a RecursionError in every parser


def _error_line(res, code: int = 1) -> str:
    """The command failed with exit status ``code``, one ``Error:`` line and no traceback; that line."""
    assert res.exit_code == code, res.output
    assert res.exception is None or isinstance(res.exception, SystemExit), repr(res.exception)
    assert "Traceback" not in res.output, res.output
    lines = [line for line in res.output.splitlines() if line.startswith("Error:")]
    assert len(lines) == 1, res.output
    return lines[0]


def _xz(path: Path, text: bytes) -> Path:
    """``path`` holding an archive of ``text`` (preset 0: a dictionary of 256 KiB, which reading allocates)."""
    path.mkdir(parents=True, exist_ok=True)
    (path / archive.NAME).write_bytes(lzma.compress(text, format=lzma.FORMAT_XZ, preset=0))
    return path


def _run(name: str) -> archive.ArchivedRun:
    return archive.ArchivedRun(name, True, {"method": "proden", "dataset": "x", "seed": 1}, {},
                               [{"epoch": 1, "epochs": 1, "test_acc": 0.5}])


HEADER = json.dumps({"pllzoo_archive": archive.FORMAT}).encode() + b"\n"


# ---------------------------------------------------------------- runs.jsonl.xz


def test_an_archive_of_newlines_is_streamed_not_held(tmp_path):
    """The review's 19.7 KB archive of 128 MiB of newlines took report to 2.2 GB; 8 MiB here: read in a few MiB."""
    out = _xz(tmp_path / "o", HEADER + b"\n" * (8 << 20))
    tracemalloc.start()
    try:
        with pytest.raises(archive.PLLZooError, match="unreadable run archive") as exc:
            archive.read(out)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 4 << 20, peak
    assert "blank lines" in str(exc.value) and "\n" not in str(exc.value)
    _error_line(CliRunner().invoke(cli, ["report", str(out)]))


def test_blank_lines_in_an_archive_are_skipped(tmp_path):
    runs = [_run("a"), _run("b")]
    plain = _xz(tmp_path / "plain", lzma.decompress(archive.encode(runs)))
    text = HEADER + b"\n" + b"\n \r\n".join(archive.line(r).encode() for r in runs) + b"\n\n"
    assert archive.read(_xz(tmp_path / "blank", text)) == archive.read(plain) != {}


@pytest.mark.parametrize("cap, words", [("MAX_BYTES", "decompresses to more than"),
                                        ("MAX_LINE", "line 3 is longer than")])
def test_an_archive_past_its_caps_is_one_line(tmp_path, monkeypatch, cap, words):
    """The review's 156 KB archive (1 GiB decompressed) ended in a MemoryError traceback; the caps, low here."""
    out = _xz(tmp_path / "o", lzma.decompress(archive.encode([_run("a"), _run("b" * 400)])))
    monkeypatch.setattr(archive, cap, 300)
    line = _error_line(CliRunner().invoke(cli, ["report", str(out)]))
    assert f"{out / archive.NAME}: unreadable run archive (ValueError: {words}" in line, line


def test_memory_or_stack_running_out_while_reading_an_archive_is_one_line(tmp_path, monkeypatch):
    out = _xz(tmp_path / "o", HEADER + DEEP.encode() + b"\n")  # real: json's RecursionError
    line = _error_line(CliRunner().invoke(cli, ["report", str(out)]))
    assert "unreadable run archive (RecursionError" in line, line

    def no_memory(log):
        raise MemoryError

    monkeypatch.setattr(archive, "unpack", no_memory)
    out = _xz(tmp_path / "p", lzma.decompress(archive.encode([_run("a")])))
    line = _error_line(CliRunner().invoke(cli, ["report", str(out)]))
    assert "unreadable run archive (MemoryError" in line, line


# ---------------------------------------------------------------- config.json of a run folder


@pytest.mark.parametrize("command", ["report", "archive", "bench"])
def test_a_deeply_nested_config_json_is_a_damaged_run(out, command):
    """The review: ``[`` * 100000 in a run's config.json was a RecursionError traceback from report (run_config)
    and from archive and bench (migrate.legacy_runs)."""
    run = next(p for p in (out / "runs").iterdir() if p.is_dir())
    (run / "config.json").write_text(DEEP)
    args = {"report": ["report", str(out)], "archive": ["archive", str(out)],
            "bench": [*FINISHED_ARGS, "--out", str(out)]}[command]
    res = CliRunner().invoke(cli, args)
    assert res.exception is None or isinstance(res.exception, SystemExit), repr(res.exception)
    assert "Traceback" not in res.output, res.output
    if command != "bench":  # bench retrains the run (its config does not say it is this one)
        assert f"{run}: damaged run (config.json is " in res.output, res.output


# ---------------------------------------------------------------- --config FILE


def test_yaml_aliases_are_refused_in_one_short_line(tmp_path):
    """The review's 291-byte alias bomb gave a 39 MB "one-line" error (9 levels: 53 s, then a MemoryError)."""
    pytest.importorskip("yaml")
    rows = ["&a [x, x, x, x, x, x, x, x, x]"] + [f"&{c} [{', '.join(['*' + p] * 9)}]" for p, c in zip("abc", "bcd")]
    path = tmp_path / "c.yaml"
    path.write_text("methods: proden\nhp: {train.lr: [" + ", ".join(rows) + "]}\n")
    line = _error_line(CliRunner().invoke(cli, ["bench", "--config", str(path), "--out", str(tmp_path / "o")]))
    assert line.startswith(f"Error: --config {path}: not valid YAML at line 2 (") and "alias" in line, line
    assert len(line) < 300, len(line)


@pytest.mark.parametrize("name, text, code", [
    ("c.toml", "epochs = [" + ", ".join(["12345"] * 2000) + "]\n", 2),  # an ill-typed value
    ("c.toml", "hp = [[" + ", ".join(["1"] * 2000) + "]]\n", 2),  # an ill-typed hp
    ("c.yaml", "hp: {train.lr: [" + ", ".join(["true"] * 2000) + "]}\n", 1),  # an ill-typed hp value
], ids=["epochs", "hp", "hp-value"])
def test_a_long_value_in_a_config_message_is_cut(tmp_path, name, text, code):
    """The review: messages held the whole value (``{value!r}``); at most 80 characters of it now."""
    if name.endswith(".yaml"):
        pytest.importorskip("yaml")
    path = tmp_path / name
    path.write_text(text)
    line = _error_line(CliRunner().invoke(cli, ["bench", "--config", str(path), "--out", str(tmp_path / "o")]), code)
    assert len(line) < 300 and "..." in line, line


@pytest.mark.parametrize("name, text", [("c.toml", f"hp = {DEEP}\n"), ("c.yaml", f"hp: {DEEP}\n")],
                         ids=["toml", "yaml"])
def test_a_deeply_nested_config_is_one_line(tmp_path, name, text):
    """The review: a RecursionError traceback from the TOML parser (PyYAML's composer recurses too)."""
    if name.endswith(".yaml"):
        pytest.importorskip("yaml")
    path = tmp_path / name
    path.write_text(text)
    line = _error_line(CliRunner().invoke(cli, ["bench", "--config", str(path), "--out", str(tmp_path / "o")]))
    assert line.startswith(f"Error: --config {path}: not valid ") and "nested too deeply" in line, line


# ---------------------------------------------------------------- .mat


def test_a_sparse_mat_too_large_to_make_dense_is_one_line(tmp_path, monkeypatch):
    """The review's 58 KB sparse ``data`` declaring 20000 x 40000 was numpy's "Unable to allocate 5.96 GiB"
    traceback; the allocation failing is raised here, on a 30 x 4 matrix."""
    n, k = 30, 3
    y = np.arange(n) % k
    cand = np.eye(k)[y].T
    cand[0] = 1
    path = tmp_path / "s.mat"
    scipy.io.savemat(path, {"data": scipy.sparse.random(n, 4, density=0.5, format="csc", random_state=0),
                            "target": np.eye(k)[y].T, "partial_target": cand})
    sparse = type(scipy.io.loadmat(path)["data"])

    def no_memory(self, *args, **kwargs):
        raise MemoryError("Unable to allocate 5.96 GiB for an array with shape (20000, 40000) and data type float64")

    monkeypatch.setattr(sparse, "toarray", no_memory)
    res = CliRunner().invoke(cli, ["bench", "--methods", "proden", "--dataset", str(path), "--dry-run",
                                   "--out", str(tmp_path / "o")])
    line = _error_line(res)
    assert line.startswith("Error: s.mat: 'data' is a sparse 30 x 4 matrix"), line
