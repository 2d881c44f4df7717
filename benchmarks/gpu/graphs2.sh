#!/usr/bin/env bash
# Second call of the third H100 session: the CUDA DDP test after its fix, and where SoLar's graphed step spends its
# time (benchmarks/gpu/profile_step.py), against PRODEN's.   OUT=$OUT bash benchmarks/gpu/graphs2.sh
source "$(dirname "$0")/device_setup.sh"
step pytest_cuda 110 python3 -m pytest -q -o addopts="" -p no:cacheprovider -rs \
  tests/test_distributed.py::test_two_processes_on_one_gpu_equal_one_process
step profile_solar 130 python3 benchmarks/gpu/profile_step.py --data-dir "$data" --method solar \
  --hp train.compile=reduce-overhead
step profile_proden 90 python3 benchmarks/gpu/profile_step.py --data-dir "$data" --method proden \
  --hp train.compile=reduce-overhead
