#!/usr/bin/env bash
# Tables and prior figures of README.md from the result folders (pllzoo report / plot; no training).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
for dir in "$here"/results-phi*; do
  [ -d "$dir/runs" ] || continue
  pllzoo report "$dir" --methods solar,proden,cc --md "$dir/table.md" --csv "$dir/table.csv"
  pllzoo plot "$dir" --methods solar,proden,cc --out "$dir/figure1.png"
done
