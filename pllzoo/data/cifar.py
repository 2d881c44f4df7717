"""CIFAR-10-LT, CIFAR-100-LT and CIFAR-100-H-LT partial-label sets, generated as SoLar does.

Generation (SoLar code: utils/utils_data.py): ``rng = RandomState(seed)`` (the same
stream as the reference's ``np.random.seed``), then the long-tail subsample of the
training split (:mod:`pllzoo.data.longtail`, ``n_max = N / K``), then one uniform draw
for the candidate sets (:mod:`pllzoo.data.candidates`).  The test set is the full,
balanced test split.

Sources, first found wins:
1. torchvision's layout under the data folder (``cifar-10-batches-py/``, ``cifar-100-python/``);
   its native order makes the data identical to the reference's for the same seed;
2. CIFAR-10 only: the JPEG-packed copy (``cifar10_jpeg/{train,test}_jpeg.npz`` or
   ``{train,test}_jpeg.npz``), decoded once and cached (:mod:`pllzoo.data.jpeg`).  It is
   lossy and class-sorted, so the same seed picks different images than the reference;
3. a torchvision download into the data folder, when ``opts.download``.
"""

from __future__ import annotations

import json
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np
import torch

from pllzoo.data.base import DataOptions, PLLData, TrainDefaults
from pllzoo.data.candidates import generate_candidates
from pllzoo.data.jpeg import load_jpeg_archive
from pllzoo.data.longtail import img_num_per_cls, longtail_indices, shortfall
from pllzoo.data.paths import search_roots
from pllzoo.data.validate import check_pll, exception_line
from pllzoo.errors import PLLZooError

SOLAR_CIFAR_DEFAULTS = TrainDefaults(
    model="resnet18", epochs=1000, lr=0.01, weight_decay=1e-3, batch_size=256,
    schedule="step", milestones=(700, 800, 900), momentum=0.9,
    source="SoLar README CIFAR commands (hbzju/SoLar@7311c876, README and train.py arguments): "
    "--epochs 1000 --lr 0.01 --wd 1e-3 --batch-size 256, no --cosine so step decay x0.1 at 700/800/900",
)
JPEG_NOTE = ("JPEG-recompressed (PSNR ~30 dB) and class-sorted copy of CIFAR-10: the same seed "
             "picks different images than the reference, which uses torchvision's native order")


@dataclass(frozen=True)
class CifarVariant:
    """One named CIFAR-LT-PLL setting and its defaults."""

    name: str
    base: str  # "cifar10" | "cifar100"
    phi: float
    imb: float
    hierarchical: bool
    mean: tuple[float, float, float]
    std: tuple[float, float, float]


_C10 = ((0.4914, 0.4822, 0.4465), (0.247, 0.243, 0.261))  # SoLar code: utils/cifar10.py
_C100 = ((0.5071, 0.4867, 0.4408), (0.2675, 0.2565, 0.2761))
VARIANTS: dict[str, CifarVariant] = {
    "cifar10lt": CifarVariant("cifar10lt", "cifar10", 0.5, 100.0, False, *_C10),
    "cifar100lt": CifarVariant("cifar100lt", "cifar100", 0.1, 20.0, False, *_C100),
    "cifar100lt-h": CifarVariant("cifar100lt-h", "cifar100", 0.5, 20.0, True, *_C100),
}
TORCHVISION_DIRS = {"cifar10": "cifar-10-batches-py", "cifar100": "cifar-100-python"}
TORCHVISION_FILES = {"cifar10": "{data_batch_1..5,test_batch,batches.meta}", "cifar100": "{train,test,meta}"}
DOWNLOADS = {  # torchvision's CIFAR10.url / CIFAR100.url, the archive it unpacks into the data folder
    "cifar10": "https://www.cs.toronto.edu/~kriz/cifar-10-python.tar.gz",
    "cifar100": "https://www.cs.toronto.edu/~kriz/cifar-100-python.tar.gz",
}
PRETTY = {"cifar10": "CIFAR-10", "cifar100": "CIFAR-100"}


def offline_files(base: str) -> tuple[str, ...]:
    """The copies :func:`read_cifar` reads under the data folder, in the order it looks for them."""
    jpeg = ("cifar10_jpeg/{train,test}_jpeg.npz", "{train,test}_jpeg.npz") if base == "cifar10" else ()
    return (f"{TORCHVISION_DIRS[base]}/{TORCHVISION_FILES[base]}", *jpeg)


