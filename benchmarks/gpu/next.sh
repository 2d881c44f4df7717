#!/usr/bin/env bash
# Issue 11's remaining device steps, for the next session with a lent GPU (prepare .devdata as in speed.sh).
#   OUT=$OUT bash benchmarks/gpu/next.sh session          the one call to start a session with (timeout_s 600): the
#       paper run until UNTIL seconds after the start (default 575; SPEED=1 runs `speed` first, TESTS=1 a short
#       CUDA test of what changed since the last device session, its summary in env.txt); then
#       `OUT=$OUT MINUTES=m ... paper` on the warm machine with the device minutes left (fifth H100 session: 9 min
#       in call 1 trained 100 + 104 epochs after the speed step, 3 min in call 2 118 epochs). Up to eight files come
#       back: env.txt, paper.log, finals.tgz (when a run finished), run.tgz, carry.json, the checkpoint's three parts;
#       SPEED=1 adds speed.tgz, one too many when a run finishes in the call (then run `speed` in a call of its own).
#   OUT=$OUT bash benchmarks/gpu/next.sh speed            (~4 min) gpu_speed.py for solar and proden under CUDA graphs
#       (fused SGD and the chunk-frozen Sinkhorn since the fourth session; dynamo's recompiles logged), then the
#       CUDA tests of what changed; its files in speed.tgz.
#   OUT=$OUT MINUTES=8 bash benchmarks/gpu/next.sh paper   issue 17's paper runs in order (paper_queue.py; QUEUE=a,b
#       to name others; default row (a) but PiCO, which cannot be carried: c10-phi0.5-g100-solar, -proden, -cc, seed 1, the recipes of benchmarks/paper/README.md) in
#       --time-limit parts of the MINUTES left: the carried run resumes, a finished run goes into finals.tgz (its
#       folder without checkpoint, NAME/) and the next starts; the run the limit stops (exit 75: call again at once on
#       the warm machine; results/ is ignored, so run folders and whole checkpoints stay there between calls) is
#       packed for the next session (carry_run.py, label NAME: run.tgz, the checkpoint without SGD momentum in parts
#       of 15.9 MiB, carry.json). COMPILE=none|reduce-overhead (default reduce-overhead: SoLar 1.3-1.5 s an epoch on
#       an H100 with its evaluation, fifth H100 session). Here: copy run.tgz, carry.json and ckpt.part* into
#       .paperrun/ and commit it (tracked: only what main holds reaches the next session, whose checkout is laid
#       anew; it travels with the tree): a fresh machine unpacks it and resumes with momentum restarted
#       (benchmarks/momentum-restart/ measures what that does). Commit the logs with the command. finals.tgz: each NAME/ into benchmarks/paper/results/NAME/ (so the
#       queue skips it next time), then `python benchmarks/paper/run.py table`.
set -uo pipefail
out="${OUT:?set OUT}"; data="${DATA_DIR:-.devdata}"; what="${1:?session, speed or paper}"
# the reply's output_tail: what happened (env.txt), so that a failed call does not read as an empty success
trap 'tail -n 30 "$out/env.txt" 2>/dev/null' EXIT
case "$what" in session|speed|paper) ;; *) echo "next.sh: '$what' is none of session, speed, paper" > "$out/env.txt"; exit 2;; esac
export PYTHONUNBUFFERED=1
# a new checkout has no .devdata (ignored): without it every run would fail after the install, so stop at once
[ -f "$data/cifar10_jpeg/train_jpeg.npz" ] || {
  echo "next.sh: no CIFAR copy in $data; make it here (python benchmarks/gpu/slim_cifar.py --data-dir ../shared/data --out .devdata) and carry it" > "$out/env.txt"; exit 2; }
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
if [ "$what" = session ] && [ "${TESTS:-0}" = 1 ]; then
  # ~1-2 min: the CUDA paths of the code changed since the last device session (PiCO's batched key view, the
  # input guards and checks of the step); the summary goes into env.txt (no file of its own: 8 files come back)
  timeout 150 python3 -m pytest -q -o addopts="" -p no:cacheprovider tests/unit/test_augment_batched.py \
    tests/test_cuda.py -k "views or bf16-solar] or bf16-pico] or bf16-lws] or bf16-proden]" > "$out/pytest.log" 2>&1
  { echo "tests rc $?"; tail -n 25 "$out/pytest.log"; } >> "$out/env.txt"; rm -f "$out/pytest.log"
fi
if [ "$what" = session ]; then
  MINUTES=$(awk -v s="$SECONDS" -v u="${UNTIL:-575}" 'BEGIN { printf "%.2f", (u - s - 35) / 60 }')  # 35 s to pack
fi
# the queue starts a run with 2 minutes left after its own start-up (paper_queue.MIN_MINUTES): ask for 2.5
if [ "$what" != speed ]; then
  awk -v m="${MINUTES:-8}" 'BEGIN { exit !(m >= 2.5) }' || {
    echo "paper: skipped, ${MINUTES:-8} min left (2.5 needed)" >> "$out/env.txt"; exit 0; }
fi
if [ "$what" = speed ]; then
  :
else
  # issue 17's runs in order (paper_queue.py): the carried one resumes, a finished one goes into finals.tgz and
  # the next starts, the one the time limit stops is packed for the next session (run.tgz, carry.json, 3 parts)
  python3 benchmarks/gpu/paper_queue.py --dest "$out" --minutes "${MINUTES:-8}" --grace-s 30 ${QUEUE:+--queue "$QUEUE"} \
    -- --device cuda --data-dir "$data" --offline --hp train.compile="${COMPILE:-reduce-overhead}" \
    >> "$out/env.txt" 2>&1
  rc=$?
  echo "paper rc $rc" >> "$out/env.txt"
  [ "$rc" = 75 ] && rc=0  # stopped by the time limit and packed: the expected end of a call
  exit "$rc"
fi
