#!/usr/bin/env bash
# The large-K speed study: SoLar (solar-no-preest) against PRODEN, in one bench per K, on generated sparse
# long-tailed sets (make_data.py), one torch thread, two epochs each; the table compares the last epochs.
#   bash benchmarks/large-k/run.sh                       # this checkout → results/, table.md
#   BEFORE=../before bash benchmarks/large-k/run.sh      # also another checkout (e.g. git worktree add ../before
#                                                        # e88d622) → results-before/, a column for it
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
data="${DATA:-$here/data}"  # generated, git-ignored (the K = 1000 set is 400 MB)
export OMP_NUM_THREADS=1
python "$here/make_data.py" --out "$data"
bench() {  # $1: results folder; the python to run pllzoo with follows from PYTHONPATH
  for k in 10 200 1000; do
    python -m pllzoo bench --methods proden,solar-no-preest --dataset "$data/k$k.mat" --epochs 2 --batch-size 256 \
      --threads 1 --out "$1/k$k"
    python -m pllzoo archive --prune "$1/k$k" > /dev/null
  done
}
bench "$here/results"
tables=("$here/results")
if [ -n "${BEFORE:-}" ]; then
  before="$(cd "$BEFORE" && pwd)"
  PYTHONPATH="$before:$before/plugins/solar:$before/plugins/baselines:$before/plugins/ltpll" bench "$here/results-before"
  tables+=("$here/results-before")
fi
python "$here/table.py" "${tables[@]}" > "$here/table.md"
cat "$here/table.md"
