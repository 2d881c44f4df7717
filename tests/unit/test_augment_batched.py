"""Batched views: ops equal PIL / torchvision on real CIFAR images; draws follow the reference; RNG-clean."""

from __future__ import annotations

import functools
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image, ImageEnhance, ImageOps
from scipy import stats
from torchvision.transforms import v2
from torchvision.transforms.v2 import functional as TF

from pllzoo import augment as A
from pllzoo import augment_batched as AB
from pllzoo import augment_ops as O
from pllzoo.errors import PLLZooError

N_IMAGES = 96  # real CIFAR-10 test images per faithfulness check

# Per-op tolerance on the mean absolute pixel difference against PIL (0..255 scale), each
# with its reason.  On CPU every op measures 0.0 on 200 images × 4 magnitudes; the slack only
# covers a float evaluation order that differs from PIL's C code on another CPU or library build.
TOLERANCE = {
    "AutoContrast": 0.0,  # integer histogram + float64 table with PIL's exact expression
    "Equalize": 0.0,  # integer histogram and PIL's integer step rule
    "Identity": 0.0,  # nothing to compute
    "Posterize": 0.0,  # integer bit mask
    "Solarize": 0.0,  # integer comparison with the float threshold
    "Brightness": 0.01,  # float32 blend then floor, as PIL; a different rounding would flip a rare level
    "Color": 0.01,  # same blend, with PIL's fixed-point luma
    "Contrast": 0.01,  # same blend, with the rounded mean of the luma
    "Sharpness": 0.01,  # exact integer 3x3 sums, rounded /13, then the same blend
    "Rotate": 0.01,  # Pillow's 16.16 fixed point exactly; cos/sin from another libm could move a coefficient's last bit
    "ShearX": 0.0,  # Pillow's 16.16 fixed point of float64 coefficients, integer indices
    "ShearY": 0.0,  # as ShearX
    "TranslateX": 0.0,  # as ShearX
    "TranslateY": 0.0,  # as ShearX
}
# Round magnitudes where a float evaluation of the affine map and Pillow's fixed point disagree (an outside review:
# ShearX 0.2 moved whole rows, mean |diff| 2.7, while the interior points above happened to agree)
ROUND = {"Rotate": (-15.0, 20.0, 25.78134523614841), "ShearX": (0.12, 0.2, -0.28), "ShearY": (0.12, 0.2, -0.28),
         "TranslateX": (0.1, -0.2), "TranslateY": (0.1, -0.2)}


@functools.lru_cache(maxsize=1)
def _load(path: Path) -> torch.Tensor:
    x = np.load(path / "cifar10_lossless_subset" / "cifar10_subset5k.npz")["x_test"][:N_IMAGES]  # [N,32,32,3]
    return torch.from_numpy(np.ascontiguousarray(x.transpose(0, 3, 1, 2)))  # [N,3,32,32]


@pytest.fixture
def cifar(shared_data: Path) -> torch.Tensor:
    """uint8 [N, 3, 32, 32]: the first CIFAR-10 test images of the offline subset."""
    return _load(shared_data)


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _pil(img: torch.Tensor) -> Image.Image:
    return Image.fromarray(img.permute(1, 2, 0).numpy())


def _tensor(img: Image.Image) -> torch.Tensor:
    return torch.from_numpy(np.array(img)).permute(2, 0, 1)


def _reference_op(name: str, img: Image.Image, v: float) -> Image.Image:
    """The reference's op, written with PIL's public API."""
    w, h = img.size
    if name == "AutoContrast":
        return ImageOps.autocontrast(img)
    if name == "Equalize":
        return ImageOps.equalize(img)
    if name == "Identity":
        return img
    if name == "Posterize":
        return ImageOps.posterize(img, max(1, int(v)))
    if name == "Solarize":
        return ImageOps.solarize(img, v)
    if name == "Rotate":
        return img.rotate(v)
    enhance = {"Brightness": ImageEnhance.Brightness, "Color": ImageEnhance.Color,
               "Contrast": ImageEnhance.Contrast, "Sharpness": ImageEnhance.Sharpness}
    if name in enhance:
        return enhance[name](img).enhance(v)
    matrix = {"ShearX": (1, v, 0, 0, 1, 0), "ShearY": (1, 0, 0, v, 1, 0),
              "TranslateX": (1, 0, v * w, 0, 1, 0), "TranslateY": (1, 0, 0, 0, 1, v * h)}[name]
    return img.transform(img.size, Image.Transform.AFFINE, matrix)


