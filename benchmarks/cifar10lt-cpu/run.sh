#!/usr/bin/env bash
# CIFAR-10-LT CPU tier (issue 3): phi=0.5, gamma=100, JPEG CIFAR-10 from ../shared/data, small CNN,
# a short cosine schedule that fits a 2-core machine.
#   SEEDS (default 1), PHI (default 0.5), METHODS (default solar,proden), EPOCHS (final stage, default 40), EST_EPOCHS (SoLar pre-estimation, default 20), OUT (default results)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
data="${DATA_DIR:-$here/../../../shared/data}"
pllzoo bench --methods "${METHODS:-solar,proden}" --dataset cifar10lt --data-dir "$data" --phi "${PHI:-0.5}" --imb 100 \
  --seeds "${SEEDS:-1}" --epochs "${EPOCHS:-40}" --device cpu \
  --hp train.model=cnn --hp train.lr=0.05 --hp train.schedule=cosine --hp train.weight_decay=5e-4 \
  --hp solar:estimator.est_epochs="${EST_EPOCHS:-20}" --hp solar:selection.warmup_epochs=10 \
  --hp solar:loss.warmup_epochs=10 --hp proden:loss.cr=false --hp proden:loss.mixup=false \
  --out "$here/${OUT:-results}" "$@"
