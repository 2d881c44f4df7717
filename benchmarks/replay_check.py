"""Do recorded runs still reproduce?  Replay archived runs with today's code and compare their logs.

Each RUN is ``STUDY_RESULTS_DIR:RUN_ID_PREFIX`` (a folder holding ``runs.jsonl.xz``).  The archived run is
unpacked into a run folder (config.json, env.json, log.jsonl, done), trained again with
``pllzoo bench --from-run`` at its recorded torch thread count, and its log compared with the record, every
epoch, wall times left out.  One JSON line per run goes to ``--out``:

    OMP_NUM_THREADS=1 python benchmarks/replay_check.py --data-dir ../shared/data --out benchmarks/replay_check.jsonl \
        benchmarks/realworld/results/lost-balanced:proden__lost__s1 ...

On CPU a run is bit-deterministic given its seed, thread count and kind of CPU (README, "Threads"); a record
made on another CPU may differ in the last bits, which ``cpu_recorded`` (absent in older records) tells.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from pllzoo import archive


def unpack(results: Path, prefix: str, where: Path) -> tuple[archive.ArchivedRun, Path]:
    """The archived run whose id starts with ``prefix``, written out as a run folder under ``where``."""
    runs = archive.read(results)
    found = sorted(k for k in runs if k.startswith(prefix))
    if len(found) != 1:
        raise SystemExit(f"{results}: {len(found)} runs start with {prefix!r}")
    run = runs[found[0]]
    folder = where / "runs" / run.run
    folder.mkdir(parents=True)
    (folder / "config.json").write_text(json.dumps(run.config, indent=1, sort_keys=True))
    (folder / "env.json").write_text(json.dumps(run.env, indent=1, sort_keys=True))
    (folder / "log.jsonl").write_text("".join(json.dumps(r) + "\n" for r in run.records))
    (folder / "done").write_text("ok\n")
    return run, folder


def _numbers(record: dict) -> dict:
    return {k: v for k, v in record.items() if not k.endswith("_s")}


def check(spec: str, data_dir: str, scratch: Path) -> dict:
    results, _, prefix = spec.rpartition(":")
    run, folder = unpack(Path(results), prefix, scratch / "recorded")
    threads = int(run.env.get("torch_threads") or 1)
    out = scratch / "now"
    cmd = [sys.executable, "-m", "pllzoo", "bench", "--from-run", str(folder), "--out", str(out),
           "--data-dir", data_dir, "--threads", str(threads), "--overwrite"]
    start = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, "OMP_NUM_THREADS": str(threads)})
    wall = time.perf_counter() - start
    if done.returncode:
        return {"run": run.run, "study": results, "error": done.stderr.strip().splitlines()[-3:]}
    (again,) = [p for p in (out / "runs").iterdir() if p.is_dir()]  # one run replayed (its id, run_now below)
    log = [json.loads(line) for line in (again / "log.jsonl").read_text().splitlines() if line.strip()]
    env = json.loads((again / "env.json").read_text())
    pairs = list(zip(run.records, log))  # what the record holds; keys today's code logs beyond it are listed apart
    differ = [i for i, (a, b) in enumerate(pairs) if _numbers(a) != {k: b.get(k) for k in _numbers(a)}]
    keys = sorted({k for a, b in pairs for k in _numbers(a) if a.get(k) != b.get(k)})
    added = sorted(set().union(*(set(b) - set(a) for a, b in pairs)))
    last_a, last_b = run.records[-1], log[-1]
    accuracies = ("acc_all", "acc_many", "acc_medium", "acc_few")
    return {
        "study": results, "run": run.run, "run_now": again.name, "threads": threads, "epochs": len(log),
        "cpu_recorded": run.env.get("cpu"), "cpu_now": env.get("cpu"),
        "log_identical": len(run.records) == len(log) and not differ, "keys_added_since": added,
        "epochs_recorded": len(run.records), "epochs_differing": len(differ),
        "first_differing_epoch": differ[0] + 1 if differ else None, "keys_differing": keys,
        "final_accuracies_identical": all(last_a.get(k) == last_b.get(k) for k in accuracies),
        "final_recorded": {k: last_a.get(k) for k in (*accuracies, "loss")},
        "final_now": {k: last_b.get(k) for k in (*accuracies, "loss")},
        "wall_s": round(wall, 1),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("runs", nargs="+", metavar="STUDY_RESULTS_DIR:RUN_ID_PREFIX")
    ap.add_argument("--data-dir", required=True)
    ap.add_argument("--out", type=Path, required=True, help="JSON lines, one per run (appended)")
    args = ap.parse_args()
    commit = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    for spec in args.runs:
        with tempfile.TemporaryDirectory() as scratch:
            try:
                line = check(spec, args.data_dir, Path(scratch))
            except Exception as exc:  # noqa: BLE001 - one run's failure is its line, the others still run
                line = {"run": spec, "error": [f"{type(exc).__name__}: {exc}"]}
        line["code"] = commit  # the commit whose code replayed it
        print(json.dumps(line), flush=True)
        with args.out.open("a") as f:
            f.write(json.dumps(line, sort_keys=True) + "\n")


if __name__ == "__main__":
    main()
