#!/usr/bin/env bash
# Issue 11's remaining device steps, for the next session with a lent GPU (prepare .devdata as in speed.sh).
#   OUT=$OUT bash benchmarks/gpu/next.sh session          the one call to start a session with (timeout_s 600): the
#       paper run until UNTIL seconds after the start (default 575; SPEED=1 runs `speed` first); then
#       `OUT=$OUT MINUTES=m ... paper` on the warm machine with the device minutes left (fifth H100 session: 9 min
#       in call 1 trained 100 + 104 epochs after the speed step, 3 min in call 2 118 epochs). Seven files come back
#       (eight with SPEED=1): env.txt, paper.log, run.tgz, carry.json, the checkpoint's three parts (speed.tgz).
#   OUT=$OUT bash benchmarks/gpu/next.sh speed            (~4 min) gpu_speed.py for solar and proden under CUDA graphs
#       (fused SGD and the chunk-frozen Sinkhorn since the fourth session; dynamo's recompiles logged), then the
#       CUDA tests of what changed; its files in speed.tgz.
#   OUT=$OUT MINUTES=8 bash benchmarks/gpu/next.sh paper   the released c10-phi0.5-g100-solar recipe, seed 1, in
#       --time-limit parts (exit 75: call again at once on the warm machine; results/ is ignored, so the run folder
#       and its whole checkpoint stay there between calls); COMPILE=none|reduce-overhead (default reduce-overhead:
#       SoLar 1.3-1.5 s an epoch on an H100 with its evaluation, fifth H100 session, so 100 + 1000 epochs ~27 min,
#       more than one session's 15 device-minutes). Each call ends by packing the run for the next session (carry_run.py: run.tgz, the
#       checkpoint without SGD momentum in parts of 15.9 MiB, carry.json) into $OUT; here, copy them into .paperrun/
#       (ignored by .gitignore) and name .paperrun in `carry` next session: a fresh machine
#       unpacks it and resumes with momentum restarted (benchmarks/momentum-restart/ measures what that does).
#       Commit run.tgz's small files (no checkpoint) with the command.
#       When it ends: the run folder (without checkpoint.pt) into benchmarks/paper/results/ and
#       `python benchmarks/paper/run.py table`.
set -uo pipefail
out="${OUT:?set OUT}"; data="${DATA_DIR:-.devdata}"; what="${1:?speed or paper}"
export PYTHONUNBUFFERED=1
# from /: `python3 -c` in the repository root imports ./pllzoo and skipped the install (fifth H100 session's call 1)
(cd / && python3 -c "import pllzoo, pllzoo_solar, pllzoo_baselines, pllzoo_ltpll") 2>/dev/null || \
  python3 -m pip install -q --no-deps --no-build-isolation -e . -e plugins/solar -e plugins/baselines \
    -e plugins/ltpll > "$out/env.txt" 2>&1
{ date -u; nvidia-smi -L; python3 -c "import torch; print(torch.__version__, torch.cuda.get_device_name())"; } >> "$out/env.txt" 2>&1
speed() {
  local s="$out/s"; mkdir -p "$s"
  TORCH_LOGS=recompiles timeout 170 python3 benchmarks/gpu_speed.py --device cuda --data-dir "$data" --epochs 4 --warmup 2 --paths device \
    --methods solar,proden --hp train.compile=reduce-overhead --out "$s/speed_graphs.json" > "$s/speed_graphs.log" 2>&1
  echo "speed rc $?" >> "$out/env.txt"
  timeout 100 python3 -m pytest -q -o addopts="" -p no:cacheprovider tests/test_cuda.py tests/test_sync_free.py \
    tests/unit/test_sinkhorn.py -k "solar or proden or sinkhorn or sync" > "$s/pytest_cuda.log" 2>&1
  echo "pytest rc $?" >> "$out/env.txt"
  tar czf "$out/speed.tgz" -C "$out" s && rm -rf "$s"
}
if [ "$what" = speed ] || { [ "$what" = session ] && [ "${SPEED:-0}" = 1 ]; }; then
  speed
fi
if [ "$what" = session ]; then
  MINUTES=$(( (${UNTIL:-575} - SECONDS - 20) / 60 ))
  [ "$MINUTES" -ge 2 ] || exit 0
fi
if [ "$what" = speed ]; then
  :
else
  compile="${COMPILE:-reduce-overhead}"; minutes="${MINUTES:-8}"; run=results/paper-c10-solar
  if [ ! -d "$run" ] && [ -f .paperrun/carry.json ]; then  # a fresh machine: the run carried from the last session
    python3 benchmarks/gpu/carry_run.py unpack .paperrun "$run" >> "$out/env.txt" 2>&1
  fi
  python3 benchmarks/paper/run.py run c10-phi0.5-g100-solar --seeds 1 --out "$run" \
    --device cuda --data-dir "$data" --offline --time-limit "$minutes" --hp train.compile="$compile" \
    > "$out/paper.log" 2>&1
  echo "paper rc $?" >> "$out/env.txt"
  python3 benchmarks/gpu/carry_run.py pack "$run" "$out" --part-mib 15.9 >> "$out/env.txt" 2>&1  # run.tgz, 3 ckpt.part*, carry.json
fi
