"""Batched input views on in-memory ``uint8 [B, C, H, W]`` images: normalise, weak, strong, SimCLR-style.

Every view is ``view(x_uint8, gen) -> uint8`` of the same shape and draws all of its randomness
from ``gen``; the same generator state gives the same output, and torch's global RNG is left
as it was.  ``weak`` and Cutout are tensor ops over the whole batch.  RandAugment and the
SimCLR ops go through torchvision v2 on PIL images, one sample at a time (torchvision applies
one op set per call), which is also what the reference code runs.

``strong`` is SoLar's strong view (SoLar code: utils/randaugment.py): RandomAugment(3, 5),
i.e. three ops drawn with replacement from 14, each with its own magnitude v ~ U[lo, hi]; then
Cutout (side U[0, 0.5)·W, random centre, box clipped to the image, RGB (125, 123, 114), same
geometry as the reference's PIL code, see :func:`cutout`); then the weak crop + flip.
torchvision's ``RandAugment`` picks and applies the ops, on PIL images, so each op is the same
PIL call as in the reference.  ``ranges="reference"`` (default) swaps torchvision's magnitude
table for the reference's ranges, unsigned: Brightness/Color/Contrast/Sharpness factor v in
[0.05, 0.95] (always weakening), Rotate [-30, 30] deg, Shear [-0.3, 0.3], Translate
[-0.3, 0.3]·size, Posterize [4, 8) bits, Solarize threshold [0, 256].  ``ranges="torchvision"``
keeps torchvision's table: enhance factors 1 ± [0, 0.9] with a random sign (so they also
strengthen), Translate ±150/331·size, Solarize threshold [0, 255], Posterize 8..4 bits.

Deviations from the reference:
  * magnitudes are the midpoints of ``NUM_BINS`` = 32 equal bins of [lo, hi] instead of a
    continuous uniform (Rotate steps 1.9 deg); Posterize still gets 4..7 bits equally often;
  * torchvision's Translate rounds the shift to whole pixels (PIL shifts by a float, nearest);
  * the reference flips then crops; we crop then flip, the same distribution because the
    crop offset is symmetric (uniform on 0..2p).
Randomness: torchvision draws op choices and signs from torch's global CPU RNG, so those calls
run inside ``torch.random.fork_rng`` with the CPU generator seeded from ``gen``.  Two
threads must not draw from the global RNG while a view runs (calls here are serialised by
a lock); to run views off the main thread, keep the main thread on explicit generators.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Literal

import numpy as np
import torch
import torch.nn.functional as F
from PIL import Image

if TYPE_CHECKING:
    from torchvision.transforms import v2

from pllzoo.errors import PLLZooError

if TYPE_CHECKING:  # pragma: no cover
    from pllzoo.registry import Registry

View = Callable[[torch.Tensor, torch.Generator], torch.Tensor]
NUM_BINS = 32  # magnitude bins per op; divisible by 4 so Posterize bits 4..7 are equally likely
CUTOUT_FILL = (125, 123, 114)  # RGB, as in the reference Cutout
_GLOBAL_RNG_LOCK = threading.Lock()


def pooled(view: View) -> View:
    """Mark ``view`` as one that works on host images one sample at a time (PIL, as ``strong``): with
    ``--view-workers N`` > 0 (the default on CUDA) a run whose strong view it is has it computed a few batches
    ahead by N worker processes (:mod:`pllzoo.prefetch`), which import it by its module and name, so it must be
    a module-level function of an importable module.  The host asks this mark, never a view's name: an outside
    copy of a built-in view, marked, is treated as the built-in (same stream, same numbers).  Returns ``view``."""
    view.pooled = True  # type: ignore[attr-defined]
    return view


def is_pooled(view: View) -> bool:
    """Whether ``view`` carries the :func:`pooled` mark."""
    return getattr(view, "pooled", False) is True


def normalize(x: torch.Tensor, mean: Sequence[float], std: Sequence[float]) -> torch.Tensor:
    """Return ``(x / 255 - mean) / std`` as float32; ``x`` is uint8 [..., C, H, W]."""
    m = torch.as_tensor(mean, dtype=torch.float32, device=x.device).view(-1, 1, 1)  # [C,1,1]
    s = torch.as_tensor(std, dtype=torch.float32, device=x.device).view(-1, 1, 1)
    return x.to(torch.float32).div_(255.0).sub_(m).div_(s)


def identity(x: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
    """The "none" view: return ``x`` unchanged (tabular data, test-time)."""
    return x


def _draw(gen: torch.Generator, device: torch.device, fn: Callable[..., torch.Tensor], *args: object) -> torch.Tensor:
    """Draw with ``fn(*args, generator=gen)`` on the generator's device, then move to ``device``."""
    return fn(*args, generator=gen, device=gen.device).to(device)


