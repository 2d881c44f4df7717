#!/usr/bin/env bash
# Issue 3's prior-estimation check at the longest schedule one device call allows: SoLar and PRODEN,
# ResNet-18, CIFAR-10-LT phi 0.5 gamma 100, the CPU-tier recipe otherwise (lr 0.05 cosine, wd 5e-4,
# ramps over 10 epochs), strong views computed by the worker pool (the CUDA default).
# At ~2.5 s per SoLar epoch on an H200 the default 40 + 140 epochs take ~8 min.
# Usage (repository root, pllzoo installed, a GPU): OUT=dir DATA_DIR=... [EST_EPOCHS=40 EPOCHS=140 LIMIT=540] \
#   benchmarks/gpu/prior_tv.sh      -> $OUT/prior_tv.tgz (runs without checkpoints, logs); resumable (--resume)
set -uo pipefail
out="${OUT:?set OUT}"; data="${DATA_DIR:-../shared/data}"; limit="${LIMIT:-540}"
est="${EST_EPOCHS:-40}"; epochs="${EPOCHS:-140}"
work="${WORK:-benchmarks/gpu/results-prior-tv}"; mkdir -p "$out" "$work"
export PYTHONUNBUFFERED=1
common=(--dataset cifar10lt --data-dir "$data" --phi 0.5 --imb 100 --seeds 1 --device cuda --resume --epochs "$epochs"
        --hp train.model=resnet18 --hp train.lr=0.05 --hp train.schedule=cosine --hp train.weight_decay=5e-4)
OMP_NUM_THREADS=2 timeout "$limit" python3 -m pllzoo bench --methods solar "${common[@]}" \
  --hp estimator.est_epochs="$est" --hp selection.warmup_epochs=10 --hp loss.warmup_epochs=10 \
  --out "$work/solar-$est-$epochs" > "$work/solar-$est-$epochs.log" 2>&1 &
OMP_NUM_THREADS=2 timeout "$limit" python3 -m pllzoo bench --methods proden "${common[@]}" \
  --hp loss.cr=false --hp loss.mixup=false --out "$work/proden-$epochs" > "$work/proden-$epochs.log" 2>&1 &
wait
python3 - "$work" <<'PY'
import glob, json, sys
for log in sorted(glob.glob(f"{sys.argv[1]}/*/runs/*/log.jsonl")):
    recs = [json.loads(line) for line in open(log)]
    r = recs[-1]
    print(log.split("/")[-4], len(recs), "epochs; last:", {k: r.get(k) for k in ("acc_all", "acc_few", "prior_tv")})
PY
tar czf "$out/prior_tv.tgz" --exclude=checkpoint.pt "$work"
