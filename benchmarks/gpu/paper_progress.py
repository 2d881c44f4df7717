"""Where a carried paper run stands, from its log (plain or xz): median seconds an epoch over epoch ranges, the
slow first epochs of each process, and the last epoch of each stage.

    python benchmarks/gpu/paper_progress.py benchmarks/gpu/results-speed5/call3_run/log.jsonl.xz \
        --parts pre-estimation:4-100 train:3-104 train:105-222 train:190-222

Each ``--parts`` entry is STAGE:FIRST-LAST (epochs as the records number them, from 1).  The numbers the GPU
README quotes for a part of the run come from this script over the log committed beside them.
"""

from __future__ import annotations

import argparse
import json
import lzma
import statistics
from pathlib import Path


def records(path: Path) -> list[dict]:
    opener = lzma.open if path.suffix == ".xz" else open
    with opener(path, "rt") as f:
        return [json.loads(line) for line in f if line.strip()]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("log", type=Path)
    ap.add_argument("--parts", nargs="*", default=[], metavar="STAGE:FIRST-LAST")
    ap.add_argument("--slow", type=float, default=5.0, help="list epochs slower than this many seconds")
    args = ap.parse_args()
    recs = records(args.log)
    for part in args.parts:
        try:
            stage, span = part.split(":")
            first, last = (int(v) for v in span.split("-"))
        except ValueError:
            ap.error(f"--parts {part!r}: write STAGE:FIRST-LAST, e.g. train:3-104")
        walls = [r["wall_s"] for r in recs if r["stage"] == stage and first <= r["epoch"] <= last]
        median = f"median {statistics.median(walls):.2f} s an epoch" if walls else "none in the log"
        print(f"{stage} {first}-{last}: {len(walls)} epochs, {median}")
    slow = [f"{r['stage']} {r['epoch']}: {r['wall_s']:.1f} s" for r in recs if r["wall_s"] > args.slow]
    print("slower than", args.slow, "s:", ", ".join(slow) or "none")
    for stage in dict.fromkeys(r["stage"] for r in recs):
        r = [r for r in recs if r["stage"] == stage][-1]
        solar = (f", prior TV {r['prior_tv']:.3f}, Sinkhorn iterations {r.get('sinkhorn_iters', float('nan')):.1f} "
                 "a step") if "prior_tv" in r else ""  # SoLar's; PRODEN, CC and PiCO log neither
        print(f"{stage} epoch {r['epoch']}/{r['epochs']}: All {r['acc_all']:.2f}, Many {r['acc_many']:.2f}, "
              f"Medium {r['acc_medium']:.2f}, Few {r['acc_few']:.2f}{solar}")


if __name__ == "__main__":
    main()
