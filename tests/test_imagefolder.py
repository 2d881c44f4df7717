"""``--dataset imagefolder:PATH``: a tiny generated image folder and its candidate file, every file format, both
layouts, a torchvision-style dataset, one epoch of ``pllzoo bench``, and a one-line error for each file mismatch."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
from click.testing import CliRunner
from PIL import Image

from pllzoo import PLLZooError, image_folder_dataset, pll_from_images
from pllzoo.cli import cli
from pllzoo.data.base import DataOptions
from pllzoo.data.imagefolder import load_image_folder

CLASSES = ["cat", "dog", "fox"]
PER_CLASS = 5


def write_folder(root: Path, per_class: int = PER_CLASS, size: tuple[int, int] = (8, 8), seed: int = 0) -> np.ndarray:
    """PNG images ``root/<class>/<i>.png`` (class k has a bright channel k); returns their labels in sorted order."""
    rng = np.random.RandomState(seed)
    labels = []
    for k, c in enumerate(CLASSES):
        (root / c).mkdir(parents=True)
        for i in range(per_class):
            a = rng.randint(0, 100, (*size, 3)).astype(np.uint8)
            a[..., k] += 150
            Image.fromarray(a).save(root / c / f"{i:02d}.png")
            labels.append(k)
    return np.asarray(labels)


def candidates_for(labels: np.ndarray, seed: int = 0) -> np.ndarray:
    """Random candidate sets that hold the true label."""
    cand = np.random.RandomState(seed).rand(len(labels), len(CLASSES)) < 0.4
    cand[np.arange(len(labels)), labels] = True
    return cand


@pytest.fixture
def folder(tmp_path) -> tuple[Path, np.ndarray]:
    root = tmp_path / "pets"
    labels = write_folder(root)
    cand = candidates_for(labels)
    np.save(root / "candidates.npy", cand)
    return root, cand


def write_candidates(root: Path, cand: np.ndarray, suffix: str) -> None:
    for old in root.glob("candidates.*"):
        old.unlink()
    path = root / f"candidates{suffix}"
    if suffix == ".npy":
        np.save(path, cand)
    elif suffix == ".pt":
        torch.save(torch.from_numpy(cand), path)
    elif suffix == ".csv":
        path.write_text("".join(",".join(str(int(v)) for v in row) + "\n" for row in cand))
    else:
        path.write_text("".join(" ".join(c for c, v in zip(CLASSES, row) if v) + "\n" for row in cand))


def test_bench_trains_one_epoch_on_an_image_folder(folder, tmp_path):
    root, _ = folder
    out = tmp_path / "out"
    res = CliRunner().invoke(cli, ["bench", "--methods", "proden", "--dataset", f"imagefolder:{root}", "--epochs", "1",
                                   "--threads", "1", "--hp", "train.batch_size=4", "--out", str(out)])
    assert res.exit_code == 0, res.output
    rows = pd.read_csv(out / "results.csv")
    assert list(rows["status"]) == ["ok"] and rows["acc_all"].notna().all() and list(rows["dataset"]) == ["pets"]
    (run,) = (out / "runs").iterdir()
    data = json.loads((run / "config.json").read_text())["data"]
    assert data["candidates_file"] == "candidates.npy" and data["n_train"] + data["n_test"] == 15
    assert data["root"] == root.name  # no place on the machine: every spelling of the folder is one run id
    assert len(data["candidates_sha256"]) == 64 and data["image_shape"] == [3, 8, 8]


def test_every_spelling_of_the_folder_is_one_run(folder, tmp_path, monkeypatch):
    """Relative, absolute and a path through '..' name one run id (reused, not retrained); --from-run replays it
    from another spelling."""
    root, _ = folder
    monkeypatch.chdir(root.parent)
    out = tmp_path / "out"
    args = ["bench", "--methods", "proden", "--epochs", "1", "--threads", "1", "--hp", "train.batch_size=4",
            "--out", str(out)]
    (root.parent / "link").symlink_to(root)
    spellings = [root.name, str(root), f"{root.name}/../{root.name}", "link"]
    for i, spelling in enumerate(spellings):
        res = CliRunner().invoke(cli, [*args, "--dataset", f"imagefolder:{spelling}"])
        assert res.exit_code == 0, res.output
        assert ("reusing finished run" in res.output) == (i > 0), res.output
    (run,) = (p for p in (out / "runs").iterdir() if p.is_dir())
    monkeypatch.chdir(root)
    res = CliRunner().invoke(cli, [*args, "--dataset", "imagefolder:."])  # "." names the folder itself
    assert res.exit_code == 0 and f"reusing finished run {run.name}" in res.output, res.output
    res = CliRunner().invoke(cli, ["bench", "--from-run", str(run), "--dataset", f"imagefolder:{root}", "--threads",
                                   "1", "--out", str(tmp_path / "again")])
    assert res.exit_code == 0 and "other data" not in res.output, res.output
    assert [p.name for p in (tmp_path / "again" / "runs").iterdir() if p.is_dir()] == [run.name]


@pytest.mark.parametrize("suffix", [".npy", ".pt", ".csv", ".txt"])
def test_every_candidate_format_reads_the_same_sets_in_sorted_file_order(folder, suffix):
    root, cand = folder
    write_candidates(root, cand, suffix)
    whole = load_image_folder(root, DataOptions(seed=1))
    assert whole.kind == "image" and whole.class_names == CLASSES and whole.x_train.dtype == torch.uint8
    assert (whole.num_train, len(whole.y_test)) == (12, 3)  # the uniform 80/20 split of 15 images
    # every training row keeps its image's candidates: find each image again among the 15 files
    files = sorted(root.glob("*/*.png"))  # sorted(class/file): ImageFolder's order
    pixels = [torch.from_numpy(np.asarray(Image.open(f)).transpose(2, 0, 1).copy()) for f in files]
    for x, y, c in zip(whole.x_train, whole.y_train, whole.candidates):
        (i,) = [i for i, p in enumerate(pixels) if torch.equal(p, x)]
        assert int(y) == CLASSES.index(files[i].parent.name) and c.tolist() == cand[i].tolist()


def test_the_split_is_seeded(folder):
    root, _ = folder
    a, b, c = (load_image_folder(root, DataOptions(seed=s)) for s in (1, 1, 2))
    assert torch.equal(a.x_train, b.x_train) and not torch.equal(a.x_train, c.x_train)
    mean = a.x_train.double().div(255).mean((0, 2, 3))
    assert a.mean == pytest.approx(mean.tolist())


def test_train_and_test_folders(tmp_path):
    root = tmp_path / "split"
    labels = write_folder(root / "train", per_class=4)
    write_folder(root / "test", per_class=2, seed=1)
    np.save(root / "candidates.npy", candidates_for(labels))
    data = load_image_folder(root, DataOptions())
    assert (data.num_train, len(data.y_test)) == (12, 6) and data.y_test.tolist() == [0, 0, 1, 1, 2, 2]
    assert data.info["split"] == "given"


def _drop_true_label(cand: np.ndarray, y: np.ndarray, row: int) -> np.ndarray:
    cand[row] = True
    cand[row, y[row]] = False
    return cand


MISMATCHES = [  # (how the file goes wrong, what the one-line error says)
    ("a row too few", lambda c, y: c[:-1], "14 candidate rows for 15 images"),
    ("a column too many", lambda c, y: np.concatenate([c, c[:, :1]], 1), "4 candidate columns for 3 classes"),
    ("an empty row", lambda c, y: np.where(np.arange(15)[:, None] == 6, False, c),
     r"empty candidate sets in 1 of 15 rows \(first: row 6, 0-based, dog/01.png\)"),
    ("the true label left out", lambda c, y: _drop_true_label(c, y, 2),
     r"true labels that are not candidates in 1 of 15 rows \(first: row 2, 0-based, cat/02.png\); are its rows in the dataset's order, and its columns"),
    ("rows of other images", lambda c, y: np.eye(3, dtype=bool)[(y + 1) % 3],
     "true labels that are not candidates in 15 of 15 rows"),
]


@pytest.mark.parametrize("what,change,message", MISMATCHES, ids=[m[0] for m in MISMATCHES])
@pytest.mark.parametrize("suffix", [".npy", ".csv"])
def test_a_candidate_file_that_does_not_fit_is_one_line(folder, what, change, message, suffix):
    root, cand = folder
    labels = np.repeat(np.arange(3), PER_CLASS)
    write_candidates(root, change(cand.copy(), labels), suffix)
    with pytest.raises(PLLZooError, match=rf"^candidates{suffix}: {message}") as info:
        load_image_folder(root, DataOptions())
    assert "\n" not in str(info.value)


@pytest.mark.parametrize("setup,message", [
    (lambda r: (r / "candidates.npy").unlink(), r"no candidate file in .*one of candidates.npy"),
    (lambda r: (r / "candidates.txt").write_text("cat\n"), "more than one candidate file .*candidates.npy, candidates.txt"),
    (lambda r: (r / "candidates.npy").write_bytes(b"not numpy"), "candidates.npy: cannot read the candidate file"),
    (lambda r: np.save(r / "candidates.npy", np.full((15, 3), 2)), "candidates.npy: entries other than 0/1 in 15"),
    (lambda r: ((r / "candidates.npy").unlink(), (r / "candidates.txt").write_text("cat\nwolf\n")),
     "candidates.txt: line 2 names 'wolf', not a class; classes: cat, dog, fox"),
    (lambda r: Image.new("RGB", (9, 8)).save(r / "fox" / "04.png"), "fox/04.png is 9x8 but cat/00.png is 8x8"),
    (lambda r: (r / "fox" / "04.png").write_text("not an image"),
     r"fox/04.png: not a readable image \(UnidentifiedImageError: .*\); remove or replace it"),
    (lambda r: (r / "dog" / "01.png").write_bytes((r / "dog" / "01.png").read_bytes()[:60]),
     r"dog/01.png: not a readable image \(OSError: .*\); remove or replace it"),  # cut short
    (lambda r: ((r / "dog" / "01.png").unlink(), os.mkfifo(r / "dog" / "01.png")),  # would block the read forever
     r"dog/01.png: not a readable image \(OSError: .*dog/01.png is not a regular file\)"),
    (lambda r: ((r / "fox" / "04.png").unlink(),
                Image.fromarray(np.full((8, 8), 0.5, np.float32), mode="F").save(r / "fox" / "04.tiff")),
     r"fox/04.tiff: a floating-point image \(mode F\) has no agreed pixel range; save it as 8-bit"),
])
def test_folder_problems_are_one_line(folder, setup, message):
    root, _ = folder
    setup(root)
    with pytest.raises(PLLZooError, match=message) as info:
        load_image_folder(root, DataOptions())
    assert "\n" not in str(info.value)


def test_the_cli_reports_a_mismatch_in_one_line(folder, tmp_path):
    root, cand = folder
    np.save(root / "candidates.npy", cand[:-2])
    res = CliRunner().invoke(cli, ["bench", "--methods", "proden", "--dataset", f"imagefolder:{root}", "--epochs", "1",
                                   "--out", str(tmp_path / "out")])
    errors = [line for line in res.output.splitlines() if line.startswith("Error:")]
    assert res.exit_code != 0 and "Traceback" not in res.output
    assert errors == ["Error: candidates.npy: 13 candidate rows for 15 images; one row per image, in the dataset's order"]


@pytest.mark.parametrize("path,message", [("/no/such/folder", "no such folder"), ("", "give a folder")])
def test_a_bad_imagefolder_path_is_one_line(registry, path, message):
    with pytest.raises(PLLZooError, match=message):
        registry.dataset(f"imagefolder:{path}").load(DataOptions())


def test_a_plugin_registers_a_folder_under_a_name(folder, tmp_path):
    root, cand = folder
    other = tmp_path / "elsewhere.csv"
    other.write_text("".join(",".join(str(int(v)) for v in row) + "\n" for row in cand))
    (root / "candidates.npy").unlink()
    spec = image_folder_dataset(root, name="my.pets", candidates=other, description="pets")
    data = spec.load(DataOptions())
    assert (spec.name, spec.needs_files, data.name, data.info["candidates_file"]) == ("my.pets", True, "my.pets",
                                                                                       "elsewhere.csv")


class TinyTorchvisionStyle:
    """What a torchvision dataset offers: ``classes``, ``len``, ``ds[i] -> (image, label)``."""

    classes = ["a", "b"]

    def __init__(self, n: int, as_tensor: bool) -> None:
        self.n, self.as_tensor = n, as_tensor

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int):
        img = torch.full((3, 4, 4), 10 * i, dtype=torch.uint8)
        return (img if self.as_tensor else Image.fromarray(img.permute(1, 2, 0).numpy())), i % 2


def test_pll_from_images_takes_a_torchvision_style_dataset():
    cand = torch.tensor([[1, 0], [1, 1], [1, 1], [0, 1]], dtype=torch.bool)
    data = pll_from_images("tv", TinyTorchvisionStyle(4, True), cand, DataOptions(),
                           test=TinyTorchvisionStyle(2, False))
    assert data.x_train.shape == (4, 3, 4, 4) and data.y_test.tolist() == [0, 1]
    assert torch.equal(data.x_test[1], torch.full((3, 4, 4), 10, dtype=torch.uint8))
    wrong = cand.clone()
    wrong[0] = torch.tensor([False, True])  # item 0 has label 0
    with pytest.raises(PLLZooError, match=r"true labels that are not candidates in 1 of 4 rows \(first: row 0, "
                                          r"0-based, item 0\)"):
        pll_from_images("tv", TinyTorchvisionStyle(4, True), wrong, DataOptions())


class Relabelled(TinyTorchvisionStyle):
    """A test set whose labels are given (some outside 0..K-1)."""

    def __init__(self, labels: list[int]) -> None:
        super().__init__(len(labels), True)
        self.labels = labels

    def __getitem__(self, i: int):
        return super().__getitem__(i)[0], self.labels[i]


@pytest.mark.parametrize("labels", [[0, 1, -1], [0, 1, 2]])
def test_test_labels_outside_the_classes_are_one_line(labels):
    """numpy wrapped a test label -1 to the last class (its accuracy scored against another label) and a label K
    was an IndexError (a review)."""
    cand = torch.ones(4, 2, dtype=torch.bool)
    with pytest.raises(PLLZooError, match=r"^tv: test labels outside 0\.\.1$"):
        pll_from_images("tv", TinyTorchvisionStyle(4, True), cand, DataOptions(), test=Relabelled(labels))


def test_an_image_over_pils_pixel_limit_is_one_line(folder, monkeypatch):
    """PIL's DecompressionBombError is no OSError: it ended the command with a traceback (a review)."""
    root, _ = folder
    monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", 16)  # 8x8 images: 64 pixels, over twice the limit
    with pytest.raises(PLLZooError, match=r"^cat/00.png: not a readable image \(DecompressionBombError: .*\); "
                                          "remove or replace it$"):
        load_image_folder(root, DataOptions())


