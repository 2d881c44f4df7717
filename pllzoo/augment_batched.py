"""SoLar's strong view and PiCO's SimCLR view as batched tensor ops, per-sample random, on any device.

``strong_batched`` and ``simaugment_batched`` are the views ``"strong-batched"`` and
``"simaugment-batched"`` of :data:`pllzoo.augment.VIEWS`: ``uint8 [B, 3, H, W]`` in and out,
CPU or CUDA, each sample with its own ops and magnitudes, every draw taken from the given
``torch.Generator`` on ``gen.device``.  On a GPU nothing reads a value back to the host (no
``.item()``, ``nonzero``, masked indexing or host-to-device copy; selections are ``torch.where``
and gathers, each stage runs on the whole batch and is the identity on the samples it does not
concern), so with a CUDA generator a view is a stream of kernels with no sync.  On CPU, where a
``nonzero`` costs nothing, each stage runs only on the samples that need it (``subset``); both
paths give the same output (tested).  The PIL views ``strong`` and ``simaugment`` are unchanged.

* ``strong_batched``: the reference RandomAugment(3, 5) (:mod:`pllzoo.augment_ops`, SoLar code: utils/randaugment.py;
  continuous magnitudes v ~ U[lo, hi] like the reference, not torchvision's 32 bins) → Cutout
  (:func:`pllzoo.augment.cutout`) → weak crop + flip (:func:`pllzoo.augment.weak`).
* ``pico_strong_batched`` (``"pico-strong-batched"``): PiCO's strong view, the crop + flip below, then the
  RandomAugment(3, 5) → Cutout of ``strong_batched``.
* ``simaugment_batched``: RandomResizedCrop(32, scale (0.2, 1), ratio (3/4, 4/3)) with
  torchvision's rule (10 trials, the first that fits, else the centre crop; the trials are drawn
  at once) and PIL's bilinear resize → horizontal flip p = 0.5 → ColorJitter(0.4, 0.4, 0.4, 0.1)
  with p = 0.8, the four adjustments in a random order per sample → RandomGrayscale p = 0.2.

Deviations:
  * RandomAugment: none in the maths.  The 14 ops follow PIL's integer rules (nearest affine
    sampling at pixel centres with black fill in Pillow's 16.16 fixed point, ``Image.blend``'s truncation, L = (19595 R +
    38470 G + 7471 B + 2¹⁵) >> 16, the rounded SMOOTH filter with its border kept, autocontrast
    and equalize lookup tables); on CIFAR-10 test images they equal PIL pixel for pixel on CPU
    (``tests/unit/test_augment_batched.py``).  On CUDA, float contraction (FMA) may move a blend
    by one level at an exact integer boundary.  A pure translation whose shift v·H lies within about 2⁻¹⁷
    below a half-integer can land one row or column off PIL's, which takes a float path there (an outside
    review, at 5×7); the uniform magnitude draws hit that band with probability ~1e-5 per op.
  * SimCLR: the crop + resize equals PIL's (two fixed-point passes, each rounded half up) at CIFAR's 32×32
    (see :func:`resized_crop` for other sizes).  The
    colour ops follow ``torchvision.transforms.v2.functional`` on uint8 tensors, not PIL, which
    ``simaugment`` runs: gray is 0.2989 R + 0.587 G + 0.114 B truncated (PIL: fixed point,
    rounded), and the hue turns in float HSV (PIL: in 8-bit HSV); ours equals torchvision's
    except for the hue round trip, which moves about 1e-4 of the pixels by one level (an outside
    review measured 1.0–1.15e-4 at factors ±0.02 to −0.06), and the saturation blend, where about 2
    values in 4.6 million differ by one level.
  * Draws are float64 from ``gen`` (torchvision: float32 from the global RNG, then Python
    floats), and the crop corner is drawn once per sample, not per successful trial: same
    distributions, other streams.

Library or our own ops, by measurement.  CPU, 1 torch thread, batch 256 of real CIFAR-10
images; torch 2.14, torchvision 0.29, kornia 0.9, Pillow 13; on a shared 2-core machine under
load, so each number is the fastest of 18 timings (two runs of 9), in ms::

    RandomAugment(3), the part of the strong view that changes
      PIL, one sample at a time (pllzoo.augment.randaugment, today)                 62
      torchvision v2 functional on uint8 tensors, grouped by op, one call per
        sample for the 11 ops with a magnitude (the reference's per-sample draws)   56
      the same with one magnitude per op group (not the reference: a lower bound;
        host-side grouping, i.e. a sync per group on a GPU)                         14
      kornia 0.9: its nearest equivalents of the 14 ops, each on the whole batch
        with per-sample magnitudes, selected with where, 3 rounds                  200
      kornia 0.9 RandAugment(n=3, m=10): one op set for the whole batch             11
      ours, CPU path (each stage on the samples that need it)                       20
      ours, GPU path run on CPU (every stage on the whole batch)                    50
    strong view: PIL 68, ours 24;  SimCLR view: PIL 108, ours 35

On an H100 (CUDA generator, sync debug mode "error" passes): strong-batched 7.7 ms and
simaugment-batched 4.7 ms per batch of 256, 8.7 ms and 6.5 ms per batch of 1024 (launch bound:
a few hundred small kernels); the PIL views took 85 ms and 180 ms for 256 on that host's CPU.

Why our own ops: kornia's ``RandAugment`` picks its ``n`` ops once per batch (``torch.randperm``,
without replacement) from torch's global RNG with one magnitude ``m`` for all, so it cannot give
each sample its own ops or continuous magnitudes; its per-sample augmentations also draw from
the global RNG, not a generator, and their conventions are not PIL's (additive brightness,
float enhance ops, rotation sampling).  Matching the reference with kornia means running its
ops on the whole batch and selecting, the slowest row above, and still not PIL's rules.
torchvision's functional ops take one magnitude per call, so the reference's per-sample
magnitudes cost one call per sample; its grouped form is fast on CPU only because it drops them.
Our ops match PIL exactly, run on GPU without syncs, and add no dependency; kornia is not used.
"""

