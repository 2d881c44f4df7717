"""Time SoLar's class-wise small-loss selection: vectorised vs a per-class loop, K = 10 vs 397.

    python benchmarks/selection.py [--out benchmarks/selection.json]

The vectorised form (``pllzoo_solar.selection``) sorts once by (class, loss) and compares
within-class ranks with a quota tensor; the loop form is the released code's shape (one
``nonzero`` + sort per class).  Both give the same mask; the script checks that.
"""

from __future__ import annotations

import argparse
import json
import math
import time

import torch

from pllzoo_solar.selection import classwise_quota, small_loss_mask


def loop_selection(pseudo, loss, prior, rho, batch):
    mask = torch.zeros_like(pseudo, dtype=torch.bool)
    for j in range(prior.numel()):
        members = (pseudo == j).nonzero().flatten()
        if members.numel() == 0:
            continue
        k = max(min(math.ceil(batch * float(prior[j]) * rho), members.numel()), 1)
        order = torch.sort(loss[members], stable=True).indices
        mask[members[order[:k]]] = True
    return mask


def timeit(fn, repeats=200):
    fn()
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return sorted(times)[len(times) // 2] * 1e6


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    torch.manual_seed(0)
    rows = []
    for k in (10, 100, 397):
        b = 256
        prior = torch.softmax(torch.randn(k), 0)
        pseudo = torch.multinomial(prior, b, replacement=True)
        loss = torch.rand(b)
        vec = lambda: small_loss_mask(pseudo, loss, classwise_quota(pseudo, prior, 0.5, b))  # noqa: E731
        loop = lambda: loop_selection(pseudo, loss, prior, 0.5, b)  # noqa: E731
        assert torch.equal(vec(), loop())
        rows.append({"K": k, "B": b, "vectorised_us": round(timeit(vec), 1), "loop_us": round(timeit(loop), 1)})
    print(f"{'K':>5} {'B':>5} {'vectorised µs':>14} {'per-class loop µs':>18}")
    for r in rows:
        print(f"{r['K']:>5} {r['B']:>5} {r['vectorised_us']:>14} {r['loop_us']:>18}")
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"rows": rows, "torch": torch.__version__, "threads": torch.get_num_threads()}, f, indent=2)


if __name__ == "__main__":
    main()
