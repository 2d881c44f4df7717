#!/usr/bin/env bash
# Issue 11's remaining device steps, for the next session with a lent GPU (prepare .devdata as in speed.sh).
#   OUT=$OUT bash benchmarks/gpu/next.sh speed            (~4 min) CUDA graphs vs eager, same process and machine:
#       gpu_speed.py for solar, proden, cc, pico with --hp train.compile=reduce-overhead, and solar, proden eager;
#       then --jobs 1 vs --jobs 3 (proden, 3 seeds, 4 epochs) wall time; then the CUDA tests.
#   OUT=$OUT MINUTES=8 bash benchmarks/gpu/next.sh paper   the released c10-phi0.5-g100-solar recipe, seed 1, in
#       --time-limit parts (exit 75: call again at once on the warm machine; results/ is ignored, so the run folder
#       and its whole checkpoint stay there between calls); COMPILE=none|reduce-overhead (default reduce-overhead:
#       SoLar 1.37 s an epoch on an H100, fourth session, so 100 + 1000 epochs ~25 min, more than one session's
#       15 device-minutes). Each call ends by packing the run for the next session (carry_run.py: run.tgz, the
#       checkpoint without SGD momentum in parts of 15 MiB, carry.json) into $OUT; here, copy them into .paperrun/
#       (ignored by .gitignore) and name .paperrun in `carry` next session: a fresh machine
#       unpacks it and resumes with momentum restarted (benchmarks/momentum-restart/ measures what that does).
#       Commit run.tgz's small files (no checkpoint) with the command.
#       When it ends: the run folder (without checkpoint.pt) into benchmarks/paper/results/ and
#       `python benchmarks/paper/run.py table`.
set -uo pipefail
out="${OUT:?set OUT}"; data="${DATA_DIR:-.devdata}"; what="${1:?speed or paper}"
export PYTHONUNBUFFERED=1
python3 -c "import pllzoo" 2>/dev/null || \
  python3 -m pip install -q --no-deps --no-build-isolation -e . -e plugins/solar -e plugins/baselines > "$out/install.log" 2>&1
{ date -u; nvidia-smi -L; python3 -c "import torch; print(torch.__version__, torch.cuda.get_device_name())"; } > "$out/env.txt" 2>&1
if [ "$what" = speed ]; then
  timeout 150 python3 benchmarks/gpu_speed.py --device cuda --data-dir "$data" --epochs 5 --warmup 2 --paths device \
    --hp train.compile=reduce-overhead --out "$out/speed_graphs.json" > "$out/speed_graphs.log" 2>&1
  timeout 60 python3 benchmarks/gpu_speed.py --device cuda --data-dir "$data" --epochs 4 --warmup 2 --paths device \
    --methods solar,proden --out "$out/speed_eager.json" > "$out/speed_eager.log" 2>&1
  for j in 1 3; do
    t0=$SECONDS
    timeout 100 python3 -m pllzoo bench --methods proden --dataset cifar10lt --data-dir "$data" --phi 0.5 --imb 100 \
      --seeds 1,2,3 --epochs 4 --hp train.model=resnet18 --device cuda --jobs $j --out "results/jobs$j" \
      > "$out/jobs$j.log" 2>&1
    echo "jobs $j: rc $? $((SECONDS - t0)) s" >> "$out/jobs.txt"
  done
  timeout 100 python3 -m pytest -q -o addopts="" -p no:cacheprovider tests/test_cuda.py tests/test_sync_free.py \
    tests/unit/test_augment_batched.py > "$out/pytest_cuda.log" 2>&1
  echo "pytest rc $?" >> "$out/env.txt"
else
  compile="${COMPILE:-reduce-overhead}"; minutes="${MINUTES:-8}"; run=results/paper-c10-solar
  if [ ! -d "$run" ] && [ -f .paperrun/carry.json ]; then  # a fresh machine: the run carried from the last session
    python3 benchmarks/gpu/carry_run.py unpack .paperrun "$run" >> "$out/env.txt" 2>&1
  fi
  python3 benchmarks/paper/run.py run c10-phi0.5-g100-solar --seeds 1 --out "$run" \
    --device cuda --data-dir "$data" --offline --time-limit "$minutes" --hp train.compile="$compile" \
    > "$out/paper.log" 2>&1
  echo "paper rc $?" >> "$out/env.txt"
  python3 benchmarks/gpu/carry_run.py pack "$run" "$out" >> "$out/env.txt" 2>&1  # run.tgz, ckpt.part*, carry.json
fi
