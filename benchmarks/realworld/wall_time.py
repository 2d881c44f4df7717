"""Minutes of training epochs (the sum of ``wall_s`` over every epoch of every run) of the runs archived under
``results/``, per set and per method, from the records alone (no training).  Elapsed times are not in the
records (runs ran side by side, one process or two), so README.md gives them as measured when the runs ran.

    python benchmarks/realworld/wall_time.py > benchmarks/realworld/wall_time.json
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

from pllzoo import archive

HERE = Path(__file__).resolve().parent


def main() -> None:
    minutes: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    runs: dict[str, int] = defaultdict(int)
    cpus: dict[str, set[str]] = defaultdict(set)
    for folder in sorted((HERE / "results").iterdir()):
        dataset = folder.name.rpartition("-")[0]
        for run in archive.read(folder).values():
            if not run.done:
                continue
            method = run.config["method"]
            minutes[dataset][method] += sum(r.get("wall_s") or 0.0 for r in run.records) / 60
            runs[dataset] += 1
            cpus[dataset].add(f"{(run.env or {}).get('cpu') or 'not recorded'} "
                              f"{(run.env or {}).get('cpu_capability') or ''}".strip())
    out = {d: {"runs": runs[d], "train_min": round(sum(m.values()), 1),
               "train_min_by_method": {k: round(v, 1) for k, v in sorted(m.items())}, "cpus": sorted(cpus[d])}
           for d, m in sorted(minutes.items())}
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