def test_16_bit_grey_images_are_scaled_not_clipped(tmp_path):
    """PIL's convert("RGB") clips a 16-bit image (mode I;16) to 255 almost everywhere; the loader scales it."""
    root = tmp_path / "grey"
    values = np.arange(64, dtype=np.uint16).reshape(8, 8) * 1000  # 0 .. 63000
    for c in ("a", "b"):
        (root / c).mkdir(parents=True)
        for i in range(3):
            Image.fromarray(values).save(root / c / f"{i}.png")  # a 16-bit grey PNG
    assert Image.open(root / "a" / "0.png").mode.startswith("I")
    np.save(root / "candidates.npy", np.ones((6, 2), bool))
    data = load_image_folder(root, DataOptions(seed=1))
    x = torch.cat([data.x_train, data.x_test])
    expected = torch.from_numpy(np.rint(values * (255 / 65535)).astype(np.uint8))
    assert all(torch.equal(img[ch], expected) for img in x for ch in range(3))
    from pllzoo.data.imagefolder import _rgb

    small = Image.fromarray((values // 1000).astype(np.int32), mode="I")  # 32-bit integers 0..63: as they are
    assert _rgb(small, "small.tiff").max() == 63
    with pytest.raises(PLLZooError, match=r"wide.tiff: a I image with values in 0..63000, beyond 0..255; save it"):
        _rgb(Image.fromarray(values.astype(np.int32), mode="I"), "wide.tiff")  # range unknown: refused, not guessed


def test_a_class_named_train_or_test_stays_a_class(tmp_path):
    """CIFAR-100 and VOC have a class named "train": in the flat layout it is a class like the others."""
    root = tmp_path / "vehicles"
    for c in ("bus", "test", "train"):
        (root / c).mkdir(parents=True)
        for i in range(4):
            Image.new("RGB", (8, 8), (i, 0, 0)).save(root / c / f"{i}.png")
    np.save(root / "candidates.npy", np.ones((12, 3), bool))
    data = load_image_folder(root, DataOptions(seed=1))
    assert data.class_names == ["bus", "test", "train"] and data.num_train + len(data.y_test) == 12


def test_the_split_layout_ignores_other_folders_beside_train_and_test(tmp_path):
    """A val/ (or a zip's __MACOSX/) beside train/ and test/ leaves the split layout as it was."""
    root = tmp_path / "split"
    for part, n in (("train", 3), ("test", 2), ("val", 2)):
        for c in ("a", "b"):
            (root / part / c).mkdir(parents=True)
            for i in range(n):
                Image.new("RGB", (8, 8), (i, 0, 0)).save(root / part / c / f"{i}.png")
    np.save(root / "candidates.npy", np.ones((6, 2), bool))
    data = load_image_folder(root, DataOptions(seed=1))
    assert data.class_names == ["a", "b"] and (data.num_train, len(data.y_test)) == (6, 4)


def test_split_balanced_on_a_given_test_set_is_refused(tmp_path):
    """With train/ and test/ the test set is given: --split balanced was silently ignored (an outside review)."""
    root = tmp_path / "split"
    for part, n in (("train", 3), ("test", 2)):
        for c in ("a", "b"):
            (root / part / c).mkdir(parents=True)
            for i in range(n):
                Image.new("RGB", (8, 8), (i, 0, 0)).save(root / part / c / f"{i}.png")
    np.save(root / "candidates.npy", np.ones((6, 2), bool))
    with pytest.raises(PLLZooError, match=r"^--split balanced does not apply to .*: its test set is given"):
        load_image_folder(root, DataOptions(seed=1, split="balanced"))


def test_the_row_order_is_image_folders_not_sorted_paths(tmp_path):
    """'cat-big/0.png' sorts before 'cat/0.png' as a path ('-' < '/'), but ImageFolder takes class 'cat' first;
    the documented way of listing the order (docs/extending.md) gives the rows the loader expects."""
    import torchvision

    root = tmp_path / "cats"
    for k, c in enumerate(("cat", "cat-big")):
        (root / c).mkdir(parents=True)
        for i in range(3):
            Image.new("RGB", (8, 8), (100 * k, i, 0)).save(root / c / f"{i}.png")
    order = [Path(p).parent.name for p, _ in torchvision.datasets.ImageFolder(str(root)).samples]
    as_text = sorted(str(p.relative_to(root)) for p in root.glob("*/*.png"))  # what sorted(glob.glob(...)) gives
    assert order == ["cat"] * 3 + ["cat-big"] * 3 != [t.split("/")[0] for t in as_text]
    (root / "candidates.txt").write_text("".join(f"{c}\n" for c in order))
    data = load_image_folder(root, DataOptions(seed=1))
    assert data.num_train + len(data.y_test) == 6


def test_class_names_match_in_either_unicode_form(tmp_path):
    """A folder named in decomposed form (NFD, as macOS writes it) matches the composed name in candidates.txt."""
    import unicodedata

    root = tmp_path / "cafes"
    for c in (unicodedata.normalize("NFD", "café"), "dog"):
        (root / c).mkdir(parents=True)
        for i in range(3):
            Image.new("RGB", (8, 8), (i, 0, 0)).save(root / c / f"{i}.png")
    (root / "candidates.txt").write_text(unicodedata.normalize("NFC", "café dog\n") * 3 + "dog\n" * 3)
    data = load_image_folder(root, DataOptions(seed=1))
    assert data.num_train + len(data.y_test) == 6


@pytest.mark.parametrize("suffix", [".csv", ".txt"])
def test_a_text_candidate_file_with_a_byte_order_mark_reads_the_same_sets(folder, suffix):
    """An outside review: a BOM (Excel's "CSV UTF-8", Notepad's "UTF-8") was 'could not convert string' or
    'names '\\ufeffa', not a class'."""
    root, cand = folder
    write_candidates(root, cand, suffix)
    plain = load_image_folder(root, DataOptions(seed=1))
    path = root / f"candidates{suffix}"
    path.write_bytes(b"\xef\xbb\xbf" + path.read_bytes())
    bom = load_image_folder(root, DataOptions(seed=1))
    assert torch.equal(bom.candidates, plain.candidates) and torch.equal(bom.y_train, plain.y_train)


@pytest.mark.parametrize("encoding", ["latin-1", "utf-16"])
def test_a_text_candidate_file_in_another_encoding_is_one_line(folder, encoding):
    """An outside review: a Latin-1 or UTF-16 .txt was a UnicodeDecodeError traceback."""
    root, cand = folder
    write_candidates(root, cand, ".txt")
    path = root / "candidates.txt"
    path.write_bytes(path.read_text().replace(CLASSES[0], CLASSES[0] + "é", 1).encode(encoding))
    with pytest.raises(PLLZooError, match=r"candidates.txt: not UTF-8 text \(byte 0x.. at \d+\); save it as UTF-8"):
        load_image_folder(root, DataOptions(seed=1))


def test_from_run_replays_a_run_on_given_train_and_test_folders(tmp_path):
    """An outside review: --from-run passed the recorded split "given" (the folder's own test/) to --split, which
    refused it, for every run on such a folder."""
    root = tmp_path / "split"
    labels = write_folder(root / "train", per_class=4)
    write_folder(root / "test", per_class=2, seed=1)
    np.save(root / "candidates.npy", candidates_for(labels))
    args = ["--dataset", f"imagefolder:{root}", "--threads", "1"]
    res = CliRunner().invoke(cli, ["bench", "--methods", "proden", "--epochs", "1", "--batch-size", "4",
                                   "--out", str(tmp_path / "a"), *args])
    assert res.exit_code == 0, res.output
    (run,) = (tmp_path / "a" / "runs").iterdir()
    res = CliRunner().invoke(cli, ["bench", "--from-run", str(run), "--out", str(tmp_path / "b"), *args])
    assert res.exit_code == 0, res.output
    (again,) = (tmp_path / "b" / "runs").iterdir()
    assert again.name == run.name
    strip = lambda p: [{k: v for k, v in json.loads(x).items() if k != "wall_s"}  # noqa: E731
                       for x in (p / "log.jsonl").read_text().splitlines()]
    assert strip(again) == strip(run)


def test_a_test_folder_may_lack_a_tail_class(tmp_path):
    """An outside review: with train/ and test/, a test set without a (tail) class was refused, and an empty
    test/<class>/ failed too; a long-tailed set often has no held-out image of its rarest class."""
    root = tmp_path / "split"
    for part, per_class in (("train", {"ant": 4, "bee": 3, "dog": 2}), ("test", {"ant": 2, "dog": 1})):
        for c, n in per_class.items():
            (root / part / c).mkdir(parents=True)
            for i in range(n):
                Image.new("RGB", (8, 8), (40 * i, 0, 0)).save(root / part / c / f"{i}.png")
    np.save(root / "candidates.npy", np.ones((9, 3), bool))
    data = load_image_folder(root, DataOptions())
    assert data.class_names == ["ant", "bee", "dog"] and data.y_test.tolist() == [0, 0, 2]  # dog is class 2
    (root / "test" / "bee").mkdir()  # an empty class folder: one line saying what to do
    with pytest.raises(PLLZooError, match="leave its folder out of test/"):
        load_image_folder(root, DataOptions())
    (root / "test" / "bee").rmdir()
    (root / "test" / "cat").mkdir()
    Image.new("RGB", (8, 8)).save(root / "test" / "cat" / "0.png")
    with pytest.raises(PLLZooError, match=r"the test classes \['cat'\] are no training class"):
        load_image_folder(root, DataOptions())


@pytest.mark.skipif(os.name != "posix", reason="a file name that is no UTF-8: a POSIX file system")
def test_class_and_image_names_that_are_no_utf8_load(tmp_path):
    """A second review: a class folder or image named with a byte that is no UTF-8 crashed the folder's listing
    hash (UnicodeEncodeError) with a traceback."""
    root = Path(os.fsdecode(bytes(tmp_path) + b"/pets"))
    for c, n in (("ant", 4), (os.fsdecode(b"b\xffe"), 4)):
        (root / c).mkdir(parents=True)
        for i in range(n):
            Image.new("RGB", (8, 8), (30 * i, 0, 0)).save(root / c / os.fsdecode(b"%d\xe9.png" % i))
    np.save(root / "candidates.npy", np.ones((8, 2), bool))
    data = load_image_folder(root, DataOptions())
    assert data.num_train + len(data.y_test) == 8 and len(data.info["files_sha256"]) == 64


def test_a_crlf_copy_of_the_candidate_file_is_the_same_run(folder, tmp_path):
    """A CRLF copy of ``candidates.txt`` (Git for Windows checks text out so) hashes as the LF file, whose hash is
    its bytes' as ever (recorded run ids stay; an outside review: two ids for one dataset); one flipped
    candidate is another hash."""
    import hashlib

    root, cand = folder
    write_candidates(root, cand, ".txt")
    path = root / "candidates.txt"
    digest = lambda: load_image_folder(root, DataOptions()).info["candidates_sha256"]  # noqa: E731
    lf = digest()
    assert lf == hashlib.sha256(path.read_bytes()).hexdigest()
    path.write_bytes(path.read_bytes().replace(b"\n", b"\r\n"))
    assert digest() == lf
    flipped = cand.copy()
    labels = np.repeat(np.arange(len(CLASSES)), PER_CLASS)  # write_folder's order
    row = int(np.flatnonzero(cand.sum(1) > 1)[0])
    flipped[row, next(k for k in np.flatnonzero(cand[row]) if k != labels[row])] = False  # still a valid set
    write_candidates(root, flipped, ".txt")
    assert digest() != lf
