#!/usr/bin/env bash
# SoLar's Sinkhorn relaxed only where its scalings go non-finite (label_update.relax=nan, RELAX=nan, the default
# here) or where the reference's float32 ones go NaN (RELAX=reference) against pllzoo's default (relax=check: also
# when a feasibility check fails), on the real-world sets
# where the check fires: benchmarks/realworld/run.sh for SoLar alone, with the --hp, into results/ here (the same
# command there, without it, is the `check` side). DATASETS, SPLITS, SEEDS as there (200 epochs; italian 50).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
relax="${RELAX:-nan}"  # nan: results/; reference (the reference's NaN trigger, added after): results-reference/
folder="$here/results"; [ "$relax" = nan ] || folder="$here/results-$relax"
METHODS=solar RESULTS="$folder" TABLES=0 "$here/../realworld/run.sh" --hp label_update.relax="$relax" "$@"
python "$here/compare.py" > "$here/table.md"