def weak(x: torch.Tensor, gen: torch.Generator, padding: int = 4) -> torch.Tensor:
    """RandomCrop(H×W, zero padding) + RandomHorizontalFlip(0.5), per sample, no Python loop.

    :param x: uint8 [B, C, H, W].
    :param gen: source of the per-sample offsets (uniform on 0..2·padding) and flips.
    :returns: uint8 [B, C, H, W]; row b is a crop of the zero-padded ``x[b]``, maybe mirrored.
    """
    B, C, H, W = x.shape
    Wp = W + 2 * padding
    oy = _draw(gen, x.device, torch.randint, 0, 2 * padding + 1, (B,))  # [B]
    ox = _draw(gen, x.device, torch.randint, 0, 2 * padding + 1, (B,))  # [B]
    flip = _draw(gen, x.device, torch.rand, B) < 0.5  # [B]
    xp = F.pad(x, (padding, padding, padding, padding))  # [B,C,H+2p,W+2p], zeros
    rows = oy[:, None] + torch.arange(H, device=x.device)  # [B,H]
    j = torch.arange(W, device=x.device)
    cols = ox[:, None] + torch.where(flip[:, None], W - 1 - j, j)  # [B,W]
    idx = (rows[:, :, None] * Wp + cols[:, None, :]).view(B, 1, H * W)  # [B,1,H*W] flat index into xp
    out = xp.flatten(2).gather(2, idx.expand(B, C, H * W))  # [B,C,H*W]
    return out.view(B, C, H, W)


def cutout(x: torch.Tensor, gen: torch.Generator, max_frac: float = 0.5, fill: Sequence[int] = CUTOUT_FILL) -> torch.Tensor:
    """Paint one box per sample, as the reference Cutout does with PIL (SoLar code: utils/randaugment.py).

    side s ~ U[0, max_frac)·W (s = 0: no box); centre c ~ U(1, W] (the reference calls
    ``np.random.uniform(w)``, i.e. low=w, high=1); corner x0 = int(max(0, c - s/2)),
    x1 = min(W, x0 + s); PIL's ``rectangle`` paints columns x0..floor(x1) inclusive, clipped.

    :param x: uint8 [B, C, H, W] with C == len(fill).
    :returns: uint8 [B, C, H, W].
    """
    B, C, H, W = x.shape
    u = [_draw(gen, x.device, torch.rand, B).double() for _ in range(3)]  # float64 like the reference
    side = u[0] * (max_frac * W)  # [B], pixels
    cx, cy = W - (W - 1) * u[1], H - (H - 1) * u[2]  # [B], in (1, W] and (1, H]
    x0 = (cx - side / 2).clamp(min=0).floor()
    y0 = (cy - side / 2).clamp(min=0).floor()
    x1 = (x0 + side).clamp(max=W).floor()  # last painted column (inclusive)
    y1 = (y0 + side).clamp(max=H).floor()
    xs = torch.arange(W, device=x.device)
    ys = torch.arange(H, device=x.device)
    in_x = (xs >= x0[:, None]) & (xs <= x1[:, None])  # [B,W]
    in_y = (ys >= y0[:, None]) & (ys <= y1[:, None])  # [B,H]
    box = (in_y[:, :, None] & in_x[:, None, :] & (side > 0)[:, None, None])[:, None]  # [B,1,H,W]
    colour = torch.stack([torch.full((), c, dtype=x.dtype, device=x.device) for c in fill]).view(1, C, 1, 1)  # no host copy
    return torch.where(box, colour, x)


@functools.lru_cache(maxsize=None)
def _midpoints(lo: float, hi: float, n: int) -> tuple[float, ...]:
    """The ``n`` bin midpoints of [lo, hi]; a tuple, since torchvision only indexes it (cached: hot path)."""
    return tuple(lo + (b + 0.5) * (hi - lo) / n for b in range(n))


def _uniform_bins(lo: float, hi: float) -> Callable[[int, int, int], tuple[float, ...]]:
    """A magnitude table for ``_AUGMENTATION_SPACE``: ``(num_bins, height, width) -> midpoints``."""
    return lambda n, h, w: _midpoints(lo, hi, n)


