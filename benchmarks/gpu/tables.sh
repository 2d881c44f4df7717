#!/usr/bin/env bash
# Tables and the prior figure of README.md from results/ (pllzoo report / plot; no training).
# TABLES_OUT (default: this folder) is where results/table-* go; the figure only without it.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
res="$here/results"; out="${TABLES_OUT:-$here}/results"; mkdir -p "$out"  # same relative names
pllzoo report "$res/resnet18-solar" "$res/resnet18-proden" "$res/resnet18-cc" --methods solar,proden,cc \
  --md "$out/table-resnet18.md" --csv "$out/table-resnet18.csv" > /dev/null
pllzoo report "$res/cnn-solar-30-30" \
  --md "$out/table-cnn.md" --csv "$out/table-cnn.csv" > /dev/null
if [ -z "${TABLES_OUT:-}" ]; then
  pllzoo plot "$res/resnet18-solar" "$res/resnet18-proden" "$res/resnet18-cc" --methods solar,proden,cc \
    --out "$res/figure1-resnet18.png" > /dev/null
fi
