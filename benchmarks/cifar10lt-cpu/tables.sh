#!/usr/bin/env bash
# Tables and prior figures of README.md from the result folders (pllzoo report / plot; no training).
# TABLES_OUT (default: each results folder) is where the tables go; figures only without it.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
main=solar,solar-cand-mle,proden,cc
lt=corr,corr-records,htc  # the LT-PLL methods after SoLar (issue 14)
for spec in "results-phi0.5:$main,$lt" "results-phi0.3:$main,$lt" "results-phi0.5-est100:solar"; do
  name="${spec%%:*}" listed="${spec#*:}"
  dir="$here/$name"
  # nothing recorded yet: no finished run folder and no archive (pllzoo archive)
  if ! compgen -G "$dir/runs/*/done" > /dev/null && [ ! -f "$dir/runs.jsonl.xz" ]; then continue; fi
  out="${TABLES_OUT:-$dir}"
  [ -n "${TABLES_OUT:-}" ] && out="$TABLES_OUT/$name" && mkdir -p "$out"
  pllzoo report "$dir" --methods "$listed" --missing-ok --md "$out/table.md" --csv "$out/table.csv" > /dev/null
  if [ -z "${TABLES_OUT:-}" ] && [ "$listed" = "$main,$lt" ]; then
    pllzoo plot "$dir" --methods "$main" --out "$dir/figure1.png" > /dev/null
  fi
done
