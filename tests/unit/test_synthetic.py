"""synthetic-lt: shape of the long tail, candidates, seeding, fixed class model."""

from __future__ import annotations

import numpy as np
import torch

from pllzoo.data.base import DataOptions
from pllzoo.data.longtail import img_num_per_cls
from pllzoo.data.synthetic import fixed_generator, load_synthetic


def test_shapes_counts_and_candidates() -> None:
    data = load_synthetic(DataOptions(seed=1))
    counts = img_num_per_cls(2000, 10, 100, "exp")
    assert data.name == "synthetic-lt" and data.kind == "tabular" and data.num_classes == 10
    assert data.train_counts.tolist() == counts and counts[0] == 2000 and counts[-1] == 20
    assert torch.bincount(data.y_test).tolist() == [500] * 10
    assert data.x_train.dtype == torch.float32 and data.x_train.shape == (sum(counts), 16)
    assert data.candidates.dtype == torch.bool and data.y_train.dtype == torch.long
    assert data.candidates[torch.arange(data.num_train), data.y_train].all()
    n = data.num_train
    assert abs(data.candidates.sum(1).float().mean().item() - 5.5) < 5 * (9 * 0.25 / n) ** 0.5
    d = data.defaults
    assert (d.model, d.epochs, d.lr, d.weight_decay, d.batch_size, d.schedule) == (
        "mlp", 30, 0.05, 1e-4, 256, "cosine")


def test_seeding_and_fixed_class_model() -> None:
    a, b, c = (load_synthetic(DataOptions(seed=s)) for s in (1, 1, 2))
    assert torch.equal(a.x_train, b.x_train) and torch.equal(a.candidates, b.candidates)
    assert not torch.equal(a.x_train, c.x_train) and not torch.equal(a.candidates, c.candidates)
    g1, g2 = fixed_generator(), fixed_generator()
    assert np.array_equal(g1.means, g2.means) and np.array_equal(g1.W, g2.W)


def test_overrides() -> None:
    data = load_synthetic(DataOptions(phi=0.1, imb=10, imb_type="step"))
    assert data.train_counts.tolist() == [2000] * 5 + [200] * 5
    assert data.info["phi"] == 0.1 and data.candidates.sum(1).float().mean() < 2.2
    assert load_synthetic(DataOptions(phi=-1)).info["candidates"] == "nonuniform"


def test_classes_overlap_but_are_learnable() -> None:
    """Nearest class mean (true labels) is far above chance yet far from perfect."""
    data = load_synthetic(DataOptions(seed=3))
    means = torch.stack([data.x_train[data.y_train == k].mean(0) for k in range(10)])
    acc = (torch.cdist(data.x_test, means).argmin(1) == data.y_test).float().mean().item()
    assert 0.6 < acc < 0.95


def test_every_negative_phi_is_one_setting(tmp_path) -> None:
    """An outside review: --phi -1 and --phi -0.5 (any value < 0 selects the fixed non-uniform matrix) trained the
    same data under two run ids and two table labels; DataOptions records every negative phi as -1."""
    from pllzoo.data.base import DataOptions
    from pllzoo.data.synthetic import load_synthetic

    a, b = (load_synthetic(DataOptions(phi=p, subset=None)) for p in (-1.0, -0.25))
    assert a.info["phi"] == b.info["phi"] == -1.0 and a.info["candidates"] == "nonuniform"
    assert torch.equal(a.candidates, b.candidates)
    assert DataOptions(phi=0.3).phi == 0.3 and DataOptions().phi is None
