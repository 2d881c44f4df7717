#!/usr/bin/env bash
# Companion to run.sh: PRODEN under the SoLar protocol (consistency + mixup on, the baselines' default
# on images), same data, model and 40-epoch schedule. Writes results-proden-protocol/ next to this file.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
data="${DATA_DIR:-$here/../../../shared/data}"
pllzoo bench --methods proden --dataset cifar10lt --data-dir "$data" --phi 0.5 --imb 100 \
  --seeds 1 --epochs 40 --device cpu \
  --hp train.model=cnn --hp train.lr=0.05 --hp train.schedule=cosine --hp train.weight_decay=5e-4 \
  --out "$here/results-proden-protocol" "$@"
