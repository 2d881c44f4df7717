"""Write a slim copy of the JPEG-packed CIFAR-10 for a device that takes little data along.

    python benchmarks/gpu/slim_cifar.py --data-dir ../shared/data --out .devdata [--seed 1] [--imb 100]

The CIFAR-10-LT training set of one seed and imbalance ratio uses 12,406 of the 50,000 training
images; this keeps those JPEGs byte for byte and replaces the others by one grey 32×32 JPEG, so the
archive shrinks from 15 MB to 4 MB (the lent GPU machine takes at most 64 MB of repository and data).
Labels, order and the test archive are unchanged, so `cifar10lt` built from the copy with the same
seed and ``--imb`` is identical to the one built from the original; the script checks that.  ``slim.json``
beside the archives says which seed and imbalance the copy serves: `cifar10lt` refuses any other drawn from it.
"""

from __future__ import annotations

import argparse
import io
import json
import shutil
from pathlib import Path

import numpy as np
import torch
from PIL import Image

from pllzoo.data.base import DataOptions
from pllzoo.data.cifar import SLIM_MANIFEST, cifar_loader
from pllzoo.data.longtail import img_num_per_cls, longtail_indices


def slim(src: Path, dst: Path, keep: set[int]) -> None:
    """Copy the archive ``src`` to ``dst`` with every image outside ``keep`` replaced by a grey JPEG."""
    z = dict(np.load(src))
    buf = io.BytesIO()
    Image.new("RGB", (32, 32), (128, 128, 128)).save(buf, "JPEG", quality=50)
    grey = np.frombuffer(buf.getvalue(), np.uint8)
    jpeg, offsets = z["jpeg"], z["offsets"]
    parts = [jpeg[offsets[i] : offsets[i + 1]] if i in keep else grey for i in range(len(offsets) - 1)]
    z["jpeg"] = np.concatenate(parts)
    z["offsets"] = np.concatenate([[0], np.cumsum([len(p) for p in parts])]).astype(offsets.dtype)
    np.savez_compressed(dst, **z)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data-dir", type=Path, required=True)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--imb", type=float, default=100.0)
    args = ap.parse_args()
    src, dst = args.data_dir / "cifar10_jpeg", args.out / "cifar10_jpeg"
    dst.mkdir(parents=True, exist_ok=True)
    with np.load(src / "train_jpeg.npz") as z:
        labels = z["labels"].astype(np.int64)
    counts = img_num_per_cls(len(labels) / 10, 10, args.imb, "exp")
    keep = set(longtail_indices(labels, counts, np.random.RandomState(args.seed)).tolist())  # as load_cifar_lt draws it
    slim(src / "train_jpeg.npz", dst / "train_jpeg.npz", keep)
    shutil.copyfile(src / "test_jpeg.npz", dst / "test_jpeg.npz")
    # what the copy serves: cifar10lt refuses another seed or imbalance drawn from it (pllzoo.data.cifar)
    (dst / SLIM_MANIFEST).write_text(json.dumps({"seed": args.seed, "imb": args.imb, "imb_type": "exp",
                                                 "kept": len(keep)}) + "\n")
    load = cifar_loader("cifar10lt")
    a, b = (load(DataOptions(data_dir=d, seed=args.seed, imb=args.imb)) for d in (args.data_dir, args.out))
    assert torch.equal(a.x_train, b.x_train) and torch.equal(a.candidates, b.candidates), "slim copy differs"
    print(f"{dst}: {len(keep)} of {len(labels)} training images kept; cifar10lt seed {args.seed} γ {args.imb:g} identical")


if __name__ == "__main__":
    main()
