"""The reference RandomAugment(3, 5) as batched tensor ops: each sample gets its own ops and magnitudes.

SoLar's utils/randaugment.py draws, per image, 3 ops with replacement from the 14 in
:data:`OPS` and a magnitude v ~ U[lo, hi] for each, then calls PIL.  Here one call handles a
whole ``uint8 [B, C, H, W]`` batch on any device: :func:`sample_randaugment` draws the op indices
and magnitudes from a ``torch.Generator`` on its own device, and :func:`apply_randaugment` applies
given ones.  Each of the ``n`` rounds runs three stages, each one the identity, bit for bit, on a
sample whose op belongs to another stage (so on a GPU each stage runs on the whole batch and no
value is read back; on CPU each runs only on its own samples, see :func:`on_rows`):

1. geometry (Rotate, ShearX/Y, TranslateX/Y): one nearest-neighbour gather through a per-sample
   affine map, PIL's ``Image.transform(AFFINE)`` rule: output pixel (x, y) reads input pixel
   ``floor(a(x+½) + b(y+½) + c), floor(d(x+½) + e(y+½) + f)``, black outside, evaluated as Pillow does in
   16.16 fixed point (:func:`_affine_stage`).  Rotate uses the matrix of PIL's ``Image.rotate`` (about the
   centre W/2, H/2, counter-clockwise degrees);
2. pixel blends (Color, Sharpness): ``floor(deg + v·(x − deg))`` like PIL's ``Image.blend``,
   with ``ImageEnhance``'s degenerate image: the L grayscale (ITU-R 601-2 luma with PIL's
   fixed-point rounding), or the 3×3 SMOOTH filter (1 1 1 / 1 5 1 / 1 1 1 over 13, rounded,
   border pixels kept);
3. lookup tables per sample and channel, applied with one gather: AutoContrast and Equalize
   (``ImageOps``' rules, from per-channel histograms), Posterize, Solarize, and Brightness and
   Contrast, whose degenerate image is a constant (black; the rounded mean of L), so their
   blend is a table too.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch

from pllzoo.syncs import host_reads_are_free

# the reference's augment_list(), in its order: (name, lo, hi); v ~ U[lo, hi]
RANGES: tuple[tuple[str, float, float], ...] = (
    ("AutoContrast", 0.0, 1.0),
    ("Brightness", 0.05, 0.95),
    ("Color", 0.05, 0.95),
    ("Contrast", 0.05, 0.95),
    ("Equalize", 0.0, 1.0),
    ("Identity", 0.0, 1.0),
    ("Posterize", 4.0, 8.0),  # bits = int(v): 4..7, since v < 8
    ("Rotate", -30.0, 30.0),  # degrees, counter-clockwise
    ("Sharpness", 0.05, 0.95),
    ("ShearX", -0.3, 0.3),
    ("ShearY", -0.3, 0.3),
    ("Solarize", 0.0, 256.0),  # threshold: pixels >= v are inverted
    ("TranslateX", -0.3, 0.3),  # fraction of the width
    ("TranslateY", -0.3, 0.3),  # fraction of the height
)
OPS: tuple[str, ...] = tuple(name for name, _, _ in RANGES)
OP = {name: k for k, name in enumerate(OPS)}  # name -> op index


def sample_randaugment(batch: int, gen: torch.Generator, num_ops: int = 3) -> tuple[torch.Tensor, torch.Tensor]:
    """Draw the reference's random choices: ``num_ops`` ops with replacement, each with v ~ U[lo, hi].

    :param batch: number of samples B.
    :param gen: the only source of randomness; the draws live on ``gen.device``.
    :returns: ``(ops, mags)``: int64 [B, num_ops] indices into :data:`OPS`, and float64
        [B, num_ops] magnitudes (float64 like the reference's Python floats).
    """
    ops = torch.randint(len(OPS), (batch, num_ops), generator=gen, device=gen.device)  # [B,n]
    u = torch.rand((batch, num_ops), generator=gen, device=gen.device, dtype=torch.float64)  # [B,n]
    mags = torch.zeros_like(u)
    for k, (_, lo, hi) in enumerate(RANGES):  # per-op loop, constants as scalars (no host->device copy)
        mags = torch.where(ops == k, lo + (hi - lo) * u, mags)
    return ops, mags


def apply_randaugment(
    x: torch.Tensor, ops: torch.Tensor, mags: torch.Tensor, subset: bool | None = None
) -> torch.Tensor:
    """Apply per-sample ops in order: round r applies op ``ops[b, r]`` with magnitude ``mags[b, r]`` to sample b.

    :param x: uint8 [B, C, H, W] (C = 3 for Color and Contrast, which use the RGB luma).
    :param ops: int64 [B, n], indices into :data:`OPS`, on ``x.device``.
    :param mags: float [B, n], magnitudes in the units of :data:`RANGES`, on ``x.device``.
    :param subset: run each stage only on the samples that need it (gathered with ``nonzero``, a
        host sync on a GPU); default: on CPU only.  The output is the same either way.
    :returns: uint8 [B, C, H, W].
    """
    if subset is None:
        subset = host_reads_are_free(x.device)  # inside count_syncs on a CPU: the accelerator's path, as checked
    for r in range(ops.shape[1]):
        op, v = ops[:, r], mags[:, r].to(torch.float64)  # [B], [B]
        for stage, names in _STAGES:
            mask = torch.zeros_like(op, dtype=torch.bool)
            for name in names:
                mask |= op == OP[name]  # [B]
            x = on_rows(stage, mask, subset, x, op, v)
    return x


def on_rows(
    fn: Callable[..., torch.Tensor], mask: torch.Tensor, subset: bool, x: torch.Tensor, *args: torch.Tensor
) -> torch.Tensor:
    """Return ``fn(x, *args)`` for a per-sample ``fn`` that is the identity on the rows where ``mask`` is False.

    With ``subset``, ``fn`` runs only on the rows where ``mask`` is True (found with ``nonzero``:
    cheap on CPU, a host sync on a GPU) and the others are copied; the result is the same.

    :param mask: bool [B]; :param x: [B, ...]; :param args: per-sample tensors [B, ...].
    """
    if not subset:
        return fn(x, *args)
    idx = mask.nonzero().squeeze(1)  # [b]
    if idx.numel() == 0:
        return x
    return x.index_copy(0, idx, fn(x[idx], *(a[idx] for a in args)))


def _fix(t: torch.Tensor) -> torch.Tensor:
    """Pillow's 16.16 fixed point of a float64 coefficient: ``floor(v·65536 + ½)`` (``FIX`` in Geometry.c)."""
    return (t * 65536.0 + 0.5).floor_().long()


def _affine_stage(x: torch.Tensor, op: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """Rotate, ShearX/Y, TranslateX/Y as PIL's nearest AFFINE transform; other samples pass unchanged.

    Pillow maps each output pixel through the inverse matrix (a b c / d e f) in 16.16 fixed point
    (its nearest-neighbour fast path for images this small): the coefficients are rounded
    (:func:`_fix`) and input column = ``(FIX(c + a/2 + b/2) + x·FIX(a) + y·FIX(b)) >> 16``, row likewise,
    black outside.  ``Image.rotate`` builds its matrix from ``v % 360`` with cos and sin rounded to 15
    decimals, about the centre (W/2, H/2).  Evaluating ``a(x+½) + b(y+½) + c`` in floating point instead
    moved whole rows on round shears (v = 0.2) and 1–8 pixels in 10 % of rotations (an outside review).
    """
    B, C, H, W = x.shape
    v = v.double()
    one, zero = torch.ones_like(v), torch.zeros_like(v)
    theta = -(torch.remainder(v, 360.0) * (math.pi / 180.0))  # PIL: angle = -math.radians(angle % 360)
    cos, sin = _round15(torch.cos(theta)), _round15(torch.sin(theta))
    cx, cy = W / 2.0, H / 2.0
    rot = op == OP["Rotate"]
    a = torch.where(rot, cos, one)  # [B]; the inverse map (output -> input), PIL's convention
    b = torch.where(rot, sin, torch.where(op == OP["ShearX"], v, zero))
    d = torch.where(rot, -sin, torch.where(op == OP["ShearY"], v, zero))
    e = a
    # rotate: the centre's offset in PIL's order of operations, a·(−cx) + b·(−cy) + 0, then + cx
    c = torch.where(rot, (a * -cx + b * -cy + 0.0) + cx, torch.where(op == OP["TranslateX"], v * W, zero))
    f = torch.where(rot, (d * -cx + e * -cy + 0.0) + cy, torch.where(op == OP["TranslateY"], v * H, zero))
    px = torch.arange(W, device=x.device, dtype=torch.long)  # [W]
    py = torch.arange(H, device=x.device, dtype=torch.long)  # [H]
    # input column and row: an x-term [B,1,W] plus a y-term [B,H,1], in 16.16 fixed point, floored by the shift
    col = (view3(_fix(a)) * px + (_fix(b)[:, None] * py + _fix(c + a * 0.5 + b * 0.5)[:, None])[:, :, None]) >> 16
    row = (view3(_fix(d)) * px + (_fix(e)[:, None] * py + _fix(f + d * 0.5 + e * 0.5)[:, None])[:, :, None]) >> 16
    inside = (col >= 0) & (col < W) & (row >= 0) & (row < H)  # [B,H,W]
    idx = torch.where(inside, row * W + col, H * W).view(B, 1, H * W)  # H·W: the black pixel below
    padded = torch.cat([x.flatten(2), x.new_zeros(B, C, 1)], 2)  # [B,C,H*W+1]
    return padded.gather(2, idx.expand(B, C, H * W)).view(B, C, H, W)


def _round15(t: torch.Tensor) -> torch.Tensor:
    """``round(t, 15)`` of float64 values in [−1, 1], as ``Image.rotate`` rounds cos and sin."""
    return torch.round(t * 1e15) / 1e15


def view3(t: torch.Tensor) -> torch.Tensor:
    """``[B] -> [B, 1, 1]``, to broadcast a per-sample value over an [B, H, W] plane."""
    return t.view(-1, 1, 1)


def luma(x: torch.Tensor) -> torch.Tensor:
    """PIL's ``convert("L")``: ``(19595 R + 38470 G + 7471 B + 2¹⁵) >> 16``.  uint8 [B,3,H,W] -> int32 [B,1,H,W]."""
    r, g, b = x.int().unbind(1)
    return ((r * 19595 + g * 38470 + b * 7471 + 32768) >> 16)[:, None]


def smooth(x: torch.Tensor) -> torch.Tensor:
    """PIL's ``ImageFilter.SMOOTH``: 3×3 kernel (1 1 1 / 1 5 1 / 1 1 1) / 13, rounded; border pixels kept.

    :param x: float [B, C, H, W] holding integers 0..255 (sums stay exact in float32).
    :returns: float [B, C, H, W].
    """
    rows = x[:, :, :-2] + x[:, :, 1:-1] + x[:, :, 2:]  # [B,C,H-2,W], vertical 3-sums
    box = rows[..., :-2] + rows[..., 1:-1] + rows[..., 2:]  # [B,C,H-2,W-2], 3×3 sums
    out = x.clone()
    inner = x[:, :, 1:-1, 1:-1]
    out[:, :, 1:-1, 1:-1] = box.add_(inner, alpha=4.0).div_(13.0).add_(0.5).floor_()  # k/13 is never a tie
    return out


def _blend_stage(x: torch.Tensor, op: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """Color and Sharpness as ``ImageEnhance``: ``floor(deg + v·(x − deg))``, deg = L or SMOOTH; others unchanged."""
    B = x.shape[0]
    xf = x.float()  # [B,C,H,W]
    deg = torch.where((op == OP["Color"]).view(B, 1, 1, 1), luma(x).float(), smooth(xf))  # [B,C,H,W]
    alpha = torch.where((op == OP["Color"]) | (op == OP["Sharpness"]), v, torch.ones_like(v)).float()
    # alpha = 1 gives x back exactly; alpha in [0, 1] keeps the value in [0, 255], so the cast truncates = floors
    return xf.sub_(deg).mul_(alpha.view(B, 1, 1, 1)).add_(deg).to(torch.uint8)


def histogram(flat: torch.Tensor) -> torch.Tensor:
    """Per-sample, per-channel 256-bin histograms.  int64 levels [B, C, N] -> int32 [B, C, 256]."""
    ones = torch.ones(1, 1, 1, dtype=torch.int32, device=flat.device).expand_as(flat)
    return torch.zeros(*flat.shape[:2], 256, dtype=torch.int32, device=flat.device).scatter_add_(2, flat, ones)


def _lut_stage(x: torch.Tensor, op: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """AutoContrast, Equalize, Posterize, Solarize (``ImageOps``) and Brightness, Contrast (``ImageEnhance``,
    whose degenerate image is a constant) as per-sample, per-channel lookup tables; others unchanged."""
    B, C, H, W = x.shape
    flat = x.view(B, C, H * W).long()  # [B,C,HW], shared by the histogram and the final lookup
    hist = histogram(flat)  # [B,C,256] int32
    levels = torch.arange(256, device=x.device, dtype=torch.int32)  # [256]
    present = hist > 0  # [B,C,256]
    lo = torch.where(present, levels, 256).amin(2, keepdim=True)  # [B,C,1], lowest level present
    hi = torch.where(present, levels, -1).amax(2, keepdim=True)  # [B,C,1], highest level present
    # AutoContrast: lut[i] = int(i·s − lo·s), s = 255 / (hi − lo), clipped; identity when hi <= lo
    span = (hi - lo).clamp(min=1).double()
    scale = torch.full_like(span, 255.0) / span  # a true division: ``255.0 / t`` is 255·(1/t), off by 1 ulp
    stretched = (levels * scale + (-lo * scale)).trunc_().clamp_(0, 255).int()
    auto = torch.where(hi > lo, stretched, levels)  # [B,C,256]
    # Equalize: step = (N − count of the top level) // 255; lut[i] = (step // 2 + #pixels below i) // step
    top = hist.gather(2, hi.clamp(min=0).long())  # [B,C,1]
    step = (H * W - top) // 255
    below = hist.cumsum(2, dtype=torch.int32) - hist  # [B,C,256], exclusive cumulative count
    eq = ((step // 2 + below) // step.clamp(min=1)).clamp_(max=255)
    equal = torch.where((present.sum(2, keepdim=True) > 1) & (step > 0), eq, levels)  # [B,C,256]
    # Posterize: keep the top int(v) bits; Solarize: invert levels >= v
    bits = v.floor().int().clamp(1, 8).view(B, 1, 1)
    poster = levels & (256 - (1 << (8 - bits)))  # [B,1,256]
    solar = torch.where(levels >= v.view(B, 1, 1), 255 - levels, levels)  # [B,1,256]
    # Brightness and Contrast: Image.blend with a constant m (0, or int(mean(L) + 0.5)): floor(m + v·(i − m))
    mean = (luma(x).sum((1, 2, 3), dtype=torch.int64).double() / (H * W) + 0.5).floor()  # [B]
    m = torch.where(op == OP["Contrast"], mean, torch.zeros_like(mean)).float().view(B, 1, 1)
    blend = (m + v.float().view(B, 1, 1) * (levels.float() - m)).floor_().int()  # [B,1,256]
    op3 = op.view(B, 1, 1)
    per_sample = torch.where(op3 == OP["Posterize"], poster, levels)  # [B,1,256]: the ops equal on all channels
    per_sample = torch.where(op3 == OP["Solarize"], solar, per_sample)
    per_sample = torch.where((op3 == OP["Brightness"]) | (op3 == OP["Contrast"]), blend, per_sample)
    lut = torch.where(op3 == OP["AutoContrast"], auto, torch.where(op3 == OP["Equalize"], equal, per_sample))
    return lut.to(torch.uint8).gather(2, flat).view(B, C, H, W)  # [B,C,256] lookups


# the three stages of a round and the ops each one applies (it is the identity for the others)
_STAGES = (
    (_affine_stage, ("Rotate", "ShearX", "ShearY", "TranslateX", "TranslateY")),
    (_blend_stage, ("Color", "Sharpness")),
    (_lut_stage, ("AutoContrast", "Brightness", "Contrast", "Equalize", "Posterize", "Solarize")),
)

__all__ = ["OP", "OPS", "RANGES", "apply_randaugment", "histogram", "luma", "on_rows", "sample_randaugment", "smooth"]
