#!/usr/bin/env bash
# Calls 2 and 3 of the fourth H100 session (issue 11): does every registered method train under CUDA graphs
# (train.compile=reduce-overhead, SoLar's mixup padded)?  Then throughput counted at the encoder (PiCO's passes).
#   OUT=$OUT bash benchmarks/gpu/graphs_all.sh                      call 2: every method; pico, solar speed
#   OUT=$OUT K="records or pico" SPEED=pico T_SPEED=60 bash benchmarks/gpu/graphs_all.sh   call 3, after the fix
source "$(dirname "$0")/device_setup.sh"
step pytest_graphs "${T_TEST:-290}" python3 -m pytest -q -o addopts="" -p no:cacheprovider -rs \
  "tests/test_cuda.py::test_method_trains_under_cuda_graphs" -k "${K:-}"
step speed "${T_SPEED:-75}" python3 benchmarks/gpu_speed.py --device cuda --data-dir "$data" --epochs 4 --warmup 2 \
  --paths device --methods "${SPEED:-pico,solar}" --hp train.compile=reduce-overhead --out "$out/speed.json"
