#!/usr/bin/env bash
# SoLar-LA on the CPU tier: re-score the final models of solar and solar-cand-mle (every seed in
# results-phi*/) with logit adjustment g − ζ·log r, r the run's own final estimated prior, for the
# paper's ζ ∈ {0.5, 1, 2} (Table 6); no training.  Needs the runs' checkpoint.pt, which run_all.sh
# leaves in each run folder (checkpoints are not kept in git).  Writes results-phi*/la-zeta<ζ>.{md,csv}.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
data="${DATA_DIR:-$here/../../../shared/data}"
for dir in "$here"/results-phi0.5 "$here"/results-phi0.3; do
  runs=()
  for run in "$dir"/runs/solar__* "$dir"/runs/solar-cand-mle__*; do
    [ -f "$run/checkpoint.pt" ] && [ -f "$run/done" ] && runs+=("$run")
  done
  [ "${#runs[@]}" -gt 0 ] || continue
  for zeta in 0.5 1 2; do
    pllzoo evaluate "${runs[@]}" --predict solar.la --hp predict.zeta="$zeta" --data-dir "$data" --device cpu \
      --md "$dir/la-zeta$zeta.md" --csv "$dir/la-zeta$zeta.csv" > /dev/null
  done
done
