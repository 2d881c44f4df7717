#!/usr/bin/env bash
# One device call (issue 14 + issue 11's open CUDA-graphs question), on a lent GPU, from the repository root:
#   OUT=$OUT bash benchmarks/gpu/ltpll.sh        (prepare .devdata as in speed.sh and carry it)
# 1. CUDA tests of the LT-PLL methods (CORR, RECORDS' recipes, HTC): tests/test_cuda.py, tests/test_sync_free.py
# 2. CUDA graphs with two network calls before one backward (the trainer's SoLar/CORR step), with and without
#    cudagraph trees (benchmarks/gpu/model_limit.py)
# 3. The composition study (benchmarks/composition/): the CIFAR-10-LT CPU-tier recipe (small CNN, 40 epochs, cosine,
#    lr 0.05, wd 5e-4), phi 0.5, gamma 100, seed 1, every method on this one device, --jobs 4
source "$(dirname "$0")/device_setup.sh"
timeout "${T_TEST:-70}" python3 -m pytest -q -o addopts="" -p no:cacheprovider tests/test_cuda.py tests/test_sync_free.py \
  -k "corr or records or htc" > "$out/pytest_cuda.log" 2>&1
echo "pytest rc $?" >> "$out/env.txt"
timeout "${T_GRAPHS:-80}" python3 benchmarks/gpu/model_limit.py \
  --runs reduce-overhead:256:2,reduce-overhead:256:2:notrees > "$out/graphs.log" 2>&1
echo "graphs rc $?" >> "$out/env.txt"
t0=$SECONDS
timeout "${T_STUDY:-250}" python3 -m pllzoo bench \
  --methods 'corr-records+selection=solar.classwise,proden-records,cc-records,proden,cc,corr,corr-records,htc,solar' \
  --dataset cifar10lt --data-dir "$data" --phi 0.5 --imb 100 --seeds 1 --epochs 40 --device cuda --jobs 4 \
  --hp train.model=cnn --hp train.lr=0.05 --hp train.schedule=cosine --hp train.weight_decay=5e-4 \
  --hp proden:loss.cr=false --hp proden:loss.mixup=false \
  --hp proden-records:loss.cr=false --hp proden-records:loss.mixup=false \
  --hp solar:estimator.est_epochs=20 --hp solar:selection.warmup_epochs=10 --hp solar:loss.warmup_epochs=10 \
  --hp 'corr-records+selection=solar.classwise:selection.warmup_epochs=10' --hp htc:loss.ramp_epochs=10 \
  --out results/composition > "$out/study.log" 2>&1
echo "study rc $? $((SECONDS - t0)) s" >> "$out/env.txt"
tar czf "$out/composition.tgz" --exclude=checkpoint.pt results/composition
