#!/usr/bin/env bash
# CIFAR-10-LT CPU tier (issue 3): phi=0.5, gamma=100, JPEG CIFAR-10 from ../shared/data, small CNN,
# a short cosine schedule that fits a 2-core machine.
#   SEEDS (default 1), PHI (default 0.5), METHODS (default solar,proden), EPOCHS (final stage, default 40),
#   EST_EPOCHS (solar's pre-estimation, default 20), OUT (default results)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
out="${OUT:-results}"; [[ "$out" = /* ]] || out="$here/$out"  # OUT: absolute, or under this folder
data="${DATA_DIR:-$here/../../../shared/data}"
methods="${METHODS:-solar,proden}"
per_method=()  # each method's flags (bench refuses a METHOD: prefix that is not in --methods)
for m in ${methods//,/ }; do
  case "$m" in
    solar) per_method+=(--hp solar:estimator.est_epochs="${EST_EPOCHS:-20}") ;;&
    solar*) per_method+=(--hp "$m":selection.warmup_epochs=10 --hp "$m":loss.warmup_epochs=10) ;;
    proden) per_method+=(--hp proden:loss.cr=false --hp proden:loss.mixup=false) ;;
    htc) per_method+=(--hp htc:loss.ramp_epochs=10) ;;  # HTC's 50-epoch ramps of 800, as SoLar's above
    proden-records) per_method+=(--hp proden-records:loss.cr=false --hp proden-records:loss.mixup=false) ;;  # as proden
    *+selection=solar.classwise) per_method+=(--hp "$m":selection.warmup_epochs=10) ;;  # SoLar's selection ramp
  esac
done
pllzoo bench --methods "$methods" --dataset cifar10lt --data-dir "$data" --phi "${PHI:-0.5}" --imb 100 \
  --seeds "${SEEDS:-1}" --epochs "${EPOCHS:-40}" --device cpu \
  --hp train.model=cnn --hp train.lr=0.05 --hp train.schedule=cosine --hp train.weight_decay=5e-4 \
  "${per_method[@]}" --out "$out" "$@"
