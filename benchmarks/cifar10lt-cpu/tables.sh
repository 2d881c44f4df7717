#!/usr/bin/env bash
# Tables and prior figures of README.md from the result folders (pllzoo report / plot; no training).
# TABLES_OUT (default: each results folder) is where the tables go; figures only without it.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
for dir in "$here"/results-phi*; do
  if ! compgen -G "$dir/runs/*/done" > /dev/null; then continue; fi  # nothing finished yet
  out="${TABLES_OUT:-$dir}"
  name="$(basename "$dir")"
  [ -n "${TABLES_OUT:-}" ] && out="$TABLES_OUT/$name" && mkdir -p "$out"
  pllzoo report "$dir" --methods solar,solar-cand-mle,proden,cc --md "$out/table.md" --csv "$out/table.csv" > /dev/null
  if [ -z "${TABLES_OUT:-}" ]; then pllzoo plot "$dir" --methods solar,solar-cand-mle,proden,cc --out "$dir/figure1.png" > /dev/null; fi
done
