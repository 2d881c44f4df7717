"""CIFAR-10-LT generation consumes one RandomState stream in the reference's order (SoLar's released data code).

SoLar seeds numpy once (``np.random.seed(seed)``) and then draws, in this order: one in-place shuffle of each
class's indices, classes 0..K−1, and one ``uniform(0, 1, (n, K))`` for every candidate decision.  The same seed
therefore reproduces the reference's data exactly only if the candidates continue that stream; a loader that
reseeds a fresh RandomState for the candidates picks the same images but other candidate sets.  Checked here on
a tiny fake copy in torchvision's layout (10 classes × 30 images), against the sequence written out with numpy.
"""

from __future__ import annotations

import pickle
from pathlib import Path

import numpy as np
import pytest

from pllzoo.data.base import DataOptions
from pllzoo.data.cifar import cifar_loader

K, PER_CLASS = 10, 30
NAMES = ["airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck"]


def _write_torchvision_cifar10(root: Path) -> tuple[np.ndarray, np.ndarray]:
    """``cifar-10-batches-py/`` with five training batches (native order, not class-sorted), a test batch of one
    image per class and ``batches.meta``; returns the training images ``uint8 [N, 32, 32, 3]`` and labels."""
    folder = root / "cifar-10-batches-py"
    folder.mkdir(parents=True)
    rng = np.random.RandomState(0)
    labels = rng.permutation(np.repeat(np.arange(K), PER_CLASS))
    data = rng.randint(0, 256, (len(labels), 3072), dtype=np.uint8)
    for b, (d, y) in enumerate(zip(np.split(data, 5), np.split(labels, 5)), start=1):
        with open(folder / f"data_batch_{b}", "wb") as f:
            pickle.dump({"data": d, "labels": list(map(int, y))}, f)
    with open(folder / "test_batch", "wb") as f:
        pickle.dump({"data": data[:K], "labels": list(range(K))}, f)
    with open(folder / "batches.meta", "wb") as f:
        pickle.dump({"label_names": NAMES}, f)
    return data.reshape(-1, 3, 32, 32).transpose(0, 2, 3, 1), labels


def test_candidates_continue_the_long_tail_stream(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Seed 7, γ = 10, φ = 0.5: counts int(30·0.1^(j/9)) = 30, 23, 17, 13, 10, 8, 6, 5, 3, 3 (n = 118); the
    images are the first n_j of each class's shuffled indices, and Y = U < 0.5 off the true label with U the
    next ``uniform(0, 1, (118, 10))`` of the same RandomState (a mutation audit: a fresh RandomState(seed) for
    the candidates passed every other test)."""
    import torchvision.datasets.cifar as tv_cifar

    monkeypatch.setattr(tv_cifar, "check_integrity", lambda *a, **k: True)  # fake files have no md5
    images, labels = _write_torchvision_cifar10(tmp_path)
    data = cifar_loader("cifar10lt")(DataOptions(data_dir=tmp_path, seed=7, imb=10, phi=0.5, download=False))
    counts = [30, 23, 17, 13, 10, 8, 6, 5, 3, 3]
    assert data.info["source"] == "torchvision" and data.info["counts"] == counts
    assert data.info["candidates"] == "uniform" and data.class_names == NAMES

    rng = np.random.RandomState(7)  # the reference's np.random.seed(7)
    kept = []
    for j, n_j in enumerate(counts):  # gen_imbalanced_data: classes in order, one in-place shuffle each
        idx = np.where(labels == j)[0]
        rng.shuffle(idx)
        kept.append(idx[:n_j])
    ref_idx = np.concatenate(kept)
    y = labels[ref_idx]
    u = rng.uniform(0, 1, size=(len(y), K))  # the one draw for all candidate decisions, the same stream
    ref_cands = u < 0.5
    ref_cands[np.arange(len(y)), y] = True

    assert np.array_equal(data.y_train.numpy(), y)
    assert np.array_equal(data.x_train.numpy(), images[ref_idx].transpose(0, 3, 1, 2))
    assert np.array_equal(data.candidates.numpy(), ref_cands)
    # and not what a fresh stream would give: the test tells the two apart
    fresh = np.random.RandomState(7).uniform(0, 1, size=(len(y), K)) < 0.5
    fresh[np.arange(len(y)), y] = True
    assert not np.array_equal(fresh, ref_cands)
