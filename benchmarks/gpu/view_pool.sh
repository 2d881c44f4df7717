#!/usr/bin/env bash
# Seconds per epoch of SoLar (ResNet-18, CIFAR-10-LT phi 0.5 gamma 100, bf16) with the strong view in
# the training loop (--view-workers 0) and computed ahead by worker processes (pllzoo.prefetch).
# Usage (repository root, pllzoo installed, a GPU): OUT=dir DATA_DIR=... WORKERS="0 4 12" benchmarks/gpu/view_pool.sh
set -uo pipefail
out="${OUT:?set OUT}"; data="${DATA_DIR:-../shared/data}"
work="${WORK:-benchmarks/gpu/results-view-pool}"; mkdir -p "$out" "$work"
export PYTHONUNBUFFERED=1
for w in ${WORKERS:-0 4 12}; do
  timeout 150 python3 -m pllzoo bench --methods solar --dataset cifar10lt --data-dir "$data" --phi 0.5 --imb 100 \
    --seeds 1 --epochs 4 --device cuda --view-workers "$w" --hp train.model=resnet18 \
    --hp solar:estimator.est_epochs=0 --out "$work/workers-$w" > "$work/workers-$w.log" 2>&1
  echo "view-workers $w rc $?" >> "$work/summary.txt"
done
python3 - "$work" >> "$work/summary.txt" <<'PY'
import glob, json, statistics, sys
for log in sorted(glob.glob(f"{sys.argv[1]}/workers-*/runs/*/log.jsonl")):
    recs = [json.loads(line) for line in open(log)]
    walls = [r["wall_s"] for r in recs]
    print(log.split("/")[-4], "s/epoch", [round(w, 2) for w in walls], "median of epochs 2+",
          round(statistics.median(walls[1:]), 2), "acc", recs[-1]["acc_all"])
PY
cat "$work/summary.txt"
tar czf "$out/view_pool.tgz" --exclude=checkpoint.pt "$work"
