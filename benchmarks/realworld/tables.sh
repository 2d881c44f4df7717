#!/usr/bin/env bash
# The tables of README.md, from whatever result folders exist (pllzoo report; no training).
# TABLES_OUT (default: this folder) is where the Markdown/CSV files go.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
out="${TABLES_OUT:-$here}"
mkdir -p "$out"
listed=solar,proden,cc,lws,mse,exp,valen,pico,corr,corr-records,htc
for split in uniform balanced; do
  dirs=()
  for dataset in lost birdsong msrcv2 fgnet italian; do
    if compgen -G "$here/results/$dataset-$split/runs/*/done" > /dev/null; then dirs+=("$here/results/$dataset-$split"); fi
  done
  if [ ${#dirs[@]} -eq 0 ]; then continue; fi
  methods=""  # the listed methods with a finished run in one of the folders, in the listed order
  for m in ${listed//,/ }; do
    if compgen -G "$here/results/*-$split/runs/${m}__*/done" > /dev/null; then methods="${methods:+$methods,}$m"; fi
  done
  pllzoo report "${dirs[@]}" --wide --methods "$methods" --paper "$here/paper.csv" \
    --title "Real-world PLL, $split test set: All accuracy (%)" --md "$out/table-$split.md" --csv "$out/table-$split.csv" > /dev/null
  pllzoo report "${dirs[@]}" --methods "$methods" --md "$out/shots-$split.md" > /dev/null
done
