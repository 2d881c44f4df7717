"""Decode a JPEG-packed image archive (``shared/data`` layout), with an on-disk cache.

The archive is an ``.npz`` with ``jpeg`` (all JPEG files concatenated), ``offsets``
(``N+1``), ``labels`` and ``class_names``.  Decoding 50 000 CIFAR JPEGs with PIL takes a
few seconds, so the decoded ``uint8 [N, H, W, 3]`` array is saved once under
``$PLLZOO_CACHE/jpeg/`` (default ``~/.cache/pllzoo/jpeg/``), keyed by the archive's
sha256 and the Pillow version, written atomically (temp file + ``os.replace``).  A cache
that cannot be written only costs speed.
"""

from __future__ import annotations

import hashlib
import io
import os
import tempfile
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import PIL
from PIL import Image

from pllzoo.data.paths import cache_root
from pllzoo.data.validate import exception_line
from pllzoo.errors import PLLZooError


@dataclass(frozen=True)
class DecodedArchive:
    """Images ``uint8 [N, H, W, 3]``, labels ``int64 [N]`` and the class names of one archive."""

    images: np.ndarray
    labels: np.ndarray
    class_names: list[str]
    cached: bool  # True when the images came from the decode cache


def file_sha256(path: Path) -> str:
    """Return the hex sha256 of a file, read in 1 MiB chunks."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def decode_jpegs(blob: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """Decode ``blob[offsets[i]:offsets[i+1]]`` for every ``i`` with PIL, as RGB ``uint8 [N, H, W, 3]``."""
    data = blob.tobytes()
    n = len(offsets) - 1
    out: np.ndarray | None = None
    for i in range(n):  # one codec call per image; there is no batched PIL decoder
        img = Image.open(io.BytesIO(data[offsets[i]: offsets[i + 1]]), formats=["JPEG"])
        arr = np.asarray(img if img.mode == "RGB" else img.convert("RGB"))
        if out is None:
            out = np.empty((n, *arr.shape), dtype=np.uint8)
        out[i] = arr
    return out if out is not None else np.zeros((0, 32, 32, 3), np.uint8)


def _atomic_save(path: Path, array: np.ndarray) -> None:
    """Write ``array`` as ``.npy`` to a temp file beside ``path`` and rename it into place."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            np.save(f, array)
        os.chmod(tmp, 0o644)  # mkstemp makes it 0600; the cache is not secret
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def cache_path(archive: Path, sha256: str) -> Path:
    """Return where the decoded images of an archive are cached."""
    return cache_root() / "jpeg" / f"{archive.stem}-{sha256[:24]}-pil{PIL.__version__}.npy"


def _check_labels(archive: Path, labels: np.ndarray, k: int) -> None:
    """:raises PLLZooError: one line, for labels that are not one class index in 0..k-1 per image."""
    if labels.ndim != 1:
        raise PLLZooError(f"{archive}: labels of shape {labels.shape}, expected one per image; the archive is damaged")
    bad = np.flatnonzero((labels < 0) | (labels >= k))
    if bad.size:
        raise PLLZooError(f"{archive}: {bad.size} label(s) outside 0..{k - 1}, its {k} classes (first: image "
                          f"{bad[0]}, label {labels[bad[0]]}); the archive is damaged")


def load_jpeg_archive(archive: Path, use_cache: bool = True) -> DecodedArchive:
    """Return the decoded images, labels and class names of a JPEG-packed ``.npz``."""
    try:
        with np.load(archive) as z:
            labels = z["labels"].astype(np.int64)
            class_names = [str(c) for c in z["class_names"]]
            _check_labels(archive, labels, len(class_names))
            cached_file = cache_path(archive, file_sha256(archive)) if use_cache else None
            if cached_file is not None and cached_file.is_file():
                try:
                    images = np.load(cached_file)
                    if images.shape[0] == labels.shape[0] and images.dtype == np.uint8:
                        return DecodedArchive(images, labels, class_names, cached=True)
                except Exception:  # a damaged cache file is simply rebuilt
                    pass
            offsets = z["offsets"]
            if offsets.ndim != 1 or len(offsets) != len(labels) + 1:
                raise PLLZooError(f"{archive}: {max(len(offsets) - 1, 0)} images (offsets) for {len(labels)} labels; "
                                  "the archive is damaged")
            images = decode_jpegs(z["jpeg"], offsets)
    except PLLZooError:
        raise
    except Exception as e:  # not an npz, missing keys, broken JPEG bytes
        raise PLLZooError(f"{archive}: not a readable JPEG-packed archive ({exception_line(e)})") from None
    if cached_file is not None:
        try:
            _atomic_save(cached_file, images)
        except OSError as e:
            warnings.warn(f"could not cache decoded images at {cached_file}: {e}", stacklevel=2)
    return DecodedArchive(images, labels, class_names, cached=False)
