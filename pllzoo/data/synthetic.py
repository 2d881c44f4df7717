"""``synthetic-lt``: a generated long-tailed PLL set that needs no download (seeded, < 1 s).

The class-conditional distributions are fixed (generator seed 0, whatever the run seed):
class ``k`` has a latent mean on the unit circle, classes placed around it in a fixed
random order so that head and tail classes are neighbours; a latent point is that mean
plus Gaussian noise, padded with pure-noise nuisance dimensions, and pushed through a
fixed random map ``x = tanh(h W)`` into ``FEATURE_DIM`` features.  Neighbouring classes
overlap, so a learner trained on the long-tailed set favours the head classes in the
overlaps: tail accuracy on the balanced test set is clearly lower than head accuracy.

What depends on ``opts.seed``, in this order: the long-tail subset of a balanced pool of
``N_MAX`` labels per class (:mod:`pllzoo.data.longtail`), the uniform candidate sets
(:mod:`pllzoo.data.candidates`, true label always in), then the training points and the
test points (``TEST_PER_CLASS`` per class).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from pllzoo.data.base import DataOptions, PLLData, TrainDefaults
from pllzoo.data.candidates import generate_candidates
from pllzoo.data.longtail import img_num_per_cls, longtail_indices
from pllzoo.data.validate import check_pll

NAME = "synthetic-lt"
NUM_CLASSES = 10
N_MAX = 2000  # head class size; exp profile, imb 100 -> tail 20
TEST_PER_CLASS = 500
DEFAULT_PHI, DEFAULT_IMB = 0.5, 100.0
LATENT_NOISE = 0.2  # std around a mean on the unit circle; neighbours are 0.62 apart
NUISANCE_DIM = 6  # latent dimensions that carry no class information
FEATURE_DIM = 16
GENERATOR_SEED = 0  # fixes the class-conditional distributions, never the run seed

SYNTHETIC_DEFAULTS = TrainDefaults(
    model="mlp", epochs=30, lr=0.05, weight_decay=1e-4, batch_size=256, schedule="cosine",
    momentum=0.9, source="pllzoo's choice for synthetic-lt: a small MLP converges in 30 epochs",
)


@dataclass(frozen=True)
class Generator:
    """The fixed class-conditional model: latent means ``[K, 2]`` and the map ``W [2+nuisance, d]``."""

    means: np.ndarray
    W: np.ndarray

    def sample(self, labels: np.ndarray, rng: np.random.RandomState) -> np.ndarray:
        """Return float32 features ``[n, FEATURE_DIM]`` for the given labels."""
        n = labels.shape[0]
        z = self.means[labels] + LATENT_NOISE * rng.standard_normal((n, 2))  # [n, 2]
        h = np.concatenate([z, rng.standard_normal((n, NUISANCE_DIM))], axis=1)  # [n, 2+nuis]
        return np.tanh(h @ self.W).astype(np.float32)  # [n, d]


def fixed_generator(K: int = NUM_CLASSES) -> Generator:
    """Return the class-conditional model, the same for every run seed."""
    g = np.random.RandomState(GENERATOR_SEED)
    angles = 2 * np.pi * g.permutation(K) / K  # class k sits at slot perm[k] of the circle
    means = np.stack([np.cos(angles), np.sin(angles)], axis=1)
    scale = np.concatenate([np.full(2, 2.0), np.full(NUISANCE_DIM, 0.5)])  # signal dims dominate
    W = scale[:, None] * g.standard_normal((2 + NUISANCE_DIM, FEATURE_DIM)) / np.sqrt(2 + NUISANCE_DIM)
    return Generator(means=means, W=W)


def load_synthetic(opts: DataOptions) -> PLLData:
    """Generate ``synthetic-lt`` for ``opts.seed`` (``phi``/``imb``/``imb_type`` overridable)."""
    phi = DEFAULT_PHI if opts.phi is None else opts.phi
    imb = DEFAULT_IMB if opts.imb is None else opts.imb
    imb_type = opts.imb_type or "exp"
    K = NUM_CLASSES
    rng = np.random.RandomState(opts.seed)
    counts = img_num_per_cls(N_MAX, K, imb, imb_type)
    pool = np.repeat(np.arange(K), N_MAX)  # a balanced pool of labels, class-sorted
    y = pool[longtail_indices(pool, counts, rng)]
    cand, kind = generate_candidates(y, K, phi, rng)
    gen = fixed_generator(K)
    x = gen.sample(y, rng)
    y_test = np.repeat(np.arange(K), TEST_PER_CLASS)
    x_test = gen.sample(y_test, rng)
    check_pll(x, y, cand, K, NAME, one_based=False)
    return PLLData(
        name=NAME, kind="tabular", x_train=torch.from_numpy(x), y_train=torch.from_numpy(y),
        candidates=torch.from_numpy(cand), x_test=torch.from_numpy(x_test),
        y_test=torch.from_numpy(y_test), num_classes=K,
        class_names=[f"class{k}" for k in range(K)], defaults=SYNTHETIC_DEFAULTS,
        info={"phi": phi, "imb": imb, "imb_type": imb_type, "candidates": kind, "seed": opts.seed,
              "counts": counts, "avg_candidates": float(cand.sum(1).mean()),
              "generator_seed": GENERATOR_SEED, "source": "generated"},
    )
