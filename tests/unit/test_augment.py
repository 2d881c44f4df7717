"""Input views: normalise by hand, weak crops are crops, strong/simaugment are deterministic and RNG-clean."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from PIL import Image, ImageDraw
from torchvision.transforms import v2

from pllzoo import augment as A
from pllzoo.errors import PLLZooError

CIFAR10_MEAN, CIFAR10_STD = (0.4914, 0.4822, 0.4465), (0.247, 0.243, 0.261)


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _images(b: int, seed: int = 0) -> torch.Tensor:
    """Random uint8 images [b, 3, 32, 32]."""
    return torch.randint(0, 256, (b, 3, 32, 32), dtype=torch.uint8, generator=_gen(seed))


def _position_image() -> torch.Tensor:
    """uint8 [3, 32, 32]: channel 0 = row + 1, channel 1 = column + 1, channel 2 = 200 (never 0)."""
    r = torch.arange(1, 33).view(32, 1).expand(32, 32)
    c = torch.arange(1, 33).view(1, 32).expand(32, 32)
    return torch.stack([r, c, torch.full((32, 32), 200)]).to(torch.uint8)


def test_normalize_matches_hand_computation() -> None:
    x = _images(2)
    out = A.normalize(x, CIFAR10_MEAN, CIFAR10_STD)
    assert out.dtype == torch.float32 and out.shape == x.shape
    for b, ch, i, j in [(0, 0, 0, 0), (1, 2, 31, 5), (0, 1, 7, 30)]:
        hand = (x[b, ch, i, j].item() / 255.0 - CIFAR10_MEAN[ch]) / CIFAR10_STD[ch]
        assert out[b, ch, i, j].item() == pytest.approx(hand, abs=1e-6)


def test_weak_outputs_are_crops_of_the_zero_padded_input_possibly_flipped() -> None:
    img = _position_image()
    out = A.weak(img.expand(64, 3, 32, 32), _gen(0))
    assert out.dtype == torch.uint8 and out.shape == (64, 3, 32, 32)
    padded = F.pad(img, (4, 4, 4, 4))  # [3,40,40]
    candidates = {}
    for oy in range(9):
        for ox in range(9):
            crop = padded[:, oy : oy + 32, ox : ox + 32]
            candidates[(oy, ox, False)] = crop
            candidates[(oy, ox, True)] = crop.flip(-1)
    found = []
    for b in range(64):
        matches = [key for key, crop in candidates.items() if torch.equal(out[b], crop)]
        assert len(matches) == 1, f"sample {b} is not a crop of the padded image"
        found.append(matches[0])
    assert len(set(found)) > 20  # per-sample offsets, not one offset for the batch
    assert {flip for _, _, flip in found} == {False, True}


def test_weak_is_deterministic_and_leaves_global_rng_alone() -> None:
    x = _images(16)
    state = torch.get_rng_state()
    a, b = A.weak(x, _gen(3)), A.weak(x, _gen(3))
    assert torch.equal(a, b)
    assert not torch.equal(a, A.weak(x, _gen(4)))
    assert torch.equal(torch.get_rng_state(), state)


def test_cutout_paints_one_clipped_square_in_the_fill_colour() -> None:
    x = torch.zeros(64, 3, 32, 32, dtype=torch.uint8)
    out = A.cutout(x, _gen(0))
    fill = torch.tensor(A.CUTOUT_FILL, dtype=torch.uint8).view(1, 3, 1, 1)
    painted = (out == fill).all(1)  # [B,H,W]
    assert torch.equal(out, torch.where(painted[:, None], fill, x))  # nothing else changed
    for b in range(64):
        rows, cols = painted[b].any(1).nonzero(), painted[b].any(0).nonzero()
        if rows.numel() == 0:
            continue
        h, w = rows.max() - rows.min() + 1, cols.max() - cols.min() + 1
        assert painted[b].sum() == h * w  # a solid rectangle
        assert h <= 17 and w <= 17  # side < 0.5 * 32, plus the floor of the corner
    assert painted.flatten(1).any(1).float().mean() > 0.9


def test_cutout_box_matches_pil_rectangle_geometry() -> None:
    """Redo the reference's PIL Cutout with the same draws (side, centre) and compare pixel by pixel."""
    B, W = 48, 32
    x = torch.zeros(B, 3, W, W, dtype=torch.uint8)
    out = A.cutout(x, _gen(11))
    g = _gen(11)  # same draw order as cutout(): side, cx, cy
    side = torch.rand(B, generator=g).double() * (0.5 * W)
    ux, uy = torch.rand(B, generator=g).double(), torch.rand(B, generator=g).double()
    for b in range(B):
        img = Image.new("RGB", (W, W))
        v = float(side[b])
        if v > 0:  # reference: centre = np.random.uniform(w), i.e. low=w, high=1: w - (w - 1) * U
            cx, cy = W - (W - 1) * float(ux[b]), W - (W - 1) * float(uy[b])
            x0, y0 = int(max(0, cx - v / 2.0)), int(max(0, cy - v / 2.0))
            ImageDraw.Draw(img).rectangle((x0, y0, min(W, x0 + v), min(W, y0 + v)), A.CUTOUT_FILL)
        ref = torch.from_numpy(np.asarray(img).copy()).permute(2, 0, 1)
        assert torch.equal(out[b], ref), f"sample {b}"


