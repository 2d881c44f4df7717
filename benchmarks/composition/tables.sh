#!/usr/bin/env bash
# The composition study's tables from its recorded runs (pllzoo report; no training).
#   table.md / .csv      the H100 run (results-h100)
#   table-cpu.md / .csv  the same recipe on this machine's CPU: the CPU tier's folder, seed 1 (the seed every listed
#                        method ran there; ../cifar10lt-cpu/run.sh trains them)
# TABLES_OUT (default: this folder) is where they go.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
out="${TABLES_OUT:-$here}"
mkdir -p "$out"
methods=solar,htc,corr,corr-records,proden,proden-records,cc,cc-records,corr-records+selection=solar.classwise
pllzoo report "$here/results-h100" --methods "$methods" --md "$out/table.md" --csv "$out/table.csv" > /dev/null
pllzoo report "$here/../cifar10lt-cpu/results-phi0.5" --methods "$methods" --seeds 1 \
  --md "$out/table-cpu.md" --csv "$out/table-cpu.csv" > /dev/null