def _magnitudes(lo: float, hi: float) -> list[float]:
    """Both ends (hi just below: the reference never reaches it) and two interior points."""
    return [lo, lo + 0.37 * (hi - lo), lo + 0.81 * (hi - lo), hi - 1e-9]


@pytest.mark.parametrize("name", O.OPS)
def test_each_op_matches_pil_on_cifar(name: str, cifar: torch.Tensor) -> None:
    k = O.OP[name]
    _, lo, hi = O.RANGES[k]
    for v in [*_magnitudes(lo, hi), *ROUND.get(name, ())]:
        ops = torch.full((len(cifar), 1), k)
        mags = torch.full((len(cifar), 1), v, dtype=torch.float64)
        ref = torch.stack([_tensor(_reference_op(name, _pil(img), v)) for img in cifar])
        for subset in (True, False):  # the CPU path and the GPU path (whole batch, masks)
            out = O.apply_randaugment(cifar, ops, mags, subset=subset)
            assert out.dtype == torch.uint8 and out.shape == cifar.shape
            mad = (out.int() - ref.int()).abs().float().mean().item()
            assert mad <= TOLERANCE[name], f"{name} v={v} subset={subset}: mean |diff| {mad}"
        if name not in ("Identity",) and not (name == "Solarize" and v > 255):
            assert not torch.equal(ref, cifar)  # the comparison is not vacuous


def test_three_random_ops_per_sample_match_the_pil_chain(cifar: torch.Tensor) -> None:
    """A batch where every sample runs its own three ops and magnitudes equals PIL run op by op."""
    ops, mags = O.sample_randaugment(len(cifar), _gen(3), 3)
    out = O.apply_randaugment(cifar, ops, mags)
    ref = []
    for b, img in enumerate(cifar):
        pil = _pil(img)
        for k, v in zip(ops[b].tolist(), mags[b].tolist()):
            pil = _reference_op(O.OPS[k], pil, v)
        ref.append(_tensor(pil))
    mad = (out.int() - torch.stack(ref).int()).abs().float().mean().item()
    assert mad <= max(TOLERANCE.values())
    assert len({tuple(r) for r in ops.tolist()}) > len(cifar) // 2  # samples really differ