def test_strong_is_deterministic_uint8_and_leaves_global_rng_alone() -> None:
    x = _images(32)
    state = torch.get_rng_state()
    a, b = A.strong(x, _gen(7)), A.strong(x, _gen(7))
    assert a.dtype == torch.uint8 and a.shape == x.shape
    assert torch.equal(a, b)
    assert not torch.equal(a, A.strong(x, _gen(8)))
    assert torch.equal(torch.get_rng_state(), state)


def test_strong_shows_the_cutout_fill() -> None:
    out = A.strong(_images(32), _gen(1))
    fill = torch.tensor(A.CUTOUT_FILL, dtype=torch.uint8).view(1, 3, 1, 1)
    has_fill = (out == fill).all(1).flatten(1).any(1)  # [B]; random noise almost never hits it
    assert has_fill.float().mean() > 0.5


@pytest.mark.parametrize("ranges", ["reference", "torchvision"])
def test_randaugment_differs_per_sample(ranges: str) -> None:
    x = _images(1).expand(24, 3, 32, 32)
    out = A.randaugment(x, _gen(0), ranges=ranges)  # type: ignore[arg-type]
    distinct = {tuple(o.flatten().tolist()) for o in out}
    assert len(distinct) > 12


def test_reference_table_covers_torchvision_ops_with_reference_ranges() -> None:
    ours, theirs = A.REFERENCE_SPACE, v2.RandAugment._AUGMENTATION_SPACE
    assert set(ours) == set(theirs)  # fails if torchvision renames or adds ops
    n = A.NUM_BINS
    for op in ["Brightness", "Color", "Contrast", "Sharpness"]:
        mags = ours[op][0](n, 32, 32)  # torchvision applies factor 1 + magnitude
        assert -0.95 < min(mags) and max(mags) < -0.05
    bits = [int(m) for m in ours["Posterize"][0](n, 32, 32)]
    assert sorted(set(bits)) == [4, 5, 6, 7] and all(bits.count(k) == n // 4 for k in range(4, 8))
    assert max(ours["TranslateX"][0](n, 32, 32)) < 0.3 * 32
    assert not any(signed for _, signed in ours.values())


def test_simaugment_is_deterministic_and_leaves_global_rng_alone() -> None:
    x = _images(8)
    state = torch.get_rng_state()
    a, b = A.simaugment(x, _gen(5)), A.simaugment(x, _gen(5))
    assert a.dtype == torch.uint8 and a.shape == (8, 3, 32, 32)
    assert torch.equal(a, b)
    assert torch.equal(torch.get_rng_state(), state)


def test_view_registry() -> None:
    assert set(A.VIEWS) == {"none", "weak", "strong", "simaugment", "strong-batched", "simaugment-batched", "pico-strong",
                            "pico-strong-batched"}
    x = _images(2)
    assert A.make_view("none")(x, _gen(0)) is x
    assert torch.equal(A.make_view("weak")(x, _gen(1)), A.weak(x, _gen(1)))  # the registered view, checked
    with pytest.raises(PLLZooError, match="valid: none, pico-strong, pico-strong-batched, simaugment, simaugment-batched, "
                                         "strong, strong-batched, weak"):
        A.make_view("cutmix")


def test_pil_views_reject_non_rgb() -> None:
    with pytest.raises(PLLZooError, match="RGB"):
        A.strong(torch.zeros(2, 1, 32, 32, dtype=torch.uint8), _gen(0))
