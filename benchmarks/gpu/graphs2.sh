#!/usr/bin/env bash
# Second call of the third H100 session: the CUDA DDP test after its fix, and where SoLar's graphed step spends its
# time (benchmarks/gpu/profile_step.py), against PRODEN's.   OUT=$OUT bash benchmarks/gpu/graphs2.sh
set -uo pipefail
out="${OUT:?set OUT}"; data="${DATA_DIR:-.devdata}"
export PYTHONUNBUFFERED=1
python3 -m pip show -q pllzoo-ltpll 2>/dev/null || python3 -m pip install -q --no-deps --no-build-isolation \
  -e . -e plugins/solar -e plugins/baselines -e plugins/ltpll > "$out/install.log" 2>&1
{ date -u; nvidia-smi -L; } > "$out/env.txt" 2>&1
step() { local name=$1 limit=$2; shift 2; local t0=$SECONDS
  timeout "$limit" "$@" > "$out/$name.log" 2>&1; echo "$name rc $? $((SECONDS - t0)) s" >> "$out/env.txt"; }
step pytest_cuda 110 python3 -m pytest -q -o addopts="" -p no:cacheprovider -rs \
  tests/test_distributed.py::test_two_processes_on_one_gpu_equal_one_process
step profile_solar 130 python3 benchmarks/gpu/profile_step.py --data-dir "$data" --method solar \
  --hp train.compile=reduce-overhead
step profile_proden 90 python3 benchmarks/gpu/profile_step.py --data-dir "$data" --method proden \
  --hp train.compile=reduce-overhead
