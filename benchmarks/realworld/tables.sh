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
    dir="$here/results/$dataset-$split"  # with a finished run folder or an archive (pllzoo archive)
    if compgen -G "$dir/runs/*/done" > /dev/null || [ -f "$dir/runs.jsonl.xz" ]; then dirs+=("$dir"); fi
  done
  if [ ${#dirs[@]} -eq 0 ]; then continue; fi
  pllzoo report "${dirs[@]}" --wide --methods "$listed" --missing-ok --paper "$here/paper.csv" \
    --title "Real-world PLL, $split test set: All accuracy (%)" --md "$out/table-$split.md" --csv "$out/table-$split.csv" > /dev/null
  pllzoo report "${dirs[@]}" --methods "$listed" --missing-ok --md "$out/shots-$split.md" > /dev/null
done
