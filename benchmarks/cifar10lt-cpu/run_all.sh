#!/usr/bin/env bash
# Issue 5's CPU tier: solar, solar-cand-mle, proden and cc, and issue 14's corr, corr-records and htc, at
# phi = 0.5 and phi = 0.3 (gamma = 100), the
# schedule of run.sh (20 pre-estimation + 40 epochs, cosine, small CNN), seeds SEEDS (default 1,2), the
# two phi side by side (one core each); then the tables and the figure, and SoLar-LA (la.sh).
set -euo pipefail
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}"  # one core per run: the recorded numbers used 1 thread
here="$(cd "$(dirname "$0")" && pwd)"
for phi in 0.5 0.3; do
  SEEDS="${SEEDS:-1,2}" PHI="$phi" METHODS=solar,solar-cand-mle,proden,cc,corr,corr-records,htc OUT="results-phi$phi" "$here/run.sh" --resume &
done
wait
"$here/tables.sh"
"$here/la.sh"
