"""PALM-layout ``.mat`` sets with many classes for the large-K speed study (``run.sh``).

Real PLL sets with hundreds of classes (Soccer Player: 171, Yahoo! News: 219) have few candidates per
example; ``synthetic-lt`` has ten classes.  This writes ``kK.mat`` for each K: pllzoo's synthetic
class-conditional model (:func:`pllzoo.data.synthetic.fixed_generator`) at K classes, an exponential long
tail (γ = 50) over ``--n`` examples, and per example the true label plus ``--extra`` distinct wrong
candidates drawn uniformly (density (1 + extra)/K: sparse, as those sets are).  Seeded; no download.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import scipy.io

from pllzoo.data.longtail import img_num_per_cls
from pllzoo.data.synthetic import fixed_generator


def make(k: int, n: int, extra: int, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.RandomState(seed)
    counts = np.asarray(img_num_per_cls(10**6, k, 50.0, "exp"), dtype=float)  # relative class sizes
    y = rng.choice(k, size=n, p=counts / counts.sum())
    x = fixed_generator(k).sample(y, rng)
    wrong = rng.rand(n, k)
    wrong[np.arange(n), y] = np.inf  # never drawn as a wrong candidate
    cand = np.zeros((n, k))
    cand[np.arange(n)[:, None], np.argsort(wrong, axis=1)[:, :extra]] = 1
    cand[np.arange(n), y] = 1
    return {"data": x.astype(np.float64), "target": np.eye(k)[y].T, "partial_target": cand.T}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--classes", default="10,200,1000")
    ap.add_argument("--n", type=int, default=25000)
    ap.add_argument("--extra", type=int, default=2, help="wrong candidates per example")
    ap.add_argument("--out", type=Path, default=Path(__file__).parent / "data")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    for k in (int(c) for c in args.classes.split(",")):
        scipy.io.savemat(args.out / f"k{k}.mat", make(k, args.n, args.extra))
        print(args.out / f"k{k}.mat")


if __name__ == "__main__":
    main()
