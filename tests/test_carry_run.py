"""benchmarks/gpu/carry_run.py: an unfinished run carried to another folder in parts, resumed there."""

from __future__ import annotations

import csv
import json
import sys
from pathlib import Path

import pytest
import torch
from click.testing import CliRunner

from pllzoo.checkpoint import NAME, lacks_momentum, read_checkpoint
from pllzoo.cli import cli

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks" / "gpu"))
import carry_run  # noqa: E402


@pytest.fixture
def stopped(registry, tmp_path, monkeypatch, request):
    """A proden bench stopped by --time-limit after epoch 2 of 5 (10 s an epoch on the fake clock)."""
    import fake_clock

    request.addfinalizer(lambda threads=torch.get_num_threads(): torch.set_num_threads(threads))
    fake_clock.install(monkeypatch)
    out = tmp_path / "out"
    args = ["bench", "--methods", "proden", "--dataset", "synthetic-lt", "--epochs", "5", "--out", str(out),
            "--threads", "1"]
    res = CliRunner().invoke(cli, [*args, "--time-limit", "0.5"])
    assert res.exit_code == 75, res.output
    return out, args


def test_pack_unpack_resume(stopped, tmp_path):
    out, args = stopped
    (ckpt,) = out.glob(f"runs/*/{NAME}")
    full = ckpt.read_bytes()
    dest = tmp_path / "carry"
    (out / "runs" / f"{ckpt.parent.name}.lock").write_text("12345 gpu-host-a\n")  # a crashed bench's lock
    manifest = carry_run.pack(out, dest, part_mib=0.05, max_parts=99)
    assert ckpt.read_bytes() == full  # the run's own checkpoint keeps its momentum
    parts = sorted(dest.glob("ckpt.part*"))
    assert [p.name for p in parts] == manifest["parts"] and len(parts) > 1
    assert all(p.stat().st_size <= 0.05 * 2**20 for p in parts)
    assert sum(p.stat().st_size for p in parts) == manifest["bytes"] < manifest["full_bytes"] == len(full)

    moved = tmp_path / "elsewhere"
    target = carry_run.unpack(dest, moved)
    assert not list(moved.glob("runs/*.lock"))  # it would make the next machine's --resume skip the run as in use
    assert target == moved / manifest["run"] / NAME
    carried, original = read_checkpoint(target), read_checkpoint(ckpt)
    assert lacks_momentum(carried) and not lacks_momentum(original)
    for k, v in original["model"].items():
        assert torch.equal(carried["model"][k], v), k
    assert (moved / manifest["run"] / "log.jsonl").read_text() == (ckpt.parent / "log.jsonl").read_text()

    resume = [a if a != str(out) else str(moved) for a in args]
    res = CliRunner().invoke(cli, [*resume, "--resume"])
    assert res.exit_code == 0, res.output
    records = [json.loads(line) for line in (moved / manifest["run"] / "log.jsonl").read_text().splitlines()]
    assert [r["epoch"] for r in records] == [1, 2, 3, 4, 5]
    assert [r.get("momentum_restarted", False) for r in records] == [False, False, True, False, False]


def test_unpack_refuses_damaged_parts(stopped, tmp_path):
    out, _ = stopped
    dest = tmp_path / "carry"
    manifest = carry_run.pack(out, dest, part_mib=0.05, max_parts=99)
    last = dest / manifest["parts"][-1]
    last.write_bytes(last.read_bytes()[:-1])
    with pytest.raises(SystemExit, match="sha256 differs"):
        carry_run.unpack(dest, tmp_path / "elsewhere")
    assert not (tmp_path / "elsewhere").exists()  # checked before anything is written


def test_bad_inputs_are_one_line_and_write_nothing(stopped, tmp_path):
    out, _ = stopped
    with pytest.raises(SystemExit, match="is no pllzoo bench --out folder"):
        carry_run.pack(tmp_path / "nowhere", tmp_path / "d1", part_mib=15)
    assert not (tmp_path / "d1").exists()
    dest = tmp_path / "carry"
    manifest = carry_run.pack(out, dest, part_mib=0.05, max_parts=99)
    with pytest.raises(SystemExit, match="is not a whole packed run"):
        carry_run.unpack(tmp_path / "nowhere", tmp_path / "o1")
    with pytest.raises(SystemExit, match="is not empty; unpack into a new folder"):
        carry_run.unpack(dest, out)  # would replace the run folder's own files
    (dest / manifest["parts"][0]).unlink()
    with pytest.raises(SystemExit, match=r"is not a whole packed run \(FileNotFoundError"):
        carry_run.unpack(dest, tmp_path / "o2")
    assert not (tmp_path / "o1").exists() and not (tmp_path / "o2").exists()


