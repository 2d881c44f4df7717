"""Total-variation distance to the true training prior of two priors read off the candidate sets alone, before
any training: Cand-MLE (``pllzoo_solar.prior.candidate_mle``) and the paper's Cand-Est (normalised column counts),
for this study's CIFAR-10-LT sets (γ = 100, exp), φ = 0.5 and 0.3, seeds 1 and 2.

    OMP_NUM_THREADS=1 python benchmarks/cifar10lt-cpu/prior_tv.py --data-dir ../shared/data \
        > benchmarks/cifar10lt-cpu/prior_tv.json
"""

from __future__ import annotations

import argparse
import json

import torch

from pllzoo.data.base import DataOptions
from pllzoo.registry import get_registry
from pllzoo_solar.prior import candidate_mle


def tv(p: torch.Tensor, q: torch.Tensor) -> float:
    return round(0.5 * (p.double() - q.double()).abs().sum().item(), 4)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", required=True)
    args = parser.parse_args()
    spec = get_registry().datasets["cifar10lt"][0]
    rows = []
    for phi in (0.5, 0.3):
        for seed in (1, 2):
            data = spec.load(DataOptions(seed=seed, data_dir=args.data_dir, phi=phi, imb=100, imb_type="exp",
                                         download=False))
            cand = data.candidates.float()
            truth = torch.bincount(data.y_train, minlength=cand.shape[1]).double()
            truth /= truth.sum()
            rows.append({"phi": phi, "seed": seed, "rows": cand.shape[0],
                         "cand_mle_tv": tv(candidate_mle(cand), truth), "cand_est_tv": tv(cand.sum(0) / cand.sum(),
                                                                                          truth)})
    print(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
