"""Image datasets of your own: an image folder (``--dataset imagefolder:PATH``) or any torchvision-style dataset,
with a candidate-set file.

``imagefolder:PATH`` reads torchvision's ``ImageFolder`` layout, in one of two forms:

* ``PATH/train/<class>/<image>`` (and optionally ``PATH/test/<class>/<image>``, the same class folders):
  the test split is ``PATH/test``; taken when ``PATH/train`` holds class folders and no image of its own;
* ``PATH/<class>/<image>``: all images, split into train and test by the run's seed and
  ``--split`` (``uniform``: a random 80/20; ``balanced``), as for the real-world ``.mat`` sets.

The candidate sets are in ``PATH/candidates.npy``, ``.pt``, ``.csv`` or ``.txt`` (exactly one of them;
formats: :mod:`pllzoo.data.candidate_file`), one row per training image (per image of ``PATH`` in the
second form) in ``ImageFolder``'s order: class folders sorted by name, then files sorted by name
within each (those of its sub-folders after), which is not always ``sorted(class/file)``.  The class of
an image's folder is its true label: used for evaluation and for checking the file (each true label must
be a candidate), never for training.

Images are read with PIL and converted to RGB (16-bit grey scaled to 8 bits); all must have the same size
(resize them beforehand).
Normalisation uses the training images' per-channel mean and std.  A plugin registers such a set
under a name with :func:`image_folder_dataset`, or builds one from any torchvision-style dataset
(``len``, ``ds[i] -> (image, label)``, ``ds.classes``) with :func:`pll_from_images`.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any, Protocol, Sequence

import numpy as np
import torch

from pllzoo.data.base import SPLIT, DataOptions, DatasetSpec, PLLData, TrainDefaults, text_name
from pllzoo.data.candidate_file import SUFFIXES, check_candidates, read_candidates
from pllzoo.data.splits import split_indices
from pllzoo.data.validate import exception_line
from pllzoo.errors import PLLZooError

CANDIDATES_STEM = "candidates"
IMAGE_DEFAULTS = TrainDefaults(
    model="cnn", epochs=50, lr=0.01, weight_decay=5e-4, batch_size=64, schedule="cosine",
    source="pllzoo's generic starting point for an image folder (no paper): the small CPU CNN; "
           "set --hp train.model=wrn28-2 (or resnet18) and the schedule for real runs",
)


class ImageDataset(Protocol):
    """What :func:`pll_from_images` reads: a torchvision-style dataset."""

    classes: list[str]

    def __len__(self) -> int: ...

    def __getitem__(self, i: int) -> tuple[Any, int]: ...


def _chw_uint8(image: Any, name: str) -> np.ndarray:
    """A PIL image, a uint8 ``[C, H, W]`` tensor or a uint8 ``[H, W(, C)]`` array as uint8 ``[3, H, W]``."""
    if isinstance(image, torch.Tensor):
        if image.dtype != torch.uint8 or image.dim() != 3:
            raise PLLZooError(f"{name}: a {image.dtype} tensor of shape {tuple(image.shape)}; give uint8 [C, H, W] "
                              f"images (no ToTensor/Normalize: pllzoo augments and normalises them)")
        a = image.numpy()
    elif hasattr(image, "convert"):  # PIL
        a = _rgb(image, name).transpose(2, 0, 1)
    else:
        a = np.asarray(image)
        if a.dtype != np.uint8 or a.ndim not in (2, 3):
            raise PLLZooError(f"{name}: a {a.dtype} array of shape {a.shape}; give uint8 [H, W] or [H, W, C] images")
        a = a[None] if a.ndim == 2 else a.transpose(2, 0, 1)
    if a.shape[0] == 1:
        a = np.repeat(a, 3, axis=0)  # grey -> RGB, as PIL's convert does
    if a.shape[0] != 3:
        raise PLLZooError(f"{name}: {a.shape[0]} channels; give RGB or grey images")
    return np.ascontiguousarray(a)


def _rgb(image: Any, name: str) -> np.ndarray:
    """A PIL image as uint8 ``[H, W, 3]``, one rule per mode, never per image.  16-bit images (PNG/TIFF, modes
    ``I;16*``) are scaled to 0..255: PIL's ``convert("RGB")`` clips them, which turns most pixels white.  32-bit
    integer images (mode ``I``) are taken as they are where they hold 0..255, and refused above it, where their
    range is unknown (Pillow opens 16-bit PNGs as ``I;16``).  A float image (mode ``F``) is refused."""
    mode = image.mode
    if mode.startswith("I;16") or mode == "I":
        v = np.asarray(image).astype(np.int64)
        top = 65535 if mode != "I" else 255
        if v.size and (v.min() < 0 or v.max() > top):
            raise PLLZooError(f"{name}: a {mode} image with values in {v.min()}..{v.max()}, beyond 0..{top}; save it "
                              "as an 8-bit or 16-bit image")
        grey = np.rint(v * (255 / 65535)).astype(np.uint8) if mode != "I" else v.astype(np.uint8)
        return np.repeat(grey[..., None], 3, axis=2)
    if mode == "F":
        raise PLLZooError(f"{name}: a floating-point image (mode F) has no agreed pixel range; save it as 8-bit")
    return np.asarray(image.convert("RGB"))


def _split_layout(root: Path) -> bool:
    """``root/train/<class>/...`` (and ``root/test``) rather than ``root/<class>/...``: ``root/train`` holds
    class folders and no image of its own.  A flat set with a class named ``train`` (CIFAR-100 and VOC have one)
    keeps its images in it."""
    from torchvision.datasets.folder import IMG_EXTENSIONS

    train = root / "train"
    if not train.is_dir():
        return False
    entries = list(train.iterdir())
    return any(p.is_dir() for p in entries) and not any(
        p.is_file() and p.name.lower().endswith(IMG_EXTENSIONS) for p in entries)


def _open_image(path: str) -> Any:
    """ImageFolder's loader: the image at ``path``, read whole.  Only a regular file is opened (a pipe named like
    an image would block the read forever)."""
    import stat

    from PIL import Image

    if not stat.S_ISREG(os.stat(path).st_mode):
        raise OSError(f"{path} is not a regular file")
    with Image.open(path) as image:
        image.load()
        return image.copy() if image.mode.startswith("I") or image.mode == "F" else image.convert("RGB")


def _read_all(ds: ImageDataset, names: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """All images ``uint8 [N, 3, H, W]`` and labels ``int64 [N]`` of ``ds``; sizes must agree."""
    from PIL import Image

    images, labels = [], []
    for i in range(len(ds)):
        try:
            image, label = ds[i]
        except (OSError, Image.DecompressionBombError) as exc:  # PIL.UnidentifiedImageError too: a file named
            # like an image that is not one; a bomb (over PIL's pixel limit) is no OSError (a review: a traceback)
            raise PLLZooError(f"{names[i]}: not a readable image ({exception_line(exc)}); remove or replace "
                              "it") from None
        a = _chw_uint8(image, names[i])
        if images and a.shape != images[0].shape:
            raise PLLZooError(f"{names[i]} is {a.shape[2]}x{a.shape[1]} but {names[0]} is "
                              f"{images[0].shape[2]}x{images[0].shape[1]}; resize the images to one size")
        images.append(a)
        labels.append(int(label))
    if not images:
        raise PLLZooError("the dataset has no images")
    return np.stack(images), np.asarray(labels, dtype=np.int64)


def pll_from_images(
    name: str, train: ImageDataset, candidates: Path | str | np.ndarray | torch.Tensor, opts: DataOptions,
    test: ImageDataset | None = None, names: Sequence[str] | None = None, test_names: Sequence[str] | None = None,
    defaults: TrainDefaults = IMAGE_DEFAULTS, info: dict[str, Any] | None = None,
) -> PLLData:
    """A :class:`PLLData` from torchvision-style datasets and candidate sets for the images of ``train``.

    :param train: the images with candidate sets (``ds[i] -> (PIL image or uint8 [C,H,W], label)``,
        ``ds.classes``); without ``test`` it is split by ``opts.seed``/``opts.split`` first.
    :param candidates: a candidate file (:mod:`pllzoo.data.candidate_file`) or a bool/0-1 ``[N, K]``
        array, one row per image of ``train`` in its order.
    :param names: one name per image of ``train`` for messages (default ``item i``); ``test_names`` the same.
    :raises PLLZooError: one line, for a candidate file that does not fit (row count, column count,
        empty rows, true labels outside their sets), images of different sizes, a test class that is no training
        class (a training class without test images is allowed: its accuracy is left out, as for a split).
    """
    classes = [str(c) for c in train.classes]
    k = len(classes)
    test_map = None  # a test set may lack a class (a tail class with no held-out image): its labels by name
    if test is not None:
        unknown = [str(c) for c in test.classes if str(c) not in classes]
        if unknown:
            raise PLLZooError(f"{name}: the test classes {unknown} are no training class ({classes})")
        test_map = np.asarray([classes.index(str(c)) for c in test.classes], dtype=np.int64)
    if test is not None and opts.split == "balanced":  # a test set of its own: --split has nothing to choose
        raise PLLZooError(f"--split balanced does not apply to {name}: its test set is given (test/ beside train/); "
                          "leave --split out")
    names = list(names) if names is not None else [f"item {i}" for i in range(len(train))]
    if isinstance(candidates, (str, Path)):
        where = Path(candidates).name
        cand = read_candidates(Path(candidates), classes)
    else:
        where = f"{name}: candidates"
        cand = np.asarray(candidates.cpu() if isinstance(candidates, torch.Tensor) else candidates)
        if cand.ndim != 2 or (cand.dtype != np.bool_ and not ((cand == 0) | (cand == 1)).all()):
            raise PLLZooError(f"{where}: expected a bool or 0/1 [N, K] matrix, got {cand.dtype} {cand.shape}")
        cand = cand != 0
    if cand.shape[0] != len(train):  # before reading every image
        check_candidates(cand, where, k, names)
    x, y = _read_all(train, names)
    if y.min() < 0 or y.max() >= k:
        raise PLLZooError(f"{name}: labels outside 0..{k - 1}")
    check_candidates(cand, where, k, names, y)
    if test is None:
        tr, te = split_indices(opts.split, y, k, np.random.RandomState(opts.seed))
        x, y, cand, x_test, y_test = x[tr], y[tr], cand[tr], x[te], y[te]
        split = {"split": opts.split, "seed": opts.seed}
    else:
        x_test, y_test = _read_all(test, list(test_names) if test_names is not None
                                   else [f"test item {i}" for i in range(len(test))])
        if y_test.min() < 0 or y_test.max() >= len(test_map):  # numpy would wrap -1 to the last class (a review)
            raise PLLZooError(f"{name}: test labels outside 0..{len(test_map) - 1}")
        y_test = test_map[y_test]
        if x_test.shape[1:] != x.shape[1:]:
            raise PLLZooError(f"{name}: test images are {x_test.shape[3]}x{x_test.shape[2]}, "
                              f"training images {x.shape[3]}x{x.shape[2]}")
        split = {"split": "given"}
    pixels = x.transpose(1, 0, 2, 3).reshape(3, -1).astype(np.float64) / 255.0  # [3, N·H·W]
    return PLLData(
        name=name, kind="image",
        x_train=torch.from_numpy(x), y_train=torch.from_numpy(y), candidates=torch.from_numpy(cand),
        x_test=torch.from_numpy(x_test), y_test=torch.from_numpy(y_test),
        num_classes=k, class_names=classes, defaults=defaults,
        mean=tuple(float(m) for m in pixels.mean(1)), std=tuple(max(float(s), 1e-6) for s in pixels.std(1)),
        info={**(info or {}), **split, "n_train": int(len(y)), "n_test": int(len(y_test)),
              "image_shape": list(x.shape[1:]), "avg_candidates": float(cand.sum(1).mean()),
              "normalisation": "the training images' per-channel mean/std"},
    )


def _image_folder(root: Path, what: str):
    import torchvision  # heavy import, only when needed

    if not root.is_dir():
        raise PLLZooError(f"{what}: no folder {root}")
    try:
        return torchvision.datasets.ImageFolder(str(root), loader=_open_image)
    except (FileNotFoundError, OSError) as exc:  # no class folders, or class folders without images
        hint = "; a class without test images: leave its folder out of test/" if root.name == "test" else ""
        raise PLLZooError(f"{what}: {exception_line(exc)} (expected {root}/<class>/<image>{hint})") from None


def _candidate_file(root: Path, what: str) -> Path:
    found = [root / f"{CANDIDATES_STEM}{s}" for s in SUFFIXES if (root / f"{CANDIDATES_STEM}{s}").is_file()]
    if len(found) != 1:
        wanted = ", ".join(f"{CANDIDATES_STEM}{s}" for s in SUFFIXES)
        raise PLLZooError(f"{what}: {'no' if not found else 'more than one'} candidate file in {root} "
                          f"({', '.join(p.name for p in found) or f'one of {wanted}'}); keep exactly one, "
                          f"one row per image in ImageFolder's order (docs/extending.md)")
    return found[0]


def _sha256_of(text: str | bytes) -> str:
    # surrogateescape: a file name that is no UTF-8 hashes as its bytes (an outside review: it crashed here)
    return hashlib.sha256(text.encode("utf-8", "surrogateescape") if isinstance(text, str) else text).hexdigest()


def load_image_folder(root: Path | str, opts: DataOptions, name: str | None = None,
                      candidates: Path | str | None = None) -> PLLData:
    """Load ``root`` in either layout of the module docstring, with its candidate file (or ``candidates``)."""
    root = Path(root).expanduser()
    what = f"imagefolder:{root}"
    if not root.is_dir():
        raise PLLZooError(f"{what}: no such folder")
    train_root = root / "train" if _split_layout(root) else root
    test_root = root / "test" if train_root != root and (root / "test").is_dir() else None
    train = _image_folder(train_root, what)
    test = _image_folder(test_root, what) if test_root is not None else None
    cand_file = Path(candidates).expanduser() if candidates is not None else _candidate_file(root, what)
    if not cand_file.is_file():
        raise PLLZooError(f"{what}: no candidate file {cand_file}")
    # "/"-separated on every system (an outside review: Windows' "cat\\001.png" would give another run id)
    names = [Path(p).relative_to(train_root).as_posix() for p, _ in train.samples]
    test_names = [Path(p).relative_to(root).as_posix() for p, _ in test.samples] if test is not None else None
    listing = "\n".join([*(f"{n}\t{(train_root / n).stat().st_size}" for n in names),
                         *(f"{n}\t{(root / n).stat().st_size}" for n in test_names or ())])
    # no place on the machine (the run id hashes the config): the folder's own name, the candidate file's name
    # in it; every spelling of one folder (relative, absolute, ~) is one run; a text file's line ends read as "\n"
    # (an outside review: a CRLF copy, as Git for Windows checks out, was a new run; an LF file's hash as before)
    raw = cand_file.read_bytes()
    text = cand_file.suffix.lower() in (".txt", ".csv")
    info = {"root": text_name(root.resolve().name), "candidates_file": text_name(_place_free(cand_file, root)),
            "candidates_sha256": _sha256_of(raw.replace(b"\r\n", b"\n") if text else raw),
            "files_sha256": _sha256_of(listing)}
    return pll_from_images(name or text_name(root.resolve().name), train, cand_file, opts, test=test, names=names,
                           test_names=test_names, info=info)


def _place_free(path: Path, root: Path) -> str:
    """``path`` relative to the folder ``root`` when it lies there, else its file name alone."""
    try:
        return path.resolve().relative_to(root.resolve()).as_posix()
    except ValueError:
        return path.name


def image_folder_dataset(root: Path | str, name: str | None = None, candidates: Path | str | None = None,
                         description: str | None = None) -> DatasetSpec:
    """A :class:`DatasetSpec` loading the image folder ``root`` (a plugin registers it under ``name``).

    :param name: the dataset's name in records and for ``--dataset`` (default: the folder's name).
    :param candidates: the candidate file (default: the one ``candidates.*`` file in ``root``).
    """
    root = Path(root).expanduser()
    dataset_name = name or text_name(root.resolve().name)  # ".", a symlink: the folder itself

    def load(opts: DataOptions) -> PLLData:
        return load_image_folder(root, opts, dataset_name, candidates)

    return DatasetSpec(dataset_name, load, description or f"image folder {root} with its candidate file",
                       needs_files=True, reads=SPLIT)


def imagefolder_dataset(path: str) -> DatasetSpec:
    """The dataset ``--dataset imagefolder:PATH`` names."""
    if not path.strip():
        raise PLLZooError("imagefolder: give a folder, e.g. --dataset imagefolder:~/data/pets")
    return image_folder_dataset(path.strip())