from __future__ import annotations

import math

import torch

from pllzoo.syncs import host_reads_are_free

from pllzoo import augment
from pllzoo.augment_ops import apply_randaugment, on_rows, sample_randaugment
from pllzoo.errors import PLLZooError

GRAY_WEIGHTS = (0.2989, 0.587, 0.114)  # torchvision's rgb_to_grayscale on tensors
_HSV_SELECT = ((0, 2, 1, 1, 3, 0), (3, 0, 0, 2, 1, 1), (1, 1, 3, 0, 0, 2))  # per sector 0..5: R, G, B from (v, p, q, t)
_HSV_CODES = tuple(sum(k << (2 * i) for i, k in enumerate(row)) for row in _HSV_SELECT)  # 2 bits per sector


def _check(x: torch.Tensor) -> None:
    """Raise :class:`PLLZooError` unless ``x`` is uint8 [B, 3, H, W] (shape and dtype only: no sync)."""
    if x.dim() != 4 or x.shape[1] != 3 or x.dtype != torch.uint8:
        raise PLLZooError(f"expected uint8 RGB images [B, 3, H, W], got {x.dtype} {tuple(x.shape)}")


def strong_batched(x: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
    """SoLar's strong view, batched: RandomAugment(3) → Cutout → weak crop + flip.  uint8 [B,3,H,W] in and out."""
    _check(x)
    ops, mags = sample_randaugment(x.shape[0], gen, 3)  # [B,3], [B,3] on gen.device
    x = apply_randaugment(x, ops.to(x.device), mags.to(x.device))
    return augment.weak(augment.cutout(x, gen), gen)


def sample_resized_crop(
    batch: int, height: int, width: int, gen: torch.Generator,
    scale: tuple[float, float] = (0.2, 1.0), ratio: tuple[float, float] = (3 / 4, 4 / 3), trials: int = 10,
) -> torch.Tensor:
    """Draw RandomResizedCrop boxes by torchvision's rule, all trials at once.

    Trial t draws an area fraction U[scale] and a log aspect ratio U[log ratio]; w and h are the
    rounded (half to even) sides.  The first trial with 0 < w <= width and 0 < h <= height wins,
    with its corner uniform over the valid positions; with none, the centre crop of the largest
    box whose aspect ratio lies in ``ratio``.

    :returns: int64 [B, 4] boxes (top, left, h, w), on ``gen.device``.
    """
    dev = gen.device
    area = torch.rand((batch, trials), generator=gen, device=dev, dtype=torch.float64)  # [B,T]
    area = height * width * (scale[0] + (scale[1] - scale[0]) * area)
    lo, hi = math.log(ratio[0]), math.log(ratio[1])
    aspect = torch.exp(lo + (hi - lo) * torch.rand((batch, trials), generator=gen, device=dev, dtype=torch.float64))
    w = torch.sqrt(area * aspect).round().long()  # [B,T]
    h = torch.sqrt(area / aspect).round().long()
    fits = (w > 0) & (w <= width) & (h > 0) & (h <= height)  # [B,T]
    first = fits.int().argmax(1, keepdim=True)  # [B,1], index of the first fitting trial (0 if none)
    found = fits.any(1)  # [B]
    in_ratio = width / height  # the centre-crop fallback, as torchvision computes it
    if in_ratio < min(ratio):
        fw, fh = width, int(round(width / min(ratio)))
    elif in_ratio > max(ratio):
        fw, fh = int(round(height * max(ratio))), height
    else:
        fw, fh = width, height
    w = torch.where(found, w.gather(1, first).squeeze(1), fw)  # [B]
    h = torch.where(found, h.gather(1, first).squeeze(1), fh)
    u = torch.rand((batch, 2), generator=gen, device=dev, dtype=torch.float64)  # [B,2]
    top = torch.where(found, (u[:, 0] * (height - h + 1)).floor().long(), (height - fh) // 2)
    left = torch.where(found, (u[:, 1] * (width - w + 1)).floor().long(), (width - fw) // 2)
    return torch.stack([top, left, h, w], 1)


def _axis_taps(start: torch.Tensor, length: torch.Tensor, size: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Bilinear taps (half-pixel centres, clamped to the crop) for resizing [start, start+length) to ``size``.

    :param start: int64 [B]; :param length: int64 [B].
    :returns: ``(i0, i1, w1)``: int64 [B, size] source indices and float32 [B, size] weight of ``i1``.
    """
    o = torch.arange(size, device=start.device, dtype=torch.float64) + 0.5  # [size]
    src = (o * (length[:, None].double() / size) - 0.5).clamp(min=0)  # [B,size], in crop coordinates
    src = torch.minimum(src, (length - 1)[:, None].double())
    i0 = src.floor()
    w1 = (src - i0).float()
    i0 = i0.long()
    i1 = torch.minimum(i0 + 1, (length - 1)[:, None])
    return start[:, None] + i0, start[:, None] + i1, w1


def resized_crop(x: torch.Tensor, boxes: torch.Tensor, size: int | tuple[int, int]) -> torch.Tensor:
    """Crop each sample to its box and resize it to size×size (or ``size = (height, width)``), bilinear, as PIL
    does it.

    PIL's order and rounding: a horizontal pass, rounded half up to integers, then a vertical
    pass, rounded the same way; ``v2.functional.resized_crop(..., antialias=True)`` does the same
    on uint8 tensors.  Exact for boxes no larger than ``size`` at the sizes tested, 32 (CIFAR) and 64; at other
    output sizes (20, 24×40, 48: an outside review) PIL's fixed-point filter coefficients make up to 2 levels of
    difference (mean ≈ 0.015).  Larger boxes are sampled without antialiasing.

    :param x: uint8 [B, C, H, W]; :param boxes: int64 [B, 4] (top, left, h, w) on ``x.device``.
    :returns: float32 [B, C, height, width] holding integers 0..255.
    """
    B, C, H, W = x.shape
    oh, ow = (size, size) if isinstance(size, int) else size
    r0, r1, wr = _axis_taps(boxes[:, 0], boxes[:, 2], oh)  # [B,oh] each
    c0, c1, wc = _axis_taps(boxes[:, 1], boxes[:, 3], ow)  # [B,ow] each
    xf = x.float()

    def cols(idx: torch.Tensor) -> torch.Tensor:  # [B,ow] -> [B,C,H,ow]
        return xf.gather(3, idx.view(B, 1, 1, ow).expand(B, C, H, ow))

    y = torch.lerp(cols(c0), cols(c1), wc.view(B, 1, 1, ow)).add_(0.5).floor_()  # [B,C,H,ow]

    def rows(idx: torch.Tensor) -> torch.Tensor:  # [B,oh] -> [B,C,oh,ow]
        return y.gather(2, idx.view(B, 1, oh, 1).expand(B, C, oh, ow))

    return torch.lerp(rows(r0), rows(r1), wr.view(B, 1, oh, 1)).add_(0.5).floor_()


def gray(x: torch.Tensor) -> torch.Tensor:
    """torchvision's tensor grayscale, not truncated: 0.2989 R + 0.587 G + 0.114 B.  float [B,3,H,W] -> [B,1,H,W]."""
    r, g, b = x.unbind(1)
    return (r * GRAY_WEIGHTS[0] + g * GRAY_WEIGHTS[1] + b * GRAY_WEIGHTS[2])[:, None]


def _blend(x: torch.Tensor, deg: torch.Tensor, factor: torch.Tensor) -> torch.Tensor:
    """``trunc(clamp(f·x + (1 − f)·deg, 0, 255))``, torchvision's ``_blend``, with ``factor`` float64 [B].

    :param x: float [B, C, H, W] holding integers; :param deg: float, broadcastable to ``x``.
    """
    f = factor.float().view(-1, 1, 1, 1)
    g = (1.0 - factor).float().view(-1, 1, 1, 1)  # 1 − f in float64 first, as torchvision's Python float
    return torch.addcmul(x * f, deg, g).clamp_(0, 255).trunc_()


def adjust_brightness(x: torch.Tensor, factor: torch.Tensor) -> torch.Tensor:
    """Scale by ``factor`` [B]; factor 1 returns x exactly.  float [B,3,H,W] holding integers, in and out."""
    return _blend(x, torch.zeros_like(x[:, :1]), factor)


def adjust_contrast(x: torch.Tensor, factor: torch.Tensor) -> torch.Tensor:
    """Blend with the mean of the truncated gray image, per sample."""
    return _blend(x, gray(x).floor_().mean((1, 2, 3), keepdim=True), factor)


def adjust_saturation(x: torch.Tensor, factor: torch.Tensor) -> torch.Tensor:
    """Blend with the truncated gray image, per sample."""
    return _blend(x, gray(x).floor_(), factor)


def adjust_hue(x: torch.Tensor, shift: torch.Tensor) -> torch.Tensor:
    """Rotate the hue by ``shift`` [B] (fraction of a turn) in float HSV; uint8 back as ``trunc(255.999·v)``.

    :param x: float [B, 3, H, W] holding integers 0..255.
    :returns: float [B, 3, H, W] holding integers 0..255.
    """
    rgb = x * (1.0 / 255.0)  # as torchvision converts uint8 to float
    maxc, minc = rgb.amax(1), rgb.amin(1)  # [B,H,W]
    delta = maxc - minc
    flat = delta == 0
    s = delta / torch.where(flat, torch.ones_like(maxc), maxc)
    d = torch.where(flat, torch.ones_like(delta), delta)
    r, g, b = rgb.unbind(1)
    h = torch.where(maxc == r, (g - b) / d, torch.where(maxc == g, 2.0 + (b - r) / d, 4.0 + (r - g) / d))
    h = torch.where(flat, torch.zeros_like(h), h)
    h = torch.remainder(h / 6.0 + shift.float().view(-1, 1, 1), 1.0)  # [B,H,W] in [0, 1)
    h6 = h * 6.0
    sector = h6.floor()
    frac = h6 - sector
    sector = sector.long().remainder(6)  # [B,H,W]
    vpqt = torch.stack([maxc, maxc * (1 - s), maxc * (1 - s * frac), maxc * (1 - s * (1 - frac))], 1).clamp_(0, 1)
    pick = torch.stack([(code >> (2 * sector)) & 3 for code in _HSV_CODES], 1)  # [B,3,H,W] into (v, p, q, t)
    return (vpqt.gather(1, pick) * (255.0 + 1.0 - 1e-3)).trunc_()


def color_jitter(
    x: torch.Tensor, factors: torch.Tensor, order: torch.Tensor, subset: bool | None = None
) -> torch.Tensor:
    """Apply brightness, contrast, saturation, hue (adjustment k = 0..3) in a per-sample order.

    :param x: float [B, 3, H, W] holding integers.
    :param factors: float64 [B, 4]: brightness, contrast, saturation factors and the hue shift;
        (1, 1, 1, 0) leaves a sample unchanged.
    :param order: int64 [B, 4], a permutation of 0..3 per sample: ``order[b, p]`` runs p-th.
    :param subset: adjust only the samples that need it (see :func:`pllzoo.augment_ops.on_rows`);
        default: on CPU only.  The output is the same either way.
    :returns: float [B, 3, H, W] holding integers.
    """
    if subset is None:
        subset = host_reads_are_free(x.device)  # inside count_syncs on a CPU: the accelerator's path, as checked
    for p in range(4):
        k = order[:, p]  # [B], the adjustment each sample runs at step p
        f = factors.gather(1, k[:, None]).squeeze(1)  # [B]
        x = on_rows(_blend_step, k < 3, subset, x, k, f)
        x = on_rows(_hue_step, k == 3, subset, x, k, f)
    return x


def _blend_step(x: torch.Tensor, k: torch.Tensor, f: torch.Tensor) -> torch.Tensor:
    """Brightness (k = 0), contrast (1) or saturation (2) with factor ``f`` per sample; identity where k = 3."""
    B = x.shape[0]
    g = gray(x).floor_()  # [B,1,H,W]
    deg = torch.where((k == 2).view(B, 1, 1, 1), g, g.mean((1, 2, 3), keepdim=True))  # saturation: gray; contrast: mean
    deg = torch.where((k == 0).view(B, 1, 1, 1), torch.zeros_like(deg), deg)  # brightness: black
    return _blend(x, deg, torch.where(k < 3, f, torch.ones_like(f)))


def _hue_step(x: torch.Tensor, k: torch.Tensor, f: torch.Tensor) -> torch.Tensor:
    """Hue shift ``f`` where k = 3; identity elsewhere (a float HSV round trip is not one, hence the where)."""
    hue = k == 3
    return torch.where(hue.view(-1, 1, 1, 1), adjust_hue(x, torch.where(hue, f, torch.zeros_like(f))), x)


def simaugment_batched(x: torch.Tensor, gen: torch.Generator, size: int | tuple[int, int] | None = None
                       ) -> torch.Tensor:
    """PiCO's SimCLR view, batched: RandomResizedCrop → flip → ColorJitter p=0.8 → RandomGrayscale p=0.2.

    :param x: uint8 [B, 3, H, W].
    :param size: the crop's output size; None: the input's own (PiCO: 32, CIFAR's; an outside review found other
        image sets trained on 32×32 crops and evaluated at their own size).
    :returns: uint8 [B, 3, H, W] (or ``size``).
    """
    _check(x)
    size = tuple(x.shape[2:]) if size is None else size
    B, dev = x.shape[0], gen.device
    boxes = sample_resized_crop(B, x.shape[2], x.shape[3], gen)  # [B,4]
    u = torch.rand((B, 3), generator=gen, device=dev, dtype=torch.float64)  # flip, jitter, gray
    jitter = torch.rand((B, 4), generator=gen, device=dev, dtype=torch.float64)  # [B,4] in [0, 1)
    order = torch.rand((B, 4), generator=gen, device=dev).argsort(dim=1, stable=True)  # [B,4], a uniform permutation
    factors = torch.cat([0.6 + 0.8 * jitter[:, :3], -0.1 + 0.2 * jitter[:, 3:]], 1)  # [0.6, 1.4]³ × [-0.1, 0.1]
    neutral = torch.ones_like(factors)
    neutral[:, 3] = 0.0  # (1, 1, 1, 0): no jitter, built on the device (no host copy)
    factors = torch.where((u[:, 1] < 0.8)[:, None], factors, neutral)
    boxes, u, factors, order = boxes.to(x.device), u.to(x.device), factors.to(x.device), order.to(x.device)
    out = resized_crop(x, boxes, size)  # [B,3,size,size] float
    out = torch.where((u[:, 0] < 0.5).view(B, 1, 1, 1), out.flip(-1), out)
    out = color_jitter(out, factors, order)
    out = torch.where((u[:, 2] < 0.2).view(B, 1, 1, 1), gray(out).trunc_().expand_as(out), out)
    return out.to(torch.uint8)


def pico_strong_batched(x: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
    """PiCO's strong (key) view, batched: RandomResizedCrop → flip → RandomAugment(3) → Cutout.

    The crop is resized to the input's own size (PiCO: 32, CIFAR's), as the key encoder reads what the query
    encoder reads.

    :param x: uint8 [B, 3, H, W].
    :returns: uint8 [B, 3, H, W].
    """
    _check(x)
    B, _, H, W = x.shape
    boxes = sample_resized_crop(B, H, W, gen)  # [B,4]
    flip = torch.rand(B, generator=gen, device=gen.device, dtype=torch.float64) < 0.5  # [B]
    out = resized_crop(x, boxes.to(x.device), (H, W))  # [B,3,H,W] float
    out = torch.where(flip.to(x.device).view(B, 1, 1, 1), out.flip(-1), out).to(torch.uint8)
    ops, mags = sample_randaugment(B, gen, 3)  # [B,3], [B,3] on gen.device
    return augment.cutout(apply_randaugment(out, ops.to(x.device), mags.to(x.device)), gen)


augment.VIEWS.update({"strong-batched": strong_batched, "simaugment-batched": simaugment_batched,
                      "pico-strong-batched": pico_strong_batched})