@dataclass(frozen=True)
class RawSplit:
    """One split of a CIFAR copy: ``uint8 [N, 32, 32, 3]`` images, int64 labels, names."""

    images: np.ndarray
    labels: np.ndarray
    class_names: list[str]


def read_torchvision(root: Path, base: str, download: bool, advice: bool = True) -> tuple[RawSplit, RawSplit]:
    """Read (or download into) torchvision's layout under ``root``; return (train, test).

    :raises PLLZooError: one line (with what to do about it when ``advice``)."""
    import torchvision  # heavy import, only when needed

    cls = torchvision.datasets.CIFAR10 if base == "cifar10" else torchvision.datasets.CIFAR100
    try:
        if download:
            root.mkdir(parents=True, exist_ok=True)
        splits = [cls(root=str(root), train=train, download=download) for train in (True, False)]
    except Exception as e:  # corrupted files, no network, no permission
        what = "download" if download else "read"
        todo = f"; put torchvision's {TORCHVISION_DIRS[base]}/ under --data-dir" if advice else ""
        raise PLLZooError(f"could not {what} {PRETTY[base]} in {root} ({exception_line(e)}){todo}") from None
    return tuple(  # type: ignore[return-value]
        RawSplit(np.asarray(d.data, dtype=np.uint8), np.asarray(d.targets, dtype=np.int64), list(d.classes))
        for d in splits
    )


def find_jpeg_pair(roots: list[Path]) -> tuple[Path, Path] | None:
    """Return the first ``(train_jpeg.npz, test_jpeg.npz)`` pair under the roots, if any."""
    for root in roots:
        for folder in (root / "cifar10_jpeg", root):
            pair = (folder / "train_jpeg.npz", folder / "test_jpeg.npz")
            if all(p.is_file() for p in pair):
                return pair
    return None


SLIM_MANIFEST = "slim.json"
"""Beside a slim JPEG copy (``benchmarks/gpu/slim_cifar.py``): the seed and imbalance whose training images it keeps
(the others are one grey image)."""


def check_slim_copy(opts: DataOptions, seed: int, imb: float, imb_type: str) -> None:
    """Refuse (one line) a long-tailed set drawn from a slim JPEG copy made for another seed or imbalance: its
    other images are grey, and the run would train on them without a word."""
    pair = find_jpeg_pair(search_roots(opts.data_dir))
    if pair is None or not (pair[0].parent / SLIM_MANIFEST).is_file():
        return
    try:
        made = json.loads((pair[0].parent / SLIM_MANIFEST).read_text())
        made_for = (int(made["seed"]), float(made["imb"]), str(made.get("imb_type", "exp")))
    except (OSError, ValueError, KeyError, TypeError):
        raise PLLZooError(f"{pair[0].parent / SLIM_MANIFEST}: unreadable; make the slim copy again "
                          "(benchmarks/gpu/slim_cifar.py)") from None
    if made_for != (seed, float(imb), imb_type):
        raise PLLZooError(f"{pair[0].parent} is a slim copy for seed {made_for[0]}, γ {made_for[1]:g} "
                          f"({made_for[2]}) only (benchmarks/gpu/slim_cifar.py: the other training images are "
                          f"grey); this run asks seed {seed}, γ {imb:g} ({imb_type}): make a copy for it, or use "
                          "the full one")


def read_cifar(base: str, opts: DataOptions) -> tuple[RawSplit, RawSplit, str]:
    """Return (train, test, source) from the first source found; see the module docstring."""
    roots = search_roots(opts.data_dir)
    pair = find_jpeg_pair(roots) if base == "cifar10" else None
    for root in roots:
        if (root / TORCHVISION_DIRS[base]).is_dir():
            try:
                return (*read_torchvision(root, base, download=False, advice=pair is None), "torchvision")
            except PLLZooError as exc:
                if pair is None:
                    raise
                warnings.warn(f"{exc}; reading the JPEG-packed copy {pair[0].parent} instead", stacklevel=2)
    if pair is not None:
        train, test = (load_jpeg_archive(p) for p in pair)
        if train.class_names != test.class_names:  # test labels index the training archive's class list
            raise PLLZooError(f"{pair[1]}: its classes ({', '.join(test.class_names)}) are not the training "
                              f"archive's ({', '.join(train.class_names)}), in the same order; the copy is damaged")
        return (RawSplit(train.images, train.labels, train.class_names),
                RawSplit(test.images, test.labels, test.class_names), "jpeg")
    if opts.download:
        return (*read_torchvision(roots[0], base, download=True), "torchvision")
    where = ", ".join(str(r) for r in roots)
    jpeg = " or cifar10_jpeg/{train,test}_jpeg.npz" if base == "cifar10" else ""
    raise PLLZooError(
        f"no {PRETTY[base]} copy found (looked for {TORCHVISION_DIRS[base]}/{jpeg} in {where}); "
        f"pass --data-dir pointing at one, or let pllzoo bench download it (without --offline; evaluate reads a "
        f"copy only)"
    )


