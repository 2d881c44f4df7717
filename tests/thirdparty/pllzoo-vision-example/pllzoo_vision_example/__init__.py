"""An outside plugin that adds a backbone, a view and an image dataset (docs/extending.md).

It imports only pllzoo's public API, as any third-party plugin would.
"""

from __future__ import annotations

import torch
from torch import nn

from pllzoo import DatasetSpec, DataOptions, PLLData, PLLNet, hookimpl, pll_from_images


def tinynet(num_classes: int, input_shape: tuple[int, ...], width: int = 8) -> PLLNet:
    """conv 3×3 (``width`` channels, ``--hp model.width``) → ReLU → global average pool: ``width``-d features; a
    Linear(width, K) head."""
    encoder = nn.Sequential(nn.Conv2d(input_shape[0], width, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
                            nn.Flatten(1))  # [B, width]
    return PLLNet(encoder, nn.Linear(width, num_classes))


def invert(x: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
    """Photographic negative of uint8 images [B, C, H, W]; no randomness."""
    return 255 - x


class Tiles:
    """A torchvision-style dataset: ``classes``, ``len``, ``ds[i] -> (uint8 [3, 8, 8] image, label)``.

    Class k is a tile whose channel k is bright, with seeded noise.
    """

    classes = ["red", "green", "blue"]

    def __init__(self, n: int, seed: int) -> None:
        g = torch.Generator().manual_seed(seed)
        self.labels = torch.arange(n) % 3
        self.images = torch.randint(0, 100, (n, 3, 8, 8), generator=g, dtype=torch.uint8)
        self.images[torch.arange(n), self.labels] += 150

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, i: int) -> tuple[torch.Tensor, int]:
        return self.images[i], int(self.labels[i])


def load_tiles(opts: DataOptions) -> PLLData:
    train = Tiles(60, opts.seed)
    g = torch.Generator().manual_seed(opts.seed + 1)
    candidates = torch.rand(60, 3, generator=g) < 0.3  # one row per image of train, in its order
    candidates[torch.arange(60), train.labels] = True
    return pll_from_images("vision.tiles", train, candidates, opts, test=Tiles(30, opts.seed + 2))


@hookimpl
def pllzoo_register_models(register):
    register("vision.tinynet", tinynet)


@hookimpl
def pllzoo_register_views(register):
    register("vision.invert", invert)


@hookimpl
def pllzoo_register_datasets(register):
    register(DatasetSpec("vision.tiles", load_tiles, "3 classes of coloured 8x8 tiles, random candidate sets"))
