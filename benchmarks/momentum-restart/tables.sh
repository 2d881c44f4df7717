#!/usr/bin/env bash
# The tables of README.md from the result folders (pllzoo report; no training): SoLar on the CIFAR-10-LT CPU tier,
# seeds 1 and 2, with its SGD momentum restarted three times (results-s1, results-s2: run.sh) and uninterrupted on
# the same machine (uninterrupted/: ../cifar10lt-cpu/run.sh, see README.md).
# TABLES_OUT (default: this folder) is where the tables go.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
out="${TABLES_OUT:-$here}"
pllzoo report "$here/results-s1" "$here/results-s2" --methods solar --md "$out/table-restarted.md" \
  --csv "$out/table-restarted.csv" > /dev/null
pllzoo report "$here/uninterrupted" --methods solar --md "$out/table-uninterrupted.md" \
  --csv "$out/table-uninterrupted.csv" > /dev/null
