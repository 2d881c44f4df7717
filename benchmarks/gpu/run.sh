#!/usr/bin/env bash
# One GPU session's checks and runs (issues 3 and 5), sized for a lent device's 15-minute budget:
#   1. the CUDA tests (tests/test_cuda.py) and a 2-epoch smoke of all eight methods on real CIFAR-10-LT
#      with ResNet-18 under bf16 autocast;
#   2. benchmarks/step_cost.py on the GPU, first and alone, so that its timings are clean;
#   3. in parallel, the CIFAR-10-LT CPU-tier recipe (phi 0.5, gamma 100, lr 0.05 cosine, wd 5e-4,
#      SoLar ramps 10 epochs) with the paper's ResNet-18 in place of the small CNN, SoLar 20 + 30 epochs,
#      PRODEN and CC 30 epochs, and the small CNN itself with a longer SoLar schedule (30 + 30);
#      each is stopped after LIMIT seconds and resumable with the same command (--resume).
# Usage (repository root, pllzoo installed): OUT=dir DATA_DIR=... LIMIT=420 benchmarks/gpu/run.sh
# Everything lands in $OUT: summary.txt, pytest_cuda.log and runs.tgz (logs, results, no checkpoints).
set -uo pipefail
out="${OUT:?set OUT}"; data="${DATA_DIR:-../shared/data}"; limit="${LIMIT:-420}"
work="${WORK:-benchmarks/gpu/results}"; mkdir -p "$out" "$work/logs"
export PYTHONUNBUFFERED=1
{ date -u; nvidia-smi -L; python3 -c "import torch, torchvision; print(torch.__version__, torchvision.__version__, torch.cuda.get_device_name())"; } > "$work/logs/env.txt" 2>&1
python3 -c "
from pathlib import Path; from pllzoo.data.jpeg import load_jpeg_archive
for f in ('train_jpeg.npz', 'test_jpeg.npz'): load_jpeg_archive(Path('$data') / 'cifar10_jpeg' / f)
" >> "$work/logs/env.txt" 2>&1  # decode once; the runs below share the cache

OMP_NUM_THREADS=2 timeout 60 python3 benchmarks/step_cost.py --device cuda --data-dir "$data" --steps 24 \
  --out "$work/step_cost_cuda.json" > "$work/logs/step_cost.log" 2>&1
echo "step_cost rc $?" >> "$work/logs/summary.txt"

common=(--dataset cifar10lt --data-dir "$data" --phi 0.5 --imb 100 --seeds 1 --device cuda --resume
        --hp train.lr=0.05 --hp train.schedule=cosine --hp train.weight_decay=5e-4)
solar=(--hp solar:estimator.est_epochs=20 --hp solar:selection.warmup_epochs=10 --hp solar:loss.warmup_epochs=10)
launch() {  # name, bench args...: a time-limited background run with its own log
  local name=$1; shift
  OMP_NUM_THREADS=2 timeout "$limit" python3 -m pllzoo bench "$@" --out "$work/$name" > "$work/logs/$name.log" 2>&1 &
}
launch resnet18-solar --methods solar --epochs 30 "${common[@]}" "${solar[@]}" --hp train.model=resnet18
launch resnet18-proden --methods proden --epochs 30 "${common[@]}" --hp train.model=resnet18 \
  --hp proden:loss.cr=false --hp proden:loss.mixup=false
launch resnet18-cc --methods cc --epochs 30 "${common[@]}" --hp train.model=resnet18
launch cnn-solar-30-30 --methods solar --epochs 30 "${common[@]}" "${solar[@]}" --hp train.model=cnn \
  --hp solar:estimator.est_epochs=30

timeout 180 python3 -m pytest tests/test_cuda.py -q -p no:cacheprovider -o addopts="" > "$out/pytest_cuda.log" 2>&1
echo "pytest rc $?" >> "$work/logs/summary.txt"
OMP_NUM_THREADS=2 timeout 180 python3 -m pllzoo bench --methods solar,proden,cc,lws,mse,exp,valen,pico --dataset cifar10lt --data-dir "$data" \
  --subset 1024 --epochs 2 --seeds 1 --device cuda --hp train.model=resnet18 --hp solar:estimator.est_epochs=1 \
  --out "$work/smoke" > "$work/logs/smoke.log" 2>&1
echo "smoke rc $?" >> "$work/logs/summary.txt"
wait
for f in "$work"/logs/*.log; do echo "== $f"; tail -n 4 "$f"; done >> "$work/logs/summary.txt"
cp "$work/logs/summary.txt" "$out/summary.txt"
tar czf "$out/runs.tgz" --exclude=checkpoint.pt "$work"