#: torchvision's RandAugment ops with the reference RandomAugment's magnitude ranges, unsigned: torchvision applies
#: enhance ops with factor ``1 + magnitude``, so factor v in [0.05, 0.95] is magnitude in [-0.95, -0.05]; Solarize
#: uses threshold ``255 · magnitude`` on PIL images
REFERENCE_SPACE = {
    "Identity": (lambda n, h, w: None, False),
    "ShearX": (_uniform_bins(-0.3, 0.3), False),
    "ShearY": (_uniform_bins(-0.3, 0.3), False),
    "TranslateX": (lambda n, h, w: _midpoints(-0.3 * w, 0.3 * w, n), False),
    "TranslateY": (lambda n, h, w: _midpoints(-0.3 * h, 0.3 * h, n), False),
    "Rotate": (_uniform_bins(-30.0, 30.0), False),
    "Brightness": (_uniform_bins(-0.95, -0.05), False),
    "Color": (_uniform_bins(-0.95, -0.05), False),
    "Contrast": (_uniform_bins(-0.95, -0.05), False),
    "Sharpness": (_uniform_bins(-0.95, -0.05), False),
    "Posterize": (_uniform_bins(4.0, 8.0), False),  # int(v): 4..7 bits
    "Solarize": (_uniform_bins(0.0, 256.0 / 255.0), False),  # threshold in [0, 256]
    "AutoContrast": (lambda n, h, w: None, False),
    "Equalize": (lambda n, h, w: None, False),
}
RANGES = ("reference", "torchvision")


@functools.cache
def _randaug(ranges: str) -> list[v2.RandAugment]:
    """One single-op RandAugment per magnitude bin, so each op of each sample gets its own magnitude; built on first
    use (torchvision's import takes seconds, which a run on tabular data, or ``pllzoo report``, need not wait)."""
    from torchvision.transforms import v2

    kind = v2.RandAugment if ranges == "torchvision" else type(
        "ReferenceRandAugment", (v2.RandAugment,), {"_AUGMENTATION_SPACE": REFERENCE_SPACE})
    return [kind(num_ops=1, magnitude=b, num_magnitude_bins=NUM_BINS) for b in range(NUM_BINS)]


def _simclr(size: tuple[int, int]) -> v2.Compose:
    """PiCO's SimCLR transform with its crop resized to ``size`` (PiCO: 32, CIFAR's)."""
    from torchvision.transforms import v2

    return v2.Compose([
        v2.RandomResizedCrop(size, scale=(0.2, 1.0), antialias=True),
        v2.RandomHorizontalFlip(),
        v2.RandomApply([v2.ColorJitter(0.4, 0.4, 0.4, 0.1)], p=0.8),
        v2.RandomGrayscale(p=0.2),
    ])


def _per_sample_pil(
    x: torch.Tensor, gen: torch.Generator, apply: Callable[[int, Image.Image], Image.Image]
) -> torch.Tensor:
    """Run ``apply(i, pil_image)`` on every sample under a global RNG seeded from ``gen``.

    :param x: uint8 [B, 3, H, W]; the output is uint8 [B, 3, H', W'] (H', W' set by ``apply``).
    """
    if x.dim() != 4 or x.shape[1] != 3 or x.dtype != torch.uint8:
        raise PLLZooError(f"expected uint8 RGB images [B, 3, H, W], got {x.dtype} {tuple(x.shape)}")
    if x.shape[0] == 0:
        return x.clone()
    seed = int(torch.randint(2**62, (1,), generator=gen, device=gen.device))
    hwc = np.ascontiguousarray(x.cpu().numpy().transpose(0, 2, 3, 1))  # [B,H,W,3]
    with _GLOBAL_RNG_LOCK, torch.random.fork_rng(devices=[]):
        torch.default_generator.manual_seed(seed)  # CPU only; CUDA generators untouched
        outs = [np.asarray(apply(i, Image.fromarray(hwc[i]))) for i in range(hwc.shape[0])]
    out = np.ascontiguousarray(np.stack(outs).transpose(0, 3, 1, 2))  # [B,3,H',W']
    return torch.from_numpy(out).to(x.device)


def randaugment(
    x: torch.Tensor, gen: torch.Generator, num_ops: int = 3, ranges: Literal["reference", "torchvision"] = "reference"
) -> torch.Tensor:
    """Apply ``num_ops`` torchvision RandAugment ops per sample, each with its own random magnitude bin.

    :param x: uint8 [B, 3, H, W].
    :returns: uint8 [B, 3, H, W].
    """
    if ranges not in RANGES:
        raise PLLZooError(f"unknown RandAugment ranges {ranges!r}; valid: {', '.join(RANGES)}")
    table = _randaug(ranges)
    bins = torch.randint(NUM_BINS, (x.shape[0], num_ops), generator=gen, device=gen.device).tolist()  # [B][ops]

    def apply(i: int, img: Image.Image) -> Image.Image:
        for b in bins[i]:
            img = table[b](img)
        return img

    return _per_sample_pil(x, gen, apply)


