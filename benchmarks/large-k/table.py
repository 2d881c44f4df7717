"""The large-K study's table (``run.sh``): per K, the wall time of the last training epoch of SoLar
(``solar-no-preest``) and of PRODEN in the same bench, and their ratio; Markdown on stdout.

    python benchmarks/large-k/table.py benchmarks/large-k/results [benchmarks/large-k/results-before]
    python benchmarks/large-k/table.py benchmarks/large-k/mle.json     # mle_time.py's table

Each folder holds ``k<K>/`` results folders (run folders, or their ``runs.jsonl.xz`` archive).  With a second
folder (the same bench at an earlier commit), a column for its ratio too.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from pllzoo import archive
from pllzoo.results import read_jsonl


def last_epoch_walls(out: Path) -> dict[str, float]:
    """Method → ``wall_s`` of the final stage's last epoch, for each finished run under ``out``."""
    runs = {name: records for name, records in archive.finished(out)[0].items()}
    for log in sorted(out.glob("runs/*/log.jsonl")):
        if (log.parent / "done").exists():
            runs[log.parent.name] = read_jsonl(log)
    return {records[-1]["method"]: float(records[-1]["wall_s"]) for records in runs.values()}


def mle_table(path: Path) -> None:
    """``mle_time.py``'s timings as a Markdown table."""
    cols = ["K", "patterns", "per iteration now", "before", "merge now", "before"]
    print("| " + " | ".join(cols) + " |\n|" + "---|" * len(cols))
    for r in json.loads(path.read_text())["results"]:
        now, then = r["now"], r["before"]
        print(f"| {r['K']} | {r['patterns']:,} | {now['s_per_iter'] * 1e3:.2f} ms | {then['s_per_iter'] * 1e3:.2f} ms | "
              f"{now['s_setup'] * 1e3:.0f} ms | {then['s_setup'] * 1e3:.0f} ms |")


def main() -> None:
    if sys.argv[1].endswith(".json"):
        mle_table(Path(sys.argv[1]))
        return
    folders = [Path(a) for a in sys.argv[1:]]
    cols = ["K", "PRODEN s/epoch", "SoLar s/epoch", "SoLar / PRODEN"] + (["before: SoLar / PRODEN"] if len(folders) > 1
                                                                       else [])
    print("| " + " | ".join(cols) + " |\n|" + "---|" * len(cols))
    for sub in sorted(folders[0].glob("k*"), key=lambda p: int(p.name[1:])):
        walls = [last_epoch_walls(f / sub.name) for f in folders]
        now = walls[0]
        row = [sub.name[1:], f"{now['proden']:.1f}", f"{now['solar-no-preest']:.1f}",
               f"{now['solar-no-preest'] / now['proden']:.1f}×"]
        if len(walls) > 1:
            then = walls[1]
            row.append(f"{then['solar-no-preest'] / then['proden']:.1f}×" if {"proden", "solar-no-preest"} <= set(then)
                       else "–")
        print("| " + " | ".join(row) + " |")


if __name__ == "__main__":
    main()
