#!/usr/bin/env bash
# The table of README.md from the recorded runs (pllzoo report on results/runs.jsonl.xz; no training): the eight
# methods on BirdSong, seeds 1 and 2, with each run's own shot thresholds.
# TABLES_OUT (default: this folder) is where the tables go.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
out="${TABLES_OUT:-$here}"
pllzoo report "$here/results" --md "$out/table.md" --csv "$out/table.csv" > /dev/null