@pooled
def strong(x: torch.Tensor, gen: torch.Generator, ranges: Literal["reference", "torchvision"] = "reference") -> torch.Tensor:
    """SoLar's strong view: RandAugment (3 ops) → Cutout → weak crop + flip.  uint8 [B,3,H,W] in and out."""
    return weak(cutout(randaugment(x, gen, 3, ranges), gen), gen)


@pooled
def pico_strong(x: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
    """PiCO's strong (key) view: RandomResizedCrop(32, (0.2, 1)) → flip → RandAugment (3 ops) → Cutout.

    PiCO's ``strong_transform`` (its RandomAugment ends with the Cutout); SoLar's strong view crops by a
    4-pixel shift instead, after the ops.  The crop is resized to the input's own size (32 on CIFAR), as
    the key encoder reads what the query encoder reads.  uint8 [B, 3, H, W] in and out.
    """
    from torchvision.transforms import v2

    crop_flip = v2.Compose([v2.RandomResizedCrop(tuple(x.shape[2:]), scale=(0.2, 1.0), antialias=True),
                            v2.RandomHorizontalFlip()])
    return cutout(randaugment(_per_sample_pil(x, gen, lambda i, img: crop_flip(img)), gen, 3), gen)


@pooled
def simaugment(x: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
    """PiCO's query view: RandomResizedCrop(32, (0.2, 1)) → flip → ColorJitter(0.4, 0.4, 0.4, 0.1) p=0.8 → Grayscale p=0.2.

    The crop is resized to the input's own size (32 on CIFAR; an outside review found other image sets trained on
    32×32 crops and evaluated at their own size).

    :param x: uint8 [B, 3, H, W].
    :returns: uint8 [B, 3, H, W].
    """
    transform = _simclr(tuple(x.shape[2:]))
    return _per_sample_pil(x, gen, lambda i, img: transform(img))


#: the built-in views, registered by :mod:`pllzoo.builtin` when the registry is built; plugins add
#: theirs through the ``pllzoo_register_views`` hook
VIEWS: dict[str, View] = {"none": identity, "weak": weak, "strong": strong, "simaugment": simaugment,
                          "pico-strong": pico_strong}


def make_view(name: str, where: str = "", registry: Registry | None = None) -> View:
    """Return the view called ``name``, held to the contract (:func:`checked_view`); an unknown name raises
    :class:`UnknownNameError` listing the valid ones.

    :param where: what named it (e.g. ``train.strong_view``), put before the message.
    :param registry: where ``name`` is looked up; None: the process-wide registry.
    """
    return checked_view(*registered_view(name, where, registry))


def registered_view(name: str, where: str = "", registry: Registry | None = None) -> tuple[View, str]:
    """The view called ``name`` as its plugin registered it, and the words naming it in messages
    (``view 'strong' (plugin pllzoo)``); arguments as :func:`make_view`'s."""
    if registry is None:
        from pllzoo.registry import get_registry  # the registry imports the plugins, which import this module

        registry = get_registry()
    return registry.view(name, where), f"view {name!r} (plugin {registry.views[name][1]})"


def checked_view(view: View, who: str) -> View:
    """``view`` holding to the contract (``pllzoo_register_views``), or one line naming ``who``: an exception
    inside it, or an answer other than uint8 images of its input's shape on its device (a float view would be
    divided by 255 again and train at chance; another size would train on other images than the test's).
    Metadata only: no device value is read."""
    def checked(x: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
        try:
            out = view(x, gen)
        except PLLZooError as exc:  # the view's own one line, after its name (a review: it named no view)
            raise PLLZooError(f"{who}: {exc}") from exc
        except Exception as exc:  # a plugin's view: one line naming it, the cause chained
            from pllzoo.plugins import one_line

            raise PLLZooError(f"{who} failed: {one_line(exc)}") from exc
        if not isinstance(out, torch.Tensor) or out.dtype != torch.uint8 or out.shape != x.shape \
                or out.device != x.device:
            got = (f"{out.dtype} {list(out.shape)} on {out.device}" if isinstance(out, torch.Tensor)
                   else type(out).__name__)
            raise PLLZooError(f"{who} returned {got} for torch.uint8 {list(x.shape)} on {x.device}; a view returns "
                              "uint8 images of its input's shape on its device")
        return out

    return checked


# the batched tensor views use weak and cutout above; the module adds "strong-batched", "simaugment-batched" and
# "pico-strong-batched" to VIEWS itself, so importing either module first works
import pllzoo.augment_batched  # noqa: E402,F401
