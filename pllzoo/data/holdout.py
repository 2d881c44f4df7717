"""Carve-outs of a loaded dataset that any loader gets for free (applied by ``pllzoo bench``).

* :func:`hold_out` moves a seeded random fraction of the *training* rows, with their candidate
  sets, to a partially labelled validation set.  Nothing there has a true label the learner
  may use: the trainer scores it by the **covering rate** (the share of held-out rows whose
  prediction is one of their candidates) and PLENCH's **approximated accuracy**
  (:mod:`pllzoo.metrics`), which let ``pllzoo report --select heldout|approx`` pick an epoch
  without touching the test split.  The
  held-out rows leave training, so training counts and shot thresholds are those of the rest.
* :func:`subsample` keeps a seeded random ``n`` training and ``n`` test rows: smoke runs of
  expensive recipes (e.g. the paper's ResNet-18 commands for two epochs on CPU), not results.
"""

from __future__ import annotations

import math
import warnings

import torch

from pllzoo.data.base import PLLData
from pllzoo.errors import PLLZooError
from pllzoo.seeding import derive_seed


def _perm(n: int, *seed_parts: object) -> torch.Tensor:
    return torch.randperm(n, generator=torch.Generator().manual_seed(derive_seed(*seed_parts)))


def hold_out(data: PLLData, fraction: float, seed: int) -> PLLData:
    """Return ``data`` with ``ceil(fraction · N)`` random training rows moved to ``x_val``/``candidates_val``."""
    if not 0.0 < fraction < 1.0:
        raise PLLZooError(f"--holdout must be in (0, 1), got {fraction}")
    n_val = math.ceil(fraction * data.num_train)
    if n_val >= data.num_train:
        raise PLLZooError(f"--holdout {fraction} leaves no training rows out of {data.num_train}")
    if n_val < data.num_classes:
        # Allowed (a smoke run may want it), but the scores that pick an epoch move in steps of 1/n_val.
        warnings.warn(f"--holdout {fraction} holds out {n_val} of {data.num_train} training rows, fewer than the "
                      f"{data.num_classes} classes: the held-out scores that pick an epoch (covering rate, "
                      f"approximated accuracy) move in steps of 1/{n_val}", stacklevel=2)
    perm = _perm(data.num_train, seed, "holdout")
    val, train = perm[:n_val].sort().values, perm[n_val:].sort().values
    return data.replace(
        x_train=data.x_train[train], y_train=data.y_train[train], candidates=data.candidates[train],
        x_val=data.x_train[val], candidates_val=data.candidates[val],
        info={**data.info, "holdout": fraction, "n_val": n_val},
    )


def subsample(data: PLLData, n: int, seed: int) -> PLLData:
    """Keep ``min(n, N)`` random training rows and ``min(n, M)`` random test rows (smoke runs)."""
    if n < 1:
        raise PLLZooError(f"--subset must be at least 1, got {n}")
    tr = _perm(data.num_train, seed, "subset-train")[:n].sort().values
    te = _perm(int(data.y_test.shape[0]), seed, "subset-test")[:n].sort().values
    return data.replace(
        x_train=data.x_train[tr], y_train=data.y_train[tr], candidates=data.candidates[tr],
        x_test=data.x_test[te], y_test=data.y_test[te], info={**data.info, "subset": n},
    )