def test_pack_refuses_a_checkpoint_that_cannot_travel(stopped, tmp_path):
    """More parts than a call brings back beside its other files (PiCO's 96 MB: six of 15.9 MiB): refused before
    any part is written, not packed into a call that cannot return it (an outside review)."""
    out, _ = stopped
    with pytest.raises(SystemExit, match=r"more than 3 parts of 0.001 MiB: it cannot travel between device sessions"):
        carry_run.pack(out, tmp_path / "carry", part_mib=0.001)
    assert not list((tmp_path / "carry").glob("ckpt.part*")) and not (tmp_path / "carry" / carry_run.MANIFEST).exists()


def test_a_slim_cifar_copy_serves_its_own_seed_and_imbalance_only(shared_data, tmp_path):
    """.devdata keeps the training images of seed 1, γ 100 and greys the others: another seed or γ drawn from it
    trained on grey images without a word (an outside review); now one line refuses it."""
    from pllzoo.data.base import DataOptions
    from pllzoo.data.cifar import SLIM_MANIFEST, cifar_loader
    from pllzoo.errors import PLLZooError

    copy = tmp_path / "devdata" / "cifar10_jpeg"
    copy.mkdir(parents=True)
    for name in ("train_jpeg.npz", "test_jpeg.npz"):
        (copy / name).symlink_to(shared_data / "cifar10_jpeg" / name)
    (copy / SLIM_MANIFEST).write_text(json.dumps({"seed": 1, "imb": 100.0, "imb_type": "exp"}))
    load = cifar_loader("cifar10lt")
    assert load(DataOptions(data_dir=copy.parent, seed=1, imb=100, download=False)).num_train == 12406
    for seed, imb in ((2, 100), (1, 50)):
        with pytest.raises(PLLZooError, match=rf"is a slim copy for seed 1, γ 100 \(exp\) only .* this run asks "
                                              rf"seed {seed}, γ {imb} \(exp\)"):
            load(DataOptions(data_dir=copy.parent, seed=seed, imb=imb, download=False))


def test_pack_carries_one_unfinished_run_or_none(tmp_path):
    out = tmp_path / "out"
    for run in ("a", "b"):
        (out / "runs" / run).mkdir(parents=True)
        (out / "runs" / run / NAME).write_bytes(b"x")
    with pytest.raises(SystemExit, match="holds 2 unfinished runs"):
        carry_run.pack(out, tmp_path / "carry", part_mib=15)
    for run in ("a", "b"):
        (out / "runs" / run / "done").write_text("ok\n")
    (out / "runs" / "a" / "log.jsonl").write_text("{}\n")
    assert carry_run.pack(out, tmp_path / "carry", part_mib=15) == {"run": None, "parts": []}
    assert carry_run.unpack(tmp_path / "carry", tmp_path / "moved") == tmp_path / "moved"
    assert (tmp_path / "moved" / "runs" / "a" / "log.jsonl").read_text() == "{}\n"
    assert not list((tmp_path / "moved").glob(f"runs/*/{NAME}"))


ROOT = Path(__file__).resolve().parents[1]
CARRIED = ROOT / ".paperrun"  # committed: a session's checkout is laid anew from main (.gitignore says so)
DEVICE_TREE_MIB = 64  # what a device call takes along: the tracked tree, untracked files and the carried paths
SLIM_CIFAR_MIB = 7.5  # .devdata (benchmarks/gpu/slim_cifar.py: 6.8 MiB), carried in every paper-run call


def _tracked_bytes() -> int:
    import subprocess

    try:
        names = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("not a git checkout: the tree a device call takes is git's")
    return sum((ROOT / n).stat().st_size for n in names.decode().split("\0") if n and (ROOT / n).is_file())


def test_the_committed_carried_run_is_whole_and_names_a_paper_run():
    """The part committed in .paperrun/ rebuilds its checkpoint (sha256) and belongs to a paper run, so a device
    call never spends its minutes finding out that the carried run is broken."""
    if not (CARRIED / carry_run.MANIFEST).exists():
        pytest.skip("no run is carried between device sessions now (.paperrun/carry.json absent)")
    manifest, _, blob = carry_run.read(CARRIED)
    with (ROOT / "benchmarks/paper/recipes.csv").open(newline="") as f:
        names = {row["run"] for row in csv.DictReader(f)}
    assert manifest.get("label") in names
    assert sorted(p.name for p in CARRIED.iterdir()) == sorted([carry_run.MANIFEST, "run.tgz", *manifest["parts"]])
    assert all((CARRIED / p).stat().st_size <= 16 * 2**20 for p in manifest["parts"])  # a call's files back
    assert len(blob) == manifest["bytes"]


def test_the_tree_a_device_call_takes_fits_its_limit():
    """Tracked files (.paperrun/ among them) plus the slim CIFAR copy stay under a device call's 64 MiB."""
    mib = _tracked_bytes() / 2**20
    assert mib + SLIM_CIFAR_MIB <= DEVICE_TREE_MIB, (
        f"git tracks {mib:.1f} MiB; with .devdata a device call would take over {DEVICE_TREE_MIB} MiB")
