#!/usr/bin/env bash
# One device call (third H100 session; issue 11's CUDA-graphs step and issue 15's item 5), from the repository root,
# with .devdata carried (benchmarks/gpu/slim_cifar.py, as in speed.sh):
#   OUT=$OUT bash benchmarks/gpu/graphs.sh
# 1. model_limit.py: two graphed calls + one data-sized call before one backward, the data-sized call compiled
#    (the second session's failing SoLar step) and eager (pllzoo.devices.compile_model's size dispatch)
# 2. gpu_speed.py, CIFAR-10-LT phi 0.5 gamma 100, ResNet-18: solar, corr, proden with train.compile=reduce-overhead,
#    then the same three eager (the baseline, same process order, same machine)
# 3. CUDA tests: two gloo processes on one GPU = one process (7 methods + SyncBatchNorm), the compile option
# 4. torchrun --nproc-per-node 1 --device cuda (the launcher path on a GPU machine)
source "$(dirname "$0")/device_setup.sh"
step graphs 80 python3 benchmarks/gpu/model_limit.py --runs reduce-overhead:256:2:dyn,reduce-overhead:256:2:dyneager
step speed_graphs "${T_GRAPHS:-200}" python3 benchmarks/gpu_speed.py --device cuda --data-dir "$data" --epochs 4 \
  --warmup 2 --paths device --methods solar,corr,proden --hp train.compile=reduce-overhead --out "$out/speed_graphs.json"
step speed_eager 80 python3 benchmarks/gpu_speed.py --device cuda --data-dir "$data" --epochs 4 --warmup 2 \
  --paths device --methods solar,corr,proden --out "$out/speed_eager.json"
step pytest_cuda 100 python3 -m pytest -q -o addopts="" -p no:cacheprovider -rs \
  tests/test_distributed.py::test_two_processes_on_one_gpu_equal_one_process tests/test_compile_option.py
step torchrun1 40 torchrun --nproc-per-node 1 -m pllzoo bench --methods proden,solar --dataset synthetic-lt \
  --subset 512 --epochs 2 --device cuda --hp solar:estimator.est_epochs=1 --out results/torchrun1
