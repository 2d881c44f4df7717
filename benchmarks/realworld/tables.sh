#!/usr/bin/env bash
# The tables of README.md, from whatever result folders exist (pllzoo report; no training).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
methods=solar,proden,cc,lws,mse,exp,valen,pico
for split in uniform balanced; do
  dirs=()
  for dataset in lost birdsong msrcv2 fgnet italian; do
    [ -d "$here/results/$dataset-$split/runs" ] && dirs+=("$here/results/$dataset-$split")
  done
  [ ${#dirs[@]} -eq 0 ] && continue
  pllzoo report "${dirs[@]}" --wide --methods "$methods" --paper "$here/paper.csv" \
    --title "Real-world PLL, $split test set: All accuracy (%)" --md "$here/table-$split.md" --csv "$here/table-$split.csv"
  pllzoo report "${dirs[@]}" --methods "$methods" --md "$here/shots-$split.md" > /dev/null
done