def test_sampled_ops_are_uniform_and_magnitudes_follow_the_reference_ranges() -> None:
    n = 28_000
    ops, mags = O.sample_randaugment(n // 2, _gen(0), 2)
    ops, mags = ops.flatten(), mags.flatten()
    counts = torch.bincount(ops, minlength=len(O.OPS)).numpy()
    assert stats.chisquare(counts).pvalue > 1e-3  # uniform over the 14 ops, with replacement
    for k, (name, lo, hi) in enumerate(O.RANGES):
        v = mags[ops == k].numpy()
        assert lo <= v.min() and v.max() < hi, name
        assert stats.kstest(v, stats.uniform(loc=lo, scale=hi - lo).cdf).pvalue > 1e-3, name
    bits = mags[ops == O.OP["Posterize"]].floor().long()
    assert set(bits.tolist()) == {4, 5, 6, 7}  # int(v) with v in [4, 8): never 8
    assert stats.chisquare(torch.bincount(bits - 4, minlength=4).numpy()).pvalue > 1e-3
    repeats = (ops.view(-1, 2)[:, 0] == ops.view(-1, 2)[:, 1]).float().mean().item()
    assert abs(repeats - 1 / 14) < 0.02  # drawn with replacement: the same op twice 1/14 of the time


def test_strong_batched_is_per_sample_deterministic_and_rng_clean(cifar: torch.Tensor) -> None:
    x = cifar[:1].expand(48, 3, 32, 32)
    state = torch.get_rng_state()
    a, b = AB.strong_batched(x, _gen(7)), AB.strong_batched(x, _gen(7))
    assert torch.equal(torch.get_rng_state(), state)
    assert a.dtype == torch.uint8 and a.shape == x.shape
    assert torch.equal(a, b)
    assert not torch.equal(a, AB.strong_batched(x, _gen(8)))
    assert len({tuple(o.flatten().tolist()) for o in a}) == 48  # one image, 48 different views
    fill = torch.tensor(A.CUTOUT_FILL, dtype=torch.uint8).view(1, 3, 1, 1)
    assert (a == fill).all(1).flatten(1).any(1).float().mean() > 0.5  # Cutout ran


def test_strong_batched_is_randaugment_then_cutout_then_weak(cifar: torch.Tensor) -> None:
    x = cifar[:16]
    g = _gen(4)
    ops, mags = O.sample_randaugment(len(x), g, 3)
    expected = A.weak(A.cutout(O.apply_randaugment(x, ops, mags), g), g)
    assert torch.equal(AB.strong_batched(x, _gen(4)), expected)


def test_pico_strong_batched_is_resized_crop_flip_then_randaugment_then_cutout(cifar: torch.Tensor) -> None:
    """PiCO's strong_transform order: RandomResizedCrop(32, (0.2, 1)) → flip → RandomAugment(3) → Cutout."""
    x = cifar[:16]
    g = _gen(6)
    boxes = AB.sample_resized_crop(len(x), 32, 32, g)
    flip = torch.rand(len(x), generator=g, dtype=torch.float64) < 0.5
    crop = AB.resized_crop(x, boxes, 32)
    crop = torch.where(flip.view(-1, 1, 1, 1), crop.flip(-1), crop).to(torch.uint8)
    ops, mags = O.sample_randaugment(len(x), g, 3)
    expected = A.cutout(O.apply_randaugment(crop, ops, mags), g)
    out = AB.pico_strong_batched(x, _gen(6))
    assert torch.equal(out, expected)
    state = torch.get_rng_state()
    assert torch.equal(AB.pico_strong_batched(x, _gen(6)), out) and torch.equal(torch.get_rng_state(), state)
    one = AB.pico_strong_batched(cifar[:1].expand(48, 3, 32, 32), _gen(7))
    assert len({tuple(o.flatten().tolist()) for o in one}) == 48  # per-sample crops, ops and boxes


def test_picos_views_keep_the_input_size() -> None:
    """The key view and the query view are resized to the input's size (32 on CIFAR; a 48 x 40 image folder stays
    48 x 40; an outside review: the query view, simaugment, made every image 32 x 32)."""
    x = torch.randint(0, 256, (4, 3, 48, 40), dtype=torch.uint8, generator=_gen(0))
    assert A.pico_strong(x, _gen(1)).shape == AB.pico_strong_batched(x, _gen(1)).shape == x.shape
    assert A.simaugment(x, _gen(1)).shape == AB.simaugment_batched(x, _gen(1)).shape == x.shape
    boxes = torch.tensor([[0, 0, 48, 40]] * 4)  # the whole image, to its own size: unchanged
    assert torch.equal(AB.resized_crop(x, boxes, (48, 40)), x.float())


def test_pico_strong_pil_view_crops_then_augments(cifar: torch.Tensor) -> None:
    """The PIL twin (the CPU default): per-sample different, seeded, 32 x 32 uint8, Cutout boxes painted."""
    x = cifar[:1].expand(32, 3, 32, 32)
    a, b = A.pico_strong(x, _gen(3)), A.pico_strong(x, _gen(3))
    assert a.dtype == torch.uint8 and a.shape == (32, 3, 32, 32) and torch.equal(a, b)
    assert len({tuple(o.flatten().tolist()) for o in a}) == 32
    fill = torch.tensor(A.CUTOUT_FILL, dtype=torch.uint8).view(1, 3, 1, 1)
    assert (a == fill).all(1).flatten(1).any(1).float().mean() > 0.5


def test_resized_crop_with_given_boxes_matches_torchvision(cifar: torch.Tensor) -> None:
    boxes = AB.sample_resized_crop(len(cifar), 32, 32, _gen(0))  # [N,4]
    out = AB.resized_crop(cifar, boxes, 32)
    for b, img in enumerate(cifar):
        top, left, h, w = boxes[b].tolist()
        tensor_ref = TF.resized_crop(img, top, left, h, w, [32, 32], antialias=True)
        pil_ref = _tensor(TF.resized_crop(_pil(img), top, left, h, w, [32, 32]))
        # 0: same two passes (horizontal, vertical), each rounded half up, as PIL's fixed-point resize
        assert torch.equal(out[b], tensor_ref.float()), f"sample {b}, box {boxes[b].tolist()}"
        assert torch.equal(out[b], pil_ref.float())


def test_crop_boxes_follow_torchvision_random_resized_crop() -> None:
    n = 3000
    ours = AB.sample_resized_crop(n, 32, 32, _gen(1)).float()  # [n,4]
    torch.manual_seed(1)
    theirs = torch.tensor([v2.RandomResizedCrop.get_params(torch.zeros(3, 32, 32), [0.2, 1.0], [3 / 4, 4 / 3])
                           for _ in range(n)]).float()  # get_params draws from the global RNG
    assert (ours[:, 2:] >= 1).all() and (ours[:, :2] >= 0).all() and (ours[:, :2] + ours[:, 2:] <= 32).all()
    for col in range(4):  # top, left, h, w
        assert stats.ks_2samp(ours[:, col].numpy(), theirs[:, col].numpy()).pvalue > 1e-3, col


# ColorJitter components vs torchvision.transforms.v2.functional on uint8 tensors, one factor
# for the batch: brightness/contrast/saturation are exact (same float32 blend and truncation);
# hue is a float HSV round trip computed in another order, so a level flips on < 1e-4 of pixels.
JITTER = [
    (AB.adjust_brightness, TF.adjust_brightness, (0.6, 0.93, 1.4), 0.0),
    (AB.adjust_contrast, TF.adjust_contrast, (0.6, 0.93, 1.4), 0.0),
    (AB.adjust_saturation, TF.adjust_saturation, (0.6, 0.93, 1.4), 0.0),
    (AB.adjust_hue, TF.adjust_hue, (-0.1, 0.037, 0.1), 0.002),
]


@pytest.mark.parametrize(
    "ours, theirs, factors, tolerance", JITTER, ids=["brightness", "contrast", "saturation", "hue"]
)
def test_color_jitter_components_match_torchvision(ours, theirs, factors, tolerance, cifar: torch.Tensor) -> None:
    for f in factors:
        out = ours(cifar.float(), torch.full((len(cifar),), f, dtype=torch.float64))
        mad = (out - theirs(cifar, f).float()).abs().mean().item()
        assert mad <= tolerance, f"factor {f}: {mad}"


def test_color_jitter_per_sample_order_and_factors_match_torchvision_in_sequence(cifar: torch.Tensor) -> None:
    g = _gen(2)
    n = len(cifar)
    factors = torch.cat([0.6 + 0.8 * torch.rand(n, 3, generator=g, dtype=torch.float64),
                         -0.1 + 0.2 * torch.rand(n, 1, generator=g, dtype=torch.float64)], 1)
    order = torch.rand(n, 4, generator=g).argsort(1)
    x = cifar.float()
    out = AB.color_jitter(x, factors, order)
    assert torch.equal(out, AB.color_jitter(x, factors, order, subset=False))  # the GPU path
    fns = [TF.adjust_brightness, TF.adjust_contrast, TF.adjust_saturation, TF.adjust_hue]
    ref = []
    for b, img in enumerate(cifar):
        for k in order[b].tolist():
            img = fns[k](img, float(factors[b, k]))
        ref.append(img)
    assert (out - torch.stack(ref).float()).abs().mean().item() <= 0.002  # hue's rare flips, as above


def test_grayscale_matches_torchvision(cifar: torch.Tensor) -> None:
    out = AB.gray(cifar.float()).trunc().expand(-1, 3, -1, -1)
    assert torch.equal(out, TF.rgb_to_grayscale(cifar, num_output_channels=3).float())


def test_simaugment_batched_is_per_sample_deterministic_and_rng_clean(cifar: torch.Tensor) -> None:
    x = cifar[:1].expand(64, 3, 32, 32)
    state = torch.get_rng_state()
    a, b = AB.simaugment_batched(x, _gen(5)), AB.simaugment_batched(x, _gen(5))
    assert torch.equal(torch.get_rng_state(), state)
    assert a.dtype == torch.uint8 and a.shape == (64, 3, 32, 32)
    assert torch.equal(a, b)
    assert len({tuple(o.flatten().tolist()) for o in a}) == 64
    is_gray = (a[:, 0] == a[:, 1]).all((1, 2)) & (a[:, 1] == a[:, 2]).all((1, 2))  # [64]
    assert 0.05 < is_gray.float().mean() < 0.45  # RandomGrayscale p = 0.2
    flipped = AB.simaugment_batched(cifar[:1].flip(-1).expand(64, 3, 32, 32), _gen(5))
    assert not torch.equal(flipped, a)


def test_order_draws_cover_all_permutations() -> None:
    order = torch.rand(4000, 4, generator=_gen(0)).argsort(dim=1, stable=True)  # as simaugment_batched draws it
    perms = {tuple(r) for r in order.tolist()}
    assert len(perms) == 24


@pytest.mark.parametrize("view", ["strong-batched", "simaugment-batched", "pico-strong-batched"])
def test_batched_views_are_registered_and_handle_empty_and_bad_batches(view: str) -> None:
    fn = A.make_view(view)
    empty = fn(torch.zeros(0, 3, 32, 32, dtype=torch.uint8), _gen(0))
    assert empty.shape == (0, 3, 32, 32) and empty.dtype == torch.uint8
    with pytest.raises(PLLZooError, match="RGB"):
        fn(torch.zeros(2, 1, 32, 32, dtype=torch.uint8), _gen(0))
    with pytest.raises(PLLZooError, match="uint8"):
        fn(torch.zeros(2, 3, 32, 32), _gen(0))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_batched_views_run_on_cuda_without_host_syncs() -> None:
    dev = torch.device("cuda")
    x = torch.randint(0, 256, (64, 3, 32, 32), dtype=torch.uint8, generator=_gen(0)).to(dev)
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        outs = {name: A.make_view(name)(x, torch.Generator(dev).manual_seed(0))
                for name in ("strong-batched", "simaugment-batched", "pico-strong-batched")}
        again = AB.strong_batched(x, torch.Generator(dev).manual_seed(0))
        odd = AB.pico_strong_batched(x[:, :, :24, :20].contiguous(), torch.Generator(dev).manual_seed(0))
    finally:
        torch.cuda.set_sync_debug_mode(0)
    for name, out in outs.items():
        assert out.is_cuda and out.dtype == torch.uint8 and out.shape == (64, 3, 32, 32), name
    assert torch.equal(outs["strong-batched"], again)
    assert odd.is_cuda and odd.shape == (64, 3, 24, 20)  # PiCO's key view keeps a non-CIFAR size on the device too
    # the GPU path (whole batch, masks) agrees with the CPU path (subsets) on the same draws
    ops, mags = O.sample_randaugment(64, torch.Generator(dev).manual_seed(1), 3)
    gpu = O.apply_randaugment(x, ops, mags).cpu()
    cpu = O.apply_randaugment(x.cpu(), ops.cpu(), mags.cpu())
    assert (gpu.int() - cpu.int()).abs().float().mean() <= max(TOLERANCE.values())