def to_chw(images: np.ndarray) -> torch.Tensor:
    """``uint8 [N, H, W, 3]`` numpy -> contiguous ``uint8 [N, 3, H, W]`` tensor."""
    return torch.from_numpy(np.ascontiguousarray(images.transpose(0, 3, 1, 2)))


def _check_balanced(name: str, source: str, split: str, raw: RawSplit, K: int) -> None:
    """A CIFAR split has the same number of images in every class (5000/1000 for CIFAR-10, 500/100 for CIFAR-100);
    a copy with a class short would shrink ``n_max = N / K`` and every long-tail count without a word (an outside
    review: 1,000 images of one class dropped gave n_max 4900 and all ten counts changed)."""
    per_class = np.bincount(raw.labels, minlength=K)
    if per_class.min() != per_class.max():
        j = int(per_class.argmin())
        most = int(np.bincount(per_class).argmax())
        raise PLLZooError(f"{name}: the {source} copy's {split} split has unequal classes (class {j}, "
                          f"{raw.class_names[j]!r}, has {int(per_class[j])} images, most have {most}); is the copy "
                          "under --data-dir complete?")


def load_cifar_lt(variant: CifarVariant, opts: DataOptions) -> PLLData:
    """Build one CIFAR-LT-PLL dataset: LT subsample, then candidates, seeded by ``opts.seed``."""
    phi = variant.phi if opts.phi is None else opts.phi
    imb = variant.imb if opts.imb is None else opts.imb
    imb_type = opts.imb_type or "exp"
    train, test, source = read_cifar(variant.base, opts)
    if source == "jpeg":
        check_slim_copy(opts, opts.seed, imb, imb_type)
    K = len(train.class_names)
    for split, raw in (("training", train), ("test", test)):
        _check_balanced(variant.name, source, split, raw, K)
    rng = np.random.RandomState(opts.seed)
    n_max = len(train.labels) / K
    counts = img_num_per_cls(n_max, K, imb, imb_type)
    if (short := shortfall(train.labels, counts)) is not None:  # the head class takes n_max = N / K
        j, has, _ = short
        raise PLLZooError(f"{variant.name}: the {source} copy's training split is not {K} classes of "
                          f"{n_max:g} images (class {j}, {train.class_names[j]!r}, has {has}; the long "
                          f"tail asks {counts[j]}); is the copy under --data-dir complete?")
    idx = longtail_indices(train.labels, counts, rng)
    y = train.labels[idx]
    cand, kind = generate_candidates(y, K, phi, rng, variant.hierarchical, train.class_names)
    x = to_chw(train.images[idx])
    check_pll(x, y, cand, K, variant.name, one_based=False)
    check_pll(test.images, test.labels, np.ones((len(test.labels), K), bool), K,
              f"{variant.name} (test)", one_based=False)
    info = {
        "phi": phi, "imb": imb, "imb_type": imb_type, "candidates": kind, "source": source,
        "seed": opts.seed, "n_max": n_max, "counts": counts,
        "avg_candidates": float(cand.sum(1).mean()),
    }
    if source == "jpeg":
        info["note"] = JPEG_NOTE
    return PLLData(
        name=variant.name, kind="image", x_train=x, y_train=torch.from_numpy(y),
        candidates=torch.from_numpy(cand), x_test=to_chw(test.images),
        y_test=torch.from_numpy(test.labels), num_classes=K, class_names=list(train.class_names),
        defaults=SOLAR_CIFAR_DEFAULTS, mean=variant.mean, std=variant.std, info=info,
    )


def cifar_loader(name: str) -> Callable[[DataOptions], PLLData]:
    """Return the loader of a named variant (``cifar10lt``, ``cifar100lt``, ``cifar100lt-h``)."""
    if name not in VARIANTS:
        raise PLLZooError(f"unknown CIFAR variant {name!r}; known: {', '.join(VARIANTS)}")
    variant = VARIANTS[name]

    def load(opts: DataOptions) -> PLLData:
        return load_cifar_lt(variant, opts)

    load.__name__ = f"load_{name.replace('-', '_')}"
    return load
