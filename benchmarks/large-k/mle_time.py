"""Seconds per EM iteration of SoLar's Cand-MLE prior (``pllzoo_solar.prior.candidate_mle``) on the large-K
sets of ``make_data.py``, one torch thread; with ``--before CHECKOUT``, the same at that checkout's
``prior.py``, loaded beside this one and timed alternately in the same process.

    python benchmarks/large-k/mle_time.py --before ../before > benchmarks/large-k/mle.json
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
import time
from pathlib import Path

import scipy.io
import torch

from pllzoo_solar.prior import candidate_mle


def _best(fn, cands: torch.Tensor, iters: int, repeats: int = 5) -> float:
    best = float("inf")
    for _ in range(repeats):
        t = time.perf_counter()
        fn(cands, tol=0.0, max_iter=iters)  # tol=0: no early stop
        best = min(best, time.perf_counter() - t)
    return best


def timing(fn, cands: torch.Tensor, more: int) -> dict[str, float]:
    """Seconds per EM iteration (from calls of 1 and 1 + ``more`` iterations, the best of 5 each) and of the rest
    of a call (the merge of identical rows)."""
    one, many = _best(fn, cands, 1), _best(fn, cands, 1 + more)
    per = (many - one) / more
    return {"s_per_iter": per, "s_setup": one - per}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=Path(__file__).parent / "data")
    ap.add_argument("--classes", default="10,200,1000")
    ap.add_argument("--before", type=Path, default=None, help="another checkout of pllzoo")
    args = ap.parse_args()
    torch.set_num_threads(1)
    before = None
    if args.before is not None:
        spec = importlib.util.spec_from_file_location(
            "prior_before", args.before / "plugins" / "solar" / "pllzoo_solar" / "prior.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules["prior_before"] = module  # dataclasses look their module up
        spec.loader.exec_module(module)
        before = module.candidate_mle
    rows = []
    for k in (int(c) for c in args.classes.split(",")):
        cands = torch.from_numpy(scipy.io.loadmat(args.data / f"k{k}.mat")["partial_target"].T > 0)
        row = {"K": k, "rows": cands.shape[0], "patterns": int(torch.unique(cands.to(torch.uint8), dim=0).shape[0]),
               "now": timing(candidate_mle, cands, 100)}
        if before is not None:
            row["before"] = timing(before, cands, 100 if k <= 10 else 5)
            row["per_iter_speed_up"] = row["before"]["s_per_iter"] / row["now"]["s_per_iter"]
        rows.append(row)
    print(json.dumps({"torch": torch.__version__, "threads": 1, "results": rows}, indent=2))


if __name__ == "__main__":
    main()
