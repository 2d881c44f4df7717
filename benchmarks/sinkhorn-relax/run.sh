#!/usr/bin/env bash
# SoLar's Sinkhorn with the reference's relaxed-problem trigger (label_update.relax=nan: only when the scalings go
# non-finite) against pllzoo's default (relax=check: also when a feasibility check fails), on the real-world sets
# where the check fires: benchmarks/realworld/run.sh for SoLar alone, with the --hp, into results/ here (the same
# command there, without it, is the `check` side). DATASETS, SPLITS, SEEDS as there (200 epochs; italian 50).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
METHODS=solar RESULTS="$here/results" TABLES=0 "$here/../realworld/run.sh" --hp label_update.relax=nan "$@"
python "$here/compare.py" > "$here/table.md"
