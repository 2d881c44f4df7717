#!/usr/bin/env bash
# SoLar on the CIFAR-10-LT CPU tier (../cifar10lt-cpu/run.sh, φ = 0.5), its SGD momentum restarted at a few
# epoch boundaries the way a run carried between device sessions restarts it (benchmarks/gpu/carry_run.py):
# stop the run with SIGTERM (it finishes the epoch and checkpoints), drop the momentum buffers from the
# checkpoint (pllzoo.checkpoint.slim_checkpoint), resume with --resume.  Compare with the recorded
# uninterrupted runs of the same seeds: ../cifar10lt-cpu/results-phi0.5 (tables.sh here).
#   SEED (default 1), AT: the epochs (both stages counted) after which the momentum restarts (default "13 31 46":
#   once in the 20-epoch pre-estimation, twice in the 40-epoch final stage). The stop is asked for as epoch AT
#   starts (its log holds AT - 1 records); the bench finishes that epoch, checkpoints and exits.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
seed="${SEED:-1}"; out="$here/results-s$seed"
train() { METHODS=solar SEEDS="$seed" PHI=0.5 OUT="../momentum-restart/results-s$seed" \
          bash "$here/../cifar10lt-cpu/run.sh" --resume --threads 1 "$@"; }
epochs_done() { cat "$out"/runs/*/log.jsonl 2>/dev/null | wc -l; }
for n in ${AT:-13 31 46}; do
  if [ "$(epochs_done)" -ge "$n" ]; then continue; fi
  train & pid=$!
  while [ "$(epochs_done)" -lt "$((n - 1))" ] && kill -0 "$pid" 2>/dev/null; do sleep 1; done
  pkill -TERM -f -- "momentum-restart/results-s$seed" || true  # the bench finishes its epoch, checkpoints, exits 143
  wait "$pid" || true
  python3 -c "import sys; from pllzoo.checkpoint import slim_checkpoint; print('slim: %d -> %d bytes' % slim_checkpoint(sys.argv[1]))" \
    "$out"/runs/*/checkpoint.pt
  echo "momentum restarts after epoch $(epochs_done)"
done
train
