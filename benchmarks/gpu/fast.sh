#!/usr/bin/env bash
# One device call (fourth H100 session, issue 11): SoLar's mixup at a fixed shape (train.mixup_rows=padded, masked
# BatchNorm: the whole step's network passes replay CUDA graphs) and the views of 16 batches per call
# (train.view_batches, the CUDA default), against the previous default path in the same process order, same machine.
# From the repository root with .devdata carried (benchmarks/gpu/slim_cifar.py):   OUT=$OUT bash benchmarks/gpu/fast.sh
# 1. gpu_speed.py, CIFAR-10-LT phi 0.5 gamma 100, ResNet-18: solar, proden, cc, pico with train.compile=reduce-overhead
#    (mixup_rows auto = padded, view_batches auto = 16)
# 2. the same, eager, for solar and proden: (a) the previous defaults (view_batches=1, exact mixup), (b) views grouped
# 3. CUDA tests of the padded pass (equal to the exact pass on CUDA; SoLar under CUDA graphs) and of the compile option
# 4. where the new graphed SoLar step spends its time (profile_step.py)
source "$(dirname "$0")/device_setup.sh"
speed() {  # NAME LIMIT METHODS [--hp ...]
  local name=$1 limit=$2 methods=$3; shift 3
  step "$name" "$limit" python3 benchmarks/gpu_speed.py --device cuda --data-dir "$data" --epochs 4 --warmup 2 \
    --paths device --methods "$methods" "$@" --out "$out/$name.json"
}
speed speed_graphs "${T_GRAPHS:-200}" solar,proden,cc,pico --hp train.compile=reduce-overhead
speed speed_eager_before 60 solar,proden --hp train.view_batches=1 --hp train.mixup_rows=exact
speed speed_eager_grouped 60 solar,proden --hp train.view_batches=16
step pytest_cuda 60 python3 -m pytest -q -o addopts="" -p no:cacheprovider -rs tests/test_padded_mixup.py \
  tests/unit/test_masked_bn.py tests/test_compile_option.py
step profile_solar 70 python3 benchmarks/gpu/profile_step.py --data-dir "$data" --method solar \
  --hp train.compile=reduce-overhead
