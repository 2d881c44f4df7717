#!/usr/bin/env bash
# The composition study's table from its recorded runs (pllzoo report; no training).
# TABLES_OUT (default: this folder) is where table.md / table.csv go.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
out="${TABLES_OUT:-$here}"
mkdir -p "$out"
pllzoo report "$here/results-h100" \
  --methods solar,htc,corr,corr-records,proden,proden-records,cc,cc-records,corr-records+selection=solar.classwise \
  --md "$out/table.md" --csv "$out/table.csv" > /dev/null
